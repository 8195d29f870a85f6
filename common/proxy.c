#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "allow.h"
#include "broker_req.h"
#include "buf.h"
#include "err.h"
#include "handoff.h"
#include "http.h"
#include "proxy_report.h"
#include "resolve.h"
#include "spawn.h"
#include "tls.h"
#include "usage.h"
#include "banned.h"

#define SCRATCH_SIZE (64 * 1024)
#define RBUF_SIZE (16 * 1024)
#define LINGER_MS 2000
#define MAX_EVENTS 256
/* A tunnel direction that moved this much goes over a pipe with splice(2). */
#define BULK_BYTES (1024 * 1024)
#define PIPE_BYTES (1024 * 1024)
/* A pipe that small is no better than the scratch buffer: stay with read and write. */
#define PIPE_MIN_BYTES SCRATCH_SIZE
/* A bulk direction with an empty pipe gives it back after this long without bytes. */
#define PIPE_IDLE_MS 2000
/* After a pipe could not be had at full size, try again after this long. */
#define PIPE_RETRY_MS 1000

enum state {
	ST_HEAD,    /* reading a request head from the client */
	ST_RESOLVE, /* waiting for the resolver */
	ST_CONNECT, /* non-blocking connect in progress */
	ST_TLS,	    /* TLS handshake with the API upstream */
	ST_TUNNEL,  /* CONNECT: bytes both ways */
	ST_FWD,	    /* one request forwarded, its response coming back */
	ST_CLOSING, /* our answer is being flushed, then a lingering close */
};

enum side { SIDE_CLIENT, SIDE_UPSTREAM, SIDE_LISTEN, SIDE_SIGNAL, SIDE_RESOLVER, SIDE_POOL };

struct conn;

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
	struct handle hc, hu;
	struct conn *prev, *next, *gnext, *anext;
	int again; /* on the again list: TLS holds bytes epoll cannot see */
	int cfd, ufd;
	int c_gone, u_gone; /* fd taken out of epoll after a hangup */
	SSL *ssl;
	uint32_t cev, uev; /* the epoll masks registered now */
	enum state state;
	int dead;
	int api_tunnel; /* inside a CONNECT to the key forwarding port */

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

	/* Bulk tunnel directions (0 client to upstream, 1 back): a pipe for splice. */
	int pipe_r[2], pipe_w[2];
	size_t pipe_len[2], pipe_cap[2];
	int64_t bulk_after_ms[2]; /* no pipe before this (the last try failed) */

	/* Key forwarding over a pooled upstream connection. */
	int reused;	  /* the upstream connection came from the pool */
	int up_close;	  /* the upstream's response said Connection: close */
	char *replay;	  /* the upstream head, kept to send it again (no body) */
	size_t replay_len;

	/* Spend: a request to a paid endpoint, and what its answer reported. */
	int paid;
	struct usage_stream *us; /* while the answer is read */
	int us_counted;		 /* the answer has reported usage */
	struct usage_tokens req_tokens;
	uint64_t req_nano;
	char req_model[USAGE_MODEL_MAX + 1];

	struct resolve_job *job;
	struct resolve_result addrs;
	int ai;
	int connect_err;

	uint64_t sent, received;
	int64_t start_ms, deadline_ms;
};

static const struct proxy_config *cfg;
static int epfd;
static struct conn *conns;
static struct conn *graveyard; /* killed in this round, freed after it */
static struct conn *again_list;	/* to pump once more before sleeping */
static int nconns, listening;
static int64_t accept_paused_until; /* after EMFILE: let connections close first */
static struct handle h_listen = { NULL, SIDE_LISTEN }, h_signal = { NULL, SIDE_SIGNAL },
		     h_resolver = { NULL, SIDE_RESOLVER };
static char scratch[SCRATCH_SIZE];
static int64_t now_ms;

/*
 * Idle TLS connections to the API upstream, each waiting for one request.
 * A slot is free when fd < 0; its handle stays where epoll was told it is.
 */
struct pooled {
	struct handle h;
	int fd;
	SSL *ssl;
	int64_t since_ms;
};
static struct pooled pool[PROXY_API_POOL_MAX];

static void update_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the log ---- */

/* Copy s into out, printable ASCII only (the rest as \xNN), at most max bytes. */
static void log_escape(struct buf *out, const char *s, size_t n, size_t max)
{
	size_t start = out->len;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (out->len - start >= max) {
			buf_addstr(out, "...");
			return;
		}
		if (ch > 0x20 && ch < 0x7f && ch != '\\')
			buf_addch(out, ch);
		else
			buf_addf(out, "\\x%02x", ch);
	}
}

/* Bytes this proxy wrote to the log, and whether it reached cfg->log_max. */
static int64_t log_written;
static int log_full;

