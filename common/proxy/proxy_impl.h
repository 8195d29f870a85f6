/*
 * The proxy engine's insides, shared by its modules and by nothing else
 * (common/proxy/proxy.h is the interface; docs/internals.md, "The proxy's
 * files", says which file holds what).
 *
 * One struct proxy per proxy_run(): the epoll set, the connections, the
 * pool of idle API connections and the log's count.  Each struct conn
 * points back at its proxy; a function given a connection reaches the
 * proxy and its config through c->px.
 *
 * Conventions of every px_ function that takes a connection: it may end
 * the connection (px_conn_kill(), or an answer of our own and
 * ST_CLOSING), so the caller looks at c->dead and c->state afterwards; a
 * dead connection is freed only by px_free_graveyard() after the round.
 */
#ifndef AIBOX_PROXY_IMPL_H
#define AIBOX_PROXY_IMPL_H

#include <openssl/ssl.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "net/http.h"
#include "proxy/proxy.h"
#include "proxy/secret_swap.h"
#include "net/resolve.h"
#include "config/usage.h"
#include "net/dep_cache.h"
#include "proxy/dep_rules.h"

struct blake2b;
struct buf;
struct dep_deb_reader;
struct go_zip_check;
struct ws_scrub;
struct ws_frames;

#define SCRATCH_SIZE (64 * 1024)
/* The bytes a Go module zip's check reads and inflates in one step of the loop. */
#define PX_ZIP_STEP (1u << 20)
/* The upstream's response head and body pass through a buffer this size. */
#define RBUF_SIZE (16 * 1024)
/* An answer of our own is flushed, then the connection lingers this long. */
#define LINGER_MS 2000
/* The metadata answers read for their digests at once, in all (docs/cache.md). */
#define PX_META_TOTAL (256ULL << 20)
/* The most plaintext a TLS record holds: an intercepted answer is written in whole ones. */
#define PX_RECORD 16384
/* An intercepted host's TLS reads ahead this much: several records a read. */
#define PX_READ_AHEAD (64 * 1024)
/* Host certificates kept for the next connections to the same host. */
#define PX_LEAVES 16
/*
 * A request waiting for another filler's lock stops waiting (and is
 * forwarded, not stored) once that fill has written nothing for this long:
 * a filler's client that stops reading holds the fill, and would hold every
 * task's request for the artifact until its idle timeout (docs/cache.md).
 */
#define PX_FILL_STALL_MS 5000
/*
 * Upstream TLS sessions of intercepted hosts, kept to resume (docs/proxy.md,
 * "What is reused"): this many host:port keys, each with at most
 * PX_SESS_EACH sessions, every one used once.
 */
#define PX_SESS_HOSTS 32
#define PX_SESS_EACH  4
/*
 * The reservation of a paid request whose cost nothing bounds (its body not
 * read yet, or one that does not bound its prompt): it runs alone under any
 * cap, as a reservation past every cap would (docs/budget.md, "Requests in
 * flight: reservations"); the ledger has it as it is, UINT64_MAX.
 */
#define PX_RESV_ALONE UINT64_MAX
/*
 * How long in all a paid request admitted under a cap may wait for its body
 * from the client: its reservation holds every other proxy of the day back
 * until the body is read (docs/budget.md, "Requests in flight: reservations").
 */
#define PX_BODY_WAIT_MS 5000
/*
 * And how long in all it may wait for the client to take its answer: past
 * it the answer is read to its end without the client, counted, and its
 * reservation ends with it (docs/budget.md).
 */
#define PX_ANSWER_WAIT_S  10
#define PX_ANSWER_WAIT_MS (PX_ANSWER_WAIT_S * 1000)
/*
 * After a paid request is refused for its stalled body, the proxy starts no
 * paid request of its own for this long, with others of the day in the
 * ledgers: more than the second they take to look again, so that a VM
 * stalling one request after another does not starve them.
 */
#define PX_STALL_PAUSE_MS 2500
/*
 * A paid request that ran alone this long (its body still coming) ends its
 * proxy's turn, as one whose body does not bound its prompt does: the
 * proxy's requests then wait in turn from its end (docs/budget.md,
 * "Waiting in turn").  A body sent at once runs alone for milliseconds.
 */
#define PX_TURN_MS 1000

enum state {
	ST_HEAD,    /* reading a request head from the client */
	ST_RESOLVE, /* waiting for the resolver */
	ST_CONNECT, /* non-blocking connect in progress */
	ST_TLS,     /* TLS handshake with the API upstream */
	ST_TUNNEL,  /* CONNECT: bytes both ways */
	ST_FWD,     /* one request forwarded, its response coming back */
	ST_CLOSING, /* our answer is being flushed, then a lingering close */
	ST_WAIT,    /* a paid request's head, waiting for the requests in flight (budget) */
	ST_CTLS,    /* interception: the TLS handshake with the client */
	ST_CWAIT,   /* an artifact another filler is storing: its head is read again */
};

