/*
 * The idle upstream connections kept for a later request, each in epoll
 * so that a close or a byte out of turn from the upstream ends it at once:
 * the API's (cfg->api_pool of them, one upstream), and those of the
 * proxy's own metadata fetches (PX_OWN_POOL of them, each for the exact
 * host:port it was verified for and the secrets swapped into the request
 * it carried: docs/cache.md, "Installs from a lock file").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/proxy_impl.h"
#include "base/banned.h"

int px_upstream_reusable(const struct conn *c)
{
	return c->ssl && c->ufd >= 0 && !c->up_close && c->req_done && c->respb.done &&
	       c->respb.kind != BODY_CLOSE && c->rb_len <= c->rb_off &&
	       !px_spill_pending(&c->to_upstream) && !SSL_has_pending(c->ssl) && !c->ssl_rw &&
	       !c->ssl_ww;
}

int px_upstream_quiet(int fd, const SSL *ssl)
{
	char b;
	ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !SSL_has_pending(ssl);
}

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

/*
 * The slots c's upstream connection goes to and comes from, and its key
 * there (key holds PX_POOL_KEY bytes): how many slots, 0 for a connection
 * that is not pooled.  An own fetch's key is its host:port and the
 * secrets swapped into its request ("" for none), so a connection that
 * carried one secret never carries a request that holds none or another:
 * an upstream may tie what a request proved to its connection.
 */
static int slots_of(const struct conn *c, struct pooled **slots, char *key)
{
	struct proxy *px = c->px;

	if (c->is_api) {
		*slots = px->pool;
		key[0] = '\0';
		return px->cfg->api_pool;
	}
	if (c->own && c->intercept) {
		*slots = px->opool;
		snprintf(key, PX_POOL_KEY, "%s:%d %s", c->host, c->port, c->used);
		return PX_OWN_POOL;
	}
	return 0;
}

static void init_slots(struct pooled *p, int n)
{
	for (int i = 0; i < n; i++) {
		p[i].h.c = NULL;
		p[i].h.side = SIDE_POOL;
		p[i].fd = -1;
		p[i].ssl = NULL;
	}
}

void px_pool_init(struct proxy *px)
{
	init_slots(px->pool, PROXY_API_POOL_MAX);
	init_slots(px->opool, PX_OWN_POOL);
}

void px_pool_close_all(struct proxy *px)
{
	for (int i = 0; i < PROXY_API_POOL_MAX; i++)
		pool_close(&px->pool[i]);
	for (int i = 0; i < PX_OWN_POOL; i++)
		pool_close(&px->opool[i]);
}

static void sweep_slots(struct proxy *px, struct pooled *p, int n)
{
	for (int i = 0; i < n; i++)
		if (p[i].fd >= 0 && px->now_ms - p[i].since_ms >= px->cfg->api_pool_idle_ms)
			pool_close(&p[i]);
}

void px_pool_sweep(struct proxy *px)
{
	sweep_slots(px, px->pool, px->cfg->api_pool);
	sweep_slots(px, px->opool, PX_OWN_POOL);
}

void px_pool_put(struct conn *c)
{
	struct proxy *px = c->px;
	struct pooled *slots, *p = NULL;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	char key[PX_POOL_KEY];
	int n = slots_of(c, &slots, key);

	if (!n || c->status == 101 || !px_upstream_reusable(c))
		return;
	for (int i = 0; i < n; i++) {
		if (slots[i].fd < 0) {
			p = &slots[i];
			break;
		}
		if (!p || slots[i].since_ms < p->since_ms)
			p = &slots[i]; /* full: the oldest makes room */
	}
	pool_close(p);
	ev.data.ptr = &p->h;
	if (epoll_ctl(px->epfd, EPOLL_CTL_MOD, c->ufd, &ev) < 0)
		return;
	/* Nothing of c's may be reached from its TLS while it waits (px_sess_offer()'s data). */
	SSL_set_app_data(c->ssl, NULL);
	p->fd = c->ufd;
	p->ssl = c->ssl;
	p->since_ms = px->now_ms;
	memcpy(p->key, key, sizeof(key));
	c->ufd = -1;
	c->ssl = NULL;
	c->uev = 0;
}

int px_pool_take(struct conn *c)
{
	struct proxy *px = c->px;
	struct pooled *slots;
	char key[PX_POOL_KEY];
	int n = slots_of(c, &slots, key);

	for (;;) {
		struct pooled *p = NULL;
		struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &c->hu};

		for (int i = 0; i < n; i++)
			if (slots[i].fd >= 0 && !strcmp(slots[i].key, key) &&
			    (!p || slots[i].since_ms >= p->since_ms))
				p = &slots[i];
		if (!p)
			return 0;
		if (!px_upstream_quiet(p->fd, p->ssl) ||
		    epoll_ctl(px->epfd, EPOLL_CTL_MOD, p->fd, &ev) < 0) {
			pool_close(p);
			continue;
		}
		c->ufd = p->fd;
		c->ssl = p->ssl;
		c->uev = EPOLLOUT;
		if (c->intercept)
			SSL_set_app_data(c->ssl, c); /* a session ticket read later is c's host's */
		p->fd = -1;
		p->ssl = NULL;
		return 1;
	}
}

void px_pool_event(struct pooled *p)
{
	if (p->fd >= 0 && !px_upstream_quiet(p->fd, p->ssl))
		pool_close(p);
}
