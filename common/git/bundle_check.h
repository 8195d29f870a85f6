/*
 * Checking an untrusted bundle in a child process under limits
 * (docs/bundles.md, "Limits"): aibox-bundle-check --pack and aibox task's
 * check of changes.bundle.
 *
 *	struct bundle_check c = BUNDLE_CHECK_INIT;
 *	c.fd = fd; strvec_push(&c.refs, ...); c.repo_dir = ...;
 *	bundle_check_fork(&c);            child forked; it waits
 *	... (aibox-task: the VM, its own lockdown, the session) ...
 *	bundle_check_run(&c, &v, NULL);   verdict in v; the child is reaped
 *	bundle_check_clear(&c);
 *	... v.m.ret, v.err ...
 *	bundle_verdict_clear(&v);
 *
 * The child keeps only the bundle's fd, its two pipes and fds 0-2 (0 and 1
 * on /dev/null), ignores SIGINT and SIGHUP, dies with its parent
 * (PR_SET_PDEATHSIG) and waits for one byte.  Then it sets its rlimits
 * (RLIMIT_AS: its address space may grow by lim.memory, not set in a
 * sanitizer build, whose shadow memory takes terabytes; RLIMIT_CPU:
 * lim.cpu_s; no core), locks itself down (sandbox_lockdown with
 * SANDBOX_KEEP_FILES | SANDBOX_NO_NEW_SOCKETS | SANDBOX_NO_PROCESSES: it
 * reads the project's objects for a thin pack, but nothing runs, forks or
 * connects), maps objects of 1 MiB or more (M_MMAP_THRESHOLD: freed
 * memory goes back), runs bundle_check_here() and writes its
 * verdict, one struct bundle_check_msg of fixed size (under PIPE_BUF, so in
 * one write), and exits.  The parent waits at most lim.wall_s, then kills
 * it, and reads the message as untrusted: a child that the bundle took over
 * could write anything.
 */
#ifndef AIBOX_BUNDLE_CHECK_H
#define AIBOX_BUNDLE_CHECK_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "git/bundle_read.h"
#include "base/strvec.h"

struct buf;

/* The limits of one check, each with its documented default. */
struct bundle_limits {
	uint64_t max_object;   /* bytes: one object inflated (bundle_pack_opts) */
	uint64_t max_inflated; /* bytes: everything inflated (bundle_pack_opts) */
	uint64_t memory;       /* bytes the checker's address space may grow by */
	unsigned cpu_s;        /* the checker's CPU time, seconds */
	unsigned wall_s;       /* the check's wall-clock time, seconds */
};

#define BUNDLE_MEMORY_DEFAULT (256ULL << 20)
#define BUNDLE_CPU_DEFAULT    10
#define BUNDLE_WALL_DEFAULT   60

#define BUNDLE_LIMITS_INIT                                                                         \
	{                                                                                          \
		BUNDLE_MAX_OBJECT_DEFAULT, BUNDLE_MAX_INFLATED_DEFAULT, BUNDLE_MEMORY_DEFAULT,     \
		    BUNDLE_CPU_DEFAULT, BUNDLE_WALL_DEFAULT                                        \
	}

/*
 * Set one limit by name: "max-object", "max-inflated", "memory" (sizes:
 * bytes, or with K, M, G) or "cpu", "time" (whole seconds).  0, or -EINVAL
 * with "<what>" appended to err.
 */
int bundle_limits_set(struct bundle_limits *l, const char *name, const char *value,
                      struct buf *err);

/* A list "name=value,name=value" (the AIBOX_BUNDLE_LIMITS variable); as bundle_limits_set(). */
int bundle_limits_parse(struct bundle_limits *l, const char *list, struct buf *err);

struct bundle_check {
	/* Set by the caller. */
	int fd;                 /* the bundle, read from its first byte */
	struct strvec refs;     /* exactly these full refnames (none: any) */
	struct strvec bases;    /* the only prerequisites allowed (hex) */
	const char *repo_dir;   /* a thin pack's bases; NULL: none */
	const char *tmp_parent; /* not used: the check writes no file */
	uint64_t max_bytes;     /* the pack as stored */
	struct bundle_limits lim;

