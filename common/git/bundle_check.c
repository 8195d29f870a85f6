#include "git/bundle_check.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/num.h"
#include "base/printable.h"
#include "base/sandbox.h"
#include "base/spawn.h"
#include "base/banned.h"

int bundle_limits_set(struct bundle_limits *l, const char *name, const char *value, struct buf *err)
{
	uint64_t *size = NULL;
	unsigned *secs = NULL;

	if (!strcmp(name, "max-object"))
		size = &l->max_object;
	else if (!strcmp(name, "max-inflated"))
		size = &l->max_inflated;
	else if (!strcmp(name, "memory"))
		size = &l->memory;
	else if (!strcmp(name, "cpu"))
		secs = &l->cpu_s;
	else if (!strcmp(name, "time"))
		secs = &l->wall_s;
	if (size) {
		uint64_t v;

		/* One object: at most 4 GiB, what a pack can state. */
		if (parse_size(value, 1, size == &l->max_object ? 4ULL << 30 : 1ULL << 50, &v) <
		    0) {
			buf_addf(err, "%s: '%s' is not a size", name, value);
			return -EINVAL;
		}
		*size = v;
		return 0;
	}
	if (secs) {
		long v;

		if (parse_long(value, 1, 24 * 3600, &v) < 0) {
			buf_addf(err, "%s: '%s' is not a number of seconds (1 to 86400)", name,
			         value);
			return -EINVAL;
		}
		*secs = (unsigned)v;
		return 0;
	}
	buf_addf(err, "unknown limit '%s' (max-object, max-inflated, memory, cpu, time)", name);
	return -EINVAL;
}

int bundle_limits_parse(struct bundle_limits *l, const char *list, struct buf *err)
{
	struct buf item = BUF_INIT;
	const char *p = list;
	int ret = 0;

	while (*p && !ret) {
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		char *eq;

		buf_reset(&item);
		buf_add(&item, p, (size_t)(end - p));
		eq = strchr(item.buf, '=');
		if (!eq) {
			buf_addf(err, "'%s' is not name=value", item.buf);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		ret = bundle_limits_set(l, item.buf, eq + 1, err);
		p = comma ? comma + 1 : end;
	}
	buf_release(&item);
	return ret;
}

void bundle_verdict_clear(struct bundle_verdict *v)
{
	buf_release(&v->err);
}

int bundle_check_here(const struct bundle_check *c, struct bundle_verdict *v)
{
	struct bundle_header h = BUNDLE_HEADER_INIT;
	struct bundle_pack_opts o = BUNDLE_PACK_OPTS_INIT;
	struct bundle_pack_result res = BUNDLE_PACK_RESULT_INIT;
	struct bundle_check_msg *m = &v->m;
	struct strvec tips = STRVEC_INIT, tip_refs = STRVEC_INIT;
	int ret;

	memset(v, 0, sizeof(*v));
	buf_init(&v->err, 0);
	if (lseek(c->fd, 0, SEEK_SET) < 0) {
		ret = -errno;
		goto out;
	}
	ret = bundle_header_read_fd(&h, c->fd);
	if (ret == 0)
		ret = bundle_header_expect(&h, c->refs.v, c->refs.nr, c->bases.v, c->bases.nr);
	if (ret) {
		buf_addstr(&v->err, h.err.buf);
		goto out;
	}
	if (h.oid_format == BUNDLE_SHA256) {
		/* libgit2 1.5 and our walk know SHA-1 packs only. */
		buf_addstr(&v->err, "pack: sha256 packs cannot be verified (only sha1)");
		ret = BUNDLE_REFUSED;
		goto out;
	}
	/* Every tip must be in the pack, unless it is a base: no changes. */
	for (size_t i = 0; i < h.nr_refs; i++) {
		int base = 0;

		for (size_t j = 0; j < c->bases.nr && !base; j++) {
			char oid[OID_HEX_MAX + 1];

			base = bundle_oid_parse(c->bases.v[j], strlen(c->bases.v[j]), oid) &&
			       !strcmp(oid, h.refs[i].oid);
		}
		if (!base) {
			strvec_push(&tips, h.refs[i].oid);
			strvec_push(&tip_refs, h.refs[i].name);
		}
	}
	if (lseek(c->fd, (off_t)h.pack_offset, SEEK_SET) < 0) {
		ret = -errno;
		goto out;
	}
	o.repo_dir = c->repo_dir;
	o.max_bytes = c->max_bytes;
	o.max_object = c->lim.max_object;
	o.max_inflated = c->lim.max_inflated;
	o.tips = (const char *const *)tips.v;
	o.nr_tips = tips.nr;
	o.tip_refs = (const char *const *)tip_refs.v;
	ret = bundle_pack_verify_fd(c->fd, &o, &res);
	m->version = res.version;
	m->objects = res.objects;
	m->indexed = res.indexed;
	memcpy(m->checksum, res.checksum, sizeof(m->checksum));
	if (ret)
		buf_addstr(&v->err, res.err.buf);
	else
		memcpy(m->tip, h.refs[0].oid, sizeof(m->tip));
out:
	if (ret < 0 && !v->err.len)
		buf_addstr(&v->err, strerror(-ret));
	m->ret = ret;
	strvec_clear(&tips);
	strvec_clear(&tip_refs);
	bundle_header_clear(&h);
	bundle_pack_result_clear(&res);
	return ret;
}

/* One write, never interleaved or split (docs/bundles.md, "Limits"). */
_Static_assert(sizeof(struct bundle_check_msg) <= PIPE_BUF, "the verdict fits in one write");

/* The child's limits and lockdown; 0 or -errno. */
static int child_limits(const struct bundle_limits *lim)
{
	struct rlimit r = {0, 0};

	if (setrlimit(RLIMIT_CORE, &r) < 0)
		return -errno;
	r.rlim_cur = lim->cpu_s;
	r.rlim_max = lim->cpu_s + 1; /* SIGXCPU at the limit, SIGKILL a second later */
	if (setrlimit(RLIMIT_CPU, &r) < 0)
		return -errno;
#if !defined(__SANITIZE_ADDRESS__)
	{
		/* What is mapped already (the libraries, the parent's heap) plus the limit. */
		unsigned long long pages = 0;
		FILE *f = fopen("/proc/self/statm", "re");

		if (f) {
			if (fscanf(f, "%llu", &pages) != 1)
				pages = 0;
			fclose(f);
		}
		r.rlim_cur = r.rlim_max =
		    (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE) + lim->memory);
		if (setrlimit(RLIMIT_AS, &r) < 0)
			return -errno;
	}
#endif
	return sandbox_lockdown(SANDBOX_SECCOMP,
	                        SANDBOX_KEEP_FILES | SANDBOX_NO_NEW_SOCKETS | SANDBOX_NO_PROCESSES);
}

