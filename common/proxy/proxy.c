/*
 * The proxy's loop: one thread, one epoll set, the listener and the
 * connections' state machine (common/proxy/proxy_impl.h).  The other modules
 * are in the files named there and in docs/internals.md.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "proxy/proxy.h"
#include "proxy/proxy_impl.h"
#include "net/resolve.h"
#include "base/spawn.h"
#include "base/banned.h"

#define MAX_EVENTS 256

static void update_now(struct proxy *px)
{
	px->now_ms = clock_ms();
}

static void update_events(struct conn *c)
{
	uint32_t ce = 0, ue = 0;
	int to_c = px_spill_pending(&c->to_client) > 0;
	int to_u = px_spill_pending(&c->to_upstream) > 0;

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
		to_u = px_tunnel_pending(c, 1) > 0;
		to_c = px_tunnel_pending(c, 0) > 0;
		if (!to_u && !c->c_eof)
			ce |= EPOLLIN;
		if (!to_c && !c->u_eof)
			ue |= EPOLLIN;
		if (to_u)
			ue |= EPOLLOUT;
		/* An upgraded intercept: TLS on each side may wait the other way. */
		if (c->ssl_rw)
			ue |= EPOLLOUT;
		if (c->ssl_ww)
			ue |= EPOLLIN;
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
	case ST_WAIT:
	case ST_CWAIT:
		ce = EPOLLRDHUP; /* nothing is read while it waits, but its leaving is seen */
		break;
	case ST_CTLS:
		ce = to_c || c->cssl_rw ? EPOLLOUT : EPOLLIN;
		break;
	}
	if (c->cssl_rw)
		ce |= EPOLLOUT;
	if (c->cssl_ww)
		ce |= EPOLLIN;
	if (to_c)
		ce |= EPOLLOUT;
	px_set_events(c->px, c->cfd, &c->hc, &c->cev, ce);
	px_set_events(c->px, c->ufd, &c->hu, &c->uev, ue);
}

/* A tunnel: relay both ways, and end it when both are done or a side went away. */
static void tunnel_step(struct conn *c)
{
	if (px_relay(c, 1) < 0 || px_relay(c, 0) < 0) {
		if (!c->dead) {
			px_log_line(c, "allowed", "connection reset");
			px_conn_kill(c);
		}
		return;
	}
	if ((c->c_eof && c->u_eof && !px_tunnel_pending(c, 0) && !px_tunnel_pending(c, 1)) ||
	    (c->c_gone && !px_tunnel_pending(c, 1)) || (c->u_gone && !px_tunnel_pending(c, 0))) {
		px_log_line(c, "allowed", NULL);
		px_conn_kill(c);
	}
}

/* Our answer: flush it, then read and drop what the client still sends until it closes. */
static void closing_step(struct conn *c)
{
	struct proxy *px = c->px;
	int f = px_flush_spill(c, &c->to_client, 1);

	if (f < 0) {
		px_conn_kill(c);
		return;
	}
	if (!f)
		return;
	if (!c->c_shut) {
		if (c->cssl)
			SSL_shutdown(c->cssl);
		shutdown(c->cfd, SHUT_WR);
		c->c_shut = 1;
	}
	for (int i = 0; i < 4; i++) {
		ssize_t n = px_cl_read(c, px->scratch, sizeof(px->scratch));

		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			px_conn_kill(c);
			return;
		}
	}
}