enum side { SIDE_CLIENT, SIDE_UPSTREAM, SIDE_LISTEN, SIDE_SIGNAL, SIDE_RESOLVER, SIDE_POOL };

struct conn;

/* What epoll's data.ptr points at: a connection's side, or one of the proxy's own fds. */
struct handle {
	struct conn *c;
	enum side side;
};

/* Bytes that could not be written yet; allocated only while there are some. */
struct spill {
	char *p;
	size_t off, len, cap;
};

struct conn {
	struct proxy *px;
	struct handle hc, hu;
	struct conn *prev, *next, *gnext, *anext;
	int again; /* on the again list: bytes wait that no event will report */
	int more;  /* px_fwd_response() stopped after its rounds with work left */
	int cfd, ufd;
	int c_gone, u_gone; /* fd taken out of epoll after a hangup */
	SSL *ssl;
	uint32_t cev, uev; /* the epoll masks registered now */
	enum state state;
	int dead;
	int api_tunnel; /* inside a CONNECT to the key forwarding port */

	/* Interception: the client's TLS, ended here, and the host it is for. */
	SSL *cssl;
	int intercept; /* the handshake is done: requests come inside cssl */
	int cssl_rw, cssl_ww;
	char ihost[256];
	int iport;
	char used[200];          /* the secrets swapped into the request, comma-separated */
	int used_refused;        /* ... or the one whose placeholder got the request refused */
	int rechunk;             /* the answer goes to the client chunked, echoes replaced */
	int websocket;           /* the request asked for a WebSocket upgrade */
	struct ws_scrub *ws;     /* upgraded: the host's frames, read and masked (ws_scrub.h) */
	struct ws_frames *ws_vm; /* upgraded: the VM's frames, read (ws_scrub.h) */
	int continued;           /* px_form_wait() sent the 100 Continue */
	/* A POST form on a host whose rule lists methods, read as it is forwarded. */
	int form_on;
	struct swap_form_scan form;
	struct swap_echo *echo;
	/*
	 * The host's connection, kept idle between two requests of this client
	 * connection (out of epoll); -1 and NULL when there is none.
	 */
	int kfd;
	SSL *kssl;

	/* The request in progress. */
	int is_connect, is_api, head_method;
	char method[16];
	char host[256];
	int port;
	char what[200]; /* method and path, for the log */
	const struct allow_entry *entry;
	int status;
	int client_close, close_after;

	char *in; /* the client's bytes: heads and request bodies */
	size_t in_off, in_len;
	char *rb; /* the upstream's response (ST_FWD) */
	size_t rb_off, rb_len;
	struct spill to_client, to_upstream;
	size_t req_ready, resp_ready; /* framed body bytes waiting to be written */
	struct http_body reqb, respb;
	int req_done, resp_head_done, resp_done;
	int c_eof, u_eof, c_shut, u_shut;
	int ssl_rw, ssl_ww; /* SSL read wants write, SSL write wants read */
	int ssl_dry;        /* the last SSL read or handshake step wanted bytes from the socket */

	/* Bulk tunnel directions (0 client to upstream, 1 back): a pipe for splice. */
	int pipe_r[2], pipe_w[2];
	size_t pipe_len[2], pipe_cap[2];
	int64_t bulk_after_ms[2]; /* no pipe before this (the last try failed) */

	/* Key forwarding over a pooled upstream connection. */
	int reused;   /* the upstream connection came from the pool */
	int up_close; /* the upstream's response said Connection: close */
	char *replay; /* the upstream head, kept to send it again (no body) */
	size_t replay_len;

	/* Spend: a request to a paid endpoint, and what its answer reported. */
	int paid;
	struct usage_stream *us;        /* while the answer is read */
	int us_counted;                 /* the answer has reported usage */
	int us_final;                   /* its final usage came */
	struct usage_tokens req_tokens; /* the request's tokens so far (cumulative) */
	uint64_t req_nano;
	uint64_t iter_nano; /* its answer's iterations' (an advisor's...), beside req_nano */
	char req_model[USAGE_MODEL_MAX + 1];
	char fast_model[USAGE_MODEL_MAX + 1]; /* count_model()'s name for a fast request */
	unsigned price_flags;                 /* USAGE_PRICE_* its usage was counted at */
	unsigned unread_flags; /* settled with no usage read: reserve_flags(), its price since */
	unsigned it_flags[USAGE_ITERATIONS]; /* and each of its iterations' */
	struct usage_req rq;                 /* the request's body, read as it is forwarded */
	int admitted;                        /* forwarded under the caps: holds a reservation */
	uint64_t resv;   /* what it may still cost (its share of px->resv_sum), or PX_RESV_ALONE */
	int charged_max; /* its final usage never came: charged its max_tokens (2: and
	                    its prompt, none of its input having come either) */
	int64_t wait_until;  /* ST_WAIT: how long it may wait in all */
	int64_t wait_since;  /* a paid request: when it began waiting, wall-clock ms (0: not yet) */
	int ledger_wait;     /* ST_WAIT: the day's ledgers made it wait (it has a waiting line) */
	int64_t admitted_ms; /* a paid request: when it was admitted (its body then unread) */
	/*
	 * Admitted under a cap: waiting for the client (for its body, or to take
	 * its answer: cl_answer) since cl_since, and how long before, each.
	 */
	int cl_waiting, cl_answer;
	int64_t cl_since, body_waited, answer_waited;
	const char *drain_why; /* why it is drained, when not because the client went away */
	/* The client went away: the answer is read to its end for its usage. */
	int draining;
	int64_t drain_until;
	uint64_t drained;

