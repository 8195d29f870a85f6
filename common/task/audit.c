#include "task/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/banned.h"

static const char zero_hash[] = "0000000000000000000000000000000000000000000000000000000000000000";

void audit_path(struct buf *out)
{
	buf_addf(out, "%s/%s", aibox_home(), AUDIT_FILE);
}

void audit_sha256_hex(const void *p, size_t len, struct buf *out)
{
	unsigned char sum[32];
	unsigned int n = 0;

	if (!EVP_Digest(p, len, sum, &n, EVP_sha256(), NULL) || n != sizeof(sum))
		BUG("SHA-256 failed");
	for (size_t i = 0; i < sizeof(sum); i++)
		buf_addf(out, "%02x", sum[i]);
}

/* The hash of o (without its "hash"): o's compact text with sorted keys. */
static int entry_hash(json_t *o, struct buf *out)
{
	json_t *c = json_copy(o);
	char *text;

	json_object_del(c, "hash");
	text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	if (!text)
		return -ENOMEM;
	audit_sha256_hex(text, strlen(text), out);
	free(text);
	return 0;
}

/*
 * One line's check against the chain so far (seq and prev of the line
 * before): 0 with *seq and hash set to this line's, or -EBADMSG with why.
 */
static int check_line(const char *line, size_t len, int64_t *seq, struct buf *hash, struct buf *err)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je), *v;
	struct buf want = BUF_INIT;
	const char *key;
	int ret = -EBADMSG;

	if (!json_is_object(o)) {
		buf_addstr(err, "not a JSON object");
		goto out;
	}
	json_object_foreach(o, key, v) if (!json_is_string(v) && !json_is_integer(v))
	{
		buf_addf(err, "'%.64s' is not a string or an integer", key);
		goto out;
	}
	if (!json_is_integer(json_object_get(o, "seq")) ||
	    !json_is_string(json_object_get(o, "prev")) ||
	    !json_is_string(json_object_get(o, "hash"))) {
		buf_addstr(err, "not an audit entry (no seq, prev or hash)");
		goto out;
	}
	if (json_integer_value(json_object_get(o, "seq")) != *seq + 1) {
		buf_addf(err,
		         "entry %lld where entry %lld belongs: an entry was removed or moved "
		         "before it",
		         (long long)json_integer_value(json_object_get(o, "seq")),
		         (long long)*seq + 1);
		goto out;
	}
	if (strcmp(json_string_value(json_object_get(o, "prev")),
	           hash->len ? hash->buf : zero_hash)) {
		buf_addstr(err, "it does not follow the line before it: an entry was removed, "
		                "moved or edited before it");
		goto out;
	}
	if (entry_hash(o, &want) < 0) {
		ret = -ENOMEM;
		goto out;
	}
	if (strcmp(want.buf, json_string_value(json_object_get(o, "hash")))) {
		buf_addstr(err, "its hash does not match it: the entry was edited");
		goto out;
	}
	*seq += 1;
	buf_reset(hash);
	buf_addstr(hash, want.buf);
	ret = 0;
out:
	json_decref(o);
	buf_release(&want);
	return ret;
}

/* Read all of fd from its start (at most max bytes). */
static int read_all(int fd, struct buf *out, size_t max)
{
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	n = buf_read_fd(out, fd, max);
	return n < 0 ? (int)n : 0;
}

/* The chain of data; 0 with *n, *seq and hash the last line's, or -EBADMSG "LINE: why". */
static int check_chain(const struct buf *data, size_t *n, int64_t *seq, struct buf *hash,
                       struct buf *err)
{
	struct buf why = BUF_INIT;
	size_t line = 0;
	int ret = 0;

	*seq = 0;
	buf_reset(hash);
	for (const char *p = data->buf, *end = data->buf + data->len; p < end && !ret;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		line++;
		if (!nl) {
			buf_addf(err, "%zu: the line is cut short (no newline)", line);
			ret = -EBADMSG;
			break;
		}
		if ((ret = check_line(p, (size_t)(nl - p), seq, hash, &why)) < 0)
			buf_addf(err, "%zu: %s", line, why.buf);
		p = nl + 1;
	}
	*n = line;
	buf_release(&why);
	return ret;
}

#define AUDIT_FILE_MAX (256 * 1024 * 1024)

int audit_verify(const char *path, size_t *n, struct buf *err)
{
	struct buf data = BUF_INIT, hash = BUF_INIT;
	int64_t seq;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), ret;

	*n = 0;
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return ret;
	}
	if ((ret = read_all(fd, &data, AUDIT_FILE_MAX)) < 0)
		buf_addf(err, "cannot read '%s': %s", path, strerror(-ret));
	else
		ret = check_chain(&data, n, &seq, &hash, err);
	close(fd);
	buf_release(&data);
	buf_release(&hash);
	return ret;
}

int audit_open(const char *path, struct buf *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0) {
		fd = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return fd;
	}
	/* Connected now: a locked-down process can still send. */
	openlog("aibox", LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
	return fd;
}

int audit_append(int fd, const char *path, void *entry, struct buf *err)
{
	json_t *o = entry;
	struct buf data = BUF_INIT, hash = BUF_INIT, sum = BUF_INIT, chain = BUF_INIT;
	int64_t seq = 0;
	size_t n = 0;
	char *text = NULL;
	int ret;

	if (flock(fd, LOCK_EX) < 0 || (ret = read_all(fd, &data, AUDIT_FILE_MAX)) < 0) {
		ret = -errno;
		buf_addf(err, "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	if ((ret = check_chain(&data, &n, &seq, &hash, &chain)) < 0) {
		buf_addf(err, "'%s' is not a whole chain (aibox audit verify): %s", path,
		         chain.buf);
		goto out;
	}
	json_object_set_new(o, "seq", json_integer(seq + 1));
	json_object_set_new(o, "prev", json_string(hash.len ? hash.buf : zero_hash));
	json_object_del(o, "hash");
	if ((ret = entry_hash(o, &sum)) < 0)
		goto out;
	json_object_set_new(o, "hash", json_string(sum.buf));
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text || strlen(text) > AUDIT_LINE_MAX) {
		ret = -E2BIG;
		buf_addstr(err, "the audit entry is too long");
		goto out;
	}
	buf_reset(&data);
	buf_addf(&data, "%s\n", text);
	if ((ret = write_all(fd, data.buf, data.len)) < 0) {
		buf_addf(err, "cannot write '%s': %s", path, strerror(-ret));
		goto out;
	}
	/* The system log stamps who sent it; the user cannot rewrite it. */
	syslog(LOG_AUTHPRIV | LOG_INFO, "aibox-audit: %s", text);
	ret = 0;
out:
	flock(fd, LOCK_UN);
	free(text);
	buf_release(&data);
	buf_release(&hash);
	buf_release(&sum);
	buf_release(&chain);
	return ret;
}