void px_pump(struct conn *c)
{
	struct proxy *px = c->px;

	for (int rounds = 0; rounds < 8 && !c->dead; rounds++) {
		enum state before = c->state;

		switch (c->state) {
		case ST_HEAD:
			if (px_flush_spill(c, &c->to_client, 1) < 0)
				px_conn_kill(c);
			else
				px_read_head(c);
			break;
		case ST_RESOLVE:
		case ST_CONNECT:
			/* A 100 Continue the client is gone for: the request gets its line. */
			if (px_flush_spill(c, &c->to_client, 1) < 0) {
				px_log_line(c, "failed", "client went away");
				px_conn_kill(c);
			}
			break;
		case ST_TLS:
			px_tls_step(c);
			break;
		case ST_TUNNEL:
			tunnel_step(c);
			break;
		case ST_FWD:
			if (c->hit) {
				px_cache_step(c);
				break;
			}
			if (px_fwd_request(c) < 0)
				break;
			if (c->state == ST_FWD)
				px_fwd_response(c);
			break;
		case ST_CLOSING:
			closing_step(c);
			break;
		case ST_WAIT:
		case ST_CWAIT:
			break;
		case ST_CTLS:
			px_ctls_step(c);
			break;
		}
		if (c->dead || c->state == before)
			break;
	}
	if (c->dead)
		return;
	update_events(c);
	if (c->again)
		return;
	/*
	 * An intercepted host's TLS reads ahead: whole records may wait in it
	 * unseen by epoll until a read found it dry (then only part of one).
	 */
	if ((c->ssl && (c->uev & EPOLLIN) &&
	     (SSL_pending(c->ssl) > 0 || (SSL_has_pending(c->ssl) && !c->ssl_dry))) ||
	    /*
	     * A forward that spent its rounds with work left: bytes it read may
	     * wait in its buffer with nothing more to come on either socket (an
	     * answer's last chunk, its client gone or never there).
	     */
	    (c->more && c->state == ST_FWD) ||
	    (c->cssl && SSL_pending(c->cssl) > 0 && (c->cev & EPOLLIN))) {
		c->again = 1;
		c->anext = px->again_list;
		px->again_list = c;
	}
}

static void on_event(struct handle *h, uint32_t ev)
{
	struct conn *c = h->c;
	struct proxy *px = c->px;

	if (c->dead || (h->side == SIDE_CLIENT && c->draining))
		return;
	if (c->state == ST_CONNECT && h->side == SIDE_UPSTREAM) {
		px_connect_done(c);
		if (c->dead)
			return;
	}
	px_pump(c);
	if (c->dead || !(ev & (EPOLLERR | EPOLLHUP) ||
	                 (ev & EPOLLRDHUP && (c->state == ST_WAIT || c->state == ST_CWAIT))))
		return;
	/* A hangup stays reported whatever the mask: act on it, or the loop spins. */
	if (c->state == ST_TUNNEL) {
		int client = h->side == SIDE_CLIENT;

		if (client ? !c->c_eof : !c->u_eof)
			return; /* bytes still to read first */
		if (!px_tunnel_pending(c, client)) {
			px_log_line(c, "allowed", NULL);
			px_conn_kill(c);
			return;
		}
		epoll_ctl(px->epfd, EPOLL_CTL_DEL, client ? c->cfd : c->ufd, NULL);
		if (client)
			c->c_gone = 1;
		else
			c->u_gone = 1;
		return;
	}
	if (h->side == SIDE_CLIENT && c->state == ST_FWD) {
		/* Draining: the upstream's mask changes (it may have waited for the client). */
		if (px_client_gone(c, "client went away") == 0)
			px_pump(c);
	} else if (h->side == SIDE_CLIENT && c->state != ST_HEAD && c->state != ST_CLOSING) {
		px_log_line(c, "failed", "client went away");
		px_conn_kill(c);
	}
}

struct conn *px_conn_new(struct proxy *px, int fd)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->px = px;
	c->hc.c = c->hu.c = c;
	c->hc.side = SIDE_CLIENT;
	c->hu.side = SIDE_UPSTREAM;
	c->cfd = fd;
	c->ufd = -1;
	c->kfd = -1;
	c->pipe_r[0] = c->pipe_r[1] = c->pipe_w[0] = c->pipe_w[1] = -1;
	c->cev = fd >= 0 ? EPOLLIN : 0;
	if (fd >= 0 && px_add_fd(px, fd, &c->hc, EPOLLIN) < 0) {
		free(c);
		return NULL;
	}
	c->next = px->conns;
	if (px->conns)
		px->conns->prev = c;
	px->conns = c;
	px->nconns++;
	px_reset_request(c);
	px_enter_head(c);
	return c;
}

static void accept_all(struct proxy *px)
{
	for (int i = 0; i < 64 && px->nconns < px->cfg->max_conns; i++) {
		int fd = accept4(px->cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of fds: stop accepting for a moment rather than spin. */
				px_log_note(px, "accept", errno);
				px->accept_paused_until = px->now_ms + 100;
			}
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!px_conn_new(px, fd))
			close(fd);
	}
}

