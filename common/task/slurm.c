#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/err.h"
#include "base/json_get.h"
#include "proxy/proxy_report.h"
#include "base/secret.h"
#include "task/slurm.h"
#include "base/banned.h"

uint64_t slurm_job_mem_mib(uint64_t vm_mib)
{
	return vm_mib + SLURM_MEM_MARGIN_MIB;
}

long slurm_job_minutes(int64_t timeout_ms)
{
	return (long)((timeout_ms + 59999) / 60000) + SLURM_TIME_MARGIN_MIN;
}

void slurm_job_args(struct strvec *args, const struct slurm_job *j)
{
	strvec_pushf(args, "--job-name=%s", j->name);
	strvec_pushl(args, "--nodes=1", "--ntasks=1", NULL);
	strvec_pushf(args, "--cpus-per-task=%d", j->cpus);
	strvec_pushf(args, "--mem=%lluM", (unsigned long long)slurm_job_mem_mib(j->memory_mib));
	strvec_pushf(args, "--time=%ld", slurm_job_minutes(j->timeout_ms));
	if (j->partition)
		strvec_pushf(args, "--partition=%s", j->partition);
	if (j->account)
		strvec_pushf(args, "--account=%s", j->account);
	for (size_t i = 0; j->options && i < j->options->nr; i++)
		strvec_push(args, j->options->v[i]);
}

/* Filesystems every node of a cluster typically mounts (statfs f_type). */
static const struct {
	unsigned long magic;
	const char *name;
} network_fs[] = {
    {0x6969, "NFS"},        {0x517B, "SMB"},       {0xFF534D42, "CIFS"},   {0xFE534D42, "SMB2"},
    {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},  {0x00C36400, "CephFS"}, {0x19830326, "BeeGFS"},
    {0x5346414F, "AFS"},    {0x7461636F, "OCFS2"}, {0x01161970, "GFS2"},
};

/* 1 when path is dir or below it (both absolute, dir without a trailing slash but "/"). */
static int path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return 1;
	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

int slurm_shared_check(const char *dir, const struct strvec *shared, struct buf *err)
{
	char real[PATH_MAX];
	struct statfs sf;

	if (!realpath(dir, real) || statfs(real, &sf) < 0) {
		int ret = -errno;

		buf_addf(err, "cannot look at '%s': %s", dir, strerror(errno));
		return ret;
	}
	for (size_t i = 0; shared && i < shared->nr; i++) {
		char sreal[PATH_MAX];

		if (path_under(real, shared->v[i]) ||
		    (realpath(shared->v[i], sreal) && path_under(real, sreal)))
			return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(network_fs); i++)
		if ((unsigned long)sf.f_type == network_fs[i].magic)
			return 0;
	buf_addf(err,
	         "'%s' is not on storage the Slurm nodes see (not a network filesystem, not "
	         "under the config's slurm.shared): put AIBOX_HOME on shared storage, or list "
	         "the folder the nodes mount at the same path under slurm: shared:",
	         real);
	return -EXDEV;
}

static const char *const secret_names[] = {"key",       "tokens",  "env",  "user_key",
                                           "host_blob", "secrets", "oauth"};

static struct buf *secret_field(struct slurm_secrets *s, size_t i)
{
	struct buf *f[] = {&s->key,       &s->tokens,  &s->env,  &s->user_key,
	                   &s->host_blob, &s->secrets, &s->oauth};

	return f[i];
}

void slurm_pairs_add(struct buf *out, const char *placeholder, const char *value)
{
	buf_addf(out, "%s %s\n", placeholder, value);
}

int slurm_pairs_parse(const struct buf *in, struct strvec *placeholders, struct strvec *values)
{
	const char *p = in->buf, *end = in->buf + in->len;
	struct buf v = BUF_INIT;
	int ret = 0;

	buf_grow(&v, in->len + 1);
	while (p < end && !ret) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *sp = nl ? memchr(p, ' ', (size_t)(nl - p)) : NULL;

		if (!sp || !secret_placeholder_valid(p, (size_t)(sp - p)) || sp + 1 == nl) {
			ret = -EINVAL;
			break;
		}
		for (const char *c = sp + 1; c < nl; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				ret = -EINVAL;
		if (ret)
			break;
		strvec_pushf(placeholders, "%.*s", (int)(sp - p), p);
		buf_reset(&v);
		buf_add(&v, sp + 1, (size_t)(nl - sp - 1));
		strvec_push(values, v.buf);
		p = nl + 1;
	}
	buf_wipe_release(&v);
	if (ret) {
		strvec_clear(placeholders);
		strvec_wipe_clear(values);
	}
	return ret;
}

