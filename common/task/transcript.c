#include "task/transcript.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_get.h"
#include "base/banned.h"

/*
 * Append s[0..n) on one line: line breaks (U+2028 and U+2029 too, which the
 * output sanitizer breaks lines at) and tabs as spaces, at most cols
 * characters (UTF-8 lead bytes counted), "..." marking a cut.
 */
static void add_cut(struct buf *out, const char *s, size_t n, size_t cols)
{
	size_t chars = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c & 0xc0) != 0x80 && chars++ == cols) {
			buf_addstr(out, "...");
			return;
		}
		if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
		    ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)) {
			buf_addch(out, ' ');
			i += 2;
			continue;
		}
		buf_addch(out, c == '\n' || c == '\r' || c == '\t' ? ' ' : (char)c);
	}
}

/* The input key that says most about a call of a known tool, else NULL. */
static const char *main_input(json_t *input)
{
	static const char *const keys[] = {"command",     "file_path", "path",
	                                   "pattern",     "url",       "query",
	                                   "description", "prompt",    "notebook_path"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_is_string(json_object_get(input, keys[i])))
			return keys[i];
	return NULL;
}

static void add_tool_call(struct buf *out, json_t *item)
{
	json_t *name = json_object_get(item, "name"), *input = json_object_get(item, "input");
	const char *key = json_is_object(input) ? main_input(input) : NULL;

	if (json_is_string(name))
		add_cut(out, json_string_value(name), json_string_length(name), 40);
	else
		buf_addstr(out, "(a tool)");
	if (key) {
		json_t *v = json_object_get(input, key);

		buf_addstr(out, ": ");
		add_cut(out, json_string_value(v), json_string_length(v), TRANSCRIPT_COLS);
	} else if (json_is_object(input) && json_object_size(input)) {
		char *text = json_dumps(input, JSON_COMPACT | JSON_PRESERVE_ORDER);

		if (text) {
			buf_addstr(out, ": ");
			add_cut(out, text, strlen(text), TRANSCRIPT_COLS);
		}
		free(text);
	}
	buf_addch(out, '\n');
}

int transcript_tool_calls(const char *line, size_t n, struct buf *out)
{
	json_t *j, *content, *item;
	size_t i;
	int count = 0;

	if (n > TRANSCRIPT_LINE_MAX || !memmem(line, n, "tool_use", 8))
		return 0;
	json_vm_loadb(line, n, 0, JSON_VM_VALUES_MAX, &j, NULL);
	content = json_object_get(json_object_get(j, "message"), "content");
	json_array_foreach(content, i, item)
	{
		json_t *type = json_object_get(item, "type");

		if (json_is_string(type) && !strcmp(json_string_value(type), "tool_use")) {
			add_tool_call(out, item);
			count++;
		}
	}
	json_decref(j);
	return count;
}

/* The text of a tool result: a string, or the text parts of an array. */
static void result_text(json_t *content, struct buf *text)
{
	json_t *part;
	size_t i;

	if (json_is_string(content)) {
		buf_add(text, json_string_value(content), json_string_length(content));
		return;
	}
	json_array_foreach(content, i, part)
	{
		json_t *t = json_object_get(part, "text");

		if (json_is_string(t)) {
			if (text->len)
				buf_addch(text, '\n');
			buf_add(text, json_string_value(t), json_string_length(t));
		}
	}
}

static void add_tool_result(struct buf *out, json_t *item)
{
	struct buf text = BUF_INIT;
	size_t lines = 0, first;
	const char *p;

	result_text(json_object_get(item, "content"), &text);
	for (p = text.buf; p < text.buf + text.len; p++)
		if (*p == '\n')
			lines++;
	if (text.len && text.buf[text.len - 1] != '\n')
		lines++;
	first = strcspn(text.buf, "\n");
	if (json_is_true(json_object_get(item, "is_error")))
		buf_addstr(out, "  ! error: ");
	else
		buf_addf(out, "  < %zu line%s%s", lines, lines == 1 ? "" : "s", first ? ": " : "");
	add_cut(out, text.buf, first, TRANSCRIPT_COLS);
	buf_addch(out, '\n');
	buf_release(&text);
}

