/*
 * An intercepted WebSocket connection's frames: the rules of their heads for
 * both directions, the VM's passed as they came, the host's payloads masked
 * where a value comes back (common/proxy/ws_scrub.h; docs/proxy.md,
 * "WebSocket on an intercepted host").
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

void ws_frames_init(struct ws_frames *f, int from_vm)
{
	memset(f, 0, sizeof(*f));
	f->from_vm = from_vm;
}

/* The head's first byte, as far as it decides. */
static int head_first(struct ws_frames *f, struct buf *err)
{
	unsigned char h = f->hdr[0];
	int op = h & 0x0f;

	if (f->closed)
		return buf_refuse(err, -EPROTO, "bytes after its Close frame");
	if (h & 0x70)
		return buf_refuse(err, -EPROTO, "a reserved bit set");
	if (op != WS_CONT && op != WS_TEXT && op != WS_BINARY && op != WS_CLOSE && op != WS_PING &&
	    op != WS_PONG)
		return buf_refuse(err, -EPROTO, "an opcode RFC 6455 does not define");
	if ((op & 8) && !(h & 0x80))
		return buf_refuse(err, -EPROTO, "a control frame fragmented or over 125 bytes");
	if (op == WS_CONT && !f->msg)
		return buf_refuse(err, -EPROTO, "a continuation outside a message");
	if ((op == WS_TEXT || op == WS_BINARY) && f->msg)
		return buf_refuse(err, -EPROTO, "a new message inside a fragmented one");
	f->op = op;
	f->fin = h >> 7;
	return 0;
}

/* The head's second byte: the mask bit and the 7-bit length. */
static int head_second(struct ws_frames *f, struct buf *err)
{
	unsigned char h = f->hdr[1];

	if (f->from_vm && !(h & 0x80))
		return buf_refuse(err, -EPROTO, "an unmasked frame");
	if (!f->from_vm && (h & 0x80))
		return buf_refuse(err, -EPROTO, "a masked frame");
	if ((f->op & 8) && (h & 0x7f) > 125)
		return buf_refuse(err, -EPROTO, "a control frame fragmented or over 125 bytes");
	if (f->op == WS_CLOSE && (h & 0x7f) == 1)
		return buf_refuse(err, -EPROTO, "a Close frame of one byte");
	return 0;
}

int ws_head_byte(struct ws_frames *f, unsigned char c, struct buf *err)
{
	size_t ext, need;
	int r;

	f->hdr[f->hdr_len++] = c;
	if (f->hdr_len == 1)
		return head_first(f, err) < 0 ? -EPROTO : 0;
	if (f->hdr_len == 2 && (r = head_second(f, err)) < 0)
		return r;
	ext = (f->hdr[1] & 0x7f) == 126 ? 2 : (f->hdr[1] & 0x7f) == 127 ? 8 : 0;
	if (f->hdr_len == 2 + ext) {
		uint64_t len = f->hdr[1] & 0x7f;

		if (ext)
			for (size_t i = 0; i < ext; i++)
				len = (i ? len << 8 : 0) | f->hdr[2 + i];
		if (len > WS_FRAME_MAX)
			return buf_refuse(err, -EPROTO, "a frame over 1 GiB");
		f->left = len;
	}
	need = 2 + ext + (f->from_vm ? 4 : 0);
	if (f->hdr_len < need)
		return 0;
	if (!(f->op & 8))
		f->msg = !f->fin;
	f->in_frame = 1;
	return 1;
}

void ws_frame_end(struct ws_frames *f)
{
	f->in_frame = 0;
	f->hdr_len = 0;
	if (f->op == WS_CLOSE)
		f->closed = 1;
}

int ws_vm_feed(struct ws_frames *f, const char *in, size_t len, struct buf *out, struct buf *err)
{
	size_t at = 0;

	while (at < len) {
		size_t k;
		int r;

		if (!f->in_frame) {
			if ((r = ws_head_byte(f, (unsigned char)in[at++], err)) < 0)
				return r;
			if (r)
				buf_add(out, f->hdr, f->hdr_len);
			if (r && !f->left)
				ws_frame_end(f);
			continue;
		}
		k = len - at < f->left ? len - at : (size_t)f->left;
		buf_add(out, in + at, k);
		at += k;
		f->left -= k;
		if (!f->left)
			ws_frame_end(f);
	}
	return 0;
}

void ws_scrub_init(struct ws_scrub *w, const struct swap_secret *secrets, size_t n)
{
	memset(w, 0, sizeof(*w));
	swap_echo_init(&w->echo, secrets, n);
	ws_frames_init(&w->f, 0);
	w->ctl = (struct buf)BUF_INIT;
	w->pend = (struct buf)BUF_INIT;
	w->kind = (struct buf)BUF_INIT;
	w->held = (struct buf)BUF_INIT;
	w->m = (struct scrub_match)SCRUB_MATCH_INIT;
	w->runs = (struct scrub_runs)SCRUB_RUNS_INIT;
}