void slurm_secrets_wipe(struct slurm_secrets *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(secret_names); i++)
		buf_wipe_release(secret_field(s, i));
}

int slurm_secrets_write(const char *dir, const struct slurm_secrets *s, struct buf *err)
{
	struct buf path = BUF_INIT, data = BUF_INIT;
	size_t total = 32;
	int fd, ret;

	for (size_t i = 0; i < ARRAY_SIZE(secret_names); i++) {
		size_t len = secret_field((struct slurm_secrets *)s, i)->len;

		if (len > SLURM_SECRET_MAX) {
			buf_addf(err, "cannot pass the secrets to the node: %s is over %d bytes",
			         secret_names[i], SLURM_SECRET_MAX);
			return -E2BIG;
		}
		total += len + 32;
	}
	/* Grown once, so no stale copy of a secret is left behind in freed memory. */
	buf_grow(&data, total);
	buf_addstr(&data, "aibox-slurm-secrets 1\n");
	for (size_t i = 0; i < ARRAY_SIZE(secret_names); i++) {
		const struct buf *f = secret_field((struct slurm_secrets *)s, i);

		buf_addf(&data, "%s %zu\n", secret_names[i], f->len);
		buf_add(&data, f->buf, f->len);
		buf_addch(&data, '\n');
	}
	buf_addf(&path, "%s/%s", dir, SLURM_SECRETS_NAME);
	fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot create '%s': %s", path.buf, strerror(errno));
		goto out;
	}
	ret = write_all(fd, data.buf, data.len);
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret < 0) {
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
		unlink(path.buf);
	}
out:
	buf_wipe_release(&data);
	buf_release(&path);
	return ret;
}

/* One "<name> <len>\n<bytes>\n" at *p; 0 with the field filled, or -EINVAL. */
static int take_field(const char **p, const char *end, struct slurm_secrets *s, unsigned *seen)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p)), *sp;
	unsigned long long len = 0;
	size_t i;

	if (!nl || !(sp = memchr(*p, ' ', (size_t)(nl - *p))))
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(secret_names); i++)
		if ((size_t)(sp - *p) == strlen(secret_names[i]) &&
		    !memcmp(*p, secret_names[i], strlen(secret_names[i])))
			break;
	if (i == ARRAY_SIZE(secret_names) || (*seen & (1u << i)) || sp + 1 == nl)
		return -EINVAL;
	for (const char *d = sp + 1; d < nl; d++) {
		if (*d < '0' || *d > '9' || len > SLURM_SECRET_MAX)
			return -EINVAL;
		len = len * 10 + (unsigned)(*d - '0');
	}
	if (len > SLURM_SECRET_MAX || (size_t)(end - nl - 1) < len + 1 || nl[1 + len] != '\n')
		return -EINVAL;
	buf_grow(secret_field(s, i), (size_t)len + 1);
	buf_add(secret_field(s, i), nl + 1, (size_t)len);
	*seen |= 1u << i;
	*p = nl + 1 + len + 1;
	return 0;
}

int slurm_secrets_take(const char *dir, struct slurm_secrets *s, struct buf *err)
{
	static const char head[] = "aibox-slurm-secrets 1\n";
	struct buf path = BUF_INIT, data = BUF_INIT;
	const char *p, *end;
	unsigned seen = 0;
	struct stat st;
	ssize_t n;
	int fd, ret = 0;

	buf_addf(&path, "%s/%s", dir, SLURM_SECRETS_NAME);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path.buf, strerror(errno));
		goto out;
	}
	/* Gone from the folder before anything else happens. */
	if (unlink(path.buf) < 0) {
		ret = -errno;
		buf_addf(err, "cannot remove '%s': %s", path.buf, strerror(errno));
		close(fd);
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		buf_addf(err, "'%s' is not a plain file of mode 0600 of ours", path.buf);
		close(fd);
		ret = -EINVAL;
		goto out;
	}
	s->written = st.st_mtim;
	n = secret_read_fd(fd, &data, ARRAY_SIZE(secret_names) * (SLURM_SECRET_MAX + 32) + 64);
	if (n < 0) {
		ret = (int)n;
		buf_addf(err, "cannot read '%s': %s", path.buf, strerror(-ret));
		goto out;
	}
	p = data.buf;
	end = data.buf + data.len;
	if (data.len < sizeof(head) - 1 || memcmp(p, head, sizeof(head) - 1))
		ret = -EINVAL;
	else
		p += sizeof(head) - 1;
	while (!ret && p < end)
		ret = take_field(&p, end, s, &seen);
	if (!ret && seen != (1u << ARRAY_SIZE(secret_names)) - 1)
		ret = -EINVAL;
	if (ret)
		buf_addf(err, "'%s' is not a secrets file of aibox", path.buf);
