/*
 * WebSocket frames from an intercepted host, their payloads masked where a
 * value comes back (common/proxy/ws_scrub.h; docs/proxy.md, "WebSocket").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "proxy/secret_swap.h"
#include "proxy/ws_scrub.h"
#include "base/banned.h"

enum { WS_CONT = 0, WS_TEXT = 1, WS_BINARY = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

void ws_scrub_init(struct ws_scrub *w, const struct swap_secret *secrets, size_t n)
{
	memset(w, 0, sizeof(*w));
	swap_echo_init(&w->echo, secrets, n);
	w->ctl = (struct buf)BUF_INIT;
	w->pend = (struct buf)BUF_INIT;
	w->kind = (struct buf)BUF_INIT;
	w->held = (struct buf)BUF_INIT;
}

void ws_scrub_release(struct ws_scrub *w)
{
	swap_echo_release(&w->echo);
	buf_wipe_release(&w->ctl);
	buf_wipe_release(&w->pend);
	buf_release(&w->kind);
	buf_wipe_release(&w->held);
}

/* Bytes for the VM behind what waits: k 1 for a data payload's. */
static void pend_add(struct ws_scrub *w, const void *p, size_t n, int k)
{
	buf_add(&w->pend, p, n);
	buf_grow(&w->kind, n);
	memset(w->kind.buf + w->kind.len, k, n);
	buf_setlen(&w->kind, w->kind.len + n);
	if (k)
		buf_add(&w->held, p, n);
}

/*
 * Mask what waits and pass on to out all of it but, with more (the message
 * goes on), the tail of its data payload that may begin a value, and what
 * came after that.
 */
static void release(struct ws_scrub *w, int more, struct buf *out)
{
	struct buf masked = BUF_INIT;
	size_t keep, n = 0, upto;

	/* The data payload bytes as masked so far, in order. */
	for (size_t i = 0; i < w->pend.len; i++)
		if (w->kind.buf[i])
			buf_addch(&masked, w->pend.buf[i]);
	keep = swap_echo_mask(&w->echo, w->held.buf, masked.buf, masked.len, more);
	for (size_t i = 0; i < w->pend.len; i++)
		if (w->kind.buf[i])
			w->pend.buf[i] = masked.buf[n++];
	/* Up to the first data byte kept, or all. */
	upto = w->pend.len;
	for (size_t i = 0, d = 0; i < w->pend.len; i++)
		if (w->kind.buf[i] && d++ == keep) {
			upto = i;
			break;
		}
	buf_add(out, w->pend.buf, upto);
	memmove(w->pend.buf, w->pend.buf + upto, w->pend.len - upto);
	buf_wipe_setlen(&w->pend, w->pend.len - upto);
	memmove(w->kind.buf, w->kind.buf + upto, w->kind.len - upto);
	buf_setlen(&w->kind, w->kind.len - upto);
	memmove(w->held.buf, w->held.buf + keep, w->held.len - keep);
	buf_wipe_setlen(&w->held, w->held.len - keep);
	buf_wipe_release(&masked);
}

/* The head in w->hdr is whole (hl bytes): check it.  0 or -EPROTO. */
static int frame_head(struct ws_scrub *w, size_t hl, struct buf *err)
{
	const unsigned char *h = w->hdr;
	uint64_t len = h[1] & 0x7f;
	int control;

	if (w->closed)
		return buf_refuse(err, -EPROTO, "bytes after its Close frame");
	if (h[1] & 0x80)
		return buf_refuse(err, -EPROTO, "a masked frame");
	if (h[0] & 0x70)
		return buf_refuse(err, -EPROTO, "a reserved bit set");
	w->op = h[0] & 0x0f;
	w->fin = h[0] >> 7;
	control = w->op & 8;
	if (w->op != WS_CONT && w->op != WS_TEXT && w->op != WS_BINARY && w->op != WS_CLOSE &&
	    w->op != WS_PING && w->op != WS_PONG)
		return buf_refuse(err, -EPROTO, "an opcode RFC 6455 does not define");
	if (hl == 4)
		len = (uint64_t)h[2] << 8 | h[3];
	else if (hl == 10)
		for (size_t i = 2; i < 10; i++)
			len = (i == 2 ? 0 : len << 8) | h[i];
	if (len > WS_FRAME_MAX)
		return buf_refuse(err, -EPROTO, "a frame over 1 GiB");
	if (control && (!w->fin || len > 125))
		return buf_refuse(err, -EPROTO, "a control frame fragmented or over 125 bytes");
	if (w->op == WS_CLOSE && len == 1)
		return buf_refuse(err, -EPROTO, "a Close frame of one byte");
	if (w->op == WS_CONT && !w->msg)
		return buf_refuse(err, -EPROTO, "a continuation outside a message");
	if ((w->op == WS_TEXT || w->op == WS_BINARY) && w->msg)
		return buf_refuse(err, -EPROTO, "a new message inside a fragmented one");
	if (!control)
		w->msg = !w->fin;
	w->left = len;
	w->in_frame = 1;
	buf_wipe_setlen(&w->ctl, 0);
	pend_add(w, h, hl, 0);
	return 0;
}

/* The frame's payload has all come. */
static void frame_end(struct ws_scrub *w, struct buf *out)
{
	w->in_frame = 0;
	w->hdr_len = 0;
	if (w->op & 8) {
		/* A control frame's payload, masked whole (any value in it ends there). */
		char *m = xmalloc(w->ctl.len + 1);

		memcpy(m, w->ctl.buf, w->ctl.len);
		swap_echo_mask(&w->echo, w->ctl.buf, m, w->ctl.len, 0);
		pend_add(w, m, w->ctl.len, 0);
		free(m);
		buf_wipe_setlen(&w->ctl, 0);
		if (w->op == WS_CLOSE)
			w->closed = 1;
	}
	/* A message that ended, or a Close, passes whole. */
	if ((!(w->op & 8) && w->fin) || w->closed)
		release(w, 0, out);
}

int ws_scrub_feed(struct ws_scrub *w, const char *in, size_t len, struct buf *out, struct buf *err)
{
	size_t at = 0;
	int r;

	while (at < len) {
		if (!w->in_frame) {
			size_t need = 2;

			w->hdr[w->hdr_len++] = (unsigned char)in[at++];
			if (w->hdr_len >= 2)
				need = (w->hdr[1] & 0x7f) == 126   ? 4
				       : (w->hdr[1] & 0x7f) == 127 ? 10
				                                   : 2;
			/* Refused before more of its head: a masked frame's is longer. */
			if (w->hdr_len == 2 && (w->hdr[1] & 0x80))
				need = 2;
			if (w->hdr_len < need)
				continue;
			if ((r = frame_head(w, w->hdr_len, err)) < 0)
				return r;
			if (!w->left)
				frame_end(w, out);
			continue;
		}
		{
			size_t k = len - at < w->left ? len - at : (size_t)w->left;

			if (w->op & 8)
				buf_add(&w->ctl, in + at, k);
			else
				pend_add(w, in + at, k, 1);
			at += k;
			w->left -= k;
			if (!w->left)
				frame_end(w, out);
		}
	}
	release(w, 1, out);
	if (w->pend.len > WS_PEND_MAX)
		return buf_refuse(err, -EPROTO, "over 64 KiB of frames behind a possible value");
	return 0;
}
