#include "config/usage.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/json_get.h"
#include "base/paths.h"
#include "base/banned.h"

const char *const usage_kind_names[USAGE_KINDS] = {
    "input", "output", "cache_write_5m", "cache_write_1h", "cache_read",
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

int usage_tokens_any(const struct usage_tokens *t)
{
	for (int k = 0; k < USAGE_KINDS; k++)
		if (t->n[k])
			return 1;
	return t->searches != 0;
}

void usage_tokens_add(struct usage_tokens *t, const struct usage_tokens *d)
{
	for (int k = 0; k < USAGE_KINDS; k++)
		t->n[k] = sat_add(t->n[k], d->n[k]);
	t->searches = sat_add(t->searches, d->searches);
}

/* ---- one answer ---- */

void usage_stream_init(struct usage_stream *s, enum usage_mode mode)
{
	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->line = (struct buf)BUF_INIT;
	s->data = (struct buf)BUF_INIT;
}

void usage_stream_release(struct usage_stream *s)
{
	buf_release(&s->line);
	buf_release(&s->data);
	usage_stream_init(s, USAGE_OFF);
}

/*
 * A token count, at most USAGE_TOKENS_MAX; -1 for none (absent or null).
 * Anything else that is not a count (negative, fractional, too large, not
 * a number) is the largest count: a hostile answer cannot make itself free.
 * Integers are read as doubles (JSON_DECODE_INT_AS_REAL), exact to 2^53.
 */
static int64_t tokens_of(json_t *v)
{
	double d;

	if (!v || json_is_null(v))
		return -1;
	d = json_is_real(v) ? json_real_value(v) : -1;
	if (!(d >= 0) || d >= (double)USAGE_TOKENS_MAX || d != (double)(int64_t)d)
		return (int64_t)USAGE_TOKENS_MAX;
	return (int64_t)d;
}

/* A count v the answer reports: what it grew by past *seen goes to *delta. */
static void see_count(json_t *v, uint64_t *seen, uint64_t *delta)
{
	int64_t n = tokens_of(v);

	if (n < 0 || (uint64_t)n <= *seen)
		return;
	*delta = sat_add(*delta, (uint64_t)n - *seen);
	*seen = (uint64_t)n;
}

/* A model name m an answer reports, to out when it is one (printable, no spaces): 1, else 0. */
static int take_model(json_t *m, char *out)
{
	const char *name = json_string_value(m);
	size_t n = name ? strlen(name) : 0;

	if (!n || n > USAGE_MODEL_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] <= 0x20 || (unsigned char)name[i] >= 0x7f)
			return 0;
	memcpy(out, name, n + 1);
	return 1;
}

static void see_model(struct usage_stream *s, json_t *m)
{
	if (!s->model[0])
		take_model(m, s->model);
}

/* A usage object u: what its counts grew by past *seen goes to *delta. */
static void see_usage(json_t *u, struct usage_tokens *seen, struct usage_tokens *delta)
{
	json_t *cc = json_object_get(u, "cache_creation");

	see_count(json_object_get(u, "input_tokens"), &seen->n[USAGE_INPUT],
	          &delta->n[USAGE_INPUT]);
	see_count(json_object_get(u, "output_tokens"), &seen->n[USAGE_OUTPUT],
	          &delta->n[USAGE_OUTPUT]);
	see_count(json_object_get(u, "cache_read_input_tokens"), &seen->n[USAGE_CACHE_READ],
	          &delta->n[USAGE_CACHE_READ]);
	see_count(json_object_get(json_object_get(u, "server_tool_use"), "web_search_requests"),
	          &seen->searches, &delta->searches);
	if (json_is_object(cc)) {
		see_count(json_object_get(cc, "ephemeral_5m_input_tokens"),
		          &seen->n[USAGE_CACHE_5M], &delta->n[USAGE_CACHE_5M]);
		see_count(json_object_get(cc, "ephemeral_1h_input_tokens"),
		          &seen->n[USAGE_CACHE_1H], &delta->n[USAGE_CACHE_1H]);
	} else {
		see_count(json_object_get(u, "cache_creation_input_tokens"),
		          &seen->n[USAGE_CACHE_5M], &delta->n[USAGE_CACHE_5M]);
	}
}

/* A sum t of this event's counts: what it grew by past *seen goes to *delta. */
static void see_sum(struct usage_tokens *t, struct usage_tokens *seen, struct usage_tokens *delta)
{
	for (int k = 0; k < USAGE_KINDS; k++) {
		if (t->n[k] > USAGE_TOKENS_MAX)
			t->n[k] = USAGE_TOKENS_MAX;
		if (t->n[k] > seen->n[k]) {
			delta->n[k] = sat_add(delta->n[k], t->n[k] - seen->n[k]);
			seen->n[k] = t->n[k];
		}
	}
	if (t->searches > seen->searches) {
		delta->searches = sat_add(delta->searches, t->searches - seen->searches);
		seen->searches = t->searches;
	}
}

/*
 * A usage's "iterations" (USAGE_ITERATIONS): the model's own ("message"),
 * added up, count for the answer where they are more than the usage's top
 * level says (it may say less); each other grows its slot; one without a
 * model is the answer's when it is a compaction, else counted at the top
 * price (USAGE_MODEL_OTHER), as are the ones past the slots, added up.
 */
static void see_iterations(struct usage_stream *s, json_t *its, struct usage_tokens *delta)
{
	struct usage_tokens own = {{0}}, rest = {{0}};
	struct usage_iteration *last = &s->it[USAGE_ITERATIONS - 1];
	size_t i;
	json_t *it;

	json_array_foreach(its, i, it)
	{
		const char *type = json_string_value(json_object_get(it, "type"));
		struct usage_iteration *x = &s->it[i < USAGE_ITERATIONS ? i : USAGE_ITERATIONS - 1];
		int message = type && !strcmp(type, "message");

		if (!json_is_object(it))
			continue;
		/* the two sums: each iteration's counts added whole */
		if (message || i >= USAGE_ITERATIONS - 1) {
			struct usage_tokens none = {{0}};

			see_usage(it, &none, message ? &own : &rest);
			continue;
		}
		if (!x->model[0] && !take_model(json_object_get(it, "model"), x->model) &&
		    !(type && !strcmp(type, "compaction")))
			snprintf(x->model, sizeof(x->model), "%s", USAGE_MODEL_OTHER);
		see_usage(it, &x->seen, &x->delta);
	}
	/* Each sum is one count of this event, as a slot's: its highest counts once. */
	if (usage_tokens_any(&rest)) {
		snprintf(last->model, sizeof(last->model), "%s", USAGE_MODEL_OTHER);
		see_sum(&rest, &last->seen, &last->delta);
	}
	see_sum(&own, &s->seen, delta);
}

/* 1 when v is absent, null, or the string plain. */
static int is_absent_or(json_t *v, const char *plain)
{
	return !v || json_is_null(v) || (json_is_string(v) && !strcmp(json_string_value(v), plain));
}

/*
 * One event or body: its usage is "usage" at the top (a message, a
 * message_delta) or in "message" (message_start); so is the model.
 */
static void read_json(struct usage_stream *s, const char *p, size_t n, struct usage_tokens *delta)
{
	json_error_t e;
	json_t *root = json_loadb(p, n, JSON_DECODE_INT_AS_REAL, &e), *u, *msg;
	const char *type;

	if (!json_is_object(root)) {
		s->skipped++;
		json_decref(root);
		return;
	}
	msg = json_object_get(root, "message");
	u = json_object_get(root, "usage");
	if (!json_is_object(u) && json_is_object(msg))
		u = json_object_get(msg, "usage");
	see_model(s, json_object_get(root, "model"));
	if (json_is_object(msg))
		see_model(s, json_object_get(msg, "model"));
	/* The final usage: a message_delta's, or a whole body's. */
	type = json_string_value(json_object_get(root, "type"));
	if (json_is_object(u) &&
	    (s->mode == USAGE_JSON || (type && !strcmp(type, "message_delta"))))
		s->final = 1;
	if (json_is_object(u)) {
		see_usage(u, &s->seen, delta);
		see_iterations(s, json_object_get(u, "iterations"), delta);
		s->geo |= !is_absent_or(json_object_get(u, "inference_geo"), "global");
		s->tier |= !is_absent_or(json_object_get(u, "service_tier"), "standard");
	}
	json_decref(root);
}

unsigned usage_stream_flags(const struct usage_stream *s)
{
	return (s->geo ? USAGE_PRICE_GEO : 0) | (s->tier ? USAGE_PRICE_TOP : 0);
}

