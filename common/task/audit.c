#include "task/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#define SD_JOURNAL_SUPPRESS_LOCATION /* no CODE_FILE, CODE_LINE, CODE_FUNC */
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "config/config.h"
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

/* Whether audit_open() found journald listening: entries then go to the journal. */
static int to_journal;

int audit_journal_running(void)
{
	struct stat st;

	return stat(AUDIT_JOURNAL_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode);
}

int audit_open(const char *path, struct buf *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0) {
		fd = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return fd;
	}
	to_journal = audit_journal_running();
	/* Connected now: a locked-down process can still send. */
	if (!to_journal)
		openlog(AUDIT_IDENT, LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
	return fd;
}

static const char *str_of(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/*
 * The entry to the journal: the syslog form's MESSAGE, identifier and
 * facility, and fields of our own (AIBOX_AUDIT the entry's line).  The
 * journal adds the trusted fields (_UID, _PID, ...) itself: none is sent.
 * The socket libsystemd opens at the first send stays open, so the first
 * entry must be sent before a lockdown that would forbid socket().
 */
static int send_journal(json_t *o, const char *text)
{
	const char *what = json_object_get(o, "task") ? "task" : "run";

	return sd_journal_send(
	    "MESSAGE=" AUDIT_TAG "%s", text, "PRIORITY=%d", LOG_INFO, "SYSLOG_FACILITY=%d",
	    LOG_AUTHPRIV >> 3, "SYSLOG_IDENTIFIER=" AUDIT_IDENT, "AIBOX_AUDIT=%s", text,
	    "AIBOX_EVENT=%s", str_of(o, "event"), "AIBOX_PROJECT=%s", str_of(o, "project"),
	    "AIBOX_TASK=%s", str_of(o, what), "AIBOX_SEQ=%lld",
	    (long long)json_integer_value(json_object_get(o, "seq")), "AIBOX_HASH=%s",
	    str_of(o, "hash"), NULL);
}

void *audit_entry(const char *event)
{
	/* Looked up once: a lockdown may forbid reading /etc/passwd later. */
	static char user[256];
	static int looked_up;
	json_t *e = json_object();

	if (!looked_up) {
		const struct passwd *pw = getpwuid(getuid());

		if (pw && pw->pw_name && strlen(pw->pw_name) < sizeof(user))
			memcpy(user, pw->pw_name, strlen(pw->pw_name) + 1);
		looked_up = 1;
	}
	json_object_set_new(e, "time", json_integer((json_int_t)time(NULL)));
	json_object_set_new(e, "event", json_string(event));
	json_object_set_new(e, "uid", json_integer((json_int_t)getuid()));
	json_object_set_new(e, "user", json_string(user));
	return e;
}

int audit_write(int *fd, void *entry, struct buf *err)
{
	struct buf path = BUF_INIT;
	int ret;

	audit_path(&path);
	if (*fd < 0 && (ret = *fd = audit_open(path.buf, err)) < 0)
		goto out;
	ret = audit_append(*fd, path.buf, entry, err);
out:
	buf_release(&path);
	return ret;
}

void *audit_joined(const struct strvec *list)
{
	struct buf b = BUF_INIT;
	json_t *s;

	for (size_t i = 0; i < list->nr; i++)
		buf_addf(&b, "%s%s", i ? "," : "", list->v[i]);
	s = json_string(b.len ? b.buf : "");
	buf_release(&b);
	return s;
}

void *audit_secrets(int forward_key, const struct strvec *env_names, const struct strvec *ph_names,
                    const struct config *cfg)
{
	struct strvec secrets = STRVEC_INIT;
	json_t *s;

	if (forward_key)
		strvec_push(&secrets, "ANTHROPIC_API_KEY");
	for (size_t i = 0; i < env_names->nr; i++)
		strvec_push(&secrets, env_names->v[i]);
	for (size_t i = 0; i < ph_names->nr; i++)
		strvec_push(&secrets, ph_names->v[i]);
	for (size_t i = 0; i < cfg->nr_git; i++)
		if (cfg->git[i].token_env)
			strvec_push(&secrets, cfg->git[i].token_env);
	s = audit_joined(&secrets);
	strvec_clear(&secrets);
	return s;
}

int audit_refusal(int *fd, const char *command, const char *project, const char *policy,
                  const char *why, struct buf *err)
{
	json_t *e = audit_entry("refused");
	int ret;

	json_object_set_new(e, "command", json_string(command));
	json_object_set_new(e, "project", json_string(project ? project : ""));
	json_object_set_new(e, "policy", json_string(policy ? policy : ""));
	json_object_set_new(e, "why", json_string(why));
	ret = audit_write(fd, e, err);
	json_decref(e);
	return ret;
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
	if (!to_journal || send_journal(o, text) < 0) {
		if (to_journal) /* journald went away: /dev/log may still be there */
			openlog(AUDIT_IDENT, LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
		to_journal = 0;
		syslog(LOG_AUTHPRIV | LOG_INFO, AUDIT_TAG "%s", text);
	}
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