	/* The dependency cache (common/proxy/proxy_cache.c); all NULL or 0 without it. */
	int cache_kind;                /* the host's CONFIG_CACHE_*, 0: not a cached host */
	const char *cache_note;        /* for the log: hit, miss, fill, busy, bypass, bad */
	char *ckey;                    /* an artifact's key in the store */
	char *cscope;                  /* and its scope (request_scope()) */
	const struct dep_digest *cdig; /* an artifact's digest: its bytes are checked */
	struct dep_digest cdig_v;      /* cdig's copy (the table moves as it grows) */
	int cdig_seen;                 /* the request was for an artifact (hit or miss) */
	void *cmd;                     /* EVP_MD_CTX *, checking them as they come */
	struct blake2b *b2; /* a PyPI file: the BLAKE2b-256 its path names, checked too */
	unsigned char b2md[32];
	int go_zip;                  /* a Go module zip: checked whole, from its fill */
	struct go_zip_check *zipck;  /* its check under way, once it is whole */
	struct buf *zip_tail;        /* the answer's last bytes, held back until it ends */
	struct dep_cache_fill *fill; /* storing them */
	struct dep_cache_entry *hit; /* a hit being served */
	uint64_t hit_left;
	int64_t cwait_until;        /* ST_CWAIT: how long it may wait for the other filler */
	uint64_t cwait_size;        /* the other filler's file, as last seen, */
	int64_t cwait_moved_ms;     /* and when it last grew (PX_FILL_STALL_MS) */
	struct buf *meta;           /* a metadata answer, kept whole for its digests */
	struct dep_deb_reader *deb; /* or a Debian index, read as it comes */
	size_t deb_held;            /* the bytes deb holds, in px->meta_bytes */
	const char *cache_why;      /* for the log: why an artifact was not kept */
	/* The proxy's own metadata fetch this connection is (no client): proxy_fetch.c. */
	struct px_fetch *own;
	/* ST_CWAIT: the own fetch this request waits for (counted in its waiters), or NULL. */
	struct px_fetch *waits;

	struct resolve_job *job;
	struct resolve_result addrs;
	int ai;
	int connect_err;

	uint64_t sent, received;
	int64_t start_ms, deadline_ms;
};

/* Idle connections kept for the proxy's own metadata fetches, all hosts together. */
#define PX_OWN_POOL 16
/* A pooled connection's key: "HOST:PORT SECRETS" (struct conn's host and used). */
#define PX_POOL_KEY (256 + 8 + 200)

/*
 * An idle TLS connection to an upstream, waiting for one request: the
 * API's, or one of the proxy's own fetches' (its key says for which).
 * A slot is free when fd < 0; its handle stays where epoll was told it is.
 */
struct pooled {
	struct handle h;
	int fd;
	SSL *ssl;
	int64_t since_ms;
	char key[PX_POOL_KEY];
};