/* An SSE line ended: a data line joins the event, an empty line ends it. */
static void sse_line(struct usage_stream *s, struct usage_tokens *delta)
{
	const char *l = s->line.buf;
	size_t n = s->line.len;

	if (s->line_over) {
		/* A line past the cap: if it was data, the event cannot be read. */
		s->data_over = 1;
	} else if (!n) {
		if (s->data_over)
			s->skipped++;
		else if (s->data.len)
			read_json(s, s->data.buf, s->data.len, delta);
		buf_reset(&s->data);
		s->data_over = 0;
	} else if (n >= 5 && !memcmp(l, "data:", 5) && !s->data_over) {
		l += 5;
		n -= 5;
		if (n && *l == ' ') {
			l++;
			n--;
		}
		if (s->data.len + n + 1 > USAGE_EVENT_MAX) {
			s->data_over = 1;
			buf_release(&s->data);
		} else {
			if (s->data.len)
				buf_addch(&s->data, '\n');
			buf_add(&s->data, l, n);
		}
	}
	buf_reset(&s->line);
	s->line_over = 0;
}

void usage_stream_feed(struct usage_stream *s, const char *p, size_t n, struct usage_tokens *delta)
{
	if (s->mode == USAGE_JSON) {
		if (s->line_over || s->line.len + n > USAGE_BODY_MAX) {
			s->line_over = 1;
			buf_release(&s->line);
			return;
		}
		buf_add(&s->line, p, n);
		return;
	}
	if (s->mode != USAGE_SSE)
		return;
	while (n) {
		const char *end = p;
		size_t take;

		while (end < p + n && *end != '\n' && *end != '\r')
			end++;
		take = (size_t)(end - p);
		if (take && !s->line_over) {
			if (s->line.len + take > USAGE_EVENT_MAX) {
				s->line_over = 1;
				buf_release(&s->line);
			} else {
				buf_add(&s->line, p, take);
			}
		}
		if (take)
			s->after_cr = 0;
		p += take;
		n -= take;
		if (!n)
			break;
		/* A line end: CR, LF or CR LF. */
		if (*p == '\n' && s->after_cr) {
			s->after_cr = 0;
		} else {
			s->after_cr = *p == '\r';
			sse_line(s, delta);
		}
		p++;
		n--;
	}
}

void usage_stream_end(struct usage_stream *s, struct usage_tokens *delta)
{
	if (s->mode == USAGE_JSON) {
		if (s->line_over)
			s->skipped++;
		else if (s->line.len)
			read_json(s, s->line.buf, s->line.len, delta);
	}
	buf_release(&s->line);
	buf_release(&s->data);
	s->line_over = s->data_over = 0;
}

/* ---- a request's body ---- */

/* Where the scanner is in the top-level object (depth 1). */
enum { RQ_KEY_NEXT, RQ_KEY, RQ_COLON, RQ_VALUE, RQ_STRVAL, RQ_SCALAR, RQ_AFTER };
enum { RQ_OTHER, RQ_MAX_TOKENS, RQ_MODEL, RQ_TOOLS, RQ_SPEED, RQ_GEO, RQ_TIER, RQ_CTX };

/*
 * A key anywhere in the body that the API may fetch or add input for, or run
 * another inference for ("context_management": a compaction, reported in the
 * answer's usage.iterations).  A top-level "context_management" is read
 * instead (rq_ctx_edit_ok()): Claude Code sends one in every request.
 */
static const char *const rq_unbounding[] = {"source", "mcp_servers", "container",
                                            "context_management"};

static int rq_key_unbounds(const char *k)
{
	for (size_t i = 0; i < ARRAY_SIZE(rq_unbounding); i++)
		if (!strcmp(k, rq_unbounding[i]))
			return 1;
	return 0;
}

/*
 * The key k as a JSON reader that matches keys without case may read it
 * (Go's encoding/json does, with Unicode's simple folding; its v2 ignores
 * '_' and '-' as well): ASCII letters in lower case, U+017F (long s) as s
 * and U+212A (Kelvin sign) as k, the two letters past ASCII that fold to
 * one, without '_' and '-'.  Into out, of n bytes.
 */
static void key_fold(const char *k, char *out, size_t n)
{
	size_t o = 0;

	while (*k && o + 1 < n) {
		if (!strncmp(k, "\xc5\xbf", 2)) {
			out[o++] = 's';
			k += 2;
		} else if (!strncmp(k, "\xe2\x84\xaa", 3)) {
			out[o++] = 'k';
			k += 3;
		} else {
			if (*k != '_' && *k != '-')
				out[o++] = (char)(*k >= 'A' && *k <= 'Z' ? *k + 32 : *k);
			k++;
		}
	}
	out[o] = '\0';
}

/* 1 when the key being read (r->lk, loosely) may be read as key (key_fold()). */
static int rq_loose_is(const struct usage_req *r, const char *key)
{
	char a[sizeof(r->lk)], b[sizeof(r->lk)];

	if (r->lk_over)
		return 0;
	key_fold(r->lk, a, sizeof(a));
	key_fold(key, b, sizeof(b));
	return !strcmp(a, b);
}

/* A byte of the key being read, kept loosely (no '_' or '-': key_fold() reads the rest). */
static void rq_loose_byte(struct usage_req *r, char ch)
{
	if (ch == '_' || ch == '-')
		return;
	if (r->lk_len == sizeof(r->lk) - 1)
		r->lk_over = 1; /* longer than any key read (usage.h) */
	else
		r->lk[r->lk_len++] = ch;
	r->lk[r->lk_len] = '\0';
}

static void rq_loose_start(struct usage_req *r)
{
	r->lk_len = 0;
	r->lk_over = 0;
	r->lk[0] = '\0';
}

/* The top-level keys the scanner reads, each with the field it reads into. */
static const struct {
	const char *key;
	int field;
} rq_fields[] = {
    {"max_tokens", RQ_MAX_TOKENS},
    {"model", RQ_MODEL},
    {"tools", RQ_TOOLS},
    {"speed", RQ_SPEED},
    {"inference_geo", RQ_GEO},
    {"service_tier", RQ_TIER},
    {"context_management", RQ_CTX},
};

/* The field the top-level key k is read into, or RQ_OTHER. */
static int rq_field_of(const char *k)
{
	for (size_t i = 0; i < ARRAY_SIZE(rq_fields); i++)
		if (!strcmp(k, rq_fields[i].key))
			return rq_fields[i].field;
	return RQ_OTHER;
}

/* 1 when the top-level key k is one the scanner reads or that unbounds the prompt. */
static int rq_key_known(const char *k)
{
	return rq_field_of(k) != RQ_OTHER || rq_key_unbounds(k);
}

/* 1 when the key being read may be read as one that unbounds the prompt (rq_key_unbounds()). */
static int rq_loose_unbounds(const struct usage_req *r)
{
	for (size_t i = 0; i < ARRAY_SIZE(rq_unbounding); i++)
		if (rq_loose_is(r, rq_unbounding[i]))
			return 1;
	return 0;
}

/* 1 when the top-level key being read may be read as one rq_key_known() knows. */
static int rq_loose_known(const struct usage_req *r)
{
	for (size_t i = 0; i < ARRAY_SIZE(rq_fields); i++)
		if (rq_loose_is(r, rq_fields[i].key))
			return 1;
	return rq_loose_unbounds(r);
}

void usage_req_init(struct usage_req *r)
{
	memset(r, 0, sizeof(*r));
}

static void rq_tok(struct usage_req *r, char ch)
{
	if (r->tok_len == sizeof(r->tok) - 1)
		r->tok_over = 1;
	else
		r->tok[r->tok_len++] = ch;
}

static void rq_tok_start(struct usage_req *r)
{
	r->tok_len = 0;
	r->tok_over = r->tok_esc = 0;
}

static void rq_key_done(struct usage_req *r)
{
	r->tok[r->tok_len] = '\0';
	r->field = RQ_OTHER;
	if (r->tok_esc || (!(!r->tok_over && rq_key_known(r->tok)) && rq_loose_known(r))) {
		/* It may spell any of them (an escape), or be read as one (a case, a '_'). */
		r->mt_state = r->model_state = -1;
		r->unbounded = r->fast = r->geo = r->tier_any = 1;
	} else if (r->tok_over) {
		r->mt_state = r->model_state = -1;
	} else if ((r->field = rq_field_of(r->tok)) != RQ_OTHER) {
		/* read as its value comes */
	} else if (rq_key_unbounds(r->tok)) {
		r->unbounded = 1;
	}
	r->st = RQ_COLON;
}

/*
 * Whether a top-level context_management edit's "type" value v (whole) only
 * clears what the prompt holds, which runs no inference: "clear_thinking_" or
 * "clear_tool_uses_" and a date of digits.  Every other type (a compaction:
 * another inference of the whole prompt) unbounds it (docs/budget.md).
 */
static int rq_ctx_edit_ok(const char *v)
{
	static const char *const clearing[] = {"clear_thinking_", "clear_tool_uses_"};

	for (size_t i = 0; i < ARRAY_SIZE(clearing); i++) {
		size_t n = strlen(clearing[i]);

		if (!strncmp(v, clearing[i], n) && v[n] &&
		    strspn(v + n, "0123456789") == strlen(v + n))
			return 1;
	}
	return 0;
}

