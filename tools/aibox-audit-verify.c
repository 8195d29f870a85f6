/*
 * aibox-audit-verify: check the chain of the audit record (common/task/audit.h,
 * docs/security.md "The audit record").
 *
 *	aibox audit verify [FILE]
 *
 * FILE defaults to $AIBOX_HOME/audit.jsonl.  Exit 0 when every line is in
 * its place and unedited; 1 with the first line that is not; 2 for a usage
 * error or a file that cannot be read.  See docs/man/aibox-audit-verify.1.
 */
#include <errno.h>
#include <stdio.h>

#include "task/audit.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/strvec.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox audit verify [FILE]\n"
    "\n"
    "Check the hash chain of the audit record (default $AIBOX_HOME/audit.jsonl):\n"
    "an edited, removed or moved entry is named by its line.\n"
    "\n"
    "    -h, --help   show this help\n"
    "\n"
    "Exit 0: the chain is whole; 1: it is not (the line is named); 2: usage error,\n"
    "or the file cannot be read.\n";

int main(int argc, char **argv)
{
	struct buf err = BUF_INIT, path = BUF_INIT;
	struct strvec words = STRVEC_INIT;
	unsigned flags = 0;
	size_t n = 0;
	int ret;

	tool_init(argc, argv);
	opt_words_exit(argc, argv, NULL, 1, &flags, &words, usage_text);
	if (words.nr)
		buf_addstr(&path, words.v[0]);
	else
		audit_path(&path);
	ret = audit_verify(path.buf, &n, &err);
	if (ret == -EBADMSG) {
		error("%s:%s", path.buf, err.buf);
		ret = EXIT_REFUSED;
	} else if (ret < 0) {
		die("%s", err.buf);
	} else {
		printf("%s: %zu entries, the chain is whole\n", path.buf, n);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write to stdout");
	strvec_clear(&words);
	buf_release(&err);
	buf_release(&path);
	return ret;
}
