/*
 * A proxy connection's life (opened by the loop, killed, freed after the
 * round), the answers the proxy gives itself, and I/O on either side.
 */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "proxy/proxy_impl.h"
#include "net/resolve.h"
#include "base/banned.h"

void px_spill_add(struct spill *s, const void *p, size_t n)
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

size_t px_spill_pending(const struct spill *s)
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

void px_set_events(struct proxy *px, int fd, struct handle *h, uint32_t *cur, uint32_t want)
{
	struct epoll_event ev = {.events = want, .data.ptr = h};

	if (fd < 0 || *cur == want ||
	    (h->c && ((h == &h->c->hc && h->c->c_gone) || (h == &h->c->hu && h->c->u_gone))))
		return;
	if (epoll_ctl(px->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		*cur = want;
}

int px_add_fd(struct proxy *px, int fd, struct handle *h, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = h};

	return epoll_ctl(px->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void px_drop_replay(struct conn *c)
{
	if (c->replay) {
		OPENSSL_cleanse(c->replay, c->replay_len); /* it holds the key */
		free(c->replay);
	}
	c->replay = NULL;
	c->replay_len = 0;
}

void px_close_upstream(struct conn *c)
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
	c->ssl_rw = c->ssl_ww = c->ssl_dry = 0;
	spill_free(&c->to_upstream);
	free(c->rb);
	c->rb = NULL;
	c->rb_off = c->rb_len = 0;
}

void px_conn_kill(struct conn *c)
{
	struct proxy *px = c->px;

	if (c->dead)
		return;
	c->dead = 1;
	if (c->job) {
		resolver_cancel(px->cfg->resolver, c->job);
		c->job = NULL;
	}
	px_close_upstream(c);
	px_cache_end(c);
	if (c->cfd >= 0)
		close(c->cfd);
	c->cfd = -1;
	for (int d = 0; d < 2; d++)
		px_drop_pipe(c, d);
	if (c->prev)
		c->prev->next = c->next;
	else
		px->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	px->nconns--;
	if (c->again) {
		for (struct conn **pp = &px->again_list; *pp; pp = &(*pp)->anext)
			if (*pp == c) {
				*pp = c->anext;
				break;
			}
		c->again = 0;
	}
	c->gnext = px->graveyard;
	px->graveyard = c;
}

void px_free_graveyard(struct proxy *px)
{
	while (px->graveyard) {
		struct conn *c = px->graveyard;

		px->graveyard = c->gnext;
		px_usage_done(c);
		px_drop_replay(c);
		px_intercept_free(c);
		spill_free(&c->to_client);
		free(c->in);
		free(c);
	}
}

void px_reset_request(struct conn *c)
{
	struct proxy *px = c->px;

	px_usage_done(c);
	px_cache_end(c);
	c->paid = c->us_counted = c->us_final = 0;
	memset(&c->req_tokens, 0, sizeof(c->req_tokens));
	c->req_nano = c->iter_nano = 0;
	c->price_flags = c->unread_flags = 0;
	memset(c->it_flags, 0, sizeof(c->it_flags));
	c->req_model[0] = '\0';
	usage_req_init(&c->rq);
	c->charged_max = 0; /* admitted and resv: px_usage_done() settled them */
	c->cl_waiting = 0;
	c->body_waited = c->answer_waited = 0;
	c->drain_why = NULL;
	c->draining = 0;
	c->drained = 0;
	px_drop_replay(c);
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
	c->used[0] = '\0';
	c->used_refused = 0;
	c->websocket = c->continued = c->form_on = 0;
	c->rechunk = 0;
	if (c->echo) {
		swap_echo_release(c->echo);
		free(c->echo);
		c->echo = NULL;
	}
	c->ai = 0;
	c->connect_err = 0;
	c->start_ms = px->now_ms;
}

void px_enter_head(struct conn *c)
{
	struct proxy *px = c->px;

	c->state = ST_HEAD;
	c->deadline_ms = px->now_ms + (c->in_len > c->in_off ? px->cfg->header_timeout_ms
	                                                     : px->cfg->idle_timeout_ms);
}

/*
 * Answer the client ourselves and close: refusals and errors.  The body is
 * "aibox-proxy: why" in text, or json when given.
 */
/*
 * A refusal of a request for the API, in the API's own error shape: Claude
 * Code shows an error's message, so the VM's user reads one sentence that
 * says who refused what and why.  A new string (free it).
 */
static char *api_error_json(int code, const char *verdict, const char *why)
{
	struct buf msg = BUF_INIT;
	json_t *body;
	char *text;

	if (!strcmp(verdict, "refused"))
		buf_addf(&msg, "aibox-proxy refused this request: %s (the task's proxy.log has it)",
		         why);
	else
		buf_addf(&msg, "aibox-proxy: %s", why);
	body = json_pack("{s:s, s:{s:s, s:s%}}", "type", "error", "error", "type",
	                 code == 403   ? "permission_error"
	                 : code >= 500 ? "api_error"
	                               : "invalid_request_error",
	                 "message", msg.buf, msg.len);
	text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (!text)
		die_oom();
	json_decref(body);
	buf_release(&msg);
	return text;
}

void px_respond_with(struct conn *c, int code, const char *verdict, const char *why,
                     const char *json)
{
	struct proxy *px = c->px;
	char *api_json = !json && c->is_api ? api_error_json(code, verdict, why) : NULL;
	struct buf b = BUF_INIT;

	c->status = code;
	px_log_line(c, verdict, why);
	px_close_upstream(c);
	if (c->job) {
		resolver_cancel(px->cfg->resolver, c->job);
		c->job = NULL;
	}
	buf_addf(&b, "HTTP/1.1 %d %s\r\n", code, http_reason(code));
	if (code == 405)
		buf_addstr(&b, "Allow: " PROXY_API_METHODS "\r\n");
	if (api_json)
		json = api_json;
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
	px_spill_add(&c->to_client, b.buf, b.len);
	buf_release(&b);
	free(api_json);
	c->state = ST_CLOSING;
	c->deadline_ms = px->now_ms + LINGER_MS;
}

void px_respond(struct conn *c, int code, const char *verdict, const char *why)
{
	px_respond_with(c, code, verdict, why, NULL);
}

void px_refuse(struct conn *c, const char *why)
{
	px_respond(c, 403, "refused", why);
}

/* SSL_read() as px_up_read() says; *want_write set when it waits to write. */
static ssize_t tls_read(SSL *ssl, void *p, size_t n, int *want_write)
{
	int r;

	ERR_clear_error();
	r = SSL_read(ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
	*want_write = 0;
	if (r > 0)
		return r;
	switch (SSL_get_error(ssl, r)) {
	case SSL_ERROR_WANT_READ:
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*want_write = 1;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		/* An EOF without close_notify: treat as EOF, the framing decides. */
		return ERR_peek_error() ? -EPROTO : 0;
	}
}

/* SSL_write(), the same way; *want_read set when it waits to read. */
static ssize_t tls_write(SSL *ssl, const void *p, size_t n, int *want_read)
{
	int r;

	ERR_clear_error();
	r = SSL_write(ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
	*want_read = 0;
	if (r > 0)
		return r;
	switch (SSL_get_error(ssl, r)) {
	case SSL_ERROR_WANT_WRITE:
		return -EAGAIN;
	case SSL_ERROR_WANT_READ:
		*want_read = 1;
		return -EAGAIN;
	default:
		return -EPIPE;
	}
}

ssize_t px_cl_read(struct conn *c, void *p, size_t n)
{
	if (c->own)
		return 0; /* the proxy's own fetch has no client: it is gone */
	if (c->cssl)
		return tls_read(c->cssl, p, n, &c->cssl_rw);
	for (;;) {
		ssize_t r = read(c->cfd, p, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t px_cl_write(struct conn *c, const void *p, size_t n)
{
	if (c->own)
		return (ssize_t)n; /* ... and what would go to it is dropped */
	if (c->cssl)
		return tls_write(c->cssl, p, n, &c->cssl_ww);
	for (;;) {
		ssize_t r = send(c->cfd, p, n, MSG_NOSIGNAL);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t px_up_read(struct conn *c, void *p, size_t n)
{
	if (c->reused) {
		int one = 1;

		/*
		 * A kept connection has left the kernel's quick-ACK start, which does
		 * not last: re-armed at each read, so an upstream that writes a head
		 * and a body apart (Nagle) does not wait out our delayed ACK, 40 ms a
		 * request.
		 */
		setsockopt(c->ufd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	}
	if (c->ssl) {
		ssize_t r = tls_read(c->ssl, p, n, &c->ssl_rw);

		c->ssl_dry = r == -EAGAIN && !c->ssl_rw;
		return r;
	}
	for (;;) {
		ssize_t r = read(c->ufd, p, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t px_up_write(struct conn *c, const void *p, size_t n)
{
	if (c->ssl)
		return tls_write(c->ssl, p, n, &c->ssl_ww);
	for (;;) {
		ssize_t r = send(c->ufd, p, n, MSG_NOSIGNAL);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

int px_flush_spill(struct conn *c, struct spill *s, int to_client)
{
	while (px_spill_pending(s)) {
		ssize_t w = to_client ? px_cl_write(c, s->p + s->off, px_spill_pending(s))
		                      : px_up_write(c, s->p + s->off, px_spill_pending(s));

		if (w == -EAGAIN)
			return 0;
		if (w < 0)
			return (int)w;
		s->off += w;
	}
	spill_free(s);
	return 1;
}