/* A key below the top level ended (at most sizeof(dk) - 1 bytes of it kept). */
static void rq_deep_key_done(struct usage_req *r)
{
	int whole = r->dk_len < sizeof(r->dk) - 1;

	r->dk[r->dk_len] = '\0';
	r->dk_on = 0;
	if (r->dk_esc)
		r->unbounded = 1;
	else if (rq_loose_unbounds(r))
		r->unbounded = 1;
	else if (r->sect == RQ_TOOLS && r->depth == 3 && rq_loose_is(r, "type"))
		r->unbounded = 1; /* tools[i].type: a server tool (or "custom", the same) */
	else if (r->sect == RQ_CTX && r->depth == 2 && (!whole || strcmp(r->dk, "edits")))
		r->unbounded = 1; /* context_management holds only its edits */
	else if (r->sect == RQ_CTX && r->depth == 4 && (!whole || rq_loose_is(r, "type")))
		r->dv_want = 1; /* edits[i].type (or a key it may be read as): its value next */
}

/* A context_management edit's "type" value ended (a string, or not: is_str). */
static void rq_deep_value_done(struct usage_req *r, int is_str)
{
	r->dv[r->dv_len] = '\0';
	if (!is_str || r->dv_esc || r->dv_len >= sizeof(r->dv) - 1 || !rq_ctx_edit_ok(r->dv))
		r->unbounded = 1;
	r->dv_want = r->dv_on = 0;
}

/* A value at depth 1 ended: a string (is_str), a scalar, or a container (tok empty). */
static void rq_value_done(struct usage_req *r, int is_str)
{
	int ok = !r->tok_esc && !r->tok_over && r->tok_len;
	uint64_t v = 0;

	r->tok[r->tok_len] = '\0';
	if (r->field == RQ_CTX && (is_str || r->tok_len))
		r->unbounded = 1; /* context_management not an object: not read */
	if (r->field == RQ_MAX_TOKENS) {
		ok = ok && !is_str && r->tok_len <= 12;
		for (size_t i = 0; ok && i < r->tok_len; i++)
			ok = r->tok[i] >= '0' && r->tok[i] <= '9';
		for (size_t i = 0; ok && i < r->tok_len; i++)
			v = v * 10 + (uint64_t)(r->tok[i] - '0');
		if (v > USAGE_TOKENS_MAX)
			v = USAGE_TOKENS_MAX;
		if (!ok)
			r->mt_state = -1;
		else if (r->mt_state >= 0) {
			if (!r->mt_state || v > r->max_tokens)
				r->max_tokens = v;
			r->mt_state = 1;
		}
	} else if (r->field == RQ_MODEL) {
		ok = ok && is_str;
		for (size_t i = 0; ok && i < r->tok_len; i++)
			ok = (unsigned char)r->tok[i] > 0x20 && (unsigned char)r->tok[i] < 0x7f;
		if (!ok || (r->model_state == 1 && strcmp(r->model, r->tok)))
			r->model_state = -1;
		else if (!r->model_state) {
			memcpy(r->model, r->tok, r->tok_len + 1);
			r->model_state = 1;
		}
	} else if (r->field == RQ_SPEED) {
		if (!ok || !is_str || strcmp(r->tok, "standard"))
			r->fast = 1;
	} else if (r->field == RQ_GEO) {
		if (!ok || !is_str || strcmp(r->tok, "global"))
			r->geo = 1;
	} else if (r->field == RQ_TIER) {
		if (!ok || !is_str || strcmp(r->tok, "standard_only"))
			r->tier_any = 1;
		else
			r->tier_std = 1;
	}
	r->st = RQ_AFTER;
}

static void rq_string_byte(struct usage_req *r, char ch)
{
	int capture = r->depth == 1 && (r->st == RQ_KEY || r->st == RQ_STRVAL);

	if (r->esc) {
		r->esc = 0;
	} else if (ch == '\\') {
		r->esc = r->tok_esc = 1;
		if (r->dk_on)
			r->dk_esc = 1;
		if (r->dv_on)
			r->dv_esc = 1;
	} else if (ch == '"') {
		r->in_str = 0;
		if (r->dk_on)
			rq_deep_key_done(r);
		else if (r->dv_on)
			rq_deep_value_done(r, 1);
		else if (capture && r->st == RQ_KEY)
			rq_key_done(r);
		else if (capture)
			rq_value_done(r, 1);
		return;
	}
	if ((capture && r->st == RQ_KEY) || r->dk_on)
		rq_loose_byte(r, ch);
	if (capture)
		rq_tok(r, ch);
	else if (r->dk_on && r->dk_len < sizeof(r->dk) - 1)
		r->dk[r->dk_len++] = ch;
	else if (r->dv_on && r->dv_len < sizeof(r->dv) - 1)
		r->dv[r->dv_len++] = ch;
}

void usage_req_feed(struct usage_req *r, const char *p, size_t n)
{
	r->bytes += n;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		int top = r->depth == 1;

		/*
		 * Not UTF-8 JSON text (docs/budget.md): a control byte JSON has no
		 * place for (UTF-16 and UTF-32 have NULs), or anything but one
		 * object at the top (a byte order mark, a second value).
		 */
		if (((unsigned char)ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') ||
		    (!r->depth && !r->in_str && ch != ' ' && ch != '\t' && ch != '\n' &&
		     ch != '\r' && (ch != '{' || r->top_seen)))
			r->top_bad = 1;
		if (!r->depth && ch == '{')
			r->top_seen = 1;
		if (r->in_str) {
			rq_string_byte(r, ch);
			continue;
		}
		switch (ch) {
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			if (top && r->st == RQ_SCALAR)
				rq_value_done(r, 0);
			break;
		case '"':
			r->in_str = 1;
			if (top && (r->st == RQ_KEY_NEXT || r->st == RQ_VALUE)) {
				r->st = r->st == RQ_KEY_NEXT ? RQ_KEY : RQ_STRVAL;
				rq_tok_start(r);
				rq_loose_start(r);
			} else if (r->depth > 1 && r->key_next) {
				r->dk_on = 1;
				r->dk_len = 0;
				r->dk_esc = 0;
				rq_loose_start(r);
			} else if (r->dv_want) {
				r->dv_on = 1;
				r->dv_len = 0;
				r->dv_esc = 0;
			} else if (r->sect == RQ_CTX && r->depth == 3) {
				r->unbounded = 1; /* an edit that is not an object */
			}
			r->key_next = 0;
			break;
		case '{':
		case '[':
			if (r->dv_want)
				rq_deep_value_done(r, 0);
			if (top && r->st == RQ_VALUE) {
				/* the top-level field whose value this is, while it is open */
				r->sect = r->field;
				rq_tok_start(r);
				rq_value_done(r, 0); /* a container: not a count, not a name */
			}
			if (!r->depth)
				r->st = RQ_KEY_NEXT;
			r->depth++;
			if (r->depth > USAGE_REQ_DEPTH)
				r->unbounded = 1;
			else
				r->is_obj[r->depth] = ch == '{';
			/* context_management: {"edits": [{...}, ...]}, nothing else read */
			if (r->sect == RQ_CTX && r->depth <= 4 && (ch == '{') != (r->depth != 3))
				r->unbounded = 1;
			r->key_next = ch == '{';
			break;
		case '}':
		case ']':
			if (top && r->st == RQ_SCALAR)
				rq_value_done(r, 0);
			if (r->depth)
				r->depth--;
			if (r->depth <= 1)
				r->sect = RQ_OTHER;
			r->key_next = 0;
			break;
		case ',':
			if (top && r->st == RQ_SCALAR)
				rq_value_done(r, 0);
			if (top)
				r->st = RQ_KEY_NEXT;
			r->key_next =
			    r->depth > 0 && r->depth <= USAGE_REQ_DEPTH && r->is_obj[r->depth];
			break;
		case ':':
			if (top && r->st == RQ_COLON)
				r->st = RQ_VALUE;
			r->key_next = 0;
			break;
		default:
			if (r->dv_want)
				rq_deep_value_done(r, 0);
			else if (r->sect == RQ_CTX && r->depth == 3)
				r->unbounded = 1; /* an edit that is not an object */
			if (top && r->st == RQ_VALUE) {
				r->st = RQ_SCALAR;
				rq_tok_start(r);
			}
			if (top && r->st == RQ_SCALAR)
				rq_tok(r, ch);
			break;
		}
	}
}

uint64_t usage_req_max_tokens(const struct usage_req *r)
{
	return r->mt_state == 1 && !r->top_bad ? r->max_tokens : USAGE_MAX_TOKENS_UNREAD;
}

const char *usage_req_model(const struct usage_req *r)
{
	return r->model_state == 1 && !r->top_bad ? r->model : NULL;
}

int usage_req_unbounded(const struct usage_req *r)
{
	return r->unbounded || r->top_bad;
}

int usage_req_fast(const struct usage_req *r)
{
	return r->fast || r->top_bad;
}

int usage_req_geo(const struct usage_req *r)
{
	return r->geo || r->top_bad;
}

