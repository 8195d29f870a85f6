/*
 * libFuzzer target: what `aibox tasks log`, `show` and `list` read from a
 * task folder: each line of the input as a line of Claude Code's transcript
 * (common/task/transcript.c: transcript_render(), transcript_render_end(),
 * transcript_tool_calls(), the
 * latter also run by the guest's init on every line Claude Code writes) and
 * the whole input as summary.json (common/task/task_record.c:
 * task_record_parse()).
 *
 * Besides not crashing: a rendered line always ends in a line break; the end
 * alone is one line, "= ...", and only what the whole rendering holds; a tool
 * call's line has no other line break and stays within its cut (the name
 * 40 characters, the input TRANSCRIPT_COLS, 4 bytes a character at most);
 * an accepted record holds only checked commits and a refused one says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "task/task_record.h"
#include "task/transcript.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_commit(const char *c)
{
	size_t n = strlen(c);

	if ((n != 0 && n != 40 && n != 64) || strspn(c, "0123456789abcdef") != n)
		abort();
}

static void one_line(const char *p, size_t n)
{
	struct buf out = BUF_INIT, calls = BUF_INIT, end = BUF_INIT;
	int count;

	transcript_render(p, n, &out);
	if (out.len && out.buf[out.len - 1] != '\n')
		abort();
	transcript_render_end(p, n, &end);
	if (end.len &&
	    (strncmp(end.buf, "= ", 2) || memchr(end.buf, '\n', end.len) != end.buf + end.len - 1 ||
	     end.len != out.len || memcmp(end.buf, out.buf, out.len)))
		abort();
	buf_release(&end);
	count = transcript_tool_calls(p, n, &calls);
	for (const char *q = calls.buf; count > 0; count--) {
		const char *nl = memchr(q, '\n', calls.len - (size_t)(q - calls.buf));

		if (!nl || (size_t)(nl - q) > (40 + 2 + TRANSCRIPT_COLS) * 4 + 3)
			abort();
		q = nl + 1;
	}
	buf_release(&out);
	buf_release(&calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct task_record r;
	struct buf err = BUF_INIT;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		one_line(p, n);
		p += n + 1;
	}
	if (task_record_parse((const char *)data, size, &r, &err) == 0) {
		if (err.len)
			abort();
		check_commit(r.start_commit);
		check_commit(r.end_commit);
		task_record_release(&r);
	} else if (!err.len) {
		abort();
	}
	buf_release(&err);
	return 0;
}
