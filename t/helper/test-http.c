/*
 * test-http: common/net/http.c's body framing, for t/3006-http-body.bats.
 *
 *   test-http decode chunked|length N|close PIECE < body
 *	http_body_decode() on stdin fed PIECE bytes at a time: the payload
 *	on stdout, then "taken=K done=D" on stderr (K bytes of the input
 *	belong to the body); exit 1 with "refused: WHY" on stderr
 *   test-http reason STATUS...
 *	http_reason() of each STATUS, one "STATUS REASON" line each
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "base/num.h"
#include "base/banned.h"

#define INPUT_MAX (1 << 20)

static int cmd_decode(const char *kind, const char *length, const char *piece_arg)
{
	struct buf in = BUF_INIT;
	struct http_body b;
	long piece, len = 0;
	size_t off = 0;
	char *out;
	int ret = 0;

	if (parse_long(piece_arg, 1, INPUT_MAX, &piece) < 0 ||
	    (length && parse_long(length, 0, INPUT_MAX, &len) < 0))
		die("bad number");
	if (buf_read_fd(&in, 0, INPUT_MAX) < 0)
		die_errno("cannot read stdin");
	if (!strcmp(kind, "chunked"))
		http_body_init(&b, BODY_CHUNKED, 0);
	else if (!strcmp(kind, "length"))
		http_body_init(&b, BODY_LENGTH, (uint64_t)len);
	else if (!strcmp(kind, "close"))
		http_body_init(&b, BODY_CLOSE, 0);
	else
		die("unknown framing '%s'", kind);
	out = xmalloc((size_t)piece);
	while (off < in.len && !b.done) {
		size_t n = in.len - off < (size_t)piece ? in.len - off : (size_t)piece, got;
		struct buf why = BUF_INIT;
		long k = http_body_decode(&b, in.buf + off, n, out, &got, &why);

		if (k < 0) {
			fprintf(stderr, "refused: %s\n", why.buf);
			buf_release(&why);
			ret = 1;
			goto out;
		}
		if (got && write_all(1, out, got) < 0)
			die_errno("cannot write");
		off += (size_t)k;
	}
	fprintf(stderr, "taken=%zu done=%d\n", off, b.done);
out:
	free(out);
	buf_release(&in);
	return ret;
}

static int cmd_reason(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		long v;

		if (parse_long(argv[i], -1, 1000, &v) < 0)
			die("invalid status '%s'", argv[i]);
		printf("%ld %s\n", v, http_reason((int)v));
	}
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "reason"))
		return cmd_reason(argc - 2, argv + 2);
	if (argc == 5 && !strcmp(argv[1], "decode") && !strcmp(argv[2], "length"))
		return cmd_decode(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "decode"))
		return cmd_decode(argv[2], NULL, argv[3]);
	die("usage: test-http decode chunked|length N|close PIECE < body | reason STATUS...");
}