int usage_req_standard_only(const struct usage_req *r)
{
	return r->tier_std && !r->tier_any && !r->top_bad;
}

/* ---- prices ---- */

/*
 * A decimal number of at most max_whole with at most decimals digits after
 * the point, as an integer in units of 10^-decimals.  0, or -EINVAL.
 */
static int parse_fixed(const char *s, size_t n, int decimals, uint64_t max_whole, uint64_t *out)
{
	uint64_t whole = 0, frac = 0;
	size_t i = 0, nd = 0;
	int fd = 0;

	while (i < n && s[i] >= '0' && s[i] <= '9') {
		whole = whole * 10 + (uint64_t)(s[i] - '0');
		if (whole > max_whole)
			return -EINVAL;
		i++;
		nd++;
	}
	if (!nd)
		return -EINVAL;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9') {
			if (++fd > decimals)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(s[i] - '0');
			i++;
		}
		if (!fd)
			return -EINVAL;
	}
	if (i != n)
		return -EINVAL;
	for (; fd < decimals; fd++)
		frac *= 10;
	for (int k = 0; k < decimals; k++)
		whole *= 10;
	*out = whole + frac;
	return 0;
}

int usage_parse_usd(const char *s, uint64_t *nano)
{
	uint64_t micro;

	if (parse_fixed(s, strlen(s), 6, USAGE_CAP_MAX_USD, &micro) < 0 || !micro ||
	    micro > (uint64_t)USAGE_CAP_MAX_USD * 1000000)
		return -EINVAL;
	*nano = micro * 1000;
	return 0;
}

void usage_format_usd(struct buf *out, uint64_t nano)
{
	buf_addf(out, "%llu.%06llu", (unsigned long long)(nano / USAGE_NANO_PER_USD),
	         (unsigned long long)(nano % USAGE_NANO_PER_USD / 1000));
}

const char *usage_capped_name(enum usage_capped c)
{
	static const char *const names[] = {NULL, "task", "day", "user"};

	return (size_t)c < ARRAY_SIZE(names) ? names[c] : NULL;
}

void usage_capped_line(struct buf *out, const struct usage_count *c)
{
	if (!c->capped)
		return;
	buf_addf(out, "ended by budget: the %s cap of ", usage_capped_name(c->capped));
	usage_format_usd(out, c->capped == USAGE_CAPPED_TASK   ? c->cap_task
	                      : c->capped == USAGE_CAPPED_USER ? c->cap_user
	                                                       : c->cap_day);
	buf_addf(out, " USD was reached (%llu request%s refused)", (unsigned long long)c->refused,
	         c->refused == 1 ? "" : "s");
}

static int prices_bad(struct buf *err, int line, const char *why)
{
	buf_addf(err, "line %d: %s", line, why);
	return -EINVAL;
}

/* YYYY-MM-DD, month 01-12, day 01-31. */
static int date_ok(const char *s, size_t n)
{
	static const char shape[] = "dddd-dd-dd";
	int month, day;

	if (n != sizeof(shape) - 1)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (shape[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != '-')
			return 0;
	month = (s[5] - '0') * 10 + (s[6] - '0');
	day = (s[8] - '0') * 10 + (s[9] - '0');
	return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

static int name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '-' || ch == '_';
}

static int word_is(const char *f, size_t n, const char *word)
{
	return n == strlen(word) && !memcmp(f, word, n);
}

/* A line's fields: at most this many (more is an error). */
#define PRICE_FIELDS (6 + 7 * USAGE_BANDS + 4)

/* Five prices from f[0..4] into nano[]; 0 or -EINVAL. */
static int parse_prices(const char *const *f, const size_t *fl, uint64_t *nano)
{
	for (int k = 0; k < USAGE_KINDS; k++)
		if (parse_fixed(f[k], fl[k], 3, 1000000, &nano[k]) < 0)
			return -EINVAL;
	return 0;
}

static const char bad_price[] =
    "a price is a number of USD per million tokens (at most 3 decimals, at most 1000000)";

/* One row, fields f[0..nf), into r.  0, or -EINVAL with the reason in err. */
static int parse_row(const char *const *f, const size_t *fl, int nf, int line,
                     struct usage_price *r, struct buf *err)
{
	int i, geo = 0;

	memset(r, 0, sizeof(*r));
	r->line = line;
	r->geo_milli = USAGE_GEO_MILLI;
	if (nf < 1 + USAGE_KINDS)
		return prices_bad(
		    err, line,
		    "want a model family and 5 prices (then optionally 'above TOKENS' "
		    "and 5 prices, and 'date YYYY-MM-DD')");
	if (fl[0] > USAGE_MODEL_MAX)
		return prices_bad(err, line, "a family is at most 64 characters");
	for (size_t j = 0; j < fl[0]; j++)
		if (!name_char(f[0][j]))
			return prices_bad(err, line,
			                  "a family is a model's name: letters, digits, '.', '-' "
			                  "and '_'");
	memcpy(r->family, f[0], fl[0]);
	if (parse_prices(f + 1, fl + 1, r->band[0].nano) < 0)
		return prices_bad(err, line, bad_price);
	r->nband = 1;
	for (i = 1 + USAGE_KINDS; i < nf;) {
		if (word_is(f[i], fl[i], "date")) {
			if (i + 2 != nf || !date_ok(f[i + 1], fl[i + 1]))
				return prices_bad(
				    err, line, "'date' takes a date YYYY-MM-DD, at the row's end");
			memcpy(r->date, f[i + 1], fl[i + 1]);
			break;
		}
		if (word_is(f[i], fl[i], "geo")) {
			if (geo++ || i + 1 >= nf ||
			    parse_fixed(f[i + 1], fl[i + 1], 3, 1000, &r->geo_milli) < 0 ||
			    r->geo_milli < 1000)
				return prices_bad(
				    err, line,
				    "'geo' takes US-only inference's multiplier of the "
				    "prices (1 to 1000, at most 3 decimals), once");
			i += 2;
			continue;
		}
		if (!word_is(f[i], fl[i], "above"))
			return prices_bad(err, line,
			                  "after the prices: 'above TOKENS' and 5 prices, "
			                  "'geo X' or 'date YYYY-MM-DD'");
		struct usage_band *b = &r->band[r->nband], *below = b - 1;
		uint64_t tokens;

		if (r->nband >= USAGE_BANDS)
			return prices_bad(err, line, "at most 3 'above' bands");
		if (i + 1 + USAGE_KINDS >= nf ||
		    parse_fixed(f[i + 1], fl[i + 1], 0, USAGE_TOKENS_MAX, &tokens) < 0 || !tokens)
			return prices_bad(
			    err, line,
			    "'above' takes a number of prompt tokens (1 to 1000000000) "
			    "and 5 prices");
		if (tokens <= below->above)
			return prices_bad(err, line,
			                  "each 'above' threshold must be higher than the last");
		b->above = tokens;
		if (parse_prices(f + i + 2, fl + i + 2, b->nano) < 0)
			return prices_bad(err, line, bad_price);
		for (int k = 0; k < USAGE_KINDS; k++)
			if (b->nano[k] < below->nano[k])
				return prices_bad(
				    err, line,
				    "the prices above a threshold must be no lower than "
				    "below it, kind by kind");
		r->nband++;
		i += 2 + USAGE_KINDS;
	}
	return 0;
}

/* What follows from t's rows and web-search line: its top row, each row's search price. */
static void update_top(struct usage_prices *t)
{
	memset(&t->top, 0, sizeof(t->top));
	t->top.nband = 1;
	t->top.search_nano = t->search.nano;
	t->top.geo_milli = USAGE_GEO_MILLI;
	for (size_t i = 0; i < t->nr; i++) {
		t->v[i].search_nano = t->search.nano;
		if (t->v[i].geo_milli > t->top.geo_milli)
			t->top.geo_milli = t->v[i].geo_milli;
		for (size_t b = 0; b < t->v[i].nband; b++)
			for (int k = 0; k < USAGE_KINDS; k++)
				if (t->v[i].band[b].nano[k] > t->top.band[0].nano[k])
					t->top.band[0].nano[k] = t->v[i].band[b].nano[k];
	}
}

/* "web-search USD [date YYYY-MM-DD]" (f[0] is "web-search") into s. */
static int parse_search(const char *const *f, const size_t *fl, int nf, int line,
                        struct usage_search *s, struct buf *err)
{
	uint64_t milli;

	if (s->line)
		return prices_bad(err, line, "a second 'web-search' line");
	if (nf < 2 || parse_fixed(f[1], fl[1], 3, 1000000, &milli) < 0)
		return prices_bad(err, line,
		                  "'web-search' takes a price in USD per 1,000 searches (at most 3 "
		                  "decimals, at most 1000000)");
	if (nf > 2 && (nf != 4 || !word_is(f[2], fl[2], "date") || !date_ok(f[3], fl[3])))
		return prices_bad(err, line, "after the web-search price: only 'date YYYY-MM-DD'");
	/* USD per 1,000 searches, in thousandths: nano-USD a search is 1,000 times it */
	s->nano = milli * 1000;
	if (nf == 4)
		memcpy(s->date, f[3], fl[3]);
	s->line = line;
	return 0;
}

static struct usage_price *find_family(const struct usage_prices *t, const char *family)
{
	for (size_t i = 0; i < t->nr; i++)
		if (!strcmp(t->v[i].family, family))
			return &t->v[i];
	return NULL;
}

int usage_prices_parse(const char *p, size_t n, struct usage_prices *t, struct buf *err)
{
	const char *end = p + n;
	int line = 0, ret = -EINVAL;
	struct buf why = BUF_INIT;

	memset(t, 0, sizeof(*t));
	t->nfiles = 1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
		const char *f[PRICE_FIELDS];
		size_t fl[PRICE_FIELDS];
		int nf = 0;
		const char *q = p;
		struct usage_price *dup;

		line++;
		p = nl ? nl + 1 : end;
		while (q < le) {
			while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
				q++;
			if (q == le || *q == '#')
				break;
			if (nf == PRICE_FIELDS) {
				ret = prices_bad(err, line, "too many fields");
				goto out;
			}
			f[nf] = q;
			while (q < le && *q != ' ' && *q != '\t' && *q != '\r' && *q != '#')
				q++;
			fl[nf] = (size_t)(q - f[nf]);
			nf++;
		}
		if (!nf)
			continue;
		if (word_is(f[0], fl[0], "date")) {
			if (nf != 2 || !date_ok(f[1], fl[1])) {
				ret = prices_bad(err, line, "'date' takes a date YYYY-MM-DD");
				goto out;
			}
			if (t->files[0].date[0]) {
				ret = prices_bad(err, line, "a second 'date' line");
				goto out;
			}
			memcpy(t->files[0].date, f[1], fl[1]);
			continue;
		}
		if (word_is(f[0], fl[0], "web-search")) {
			if ((ret = parse_search(f, fl, nf, line, &t->search, err)) < 0)
				goto out;
			continue;
		}
		if (t->nr >= USAGE_PRICES_MAX) {
			ret = prices_bad(err, line, "more than 256 families");
			goto out;
		}
		t->v = xrealloc(t->v, (t->nr + 1) * sizeof(*t->v));
		if ((ret = parse_row(f, fl, nf, line, &t->v[t->nr], err)) < 0)
			goto out;
		if ((dup = find_family(t, t->v[t->nr].family)) && dup != &t->v[t->nr]) {
			buf_addf(&why, "the family '%s' is listed twice (first on line %d)",
			         dup->family, dup->line);
			ret = prices_bad(err, line, why.buf);
			goto out;
		}
		t->nr++;
	}
	if (!t->nr) {
		ret = prices_bad(err, line, "no prices");
		goto out;
	}
	if (!t->files[0].date[0]) {
		ret = prices_bad(err, line, "no 'date' line");
		goto out;
	}
	for (size_t i = 0; i < t->nr; i++)
		if (!t->v[i].date[0])
			memcpy(t->v[i].date, t->files[0].date, sizeof(t->v[i].date));
	if (t->search.line && !t->search.date[0])
		memcpy(t->search.date, t->files[0].date, sizeof(t->search.date));
	update_top(t);
	ret = 0;
out:
	buf_release(&why);
	if (ret < 0)
		usage_prices_release(t);
	return ret;
}