static void log_time(struct buf *b)
{
	struct timespec ts;
	struct tm tm;
	char tbuf[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	buf_addf(b, "%s.%03ldZ", tbuf, ts.tv_nsec / 1000000);
}

static void log_write(const struct buf *b)
{
	if (write_all(cfg->log_fd, b->buf, b->len) < 0) {
		/* A full disk must not stop the proxy; the line is lost. */
	}
	log_written += (int64_t)b->len;
}

/*
 * A line that would take the log past its cap is counted instead; the first
 * one makes a note (from the reserve), so that a reader of the log sees where
 * it stops.  1 when the line may be written.
 */
static int log_room(size_t len)
{
	struct buf b = BUF_INIT;

	if (!cfg->log_max ||
	    (!log_full && log_written + (int64_t)len <= cfg->log_max - PROXY_LOG_RESERVE))
		return 1;
	if (!log_full) {
		log_full = 1;
		log_time(&b);
		buf_addf(&b,
			 " note - (proxy.log reached its cap of %lld bytes: the lines after this "
			 "one are left out, and counted in the last line)\n",
			 (long long)cfg->log_max);
		log_write(&b);
		buf_release(&b);
	}
	if (cfg->report)
		cfg->report->log_left_out++;
	return 0;
}

/* The last line, when the cap left lines out. */
static void log_left_out(void)
{
	struct buf b = BUF_INIT;

	if (cfg->log_fd < 0 || !log_full || !cfg->report)
		return;
	log_time(&b);
	buf_addf(&b, " note - (%llu lines left out: proxy.log reached its cap of %lld bytes)\n",
		 (unsigned long long)cfg->report->log_left_out, (long long)cfg->log_max);
	log_write(&b);
	buf_release(&b);
}

/* A line of the proxy's own in the log, within its cap: common/ never prints. */
static void log_note(const char *what, int err)
{
	struct buf b = BUF_INIT;

	if (cfg->log_fd < 0)
		return;
	log_time(&b);
	buf_addf(&b, " note - (%s: %s)\n", what, strerror(err));
	if (log_room(b.len))
		log_write(&b);
	buf_release(&b);
}

/* The host as the log and the record name it: "host:port", "[v6]:port". */
static void host_name(struct buf *b, const struct conn *c)
{
	int v6 = strchr(c->host, ':') != NULL;

	if (v6)
		buf_addch(b, '[');
	log_escape(b, c->host, strlen(c->host), 255);
	if (v6)
		buf_addch(b, ']');
	buf_addf(b, ":%d", c->port);
}

static void usage_done(struct conn *c);

static void log_line(struct conn *c, const char *verdict, const char *why)
{
	struct buf b = BUF_INIT, name = BUF_INIT;

	usage_done(c);
	if (c->host[0])
		host_name(&name, c);
	if (cfg->report)
		proxy_report_count(cfg->report,
				   !strcmp(verdict, "allowed")	 ? PROXY_ALLOWED
				   : !strcmp(verdict, "refused") ? PROXY_REFUSED
								 : PROXY_FAILED,
				   c->host[0] ? name.buf : NULL, c->sent, c->received);
	if (cfg->log_fd < 0)
		goto out;
	log_time(&b);
	/*
	 * The verdict first, then the host, then what the client sent: a parser
	 * takes the verdict and the host from fixed fields before any field the
	 * client controls (a method spelled "allowed" cannot pass for one).
	 */
	buf_addf(&b, " %s %s", verdict, c->host[0] ? name.buf : "-");
	if (c->what[0])
		buf_addf(&b, " %s", c->what);
	if (why)
		buf_addf(&b, " (%s)", why);
	if (c->status)
		buf_addf(&b, " status=%d", c->status);
	if (c->us_counted) {
		/* The model name passed usage_stream's check: printable, no spaces. */
		buf_addf(&b, " model=%s", c->req_model[0] ? c->req_model : "-");
		for (int k = 0; k < USAGE_KINDS; k++)
			buf_addf(&b, " %s=%llu", usage_kind_names[k],
				 (unsigned long long)c->req_tokens.n[k]);
		buf_addstr(&b, " usd=");
		usage_format_usd(&b, c->req_nano);
	}
	buf_addf(&b, " sent=%llu received=%llu duration=%.3fs\n", (unsigned long long)c->sent,
		 (unsigned long long)c->received, (double)(now_ms - c->start_ms) / 1000.0);
	if (log_room(b.len))
		log_write(&b);
out:
	buf_release(&b);
	buf_release(&name);
}

/* ---- spills ---- */

static void spill_add(struct spill *s, const void *p, size_t n)
{
	if (!n)
		return;
	if (s->off && s->off == s->len)
		s->off = s->len = 0;
	if (s->len + n > s->cap) {
		size_t want = s->len - s->off + n;
		char *np = xmalloc(want);

		if (s->len > s->off)
			memcpy(np, s->p + s->off, s->len - s->off);
		free(s->p);
		s->p = np;
		s->len -= s->off;
		s->off = 0;
		s->cap = want;
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
}

static size_t spill_pending(const struct spill *s)
{
	return s->len - s->off;
}

static void spill_free(struct spill *s)
{
	if (s->p)
		OPENSSL_cleanse(s->p, s->cap); /* it may have held the key */
	free(s->p);
	memset(s, 0, sizeof(*s));
}

/* ---- epoll ---- */

static void set_events(int fd, struct handle *h, uint32_t *cur, uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.ptr = h };

	if (fd < 0 || *cur == want || (h->c && ((h == &h->c->hc && h->c->c_gone) ||
						 (h == &h->c->hu && h->c->u_gone))))
		return;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		*cur = want;
}

static int add_fd(int fd, struct handle *h, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = h };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void drop_replay(struct conn *c)
{
	if (c->replay) {
		OPENSSL_cleanse(c->replay, c->replay_len); /* it holds the key */
		free(c->replay);
	}
	c->replay = NULL;
	c->replay_len = 0;
}

/* ---- the pool of idle API upstream connections ---- */

static void pool_close(struct pooled *p)
{
	if (p->fd < 0)
		return;
	/* No close_notify: the peer may be gone, and a write could block. */
	SSL_set_quiet_shutdown(p->ssl, 1);
	SSL_free(p->ssl);
	close(p->fd); /* leaves epoll with it */
	p->ssl = NULL;
	p->fd = -1;
}

static void pool_init(void)
{
	for (int i = 0; i < PROXY_API_POOL_MAX; i++) {
		pool[i].h.c = NULL;
		pool[i].h.side = SIDE_POOL;
		pool[i].fd = -1;
		pool[i].ssl = NULL;
	}
}

static void pool_close_all(void)
{
	for (int i = 0; i < PROXY_API_POOL_MAX; i++)
		pool_close(&pool[i]);
}

static void pool_sweep(void)
{
	for (int i = 0; i < cfg->api_pool; i++)
		if (pool[i].fd >= 0 && now_ms - pool[i].since_ms >= cfg->api_pool_idle_ms)
			pool_close(&pool[i]);
}

/*
 * Keep c's upstream connection for the next request, if it is clean: the
 * exchange complete on both sides, nothing unread, and the upstream willing.
 * Takes the fd and SSL away from c.
 */
static void pool_put(struct conn *c)
{
	struct pooled *p = NULL;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };

	if (!c->is_api || !c->ssl || c->ufd < 0 || c->up_close || !c->req_done ||
	    !c->respb.done || c->respb.kind == BODY_CLOSE || c->rb_len > c->rb_off ||
	    spill_pending(&c->to_upstream) || SSL_has_pending(c->ssl) || c->ssl_rw || c->ssl_ww)
		return;
	for (int i = 0; i < cfg->api_pool; i++) {
		if (pool[i].fd < 0) {
			p = &pool[i];
			break;
		}
		if (!p || pool[i].since_ms < p->since_ms)
			p = &pool[i]; /* full: the oldest makes room */
	}
	if (!p)
		return;
	pool_close(p);
	ev.data.ptr = &p->h;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->ufd, &ev) < 0)
		return;
	p->fd = c->ufd;
	p->ssl = c->ssl;
	p->since_ms = now_ms;
	c->ufd = -1;
	c->ssl = NULL;
	c->uev = 0;
}

/* An idle connection is alive when nothing at all is waiting on it. */
static int pool_alive(struct pooled *p)
{
	char b;
	ssize_t r = recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !SSL_has_pending(p->ssl);
}

/* Give c the most recently used live idle connection.  1 when it got one. */
static int pool_take(struct conn *c)
{
	for (;;) {
		struct pooled *p = NULL;
		struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &c->hu };

		for (int i = 0; i < cfg->api_pool; i++)
			if (pool[i].fd >= 0 && (!p || pool[i].since_ms >= p->since_ms))
				p = &pool[i];
		if (!p)
			return 0;
		if (!pool_alive(p) || epoll_ctl(epfd, EPOLL_CTL_MOD, p->fd, &ev) < 0) {
			pool_close(p);
			continue;
		}
		c->ufd = p->fd;
		c->ssl = p->ssl;
		c->uev = EPOLLOUT;
		p->fd = -1;
		p->ssl = NULL;
		return 1;
	}
}

/* ---- connection life ---- */

static void drop_pipe(struct conn *c, int d)
{
	if (c->pipe_r[d] >= 0) {
		close(c->pipe_r[d]);
		close(c->pipe_w[d]);
	}
	c->pipe_r[d] = c->pipe_w[d] = -1;
	c->pipe_len[d] = 0;
}

static void close_upstream(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->ufd >= 0) {
		close(c->ufd);
		c->ufd = -1;
	}
	c->uev = 0;
	c->u_eof = c->u_shut = c->u_gone = 0;
	c->ssl_rw = c->ssl_ww = 0;
	spill_free(&c->to_upstream);
	free(c->rb);
	c->rb = NULL;
	c->rb_off = c->rb_len = 0;
}

static void conn_kill(struct conn *c)
{
	if (c->dead)
		return;
	c->dead = 1;
	if (c->job) {
		resolver_cancel(cfg->resolver, c->job);
		c->job = NULL;
	}
	close_upstream(c);
	if (c->cfd >= 0)
		close(c->cfd);
	c->cfd = -1;
	for (int d = 0; d < 2; d++)
		drop_pipe(c, d);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	nconns--;
	if (c->again) {
		for (struct conn **pp = &again_list; *pp; pp = &(*pp)->anext)
			if (*pp == c) {
				*pp = c->anext;
				break;
			}
		c->again = 0;
	}
	c->gnext = graveyard;
	graveyard = c;
}

static void free_graveyard(void)
{
	while (graveyard) {
		struct conn *c = graveyard;

		graveyard = c->gnext;
		usage_done(c);
		drop_replay(c);
		spill_free(&c->to_client);
		free(c->in);
		free(c);
	}
}

static void reset_request(struct conn *c)
{
	usage_done(c);
	c->paid = c->us_counted = 0;
	memset(&c->req_tokens, 0, sizeof(c->req_tokens));
	c->req_nano = 0;
	c->req_model[0] = '\0';
	drop_replay(c);
	c->reused = c->up_close = 0;
	c->is_connect = c->is_api = c->head_method = 0;
	c->method[0] = c->host[0] = c->what[0] = '\0';
	c->port = 0;
	c->entry = NULL;
	c->status = 0;
	c->client_close = c->close_after = 0;
	c->req_ready = c->resp_ready = 0;
	c->req_done = c->resp_head_done = c->resp_done = 0;
	c->sent = c->received = 0;
	c->ai = 0;
	c->connect_err = 0;
	c->start_ms = now_ms;
}

static void enter_head(struct conn *c)
{
	c->state = ST_HEAD;
	c->deadline_ms = now_ms + (c->in_len > c->in_off ? cfg->header_timeout_ms
							 : cfg->idle_timeout_ms);
}

/*
 * Answer the client ourselves and close: refusals and errors.  The body is
 * "aibox-proxy: why" in text, or json when given.
 */
