/*
 * The proxy engine behind aibox-proxy: one thread, one epoll loop,
 * non-blocking sockets everywhere (its files: docs/internals.md, "The
 * proxy's files").
 *
 * It speaks HTTP/1.1 as a forward proxy:
 *   - CONNECT host:port opens a tunnel to an allowed host;
 *   - an absolute-URI request (GET http://host/path) is forwarded to an
 *     allowed host over plain HTTP;
 *   - requests for 127.0.0.1:3129 or localhost:3129 (absolute-URI, or inside
 *     a CONNECT to that address) are never connected to: the proxy answers
 *     them by forwarding /v1/... and /api/hello to the API upstream over TLS,
 *     with the client's credentials dropped and the real key (or the
 *     subscription's token: api_bearer) added, whatever
 *     host the Host header (or, inside the CONNECT, the target) names; only
 *     the methods in PROXY_API_METHODS pass, the rest get a 405;
 *   - absolute-URI requests for git.aibox.internal (port 80) are never
 *     connected to either: with a broker hand-off socket the connection and
 *     the bytes read from it go to aibox-broker (docs/internals.md, "Broker
 *     hand-off") and the proxy forgets it; without one they are refused.
 * Everything else gets a 403 with a one-line reason, and every request or
 * tunnel a line in the log.
 *
 * Memory per connection is bounded: request heads have a hard cap, a tunnel
 * holds no buffer of its own unless the receiving side is slow (and then
 * stops reading the sending side until it drains).
 *
 * Key forwarding keeps up to api_pool idle TLS connections to the upstream
 * (HTTP/1.1 keep-alive) and hands each to one request at a time; an idle one
 * is closed when the upstream closes it or sends anything, after
 * api_pool_idle_ms, or when it is checked before use and found closed.  A
 * GET without a body that fails on a reused connection before any byte of
 * the response is sent again on another one.
 */
#ifndef AIBOX_PROXY_H
#define AIBOX_PROXY_H

#include <openssl/ssl.h>
#include <stdint.h>

#include "base/guest_abi.h"
#include "proxy/log_line.h"

struct allow_list;
struct dep_cache;
struct proxy_report;
struct proxy_secrets;
struct task_ca;
struct resolver;
struct usage_prices;

#define PROXY_API_PORT GUEST_API_FORWARD_PORT
/* The methods key forwarding passes on (the ones the API uses); others get 405. */
#define PROXY_API_METHODS  "GET, POST, DELETE"
#define PROXY_API_POOL_MAX 64
#define PROXY_GIT_HOST     "git.aibox.internal"
/* A paid answer whose client went away is read for at most this long, and this many bytes. */
#define PROXY_DRAIN_MS  600000
#define PROXY_DRAIN_MAX (64ULL * 1024 * 1024)
/*
 * A request for an artifact another fill holds waits for it at most this
 * long (and never past the idle timeout), then fetches it unstored: a fill
 * goes as fast as its own client reads (docs/cache.md, "One download per
 * artifact").
 */
#define PROXY_FILL_WAIT_MS 30000
/*
 * The own metadata fetches one task may begin: far past what a real install
 * makes (npm ci of a 3,000-package lock file makes about 3,000), low enough
 * that a VM naming packages by the thousand cannot use the proxy to make
 * upstream requests by the hundred thousand.
 */
#define PROXY_OWN_FETCH_DEFAULT 20000
#define PROXY_OWN_FETCH_CEILING 100000

/* The API's error type in the answer to a request refused by a cap (docs/budget.md). */
#define PROXY_BUDGET_ERROR "invalid_request_error"

struct proxy_config {
	int listen_fd; /* listening, any address family; made non-blocking */
	int log_fd;    /* proxy.log, one line per request or tunnel; -1 for none */
	/*
	 * The most bytes written to log_fd (LOG_CAP_BYTES by default,
	 * common/base/log_cap.h), 0 for no cap.  Past it, one line says the
	 * log is full and the lines after it are counted instead
	 * (report->log_left_out); at the end one more line says how many were
	 * left out.  LOG_CAP_RESERVE of it is kept for those two lines.
	 */
	int64_t log_max;
	/* Every request and tunnel is counted here (common/proxy/proxy_report.h). */
	struct proxy_report *report;
	int signal_fd; /* a signalfd: readable means stop; -1 for none */
	const struct allow_list *allow;
	struct resolver *resolver;