int usage_prices_load(const char *path, struct usage_prices *t, struct buf *err)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	struct usage_prices add;
	ssize_t r;
	int ret, file = (int)t->nfiles;

	if (t->nfiles >= USAGE_PRICES_FILES)
		BUG("more than %d price tables", USAGE_PRICES_FILES);
	r = buf_read_file(&b, path, USAGE_PRICES_FILE_MAX);
	if (r < 0) {
		buf_addf(err, "cannot read the price table '%s': %s", path,
		         r == -EFBIG ? "larger than 64 KiB" : strerror((int)-r));
		buf_release(&b);
		return (int)r;
	}
	ret = usage_prices_parse(b.buf, b.len, &add, &why);
	buf_release(&b);
	if (!ret && !file && !add.search.line) {
		usage_prices_release(&add);
		buf_addstr(&why, "no 'web-search' line (USD per 1,000 web searches)");
		ret = -EINVAL;
	}
	if (ret < 0) {
		buf_addf(err, "the price table '%s', %s", path, why.buf);
		buf_release(&why);
		return ret;
	}
	t->files[file].path = xstrdup(path);
	memcpy(t->files[file].date, add.files[0].date, sizeof(t->files[file].date));
	t->nfiles++;
	for (size_t i = 0; i < add.nr; i++) {
		struct usage_price *row = find_family(t, add.v[i].family);

		if (!row) {
			t->v = xrealloc(t->v, (t->nr + 1) * sizeof(*t->v));
			row = &t->v[t->nr++];
		}
		*row = add.v[i];
		row->file = file;
	}
	if (add.search.line) {
		t->search = add.search;
		t->search.file = file;
	}
	update_top(t);
	usage_prices_release(&add);
	return 0;
}

int usage_prices_load_in_use(struct usage_prices *t, struct buf *err)
{
	struct buf why = BUF_INIT;
	int ret = usage_prices_load(prices_file(), t, err);

	if (ret < 0)
		return ret;
	ret = usage_prices_load(user_prices_file(), t, &why);
	if (ret == -ENOENT)
		ret = 0;
	if (ret < 0) {
		buf_addstr(err, why.buf);
		usage_prices_release(t);
	}
	buf_release(&why);
	return ret;
}

/*
 * What may follow a family in a model's name: a date ("-20250929"), then a
 * form such as "@20250805", then a variant ("[1m]"), each optional.
 */
static int model_suffix_ok(const char *s)
{
	if (s[0] == '-') {
		for (int i = 1; i <= 8; i++)
			if (s[i] < '0' || s[i] > '9')
				return 0;
		s += 9;
	}
	if (*s == '@') {
		if (!name_char(*++s))
			return 0;
		while (name_char(*s))
			s++;
	}
	if (*s == '[') {
		if (!name_char(*++s))
			return 0;
		while (name_char(*s))
			s++;
		if (*s++ != ']')
			return 0;
	}
	return !*s;
}

int usage_price_of(const struct usage_prices *t, const char *model, const struct usage_price **out)
{
	const struct usage_price *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; model && i < t->nr; i++) {
		size_t l = strlen(t->v[i].family);

		if (l > best_len && !strncmp(model, t->v[i].family, l) &&
		    model_suffix_ok(model + l)) {
			best = &t->v[i];
			best_len = l;
		}
	}
	*out = best ? best : &t->top;
	return best != NULL;
}

void usage_fast_model(const struct usage_prices *t, const char *model, char *out)
{
	const struct usage_price *p;
	size_t l = strlen(model), n;

	if (usage_price_of(t, model, &p))
		l = strlen(p->family);
	n = (size_t)snprintf(out, USAGE_MODEL_MAX + 1, "%.*s-fast%s", (int)l, model, model + l);
	if (n > USAGE_MODEL_MAX)
		out[0] = '\0';
}

int usage_price_for(const struct usage_prices *t, const char *model, unsigned flags,
                    struct usage_price *out)
{
	const struct usage_price *p;
	int priced = usage_price_of(t, model, &p);

	if (flags & USAGE_PRICE_TOP)
		p = &t->top;
	*out = *p;
	if (flags & USAGE_PRICE_GEO)
		for (size_t b = 0; b < out->nband; b++)
			for (int k = 0; k < USAGE_KINDS; k++) {
				uint64_t x = sat_mul(out->band[b].nano[k], out->geo_milli);

				out->band[b].nano[k] = x / 1000 + (x % 1000 != 0);
			}
	return priced;
}

uint64_t usage_prompt(const struct usage_tokens *t)
{
	return sat_add(sat_add(t->n[USAGE_INPUT], t->n[USAGE_CACHE_READ]),
	               sat_add(t->n[USAGE_CACHE_5M], t->n[USAGE_CACHE_1H]));
}

uint64_t usage_cost(const struct usage_price *p, const struct usage_tokens *t)
{
	uint64_t sum = 0, prompt = usage_prompt(t);
	size_t b = 0;

	while (b + 1 < p->nband && prompt > p->band[b + 1].above)
		b++;
	for (int k = 0; k < USAGE_KINDS; k++)
		sum = sat_add(sum, sat_mul(t->n[k], p->band[b].nano[k]));
	return sat_add(sum, sat_mul(t->searches, p->search_nano));
}

void usage_prices_release(struct usage_prices *t)
{
	free(t->v);
	for (size_t i = 0; i < t->nfiles && i < USAGE_PRICES_FILES; i++)
		free(t->files[i].path);
	memset(t, 0, sizeof(*t));
}

/* ---- a task's count ---- */

static int name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > USAGE_MODEL_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

