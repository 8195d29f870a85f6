/*
 * One request forwarded upstream and its answer back: the upstream head
 * (hop-by-hop headers dropped; for the API the client's credentials too,
 * and the real key added), the bodies framed by common/net/http.c, keep-alive
 * on both sides, and a replay of a GET that met a dead pooled connection.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_secrets.h"
#include "proxy/ws_scrub.h"
#include "base/banned.h"

static int hdr_dropped(const struct http_header *hd, int api)
{
	static const char *const hop[] = {
	    "host", "connection", "proxy-connection", "keep-alive",
	    "te",   "upgrade",    "expect",           "proxy-authorization"};
	/* accept-encoding: the proxy reads the API's answers (usage), so they come plain. */
	static const char *const cred[] = {"x-api-key", "authorization", "cookie",
	                                   "accept-encoding"};

	for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
		if (http_name_is(hd, hop[i]))
			return 1;
	/*
	 * Intercepted answers come plain too: an echoed value is looked for in
	 * them, and in WebSocket frames, which an extension would compress.
	 */
	if (api == 2 &&
	    (http_name_is(hd, "accept-encoding") || http_name_is(hd, "sec-websocket-extensions")))
		return 1;
	if (api == 1)
		for (size_t i = 0; i < ARRAY_SIZE(cred); i++)
			if (http_name_is(hd, cred[i]))
				return 1;
	return 0;
}

int px_wants_websocket(const struct conn *c, const struct http_head *h)
{
	if (!c->intercept || (h->method_len != 3 || memcmp(h->method, "GET", 3)))
		return 0;
	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], "upgrade") && h->hdr[i].value_len == 9 &&
		    !strncasecmp(h->hdr[i].value, "websocket", 9))
			return 1;
	return 0;
}

void px_start_forward(struct conn *c, const struct http_head *h, const char *path, size_t plen)
{
	struct proxy *px = c->px;
	struct buf b = BUF_INIT;

	buf_add(&b, h->method, h->method_len);
	buf_addch(&b, ' ');
	buf_add(&b, path, plen);
	buf_addstr(&b, " HTTP/1.1\r\nHost: ");
	if (c->is_api) {
		int v6 = strchr(px->cfg->api_host, ':') != NULL;

		buf_addf(&b, "%s%s%s", v6 ? "[" : "", px->cfg->api_host, v6 ? "]" : "");
		if (px->cfg->api_port != 443)
			buf_addf(&b, ":%d", px->cfg->api_port);
	} else {
		int v6 = strchr(c->host, ':') != NULL;

		buf_addf(&b, "%s%s%s", v6 ? "[" : "", c->host, v6 ? "]" : "");
		if (c->port != (c->intercept ? 443 : 80))
			buf_addf(&b, ":%d", c->port);
	}
	buf_addstr(&b, "\r\n");
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (hdr_dropped(hd, c->is_api ? 1 : c->intercept ? 2 : 0))
			continue;
		buf_add(&b, hd->name, hd->name_len);
		buf_addstr(&b, ": ");
		buf_add(&b, hd->value, hd->value_len);
		buf_addstr(&b, "\r\n");
	}
	if (c->is_api)
		buf_addf(&b, "Accept-Encoding: identity\r\n%s%s\r\n",
		         px->cfg->api_bearer ? "Authorization: Bearer " : "x-api-key: ",
		         px->cfg->api_key);
	if (c->intercept)
		buf_addstr(&b, "Accept-Encoding: identity\r\n");
	/*
	 * Upstream connections are kept for the API (px->cfg->api_pool), for
	 * the next request of the same intercepted client connection, and for
	 * the proxy's own next fetch (common/proxy/proxy_pool.c).
	 */
	c->websocket = px_wants_websocket(c, h);
	if (c->websocket)
		buf_addstr(&b, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	else
		buf_addf(&b, "Connection: %s\r\n\r\n",
		         (c->is_api && px->cfg->api_pool > 0) || (c->intercept && !h->conn_close)
		             ? "keep-alive"
		             : "close");
	px_spill_add(&c->to_upstream, b.buf, b.len);
	c->sent += h->head_len; /* the client's bytes, not ours (ours hold the key) */

	if (h->chunked)
		http_body_init(&c->reqb, BODY_CHUNKED, 0);
	else if (h->content_length > 0)
		http_body_init(&c->reqb, BODY_LENGTH, (uint64_t)h->content_length);
	else
		http_body_init(&c->reqb, BODY_NONE, 0);
	if (c->paid)
		px_spend_body_begin(c);
	else if (c->form_on) {
		c->reqb.content = px_form_content;
		c->reqb.content_ctx = c;
	}
	/*
	 * A request without a body whose method is safe can be sent again if a
	 * reused connection turns out dead before answering; keep its head.
	 */
	if (((c->is_api && px->cfg->api_pool > 0) || (c->intercept && c->kfd >= 0) || c->own) &&
	    c->reqb.kind == BODY_NONE && h->method_len == 3 && !memcmp(h->method, "GET", 3)) {
		c->replay = xmalloc(b.len);
		memcpy(c->replay, b.buf, b.len);
		c->replay_len = b.len;
	}
	OPENSSL_cleanse(b.buf, b.len);
	buf_release(&b);
	c->head_method = h->method_len == 4 && !memcmp(h->method, "HEAD", 4);
	c->client_close = h->conn_close;
	/* Not for a body that is all here (px_form_wait() may have waited for it). */
	if (h->expect_continue && !c->reqb.done &&
	    !(h->content_length > 0 && c->in_len - c->in_off >= (uint64_t)h->content_length))
		px_spill_add(&c->to_client, HTTP_CONTINUE_HEAD, sizeof(HTTP_CONTINUE_HEAD) - 1);
	px_start_resolve(c);
}

