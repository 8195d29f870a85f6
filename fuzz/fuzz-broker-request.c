/*
 * libFuzzer target for aibox-broker's request reading, the code the broker
 * runs on what the VM sends: the request head through common/net/hconn.c and
 * common/net/http.c, the target's remote number (common/net/broker_req.c), the body
 * (Content-Length or chunked, gzip inflated) and then the push command list
 * and pkt-line check on it (common/git/gitproto.c).  The first byte sets how
 * many bytes each read returns (1 to 64), so lines and chunks split
 * anywhere.  `make fuzz && build/fuzz/fuzz-broker-request`.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "net/broker_req.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "net/hconn.h"
#include "base/banned.h"

/* Kept below the broker's 10 MiB so a run stays fast; the code is the same. */
#define FUZZ_BODY_MAX (1u << 20)

struct mem {
	const uint8_t *p;
	size_t left, step;
};

static ssize_t mem_read(void *ctx, void *dst, size_t n)
{
	struct mem *m = ctx;

	if (n > m->step)
		n = m->step;
	if (n > m->left)
		n = m->left;
	memcpy(dst, m->p, n);
	m->p += n;
	m->left -= n;
	return (ssize_t)n;
}

/* The body as the broker reads it: inflated when gzip, at most FUZZ_BODY_MAX. */
static int read_body(struct hconn_body *b, const struct http_head *h, struct buf *out)
{
	const struct http_header *ce = http_header(h, "content-encoding", NULL);
	char piece[4096];

	if (ce && ce->value_len == 4 && !strncasecmp(ce->value, "gzip", 4)) {
		unsigned long long in = 0;

		return hconn_body_inflate(b, out, FUZZ_BODY_MAX, &in);
	}
	for (;;) {
		ssize_t n = hconn_body_read(b, piece, sizeof(piece));

		if (n <= 0)
			return (int)n;
		if (out->len + (size_t)n > FUZZ_BODY_MAX)
			return -EFBIG;
		buf_add(out, piece, (size_t)n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem mem;
	struct hconn c;
	struct hconn_head m = HCONN_HEAD_INIT;
	struct hconn_body b;
	struct buf body = BUF_INIT;
	struct push_commands pc = PUSH_COMMANDS_INIT;
	const char *rest;
	char *target;
	size_t idx;

	if (!size)
		return 0;
	mem.step = data[0] % 64 + 1;
	mem.p = data + 1;
	mem.left = size - 1;
	hconn_init(&c, -1);
	c.read = mem_read;
	c.read_ctx = &mem;
	if (hconn_read_head(&c, 1, &m) < 0)
		goto out;
	if (m.h.head_len != m.raw.len || m.h.method != m.raw.buf)
		__builtin_trap();
	target = xstrndup(m.h.target, m.h.target_len);
	if (breq_parse_target(target, &idx, &rest) == 0 &&
	    (idx >= BREQ_REMOTES_MAX || rest < target || rest > target + strlen(target)))
		__builtin_trap();
	free(target);
	hconn_body_init(&b, &c, &m.h, 1);
	if (read_body(&b, &m.h, &body) < 0)
		goto out;
	if (push_commands_parse(&pc, body.buf, body.len) == 0 && pc.consumed > body.len)
		__builtin_trap();
	(void)pkt_stream_ok(body.buf, body.len);
out:
	push_commands_release(&pc);
	buf_release(&body);
	hconn_head_release(&m);
	hconn_close(&c);
	return 0;
}
