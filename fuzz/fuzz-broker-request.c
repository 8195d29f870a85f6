/*
 * libFuzzer target for aibox-broker's request reading (common/broker_req.c),
 * the code the broker runs on what the VM sends: the request head, the
 * target's remote number, the body (Content-Length or chunked, gzip
 * inflated) and then the push command list and pkt-line check on it
 * (common/gitproto.c).  The first byte sets how many bytes each read
 * returns (1 to 64), so lines and chunks split anywhere.
 * `make fuzz && build/fuzz/fuzz-broker-request`.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "broker_req.h"
#include "err.h"
#include "gitproto.h"
#include "banned.h"

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
static int read_body(struct breq_body *b, const struct breq_msg *m, struct buf *out)
{
	const char *ce = breq_get(m, "Content-Encoding");
	char piece[4096];

	if (ce && !strcasecmp(ce, "gzip")) {
		unsigned long long in = 0;

		return breq_inflate(b, out, FUZZ_BODY_MAX, &in);
	}
	for (;;) {
		ssize_t n = breq_body_read(b, piece, sizeof(piece));

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
	struct breq_src src = BREQ_SRC_INIT(mem_read, &mem);
	struct breq_msg m = BREQ_MSG_INIT;
	struct breq_body b;
	struct buf body = BUF_INIT;
	struct push_commands pc = PUSH_COMMANDS_INIT;
	const char *sp1, *sp2, *rest;
	size_t idx;

	if (!size)
		return 0;
	mem.step = data[0] % 64 + 1;
	mem.p = data + 1;
	mem.left = size - 1;
	if (breq_read_head(&src, &m) < 0)
		goto out;
	sp1 = strchr(m.line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (sp2) {
		char *target = xstrndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));

		if (breq_parse_target(target, &idx, &rest) == 0 &&
		    (idx >= BREQ_REMOTES_MAX || rest < target || rest > target + strlen(target)))
			__builtin_trap();
		free(target);
	}
	breq_body_init(&b, &src, &m, 0);
	if (read_body(&b, &m, &body) < 0)
		goto out;
	if (push_commands_parse(&pc, body.buf, body.len) == 0 && pc.consumed > body.len)
		__builtin_trap();
	(void)pkt_stream_ok(body.buf, body.len);
out:
	push_commands_release(&pc);
	buf_release(&body);
	breq_msg_release(&m);
	breq_src_release(&src);
	return 0;
}