void px_abort_forward(struct conn *c, const char *why)
{
	px_log_line(c, "failed", why);
	px_conn_kill(c);
}

/*
 * The upstream failed.  Before the answer's head reached the client it is
 * told why with a 502; after, all that is left is to cut the connection.
 */
static void upstream_failed(struct conn *c, const char *why)
{
	if (c->resp_head_done)
		px_abort_forward(c, why);
	else
		px_respond(c, 502, "failed", why);
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
	px_close_upstream(c);
	c->reused = 0;
	c->req_done = 0;
	c->req_ready = c->resp_ready = 0;
	px_spill_add(&c->to_upstream, c->replay, c->replay_len);
	px_start_resolve(c);
	return 1;
}

void px_finish_request(struct conn *c)
{
	struct proxy *px = c->px;
	int keep = !c->close_after && !c->client_close && c->req_done;

	px_log_line(c, "allowed",
	            c->drain_why  ? c->drain_why
	            : c->draining ? "client went away: its answer was read to the end"
	                          : c->cache_why);
	/* The API's connection, or an own fetch's, goes back to its pool (if clean). */
	px_pool_put(c);
	if (c->own) {
		/* The proxy's own fetch: no client to answer, no next request. */
		px_conn_kill(c);
		return;
	}
	if (keep && !c->draining)
		px_keep_upstream(c);
	px_close_upstream(c);
	if (c->draining) {
		px_conn_kill(c);
		return;
	}
	if (!keep) {
		c->state = ST_CLOSING;
		c->deadline_ms = px->now_ms + LINGER_MS;
		return;
	}
	px_reset_request(c);
	px_enter_head(c);
	px_read_head(c);
}

/*
 * The host took an intercepted WebSocket upgrade (h, its 101): the head
 * goes to the client with the upgrade's headers, and from then on the
 * connection is a relay both ways, TLS on each side (ST_TUNNEL), the VM's
 * frames read and the host's read and masked on their way
 * (common/proxy/ws_scrub.h).
 * A 101 to another protocol, or that agrees an extension (which the
 * request never offers), is a 502.
 */