static void respond_with(struct conn *c, int code, const char *verdict, const char *why,
			 const char *json)
{
	const char *text = code == 400 ? "Bad Request"
			   : code == 403 ? "Forbidden"
			   : code == 405 ? "Method Not Allowed"
			   : code == 502 ? "Bad Gateway"
			   : code == 504 ? "Gateway Timeout"
			   : code == 503 ? "Service Unavailable"
					 : "Error";
	struct buf b = BUF_INIT;

	c->status = code;
	log_line(c, verdict, why);
	close_upstream(c);
	if (c->job) {
		resolver_cancel(cfg->resolver, c->job);
		c->job = NULL;
	}
	buf_addf(&b, "HTTP/1.1 %d %s\r\n", code, text);
	if (code == 405)
		buf_addstr(&b, "Allow: " PROXY_API_METHODS "\r\n");
	if (json)
		buf_addf(&b,
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 strlen(json), json);
	else
		buf_addf(&b,
			 "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\naibox-proxy: %s\n",
			 strlen(why) + 14, why);
	spill_add(&c->to_client, b.buf, b.len);
	buf_release(&b);
	c->state = ST_CLOSING;
	c->deadline_ms = now_ms + LINGER_MS;
}

static void respond(struct conn *c, int code, const char *verdict, const char *why)
{
	respond_with(c, code, verdict, why, NULL);
}

static void refuse(struct conn *c, const char *why)
{
	respond(c, 403, "refused", why);
}

/* ---- spend (docs/budget.md) ---- */

/* The endpoints that cost money: POST /v1/messages and /v1/complete, any query. */
static int api_paid(const struct http_head *h, const char *t, size_t tl)
{
	const char *q = memchr(t, '?', tl);
	size_t n = q ? (size_t)(q - t) : tl;

	return h->method_len == 4 && !memcmp(h->method, "POST", 4) &&
	       ((n == 12 && !memcmp(t, "/v1/messages", 12)) ||
		(n == 12 && !memcmp(t, "/v1/complete", 12)));
}

/*
 * A paid request when a cap is reached: answer it in the API's own error
 * shape, so that the client reports it and stops.  1 when refused.
 */
static int budget_refused(struct conn *c)
{
	struct usage_count *u = &cfg->report->usage;
	enum usage_capped which = USAGE_CAPPED_NONE;
	struct buf msg = BUF_INIT, spent = BUF_INIT, cap = BUF_INIT, why = BUF_INIT;
	json_t *body;
	char *text;
	uint64_t total;
	int r = 0;

	if (u->cap_task && u->nano >= u->cap_task) {
		which = USAGE_CAPPED_TASK;
		usage_format_usd(&spent, u->nano);
		usage_format_usd(&cap, u->cap_task);
		buf_addf(&msg, "aibox: this task's budget of %s USD is spent (%s USD by aibox's "
			       "count); aibox-proxy refuses further API requests",
			 cap.buf, spent.buf);
	} else if (u->cap_day && cfg->ledger_fd >= 0) {
		r = usage_ledger_add(cfg->ledger_fd, 0, &total);
		if (r == 0)
			u->day_nano = total;
		if (r < 0 || total >= u->cap_day) {
			which = USAGE_CAPPED_DAY;
			usage_format_usd(&cap, u->cap_day);
			if (r < 0)
				buf_addf(&msg,
					 "aibox: the project's ledger of today's spend cannot be "
					 "read (%s), so its daily budget of %s USD cannot be kept; "
					 "aibox-proxy refuses further API requests",
					 strerror(-r), cap.buf);
			else {
				usage_format_usd(&spent, total);
				buf_addf(&msg,
					 "aibox: the project's daily budget of %s USD is spent (%s "
					 "USD today by aibox's count); aibox-proxy refuses further "
					 "API requests",
					 cap.buf, spent.buf);
			}
		}
	}
	if (which == USAGE_CAPPED_NONE)
		goto out;
	u->refused++;
	if (!u->capped)
		u->capped = which;
	body = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
			 PROXY_BUDGET_ERROR, "message", msg.buf);
	text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (!text)
		die("out of memory");
	buf_addf(&why, "budget: the %s cap of %s USD is reached",
		 which == USAGE_CAPPED_TASK ? "task" : "day", cap.buf);
	respond_with(c, 400, "refused", why.buf, text);
	free(text);
	json_decref(body);
	r = 1;
out:
	buf_release(&msg);
	buf_release(&spent);
	buf_release(&cap);
	buf_release(&why);
	return r == 1;
}

/* Count what one answer's usage grew by. */
static void usage_apply(struct conn *c, const struct usage_tokens *d)
{
	struct usage_count *u = &cfg->report->usage;
	uint64_t nano, total;

	if (!usage_tokens_any(d))
		return;
	usage_count_add(u, cfg->prices, c->us->model, d, !c->us_counted, &nano);
	if (!c->us_counted)
		memcpy(c->req_model, c->us->model, sizeof(c->req_model));
	c->us_counted = 1;
	for (int k = 0; k < USAGE_KINDS; k++)
		c->req_tokens.n[k] += d->n[k];
	c->req_nano += nano;
	/* Each task adds as it goes, so that a killed task's spend is still there. */
	if (cfg->ledger_fd >= 0 && nano && usage_ledger_add(cfg->ledger_fd, nano, &total) == 0)
		u->day_nano = total;
}

static void usage_content(void *ctx, const char *p, size_t n)
{
	struct conn *c = ctx;
	struct usage_tokens d = { { 0 } };

	if (!c->us)
		return;
	usage_stream_feed(c->us, p, n, &d);
	usage_apply(c, &d);
}

/*
 * The answer to a paid request began (h): read its usage as its body goes
 * past, if it is one the API reports usage in.
 */
static void usage_begin(struct conn *c, const struct http_head *h)
{
	struct usage_count *u = &cfg->report->usage;
	enum usage_mode mode = USAGE_OFF;
	int encoded = 0;

	if (!c->paid || h->status < 200 || h->status > 299)
		return;
	u->requests++;
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (http_name_is(hd, "content-type")) {
			if (hd->value_len >= 17 && !strncasecmp(hd->value, "text/event-stream", 17))
				mode = USAGE_SSE;
			else if (hd->value_len >= 16 &&
				 !strncasecmp(hd->value, "application/json", 16))
				mode = USAGE_JSON;
		} else if (http_name_is(hd, "content-encoding") &&
			   !(hd->value_len == 8 && !strncasecmp(hd->value, "identity", 8))) {
			encoded = 1;
		}
	}
	if (mode == USAGE_OFF || encoded || c->respb.kind == BODY_NONE) {
		u->uncounted++;
		return;
	}
	c->us = xmalloc(sizeof(*c->us));
	usage_stream_init(c->us, mode);
	c->respb.content = usage_content;
	c->respb.content_ctx = c;
}

/* The answer ended (or the request did): read what is left, count it, let go. */
static void usage_done(struct conn *c)
{
	struct usage_tokens d = { { 0 } };

	if (!c->us)
		return;
	if (c->respb.done)
		usage_stream_end(c->us, &d);
	usage_apply(c, &d);
	cfg->report->usage.skipped += c->us->skipped;
	if (c->us->mode == USAGE_JSON && !c->respb.done)
		cfg->report->usage.uncounted++; /* cut short: its body was never read */
	usage_stream_release(c->us);
	free(c->us);
	c->us = NULL;
	c->respb.content = NULL;
}

/* ---- upstream I/O, plain or TLS ---- */

