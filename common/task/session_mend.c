#include "task/session_mend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/json_get.h"
#include "base/session_file.h"
#include "base/banned.h"

/* Claude Code's timestamps: "2026-12-01T21:28:23.010Z". */
#define TIMESTAMP_MAX 40

/* What the session has: its entries' uuids, the end of its main chain, its latest time. */
struct have {
	json_t *uuids; /* an object used as a set */
	char tip[SESSION_ID_LEN + 1];
	char ts[TIMESTAMP_MAX + 1];
};

static const char *timestamp_of(json_t *j)
{
	const char *s = json_string_value(json_object_get(j, "timestamp"));
	size_t n = s ? strlen(s) : 0;

	return n && n <= TIMESTAMP_MAX && strspn(s, "0123456789-T:.Z+") == n ? s : NULL;
}

static const char *uuid_of(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));

	return s && session_id_valid(s) ? s : NULL;
}

static void read_session(const char *data, size_t len, struct have *h)
{
	for (const char *p = data, *end = data + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *j;
		const char *u, *ts;

		/* a line over the bound session_file_check() refuses is skipped, unparsed */
		json_vm_loadb(p, n, 0, SESSION_LINE_VALUES_MAX, &j, NULL);
		u = uuid_of(j, "uuid");
		ts = timestamp_of(j);
		if (u) {
			json_object_set_new(h->uuids, u, json_true());
			if (!json_is_true(json_object_get(j, "isSidechain")))
				memcpy(h->tip, u, SESSION_ID_LEN + 1);
		}
		if (ts && strcmp(ts, h->ts) > 0)
			memcpy(h->ts, ts, strlen(ts) + 1);
		json_decref(j);
		p += n + 1;
	}
}

/* j is a message of the main chain: "user" or "assistant", no parent tool call. */
static int is_message(json_t *j)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	json_t *parent = json_object_get(j, "parent_tool_use_id");

	return type && (!strcmp(type, "user") || !strcmp(type, "assistant")) &&
	       (!parent || json_is_null(parent)) && uuid_of(j, "uuid") &&
	       uuid_of(j, "session_id") && json_is_object(json_object_get(j, "message"));
}

/*
 * The transcript's lines from off on: each parsed one in turn to fn, which
 * returns 0 to go on.  A line that is not JSON, or is over SESSION_LINE_MAX
 * bytes or SESSION_LINE_VALUES_MAX values (not parsed), goes to fn as NULL.
 * Returns what fn returned last.
 */
static int each_line(const char *t, size_t tlen, size_t off,
                     int (*fn)(void *ctx, json_t *j, size_t next), void *ctx)
{
	int r = 0;

	while (off < tlen && !r) {
		const char *p = t + off, *nl = memchr(p, '\n', tlen - off);
		size_t n = nl ? (size_t)(nl - p) : tlen - off;
		json_t *j = NULL;

		off += n + 1;
		if (!n)
			continue;
		if (n <= SESSION_LINE_MAX)
			json_vm_loadb(p, n, 0, SESSION_LINE_VALUES_MAX, &j, NULL);
		r = fn(ctx, json_is_object(j) ? j : NULL, off);
		json_decref(j);
	}
	return r;
}

struct mend {
	struct have h;
	struct buf *session;
	size_t start; /* where the messages the session lacks begin */
	int seen;     /* the session has one of the transcript's messages */
	int added;
	int err;
};

static int find_start(void *ctx, json_t *j, size_t next)
{
	struct mend *m = ctx;

	if (j && is_message(j) && json_object_get(m->h.uuids, uuid_of(j, "uuid"))) {
		m->start = next;
		m->seen = 1;
	}
	return 0;
}

static int append(void *ctx, json_t *j, size_t next)
{
	struct mend *m = ctx;
	const char *u, *ts;
	json_t *e;
	char *line;
	size_t n;

	(void)next;
	if (!j)
		return 1;
	if (!is_message(j) || json_object_get(m->h.uuids, (u = uuid_of(j, "uuid"))))
		return 0;
	ts = timestamp_of(j);
	if (!ts || strcmp(ts, m->h.ts) < 0)
		ts = m->h.ts;
	e = json_pack("{s:s, s:b, s:O, s:O, s:s, s:s, s:O}", "parentUuid", m->h.tip, "isSidechain",
	              0, "type", json_object_get(j, "type"), "message",
	              json_object_get(j, "message"), "uuid", u, "timestamp", ts, "sessionId",
	              json_object_get(j, "session_id"));
	line = e ? json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(e);
	if (!line)
		return 1;
	n = strlen(line);
	if (n > SESSION_LINE_MAX) {
		free(line);
		return 1;
	}
	if (m->session->len + n + 1 > SESSION_FILE_MAX) {
		free(line);
		m->err = -EFBIG;
		return 1;
	}
	buf_add(m->session, line, n);
	buf_addch(m->session, '\n');
	free(line);
	json_object_set_new(m->h.uuids, u, json_true());
	memmove(m->h.ts, ts, strlen(ts) + 1);
	memcpy(m->h.tip, u, SESSION_ID_LEN + 1);
	m->added++;
	return 0;
}

int session_mend(struct buf *session, const char *transcript, size_t tlen, int whole)
{
	struct mend m = {.session = session};
	size_t len = session->len;

	m.h.uuids = json_object();
	if (!m.h.uuids)
		return -ENOMEM;
	read_session(session->buf, session->len, &m.h);
	if (!m.h.tip[0] || !m.h.ts[0])
		goto out;
	each_line(transcript, tlen, 0, find_start, &m);
	if (!m.seen && !whole)
		goto out;
	each_line(transcript, tlen, m.start, append, &m);
	if (m.err) {
		buf_setlen(session, len);
		m.added = m.err;
	}
out:
	json_decref(m.h.uuids);
	return m.added;
}