static void upgraded(struct conn *c, const struct http_head *h)
{
	struct proxy *px = c->px;
	const struct proxy_secrets *ps = px->cfg->secrets;
	const struct http_header *up;
	struct buf b = BUF_INIT, why = BUF_INIT;
	int n;

	up = http_header(h, "upgrade", &n);
	if (!up || n != 1 || up->value_len != 9 || strncasecmp(up->value, "websocket", 9)) {
		px_respond(c, 502, "failed", "upstream switched protocols to other than websocket");
		return;
	}
	if (http_header(h, "sec-websocket-extensions", NULL)) {
		px_respond(c, 502, "failed", "upstream agreed a WebSocket extension");
		return;
	}
	c->status = 101;
	buf_add(&b, c->rb + c->rb_off,
	        (const char *)memchr(c->rb + c->rb_off, '\n', h->head_len) - (c->rb + c->rb_off) +
	            1);
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (http_name_is(hd, "connection") || http_name_is(hd, "keep-alive") ||
		    http_name_is(hd, "proxy-connection") || http_name_is(hd, "upgrade"))
			continue;
		buf_add(&b, hd->name, hd->name_len);
		buf_addstr(&b, ": ");
		buf_add(&b, hd->value, hd->value_len);
		buf_addstr(&b, "\r\n");
	}
	buf_addstr(&b, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	px_intercept_head(c, &b);
	px_spill_add(&c->to_client, b.buf, b.len);
	c->received += b.len;
	buf_release(&b);
	c->rb_off += h->head_len;
	c->ws = xcalloc(1, sizeof(*c->ws));
	ws_scrub_init(c->ws, ps->secrets, ps->nr);
	c->ws_vm = xcalloc(1, sizeof(*c->ws_vm));
	ws_frames_init(c->ws_vm, 1);
	/* What either side sent after the heads goes first, each as frames. */
	buf_reset(&b);
	n = ws_scrub_feed(c->ws, c->rb + c->rb_off, c->rb_len - c->rb_off, &b, &why);
	px_spill_add(&c->to_client, b.buf, b.len);
	if (n < 0) {
		buf_release(&b);
		px_ws_failed(c, 0, why.buf);
		buf_release(&why);
		return;
	}
	c->received += c->rb_len - c->rb_off;
	c->rb_off = c->rb_len = 0;
	buf_reset(&b);
	n = ws_vm_feed(c->ws_vm, c->in ? c->in + c->in_off : "", c->in_len - c->in_off, &b, &why);
	px_spill_add(&c->to_upstream, b.buf, b.len);
	buf_release(&b);
	if (n < 0) {
		px_ws_failed(c, 1, why.buf);
		buf_release(&why);
		return;
	}
	c->sent += c->in_len - c->in_off;
	c->in_off = c->in_len = 0;
	c->resp_head_done = 1;
	c->state = ST_TUNNEL;
	c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
}

/*
 * The answer is looked through for the secrets' values: on an intercepted
 * connection, and from the API when the bearer token is forwarded.
 */
static int echoes(const struct conn *c)
{
	return c->intercept || (c->is_api && c->px->cfg->api_bearer && c->px->cfg->secrets);
}

