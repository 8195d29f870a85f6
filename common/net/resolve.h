/*
 * Name resolution for an event loop: a hosts table read at start and a few
 * threads that run getaddrinfo() (which blocks), reporting back through an
 * eventfd the loop polls.
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

/* The fd to poll for readability: finished jobs are waiting. */
int resolver_fd(const struct resolver *r);

/*
 * Answer at once if possible: IP literals, localhost, names in the table, or
 * (without DNS) any name.  1 with res filled, 0 when a job is needed.
 */
int resolver_lookup(struct resolver *r, const char *name, int port, struct resolve_result *res);

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
