/*
 * Name resolution, the one way a name is looked up by aibox-proxy and
 * aibox-broker alike (docs/proxy.md, "Name resolution"): a hosts table read
 * at start, then DNS for an absolute name, never under resolv.conf's search
 * domains.  For an event loop, a few threads run getaddrinfo() (which
 * blocks) and report back through an eventfd the loop polls; a caller
 * without one looks a name up at once (resolver_lookup_now()).
 *
 * The hosts table is read before any sandbox lockdown, because afterwards
 * nothing can be opened: /etc/hosts normally, or, for tests only, the file
 * named by AIBOX_PROXY_HOSTS (same format), which then replaces DNS too, so
 * a test decides what every name resolves to.  "localhost" always resolves
 * to 127.0.0.1 and ::1 (RFC 6761), whatever the table says.
 */
#ifndef AIBOX_RESOLVE_H
#define AIBOX_RESOLVE_H

#include <sys/socket.h>

struct buf;
struct resolver;
struct resolve_job;

#define RESOLVE_MAX_ADDRS 8
/* A name's bytes, at most, less one: a longer one does not exist. */
#define RESOLVE_NAME_MAX 256

struct resolve_result {
	int err; /* 0, or -ENOENT (no such name), -EAGAIN (try later), -EIO */
	int n;
	struct sockaddr_storage addr[RESOLVE_MAX_ADDRS]; /* port filled in */
	socklen_t len[RESOLVE_MAX_ADDRS];
};

/*
 * Read the hosts table (hosts_path, or /etc/hosts when NULL; a missing
 * /etc/hosts is an empty table) and start nthreads resolver threads when
 * use_dns.  NULL with a message in err on failure.
 */
struct resolver *resolver_new(const char *hosts_path, int use_dns, int nthreads, struct buf *err);

/*
 * The resolver every tool uses: AIBOX_PROXY_HOSTS's table in place of
 * /etc/hosts and DNS when that is set and not empty (tests only), else
 * /etc/hosts and DNS, with glibc's files read now (before a lockdown).
 * nthreads as resolver_new(); NULL with a message in err on failure.
 */
struct resolver *resolver_new_default(int nthreads, struct buf *err);

/* The fd to poll for readability: finished jobs are waiting. */
int resolver_fd(const struct resolver *r);

/*
 * Answer at once if possible: IP literals, localhost, names in the table, or
 * (without DNS) any name.  1 with res filled, 0 when a job is needed.
 */
int resolver_lookup(struct resolver *r, const char *name, int port, struct resolve_result *res);

/*
 * Look name up at once, blocking: resolver_lookup(), else DNS as a job
 * would (an absolute name), in the calling thread.  For a caller without an
 * event loop; res filled as a job's result is (res->err 0 or negative).
 */
void resolver_lookup_now(struct resolver *r, const char *name, int port,
                         struct resolve_result *res);

/* What a result's err says, for a message: "no such host name", ... */
const char *resolve_strerror(int err);

/*
 * Queue a DNS lookup of name as an absolute name (a final '.' added), so
 * that no search domain of resolv.conf is tried; NULL when too many are
 * queued already.
 */
struct resolve_job *resolver_submit(struct resolver *r, const char *name, int port, void *cookie);

/* Forget a job whose owner went away: its result is dropped. */
void resolver_cancel(struct resolver *r, struct resolve_job *job);

/* Hand each finished, not cancelled job's result to cb, then free the jobs. */
void resolver_collect(struct resolver *r, void (*cb)(void *cookie, struct resolve_result *res));

/*
 * Stop the threads and free everything once the last of them is out (a
 * thread inside getaddrinfo() finishes that first; its result is dropped).
 */
void resolver_free(struct resolver *r);

#endif