static int response_head(struct conn *c)
{
	struct http_head h;
	struct buf why = BUF_INIT;
	struct buf b = BUF_INIT;
	int r;

	for (;;) {
		r = http_parse_response(c->rb + c->rb_off, c->rb_len - c->rb_off, &h, &why);
		if (r == 0) {
			if (c->rb_len - c->rb_off >= RBUF_SIZE) {
				px_respond(c, 502, "failed", "upstream response head too large");
				return -1;
			}
			return 0;
		}
		if (r < 0) {
			struct buf msg = BUF_INIT;

			buf_addf(&msg, "bad response from upstream: %s", why.buf);
			px_respond(c, 502, "failed", msg.buf);
			buf_release(&msg);
			buf_release(&why);
			return -1;
		}
		if (h.status == 101 && c->websocket) {
			upgraded(c, &h);
			return -1;
		}
		if (h.status == 101) {
			px_respond(c, 502, "failed", "upstream switched protocols");
			return -1;
		}
		if (h.status >= 200)
			break;
		c->rb_off += h.head_len; /* drop interim responses; we sent our own 100 */
	}
	c->status = h.status;
	c->up_close = h.conn_close;
	px_drop_replay(c); /* answered: never sent again */
	if (c->head_method || h.status == 204 || h.status == 304)
		http_body_init(&c->respb, BODY_NONE, 0);
	else if (h.chunked)
		http_body_init(&c->respb, BODY_CHUNKED, 0);
	else if (h.content_length >= 0)
		http_body_init(&c->respb, BODY_LENGTH, (uint64_t)h.content_length);
	else
		http_body_init(&c->respb, BODY_CLOSE, 0);
	/* An intercepted answer's body changes length where an echo is replaced. */
	c->rechunk = echoes(c) && c->respb.kind != BODY_NONE;
	if (c->rechunk && px_echo_unreadable(c, &h)) {
		/* No echo could be looked for in it (docs/proxy.md, "Secrets and interception"). */
		px_respond(c, 502, "failed",
		           "upstream answer is compressed: its echo of a secret could not be "
		           "looked for");
		return -1;
	}
	if ((c->respb.kind == BODY_CLOSE && !c->rechunk) || c->client_close)
		c->close_after = 1;
	px_usage_begin(c, &h);
	if (c->intercept)
		px_cache_head(c, &h);

	/* The status line as it came, the headers without the hop-by-hop ones. */
	buf_add(&b, c->rb + c->rb_off,
	        (const char *)memchr(c->rb + c->rb_off, '\n', h.head_len) - (c->rb + c->rb_off) +
	            1);
	for (int i = 0; i < h.nhdr; i++) {
		const struct http_header *hd = &h.hdr[i];

		if (http_name_is(hd, "connection") || http_name_is(hd, "keep-alive") ||
		    http_name_is(hd, "proxy-connection") || http_name_is(hd, "te") ||
		    http_name_is(hd, "upgrade"))
			continue;
		if (c->rechunk &&
		    (http_name_is(hd, "content-length") || http_name_is(hd, "transfer-encoding")))
			continue;
		buf_add(&b, hd->name, hd->name_len);
		buf_addstr(&b, ": ");
		buf_add(&b, hd->value, hd->value_len);
		buf_addstr(&b, "\r\n");
	}
	if (c->rechunk)
		buf_addstr(&b, "Transfer-Encoding: chunked\r\n");
	buf_addf(&b, "Connection: %s\r\n\r\n", c->close_after ? "close" : "keep-alive");
	if (echoes(c))
		px_intercept_head(c, &b);
	px_spill_add(&c->to_client, b.buf, b.len);
	c->received += b.len;
	buf_release(&b);
	c->rb_off += h.head_len;
	c->resp_head_done = 1;
	return 1;
}

int px_fwd_request(struct conn *c)
{
	struct proxy *px = c->px;

	for (int rounds = 0; rounds < 64; rounds++) {
		struct buf why = BUF_INIT;
		int f = px_flush_spill(c, &c->to_upstream, 0);

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
				px_abort_forward(c, why.buf);
				buf_release(&why);
				return -1;
			}
			if (px_form_cut(c))
				return -1;
			c->req_ready = (size_t)k;
		}
		if (c->req_ready) {
			ssize_t w = px_up_write(c, c->in + c->in_off, c->req_ready);

			if (w == -EAGAIN)
				return 0;
			if (w < 0) {
				upstream_failed(c, "upstream write failed");
				return -1;
			}
			c->in_off += w;
			c->req_ready -= w;
			c->sent += w;
			c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
			continue;
		}
		if (c->reqb.done) {
			c->req_done = 1;
			px_spend_body_done(c);
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
			ssize_t n = px_cl_read(c, c->in + c->in_len, HTTP_MAX_HEAD - c->in_len);

			px_spend_client_wait(c, 0, n == -EAGAIN);
			if (n == -EAGAIN)
				return 0;
			if (n <= 0) {
				px_abort_forward(c, "client closed inside the request body");
				return -1;
			}
			c->in_len += n;
		}
	}
	return 0;
}