struct proxy {
	const struct proxy_config *cfg;
	int epfd;
	struct conn *conns;
	struct conn *graveyard;  /* killed in this round, freed after it */
	struct conn *again_list; /* to pump once more before sleeping */
	int nconns, listening;
	int64_t accept_paused_until; /* after EMFILE: let connections close first */
	struct handle h_listen, h_signal, h_resolver;
	int64_t now_ms; /* clock_ms(), read once per round of the loop */
	/* Bytes this proxy wrote to the log, and whether it reached cfg->log_max. */
	int64_t log_written;
	int log_full;
	struct pooled pool[PROXY_API_POOL_MAX];
	struct pooled
	    opool[PX_OWN_POOL]; /* the own metadata fetches' (common/proxy/proxy_pool.c) */
	/*
	 * Spend: the reservations of this proxy's paid requests in flight
	 * (docs/budget.md): those that bound their cost added up, exactly, and
	 * how many bound nothing (PX_RESV_ALONE); px_reserved() in proxy_api.c.
	 */
	unsigned __int128 resv_sum;
	uint64_t resv_alone;
	uint64_t ledger_id;       /* this proxy's reservations in the ledger */
	uint64_t ledger_reserved; /* as last written there */
	int64_t ledger_synced_ms;
	int64_t paid_pause_until; /* no paid request starts before (PX_STALL_PAUSE_MS) */
	int64_t wait_floor;       /* wall-clock ms: its requests wait in turn from then on, not
	                             before (the end of its last request that ran alone, or
	                             that pause's) */
	uint64_t wait_line;       /* this proxy's waiting line in the ledgers (0: none) */
	int64_t wait_line_ms;     /* when it was last written */
	int budget_changed;       /* a reservation went down: the waiting requests look again */
	unsigned flags_seen;      /* USAGE_PRICE_* some answer's usage asked for, this proxy's or
	                             another's (the ledger's): reserved at since */
	unsigned ledger_flags;    /* the ledger's USAGE_PRICE_*, as last read there */
	/* Interception: the host certificates issued, the last few kept. */
	struct {
		char host[256];
		X509 *cert;
	} leaves[PX_LEAVES];
	int leaf_next;
	/* Interception: sessions of the hosts' TLS to resume, by "host:port" as verified. */
	struct {
		char key[264];
		SSL_SESSION *s[PX_SESS_EACH]; /* oldest first */
		int n;
		int64_t used_ms;
	} sess[PX_SESS_HOSTS];
	/* The digests the metadata fetched in this task gave (docs/cache.md). */
	struct dep_digests digests;
	uint64_t meta_bytes; /* the metadata answers being read, in all (PX_META_TOTAL at most) */
	/* The proxy's own metadata fetches, one a key (common/proxy/proxy_fetch.c). */
	struct px_fetch **fetches;
	size_t fetches_cap, fetches_nr;
	unsigned long long fetches_seed; /* its hash's (dep_key_seed()): the VM names the keys */
	int fetch_wake; /* a fetch ended: the requests waiting (ST_CWAIT) look again */
	struct px_fetch *fetch_q, **fetch_q_end; /* waiting for room in flight, oldest first */
	int fetches_live;                        /* own fetches in flight, PX_FETCH_LIVE at most */
	int fetches_begun;   /* own fetches begun this task, cfg->own_fetch_max at most */
	int fetch_max_said;  /* the log said that limit was reached */
	struct buf echo_out; /* an intercepted answer's bytes on their way, kept for the next */
	char scratch[SCRATCH_SIZE]; /* a tunnel's bytes on their way through */
};

/* ---- common/proxy/proxy.c: the loop and accept ---- */

/* Move c along as far as it goes now, then set its epoll masks. */
void px_pump(struct conn *c);
/*
 * A new connection waiting for its first request head, on the client fd
 * (added to epoll), or with fd -1 none (the proxy's own fetch); NULL when
 * epoll refuses fd.
 */
struct conn *px_conn_new(struct proxy *px, int fd);

/* ---- common/proxy/proxy_conn.c: connection life, answers of our own, I/O ---- */

/* Append n bytes to s (grown as needed). */
void px_spill_add(struct spill *s, const void *p, size_t n);
/* The bytes of s not written yet. */
size_t px_spill_pending(const struct spill *s);
/* Write out a spill.  1 when empty afterwards, 0 when bytes remain, <0 on error. */
int px_flush_spill(struct conn *c, struct spill *s, int to_client);

/*
 * Change fd's epoll mask to want when it differs from *cur (then updated);
 * nothing for a side taken out of epoll after a hangup.
 */
void px_set_events(struct proxy *px, int fd, struct handle *h, uint32_t *cur, uint32_t want);
/* Add fd to epoll with h; 0 or -1 with errno. */
int px_add_fd(struct proxy *px, int fd, struct handle *h, uint32_t events);

/*
 * Read or write one side, retrying EINTR: bytes moved, 0 at EOF, or
 * -errno (-EAGAIN: try when epoll says so; for TLS, c->ssl_rw and
 * c->ssl_ww say which way it waits).
 */
ssize_t px_cl_read(struct conn *c, void *p, size_t n);
ssize_t px_cl_write(struct conn *c, const void *p, size_t n);
ssize_t px_up_read(struct conn *c, void *p, size_t n);
ssize_t px_up_write(struct conn *c, const void *p, size_t n);

