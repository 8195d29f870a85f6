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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/scrub.h"
#include "base/banned.h"

int main(int argc, char **argv)
{
	struct buf in = BUF_INIT, *secrets;
	int pieces = 0, work = 0, first = 1, nsecrets;
	size_t piece = 0;

	if (argc > 2 && (!strcmp(argv[1], "--pieces") || !strcmp(argv[1], "--work"))) {
		pieces = 1;
		work = !strcmp(argv[1], "--work");
		piece = strtoul(argv[2], NULL, 10);
		first = 3;
	}
	if (argc <= first || (pieces && !piece))
		die("usage: test-scrub [--pieces N | --work N] SECRET... < text");
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