static void add_text(struct buf *out, json_t *text)
{
	const char *s = json_string_value(text);
	size_t n = json_string_length(text);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (!n)
		return;
	buf_add(out, s, n);
	buf_addch(out, '\n');
}

static void add_result(struct buf *out, json_t *j)
{
	json_t *sub = json_object_get(j, "subtype"), *turns = json_object_get(j, "num_turns");
	json_t *ms = json_object_get(j, "duration_ms"),
	       *cost = json_object_get(j, "total_cost_usd");

	buf_addstr(out, "= ");
	if (json_is_string(sub))
		add_cut(out, json_string_value(sub), json_string_length(sub), 40);
	else
		buf_addstr(out, "the end");
	if (json_is_true(json_object_get(j, "is_error")))
		buf_addstr(out, " (an error)");
	if (json_is_integer(turns))
		buf_addf(out, ", %lld turn%s", (long long)json_integer_value(turns),
		         json_integer_value(turns) == 1 ? "" : "s");
	if (json_is_number(ms) && json_number_value(ms) >= 0 && json_number_value(ms) < 1e12)
		buf_addf(out, ", %.1f s", json_number_value(ms) / 1000);
	if (json_is_number(cost) && json_number_value(cost) >= 0 && json_number_value(cost) < 1e9)
		buf_addf(out, ", %.2f USD", json_number_value(cost));
	buf_addch(out, '\n');
}

void transcript_render_end(const char *line, size_t n, struct buf *out)
{
	json_t *j;

	if (n > TRANSCRIPT_LINE_MAX)
		return;
	json_vm_loadb(line, n, 0, JSON_VM_VALUES_MAX, &j, NULL);
	if (json_is_string(json_object_get(j, "type")) &&
	    !strcmp(json_string_value(json_object_get(j, "type")), "result"))
		add_result(out, j);
	json_decref(j);
}

void transcript_render(const char *line, size_t n, struct buf *out)
{
	json_t *j, *type, *content, *item;
	const char *t;
	size_t i;

	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	if (!n)
		return;
	if (n > TRANSCRIPT_LINE_MAX) {
		buf_addf(out, "[a line of %zu bytes, not shown]\n", n);
		return;
	}
	if (json_vm_loadb(line, n, 0, JSON_VM_VALUES_MAX, &j, NULL) == -E2BIG) {
		buf_addf(out, "[a line of %zu bytes of over %d JSON values, not shown]\n", n,
		         JSON_VM_VALUES_MAX);
		return;
	}
	type = json_object_get(j, "type");
	if (!j || !json_is_string(type)) {
		buf_addf(out, "[a line that is not a transcript entry, %zu bytes]\n", n);
		json_decref(j);
		return;
	}
	t = json_string_value(type);
	content = json_object_get(json_object_get(j, "message"), "content");
	if (!strcmp(t, "assistant") || !strcmp(t, "user")) {
		if (json_is_string(content) && !strcmp(t, "assistant"))
			add_text(out, content);
		json_array_foreach(content, i, item)
		{
			json_t *it = json_object_get(item, "type");
			const char *k = json_string_value(it);

			if (!k)
				continue;
			if (!strcmp(k, "text") && !strcmp(t, "assistant")) {
				add_text(out, json_object_get(item, "text"));
			} else if (!strcmp(k, "tool_use")) {
				buf_addstr(out, "> ");
				add_tool_call(out, item);
			} else if (!strcmp(k, "tool_result")) {
				add_tool_result(out, item);
			}
		}
	} else if (!strcmp(t, "result")) {
		add_result(out, j);
	}
	json_decref(j);
}