static struct usage_model *model_slot(struct usage_count *c, const char *name)
{
	for (size_t i = 0; i < c->nr; i++)
		if (!strcmp(c->m[i].name, name))
			return &c->m[i];
	if (c->nr >= USAGE_MODELS && strcmp(name, USAGE_MODEL_OTHER))
		return model_slot(c, USAGE_MODEL_OTHER);
	memset(&c->m[c->nr], 0, sizeof(c->m[c->nr]));
	memcpy(c->m[c->nr].name, name, strlen(name) + 1);
	return &c->m[c->nr++];
}

void usage_count_add(struct usage_count *c, const struct usage_prices *t, const char *model,
                     unsigned was_flags, unsigned flags, const struct usage_tokens *before,
                     const struct usage_tokens *d, int new_answer, uint64_t *nano)
{
	const char *name = name_ok(model) ? model : NULL;
	struct usage_price p, was_p;
	int priced = usage_price_for(t, name, flags, &p);
	struct usage_model *m = model_slot(c, name ? name : USAGE_MODEL_OTHER);
	struct usage_tokens after;
	uint64_t was, now, cost;

	usage_price_for(t, name, was_flags, &was_p);
	after = *before;
	usage_tokens_add(&after, d);
	/* Bands never get cheaper above a threshold, nor flags, so now >= was; kept safe anyway. */
	was = usage_cost(&was_p, before);
	now = usage_cost(&p, &after);
	cost = now > was ? now - was : 0;

	usage_tokens_add(&m->t, d);
	if (new_answer)
		m->requests++;
	if (!priced)
		m->unpriced = 1;
	if (flags & USAGE_PRICE_TOP)
		m->priority = 1;
	m->nano = sat_add(m->nano, cost);
	c->nano = sat_add(c->nano, cost);
	*nano = cost;
}

static json_t *jcount(uint64_t n)
{
	return json_integer((json_int_t)(n > INT64_MAX ? INT64_MAX : n));
}

static json_t *jusd(uint64_t nano)
{
	return json_real((double)(nano / 1000) / 1e6);
}

void *usage_count_to_json(const struct usage_count *c)
{
	json_t *root = json_object(), *models = json_array(), *caps = json_object();

	for (size_t i = 0; i < c->nr; i++) {
		json_t *m = json_object();

		json_object_set_new(m, "model", json_string(c->m[i].name));
		for (int k = 0; k < USAGE_KINDS; k++)
			json_object_set_new(m, usage_kind_names[k], jcount(c->m[i].t.n[k]));
		if (c->m[i].t.searches)
			json_object_set_new(m, "web_searches", jcount(c->m[i].t.searches));
		json_object_set_new(m, "requests", jcount(c->m[i].requests));
		json_object_set_new(m, "usd", jusd(c->m[i].nano));
		json_object_set_new(m, "nano_usd", jcount(c->m[i].nano));
		json_object_set_new(m, "priced", json_boolean(!c->m[i].unpriced));
		if (c->m[i].priority)
			json_object_set_new(m, "priority", json_true());
		json_array_append_new(models, m);
	}
	json_object_set_new(caps, "task_usd", c->cap_task ? jusd(c->cap_task) : json_null());
	json_object_set_new(caps, "day_usd", c->cap_day ? jusd(c->cap_day) : json_null());
	if (c->cap_user)
		json_object_set_new(caps, "user_day_usd", jusd(c->cap_user));
	json_object_set_new(root, "requests", jcount(c->requests));
	json_object_set_new(root, "usd", jusd(c->nano));
	json_object_set_new(root, "nano_usd", jcount(c->nano));
	json_object_set_new(root, "models", models);
	json_object_set_new(root, "uncounted", jcount(c->uncounted));
	json_object_set_new(root, "skipped", jcount(c->skipped));
	json_object_set_new(root, "refused", jcount(c->refused));
	json_object_set_new(root, "caps", caps);
	json_object_set_new(root, "cap_task_nano", jcount(c->cap_task));
	json_object_set_new(root, "cap_day_nano", jcount(c->cap_day));
	json_object_set_new(root, "day_nano_usd", jcount(c->day_nano));
	if (c->cap_user) {
		json_object_set_new(root, "cap_user_nano", jcount(c->cap_user));
		json_object_set_new(root, "user_nano_usd", jcount(c->user_nano));
	}
	json_object_set_new(root, "ended_by_cap",
	                    c->capped ? json_string(usage_capped_name(c->capped)) : json_null());
	return root;
}

void usage_count_json(const struct usage_count *c, struct buf *out)
{
	json_t *root = usage_count_to_json(c);
	char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (!text)
		die_oom();
	buf_addstr(out, text);
	free(text);
	json_decref(root);
}

/* A count: an integer from 0 to 2^63 - 1. */
static int get_n(json_t *o, const char *key, uint64_t *out, struct buf *err)
{
	int64_t n;
	int r = json_get_int(o, key, 0, 0, INT64_MAX, &n, err);

	if (r > 0)
		*out = (uint64_t)n;
	return r < 0 ? r : 0;
}

/* get_n() of a member a record from before it lacks (0 then). */
static int get_opt_n(json_t *o, const char *key, uint64_t *out, struct buf *err)
{
	int64_t n = 0;
	int r = json_get_int(o, key, JSON_OPTIONAL, 0, INT64_MAX, &n, err);

	*out = (uint64_t)n;
	return r < 0 ? r : 0;
}

int usage_count_from_json(const void *json, struct usage_count *c, struct buf *err)
{
	struct buf why = BUF_INIT;
	json_t *root = (json_t *)json, *models = NULL;
	const char *cap = NULL;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(root)) {
		buf_addstr(&why, "not an object");
		goto bad;
	}
	if (get_n(root, "requests", &c->requests, &why) ||
	    get_n(root, "nano_usd", &c->nano, &why) ||
	    get_n(root, "uncounted", &c->uncounted, &why) ||
	    get_n(root, "skipped", &c->skipped, &why) ||
	    get_n(root, "refused", &c->refused, &why) ||
	    get_n(root, "cap_task_nano", &c->cap_task, &why) ||
	    get_n(root, "cap_day_nano", &c->cap_day, &why) ||
	    get_n(root, "day_nano_usd", &c->day_nano, &why) ||
	    get_opt_n(root, "cap_user_nano", &c->cap_user, &why) ||
	    get_opt_n(root, "user_nano_usd", &c->user_nano, &why) ||
	    json_get_str(root, "ended_by_cap", JSON_OPTIONAL, 8, &cap, &why) < 0)
		goto bad;
	if (cap && !strcmp(cap, "task"))
		c->capped = USAGE_CAPPED_TASK;
	else if (cap && !strcmp(cap, "day"))
		c->capped = USAGE_CAPPED_DAY;
	else if (cap && !strcmp(cap, "user"))
		c->capped = USAGE_CAPPED_USER;
	else if (cap) {
		buf_addstr(&why, "'ended_by_cap' is not task, day, user or null");
		goto bad;
	}
	if (json_get_list(root, "models", 0, USAGE_MODELS + 1, &models, &why) < 0)
		goto bad;
	for (size_t i = 0; i < json_array_size(models); i++) {
		json_t *m = json_array_get(models, i);
		const char *name = json_str_checked(json_object_get(m, "model"), USAGE_MODEL_MAX);
		struct usage_model *um = &c->m[i];
		int64_t searches = 0;
		int priced = 1, priority = 0;

		if (!name || !name_ok(name)) {
			buf_addstr(&why, "a model without a proper name");
			goto bad;
		}
		memcpy(um->name, name, strlen(name) + 1);
		for (int k = 0; k < USAGE_KINDS; k++)
			if (get_n(m, usage_kind_names[k], &um->t.n[k], &why))
				goto bad;
		if (json_get_int(m, "web_searches", JSON_OPTIONAL, 0, INT64_MAX, &searches, &why) <
		        0 ||
		    get_n(m, "requests", &um->requests, &why) ||
		    get_n(m, "nano_usd", &um->nano, &why) ||
		    json_get_bool(m, "priced", JSON_OPTIONAL, &priced, &why) < 0 ||
		    json_get_bool(m, "priority", JSON_OPTIONAL, &priority, &why) < 0)
			goto bad;
		um->unpriced = !priced;
		um->priority = priority;
		um->t.searches = searches > 0 ? (uint64_t)searches : 0;
		c->nr++;
	}
	c->present = 1;
	return 0;
bad:
	buf_addf(err, "usage: %s", why.buf);
	buf_release(&why);
	memset(c, 0, sizeof(*c));
	return -EINVAL;
}

/* ---- the daily ledger ---- */

#define LEDGER_DIGITS 20

