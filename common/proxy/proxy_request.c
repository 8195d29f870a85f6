/*
 * Request heads from the client, and what each asks for: a tunnel, a
 * request forwarded to an allowed host, key forwarding, or the hand-off
 * to aibox-broker.  Everything else is refused here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/allow.h"
#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "base/log_escape.h"
#include "proxy/proxy_impl.h"
#include "base/banned.h"

void px_set_what(struct conn *c, const char *method, size_t mlen, const char *path, size_t plen)
{
	struct buf b = BUF_INIT;

	log_escape(&b, method, mlen, 16, 0);
	if (path) {
		buf_addch(&b, ' ');
		if (plen)
			log_escape(&b, path, plen, 150, 0);
		else
			buf_addstr(&b, "\"\""); /* log_escape() writes a '"' as \x22 */
	}
	snprintf(c->what, sizeof(c->what), "%s", b.buf);
	buf_release(&b);
}

/*
 * The one reading of a target's authority (docs/proxy.md, "What the VM may
 * ask for"), for the verdict and the log alike: the whole target of a
 * CONNECT, else what follows "http://" or "https://" (any case) up to the
 * first '/', '?' or '#' (RFC 3986).  *a and *al the authority, *ui the
 * bytes of user information at its start (up to its last '@', with it; 0
 * when none).  0, or -1 for any other target.
 */
static int target_authority(const struct http_head *h, const char **a, size_t *al, size_t *ui)
{
	const char *p, *end = h->target + h->target_len;

	*a = h->target;
	if (h->method_len == 7 && !memcmp(h->method, "CONNECT", 7)) {
		/* the whole target is the authority */
	} else if (h->target_len >= 7 && !strncasecmp(*a, "http://", 7)) {
		*a += 7;
	} else if (h->target_len >= 8 && !strncasecmp(*a, "https://", 8)) {
		*a += 8;
	} else {
		return -1;
	}
	if (*a != h->target)
		for (p = *a; p < end; p++)
			if (*p == '/' || *p == '?' || *p == '#') {
				end = p;
				break;
			}
	*al = (size_t)(end - *a);
	*ui = 0;
	for (p = end; p > *a; p--)
		if (p[-1] == '@') {
			*ui = (size_t)(p - *a);
			break;
		}
	return 0;
}

/*
 * c->what for a request refused before its host was read: the method
 * and, for a CONNECT or an http:// or https:// target, its authority
 * (target_authority()) without user information (it may hold a
 * credential); escaped and cut by px_set_what().  The method alone for
 * any other target, nothing for a head without a request line.
 */
static void set_what_asked(struct conn *c, const struct http_head *h)
{
	const char *a;
	size_t al, ui;

	if (!h->method)
		return;
	if (target_authority(h, &a, &al, &ui) < 0) {
		px_set_what(c, h->method, h->method_len, NULL, 0);
		return;
	}
	px_set_what(c, h->method, h->method_len, a + ui, al - ui);
}

