/*
 * libFuzzer target for an intercepted WebSocket connection's frames
 * (common/proxy/ws_scrub.c): every input, after a first byte that says
 * where to cut it, is fed whole and fed in pieces, as the host's frames on
 * their way to the VM and as the VM's on their way to the host.  Besides
 * not crashing: both ways refuse it or neither does, and pass the same
 * bytes.  The host's: what passes is the input's beginning with some bytes
 * made '*' (no frame head or length changes); and read back as frames, no
 * message's payload (its frames' together) and no control frame's holds a
 * value.  The VM's: what passes is the input's beginning as it came, whole
 * frame heads only, each masked with no reserved bit, nothing after a Close;
 * all of it unless refused or a head is still to come.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "proxy/secret_swap.h"
#include "proxy/ws_scrub.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PH1 "aibox-secret-0123456789abcdef0123456789abcdef"
#define PH2 "aibox-secret-fedcba9876543210fedcba9876543210"
#define V1  "V4lu3-0ne-s3cret"
#define V2  "tw0-S3cret/valu3"

static const struct swap_secret secrets[2] = {
    {"ONE", PH1, V1, ALLOW_LIST_INIT, 0},
    {"TWO", PH2, V2, ALLOW_LIST_INIT, 0},
};

static int has(const char *p, size_t n, const char *s)
{
	return memmem(p, n, s, strlen(s)) != NULL;
}

/* Feed p[0..n) in pieces of at most chunk bytes: 0 or the refusal. */
static int feed(const char *p, size_t n, size_t chunk, struct buf *out)
{
	struct ws_scrub w;
	struct buf why = BUF_INIT;
	int r = 0;

	ws_scrub_init(&w, secrets, 2);
	for (size_t off = 0; off < n && !r; off += chunk)
		r = ws_scrub_feed(&w, p + off, n - off < chunk ? n - off : chunk, out, &why);
	if (r && (r != -EPROTO || !why.len))
		__builtin_trap();
	ws_scrub_release(&w);
	buf_release(&why);
	return r;
}

/* Feed p[0..n) as the VM's in pieces of at most chunk bytes: 0 or the refusal. */
static int feed_vm(const char *p, size_t n, size_t chunk, struct buf *out)
{
	struct ws_frames f;
	struct buf why = BUF_INIT;
	int r = 0;

	ws_frames_init(&f, 1);
	for (size_t off = 0; off < n && !r; off += chunk)
		r = ws_vm_feed(&f, p + off, n - off < chunk ? n - off : chunk, out, &why);
	if (r && (r != -EPROTO || !why.len))
		__builtin_trap();
	/* Not refused: all of it passed but a head still to come. */
	if (!r && out->len + (f.in_frame ? 0 : f.hdr_len) != n)
		__builtin_trap();
	buf_release(&why);
	return r;
}

/* The VM's frames of out, as they passed: whole heads, masked, no reserved bit, none after a Close.
 */
static void vm_frames(const unsigned char *o, size_t n)
{
	int closed = 0;

	for (size_t at = 0; at < n;) {
		uint64_t len;
		size_t hl;

		if (closed || at + 2 > n || !(o[at + 1] & 0x80) || (o[at] & 0x70))
			__builtin_trap();
		len = o[at + 1] & 0x7f;
		hl = len == 126 ? 8 : len == 127 ? 14 : 6;
		if (at + hl > n)
			__builtin_trap();
		if (hl == 8)
			len = (uint64_t)o[at + 2] << 8 | o[at + 3];
		else if (hl == 14)
			for (size_t i = 0; i < 8; i++)
				len = (i ? len << 8 : 0) | o[at + 2 + i];
		if (len > WS_FRAME_MAX)
			__builtin_trap();
		closed = (o[at] & 0x0f) == 8;
		if (len >= n - at - hl)
			break; /* the rest has not passed yet */
		at += hl + len;
	}
}

/* The frames of out (unmasked, as they passed): no payload holds a value. */
static void no_value(const unsigned char *o, size_t n)
{
	struct buf msg = BUF_INIT;

	for (size_t at = 0; at + 2 <= n;) {
		uint64_t len = o[at + 1] & 0x7f;
		size_t hl = len == 126 ? 4 : len == 127 ? 10 : 2;

		if (at + hl > n)
			break;
		if (hl == 4)
			len = (uint64_t)o[at + 2] << 8 | o[at + 3];
		else if (hl == 10)
			for (size_t i = 0; i < 8; i++)
				len = (i ? len << 8 : 0) | o[at + 2 + i];
		if (len > n - at - hl)
			len = n - at - hl; /* the rest has not passed yet */
		if (o[at] & 8) {
			if (has((const char *)o + at + hl, len, V1) ||
			    has((const char *)o + at + hl, len, V2))
				__builtin_trap();
		} else {
			buf_add(&msg, o + at + hl, len);
			if (o[at] & 0x80) {
				if (has(msg.buf, msg.len, V1) || has(msg.buf, msg.len, V2))
					__builtin_trap();
				buf_reset(&msg);
			}
		}
		at += hl + len;
	}
	if (has(msg.buf, msg.len, V1) || has(msg.buf, msg.len, V2))
		__builtin_trap();
	buf_release(&msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1;
	struct buf a = BUF_INIT, b = BUF_INIT;
	int ra, rb;

	if (size < 1 || size > 65536)
		return 0;
	ra = feed(p, size - 1, size - 1 ? size - 1 : 1, &a);
	rb = feed(p, size - 1, data[0] % 23 + 1, &b);
	if (!ra != !rb || (!ra && (a.len != b.len || memcmp(a.buf, b.buf, a.len))))
		__builtin_trap();
	for (struct buf *o = &a; o; o = o == &a ? &b : NULL) {
		if (o->len > size - 1)
			__builtin_trap();
		for (size_t i = 0; i < o->len; i++)
			if (o->buf[i] != p[i] && o->buf[i] != '*')
				__builtin_trap();
		no_value((const unsigned char *)o->buf, o->len);
	}
	buf_reset(&a);
	buf_reset(&b);
	ra = feed_vm(p, size - 1, size - 1 ? size - 1 : 1, &a);
	rb = feed_vm(p, size - 1, data[0] % 23 + 1, &b);
	if (!ra != !rb || a.len != b.len || memcmp(a.buf, b.buf, a.len) || a.len > size - 1 ||
	    memcmp(a.buf, p, a.len))
		__builtin_trap();
	vm_frames((const unsigned char *)a.buf, a.len);
	buf_release(&a);
	buf_release(&b);
	return 0;
}