/* Wipe and free the upstream head kept for a replay. */
void px_drop_replay(struct conn *c);
/* Close the upstream side (fd, TLS, its buffers); the client side stays. */
void px_close_upstream(struct conn *c);
/* Close both sides and put c on the graveyard; a second call does nothing. */
void px_conn_kill(struct conn *c);
/* Free the connections killed in this round. */
void px_free_graveyard(struct proxy *px);
/* Forget the request in progress (its usage counted first); a new one starts now. */
void px_reset_request(struct conn *c);
/* Wait for the next request head (header or idle timeout). */
void px_enter_head(struct conn *c);
/*
 * Log the request with verdict and why, then answer the client ourselves
 * and close: code with json when given; else for a request for the API
 * (c->is_api) the API's error shape, {"type": "error", "error": {"type":
 * ..., "message": "aibox-proxy refused this request: why (...)"}}, whose
 * message Claude Code shows as its error; else the body "aibox-proxy: why"
 * in text.  c goes to ST_CLOSING.
 */
void px_respond_with(struct conn *c, int code, const char *verdict, const char *why,
                     const char *json);
void px_respond(struct conn *c, int code, const char *verdict, const char *why);
/* A 403 "refused". */
void px_refuse(struct conn *c, const char *why);

/* ---- common/proxy/proxy_log.c: proxy.log and the record's counts ---- */

/*
 * Count the request or tunnel c in the record (verdict "allowed",
 * "refused" or "failed") and write its line to the log, within its cap.
 * The usage of an answer under way is counted first.
 */
void px_log_line(struct conn *c, const char *verdict, const char *why);
/* A line of the proxy's own in the log, within its cap (err 0: none to add): common/ never prints.
 */
void px_log_note(struct proxy *px, const char *what, int err);
/* The last line, when the cap left lines out. */
void px_log_left_out(struct proxy *px);

/* ---- common/proxy/proxy_request.c: request heads and what each asks for ---- */

/* Read and handle request heads until c waits or leaves ST_HEAD. */
void px_read_head(struct conn *c);
/*
 * c->what: the method, and the path (or authority) when given, escaped for
 * the log; an empty one as "" (docs/proxy.md, "proxy.log"), which no escaped
 * field can be, so that every field of the line holds something.
 */
void px_set_what(struct conn *c, const char *method, size_t mlen, const char *path, size_t plen);

/* ---- common/proxy/proxy_forward.c: one request forwarded, its answer back ---- */

/* An intercepted request for a WebSocket upgrade: a GET with "Upgrade: websocket", any case. */
int px_wants_websocket(const struct conn *c, const struct http_head *h);
/*
 * Set up forwarding of one request to path: the upstream head goes into
 * to_upstream, the body follows as it comes; then the upstream is found.
 */
void px_start_forward(struct conn *c, const struct http_head *h, const char *path, size_t plen);
/* Client to upstream: the request head and body.  -1 when c is gone. */
int px_fwd_request(struct conn *c);
/* The request is answered: log it, then the next request, or close. */
void px_finish_request(struct conn *c);
/* Log the failure why and kill c. */
void px_abort_forward(struct conn *c, const char *why);
/* Upstream to client: the response.  -1 when c is gone or answered. */
int px_fwd_response(struct conn *c);
/*
 * The client of a forwarded request went away (why): a paid request sent
 * whole goes on reading its answer without it (draining; 0, also when it
 * was already), anything else ends (-1, c is gone).
 */
int px_client_gone(struct conn *c, const char *why);

/* ---- common/proxy/proxy_upstream.c: resolving, connecting, TLS ---- */

/*
 * Find an upstream for c: a pooled API connection (ST_FWD), or resolve
 * (ST_RESOLVE) and connect (ST_CONNECT, then ST_TLS for the API).
 */
void px_start_resolve(struct conn *c);
/* The resolver's answer for the connection cookie (resolver_collect()'s callback). */
void px_resolver_done(void *cookie, struct resolve_result *res);
/* The non-blocking connect's outcome: the next address, or connected. */
void px_connect_done(struct conn *c);
/* One step of the TLS handshake with the API upstream. */
void px_tls_step(struct conn *c);

/* ---- common/proxy/proxy_api.c: key forwarding, its pool and spend ---- */

/* 127.0.0.1 or localhost at PROXY_API_PORT. */
int px_is_api_authority(const char *host, int port);
/*
 * A request for the API (target t) passes the checks of key forwarding and
 * of spend: 1 with the target to forward in path (api_path_classify()), 0
 * when c was answered (refused, 405, budget), or 2 when a paid request must
 * wait for the requests in flight (docs/budget.md, "Caps"): c is left as it
 * was, for the caller to put in ST_WAIT.
 */
int px_api_request(struct conn *c, const struct http_head *h, const char *t, size_t tl,
                   struct buf *path);
/* The answer to a paid request began (h): read its usage as its body goes past. */
void px_usage_begin(struct conn *c, const struct http_head *h);
/*
 * The answer ended (or the request did): read what is left, count it, let
 * go.  A paid request sent whole whose final usage never came (cut, or a
 * bound hit) is charged its max_tokens of output; its reservation ends.
 */