	/*
	 * Key forwarding; off when api_key is NULL.  api_bearer: api_key is a
	 * subscription's OAuth token (secrets' "api bearer" one), sent as
	 * "Authorization: Bearer" instead of x-api-key, and the API's answers
	 * come back with its value replaced by its placeholder, as an
	 * intercepted answer's are.
	 */
	const char *api_key;
	int api_bearer;
	SSL_CTX *tls;
	char api_host[256]; /* upstream host (name or IP literal), port */
	int api_port;
	int api_pool;         /* idle upstream connections kept, 0 to PROXY_API_POOL_MAX */
	int api_pool_idle_ms; /* an idle pooled connection (the API's, an own fetch's) is closed
	                         after this */

	/*
	 * Spend (docs/budget.md), with key forwarding: when prices is set, the
	 * usage of every answer to a paid endpoint is counted in
	 * report->usage, and each cost is added to the day's ledger at
	 * ledger_fd (usage_ledger_add(); -1 for none).  A paid request is
	 * refused with 400 (PROXY_BUDGET_ERROR) once report->usage.nano reaches
	 * report->usage.cap_task, or the ledger's total reaches
	 * report->usage.cap_day (0: no cap).  A paid request is forwarded only
	 * while the caps hold with what the requests in flight may still cost
	 * (their reservations, in the ledger too), and waits until they do
	 * (docs/budget.md, "Caps").  user_ledger_fd (-1: none): the user's
	 * ledger under a policy's budget.day, written with ledger_fd's as one
	 * (usage_ledgers_sync()), whose total is held to report->usage.cap_user
	 * as the day's to cap_day (docs/budget.md, "The user's day under a
	 * policy").
	 */
	const struct usage_prices *prices;
	int ledger_fd;
	int user_ledger_fd;
	/*
	 * A paid request whose client went away after sending it whole: its
	 * answer is still read, for its usage, for at most drain_ms and
	 * drain_max bytes (PROXY_DRAIN_MS, PROXY_DRAIN_MAX by default).
	 */
	int drain_ms;
	uint64_t drain_max;
	int fill_wait_ms; /* PROXY_FILL_WAIT_MS by default */

	/*
	 * One end of a unix SOCK_SEQPACKET socket pair whose other end is
	 * aibox-broker's --handoff-fd; -1: requests for PROXY_GIT_HOST are refused.
	 */
	int broker_fd;

	/*
	 * Interception (docs/proxy.md, "Secrets and interception"): a CONNECT
	 * to a host of secrets->intercept is ended here with a certificate of
	 * ca (ALPN http/1.1 only) and its requests are relayed one by one to
	 * the host over TLS verified with itls, through the rules and the
	 * swap of common/proxy/secret_swap.h.  NULL secrets: every CONNECT is a
	 * tunnel.
	 */
	const struct proxy_secrets *secrets;
	const struct task_ca *ca;
	SSL_CTX *itls; /* client side, toward the intercepted hosts */
	SSL_CTX *isrv; /* server side, toward the VM */

	/*
	 * The dependency cache (docs/cache.md): on an intercepted host whose
	 * rule has a cache kind, the digests of the metadata passing through
	 * are learnt, and a request for an artifact whose digest is known is
	 * answered from cache, or forwarded and its verified bytes stored.
	 * NULL: nothing is cached.  An artifact fetched with a secret is kept
	 * under cache_scope (NULL: not kept).
	 */
	struct dep_cache *cache;
	const char *cache_scope;
	/*
	 * The most metadata fetches of the proxy's own one task begins, retries
	 * included (docs/cache.md, "Installs from a lock file"): 0 for
	 * PROXY_OWN_FETCH_DEFAULT; never more than PROXY_OWN_FETCH_CEILING.
	 */
	int own_fetch_max;

	int max_conns;          /* connections at once; more wait in the backlog */
	int header_timeout_ms;  /* a request head must arrive within this */
	int idle_timeout_ms;    /* a tunnel or an idle keep-alive connection */
	int connect_timeout_ms; /* name resolution plus connect plus TLS handshake */
};

/*
 * Run until the signal fd becomes readable: then end the open connections
 * (each logged and counted), write the log's last line, and return 0; or a
 * negative errno.
 */
int proxy_run(const struct proxy_config *cfg);

#endif
