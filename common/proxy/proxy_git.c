/*
 * The proxy's side of the hand-off to aibox-broker (docs/internals.md,
 * "Broker hand-off"): requests for PROXY_GIT_HOST go, with the client's
 * socket, to the broker (common/net/handoff.h); the proxy forgets them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "net/broker_req.h"
#include "base/err.h"
#include "net/handoff.h"
#include "proxy/proxy_impl.h"
#include "base/banned.h"

int px_is_git_host(const char *host)
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
 * Give the connection to aibox-broker (common/net/handoff.h; docs/internals.md,
 * "Broker hand-off"): one message holding the bytes of this request read so
 * far, with the client socket as SCM_RIGHTS.  Then the proxy forgets the connection.  When the
 * broker cannot take it, the client gets a 502 (503 when it is only busy).
 */
static void hand_to_broker(struct conn *c, const struct http_head *h, int remote)
{
	struct proxy *px = c->px;
	size_t start = c->in_off - h->head_len;
	size_t len = c->in_len - start;
	int r;

	if (px_spill_pending(&c->to_client)) {
		/* An answer to an earlier request is still on its way: keep the order. */
		px_refuse(c, "a git request pipelined behind another request");
		return;
	}
	r = handoff_send(px->cfg->broker_fd, c->cfd, remote, c->in + start, len);
	if (r < 0) {
		struct buf why = BUF_INIT;

		if (r == -EAGAIN || r == -EWOULDBLOCK) {
			px_respond(c, 503, "failed", "aibox-broker is busy");
			return;
		}
		if (r == -EPIPE || r == -ECONNREFUSED || r == -ECONNRESET || r == -ENOTCONN)
			buf_addstr(&why, "aibox-broker is not running");
		else
			buf_addf(&why, "cannot hand the request to aibox-broker: %s", strerror(-r));
		px_respond(c, 502, "failed", why.buf);
		buf_release(&why);
		return;
	}
	/*
	 * The broker's copy keeps the socket open, and epoll forgets a socket
	 * only when its last copy closes: take it out before closing ours.
	 */
	if (!c->c_gone)
		epoll_ctl(px->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
	c->c_gone = 1;
	c->sent = len;
	px_log_line(c, "allowed", "handed to aibox-broker");
	px_conn_kill(c);
}

void px_git_request(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	struct proxy *px = c->px;
	int remote = git_remote_number(t, tl);
	size_t n;

	px_set_what(c, h->method, h->method_len, NULL, 0);
	if (remote < 0) {
		px_refuse(c, "no remote number in the path (/<n>/...)");
		return;
	}
	n = strlen(c->what);
	snprintf(c->what + n, sizeof(c->what) - n, " remote=%d", remote);
	if (c->port != 80) {
		px_refuse(c, PROXY_GIT_HOST " answers on port 80 only");
		return;
	}
	if (px->cfg->broker_fd < 0) {
		px_refuse(c, "no git remotes: the config has no git: entries");
		return;
	}
	hand_to_broker(c, h, remote);
}
