/*
 * The guest's git config: values quoted for a config file, and the rewrite
 * of the git remotes to the broker (gitconfig.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "gitconfig.h"
#include "task_int.h"
#include "base/banned.h"

#define GIT_BROKER_URL "http://git.aibox.internal/"

void gitconfig_value(struct buf *out, const char *s)
{
	buf_addch(out, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addch(out, '\\');
		buf_addch(out, *s);
	}
	buf_addch(out, '"');
}

int git_remotes_write(const char *path, const char *const *remotes, size_t nremotes,
                      const char *proxy, struct buf *err)
{
	struct buf b = BUF_INIT;
	int fd, ret = 0;

	if (!nremotes)
		return 0;
	for (size_t i = 0; i < nremotes; i++) {
		const char *u = remotes[i];
		size_t n = strlen(u);

		while (n > 8 && u[n - 1] == '/')
			n--;
		buf_addf(&b, "[url \"" GIT_BROKER_URL "%zu/\"]\n\tinsteadOf = %.*s\n", i, (int)n,
		         u);
		if (n > 12 && !strncmp(u + n - 4, ".git", 4))
			buf_addf(&b, "\tinsteadOf = %.*s\n", (int)(n - 4), u);
		else
			buf_addf(&b, "\tinsteadOf = %.*s.git\n", (int)n, u);
	}
	buf_addstr(&b, "[http \"" GIT_BROKER_URL "\"]\n\tproxy = ");
	gitconfig_value(&b, proxy);
	buf_addch(&b, '\n');
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
	} else {
		if (write_all(fd, b.buf, b.len) < 0) {
			ret = -errno;
			buf_addf(err, "cannot write '%s': %s", path, strerror(errno));
		}
		close(fd);
	}
	buf_release(&b);
	return ret;
}
