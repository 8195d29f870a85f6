/*
 * test-session: common/task/session_mend.c, for t/1070-session-mend.bats.
 *
 *   test-session mend whole|tail SESSION TRANSCRIPT
 *	session_mend() on the files: the session as it then is on stdout,
 *	"added N" (or the error's name) on stderr
 */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/session_file.h"
#include "task/session_mend.h"
#include "base/banned.h"

int main(int argc, char **argv)
{
	struct buf s = BUF_INIT, t = BUF_INIT;
	int r;

	tool_init(argc, argv);
	if (argc != 5 || strcmp(argv[1], "mend") ||
	    (strcmp(argv[2], "whole") && strcmp(argv[2], "tail")))
		die("usage: test-session mend whole|tail SESSION TRANSCRIPT");
	if (buf_read_file(&s, argv[3], SESSION_FILE_MAX) < 0)
		die_errno("cannot read '%s'", argv[3]);
	if (buf_read_file(&t, argv[4], SESSION_FILE_MAX) < 0)
		die_errno("cannot read '%s'", argv[4]);
	r = session_mend(&s, t.buf, t.len, !strcmp(argv[2], "whole"));
	if (r < 0)
		fprintf(stderr, "%s\n", strerror(-r));
	else
		fprintf(stderr, "added %d\n", r);
	if (write_all(1, s.buf, s.len) < 0)
		die_errno("cannot write");
	buf_release(&s);
	buf_release(&t);
	return r < 0;
}
