/* Secrets out of the environment and over pipes (secret.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

extern char **environ;

#include "base/buf.h"
#include "base/secret.h"
#include "base/banned.h"

int secret_take_env(const char *name, struct buf *value)
{
	size_t n = strlen(name);
	int found = 0;

	/*
	 * Every entry of that name, not only the one getenv() finds: an
	 * environment may hold a name twice.  environ's strings are the block
	 * itself for what we inherited: this wipes what /proc shows.
	 */
	for (char **e = environ; *e; e++) {
		char *v;

		if (strncmp(*e, name, n) || (*e)[n] != '=')
			continue;
		v = *e + n + 1;
		if (!found) {
			buf_grow(value, strlen(v));
			buf_addstr(value, v);
			found = 1;
		}
		explicit_bzero(v, strlen(v));
	}
	if (found)
		unsetenv(name);
	return found;
}

int secret_pipe(const void *data, size_t len)
{
	int p[2], ret;

	if (len > SECRET_PIPE_MAX)
		return -E2BIG;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/*
	 * Writing no more than the capacity into an empty pipe never blocks.
	 * The capacity is 64 KiB, or one page for a user over
	 * pipe-user-pages-soft: make sure.
	 */
	if (len > 4096 && fcntl(p[1], F_GETPIPE_SZ) < (int)len &&
	    fcntl(p[1], F_SETPIPE_SZ, (int)len) < (int)len) {
		ret = errno ? -errno : -E2BIG;
		close(p[0]);
		close(p[1]);
		return ret;
	}
	ret = write_all(p[1], data, len);
	close(p[1]);
	if (ret < 0) {
		close(p[0]);
		return ret;
	}
	return p[0];
}

ssize_t secret_read_fd(int fd, struct buf *out, size_t max)
{
	size_t start = out->len;
	ssize_t ret;

	buf_grow(out, max + 1);
	for (;;) {
		ssize_t n = read(fd, out->buf + out->len, max + 1 - (out->len - start));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0) {
			ret = (ssize_t)(out->len - start);
			break;
		}
		buf_setlen(out, out->len + (size_t)n);
		if (out->len - start > max) {
			ret = -EFBIG;
			break;
		}
	}
	close(fd);
	if (ret < 0) {
		buf_wipe_setlen(out, start);
	}
	return ret;
}

void secret_json_wipe(json_t *obj)
{
	const char *name;
	json_t *v;

	if (!json_is_object(obj))
		return;
	json_object_foreach(obj, name, v)
	{
		if (json_is_string(v))
			explicit_bzero((char *)json_string_value(v), json_string_length(v));
	}
}

int secret_placeholder(char out[SECRET_PLACEHOLDER_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[16];
	size_t n = strlen(SECRET_PLACEHOLDER_PREFIX);
	ssize_t got;

	do
		got = getrandom(r, sizeof(r), 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if (got != (ssize_t)sizeof(r))
		return -EIO;
	memcpy(out, SECRET_PLACEHOLDER_PREFIX, n);
	for (size_t i = 0; i < sizeof(r); i++) {
		out[n + 2 * i] = hex[r[i] >> 4];
		out[n + 2 * i + 1] = hex[r[i] & 15];
	}
	out[SECRET_PLACEHOLDER_LEN] = '\0';
	return 0;
}

int secret_placeholder_valid(const char *p, size_t n)
{
	size_t k = strlen(SECRET_PLACEHOLDER_PREFIX);

	return n == SECRET_PLACEHOLDER_LEN && !memcmp(p, SECRET_PLACEHOLDER_PREFIX, k) &&
	       strspn(p + k, "0123456789abcdef") >= n - k;
}