/*
 * Read more of the upstream's answer into c->rb (its head handled when it
 * is complete).  1 to go on, 0 to wait, -1 when c is gone or answered.
 */
static int read_response(struct conn *c)
{
	struct proxy *px = c->px;
	ssize_t n;

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
	if (c->draining && c->drained >= px->cfg->drain_max) {
		px_abort_forward(c, "client went away: its answer passed the drain bound in bytes");
		return -1;
	}
	n = px_up_read(c, c->rb + c->rb_len, RBUF_SIZE - c->rb_len);
	if (n == -EAGAIN)
		return 0;
	if (n <= 0 && retry_upstream(c))
		return -1;
	if (n < 0 && !c->resp_head_done) {
		px_respond(c, 502, "failed", "upstream read failed");
		return -1;
	}
	if (n < 0) {
		px_abort_forward(c, "upstream read failed");
		return -1;
	}
	if (n == 0) {
		if (!c->resp_head_done) {
			px_respond(c, 502, "failed", "upstream closed without a response");
			return -1;
		}
		if (c->respb.kind == BODY_CLOSE) {
			c->respb.done = 1;
			return 1;
		}
		px_abort_forward(c, "upstream closed inside the response");
		return -1;
	}
	c->rb_len += n;
	c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
	if (c->draining) {
		c->drained += (uint64_t)n;
		if (c->deadline_ms > c->drain_until)
			c->deadline_ms = c->drain_until;
	}
	if (!c->resp_head_done && response_head(c) < 0)
		return -1;
	return 1;
}

