#include "base/session_file.h"

#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/json_get.h"
#include "base/utf8.h"
#include "base/banned.h"

/* Claude Code's own limit on a project folder's name before it adds a hash. */
#define PROJECT_DIR_MAX 200

int session_id_valid(const char *s)
{
	for (size_t i = 0; i < SESSION_ID_LEN; i++) {
		char c = s[i];

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return 0;
		} else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
			return 0;
		}
	}
	return s[SESSION_ID_LEN] == '\0';
}

int session_project_dir(struct buf *out, const char *path)
{
	size_t n = strlen(path);

	if (n > PROJECT_DIR_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < n; i++) {
		char c = path[i];

		buf_addch(out,
		          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		              ? c
		              : '-');
	}
	return 0;
}

int session_file_check(const char *data, size_t len, char id[SESSION_ID_LEN + 1], struct buf *err)
{
	size_t line = 0;

	id[0] = '\0';
	if (len > SESSION_FILE_MAX) {
		buf_addf(err, "it is over %llu MiB", SESSION_FILE_MAX >> 20);
		return -EFBIG;
	}
	if (!len) {
		buf_addstr(err, "it is empty");
		return -EINVAL;
	}
	if (!utf8_valid(data, len, NULL)) {
		buf_addstr(err, "it is not UTF-8");
		return -EINVAL;
	}
	if (data[len - 1] != '\n') {
		buf_addstr(err, "its last line has no newline");
		return -EINVAL;
	}
	for (const char *p = data, *end = data + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)(nl - p);
		json_t *j, *sid;

		line++;
		if (n > SESSION_LINE_MAX) {
			buf_addf(err, "line %zu is over %d MiB", line, SESSION_LINE_MAX >> 20);
			return -EINVAL;
		}
		if (json_vm_loadb(p, n, JSON_REJECT_DUPLICATES, SESSION_LINE_VALUES_MAX, &j,
		                  NULL) == -E2BIG) {
			buf_addf(err, "line %zu has over %d JSON values", line,
			         SESSION_LINE_VALUES_MAX);
			return -EINVAL;
		}
		if (!json_is_object(j)) {
			json_decref(j);
			buf_addf(err, "line %zu is not a JSON object", line);
			return -EINVAL;
		}
		sid = json_object_get(j, "sessionId");
		if (sid) {
			const char *s = json_string_value(sid);

			if (!s || !session_id_valid(s)) {
				json_decref(j);
				buf_addf(err, "line %zu has a malformed \"sessionId\"", line);
				id[0] = '\0';
				return -EINVAL;
			}
			memcpy(id, s, SESSION_ID_LEN + 1);
		}
		json_decref(j);
		p = nl + 1;
	}
	if (!id[0]) {
		buf_addstr(err, "no line names its session");
		return -EINVAL;
	}
	return 0;
}