out:
	if (ret)
		slurm_secrets_wipe(s);
	buf_wipe_release(&data);
	buf_release(&path);
	return ret;
}

void slurm_status_json(const struct slurm_status *st, struct buf *out)
{
	json_t *o = json_object();
	char *s;

	json_object_set_new(o, "version", json_integer(1));
	json_object_set_new(o, "session_ok", json_boolean(st->session_ok));
	json_object_set_new(o, "stopped", json_boolean(st->stopped));
	json_object_set_new(o, "boot_s", json_real(st->boot_s));
	json_object_set_new(o, "session_s", json_real(st->session_s));
	json_object_set_new(o, "why", json_stringn(st->why.buf, st->why.len));
	json_object_set_new(o, "report",
	                    st->have_report ? json_stringn(st->report.buf, st->report.len)
	                                    : json_null());
	json_object_set_new(o, "report_why", json_stringn(st->report_why.buf, st->report_why.len));
	s = json_dumps(o, JSON_COMPACT);
	if (!s)
		die_oom();
	buf_addstr(out, s);
	buf_addch(out, '\n');
	free(s);
	json_decref(o);
}

/* The longest a boot or a session may be said to take: a week. */
#define SLURM_SECONDS_MAX 604800.0

/* A string member of at most max bytes into b (json_get's rule). */
static int get_text(json_t *o, const char *key, unsigned flags, size_t max, struct buf *b,
                    struct buf *err)
{
	const char *s = NULL;
	int r = json_get_str(o, key, flags, max, &s, err);

	if (r > 0)
		buf_addstr(b, s);
	return r;
}

int slurm_status_parse(const char *p, size_t n, struct slurm_status *st, struct buf *err)
{
	json_error_t je;
	struct buf why = BUF_INIT;
	int64_t version;
	json_t *o;
	int ret = -EINVAL, r;

	if (n > SLURM_STATUS_MAX) {
		buf_addf(err, "slurm.status is over %d bytes", SLURM_STATUS_MAX);
		return -EINVAL;
	}
	o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
	if (!o || !json_is_object(o)) {
		buf_addstr(err, "slurm.status is not a JSON object");
		if (!o) {
			buf_addstr(err, ": ");
			json_error_why(&je, err);
		}
		goto out;
	}
	if (json_get_int(o, "version", 0, 1, 1, &version, &why) < 0 ||
	    json_get_bool(o, "session_ok", 0, &st->session_ok, &why) < 0 ||
	    json_get_bool(o, "stopped", 0, &st->stopped, &why) < 0 ||
	    json_get_real(o, "boot_s", 0, 0, SLURM_SECONDS_MAX, &st->boot_s, &why) < 0 ||
	    json_get_real(o, "session_s", 0, 0, SLURM_SECONDS_MAX, &st->session_s, &why) < 0 ||
	    get_text(o, "why", 0, 4096, &st->why, &why) < 0 ||
	    get_text(o, "report_why", 0, 4096, &st->report_why, &why) < 0 ||
	    (r = get_text(o, "report", JSON_OPTIONAL, PROXY_REPORT_MAX, &st->report, &why)) < 0) {
		buf_addf(err, "slurm.status: %s", why.buf);
		goto out;
	}
	st->have_report = r > 0;
	ret = 0;
out:
	buf_release(&why);
	json_decref(o);
	if (ret)
		slurm_status_release(st);
	return ret;
}

void slurm_status_release(struct slurm_status *st)
{
	buf_release(&st->why);
	buf_release(&st->report);
	buf_release(&st->report_why);
	st->have_report = 0;
}