void ws_scrub_release(struct ws_scrub *w)
{
	swap_echo_release(&w->echo);
	buf_wipe_release(&w->ctl);
	buf_wipe_release(&w->pend);
	buf_release(&w->kind);
	buf_wipe_release(&w->held);
	free(w->at);
	w->at = NULL;
	scrub_match_release(&w->m);
	scrub_runs_release(&w->runs);
}

/* Bytes for the VM behind what waits: k 1 for a data payload's. */
static void pend_add(struct ws_scrub *w, const void *p, size_t n, int k)
{
	size_t from = w->pend.len;

	buf_add(&w->pend, p, n);
	buf_grow(&w->kind, n);
	memset(w->kind.buf + w->kind.len, k, n);
	buf_setlen(&w->kind, w->kind.len + n);
	if (!k)
		return;
	ALLOC_GROW(w->at, w->held.len + n, w->at_alloc);
	for (size_t i = 0; i < n; i++)
		w->at[w->held.len + i] = from + i;
	buf_add(&w->held, p, n);
}

/*
 * Mask what waits and pass on to out all of it but, with more (the message
 * goes on), the tail of its data payload that may begin a value, and what
 * came after that.  The matcher is fed only the data bytes that came since
 * the last time (swap_echo_mask()'s spellings, resumed: scrub_match_feed()).
 */
static void release(struct ws_scrub *w, int more, struct buf *out)
{
	size_t keep, upto;

	w->runs.nr = 0;
	keep = scrub_match_feed(&w->m, w->echo.forms, w->echo.nforms, w->held.buf + w->fed,
	                        w->held.len - w->fed, !more, w->base, &w->runs) -
	       w->base;
	w->fed = w->held.len;
	/*
	 * A run that starts where the data is kept may be text cut short that more makes no
	 * spelling ("&#x31" of "&#x31a"): it is masked once it starts before the cut, found again.
	 */
	for (size_t i = 0; i < w->runs.nr; i++) {
		if (w->runs.v[i].start - w->base >= keep)
			continue;
		for (size_t d = w->runs.v[i].start - w->base; d < w->runs.v[i].end - w->base; d++)
			w->pend.buf[w->at[d]] = '*';
	}
	/* Up to the first data byte kept, or all. */
	upto = keep < w->held.len ? w->at[keep] : w->pend.len;
	buf_add(out, w->pend.buf, upto);
	if (upto) {
		memmove(w->pend.buf, w->pend.buf + upto, w->pend.len - upto);
		buf_wipe_setlen(&w->pend, w->pend.len - upto);
		memmove(w->kind.buf, w->kind.buf + upto, w->kind.len - upto);
		buf_setlen(&w->kind, w->kind.len - upto);
		for (size_t d = keep; d < w->held.len; d++)
			w->at[d - keep] = w->at[d] - upto;
	}
	if (keep) {
		memmove(w->held.buf, w->held.buf + keep, w->held.len - keep);
		buf_wipe_setlen(&w->held, w->held.len - keep);
		w->base += keep;
		w->fed -= keep;
	}
}

/* The frame's payload has all come. */
static void frame_end(struct ws_scrub *w, struct buf *out)
{
	ws_frame_end(&w->f);
	if (w->f.op & 8) {
		/* A control frame's payload, masked whole (any value in it ends there). */
		char *m = xmalloc(w->ctl.len + 1);

		memcpy(m, w->ctl.buf, w->ctl.len);
		swap_echo_mask(&w->echo, w->ctl.buf, m, w->ctl.len, 0);
		pend_add(w, m, w->ctl.len, 0);
		free(m);
		buf_wipe_setlen(&w->ctl, 0);
	}
	/* A message that ended, or a Close, passes whole. */
	if ((!(w->f.op & 8) && w->f.fin) || w->f.closed)
		release(w, 0, out);
}

int ws_scrub_feed(struct ws_scrub *w, const char *in, size_t len, struct buf *out, struct buf *err)
{
	size_t at = 0;
	int r;

	while (at < len) {
		if (!w->f.in_frame) {
			if ((r = ws_head_byte(&w->f, (unsigned char)in[at++], err)) < 0)
				return r;
			if (!r)
				continue;
			buf_wipe_setlen(&w->ctl, 0);
			pend_add(w, w->f.hdr, w->f.hdr_len, 0);
			if (!w->f.left)
				frame_end(w, out);
			continue;
		}
		{
			size_t k = len - at < w->f.left ? len - at : (size_t)w->f.left;

			if (w->f.op & 8)
				buf_add(&w->ctl, in + at, k);
			else
				pend_add(w, in + at, k, 1);
			at += k;
			w->f.left -= k;
			if (!w->f.left)
				frame_end(w, out);
		}
	}
	release(w, 1, out);
	if (w->pend.len > WS_PEND_MAX)
		return buf_refuse(err, -EPROTO, "over 64 KiB of frames behind a possible value");
	return 0;
}