static ssize_t up_read(struct conn *c, void *p, size_t n)
{
	if (c->ssl) {
		int r;

		ERR_clear_error();
		r = SSL_read(c->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
		c->ssl_rw = 0;
		if (r > 0)
			return r;
		switch (SSL_get_error(c->ssl, r)) {
		case SSL_ERROR_WANT_READ:
			return -EAGAIN;
		case SSL_ERROR_WANT_WRITE:
			c->ssl_rw = 1;
			return -EAGAIN;
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		default:
			/* An EOF without close_notify: treat as EOF, the framing decides. */
			return ERR_peek_error() ? -EPROTO : 0;
		}
	}
	for (;;) {
		ssize_t r = read(c->ufd, p, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static ssize_t up_write(struct conn *c, const void *p, size_t n)
{
	if (c->ssl) {
		int r;

		ERR_clear_error();
		r = SSL_write(c->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
		c->ssl_ww = 0;
		if (r > 0)
			return r;
		switch (SSL_get_error(c->ssl, r)) {
		case SSL_ERROR_WANT_WRITE:
			return -EAGAIN;
		case SSL_ERROR_WANT_READ:
			c->ssl_ww = 1;
			return -EAGAIN;
		default:
			return -EPIPE;
		}
	}
	for (;;) {
		ssize_t r = send(c->ufd, p, n, MSG_NOSIGNAL);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static ssize_t cl_read(struct conn *c, void *p, size_t n)
{
	for (;;) {
		ssize_t r = read(c->cfd, p, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static ssize_t cl_write(struct conn *c, const void *p, size_t n)
{
	for (;;) {
		ssize_t r = send(c->cfd, p, n, MSG_NOSIGNAL);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

/* Write out a spill.  1 when empty afterwards, 0 when bytes remain, <0 on error. */
static int flush_spill(struct conn *c, struct spill *s, int to_client)
{
	while (spill_pending(s)) {
		ssize_t w = to_client ? cl_write(c, s->p + s->off, spill_pending(s))
				      : up_write(c, s->p + s->off, spill_pending(s));

		if (w == -EAGAIN)
			return 0;
		if (w < 0)
			return (int)w;
		s->off += w;
	}
	spill_free(s);
	return 1;
}

/* ---- requests ---- */

static int is_api_authority(const char *host, int port)
{
	return port == PROXY_API_PORT && (!strcmp(host, "127.0.0.1") || !strcmp(host, "localhost"));
}

/* The methods the API uses (PROXY_API_METHODS); the rest get a 405. */
static int api_method_ok(const char *m, size_t n)
{
	return (n == 3 && !memcmp(m, "GET", 3)) || (n == 4 && !memcmp(m, "POST", 4)) ||
	       (n == 6 && !memcmp(m, "DELETE", 6));
}

static void set_what(struct conn *c, const char *method, size_t mlen, const char *path,
		     size_t plen)
{
	struct buf b = BUF_INIT;

	log_escape(&b, method, mlen, 16);
	if (path) {
		buf_addch(&b, ' ');
		log_escape(&b, path, plen, 150);
	}
	snprintf(c->what, sizeof(c->what), "%s", b.buf);
	buf_release(&b);
}

static int hdr_dropped(const struct http_header *hd, int api)
{
	static const char *const hop[] = { "host",   "connection", "proxy-connection",
					   "keep-alive", "te",	       "upgrade",
					   "expect", "proxy-authorization" };
	/* accept-encoding: the proxy reads the API's answers (usage), so they come plain. */
	static const char *const cred[] = { "x-api-key", "authorization", "cookie",
					    "accept-encoding" };

	for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
		if (http_name_is(hd, hop[i]))
			return 1;
	if (api)
		for (size_t i = 0; i < ARRAY_SIZE(cred); i++)
			if (http_name_is(hd, cred[i]))
				return 1;
	return 0;
}

static void start_resolve(struct conn *c);
static void pump(struct conn *c);

/*
 * Set up forwarding of one request: the upstream head goes into to_upstream,
 * the body follows as it comes.
 */
static void start_forward(struct conn *c, const struct http_head *h, const char *path,
			  size_t plen)
{
	struct buf b = BUF_INIT;

	buf_add(&b, h->method, h->method_len);
	buf_addch(&b, ' ');
	buf_add(&b, path, plen);
	buf_addstr(&b, " HTTP/1.1\r\nHost: ");
	if (c->is_api) {
		int v6 = strchr(cfg->api_host, ':') != NULL;

		buf_addf(&b, "%s%s%s", v6 ? "[" : "", cfg->api_host, v6 ? "]" : "");
		if (cfg->api_port != 443)
			buf_addf(&b, ":%d", cfg->api_port);
	} else {
		int v6 = strchr(c->host, ':') != NULL;

		buf_addf(&b, "%s%s%s", v6 ? "[" : "", c->host, v6 ? "]" : "");
		if (c->port != 80)
			buf_addf(&b, ":%d", c->port);
	}
	buf_addstr(&b, "\r\n");
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (hdr_dropped(hd, c->is_api))
			continue;
		buf_add(&b, hd->name, hd->name_len);
		buf_addstr(&b, ": ");
		buf_add(&b, hd->value, hd->value_len);
		buf_addstr(&b, "\r\n");
	}
	if (c->is_api)
		buf_addf(&b, "Accept-Encoding: identity\r\nx-api-key: %s\r\n", cfg->api_key);
	/* Upstream connections are kept for the API only (cfg->api_pool). */
	buf_addf(&b, "Connection: %s\r\n\r\n",
		 c->is_api && cfg->api_pool > 0 ? "keep-alive" : "close");
	spill_add(&c->to_upstream, b.buf, b.len);
	c->sent += h->head_len; /* the client's bytes, not ours (ours hold the key) */

	if (h->chunked)
		http_body_init(&c->reqb, BODY_CHUNKED, 0);
	else if (h->content_length > 0)
		http_body_init(&c->reqb, BODY_LENGTH, (uint64_t)h->content_length);
	else
		http_body_init(&c->reqb, BODY_NONE, 0);
	/*
	 * A request without a body whose method is safe can be sent again if a
	 * reused connection turns out dead before answering; keep its head.
	 */
	if (c->is_api && cfg->api_pool > 0 && c->reqb.kind == BODY_NONE && h->method_len == 3 &&
	    !memcmp(h->method, "GET", 3)) {
		c->replay = xmalloc(b.len);
		memcpy(c->replay, b.buf, b.len);
		c->replay_len = b.len;
	}
	OPENSSL_cleanse(b.buf, b.len);
	buf_release(&b);
	c->head_method = h->method_len == 4 && !memcmp(h->method, "HEAD", 4);
	c->client_close = h->conn_close;
	if (h->expect_continue && !c->reqb.done)
		spill_add(&c->to_client, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	start_resolve(c);
}

/* ---- the broker hand-off ---- */

static int is_git_host(const char *host)
{
	return !strcmp(host, PROXY_GIT_HOST);
}

/*
 * The remote number that starts path ("/<n>/..."), by the broker's rule
 * (breq_remote_number: digits only, no leading zero, below
 * BREQ_REMOTES_MAX), or -1.
 */
static int git_remote_number(const char *path, size_t len)
{
	const char *slash;
	size_t idx;

	if (len < 3 || path[0] != '/')
		return -1;
	slash = memchr(path + 1, '/', len - 1);
	if (!slash || breq_remote_number(path + 1, (size_t)(slash - path - 1), &idx) < 0)
		return -1;
	return (int)idx;
}

/*
 * Give the connection to aibox-broker (common/handoff.h; docs/internals.md,
 * "Broker hand-off"): one message holding the bytes of this request read so
 * far, with the client socket as SCM_RIGHTS.  Then the proxy forgets the connection.  When the
 * broker cannot take it, the client gets a 502 (503 when it is only busy).
 */
static void hand_to_broker(struct conn *c, const struct http_head *h, int remote)
{
	size_t start = c->in_off - h->head_len;
	size_t len = c->in_len - start;
	int r;

	if (spill_pending(&c->to_client)) {
		/* An answer to an earlier request is still on its way: keep the order. */
		refuse(c, "a git request pipelined behind another request");
		return;
	}
	r = handoff_send(cfg->broker_fd, c->cfd, remote, c->in + start, len);
	if (r < 0) {
		char why[120];

		if (r == -EAGAIN || r == -EWOULDBLOCK) {
			respond(c, 503, "failed", "aibox-broker is busy");
			return;
		}
		if (r == -EPIPE || r == -ECONNREFUSED || r == -ECONNRESET || r == -ENOTCONN)
			snprintf(why, sizeof(why), "aibox-broker is not running");
		else
			snprintf(why, sizeof(why), "cannot hand the request to aibox-broker: %s",
				 strerror(-r));
		respond(c, 502, "failed", why);
		return;
	}
	/*
	 * The broker's copy keeps the socket open, and epoll forgets a socket
	 * only when its last copy closes: take it out before closing ours.
	 */
	if (!c->c_gone)
		epoll_ctl(epfd, EPOLL_CTL_DEL, c->cfd, NULL);
	c->c_gone = 1;
	c->sent = len;
	log_line(c, "allowed", "handed to aibox-broker");
	conn_kill(c);
}

/* A request for PROXY_GIT_HOST; t is its path. */
static void git_request(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	int remote = git_remote_number(t, tl);
	size_t n;

	set_what(c, h->method, h->method_len, NULL, 0);
	if (remote < 0) {
		refuse(c, "no remote number in the path (/<n>/...)");
		return;
	}
	n = strlen(c->what);
	snprintf(c->what + n, sizeof(c->what) - n, " remote=%d", remote);
	if (c->port != 80) {
		refuse(c, PROXY_GIT_HOST " answers on port 80 only");
		return;
	}
	if (cfg->broker_fd < 0) {
		refuse(c, "no git remotes: the config has no git: entries");
		return;
	}
	hand_to_broker(c, h, remote);
}

static void handle_request(struct conn *c, const struct http_head *h)
{
	const char *why = NULL;
	const char *t = h->target;
	size_t tl = h->target_len;

	reset_request(c);
	c->in_off += h->head_len;
	if (h->method_len == 7 && !memcmp(h->method, "CONNECT", 7)) {
		c->is_connect = 1;
		set_what(c, h->method, h->method_len, NULL, 0);
		if (http_split_authority(t, tl, 0, c->host, sizeof(c->host), &c->port, &why)) {
			c->host[0] = '\0';
			refuse(c, why);
			return;
		}
		/* Key forwarding goes to the upstream whatever host the client names. */
		if (h->host && !is_api_authority(c->host, c->port)) {
			char hh[256];
			int hp;

			if (http_split_authority(h->host, h->host_len, 0, hh, sizeof(hh), &hp,
						 &why) ||
			    strcmp(hh, c->host) || hp != c->port) {
				refuse(c, "Host disagrees with the CONNECT target");
				return;
			}
		}
		if (h->content_length > 0 || h->chunked) {
			refuse(c, "CONNECT with a body");
			return;
		}
		if (c->api_tunnel) {
			refuse(c, "CONNECT inside the key forwarding port");
			return;
		}
		if (is_git_host(c->host)) {
			refuse(c, PROXY_GIT_HOST " takes plain http:// requests, not CONNECT");
			return;
		}
		if (is_api_authority(c->host, c->port)) {
			if (!cfg->api_key) {
				refuse(c, "key forwarding is off");
				return;
			}
			snprintf(c->host, sizeof(c->host), "localhost");
			log_line(c, "allowed", "key forwarding");
			spill_add(&c->to_client, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
			c->api_tunnel = 1;
			reset_request(c);
			enter_head(c);
			return;
		}
		c->entry = allow_match(cfg->allow, c->host, c->port);
		if (!c->entry) {
			refuse(c, "not on the allow list");
			return;
		}
		start_resolve(c);
		return;
	}

	if (tl >= 7 && !strncasecmp(t, "http://", 7)) {
		const char *auth = t + 7, *end = t + tl, *slash;
		size_t al;
		char hh[256];
		int hp;

		slash = memchr(auth, '/', end - auth);
		{
			const char *q = memchr(auth, '?', end - auth);

			if (q && (!slash || q < slash))
				slash = q;
		}
		al = (slash ? slash : end) - auth;
		if (memchr(auth, '@', al)) {
			refuse(c, "user information in the request target");
			return;
		}
		if (memchr(t, '#', tl)) {
			refuse(c, "fragment in the request target");
			return;
		}
		if (http_split_authority(auth, al, 80, c->host, sizeof(c->host), &c->port, &why)) {
			c->host[0] = '\0';
			refuse(c, why);
			return;
		}
		/*
		 * Key forwarding (the key forwarding port named, or any request
		 * inside a CONNECT to it) goes to the API upstream whatever host
		 * the request or its Host header names; the Host header is not
		 * passed on.
		 */
		c->is_api = is_api_authority(c->host, c->port) || c->api_tunnel;
		if (!c->is_api && !h->host) {
			refuse(c, "Host header missing");
			return;
		}
		if (!c->is_api &&
		    (http_split_authority(h->host, h->host_len, 80, hh, sizeof(hh), &hp, &why) ||
		     strcmp(hh, c->host) || hp != c->port)) {
			refuse(c, "Host disagrees with the request target");
			return;
		}
		t = slash ? slash : "/";
		tl = slash ? (size_t)(end - slash) : 1;
		if (*t == '?') {
			refuse(c, "request target without a path");
			return;
		}
		if (!c->is_api && is_git_host(c->host)) {
			git_request(c, h, t, tl);
			return;
		}
	} else if (tl >= 8 && !strncasecmp(t, "https://", 8)) {
		refuse(c, "https:// requests need CONNECT");
		return;
	} else if (tl && t[0] == '/' && c->api_tunnel) {
		c->is_api = 1;
	} else {
		refuse(c, tl && t[0] == '/' ? "not a proxy request" : "invalid request target");
		return;
	}

	if (c->is_api) {
		snprintf(c->host, sizeof(c->host), "localhost");
		c->port = PROXY_API_PORT;
		set_what(c, h->method, h->method_len, t, tl);
		if (!cfg->api_key) {
			refuse(c, "key forwarding is off");
			return;
		}
		if (!api_method_ok(h->method, h->method_len)) {
			/* TRACE and the like could echo the key back. */
			respond(c, 405, "refused", "method not forwarded to the API");
			return;
		}
		if (!http_api_path_ok(t, tl, &why)) {
			refuse(c, why);
			return;
		}
		c->paid = cfg->prices && api_paid(h, t, tl);
		if (c->paid && budget_refused(c))
			return;
	} else {
		set_what(c, h->method, h->method_len, NULL, 0);
		c->entry = allow_match(cfg->allow, c->host, c->port);
		if (!c->entry) {
			refuse(c, "not on the allow list");
			return;
		}
	}
	start_forward(c, h, t, tl);
}

/* ---- resolving and connecting ---- */

static void try_connect(struct conn *c);

static void resolved(struct conn *c, struct resolve_result *res)
{
	int n = 0;

	if (res->err) {
		respond(c, 502, "failed",
			res->err == -ENOENT ? "cannot resolve the host name"
					    : "name resolution failed");
		return;
	}
	/* Keep only the addresses the entry allows. */
	for (int i = 0; i < res->n; i++) {
		if (c->is_api || allow_addr_ok(c->entry, (struct sockaddr *)&res->addr[i])) {
			c->addrs.addr[n] = res->addr[i];
			c->addrs.len[n] = res->len[i];
			n++;
		}
	}
	c->addrs.n = n;
	c->addrs.err = 0;
	if (!n) {
		refuse(c, "the host resolves to a non-public address");
		return;
	}
	c->ai = 0;
	try_connect(c);
}

static void resolver_done(void *cookie, struct resolve_result *res)
{
	struct conn *c = cookie;

	c->job = NULL;
	if (c->dead || c->state != ST_RESOLVE)
		return;
	resolved(c, res);
	pump(c);
}

static void start_resolve(struct conn *c)
{
	struct resolve_result res;
	const char *name = c->is_api ? cfg->api_host : c->host;
	int port = c->is_api ? cfg->api_port : c->port;

	if (c->is_api && pool_take(c)) {
		c->reused = 1;
		c->state = ST_FWD;
		c->deadline_ms = now_ms + cfg->idle_timeout_ms;
		return;
	}
	c->state = ST_RESOLVE;
	c->deadline_ms = now_ms + cfg->connect_timeout_ms;
	if (resolver_lookup(cfg->resolver, name, port, &res)) {
		resolved(c, &res);
		return;
	}
	c->job = resolver_submit(cfg->resolver, name, port, c);
	if (!c->job)
		respond(c, 503, "failed", "too many name lookups at once");
}

static void connected(struct conn *c);

static void try_connect(struct conn *c)
{
	while (c->ai < c->addrs.n) {
		struct sockaddr_storage *sa = &c->addrs.addr[c->ai++];
		int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int one = 1;

		if (fd < 0) {
			c->connect_err = errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)sa, c->addrs.len[c->ai - 1]) < 0 &&
		    errno != EINPROGRESS) {
			c->connect_err = errno;
			close(fd);
			continue;
		}
		c->ufd = fd;
		c->uev = EPOLLOUT;
		if (add_fd(fd, &c->hu, EPOLLOUT) < 0) {
			c->connect_err = errno;
			close(fd);
			c->ufd = -1;
			continue;
		}
		c->state = ST_CONNECT;
		c->deadline_ms = now_ms + cfg->connect_timeout_ms;
		return;
	}
	{
		char why[128];

		snprintf(why, sizeof(why), "cannot connect: %s",
			 strerror(c->connect_err ? c->connect_err : ECONNREFUSED));
		respond(c, 502, "failed", why);
	}
}

static void connect_done(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return;
	if (err) {
		c->connect_err = err;
		close(c->ufd);
		c->ufd = -1;
		c->uev = 0;
		try_connect(c);
		return;
	}
	connected(c);
}

static void connected(struct conn *c)
{
	if (c->is_connect) {
		c->state = ST_TUNNEL;
		c->deadline_ms = now_ms + cfg->idle_timeout_ms;
		spill_add(&c->to_client, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
		/* Bytes the client sent after the head (a TLS hello) go first. */
		if (c->in_len > c->in_off) {
			spill_add(&c->to_upstream, c->in + c->in_off, c->in_len - c->in_off);
			c->sent += c->in_len - c->in_off;
		}
		free(c->in);
		c->in = NULL;
		c->in_off = c->in_len = 0;
		return;
	}
	if (c->is_api) {
		c->ssl = tls_client_new(cfg->tls, c->ufd, cfg->api_host);
		if (!c->ssl) {
			respond(c, 502, "failed", "cannot start TLS");
			return;
		}
		c->state = ST_TLS;
		return;
	}
	c->state = ST_FWD;
	c->deadline_ms = now_ms + cfg->idle_timeout_ms;
}

static void tls_step(struct conn *c)
{
	int r;

	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	c->ssl_rw = c->ssl_ww = 0;
	if (r == 1) {
		c->state = ST_FWD;
		c->deadline_ms = now_ms + cfg->idle_timeout_ms;
		return;
	}
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		c->ssl_ww = 1; /* the handshake waits to read */
		return;
	case SSL_ERROR_WANT_WRITE:
		c->ssl_rw = 1;
		return;
	default: {
		char why[200];
		long v = SSL_get_verify_result(c->ssl);

		snprintf(why, sizeof(why), "TLS with the API upstream failed: %s",
			 v != X509_V_OK ? X509_verify_cert_error_string(v) : tls_error());
		ERR_clear_error();
		respond(c, 502, "failed", why);
	}
	}
}

/* ---- the request head ---- */

static void read_head(struct conn *c)
{
	for (;;) {
		struct http_head h;
		const char *why = NULL;
		int r;

		if (c->in_len > c->in_off) {
			r = http_parse_request(c->in + c->in_off, c->in_len - c->in_off, &h, &why);
			if (r > 0) {
				handle_request(c, &h);
				if (c->dead || c->state != ST_HEAD)
					return;
				continue;
			}
			if (r < 0) {
				reset_request(c);
				refuse(c, why);
				return;
			}
			if (c->in_len - c->in_off >= HTTP_MAX_HEAD) {
				reset_request(c);
				refuse(c, "request head too large");
				return;
			}
		}
		if (c->in_off) {
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		if (!c->in)
			c->in = xmalloc(HTTP_MAX_HEAD);
		{
			int was_empty = c->in_len == 0;
			ssize_t n = cl_read(c, c->in + c->in_len, HTTP_MAX_HEAD - c->in_len);

			if (n == -EAGAIN)
				return;
			if (n <= 0) {
				if (c->in_len) {
					reset_request(c);
					log_line(c, "refused", "connection closed inside a request head");
				}
				conn_kill(c);
				return;
			}
			c->in_len += n;
			if (was_empty) {
				c->start_ms = now_ms;
				c->deadline_ms = now_ms + cfg->header_timeout_ms;
			}
		}
	}
}

/* ---- forwarding one request ---- */

static void finish_request(struct conn *c)
{
	int keep = !c->close_after && !c->client_close && c->req_done;

	log_line(c, "allowed", NULL);
	pool_put(c);
	close_upstream(c);
	if (!keep) {
		c->state = ST_CLOSING;
		c->deadline_ms = now_ms + LINGER_MS;
		return;
	}
	reset_request(c);
	enter_head(c);
	read_head(c);
}

static void abort_forward(struct conn *c, const char *why)
{
	log_line(c, "failed", why);
	conn_kill(c);
}

/*
 * The upstream failed.  Before the answer's head reached the client it is
 * told why with a 502; after, all that is left is to cut the connection.
 */
static void upstream_failed(struct conn *c, const char *why)
{
	if (c->resp_head_done)
		abort_forward(c, why);
	else
		respond(c, 502, "failed", why);
}

/*
 * A connection from the pool failed before any byte of the answer: the
 * upstream had closed it as we sent.  A request kept for replay goes again
 * on another connection (pooled or new).  1 when it does.
 */
static int retry_upstream(struct conn *c)
{
	if (!c->reused || !c->replay || c->resp_head_done || c->rb_len)
		return 0;
	close_upstream(c);
	c->reused = 0;
	c->req_done = 0;
	c->req_ready = c->resp_ready = 0;
	spill_add(&c->to_upstream, c->replay, c->replay_len);
	start_resolve(c);
	return 1;
}

static int response_head(struct conn *c)
{
	struct http_head h;
	const char *why = NULL;
	struct buf b = BUF_INIT;
	int r;

	for (;;) {
		r = http_parse_response(c->rb + c->rb_off, c->rb_len - c->rb_off, &h, &why);
		if (r == 0) {
			if (c->rb_len - c->rb_off >= RBUF_SIZE) {
				respond(c, 502, "failed", "upstream response head too large");
				return -1;
			}
			return 0;
		}
		if (r < 0) {
			char msg[120];

			snprintf(msg, sizeof(msg), "bad response from upstream: %s", why);
			respond(c, 502, "failed", msg);
			return -1;
		}
		if (h.status == 101) {
			respond(c, 502, "failed", "upstream switched protocols");
			return -1;
		}
		if (h.status >= 200)
			break;
		c->rb_off += h.head_len; /* drop interim responses; we sent our own 100 */
	}
	c->status = h.status;
	c->up_close = h.conn_close;
	drop_replay(c); /* answered: never sent again */
	if (c->head_method || h.status == 204 || h.status == 304)
		http_body_init(&c->respb, BODY_NONE, 0);
	else if (h.chunked)
		http_body_init(&c->respb, BODY_CHUNKED, 0);
	else if (h.content_length >= 0)
		http_body_init(&c->respb, BODY_LENGTH, (uint64_t)h.content_length);
	else
		http_body_init(&c->respb, BODY_CLOSE, 0);
	if (c->respb.kind == BODY_CLOSE || c->client_close)
		c->close_after = 1;
	usage_begin(c, &h);

	/* The status line as it came, the headers without the hop-by-hop ones. */
	buf_add(&b, c->rb + c->rb_off, (const char *)memchr(c->rb + c->rb_off, '\n', h.head_len) -
						   (c->rb + c->rb_off) + 1);
	for (int i = 0; i < h.nhdr; i++) {
		const struct http_header *hd = &h.hdr[i];

		if (http_name_is(hd, "connection") || http_name_is(hd, "keep-alive") ||
		    http_name_is(hd, "proxy-connection") || http_name_is(hd, "te") ||
		    http_name_is(hd, "upgrade"))
			continue;
		buf_add(&b, hd->name, hd->name_len);
		buf_addstr(&b, ": ");
		buf_add(&b, hd->value, hd->value_len);
		buf_addstr(&b, "\r\n");
	}
	buf_addf(&b, "Connection: %s\r\n\r\n", c->close_after ? "close" : "keep-alive");
	spill_add(&c->to_client, b.buf, b.len);
	c->received += b.len;
	buf_release(&b);
	c->rb_off += h.head_len;
	c->resp_head_done = 1;
	return 1;
}

/* Client to upstream: the request head and body.  -1 when c is gone. */
static int fwd_request(struct conn *c)
{
	for (int rounds = 0; rounds < 64; rounds++) {
		const char *why = NULL;
		int f = flush_spill(c, &c->to_upstream, 0);

		if (f < 0) {
			if (!retry_upstream(c))
				upstream_failed(c, "upstream write failed");
			return -1;
		}
		if (!f || c->req_done)
			return 0;
		if (!c->req_ready && c->in_len > c->in_off) {
			long k = http_body_feed(&c->reqb, c->in + c->in_off, c->in_len - c->in_off,
						&why);

			if (k < 0) {
				abort_forward(c, why);
				return -1;
			}
			c->req_ready = (size_t)k;
		}
		if (c->req_ready) {
			ssize_t w = up_write(c, c->in + c->in_off, c->req_ready);

			if (w == -EAGAIN)
				return 0;
			if (w < 0) {
				upstream_failed(c, "upstream write failed");
				return -1;
			}
			c->in_off += w;
			c->req_ready -= w;
			c->sent += w;
			c->deadline_ms = now_ms + cfg->idle_timeout_ms;
			continue;
		}
		if (c->reqb.done) {
			c->req_done = 1;
			return 0;
		}
		/* Need more body from the client. */
		if (c->in_off == c->in_len)
			c->in_off = c->in_len = 0;
		if (!c->in)
			c->in = xmalloc(HTTP_MAX_HEAD);
		if (c->in_len == HTTP_MAX_HEAD)
			return 0;
		{
			ssize_t n = cl_read(c, c->in + c->in_len, HTTP_MAX_HEAD - c->in_len);

			if (n == -EAGAIN)
				return 0;
			if (n <= 0) {
				abort_forward(c, "client closed inside the request body");
				return -1;
			}
			c->in_len += n;
		}
	}
	return 0;
}

/* Upstream to client: the response.  -1 when c is gone or answered. */
static int fwd_response(struct conn *c)
{
	for (int rounds = 0; rounds < 64; rounds++) {
		const char *why = NULL;
		int f = flush_spill(c, &c->to_client, 1);

		if (f < 0) {
			abort_forward(c, "client write failed");
			return -1;
		}
		if (!f)
			return 0;
		if (c->resp_head_done && !c->resp_ready && c->rb_len > c->rb_off &&
		    !c->respb.done) {
			long k = http_body_feed(&c->respb, c->rb + c->rb_off, c->rb_len - c->rb_off,
						&why);

			if (k < 0) {
				abort_forward(c, why);
				return -1;
			}
			c->resp_ready = (size_t)k;
		}
		if (c->resp_ready) {
			ssize_t w = cl_write(c, c->rb + c->rb_off, c->resp_ready);

			if (w == -EAGAIN)
				return 0;
			if (w < 0) {
				abort_forward(c, "client write failed");
				return -1;
			}
			c->rb_off += w;
			c->resp_ready -= w;
			c->received += w;
			c->deadline_ms = now_ms + cfg->idle_timeout_ms;
			continue;
		}
		if (c->resp_head_done && c->respb.done) {
			finish_request(c);
			return -1;
		}
		if (c->rb_off == c->rb_len)
			c->rb_off = c->rb_len = 0;
		if (!c->rb)
			c->rb = xmalloc(RBUF_SIZE);
		if (c->rb_len == RBUF_SIZE) {
			if (!c->rb_off)
				return 0;
			memmove(c->rb, c->rb + c->rb_off, c->rb_len - c->rb_off);
			c->rb_len -= c->rb_off;
			c->rb_off = 0;
		}
		{
			ssize_t n = up_read(c, c->rb + c->rb_len, RBUF_SIZE - c->rb_len);

			if (n == -EAGAIN)
				return 0;
			if (n <= 0 && retry_upstream(c))
				return -1;
			if (n < 0 && !c->resp_head_done) {
				respond(c, 502, "failed", "upstream read failed");
				return -1;
			}
			if (n < 0) {
				abort_forward(c, "upstream read failed");
				return -1;
			}
			if (n == 0) {
				if (!c->resp_head_done) {
					respond(c, 502, "failed",
						"upstream closed without a response");
					return -1;
				}
				if (c->respb.kind == BODY_CLOSE) {
					c->respb.done = 1;
					continue;
				}
				abort_forward(c, "upstream closed inside the response");
				return -1;
			}
			c->rb_len += n;
			c->deadline_ms = now_ms + cfg->idle_timeout_ms;
			if (!c->resp_head_done && response_head(c) < 0)
				return -1;
		}
	}
	return 0;
}

/* ---- tunnels ---- */

/* Bytes of one tunnel direction not yet written to its destination. */
static size_t tunnel_pending(const struct conn *c, int from_client)
{
	int d = from_client ? 0 : 1;

	return spill_pending(from_client ? &c->to_upstream : &c->to_client) + c->pipe_len[d];
}

/* Switch a busy direction to splice(2): no copies through user space. */
static void go_bulk(struct conn *c, int d)
{
	int p[2];
	int sz;

	if (now_ms < c->bulk_after_ms[d])
		return;
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) {
		c->bulk_after_ms[d] = now_ms + PIPE_RETRY_MS;
		return; /* stay with read and write */
	}
	/*
	 * Pipes count against the user's pipe-user-pages-soft (64 MiB by
	 * default): past it, the size cannot be raised and a new pipe gets two
	 * pages.  Such a pipe would move 8 KiB a splice; the scratch buffer does
	 * better.
	 */
	fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);
	sz = fcntl(p[1], F_GETPIPE_SZ);
	if (sz < PIPE_MIN_BYTES) {
		close(p[0]);
		close(p[1]);
		c->bulk_after_ms[d] = now_ms + PIPE_RETRY_MS;
		return;
	}
	c->pipe_r[d] = p[0];
	c->pipe_w[d] = p[1];
	c->pipe_cap[d] = (size_t)sz;
	c->pipe_len[d] = 0;
}

static int relay_splice(struct conn *c, int from_client)
{
	int d = from_client ? 0 : 1;
	int src = from_client ? c->cfd : c->ufd, dst = from_client ? c->ufd : c->cfd;
	int *src_eof = from_client ? &c->c_eof : &c->u_eof;
	int *dst_shut = from_client ? &c->u_shut : &c->c_shut;
	uint64_t *count = from_client ? &c->sent : &c->received;

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n;

		while (c->pipe_len[d]) {
			n = splice(c->pipe_r[d], NULL, dst, NULL, c->pipe_len[d],
				   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				return 0;
			if (n <= 0)
				return -1;
			c->pipe_len[d] -= n;
		}
		if (*src_eof) {
			if (!*dst_shut) {
				shutdown(dst, SHUT_WR);
				*dst_shut = 1;
			}
			return 0;
		}
		n = splice(src, NULL, c->pipe_w[d], NULL, c->pipe_cap[d],
			   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -1;
		if (n == 0) {
			*src_eof = 1;
			continue;
		}
		c->pipe_len[d] += n;
		*count += n;
		c->deadline_ms = now_ms + cfg->idle_timeout_ms;
	}
	return 0;
}

/* Move bytes from one side to the other.  -1 when the connection failed. */
static int relay(struct conn *c, int from_client)
{
	struct spill *out = from_client ? &c->to_upstream : &c->to_client;
	int *src_eof = from_client ? &c->c_eof : &c->u_eof;
	int *dst_shut = from_client ? &c->u_shut : &c->c_shut;
	uint64_t *count = from_client ? &c->sent : &c->received;
	int d = from_client ? 0 : 1;

	if (c->pipe_r[d] >= 0)
		return relay_splice(c, from_client);
	for (int rounds = 0; rounds < 16; rounds++) {
		int f = flush_spill(c, out, !from_client);
		ssize_t n, w;

		if (f < 0)
			return -1;
		if (!f)
			return 0;
		if (*count >= BULK_BYTES && !*src_eof) {
			go_bulk(c, d);
			if (c->pipe_r[d] >= 0)
				return relay_splice(c, from_client);
		}
		if (*src_eof) {
			if (!*dst_shut) {
				shutdown(from_client ? c->ufd : c->cfd, SHUT_WR);
				*dst_shut = 1;
			}
			return 0;
		}
		n = from_client ? cl_read(c, scratch, sizeof(scratch))
				: up_read(c, scratch, sizeof(scratch));
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return -1;
		if (n == 0) {
			*src_eof = 1;
			continue;
		}
		*count += n;
		c->deadline_ms = now_ms + cfg->idle_timeout_ms;
		w = from_client ? up_write(c, scratch, n) : cl_write(c, scratch, n);
		if (w == -EAGAIN)
			w = 0;
		if (w < 0)
			return -1;
		if (w < n) {
			spill_add(out, scratch + w, n - w);
			return 0;
		}
	}
	return 0;
}

/* ---- the state machine ---- */

static void update_events(struct conn *c)
{
	uint32_t ce = 0, ue = 0;
	int to_c = spill_pending(&c->to_client) > 0;
	int to_u = spill_pending(&c->to_upstream) > 0;

	switch (c->state) {
	case ST_HEAD:
		ce = EPOLLIN;
		break;
	case ST_RESOLVE:
		break;
	case ST_CONNECT:
		ue = EPOLLOUT;
		break;
	case ST_TLS:
		ue = c->ssl_rw ? EPOLLOUT : EPOLLIN;
		break;
	case ST_TUNNEL:
		to_u = tunnel_pending(c, 1) > 0;
		to_c = tunnel_pending(c, 0) > 0;
		if (!to_u && !c->c_eof)
			ce |= EPOLLIN;
		if (!to_c && !c->u_eof)
			ue |= EPOLLIN;
		if (to_u)
			ue |= EPOLLOUT;
		break;
	case ST_FWD:
		if (!c->req_done && !to_u && !c->req_ready && c->in_len - c->in_off < HTTP_MAX_HEAD)
			ce |= EPOLLIN;
		if (c->resp_ready)
			ce |= EPOLLOUT;
		if (!to_c && !c->resp_ready)
			ue |= EPOLLIN;
		if (to_u || c->req_ready)
			ue |= c->ssl_ww ? EPOLLIN : EPOLLOUT;
		if (c->ssl_rw)
			ue |= EPOLLOUT;
		break;
	case ST_CLOSING:
		ce = to_c ? 0 : EPOLLIN;
		break;
	}
	if (to_c)
		ce |= EPOLLOUT;
	set_events(c->cfd, &c->hc, &c->cev, ce);
	set_events(c->ufd, &c->hu, &c->uev, ue);
}

static void pump(struct conn *c)
{
	for (int rounds = 0; rounds < 8 && !c->dead; rounds++) {
		enum state before = c->state;

		switch (c->state) {
		case ST_HEAD:
			if (flush_spill(c, &c->to_client, 1) < 0) {
				conn_kill(c);
				return;
			}
			read_head(c);
			break;
		case ST_RESOLVE:
		case ST_CONNECT:
			if (flush_spill(c, &c->to_client, 1) < 0) {
				conn_kill(c);
				return;
			}
			break;
		case ST_TLS:
			tls_step(c);
			break;
		case ST_TUNNEL:
			if (relay(c, 1) < 0 || relay(c, 0) < 0) {
				log_line(c, "allowed", "connection reset");
				conn_kill(c);
				return;
			}
			if ((c->c_eof && c->u_eof && !tunnel_pending(c, 0) && !tunnel_pending(c, 1)) ||
			    (c->c_gone && !tunnel_pending(c, 1)) ||
			    (c->u_gone && !tunnel_pending(c, 0))) {
				log_line(c, "allowed", NULL);
				conn_kill(c);
				return;
			}
			break;
		case ST_FWD:
			if (fwd_request(c) < 0)
				break;
			if (c->state == ST_FWD)
				fwd_response(c);
			break;
		case ST_CLOSING: {
			int f = flush_spill(c, &c->to_client, 1);

			if (f < 0) {
				conn_kill(c);
				return;
			}
			if (f) {
				if (!c->c_shut) {
					shutdown(c->cfd, SHUT_WR);
					c->c_shut = 1;
				}
				for (int i = 0; i < 4; i++) {
					ssize_t n = cl_read(c, scratch, sizeof(scratch));

					if (n == -EAGAIN)
						break;
					if (n <= 0) {
						conn_kill(c);
						return;
					}
				}
			}
			break;
		}
		}
		if (c->dead || c->state == before)
			break;
	}
	if (c->dead)
		return;
	update_events(c);
	if (c->ssl && !c->again && SSL_pending(c->ssl) > 0 && (c->uev & EPOLLIN)) {
		c->again = 1;
		c->anext = again_list;
		again_list = c;
	}
}

static void on_event(struct handle *h, uint32_t ev)
{
	struct conn *c = h->c;

	if (c->dead)
		return;
	if (c->state == ST_CONNECT && h->side == SIDE_UPSTREAM) {
		connect_done(c);
		if (c->dead)
			return;
	}
	pump(c);
	if (c->dead || !(ev & (EPOLLERR | EPOLLHUP)))
		return;
	/* A hangup stays reported whatever the mask: act on it, or the loop spins. */
	if (c->state == ST_TUNNEL) {
		int client = h->side == SIDE_CLIENT;

		if (client ? !c->c_eof : !c->u_eof)
			return; /* bytes still to read first */
		if (!tunnel_pending(c, client)) {
			log_line(c, "allowed", NULL);
			conn_kill(c);
			return;
		}
		epoll_ctl(epfd, EPOLL_CTL_DEL, client ? c->cfd : c->ufd, NULL);
		if (client)
			c->c_gone = 1;
		else
			c->u_gone = 1;
		return;
	}
	if (h->side == SIDE_CLIENT && c->state != ST_HEAD && c->state != ST_CLOSING) {
		log_line(c, "failed", "client went away");
		conn_kill(c);
	}
}

static void accept_all(void)
{
	for (int i = 0; i < 64 && nconns < cfg->max_conns; i++) {
		int fd = accept4(cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;
		struct conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of fds: stop accepting for a moment rather than spin. */
				log_note("accept", errno);
				accept_paused_until = now_ms + 100;
			}
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = xcalloc(1, sizeof(*c));
		c->hc.c = c->hu.c = c;
		c->hc.side = SIDE_CLIENT;
		c->hu.side = SIDE_UPSTREAM;
		c->cfd = fd;
		c->ufd = -1;
		c->pipe_r[0] = c->pipe_r[1] = c->pipe_w[0] = c->pipe_w[1] = -1;
		c->cev = EPOLLIN;
		if (add_fd(fd, &c->hc, EPOLLIN) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;
		nconns++;
		reset_request(c);
		enter_head(c);
	}
}

static void sweep(void)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		/*
		 * A tunnel quiet for a while gives its empty pipes back (their pages
		 * count against the user's pipe quota); the next burst takes new ones.
		 */
		if (c->state == ST_TUNNEL &&
		    c->deadline_ms - cfg->idle_timeout_ms + PIPE_IDLE_MS <= now_ms)
			for (int d = 0; d < 2; d++)
				if (c->pipe_r[d] >= 0 && !c->pipe_len[d])
					drop_pipe(c, d);
		if (c->deadline_ms > now_ms)
			continue;
		switch (c->state) {
		case ST_HEAD:
			if (c->in_len > c->in_off) {
				reset_request(c);
				log_line(c, "refused", "request head timed out");
			}
			conn_kill(c);
			break;
		case ST_RESOLVE:
		case ST_CONNECT:
		case ST_TLS:
			respond(c, 504, "failed", "timed out connecting");
			pump(c);
			break;
		case ST_TUNNEL:
		case ST_FWD:
			log_line(c, "allowed", "idle timeout");
			conn_kill(c);
			break;
		case ST_CLOSING:
			conn_kill(c);
			break;
		}
	}
}

int proxy_run(const struct proxy_config *config)
{
	struct epoll_event evs[MAX_EVENTS];
	int64_t next_sweep;
	int tick;

	cfg = config;
	if (cfg->prices && !cfg->report)
		return -EINVAL;
	pool_init();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	if (fd_set_nonblock(cfg->listen_fd, 1) < 0 || add_fd(cfg->listen_fd, &h_listen, EPOLLIN) < 0)
		return -errno;
	listening = 1;
	if (cfg->signal_fd >= 0 && add_fd(cfg->signal_fd, &h_signal, EPOLLIN) < 0)
		return -errno;
	if (add_fd(resolver_fd(cfg->resolver), &h_resolver, EPOLLIN) < 0)
		return -errno;
	tick = cfg->header_timeout_ms;
	if (cfg->idle_timeout_ms < tick)
		tick = cfg->idle_timeout_ms;
	if (cfg->connect_timeout_ms < tick)
		tick = cfg->connect_timeout_ms;
	tick /= 4;
	if (cfg->api_pool > 0 && cfg->api_pool_idle_ms / 2 < tick)
		tick = cfg->api_pool_idle_ms / 2;
	if (tick < 20)
		tick = 20;
	if (tick > 1000)
		tick = 1000;
	update_now();
	next_sweep = now_ms + tick;

	for (;;) {
		int n = epoll_wait(epfd, evs, MAX_EVENTS,
				   again_list ? 0 : (listening || nconns >= cfg->max_conns ? tick : 100));

		if (n < 0 && errno != EINTR)
			return -errno;
		update_now();
		for (int i = 0; i < n; i++) {
			struct handle *h = evs[i].data.ptr;

			switch (h->side) {
			case SIDE_LISTEN:
				accept_all();
				break;
			case SIDE_SIGNAL:
				for (struct conn *c = conns, *next; c; c = next) {
					next = c->next;
					if (c->host[0] && c->state != ST_CLOSING)
						log_line(c, "allowed", "proxy stopped");
					conn_kill(c);
				}
				free_graveyard();
				pool_close_all();
				log_left_out();
				close(epfd);
				return 0;
			case SIDE_RESOLVER:
				resolver_collect(cfg->resolver, resolver_done);
				break;
			case SIDE_POOL: {
				/* The upstream closed an idle connection, or spoke out of turn. */
				struct pooled *p = (struct pooled *)h;

				if (p->fd >= 0 && !pool_alive(p))
					pool_close(p);
				break;
			}
			default:
				on_event(h, evs[i].events);
				break;
			}
		}
		{
			struct conn *list = again_list;

			again_list = NULL;
			while (list) {
				struct conn *c = list;

				list = c->anext;
				c->again = 0;
				if (!c->dead)
					pump(c);
			}
		}
		free_graveyard();
		if (now_ms >= next_sweep) {
			sweep();
			pool_sweep();
			next_sweep = now_ms + tick;
		}
		free_graveyard();
		if (nconns < cfg->max_conns && !listening && now_ms >= accept_paused_until) {
			set_events(cfg->listen_fd, &h_listen, &(uint32_t){ 0 }, EPOLLIN);
			listening = 1;
		} else if ((nconns >= cfg->max_conns || now_ms < accept_paused_until) && listening) {
			set_events(cfg->listen_fd, &h_listen, &(uint32_t){ EPOLLIN }, 0);
			listening = 0;
		}
	}
}