int usage_ledger_open(const char *project_dir, time_t now, struct buf *err)
{
	struct buf path = BUF_INIT;
	struct tm tm;
	size_t dir_len;
	int fd, made;

	buf_addf(&path, "%s/spend", project_dir);
	if (mkdir(path.buf, 0700) < 0 && errno != EEXIST) {
		fd = -errno;
		buf_addf(err, "cannot make '%s': %s", path.buf, strerror(errno));
		goto out;
	}
	dir_len = path.len;
	localtime_r(&now, &tm);
	buf_addf(&path, "/%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	fd = open(path.buf, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	made = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = open(path.buf, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fd = -errno;
		buf_addf(err, "cannot open '%s': %s", path.buf, strerror(errno));
		goto out;
	}
	if (made) {
		/* A new day's file: its name goes to the disk, as its totals do. */
		int dfd;

		buf_setlen(&path, dir_len);
		if ((dfd = open(path.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
out:
	buf_release(&path);
	return fd;
}

static int lock(int fd, int op)
{
	while (flock(fd, op) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/*
 * The ledger's lines: the day's total ("%020llu\n"), then up to
 * USAGE_LEDGER_SLOTS reservations, "%016llx %020llu %020llu\n": a proxy's
 * id (0: a free slot), its reservation in nano-USD and when it lapses (Unix
 * seconds).  Slots are rewritten in place and never removed, so the file
 * only grows by whole lines and a crash leaves it readable.  One slot may
 * hold the day's price flags instead: its id USAGE_LEDGER_ID_MAX with the
 * flags in its low bits, nothing reserved, lapsing never, so that a reader
 * of the ledger before the flags (which knows only reservations) reads it
 * as a reservation of 0 it never reuses.
 */
#define SLOT_LEN    59
#define LEDGER_MAX  (LEDGER_DIGITS + 1 + SLOT_LEN * USAGE_LEDGER_SLOTS)
#define FLAGS_KNOWN (USAGE_PRICE_GEO | USAGE_PRICE_TOP)

struct slot {
	uint64_t id, nano, until;
};

static int is_flags_slot(const struct slot *s)
{
	return s->id >= USAGE_LEDGER_ID_MAX;
}

#define WAIT_SINCE_BITS 44
#define WAIT_SINCE_MASK ((1ULL << WAIT_SINCE_BITS) - 1)

/* A waiting line: an id of the waiting range that reserves nothing. */
static int is_wait_slot(const struct slot *s)
{
	return s->id >= USAGE_LEDGER_WAIT_MIN && s->id < USAGE_LEDGER_ID_MAX && !s->nano;
}

uint64_t usage_ledger_wait_id(uint64_t since_ms, uint64_t tag)
{
	return USAGE_LEDGER_WAIT_MIN | (since_ms & WAIT_SINCE_MASK) << 8 | (tag & 0xff);
}

static int digits(const char *p, int n, int base, uint64_t *out)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++) {
		int d = p[i] >= '0' && p[i] <= '9'                 ? p[i] - '0'
		        : base == 16 && p[i] >= 'a' && p[i] <= 'f' ? p[i] - 'a' + 10
		                                                   : -1;

		if (d < 0)
			return -EINVAL;
		v = sat_add(sat_mul(v, (uint64_t)base), (uint64_t)d);
	}
	*out = v;
	return 0;
}

/* Read the ledger (locked by the caller): the total and the slots, *nslots of them; empty: 0 bytes.
 */
static int ledger_read(int fd, uint64_t *total, struct slot *sl, int *nslots, int *empty)
{
	char b[LEDGER_MAX + 1];
	ssize_t n;

	do
		n = pread(fd, b, sizeof(b), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	*total = 0;
	*nslots = 0;
	*empty = !n;
	if (!n)
		return 0;
	if (n < LEDGER_DIGITS + 1 || n > LEDGER_MAX || (n - LEDGER_DIGITS - 1) % SLOT_LEN ||
	    b[LEDGER_DIGITS] != '\n' || digits(b, LEDGER_DIGITS, 10, total) < 0)
		return -EINVAL;
	for (const char *p = b + LEDGER_DIGITS + 1; p < b + n; p += SLOT_LEN) {
		struct slot *s = &sl[(*nslots)++];

		if (p[16] != ' ' || p[37] != ' ' || p[58] != '\n' ||
		    digits(p, 16, 16, &s->id) < 0 || digits(p + 17, 20, 10, &s->nano) < 0 ||
		    digits(p + 38, 20, 10, &s->until) < 0)
			return -EINVAL;
	}
	return 0;
}

static int write_at(int fd, const char *p, size_t n, off_t off)
{
	ssize_t w;

	do
		w = pwrite(fd, p, n, off);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : w < 0 ? -errno : -EIO;
}

static int write_total(int fd, uint64_t v)
{
	char b[LEDGER_DIGITS + 2];

	snprintf(b, sizeof(b), "%0*llu\n", LEDGER_DIGITS, (unsigned long long)v);
	return write_at(fd, b, LEDGER_DIGITS + 1, 0);
}

/* Write slot i (a new line when i == *nslots) as s, in the file and in sl. */
static int write_line(int fd, struct slot *sl, int *nslots, int i, struct slot s)
{
	char b[SLOT_LEN + 1];
	int ret;

	snprintf(b, sizeof(b), "%016llx %020llu %020llu\n", (unsigned long long)s.id,
	         (unsigned long long)s.nano, (unsigned long long)s.until);
	if ((ret = write_at(fd, b, SLOT_LEN, LEDGER_DIGITS + 1 + (off_t)i * SLOT_LEN)) < 0)
		return ret;
	sl[i] = s;
	if (i == *nslots)
		(*nslots)++;
	return 0;
}

/* The slot a new line may take: a free one, a lapsed one, or a new line; -1: none. */
static int free_slot(const struct slot *sl, int nslots, time_t now)
{
	for (int i = 0; i < nslots; i++)
		if (!is_flags_slot(&sl[i]) && (!sl[i].id || sl[i].until <= (uint64_t)now))
			return i;
	return nslots < USAGE_LEDGER_SLOTS ? nslots : -1;
}

/* 1 when proxy id has its own slot, or free_slot() gives one. */
static int has_slot(const struct slot *sl, int nslots, uint64_t id, time_t now)
{
	for (int i = 0; i < nslots; i++)
		if (sl[i].id == id)
			return 1;
	return free_slot(sl, nslots, now) >= 0;
}

/* Set this proxy's slot (its own, else free_slot()'s) to nano; 0 frees it. */
static int write_slot(int fd, struct slot *sl, int *nslots, uint64_t id, uint64_t nano, time_t now)
{
	struct slot s = {nano ? id : 0, nano, nano ? (uint64_t)now + USAGE_LEDGER_TTL : 0};
	int i;

	for (i = 0; i < *nslots; i++)
		if (sl[i].id == id)
			break;
	if (i == *nslots && !nano)
		return 0;
	if (i == *nslots && (i = free_slot(sl, *nslots, now)) < 0)
		return -ENOSPC;
	return write_line(fd, sl, nslots, i, s);
}

/*
 * Add flags to the day's (*have, read from the ledger): its flags line
 * rewritten in place, or a slot taken for it (none free: the flags are not
 * shared until one is), synced as a total is.
 */
static int write_flags(int fd, struct slot *sl, int *nslots, unsigned *have, unsigned flags,
                       time_t now)
{
	unsigned want = (*have | flags) & FLAGS_KNOWN;
	int i, ret;

	if (want == *have)
		return 0;
	for (i = 0; i < *nslots && !is_flags_slot(&sl[i]); i++)
		;
	if (i == *nslots && (i = free_slot(sl, *nslots, now)) < 0)
		return 0;
	ret =
	    write_line(fd, sl, nslots, i, (struct slot){USAGE_LEDGER_ID_MAX | want, 0, UINT64_MAX});
	if (ret < 0)
		return ret;
	*have = want;
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* One ledger of an operation, as read under its lock. */
struct ledger_state {
	struct slot sl[USAGE_LEDGER_SLOTS];
	uint64_t total, others;
	int nslots, empty;
	int older;   /* another proxy's live waiting line began before the turn's since */
	int waiters; /* the live waiting lines */
	unsigned have;
};

/* The request deciding: its proxy's waiting line (0: none), and since when it waits. */
struct turn {
	uint64_t wait_id, since_ms;
};

/*
 * Read l's ledger (locked) into st: its total, flags, the other live
 * proxies' reservations, and their waiting lines older than t's (t NULL: none).
 */
static int ledger_load(int fd, uint64_t id, const struct turn *t, time_t now,
                       struct ledger_state *st)
{
	int ret;

	st->others = 0;
	st->have = 0;
	st->older = 0;
	st->waiters = 0;
	if ((ret = ledger_read(fd, &st->total, st->sl, &st->nslots, &st->empty)) < 0)
		return ret;
	for (int i = 0; i < st->nslots; i++) {
		const struct slot *s = &st->sl[i];

		if (is_flags_slot(s)) {
			st->have |= (unsigned)s->id & FLAGS_KNOWN;
			continue;
		}
		if (!s->id || s->until <= (uint64_t)now)
			continue;
		if (is_wait_slot(s)) {
			st->waiters++;
			if (t && s->id != t->wait_id &&
			    (s->id >> 8 & WAIT_SINCE_MASK) + USAGE_LEDGER_WAIT_AGE_MS <
			        (t->since_ms & WAIT_SINCE_MASK))
				st->older = 1;
		} else if (s->id != id) {
			st->others = sat_add(st->others, s->nano);
		}
	}
	return 0;
}

/*
 * Write to a ledger read into st: add to its total (raised to floor first),
 * add the flags, set proxy id's reservation to resv when set_slot.
 */
static int ledger_store(int fd, struct ledger_state *st, uint64_t id, uint64_t add, uint64_t floor,
                        unsigned flags, int set_slot, uint64_t resv, time_t now)
{
	int ret;

	if (st->total < floor)
		add = sat_add(add, floor - st->total);
	if (add || (st->empty && (id || flags))) {
		st->total = sat_add(st->total, add);
		if ((ret = write_total(fd, st->total)) < 0)
			return ret;
		/* Money counted is on the disk before the lock goes (a reservation lapses). */
		if (add && fdatasync(fd) < 0)
			return -errno;
	}
	/* the reservation first: the flags do without a line when none is free, it cannot */
	if (id && set_slot && (ret = write_slot(fd, st->sl, &st->nslots, id, resv, now)) < 0)
		return ret;
	return write_flags(fd, st->sl, &st->nslots, &st->have, flags, now);
}

/* Lock l[0..n) in that order, *locked of them so far; 0 or a negative errno. */
static int lock_all(struct usage_ledger *l, size_t n, size_t *locked)
{
	int ret;

	if (n > USAGE_LEDGERS)
		return -EINVAL;
	for (; *locked < n; (*locked)++)
		if ((ret = lock(l[*locked].fd, LOCK_EX)) < 0)
			return ret;
	return 0;
}

static void unlock_all(struct usage_ledger *l, size_t locked)
{
	while (locked)
		lock(l[--locked].fd, LOCK_UN);
}

/*
 * The one ledger operation, on n ledgers at once (a project's, and the
 * user's under a policy), each under an exclusive lock taken in the order
 * given and held until all are written: read, decide an admission (admit
 * not NULL: each ledger's cap, mine, want, the waiting lines older than
 * admit's; the first ledger whose verdict is not USAGE_ADMIT in *which), add to each total (raised
 * to floor first), add the price flags, set this proxy's reservation.  The verdict, or a negative
 * errno.
 */
static int ledgers_op(struct usage_ledger *l, size_t n, uint64_t id, uint64_t add, uint64_t floor,
                      unsigned flags, const struct turn *admit, uint64_t mine, uint64_t want,
                      time_t now, size_t *which)
{
	struct ledger_state st[USAGE_LEDGERS];
	size_t locked = 0;
	int ret, verdict = USAGE_ADMIT, capped = 0;

	if ((ret = lock_all(l, n, &locked)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if ((ret = ledger_load(l[i].fd, id, admit, now, &st[i])) < 0)
			goto out;
		capped |= !!l[i].cap;
	}
	for (size_t i = 0; admit && i < n && verdict == USAGE_ADMIT; i++) {
		uint64_t held = sat_add(mine, st[i].others);

		if (st[i].have & ~flags)
			verdict = USAGE_AGAIN;
		else if (l[i].cap && st[i].total >= l[i].cap)
			verdict = USAGE_REFUSE;
		else if (l[i].cap && held && sat_add(st[i].total, held) >= l[i].cap)
			verdict = USAGE_WAIT;
		/* an older waiter of another proxy goes first, unless this one leaves it room */
		else if (l[i].cap && st[i].older &&
		         sat_add(st[i].total, sat_add(st[i].others, want)) >= l[i].cap)
			verdict = USAGE_WAIT;
		if (verdict != USAGE_ADMIT && which)
			*which = i;
	}
	/* a refusal by any ledger wins over a wait for another's */
	for (size_t i = 0; admit && verdict == USAGE_WAIT && i < n; i++)
		if (l[i].cap && st[i].total >= l[i].cap) {
			verdict = USAGE_REFUSE;
			if (which)
				*which = i;
		}
	/*
	 * every ledger has a line for the reservation, or none is written (never half
	 * of it); under a cap, a request none is free for waits for one
	 */
	for (size_t i = 0; id && verdict == USAGE_ADMIT && (admit ? want : mine) && i < n; i++)
		if (!has_slot(st[i].sl, st[i].nslots, id, now)) {
			if (!admit || !capped) {
				ret = -ENOSPC;
				goto out;
			}
			verdict = USAGE_WAIT;
			if (which)
				*which = i;
		}
	for (size_t i = 0; i < n; i++) {
		if ((ret = ledger_store(l[i].fd, &st[i], id, add, floor, flags,
		                        verdict == USAGE_ADMIT, admit ? want : mine, now)) < 0)
			goto out;
		l[i].v.total = st[i].total;
		l[i].v.others = st[i].others;
		l[i].v.flags = st[i].have;
	}
	ret = verdict;
out:
	unlock_all(l, locked);
	return ret;
}

static int ledger_op(int fd, uint64_t id, uint64_t add, unsigned flags, int admit, uint64_t cap,
                     uint64_t mine, uint64_t want, time_t now, struct usage_ledger_view *v)
{
	struct usage_ledger l = {.fd = fd, .cap = cap};
	struct turn t = {0, 0};
	int ret = ledgers_op(&l, 1, id, add, 0, flags, admit ? &t : NULL, mine, want, now, NULL);

	*v = l.v;
	return ret;
}

int usage_ledgers_sync(struct usage_ledger *l, size_t n, uint64_t id, uint64_t add,
                       uint64_t reserve, unsigned flags, time_t now)
{
	return ledgers_op(l, n, id, add, 0, flags, NULL, reserve, 0, now, NULL);
}

int usage_ledgers_admit(struct usage_ledger *l, size_t n, uint64_t id, uint64_t mine, uint64_t want,
                        unsigned flags, uint64_t wait_id, uint64_t since_ms, time_t now,
                        size_t *which)
{
	struct turn t = {wait_id, since_ms};

	return ledgers_op(l, n, id, 0, 0, flags, &t, mine, want, now, which);
}

int usage_ledgers_wait(struct usage_ledger *l, size_t n, uint64_t old, uint64_t wait_id, time_t now)
{
	struct ledger_state st;
	size_t locked = 0;
	int ret, full = 0;

	if ((ret = lock_all(l, n, &locked)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		int at = -1;

		if ((ret = ledger_load(l[i].fd, 0, NULL, now, &st)) < 0)
			goto out;
		for (int j = 0; j < st.nslots; j++) {
			if (old && old != wait_id && st.sl[j].id == old &&
			    is_wait_slot(&st.sl[j]) &&
			    (ret = write_line(l[i].fd, st.sl, &st.nslots, j,
			                      (struct slot){0, 0, 0})) < 0)
				goto out;
			if (wait_id && st.sl[j].id == wait_id && is_wait_slot(&st.sl[j]))
				at = j;
		}
		if (!wait_id)
			continue;
		/* a new line only below the bound of waiters, in a free slot */
		if (at < 0 && (st.waiters >= USAGE_LEDGER_WAITERS ||
		               (at = free_slot(st.sl, st.nslots, now)) < 0)) {
			full = 1;
			continue;
		}
		if (st.empty && (ret = write_total(l[i].fd, 0)) < 0)
			goto out;
		if ((ret = write_line(
		         l[i].fd, st.sl, &st.nslots, at,
		         (struct slot){wait_id, 0, (uint64_t)now + USAGE_LEDGER_WAIT_TTL})) < 0)
			goto out;
	}
	ret = full ? -ENOSPC : 0;
out:
	unlock_all(l, locked);
	return ret;
}

int usage_ledger_raise(int fd, uint64_t floor, uint64_t *total)
{
	struct usage_ledger l = {.fd = fd};
	int ret = ledgers_op(&l, 1, 0, 0, floor, 0, NULL, 0, 0, time(NULL), NULL);

	if (ret >= 0)
		*total = l.v.total;
	return ret < 0 ? ret : 0;
}

int usage_ledger_sync(int fd, uint64_t id, uint64_t add, uint64_t reserve, unsigned flags,
                      time_t now, struct usage_ledger_view *v)
{
	return ledger_op(fd, id, add, flags, 0, 0, reserve, 0, now, v);
}

int usage_ledger_admit(int fd, uint64_t id, uint64_t cap, uint64_t mine, uint64_t want,
                       unsigned flags, time_t now, struct usage_ledger_view *v)
{
	return ledger_op(fd, id, 0, flags, 1, cap, mine, want, now, v);
}

int usage_ledger_add(int fd, uint64_t nano, uint64_t *total)
{
	struct usage_ledger_view v;
	int ret = ledger_op(fd, 0, nano, 0, 0, 0, 0, 0, time(NULL), &v);

	if (ret >= 0)
		*total = v.total;
	return ret < 0 ? ret : 0;
}