	/* The child. */
	pid_t pid;
	int go_fd, answer_fd;
	int64_t go_ms; /* when it was let go (bundle_check_go()); 0: not yet */
};

#define BUNDLE_CHECK_INIT                                                                          \
	{                                                                                          \
		.fd = -1, .refs = STRVEC_INIT, .bases = STRVEC_INIT, .max_bytes = UINT64_MAX,      \
		.lim = BUNDLE_LIMITS_INIT, .pid = -1, .go_fd = -1, .answer_fd = -1                 \
	}

/* The reason's room in the child's message, its NUL included; a longer one is cut there. */
#define BUNDLE_CHECK_REASON_MAX 512

/*
 * What the child writes: fixed size, every string NUL-terminated.  A wire
 * format between two processes (its reason a field of it, not a reason
 * kept): the parent moves the reason into a bundle_verdict's err.
 */
struct bundle_check_msg {
	int32_t ret;                          /* 0, BUNDLE_REFUSED or -errno */
	uint32_t version, objects, indexed;   /* as struct bundle_pack_result */
	char checksum[41];                    /* as struct bundle_pack_result */
	char reason[BUNDLE_CHECK_REASON_MAX]; /* a refusal's reason, header or pack */
	char tip[OID_HEX_MAX + 1];            /* the first ref's id (hex), when accepted */
};

/* The verdict, and what the child cost. */
struct bundle_verdict {
	struct bundle_check_msg m; /* m.reason not used: see err */
	struct buf err;            /* why refused (m.ret > 0) or failed (m.ret < 0) */
	long max_rss_kib;          /* the child's peak resident memory */
	double cpu_s;              /* its user + system time */
};

/* Free what v holds (its err). */
void bundle_verdict_clear(struct bundle_verdict *v);

/*
 * The check itself, in this process (the child runs it; test helpers too):
 * the header (bundle_header_read_fd, bundle_header_expect with c->refs and
 * c->bases), then the pack (bundle_pack_verify_fd within c->max_bytes and
 * c->lim's two caps), whose refs' tips must be in it unless they are one of
 * c->bases (a tip at the start commit: no changes).  Sets v up (release it
 * with bundle_verdict_clear()) and fills v->m and, unless it returns 0,
 * v->err (strerror() for an errno that has no words of its own); returns
 * v->m.ret.
 */
int bundle_check_here(const struct bundle_check *c, struct bundle_verdict *v);

/* Fork the child, which waits.  0 or -errno. */
int bundle_check_fork(struct bundle_check *c);

/*
 * Let the child go and return at once: it checks while the caller does
 * something else, and its wall limit counts from here.  0 (also when it was
 * let go before), or -errno when it is gone: bundle_check_run() then says so.
 */
int bundle_check_go(struct bundle_check *c);

/*
 * Let the child go unless bundle_check_go() did, wait for its verdict (at
 * most c->lim.wall_s from the go; sooner when *stop becomes non-zero, if
 * stop is given: -EINTR) and reap it.  Sets v up (release it with
 * bundle_verdict_clear()).  Returns v->m.ret: 0 accepted, BUNDLE_REFUSED
 * with the reason in v->err (also when a limit of the child was reached:
 * the limit is named), or -errno with a reason when the child ended without
 * a verdict.  Works after the caller's own sandbox_lockdown(): it only
 * writes, polls, kills and waits.
 */
int bundle_check_run(struct bundle_check *c, struct bundle_verdict *v,
                     const volatile sig_atomic_t *stop);

/* Stop the child if it runs (SIGKILL), reap it, close its pipes. */
void bundle_check_stop(struct bundle_check *c);

/* bundle_check_stop(), and free what c holds. */
void bundle_check_clear(struct bundle_check *c);

#endif