void px_usage_done(struct conn *c);
/* A paid request's body is forwarded: read its max_tokens and model as it goes. */
void px_spend_body_begin(struct conn *c);
/* The paid request's body ended: its reservation from what the body says. */
void px_spend_body_done(struct conn *c);
/*
 * The paid request c, admitted under a cap, waits for the client (waiting
 * set), or the client moved: for more of its body (answer 0), or to take its
 * answer (answer 1; a call for the other phase than c's is ignored).  The
 * times add up to PX_BODY_WAIT_MS and PX_ANSWER_WAIT_MS.
 */
void px_spend_client_wait(struct conn *c, int answer, int waiting);
/*
 * Past PX_BODY_WAIT_MS, c is answered 408 (its reservation ends); past
 * PX_ANSWER_WAIT_MS, its answer is read to the end without the client
 * (px_client_gone()).  1 when it did either.
 */
int px_spend_client_late(struct conn *c);
/*
 * Once a round: write this proxy's reservations to the ledger when they
 * changed or are due a refresh, and let the waiting requests look again
 * when a reservation went down (or, with others in the ledger, each tick:
 * tick set).
 */
void px_spend_round(struct proxy *px, int tick);

/* ---- common/proxy/proxy_pool.c: idle upstream connections, the API's and the own fetches' ---- */

/* Every slot free (px->pool, of which api_pool are used, and px->opool). */
void px_pool_init(struct proxy *px);
/* Close every idle connection (at the stop), without close_notify. */
void px_pool_close_all(struct proxy *px);
/* Close the idle connections past api_pool_idle_ms, the API's and the own fetches'. */
void px_pool_sweep(struct proxy *px);
/*
 * Whether c's upstream TLS connection can carry another request: still open,
 * the host not closing it, the request sent whole, the answer's end known from
 * its framing and read whole, and nothing buffered or half-done on either side.
 * The one rule of the pools and of the intercepted hosts' kept connection.
 */
int px_upstream_reusable(const struct conn *c);
/*
 * Whether an idle upstream connection is still quiet: the host has sent
 * nothing (not even a close) and OpenSSL holds nothing unread.
 */
int px_upstream_quiet(int fd, const SSL *ssl);

/*
 * Keep c's upstream connection for a later request, if c is a request for
 * the API or an own fetch (c->own) and the connection is clean
 * (px_upstream_reusable()): the API's in px->pool, an own fetch's in
 * px->opool under c's host:port and c->used.  A full pool closes its
 * oldest.  Takes the fd and SSL away from c.
 */
void px_pool_put(struct conn *c);
/*
 * Give c the most recently used live idle connection of its pool, for an
 * own fetch one under exactly c's host:port and c->used.  1 when it got
 * one; 0 also for a connection of neither kind.
 */
int px_pool_take(struct conn *c);
/* epoll saw the idle connection p: closed by the upstream, or it spoke out of turn. */
void px_pool_event(struct pooled *p);

/* ---- common/proxy/proxy_git.c: the hand-off to aibox-broker ---- */

/* The host is PROXY_GIT_HOST, which the proxy never connects to. */
int px_is_git_host(const char *host);
/* A request for PROXY_GIT_HOST with path t: handed to the broker, or refused. */
void px_git_request(struct conn *c, const struct http_head *h, const char *t, size_t tl);

/* ---- common/proxy/proxy_intercept.c: interception ---- */

/* The CONNECT target c->host:c->port is a host to intercept. */
int px_intercepts(const struct conn *c);
/* Intercept the CONNECT of c: answer 200, then ST_CTLS. */
void px_intercept_start(struct conn *c);
/* One step of the TLS handshake with the client. */
void px_ctls_step(struct conn *c);
/*
 * A request on an intercepted connection (h, target t of tl bytes): the
 * rules, then the swap, then forwarded (or refused: 403).
 */
void px_intercept_request(struct conn *c, const struct http_head *h, const char *t, size_t tl);
/*
 * The rules on c's host and port for the request h (t, tl bytes: its
 * origin-form target; a form body, when px_form_wait() held the head for
 * it, at c->in + c->in_off), intercepted or a plain http:// one: 1 when
 * they let it through (or there are none), else 0 with c refused.
 */
int px_rules_check(struct conn *c, const struct http_head *h, const char *t, size_t tl);
/*
 * Whether the complete head h waits in c->in for its body: a POST form
 * (swap_form_kind()) by Content-Length that fits in c->in with its head
 * and has not all come, when there are rules, so that px_rules_check()
 * reads it before anything is forwarded.  Its 100 Continue is sent here.
 */
int px_form_wait(struct conn *c, const struct http_head *h);
/*
 * A form body px_rules_check() could not read before it is forwarded
 * (c->form_on): px_form_content() is its http_body content callback, and
 * px_form_cut(), after each feed and before those bytes are written, ends
 * the request (403, or cut when the answer began) once it names a method:
 * 1 when it did (c is answered or gone), else 0.
 */