static void child(struct bundle_check *c, int go, int ans)
{
	struct bundle_verdict v;
	struct bundle_check_msg m;
	ssize_t n;
	char b;

	while ((n = read(go, &b, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(0);
	memset(&m, 0, sizeof(m));
	/*
	 * Objects of a MiB or more are mapped, and unmapped when freed: glibc's
	 * threshold would otherwise rise to the largest freed (up to 32 MiB) and
	 * keep a chain of large bases' memory in the heap, past the bound.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	if ((m.ret = child_limits(&c->lim)) == 0) {
		bundle_check_here(c, &v);
		m = v.m;
		snprintf(m.reason, sizeof(m.reason), "%s", v.err.buf);
	}
	(void)write_all(ans, &m, sizeof(m));
	_exit(0);
}

int bundle_check_fork(struct bundle_check *c)
{
	int go[2], ans[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(ans, O_CLOEXEC) < 0) {
		int ret = -errno;

		close(go[0]);
		close(go[1]);
		return ret;
	}
	pid = spawn_worker((const int[]){go[0], ans[1], c->fd}, 3, SPAWN_WORKER_PDEATH);
	if (pid < 0) {
		close(go[0]);
		close(go[1]);
		close(ans[0]);
		close(ans[1]);
		return pid;
	}
	if (pid == 0)
		child(c, go[0], ans[1]);
	close(go[0]);
	close(ans[1]);
	c->pid = pid;
	c->go_fd = go[1];
	c->go_ms = 0;
	c->answer_fd = ans[0];
	return 0;
}

static long ms_left(int64_t t0, unsigned wall_s)
{
	int64_t ms = (int64_t)wall_s * 1000 - (clock_ms() - t0);

	return ms < 0 ? 0 : (long)ms;
}

/* Whether s[0..n) is NUL-terminated; what precedes the NUL made printable. */
static int clean_str(char *s, size_t n)
{
	char *nul = memchr(s, '\0', n);

	if (!nul)
		return 0;
	printable_ascii(s, (size_t)(nul - s), 0);
	return 1;
}

static int verdict(struct bundle_verdict *v, int ret, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verdict(struct bundle_verdict *v, int ret, const char *fmt, ...)
{
	va_list ap;

	memset(&v->m, 0, sizeof(v->m));
	buf_reset(&v->err);
	va_start(ap, fmt);
	buf_vaddf(&v->err, fmt, ap);
	va_end(ap);
	v->m.ret = ret;
	return ret;
}

int bundle_check_go(struct bundle_check *c)
{
	if (c->pid < 0 || c->go_fd < 0)
		return -ECHILD;
	if (c->go_ms)
		return 0;
	if (write(c->go_fd, "g", 1) != 1)
		return -EPIPE;
	c->go_ms = clock_ms();
	return 0;
}

int bundle_check_run(struct bundle_check *c, struct bundle_verdict *v,
                     const volatile sig_atomic_t *stop)
{
	struct bundle_check_msg m;
	int64_t t0;
	struct rusage ru;
	size_t got = 0;
	int status = 0, timed_out = 0, interrupted = 0;
	pid_t w;

	memset(v, 0, sizeof(*v));
	buf_init(&v->err, 0);
	if (c->pid < 0 || c->go_fd < 0)
		return verdict(v, -ECHILD, "the checker is gone");
	if (bundle_check_go(c) < 0) {
		bundle_check_stop(c);
		return verdict(v, -EPIPE, "the checker is gone");
	}
	t0 = c->go_ms;
	while (got < sizeof(m)) {
		struct pollfd p = {.fd = c->answer_fd, .events = POLLIN};
		long left = ms_left(t0, c->lim.wall_s);
		int r;
		ssize_t n;

		if (stop && *stop) {
			interrupted = 1;
			break;
		}
		if (left == 0) {
			timed_out = 1;
			break;
		}
		r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue; /* the deadline, checked above */
		n = read(c->answer_fd, (char *)&m + got, sizeof(m) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(m) || timed_out || interrupted)
		kill(c->pid, SIGKILL);
	while ((w = wait4(c->pid, &status, 0, &ru)) < 0 && errno == EINTR)
		;
	c->pid = -1;
	bundle_check_stop(c);
	if (w > 0) {
		v->max_rss_kib = ru.ru_maxrss;
		v->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	}
	if (interrupted)
		return verdict(v, -EINTR, "the check was interrupted");
	if (timed_out)
		return verdict(v, BUNDLE_REFUSED,
		               "the check took longer than its limit of %u s (time)",
		               c->lim.wall_s);
	if (got < sizeof(m)) {
		if (w > 0 && WIFSIGNALED(status) &&
		    (WTERMSIG(status) == SIGXCPU ||
		     (WTERMSIG(status) == SIGKILL && v->cpu_s >= c->lim.cpu_s)))
			return verdict(v, BUNDLE_REFUSED,
			               "the check used more than its limit of %u s of CPU (cpu)",
			               c->lim.cpu_s);
		if (w > 0 && WIFSIGNALED(status))
			return verdict(v, -EIO, "the checker was killed by signal %d",
			               WTERMSIG(status));
		return verdict(v, -EIO, "the checker ended without an answer (exit %d)",
		               w > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	/* From here the message is the child's: untrusted. */
	if (!clean_str(m.reason, sizeof(m.reason)) || !clean_str(m.checksum, sizeof(m.checksum)) ||
	    !clean_str(m.tip, sizeof(m.tip)) || m.ret > BUNDLE_REFUSED || m.ret < -4095 ||
	    (m.ret == BUNDLE_REFUSED && !m.reason[0]) ||
	    (m.ret == 0 && !bundle_oid_parse(m.tip, strlen(m.tip), m.tip)))
		return verdict(v, -EIO, "the checker's answer is malformed");
	v->m = m;
	if (m.ret)
		buf_addstr(&v->err, m.reason[0] ? m.reason : strerror(-m.ret));
	return m.ret;
}

void bundle_check_stop(struct bundle_check *c)
{
	if (c->go_fd >= 0)
		close(c->go_fd);
	c->go_fd = -1;
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	c->pid = -1;
	if (c->answer_fd >= 0)
		close(c->answer_fd);
	c->answer_fd = -1;
}

void bundle_check_clear(struct bundle_check *c)
{
	bundle_check_stop(c);
	strvec_clear(&c->refs);
	strvec_clear(&c->bases);
}
