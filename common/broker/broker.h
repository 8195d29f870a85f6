/*
 * aibox-broker's request handling: one git smart-HTTP request from a client
 * in the VM, checked against its remote's policy and forwarded to the
 * remote with the token (docs/broker.md).  The tool (tools/aibox-broker.c)
 * parses the options into a struct broker, listens or takes hand-offs, and
 * calls broker_serve() for each connection in a child process.
 *
 * Nothing here prints: what happens goes to the broker's log (one line per
 * operation, docs/broker.md "Log"), and the client gets an HTTP answer.
 */
#ifndef AIBOX_BROKER_H
#define AIBOX_BROKER_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "net/resolve.h"

enum broker_auth { BROKER_AUTH_BASIC, BROKER_AUTH_BEARER };

/* One --remote group. */
struct broker_remote {
	char *url;
	char *host; /* as in the URL, without brackets */
	char *port;
	char *path;     /* "/owner/repo.git", no trailing '/', may be "" */
	char *hostport; /* for the Host header */
	const char *token_env;
	char *token;
	enum broker_auth auth;
	const char *auth_user;
	char *auth_header; /* "Authorization: ...\r\n", "" without a token */
	int fetch;
	const char **push; /* branch patterns (gitproto.h branch_pattern_match) */
	size_t npush, push_alloc;
	/* its host looked up at start (resolver_lookup_now(), common/net/resolve.h) */
	struct resolve_result addrs;
	/*
	 * The token, the Basic credential and the token's base64 cores, in base64url's
	 * alphabet too (docs/broker.md, "What the client sees"): replaced, in any spelling
	 * scrub_find() finds (common/base/scrub.h), in whatever goes back to the client.
	 */
	struct buf *secrets;
	size_t nsecrets, secrets_alloc;
};

/*
 * What a child serving a request shows its parent, in memory they share
 * (docs/broker.md, "Limits"): since when (clock_ms(), common/base/clock.h) it has
 * been blocked reading from or writing to its client, or 0 when it is not.
 */
struct broker_slot {
	pid_t pid; /* the parent's to set and clear */
	int64_t client_wait_ms;
};

/*
 * The log's cap (docs/broker.md, "Log"): the bytes of lines written, at
 * most LOG_CAP_BYTES less LOG_CAP_RESERVE (common/base/log_cap.h), which is
 * kept for the two notes about the cap.  The count lives in memory the
 * broker and its children share, as every child writes its own lines.
 */
struct broker_log_count {
	int64_t used;     /* bytes of every line, written or left out */
	int64_t left_out; /* lines left out */
};

/* How long a client may send nothing, by default (--client-timeout). */
#define BROKER_CLIENT_TIMEOUT_MS 30000

struct broker {
	struct broker_remote *remotes;
	size_t nremotes, remotes_alloc;
	SSL_CTX *ssl_ctx; /* common/net/tls.h tls_client_ctx() */
	int log_fd;
	/* A read from the client that gets no byte for this long ends the request (408). */
	int64_t client_timeout_ms;
	struct broker_slot *slot;           /* the serving child's, or NULL */
	struct broker_log_count *log_count; /* shared with the children; NULL: no cap */
	/*
	 * Checks of the remote's refs after pushes that did not finish
	 * (docs/broker.md, "Log"), counted across the children in memory they
	 * share; NULL: no cap.
	 */
	int64_t *ref_checks;
};

/*
 * Set rm->auth_header from rm->token (none: ""), and remember the forms of
 * the token the remote could send back, for scrub_span() to find in any
 * spelling: the token, its Basic credential, and the base64 characters only
 * the token's bytes make at each of the three byte offsets
 * (common/base/base64.h base64_core(): a token of 8 bytes or more), in
 * base64's alphabet and in base64url's.
 */
void broker_remote_credentials(struct broker_remote *rm);

/*
 * One line "<UTC time> [<pid>] <text>" on br->log_fd; never fails.  With
 * br->log_count, a line that would take the log past its cap is left out
 * and counted, as is every line after it; the first one left out is
 * replaced by a note saying so.
 */
__attribute__((format(printf, 2, 3))) void broker_log(const struct broker *br, const char *fmt,
                                                      ...);

/*
 * The broker's last line, "stop", after a note counting the lines the cap
 * left out if it left any; both are written whatever the cap.
 */
void broker_log_stop(const struct broker *br);

/*
 * Serve the one request on the connected socket fd, answer it and close fd.
 * prefix[0..prefix_len) holds bytes already read from it (a hand-off's),
 * want_idx the remote the hand-off named, or -1.
 */
void broker_serve(const struct broker *br, int fd, const char *prefix, size_t prefix_len,
                  long want_idx);

#endif