/* A CONNECT: a tunnel to an allowed host, or key forwarding inside it. */
static void connect_request(struct conn *c, const struct http_head *h)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;
	const char *auth;
	size_t al, ui;

	c->is_connect = 1;
	px_set_what(c, h->method, h->method_len, NULL, 0);
	/* The log names the host after the '@' (set_what_asked()): refused for the '@' itself. */
	if (target_authority(h, &auth, &al, &ui) < 0)
		BUG("connect_request() on a request that is no CONNECT");
	if (ui) {
		set_what_asked(c, h);
		px_refuse(c, "user information in the request target");
		return;
	}
	if (http_split_authority(h->target, h->target_len, 0, c->host, sizeof(c->host), &c->port,
	                         &why)) {
		c->host[0] = '\0';
		set_what_asked(c, h);
		px_refuse(c, why.buf);
		buf_release(&why);
		return;
	}
	/* Key forwarding goes to the upstream whatever host the client names. */
	if (h->host && !px_is_api_authority(c->host, c->port)) {
		char hh[256];
		int hp;

		if (http_split_authority(h->host, h->host_len, 0, hh, sizeof(hh), &hp, NULL) ||
		    strcmp(hh, c->host) || hp != c->port) {
			px_refuse(c, "Host disagrees with the CONNECT target");
			return;
		}
	}
	if (h->content_length > 0 || h->chunked) {
		px_refuse(c, "CONNECT with a body");
		return;
	}
	if (c->api_tunnel) {
		px_refuse(c, "CONNECT inside the key forwarding port");
		return;
	}
	if (px_is_git_host(c->host)) {
		px_refuse(c, PROXY_GIT_HOST " takes plain http:// requests, not CONNECT");
		return;
	}
	if (px_is_api_authority(c->host, c->port)) {
		if (!px->cfg->api_key) {
			px_refuse(c, "key forwarding is off");
			return;
		}
		snprintf(c->host, sizeof(c->host), "localhost");
		px_log_line(c, "allowed", "key forwarding");
		px_spill_add(&c->to_client, HTTP_TUNNEL_HEAD, sizeof(HTTP_TUNNEL_HEAD) - 1);
		c->api_tunnel = 1;
		px_reset_request(c);
		px_enter_head(c);
		return;
	}
	c->entry = allow_match(px->cfg->allow, c->host, c->port);
	if (!c->entry) {
		px_refuse(c, "not on the allow list");
		return;
	}
	if (px_intercepts(c)) {
		px_intercept_start(c);
		return;
	}
	px_start_resolve(c);
}

/*
 * An absolute-URI request (target http://...): c->host and c->port from
 * it, c->is_api, and *t and *tl narrowed to its path.  1 to go on; 0 when
 * c was answered or handed to the broker.
 */
static int absolute_request(struct conn *c, const struct http_head *h, const char **t, size_t *tl)
{
	const char *auth, *end = *t + *tl, *slash;
	struct buf why = BUF_INIT;
	size_t al, ui;
	char hh[256];
	int hp;

	if (target_authority(h, &auth, &al, &ui) < 0)
		BUG("absolute_request() on a target that is not http://");
	if (ui) {
		set_what_asked(c, h);
		px_refuse(c, "user information in the request target");
		return 0;
	}
	if (memchr(*t, '#', *tl)) {
		set_what_asked(c, h);
		px_refuse(c, "fragment in the request target");
		return 0;
	}
	/* No '#': the authority ends at the path, at the query, or at the end. */
	slash = auth + al < end ? auth + al : NULL;
	if (http_split_authority(auth, al, 80, c->host, sizeof(c->host), &c->port, &why)) {
		c->host[0] = '\0';
		set_what_asked(c, h);
		px_refuse(c, why.buf);
		buf_release(&why);
		return 0;
	}
	/*
	 * Key forwarding (the key forwarding port named, or any request
	 * inside a CONNECT to it) goes to the API upstream whatever host
	 * the request or its Host header names; the Host header is not
	 * passed on.
	 */
	c->is_api = px_is_api_authority(c->host, c->port) || c->api_tunnel;
	if (!c->is_api && !h->host) {
		px_refuse(c, "Host header missing");
		return 0;
	}
	if (!c->is_api &&
	    (http_split_authority(h->host, h->host_len, 80, hh, sizeof(hh), &hp, NULL) ||
	     strcmp(hh, c->host) || hp != c->port)) {
		px_refuse(c, "Host disagrees with the request target");
		return 0;
	}
	*t = slash ? slash : "/";
	*tl = slash ? (size_t)(end - slash) : 1;
	if (**t == '?') {
		px_refuse(c, "request target without a path");
		return 0;
	}
	if (!c->is_api && px_is_git_host(c->host)) {
		px_git_request(c, h, *t, *tl);
		return 0;
	}
	return 1;
}

