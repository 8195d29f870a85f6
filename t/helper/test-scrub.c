/*
 * test-scrub: common/base/scrub.c, for t/6002-broker-hostile.bats.
 *
 *   test-scrub SECRET... < text    the text with every spelling of a SECRET
 *                                  replaced by '*' (scrub_span())
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/scrub.h"
#include "base/banned.h"

int main(int argc, char **argv)
{
	struct buf in = BUF_INIT, *secrets;

	if (argc < 2)
		die("usage: test-scrub SECRET... < text");
	secrets = xcalloc((size_t)argc - 1, sizeof(*secrets));
	for (int i = 1; i < argc; i++)
		buf_addstr(&secrets[i - 1], argv[i]);
	if (buf_read_fd(&in, 0, 16 << 20) < 0)
		die("cannot read stdin");
	scrub_span(secrets, (size_t)argc - 1, in.buf, in.buf, in.len, in.len);
	fwrite(in.buf, 1, in.len, stdout);
	for (int i = 1; i < argc; i++)
		buf_release(&secrets[i - 1]);
	free(secrets);
	buf_release(&in);
	return 0;
}
