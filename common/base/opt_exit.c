/*
 * The parts of common/base/opt.h that end the process, for tools only (as
 * common/base/err.c's usage_exit()): the library's own code never calls them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/strvec.h"
#include "base/banned.h"

__attribute__((noreturn)) static void put_exit(struct buf *out)
{
	fwrite(out->buf, 1, out->len, stdout);
	if (fflush(stdout) || ferror(stdout))
		die_errno("cannot write to stdout");
	exit(0);
}

void opt_describe_exit(const struct opt_spec *table)
{
	struct buf out = BUF_INIT;

	opt_describe("", table, &out);
	put_exit(&out);
}

void opt_describe_subs_exit(const struct opt_sub *subs)
{
	struct buf out = BUF_INIT;

	/* The tool's own -h before its subcommands' options. */
	opt_describe("", NULL, &out);
	for (; subs->word; subs++)
		opt_describe(subs->word, subs->table, &out);
	put_exit(&out);
}

void opt_words_exit(int argc, char **argv, const struct opt_spec *table, size_t max,
                    unsigned *flags, struct strvec *words, const char *usage)
{
	struct buf why = BUF_INIT;
	int ret = opt_words(argc, argv, table, max, flags, words, &why);

	if (ret == 2)
		opt_describe_exit(table);
	if (ret)
		usage_exit(ret == 1, why.buf, usage);
	buf_release(&why);
}