static void handle_request(struct conn *c, const struct http_head *h)
{
	struct proxy *px = c->px;
	const char *t = h->target;
	size_t tl = h->target_len;

	px_reset_request(c);
	c->in_off += h->head_len;
	if (c->intercept) {
		if (h->method_len == 7 && !memcmp(h->method, "CONNECT", 7)) {
			snprintf(c->host, sizeof(c->host), "%s", c->ihost);
			c->port = c->iport;
			px_set_what(c, h->method, h->method_len, NULL, 0);
			px_refuse(c, "CONNECT inside an intercepted connection");
		} else {
			px_intercept_request(c, h, t, tl);
		}
		return;
	}
	if (h->method_len == 7 && !memcmp(h->method, "CONNECT", 7)) {
		connect_request(c, h);
		return;
	}
	if (tl >= 7 && !strncasecmp(t, "http://", 7)) {
		px_set_what(c, h->method, h->method_len, NULL, 0);
		if (!absolute_request(c, h, &t, &tl))
			return;
	} else if (tl >= 8 && !strncasecmp(t, "https://", 8)) {
		set_what_asked(c, h);
		px_refuse(c, "https:// requests need CONNECT");
		return;
	} else if (tl && t[0] == '/' && c->api_tunnel) {
		c->is_api = 1;
	} else {
		set_what_asked(c, h);
		px_refuse(c, tl && t[0] == '/' ? "not a proxy request" : "invalid request target");
		return;
	}

	if (c->is_api) {
		struct buf path = BUF_INIT;
		int r = px_api_request(c, h, t, tl, &path);

		if (r == 1) {
			px_start_forward(c, h, path.buf, path.len);
		} else if (r == 2) {
			/* The head stays, to be read again when the budget is looked at again. */
			c->in_off -= h->head_len;
			c->state = ST_WAIT;
			if (!c->wait_until)
				c->wait_until = px->now_ms + px->cfg->idle_timeout_ms;
			c->deadline_ms = c->wait_until;
		}
		if (r != 2) {
			c->wait_until = 0;
			c->wait_since = 0;
		}
		buf_release(&path);
		return;
	}
	px_set_what(c, h->method, h->method_len, NULL, 0);
	c->entry = allow_match(px->cfg->allow, c->host, c->port);
	if (!c->entry) {
		px_refuse(c, "not on the allow list");
		return;
	}
	/* A rule's methods and paths hold over plain http:// as inside an intercepted CONNECT. */
	if (!px_rules_check(c, h, t, tl) || px_plain_placeholder(c, h))
		return;
	px_start_forward(c, h, t, tl);
}

void px_read_head(struct conn *c)
{
	struct proxy *px = c->px;

	for (;;) {
		struct http_head h;
		struct buf why = BUF_INIT;
		int r;

		if (c->in_len > c->in_off) {
			r = http_parse_request(c->in + c->in_off, c->in_len - c->in_off, &h, &why);
			if (r > 0 && !px_form_wait(c, &h)) {
				handle_request(c, &h);
				if (c->dead || c->state != ST_HEAD)
					return;
				continue;
			}
			if (r < 0) {
				px_reset_request(c);
				set_what_asked(c, &h);
				px_refuse(c, why.buf);
				buf_release(&why);
				return;
			}
			if (c->in_len - c->in_off >= HTTP_MAX_HEAD) {
				px_reset_request(c);
				px_refuse(c, "request head too large");
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
			ssize_t n = px_cl_read(c, c->in + c->in_len, HTTP_MAX_HEAD - c->in_len);

			if (n == -EAGAIN)
				return;
			if (n <= 0) {
				if (c->in_len) {
					px_reset_request(c);
					px_log_line(c, "refused",
					            "connection closed inside a request head");
				}
				px_conn_kill(c);
				return;
			}
			c->in_len += n;
			if (was_empty) {
				c->start_ms = px->now_ms;
				c->deadline_ms = px->now_ms + px->cfg->header_timeout_ms;
			}
		}
	}
}
