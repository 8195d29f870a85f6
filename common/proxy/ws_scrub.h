/*
 * The host's side of an intercepted WebSocket connection on its way to the
 * VM (docs/proxy.md, "WebSocket"): the frames of RFC 6455 read as they come,
 * and every secret's value in their payloads replaced by as many '*', as
 * swap_echo_mask() finds it, so that no frame's length changes.  Pure: no
 * I/O, for the proxy, its tests and its fuzzer.
 *
 * A data message's payloads (its first frame and its continuations) are
 * one stream: a value split across its frames, or across the reads that
 * bring them, is found.  Bytes that may begin a value wait for what follows
 * until the message ends; a frame that comes after them (a control frame
 * between two fragments included) waits behind them, so the order of the
 * bytes never changes.  A control frame's payload is looked at whole.
 * Refused, ending the connection: a masked frame, a reserved bit set (no
 * extension is ever agreed), an opcode RFC 6455 does not define, a control
 * frame that is fragmented, over 125 bytes or a Close of one byte, a
 * continuation outside a message or a new message inside one, a length
 * over WS_FRAME_MAX (or with its top bit set), bytes after the Close frame,
 * and more than WS_PEND_MAX bytes waiting behind a possible value.
 */
#ifndef AIBOX_WS_SCRUB_H
#define AIBOX_WS_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "proxy/secret_swap.h"

/* The longest frame taken from a host: its payload streams through, never held whole. */
#define WS_FRAME_MAX (1ULL << 30)
/* The most bytes that wait behind the start of a possible value. */
#define WS_PEND_MAX (64 * 1024)

struct ws_scrub {
	struct swap_echo echo; /* the spellings (swap_echo_init()) */
	unsigned char hdr[10]; /* the frame head being read */
	size_t hdr_len;
	int in_frame;    /* its head is read: its payload comes */
	int op, fin;     /* of the frame being read */
	uint64_t left;   /* its payload bytes still to come */
	int msg;         /* a fragmented data message is under way */
	int closed;      /* the Close frame came */
	struct buf ctl;  /* a control frame's payload (125 bytes at most) */
	struct buf pend; /* bytes for the VM not passed yet, in order, masked so far */
	struct buf kind; /* a byte for each of pend's: 1 for a data payload's */
	struct buf held; /* pend's data payload bytes as they came (wiped) */
};

void ws_scrub_init(struct ws_scrub *w, const struct swap_secret *secrets, size_t n);
/*
 * The host's next len bytes: appends to out what may go to the VM now.
 * 0, or -EPROTO for a refused frame or stream (why in err: "a masked
 * frame", ...); after that, w takes nothing more.
 */
int ws_scrub_feed(struct ws_scrub *w, const char *in, size_t len, struct buf *out, struct buf *err);
/* Wipe and free what w holds (what waits is never passed). */
void ws_scrub_release(struct ws_scrub *w);

#endif
