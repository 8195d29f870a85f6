/*
 * The tunnel relay (CONNECT): bytes both ways through the proxy's scratch
 * buffer, a spill only when the receiving side is slow, and splice(2)
 * through a pipe once a direction has moved BULK_BYTES.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>

#include "proxy/proxy_impl.h"
#include "proxy/ws_scrub.h"
#include "base/banned.h"

/* A tunnel direction that moved this much goes over a pipe with splice(2). */
#define BULK_BYTES (1024 * 1024)
#define PIPE_BYTES (1024 * 1024)
/* A pipe that small is no better than the scratch buffer: stay with read and write. */
#define PIPE_MIN_BYTES SCRATCH_SIZE
/* A bulk direction with an empty pipe gives it back after this long without bytes. */
#define PIPE_IDLE_MS 2000
/* After a pipe could not be had at full size, try again after this long. */
#define PIPE_RETRY_MS 1000

void px_drop_pipe(struct conn *c, int d)
{
	if (c->pipe_r[d] >= 0) {
		close(c->pipe_r[d]);
		close(c->pipe_w[d]);
	}
	c->pipe_r[d] = c->pipe_w[d] = -1;
	c->pipe_len[d] = 0;
}

size_t px_tunnel_pending(const struct conn *c, int from_client)
{
	int d = from_client ? 0 : 1;

	return px_spill_pending(from_client ? &c->to_upstream : &c->to_client) + c->pipe_len[d];
}

/* Switch a busy direction to splice(2): no copies through user space. */
static void go_bulk(struct conn *c, int d)
{
	struct proxy *px = c->px;
	int p[2];
	int sz;

	if (px->now_ms < c->bulk_after_ms[d])
		return;
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) {
		c->bulk_after_ms[d] = px->now_ms + PIPE_RETRY_MS;
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
		c->bulk_after_ms[d] = px->now_ms + PIPE_RETRY_MS;
		return;
	}
	c->pipe_r[d] = p[0];
	c->pipe_w[d] = p[1];
	c->pipe_cap[d] = (size_t)sz;
	c->pipe_len[d] = 0;
}

static int relay_splice(struct conn *c, int from_client)
{
	struct proxy *px = c->px;
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
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
	}
	return 0;
}

void px_ws_failed(struct conn *c, int from_vm, const char *why)
{
	struct buf b = BUF_INIT;

	/* What came before the frame goes as far as each side takes it now. */
	px_flush_spill(c, &c->to_client, 1);
	px_flush_spill(c, &c->to_upstream, 0);
	buf_addf(&b, "a WebSocket frame from the %s: %s", from_vm ? "VM" : "host", why);
	px_log_line(c, "failed", b.buf);
	buf_release(&b);
	px_conn_kill(c);
}

/*
 * n bytes of an upgraded intercept's VM (from_client) or host in the scratch
 * buffer: the VM's frames as they came to the host's spill, the host's
 * masked to the client's.  -1 when a frame was refused (c is gone).
 */
static int ws_bytes(struct conn *c, int from_client, size_t n)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;

	int r;

	buf_reset(&px->echo_out);
	if (from_client)
		r = ws_vm_feed(c->ws_vm, px->scratch, n, &px->echo_out, &why);
	else
		r = ws_scrub_feed(c->ws, px->scratch, n, &px->echo_out, &why);
	px_spill_add(from_client ? &c->to_upstream : &c->to_client, px->echo_out.buf,
	             px->echo_out.len);
	if (r < 0) {
		px_ws_failed(c, from_client, why.buf);
		buf_release(&why);
		return -1;
	}
	return 0;
}

int px_relay(struct conn *c, int from_client)
{
	struct proxy *px = c->px;
	struct spill *out = from_client ? &c->to_upstream : &c->to_client;
	int *src_eof = from_client ? &c->c_eof : &c->u_eof;
	int *dst_shut = from_client ? &c->u_shut : &c->c_shut;
	uint64_t *count = from_client ? &c->sent : &c->received;
	int d = from_client ? 0 : 1;

	if (c->pipe_r[d] >= 0)
		return relay_splice(c, from_client);
	for (int rounds = 0; rounds < 16; rounds++) {
		int f = px_flush_spill(c, out, !from_client);
		ssize_t n, w;

		if (f < 0)
			return -1;
		if (!f)
			return 0;
		/* splice(2) moves bytes, not TLS records: an upgraded intercept stays here. */
		if (*count >= BULK_BYTES && !*src_eof && !c->ssl && !c->cssl) {
			go_bulk(c, d);
			if (c->pipe_r[d] >= 0)
				return relay_splice(c, from_client);
		}
		if (*src_eof) {
			if (!*dst_shut) {
				SSL *tls = from_client ? c->ssl : c->cssl;

				if (tls)
					SSL_shutdown(tls);
				shutdown(from_client ? c->ufd : c->cfd, SHUT_WR);
				*dst_shut = 1;
			}
			return 0;
		}
		n = from_client ? px_cl_read(c, px->scratch, sizeof(px->scratch))
		                : px_up_read(c, px->scratch, sizeof(px->scratch));
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return -1;
		if (n == 0) {
			*src_eof = 1;
			continue;
		}
		*count += n;
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
		if (c->ws) {
			if (ws_bytes(c, from_client, (size_t)n) < 0)
				return -1;
			continue;
		}
		w = from_client ? px_up_write(c, px->scratch, n) : px_cl_write(c, px->scratch, n);
		if (w == -EAGAIN)
			w = 0;
		if (w < 0)
			return -1;
		if (w < n) {
			px_spill_add(out, px->scratch + w, n - w);
			return 0;
		}
	}
	return 0;
}

void px_tunnel_sweep(struct conn *c)
{
	struct proxy *px = c->px;

	/*
	 * A tunnel quiet for a while gives its empty pipes back (their pages
	 * count against the user's pipe quota); the next burst takes new ones.
	 */
	if (c->state == ST_TUNNEL &&
	    c->deadline_ms - px->cfg->idle_timeout_ms + PIPE_IDLE_MS <= px->now_ms)
		for (int d = 0; d < 2; d++)
			if (c->pipe_r[d] >= 0 && !c->pipe_len[d])
				px_drop_pipe(c, d);
}