void px_form_content(void *ctx, const char *p, size_t n);
int px_form_cut(struct conn *c);
/*
 * A plain http:// request h (its head just before c->in + c->in_off) that
 * holds a secret's placeholder: refused, the secret named as for a
 * placeholder toward another host (1); else 0.
 */
int px_plain_placeholder(struct conn *c, const struct http_head *h);
/*
 * Whether h (a request's or an answer's head) says its body comes encoded:
 * a Content-Encoding other than identity.
 */
int px_head_encoded(const struct http_head *h);
/*
 * Whether c's answer h, with a body that echoes are looked for in, cannot
 * be read for them: there are secrets, and its body comes encoded (the host
 * compressed it, though identity was asked for).
 */
int px_echo_unreadable(const struct conn *c, const struct http_head *h);
/* The answer's head on an intercepted connection: echoes replaced in b. */
void px_intercept_head(struct conn *c, struct buf *b);
/*
 * Body bytes of an intercepted answer (payload p, n bytes; done at its end)
 * to the client, chunked, echoes replaced, into c->to_client.
 */
void px_intercept_body(struct conn *c, const char *p, size_t n, int done);
/* Free c's interception state (the client's TLS, the echo filter, a kept connection). */
void px_intercept_free(struct conn *c);
/* Keep the sessions of the hosts' TLS (on cfg->itls) for px_sess_offer(). */
void px_sess_setup(struct proxy *px);
/* Free every session kept. */
void px_sess_free(struct proxy *px);
/*
 * c's new TLS to its host (c->ssl): offer a session kept for exactly
 * c->host:c->port, taken out of the cache (a session is offered once).
 */
void px_sess_offer(struct conn *c);
/*
 * The handshake with c's host is done: a resumed session's certificate is
 * checked again against c->host (chain verified, host name or address).
 * 0, or -1 with why in why.
 */
int px_sess_check(struct conn *c, struct buf *why);
/*
 * The request is answered and the client connection goes on: keep the
 * host's connection for its next request when it is clean (the exchange
 * complete both ways, nothing unread, the host willing, not upgraded).
 * Takes c->ufd and c->ssl out of epoll into c->kfd and c->kssl.
 */
void px_keep_upstream(struct conn *c);
/*
 * Give c the connection kept by px_keep_upstream() when nothing at all is
 * waiting on it (a host that sent bytes after its answer, or closed, is
 * dropped).  1 when c->ufd and c->ssl are that connection, in epoll.
 */
int px_take_kept(struct conn *c);
/* Close a kept connection, without close_notify. */
void px_drop_kept(struct conn *c);

/* ---- common/proxy/proxy_cache.c: the dependency cache (docs/cache.md) ---- */

/*
 * The rule c's cache kind is from: the first rule on c's host with a cache
 * (its prefix, for go), or NULL when none is or the proxy caches nothing.
 */
const struct config_rule *px_cache_rule(const struct conn *c);
/*
 * An intercepted request (h, target t of tl bytes) after the rules and the
 * swap: on a cached host, an artifact whose digest this task learnt is
 * answered from the store (1: c serves the hit, ST_FWD with c->hit), or
 * set up to be checked and stored as it is forwarded; metadata is set up to
 * be read for its digests.  0: forward it.
 */
int px_cache_request(struct conn *c, const struct http_head *h, const char *t, size_t tl);
/* The answer's head came (h): what is checked, stored or read depends on it. */
void px_cache_head(struct conn *c, const struct http_head *h);
/*
 * The answer's payload (p, n bytes; done at its end), before it goes to the
 * client.  -1 when c was cut (the artifact's digest did not match: the
 * client never gets the answer's end; an own fetch's answer passed its cap:
 * px_fetch_body()); 1 when done and the check goes on in steps
 * (px_cache_zip_step(): the caller holds these bytes back until it ends);
 * else 0.
 */
int px_cache_body(struct conn *c, const char *p, size_t n, int done);
/*
 * After px_cache_body() said 1 (a Go module zip whole, its h1 to be worked
 * out from its files): work on it one step (about PX_ZIP_STEP bytes read
 * and inflated), so that other connections move between steps.  1 while
 * there is more, 0 once it matched (the answer's end, held back, may go to
 * the client), -1 when c was cut as px_cache_body() cuts it.
 */
int px_cache_zip_step(struct conn *c);
/* Serve more of a hit (c->hit); the request finishes when it is all sent. */
void px_cache_step(struct conn *c);
/* Drop c's cache state: a fill under way is aborted, a hit closed. */
void px_cache_end(struct conn *c);

/* ---- common/proxy/proxy_fetch.c: the proxy's own metadata fetches (docs/cache.md) ---- */