int px_client_gone(struct conn *c, const char *why)
{
	struct proxy *px = c->px;

	if (c->draining)
		return 0;
	if (!c->admitted || !c->req_done || (c->resp_head_done && c->respb.done)) {
		px_abort_forward(c, why);
		return -1;
	}
	/* It is paid for whether read or not: read it, for its usage (docs/budget.md). */
	c->draining = 1;
	c->client_close = 1;
	c->to_client.off = c->to_client.len;
	epoll_ctl(px->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
	close(c->cfd);
	c->cfd = -1;
	c->cev = 0;
	c->drain_until = px->now_ms + px->cfg->drain_ms;
	if (c->deadline_ms > c->drain_until)
		c->deadline_ms = c->drain_until;
	return 0;
}

/*
 * Write the whole records' worth of an intercepted answer's bytes waiting
 * for the client, keeping back a tail shorter than a record while more of
 * the answer may come: a chunk's size line and CRLF then share the record
 * of its data instead of going out as records of a few bytes.  As
 * px_flush_spill(), 1 meaning nothing waits but that tail.
 */
static int flush_records(struct conn *c)
{
	struct spill *s = &c->to_client;

	while (px_spill_pending(s) >= PX_RECORD) {
		ssize_t w =
		    px_cl_write(c, s->p + s->off, px_spill_pending(s) / PX_RECORD * PX_RECORD);

		if (w == -EAGAIN)
			return 0;
		if (w < 0)
			return (int)w;
		s->off += w;
	}
	return 1;
}

/* Hold back the answer's last bytes (p, n) while its Go module zip is checked. */
static void hold_tail(struct conn *c, const char *p, size_t n)
{
	c->zip_tail = xcalloc(1, sizeof(*c->zip_tail));
	buf_init(c->zip_tail, n);
	buf_add(c->zip_tail, p, n);
}

/*
 * One step of the zip's check (px_cache_zip_step()): 1 when c waits for the
 * next, 0 when it ended and the bytes held back went on, -1 when c was cut.
 */
static int zip_step(struct conn *c)
{
	struct proxy *px = c->px;
	int r = px_cache_zip_step(c);

	c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
	if (r < 0)
		return -1;
	if (r > 0) {
		/* Other connections move before the next step. */
		c->more = 1;
		return 1;
	}
	px_intercept_body(c, c->zip_tail->buf, c->zip_tail->len, 1);
	buf_release(c->zip_tail);
	free(c->zip_tail);
	c->zip_tail = NULL;
	return 0;
}

int px_fwd_response(struct conn *c)
{
	struct proxy *px = c->px;

	c->more = 0;
	for (int rounds = 0; rounds < 64; rounds++) {
		struct buf why = BUF_INIT;
		int streaming = c->rechunk == 1 && c->resp_head_done && !c->respb.done;
		int f = c->draining ? 1
		        : streaming ? flush_records(c)
		                    : px_flush_spill(c, &c->to_client, 1),
		    r;

		if (f < 0) {
			if (px_client_gone(c, "client write failed") < 0)
				return -1;
			continue;
		}
		px_spend_client_wait(c, 1, !f);
		if (!f)
			return 0;
		if (c->zipck) {
			if ((r = zip_step(c)) != 0)
				return r > 0 ? 0 : -1;
			continue;
		}
		if (c->rechunk == 1 && c->resp_head_done && c->rb_len > c->rb_off &&
		    !c->respb.done) {
			size_t dl = 0;
			long k = http_body_decode(&c->respb, c->rb + c->rb_off,
			                          c->rb_len - c->rb_off, px->scratch, &dl, &why);

			if (k < 0) {
				px_abort_forward(c, why.buf);
				buf_release(&why);
				return -1;
			}
			c->rb_off += (size_t)k;
			c->received += (uint64_t)k;
			if ((r = px_cache_body(c, px->scratch, dl, c->respb.done)) < 0)
				return -1;
			if (r > 0) {
				hold_tail(c, px->scratch, dl);
				continue;
			}
			px_intercept_body(c, px->scratch, dl, c->respb.done);
			c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
			continue;
		}
		if (c->rechunk == 1 && c->resp_head_done && c->respb.done) {
			if ((r = px_cache_body(c, "", 0, 1)) < 0)
				return -1;
			if (r > 0) {
				hold_tail(c, "", 0);
				continue;
			}
			px_intercept_body(c, "", 0, 1);
			continue;
		}
		if (c->resp_head_done && !c->resp_ready && c->rb_len > c->rb_off &&
		    !c->respb.done) {
			long k = http_body_feed(&c->respb, c->rb + c->rb_off, c->rb_len - c->rb_off,
			                        &why);

			if (k < 0) {
				px_abort_forward(c, why.buf);
				buf_release(&why);
				return -1;
			}
			c->resp_ready = (size_t)k;
		}
		if (c->resp_ready) {
			ssize_t w = c->draining ? (ssize_t)c->resp_ready
			                        : px_cl_write(c, c->rb + c->rb_off, c->resp_ready);

			px_spend_client_wait(c, 1, w == -EAGAIN);
			if (w == -EAGAIN)
				return 0;
			if (w < 0) {
				if (px_client_gone(c, "client write failed") < 0)
					return -1;
				continue;
			}
			c->rb_off += w;
			c->resp_ready -= w;
			if (!c->draining) {
				c->received += w;
				c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
			}
			continue;
		}
		if (c->resp_head_done && c->respb.done) {
			px_finish_request(c);
			return -1;
		}
		r = read_response(c);
		if (r == 0 && streaming && px_flush_spill(c, &c->to_client, 1) < 0) {
			/* Nothing more from the host now: the tail kept back goes too. */
			if (px_client_gone(c, "client write failed") < 0)
				return -1;
			continue;
		}
		if (r <= 0)
			return r;
	}
	/* Work left: px_pump() pumps it again after the loop's next wait, which does not block. */
	c->more = 1;
	return 0;
}
