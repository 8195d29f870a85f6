#include "base/commands.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "base/banned.h"

/*
 * Programs that live in libexec but are not commands: the guest's init, and
 * the helper QEMU runs for each guest connection.
 */
static const char *const internal[] = {"aibox-init", "aibox-connect"};

static int is_command(const char *name)
{
	if (strncmp(name, "aibox-", 6) != 0 || strchr(name, '.'))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(internal); i++)
		if (!strcmp(name, internal[i]))
			return 0;
	return 1;
}

int command_path(const char *name, struct buf *path)
{
	struct stat st;

	buf_reset(path);
	buf_addf(path, "%s/%s", libexec_dir(), name);
	return stat(path->buf, &st) == 0 && S_ISREG(st.st_mode) && access(path->buf, X_OK) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void commands_list(struct strvec *out)
{
	DIR *d = opendir(libexec_dir());
	struct dirent *de;
	struct buf path = BUF_INIT;
	size_t first = out->nr;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (is_command(de->d_name) && command_path(de->d_name, &path))
			strvec_push(out, de->d_name);
	closedir(d);
	buf_release(&path);
	qsort(out->v + first, out->nr - first, sizeof(*out->v), cmp_str);
}