/*
 * The whole request went upstream and no answer's head came back within
 * --idle-timeout: an upstream that accepted and never answered.  The client
 * is told so with a 504 (in the API's error shape on the API port).
 */
static void upstream_silent(struct conn *c)
{
	struct buf why = BUF_INIT;
	int ms = c->px->cfg->idle_timeout_ms;

	if (ms % 1000)
		buf_addf(&why, "upstream sent no answer in %d ms", ms);
	else
		buf_addf(&why, "upstream sent no answer in %d s", ms / 1000);
	px_respond(c, 504, "failed", why.buf);
	buf_release(&why);
	px_pump(c);
}

static void sweep(struct proxy *px)
{
	for (struct conn *c = px->conns, *next; c; c = next) {
		next = c->next;
		px_tunnel_sweep(c);
		if (px_spend_client_late(c))
			continue;
		if (c->deadline_ms > px->now_ms)
			continue;
		switch (c->state) {
		case ST_HEAD:
			if (c->in_len > c->in_off) {
				px_reset_request(c);
				px_log_line(c, "refused", "request head timed out");
			}
			px_conn_kill(c);
			break;
		case ST_RESOLVE:
		case ST_CONNECT:
		case ST_TLS:
			px_respond(c, 504, "failed", "timed out connecting");
			px_pump(c);
			break;
		case ST_FWD:
			if (!c->draining && c->req_done && !c->resp_head_done) {
				upstream_silent(c);
				break;
			}
			/* fall through */
		case ST_TUNNEL:
			px_log_line(c, "allowed",
			            !c->draining ? "idle timeout"
			            : px->now_ms >= c->drain_until
			                ? "client went away: its answer "
			                  "passed the drain bound in time"
			                : "client went away: idle timeout");
			px_conn_kill(c);
			break;
		case ST_CLOSING:
			px_conn_kill(c);
			break;
		case ST_CTLS:
			px_log_line(c, "failed", "TLS with the client timed out");
			px_conn_kill(c);
			break;
		case ST_CWAIT:
			/* Look at the other filler's lock again: its head is read anew. */
			px_fetch_unwait(c);
			c->state = ST_HEAD;
			px_pump(c);
			break;
		case ST_WAIT:
			px_respond(c, 503, "refused",
			           "budget: timed out waiting for the API requests in flight");
			px_pump(c);
			break;
		}
	}
}

/* The sweep's period: a quarter of the shortest timeout, within 20 ms to 1 s. */
static int sweep_tick(const struct proxy_config *cfg)
{
	int tick = cfg->header_timeout_ms;

	if (cfg->idle_timeout_ms < tick)
		tick = cfg->idle_timeout_ms;
	if (cfg->connect_timeout_ms < tick)
		tick = cfg->connect_timeout_ms;
	tick /= 4;
	/* The API's pool, and the own fetches' (only with interception). */
	if ((cfg->api_pool > 0 || cfg->itls) && cfg->api_pool_idle_ms / 2 < tick)
		tick = cfg->api_pool_idle_ms / 2;
	if (tick < 20)
		tick = 20;
	if (tick > 1000)
		tick = 1000;
	return tick;
}

/* Told to stop: end every connection (logged and counted) and the pool. */
static void stop_all(struct proxy *px)
{
	for (struct conn *c = px->conns, *next; c; c = next) {
		next = c->next;
		if (c->host[0] && c->state != ST_CLOSING)
			px_log_line(c, "allowed", "proxy stopped");
		px_conn_kill(c);
	}
	px_free_graveyard(px);
	if (px->cfg->prices)
		px_spend_round(px, 0); /* the reservations are gone from the ledger too */
	px_pool_close_all(px);
	px_log_left_out(px);
}

/* One epoll event.  1 when the proxy was told to stop. */
static int dispatch(struct proxy *px, struct handle *h, uint32_t events)
{
	switch (h->side) {
	case SIDE_LISTEN:
		accept_all(px);
		break;
	case SIDE_SIGNAL:
		stop_all(px);
		return 1;
	case SIDE_RESOLVER:
		resolver_collect(px->cfg->resolver, px_resolver_done);
		break;
	case SIDE_POOL:
		/* The upstream closed an idle connection, or spoke out of turn. */
		px_pool_event((struct pooled *)h);
		break;
	default:
		on_event(h, events);
		break;
	}
	return 0;
}

