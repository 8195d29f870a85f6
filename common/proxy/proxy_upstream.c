/*
 * Finding the upstream of a request or tunnel: a pooled connection
 * (common/proxy/proxy_pool.c) or the one kept for the client connection, or
 * the resolver (only the addresses its allow entry permits), a
 * non-blocking connect to each address in turn, and TLS for the API.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/allow.h"
#include "base/err.h"
#include "net/http.h"
#include "proxy/proxy_impl.h"
#include "net/resolve.h"
#include "net/tls.h"
#include "base/banned.h"

static void connected(struct conn *c)
{
	struct proxy *px = c->px;

	if (c->is_connect) {
		c->state = ST_TUNNEL;
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
		px_spill_add(&c->to_client, HTTP_TUNNEL_HEAD, sizeof(HTTP_TUNNEL_HEAD) - 1);
		/* Bytes the client sent after the head (a TLS hello) go first. */
		if (c->in_len > c->in_off) {
			px_spill_add(&c->to_upstream, c->in + c->in_off, c->in_len - c->in_off);
			c->sent += c->in_len - c->in_off;
		}
		free(c->in);
		c->in = NULL;
		c->in_off = c->in_len = 0;
		return;
	}
	if (c->is_api || c->intercept) {
		c->ssl = c->intercept ? tls_client_new(px->cfg->itls, c->ufd, c->host)
		                      : tls_client_new(px->cfg->tls, c->ufd, px->cfg->api_host);
		if (!c->ssl) {
			px_respond(c, 502, "failed", "cannot start TLS");
			return;
		}
		if (c->intercept) {
			/* A download comes in several records a read, not two reads a record. */
			SSL_set_read_ahead(c->ssl, 1);
			SSL_set_default_read_buffer_len(c->ssl, PX_READ_AHEAD);
			px_sess_offer(c);
		}
		c->state = ST_TLS;
		return;
	}
	c->state = ST_FWD;
	c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
}

static void try_connect(struct conn *c)
{
	struct proxy *px = c->px;

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
		if (px_add_fd(px, fd, &c->hu, EPOLLOUT) < 0) {
			c->connect_err = errno;
			close(fd);
			c->ufd = -1;
			continue;
		}
		c->state = ST_CONNECT;
		c->deadline_ms = px->now_ms + px->cfg->connect_timeout_ms;
		return;
	}
	{
		struct buf why = BUF_INIT;

		buf_addf(&why, "cannot connect: %s",
		         strerror(c->connect_err ? c->connect_err : ECONNREFUSED));
		px_respond(c, 502, "failed", why.buf);
		buf_release(&why);
	}
}

void px_connect_done(struct conn *c)
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

static void resolved(struct conn *c, struct resolve_result *res)
{
	int n = 0, own = 0;

	if (res->err) {
		px_respond(c, 502, "failed",
		           res->err == -ENOENT ? "cannot resolve the host name"
		                               : "name resolution failed");
		return;
	}
	/* Keep only the addresses the entry allows. */
	for (int i = 0; i < res->n; i++) {
		int ok = c->is_api ? 1
		                   : allow_addr_check(c->entry, (struct sockaddr *)&res->addr[i],
		                                      res->len[i]);

		if (ok == ALLOW_ADDR_OWN)
			own = 1;
		else if (ok < 0)
			c->connect_err = -ok; /* no route: as the connect would have found */
		if (ok != 1)
			continue;
		c->addrs.addr[n] = res->addr[i];
		c->addrs.len[n] = res->len[i];
		n++;
	}
	c->addrs.n = n;
	c->addrs.err = 0;
	if (!n && own) {
		px_refuse(c, "the host resolves to an address of this machine");
		return;
	}
	if (!n && !c->connect_err) {
		px_refuse(c, "the host resolves to a non-public address");
		return;
	}
	c->ai = 0;
	try_connect(c);
}

void px_resolver_done(void *cookie, struct resolve_result *res)
{
	struct conn *c = cookie;

	c->job = NULL;
	if (c->dead || c->state != ST_RESOLVE)
		return;
	resolved(c, res);
	px_pump(c);
}

void px_start_resolve(struct conn *c)
{
	struct proxy *px = c->px;
	struct resolve_result res;
	const char *name = c->is_api ? px->cfg->api_host : c->host;
	int port = c->is_api ? px->cfg->api_port : c->port;

	if (px_pool_take(c) || (c->intercept && px_take_kept(c))) {
		c->reused = 1;
		c->state = ST_FWD;
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
		return;
	}
	c->state = ST_RESOLVE;
	c->deadline_ms = px->now_ms + px->cfg->connect_timeout_ms;
	if (resolver_lookup(px->cfg->resolver, name, port, &res)) {
		resolved(c, &res);
		return;
	}
	c->job = resolver_submit(px->cfg->resolver, name, port, c);
	if (!c->job)
		px_respond(c, 503, "failed", "too many name lookups at once");
}

void px_tls_step(struct conn *c)
{
	struct proxy *px = c->px;
	int r;

	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	c->ssl_rw = c->ssl_ww = c->ssl_dry = 0;
	if (r == 1 && c->intercept) {
		struct buf why = BUF_INIT;

		if (px_sess_check(c, &why) < 0) {
			px_respond(c, 502, "failed", why.buf);
			buf_release(&why);
			return;
		}
	}
	if (r == 1) {
		c->state = ST_FWD;
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
		return;
	}
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		c->ssl_ww = 1;  /* the handshake waits to read */
		c->ssl_dry = 1; /* what it read ahead is part of a record at most */
		return;
	case SSL_ERROR_WANT_WRITE:
		c->ssl_rw = 1;
		return;
	default: {
		struct buf why = BUF_INIT;
		long v = SSL_get_verify_result(c->ssl);

		buf_addstr(&why, c->intercept ? "TLS with the host failed: "
		                              : "TLS with the API upstream failed: ");
		if (v != X509_V_OK)
			buf_addstr(&why, X509_verify_cert_error_string(v));
		else
			tls_error(&why);
		ERR_clear_error();
		px_respond(c, 502, "failed", why.buf);
		buf_release(&why);
	}
	}
}