/* The most keys one task fetches metadata for; past that, nothing more is fetched. */
#define PX_FETCH_MAX 100000
/*
 * The own fetches in flight at once, all hosts together (the pool's size):
 * more wait in a queue, started in the order they were asked for as those
 * in flight end (docs/cache.md, "Installs from a lock file").
 */
#define PX_FETCH_LIVE PX_OWN_POOL

/*
 * A key's fetch that failed for a cause that may pass (no answer, a cut,
 * a 5xx, 408 or 429) is started again by a later request, at most
 * PX_FETCH_TRIES fetches a key per task, the n-th retry no sooner than
 * PX_FETCH_BACKOFF_MS << (n - 1) after the failure (docs/cache.md, "Installs
 * from a lock file").  Any other answer is the key's for the whole task.
 */
#define PX_FETCH_TRIES      3
#define PX_FETCH_BACKOFF_MS 1000

/* One metadata fetch of the proxy's own, by key ("HOST:PORT PATH"). */
struct px_fetch {
	char *key;
	int state;    /* PX_FETCH_* */
	int ok;       /* its answer was a 200, read whole for its digests */
	int too_big;  /* its answer was over DEP_META_MAX: the upstream's word, like a 404 */
	uint64_t got; /* PX_FETCH_PENDING: its answer's payload read, DEP_META_MAX at most */
	int waiters;  /* the requests waiting for it (their c->waits) */
	int tries;    /* fetches begun for the key, at most PX_FETCH_TRIES */
	int64_t
	    retry_at; /* PX_FETCH_FAILED: a later request may start it again from then (0: never) */
	/* PX_FETCH_QUEUED: what its start needs (the asking request's), and the next in the queue.
	 */
	char host[256];
	int port, kind;
	char *path, *auth; /* auth: the Authorization header's value, or NULL */
	struct px_fetch *qnext;
};
enum { PX_FETCH_QUEUED, PX_FETCH_PENDING, PX_FETCH_DONE, PX_FETCH_FAILED };

/*
 * An artifact request on a cached host (h, its target t of tl bytes, '!'
 * unescaped for go) whose digest this task has not learnt: 0 when it has
 * no shape to fetch metadata for (it goes on as before); 1 when the
 * metadata it names is being fetched or waits for room in flight (begun
 * now, or by an earlier request, or again after a failure's backoff): c is
 * to wait (ST_CWAIT) and look again when it ended; 2 when that fetch ended
 * without teaching it and is not due again, or none can begin (the task's
 * limit of own fetches reached, said once in the log): c is forwarded and
 * not stored, c->cache_why says why.  With 1, c counts as waiting for that
 * fetch (c->waits) until px_fetch_unwait(c).
 */
int px_fetch_meta(struct conn *c, const struct http_head *h, const char *t, size_t tl);
/*
 * c waits for no own fetch any more (it leaves ST_CWAIT, is forwarded, or
 * dies).  A queued fetch that no request waits for when its turn comes is
 * dropped, never started, and does not count toward the task's limit.
 */
void px_fetch_unwait(struct conn *c);
/* The own fetch c ends (c is dead): its record is done, and the waiting requests look again. */
void px_fetch_end(struct conn *c);
/*
 * n more bytes of the own fetch c's answer's payload (whatever its status):
 * past DEP_META_MAX in all, c is cut at once (logged, its upstream
 * connection closed, never pooled) and the answer stands for the task like
 * a 404 (docs/cache.md, "Installs from a lock file"), so an endless answer
 * costs that cap and no more.  1 when c was cut (it is dead), else 0.
 */
int px_fetch_body(struct conn *c, size_t n);
/* The answer of the own fetch c was read whole for its digests. */
void px_fetch_learnt(struct conn *c);
/* Once a fetch ended: start the queued ones there is room for, and let the requests waiting
 * (ST_CWAIT) look again. */
void px_fetch_wake(struct proxy *px);
/* Free the fetch records. */
void px_fetch_free(struct proxy *px);

/* ---- common/proxy/proxy_tunnel.c: the tunnel relay ---- */

/* Bytes of one tunnel direction not yet written to its destination. */
size_t px_tunnel_pending(const struct conn *c, int from_client);
/*
 * Move bytes from one side to the other (an upgraded intercept's through
 * c->ws_vm and c->ws).  -1 when the connection failed, or was ended
 * (c->dead) for a frame ws_scrub.h refused.
 */
int px_relay(struct conn *c, int from_client);
/*
 * End an upgraded intercept whose VM (from_vm) or host sent a frame
 * ws_scrub.h refused (why), logged; what passed before it is written to
 * each side as far as it goes now.
 */
void px_ws_failed(struct conn *c, int from_vm, const char *why);
/* Close direction d's pipe, if it has one. */
void px_drop_pipe(struct conn *c, int d);
/* A tunnel quiet for PIPE_IDLE_MS gives its empty pipes back. */
void px_tunnel_sweep(struct conn *c);

#endif
