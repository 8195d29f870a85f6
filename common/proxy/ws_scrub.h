/*
 * An intercepted WebSocket connection's frames (RFC 6455), both ways, read
 * as they come (docs/proxy.md, "WebSocket on an intercepted host").  Pure:
 * no I/O, for the proxy, its tests and its fuzzer.
 *
 * struct ws_frames holds the rules of a frame's head and of the frames'
 * order, the same for both directions but the mask: the VM's frames must
 * all be masked (RFC 6455 5.1), the host's never.  Refused, ending the
 * connection: a frame masked or not against that, a reserved bit set (no
 * extension is ever agreed), an opcode RFC 6455 does not define, a control
 * frame that is fragmented, over 125 bytes or a Close of one byte, a
 * continuation outside a message or a new message inside one, a length
 * over WS_FRAME_MAX (or with its top bit set), any byte after the Close
 * frame.  Each is refused at the first byte of the head that decides it.
 *
 * The VM's frames pass as they came (ws_vm_feed()): a head once it is whole
 * and allowed, a payload as it streams, never looked into (a placeholder
 * in one reaches the host as the placeholder).
 *
 * The host's frames on their way to the VM (ws_scrub_feed()) have every
 * secret's value in their payloads replaced by as many '*', as
 * swap_echo_mask() finds it, so that no frame's length changes.  A data
 * message's payloads (its first frame and its continuations) are one
 * stream: a value split across its frames, or across the reads that bring
 * them, is found.  Bytes that may begin a value wait for what follows until
 * the message ends; a frame that comes after them (a control frame between
 * two fragments included) waits behind them, so the order of the bytes
 * never changes; the matcher resumes from read to read (scrub_match_feed()),
 * so a read costs its own bytes, not what waits.  A control frame's payload
 * is looked at whole.  Refused
 * besides: more than WS_PEND_MAX bytes waiting behind a possible value.
 */
#ifndef AIBOX_WS_SCRUB_H
#define AIBOX_WS_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/scrub.h"
#include "proxy/secret_swap.h"

/* The longest frame taken from either side: its payload streams through, never held whole. */
#define WS_FRAME_MAX (1ULL << 30)
/* The most bytes that wait behind the start of a possible value. */
#define WS_PEND_MAX (64 * 1024)

/* One direction's frames: where in them the bytes so far end. */
struct ws_frames {
	int from_vm;           /* the VM's: every frame masked; the host's: none */
	unsigned char hdr[14]; /* the frame head being read, its mask key included */
	size_t hdr_len;
	int in_frame;  /* its head is read: its payload comes */
	int op, fin;   /* of the frame being read */
	uint64_t left; /* its payload bytes still to come */
	int msg;       /* a fragmented data message is under way */
	int closed;    /* the Close frame came */
};

void ws_frames_init(struct ws_frames *f, int from_vm);
/*
 * The next byte of a frame head (f->in_frame 0) into f->hdr: 1 when the head
 * is whole and allowed (f->hdr_len its length; f->op, f->fin and f->left
 * set; f->in_frame 1), 0 when more of it must come, -EPROTO when refused
 * (why in err: "a masked frame", ...); after that, f takes nothing more.
 */
int ws_head_byte(struct ws_frames *f, unsigned char c, struct buf *err);
/* The frame's payload has all come (f->left 0): f waits for the next head. */
void ws_frame_end(struct ws_frames *f);

/*
 * The VM's next len bytes (f from ws_frames_init(f, 1)): appends to out
 * those that may go to the host now, unchanged (a head once whole).  0, or
 * -EPROTO for a refused frame (why in err), out then holding what came
 * before it; after that, f takes nothing more.
 */
int ws_vm_feed(struct ws_frames *f, const char *in, size_t len, struct buf *out, struct buf *err);

struct ws_scrub {
	struct swap_echo echo; /* the spellings (swap_echo_init()) */
	struct ws_frames f;    /* the host's frames */
	struct buf ctl;        /* a control frame's payload (125 bytes at most) */
	struct buf pend;       /* bytes for the VM not passed yet, in order, masked so far */
	struct buf kind;       /* a byte for each of pend's: 1 for a data payload's */
	struct buf held;       /* pend's data payload bytes as they came (wiped) */
	size_t *at;            /* for each of held's bytes, where it is in pend */
	size_t at_alloc;
	struct scrub_match m;   /* the matcher, resumed over the data payloads */
	struct scrub_runs runs; /* what it found */
	size_t base;            /* where held starts in what m was fed */
	size_t fed;             /* held's first bytes m was fed */
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
