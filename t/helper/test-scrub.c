/*
 * test-scrub: common/base/scrub.c, for t/6002-broker-hostile.bats.
 *
 *   test-scrub SECRET... < text    the text with every spelling of a SECRET
 *                                  replaced by '*' (scrub_span())
 *   test-scrub --pieces N SECRET... < text
 *                                  the same through a scrub_stream fed
 *                                  N-byte pieces (scrub_stream_feed())
 *   test-scrub --work N SECRET... < text
 *                                  how many bytes of the text the matcher
 *                                  read doing that (its m.examined)
 *   test-scrub --splits SECRET... < text
 *                                  "same" when the text fed in two pieces,
 *                                  cut at each byte, and in pieces of 1 to
 *                                  2 * SCRUB_SPELLING_MAX bytes, comes out
 *                                  as scrub_span() makes it whole; else
 *                                  "differs: ..." for the first that does not
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/scrub.h"
#include "base/banned.h"

/* text[0..len) through a scrub_stream in the pieces cut[0..ncut) marks (ascending), into out. */
static void stream(const struct buf *secrets, size_t n, const char *text, size_t len,
                   const size_t *cut, size_t ncut, size_t piece, struct buf *out)
{
	struct scrub_stream st = SCRUB_STREAM_INIT;
	size_t at = 0, c = 0;

	buf_setlen(out, 0);
	while (at < len) {
		size_t to = piece ? at + piece : c < ncut ? cut[c++] : len;

		if (to > len)
			to = len;
		scrub_stream_feed(&st, secrets, n, text + at, to - at, 0, out);
		at = to;
	}
	scrub_stream_feed(&st, secrets, n, NULL, 0, 1, out);
	scrub_stream_release(&st);
}

static int splits(const struct buf *secrets, size_t n, const struct buf *in)
{
	struct buf whole = BUF_INIT, out = BUF_INIT;
	int ret = 0;

	buf_add(&whole, in->buf, in->len);
	scrub_span(secrets, n, in->buf, whole.buf, in->len, in->len);
	for (size_t k = 0; k <= in->len && !ret; k++) {
		stream(secrets, n, in->buf, in->len, &k, 1, 0, &out);
		if (out.len != whole.len || memcmp(out.buf, whole.buf, whole.len)) {
			printf("differs: cut at %zu\n", k);
			ret = 1;
		}
	}
	for (size_t p = 1; p <= 2 * SCRUB_SPELLING_MAX && !ret; p++) {
		stream(secrets, n, in->buf, in->len, NULL, 0, p, &out);
		if (out.len != whole.len || memcmp(out.buf, whole.buf, whole.len)) {
			printf("differs: pieces of %zu\n", p);
			ret = 1;
		}
	}
	if (!ret)
		printf("same\n");
	buf_release(&whole);
	buf_release(&out);
	return ret;
}

int main(int argc, char **argv)
{
	struct buf in = BUF_INIT, *secrets;
	int pieces = 0, work = 0, first = 1, nsecrets;
	size_t piece = 0;

	if (argc > 2 && !strcmp(argv[1], "--splits")) {
		int ret;

		secrets = xcalloc((size_t)argc - 2, sizeof(*secrets));
		for (int i = 2; i < argc; i++)
			buf_addstr(&secrets[i - 2], argv[i]);
		if (buf_read_fd(&in, 0, 16 << 20) < 0)
			die("cannot read stdin");
		ret = splits(secrets, (size_t)argc - 2, &in);
		for (int i = 2; i < argc; i++)
			buf_release(&secrets[i - 2]);
		free(secrets);
		buf_release(&in);
		return ret;
	}
	if (argc > 2 && (!strcmp(argv[1], "--pieces") || !strcmp(argv[1], "--work"))) {
		pieces = 1;
		work = !strcmp(argv[1], "--work");
		piece = strtoul(argv[2], NULL, 10);
		first = 3;
	}
	if (argc <= first || (pieces && !piece))
		die("usage: test-scrub [--pieces N | --work N | --splits] SECRET... < text");
	nsecrets = argc - first;
	secrets = xcalloc((size_t)nsecrets, sizeof(*secrets));
	for (int i = 0; i < nsecrets; i++)
		buf_addstr(&secrets[i], argv[first + i]);
	if (buf_read_fd(&in, 0, 16 << 20) < 0)
		die("cannot read stdin");
	if (pieces) {
		struct scrub_stream st = SCRUB_STREAM_INIT;
		struct buf out = BUF_INIT;

		for (size_t at = 0; at < in.len; at += piece) {
			size_t k = in.len - at < piece ? in.len - at : piece;

			scrub_stream_feed(&st, secrets, (size_t)nsecrets, in.buf + at, k, 0, &out);
		}
		scrub_stream_feed(&st, secrets, (size_t)nsecrets, NULL, 0, 1, &out);
		if (work)
			printf("%zu\n", st.m.examined);
		else
			fwrite(out.buf, 1, out.len, stdout);
		scrub_stream_release(&st);
		buf_release(&out);
	} else {
		scrub_span(secrets, (size_t)nsecrets, in.buf, in.buf, in.len, in.len);
		fwrite(in.buf, 1, in.len, stdout);
	}
	for (int i = 0; i < nsecrets; i++)
		buf_release(&secrets[i]);
	free(secrets);
	buf_release(&in);
	return 0;
}