/* Pump once more the connections holding bytes no event will report (px_pump()). */
static void pump_again(struct proxy *px)
{
	struct conn *list = px->again_list;

	px->again_list = NULL;
	while (list) {
		struct conn *c = list;

		list = c->anext;
		c->again = 0;
		if (!c->dead)
			px_pump(c);
	}
}

/* Listen while there is room for connections and accept is not paused. */
static void listen_or_not(struct proxy *px)
{
	const struct proxy_config *cfg = px->cfg;

	if (px->nconns < cfg->max_conns && !px->listening &&
	    px->now_ms >= px->accept_paused_until) {
		px_set_events(px, cfg->listen_fd, &px->h_listen, &(uint32_t){0}, EPOLLIN);
		px->listening = 1;
	} else if ((px->nconns >= cfg->max_conns || px->now_ms < px->accept_paused_until) &&
	           px->listening) {
		px_set_events(px, cfg->listen_fd, &px->h_listen, &(uint32_t){EPOLLIN}, 0);
		px->listening = 0;
	}
}

/* Put the listener, the signal fd and the resolver in a new epoll set. */
static int loop_setup(struct proxy *px)
{
	const struct proxy_config *cfg = px->cfg;

	px->h_listen.side = SIDE_LISTEN;
	px->h_signal.side = SIDE_SIGNAL;
	px->h_resolver.side = SIDE_RESOLVER;
	px_pool_init(px);
	px_sess_setup(px);
	px->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (px->epfd < 0)
		return -errno;
	if (fd_set_nonblock(cfg->listen_fd, 1) < 0 ||
	    px_add_fd(px, cfg->listen_fd, &px->h_listen, EPOLLIN) < 0)
		return -errno;
	px->listening = 1;
	if (cfg->signal_fd >= 0 && px_add_fd(px, cfg->signal_fd, &px->h_signal, EPOLLIN) < 0)
		return -errno;
	if (px_add_fd(px, resolver_fd(cfg->resolver), &px->h_resolver, EPOLLIN) < 0)
		return -errno;
	return 0;
}

static int loop(struct proxy *px)
{
	struct epoll_event evs[MAX_EVENTS];
	int tick = sweep_tick(px->cfg);
	int64_t next_sweep;
	int tick_now;

	update_now(px);
	next_sweep = px->now_ms + tick;
	for (;;) {
		int wait = px->listening || px->nconns >= px->cfg->max_conns ? tick : 100;
		int n = epoll_wait(px->epfd, evs, MAX_EVENTS,
		                   px->again_list || px->fetch_wake ? 0 : wait);

		if (n < 0 && errno != EINTR)
			return -errno;
		update_now(px);
		for (int i = 0; i < n; i++)
			if (dispatch(px, evs[i].data.ptr, evs[i].events))
				return 0;
		pump_again(px);
		if (px->fetch_wake)
			px_fetch_wake(px);
		px_free_graveyard(px);
		tick_now = px->now_ms >= next_sweep;
		if (tick_now) {
			sweep(px);
			px_pool_sweep(px);
			next_sweep = px->now_ms + tick;
		}
		px_free_graveyard(px);
		if (px->cfg->prices)
			px_spend_round(px, tick_now);
		px_free_graveyard(px);
		listen_or_not(px);
	}
}

int proxy_run(const struct proxy_config *cfg)
{
	struct proxy *px;
	int ret;

	if (cfg->prices && !cfg->report)
		return -EINVAL;
	px = xcalloc(1, sizeof(*px));
	px->cfg = cfg;
	px->epfd = -1;
	px->echo_out = (struct buf)BUF_INIT;
	ret = loop_setup(px);
	if (ret == 0)
		ret = loop(px);
	if (px->epfd >= 0)
		close(px->epfd);
	for (int i = 0; i < PX_LEAVES; i++)
		if (px->leaves[i].cert)
			X509_free(px->leaves[i].cert);
	px_sess_free(px);
	dep_digests_clear(&px->digests);
	px_fetch_free(px);
	buf_release(&px->echo_out);
	free(px);
	return ret;
}
