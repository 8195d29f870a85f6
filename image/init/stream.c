/*
 * Task mode's relay of Claude Code's output (stream-json, one JSON value a
 * line): into transcript.jsonl, a progress line for each tool call, and the
 * result line kept for result.json (task_int.h).
 */
#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "task_int.h"
#include "task/transcript.h"
#include "base/banned.h"

static void transcript_write(struct guest_task *t, const char *data, size_t n)
{
	int err;

	if (t->transcript_full)
		return;
	if (t->transcript_len + n > TRANSCRIPT_MAX) {
		t->transcript_full = 1;
		progress(t, "the transcript is longer than %llu MiB: the rest is left out",
		         TRANSCRIPT_MAX >> 20);
		return;
	}
	if ((err = write_all(t->transcript_fd, data, n)) < 0) {
		t->transcript_full = 1;
		progress(t, "cannot write transcript.jsonl: %s", strerror(-err));
		return;
	}
	t->transcript_len += n;
}

/*
 * One whole line of stream-json: a progress line for each tool call in it
 * (common/task/transcript.h), and keep it if it is the result line.
 */
static void transcript_line(struct guest_task *t, const char *line, size_t n)
{
	struct buf calls = BUF_INIT;
	json_t *j, *type;

	if (transcript_tool_calls(line, n, &calls) > 0)
		for (char *p = calls.buf, *nl; (nl = strchr(p, '\n')); p = nl + 1)
			progress(t, "%.*s", (int)(nl - p), p);
	buf_release(&calls);
	if (!memmem(line, n, "\"result\"", 8))
		return;
	j = json_loadb(line, n, 0, NULL);
	type = json_object_get(j, "type");
	if (json_is_string(type) && !strcmp(json_string_value(type), "result")) {
		json_decref(t->result_line);
		t->result_line = j;
		return;
	}
	json_decref(j);
}

int transcript_sink(void *ctx, const char *data, size_t n)
{
	struct guest_task *t = ctx;

	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) + 1 : n;

		if (t->line_long) {
			/* Too long to be worth parsing: passed through as it is. */
			transcript_write(t, data, take);
		} else {
			buf_add(&t->line, data, take);
			if (t->line.len > LINE_MAX_PARSE) {
				transcript_write(t, t->line.buf, t->line.len);
				buf_reset(&t->line);
				t->line_long = 1;
			}
		}
		if (nl) {
			if (!t->line_long) {
				transcript_write(t, t->line.buf, t->line.len);
				transcript_line(t, t->line.buf, t->line.len);
			}
			buf_reset(&t->line);
			t->line_long = 0;
		}
		data += take;
		n -= take;
	}
	return 0;
}

void transcript_flush(struct guest_task *t)
{
	if (!t->line.len)
		return;
	transcript_write(t, t->line.buf, t->line.len);
	if (!t->line_long)
		transcript_line(t, t->line.buf, t->line.len);
	buf_reset(&t->line);
}
