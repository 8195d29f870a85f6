/*
 * The proxy's record: what the VM reached through aibox-proxy, counted in the
 * proxy and handed to its parent as one JSON object at the end
 * (aibox-proxy --report-fd N; the format is in docs/internals.md,
 * "aibox-proxy's record").
 * aibox-task prints "the VM connected to" from it: unlike proxy.log, whose
 * size the VM drives, it is small and bounded whatever the VM does.
 *
 * Both sides use this module: the proxy counts with proxy_report_count() and
 * writes with proxy_report_json(); aibox-task reads with proxy_report_parse().
 *
 * Bounds: at most PROXY_REPORT_HOSTS hosts are listed by name, in order of
 * first use; distinct hosts past them are counted (more_hosts, exactly up to
 * PROXY_REPORT_MORE of them, then more_hosts_at_least is set and the count
 * stops growing), and so are their requests (more_allowed).  Memory: the
 * listed hosts, and a set of 64-bit hashes for the rest (PROXY_REPORT_MORE
 * * 16 bytes at most, allocated when the list first overflows).
 */
#ifndef AIBOX_PROXY_REPORT_H
#define AIBOX_PROXY_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "config/usage.h"

struct buf;

/* Readers refuse other versions; new fields may appear without a new version. */
#define PROXY_REPORT_VERSION 1
#define PROXY_REPORT_HOSTS   256
#define PROXY_REPORT_MORE    16384
/* The record's size is far below this; a reader refuses more. */
#define PROXY_REPORT_MAX      (1024 * 1024)
#define PROXY_REPORT_HOST_MAX 263 /* "[" 253 "]:" 5 digits, without the NUL */

struct proxy_report_host {
	char name[PROXY_REPORT_HOST_MAX + 1]; /* "host:port" as proxy.log writes it */
	uint64_t allowed;                     /* requests and tunnels allowed */
	uint64_t sent, received;              /* the client's bytes, as in proxy.log */
};

enum proxy_verdict { PROXY_ALLOWED, PROXY_REFUSED, PROXY_FAILED };

/* Which secret went to which host (docs/proxy.md, "Secrets and interception"). */
#define PROXY_REPORT_SECRETS     256
#define PROXY_REPORT_SECRET_NAME 64
struct proxy_report_secret {
	char name[PROXY_REPORT_SECRET_NAME + 1]; /* the variable's */
	char host[PROXY_REPORT_HOST_MAX + 1];    /* "host:port" as proxy.log writes it */
	uint64_t sent;                           /* requests that carried its value there */
	uint64_t refused; /* requests refused because its placeholder was sent there */
};

struct proxy_report {
	struct proxy_report_host *hosts; /* at most PROXY_REPORT_HOSTS */
	size_t nhosts;
	uint64_t more_hosts;               /* distinct hosts allowed past the list */
	int more_hosts_at_least;           /* more_hosts stopped at PROXY_REPORT_MORE */
	uint64_t more_allowed;             /* requests and tunnels to those */
	uint64_t allowed, refused, failed; /* every request and tunnel, by verdict */
	uint64_t log_left_out;             /* lines proxy.log did not get (its cap) */
	/*
	 * What the key forwarding spent (common/config/usage.h), under "usage" in the
	 * record when usage.present is set (counting was on); a record without
	 * it reads as usage.present == 0.
	 */
	struct usage_count usage;
	/* The secrets' pairs, in order of first use; past PROXY_REPORT_SECRETS, not listed. */
	struct proxy_report_secret *secrets;
	size_t nsecrets;
	uint64_t more_secrets; /* requests with a secret past the list */
	/*
	 * The dependency cache (docs/cache.md), under "cache" in the record when
	 * any is not 0: artifacts served from the store (hits) and fetched from
	 * upstream (misses), the bytes served from the store and the artifacts'
	 * bytes from upstream, and the artifacts refused for their digest.
	 */
	uint64_t cache_hits, cache_misses, cache_bytes, cache_upstream, cache_bad;
	/*
	 * The proxy's own metadata fetches (docs/cache.md, "Installs from a lock
	 * file"), whatever their verdict, and their answers' bytes (received, as
	 * in their log lines): under "cache" too.  They are not the VM's
	 * requests, so no other count of the record has them.
	 */
	uint64_t own_fetches, own_fetch_bytes;

	/* The proxy's side only: hashes of the hosts counted in more_hosts. */
	uint64_t *seen;
	size_t seen_slots;
};

#define PROXY_REPORT_INIT                                                                          \
	{                                                                                          \
		0                                                                                  \
	}

/*
 * Count one request or tunnel of the VM's (one proxy.log line) with its verdict.  name is
 * its "host:port" (NULL when the request did not get that far); only allowed
 * ones are counted per host.  Never fails; memory stays within the bounds
 * above.
 */
void proxy_report_count(struct proxy_report *r, enum proxy_verdict v, const char *name,
                        uint64_t sent, uint64_t received);

/*
 * Count one request that carried the secret name's value to host (refused
 * 0), or was refused for its placeholder there (refused 1).  Names longer
 * than PROXY_REPORT_SECRET_NAME are cut.  Never fails.
 */
void proxy_report_secret(struct proxy_report *r, const char *name, const char *host, int refused);

/* Append the record, one JSON object and a newline, to out (usage included). */
void proxy_report_json(const struct proxy_report *r, struct buf *out);

/*
 * Read a record from p[0..n) (at most PROXY_REPORT_MAX bytes): its version
 * must be PROXY_REPORT_VERSION, the fields above present with their types,
 * at most PROXY_REPORT_HOSTS hosts, each name printable ASCII without spaces
 * and at most PROXY_REPORT_HOST_MAX bytes.  0, or -EINVAL with the reason in
 * err (r is then empty).
 */
int proxy_report_parse(const char *p, size_t n, struct proxy_report *r, struct buf *err);

void proxy_report_release(struct proxy_report *r);

#endif
