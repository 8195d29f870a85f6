#include "task/task_record.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/json_get.h"
#include "base/out.h"
#include "base/taskid.h"
#include "base/banned.h"

void task_why_stopped(struct buf *why, int sig)
{
	const char *name = sigabbrev_np(sig);

	buf_reset(why);
	if (name)
		buf_addf(why, TASK_WHY_STOPPED "SIG%s", name);
	else
		buf_addstr(why, TASK_WHY_STOPPED "a signal");
}

static const char *const states[] = {"finished", "not finished", "failed to start"};

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/*
 * A text as JSON: sanitized (common/base/out.h), so always UTF-8 and free of
 * control characters but line breaks, and cut to its first max bytes at a
 * character's start; null for NULL.
 */
static json_t *text_value_max(const char *s, size_t max)
{
	struct buf b = BUF_INIT;
	size_t n;
	json_t *v;

	if (!s)
		return json_null();
	out_sanitize(&b, s, strlen(s));
	n = b.len;
	if (n > max) {
		n = max;
		while (n && ((unsigned char)b.buf[n] & 0xc0) == 0x80)
			n--;
	}
	v = json_stringn(b.buf, n);
	buf_release(&b);
	return v ? v : json_null();
}

static json_t *text_value(const char *s)
{
	return text_value_max(s, SIZE_MAX);
}

/* result.json's shape (docs/internals.md), from what result_parse() accepted. */
static json_t *result_object(const struct task_result *r)
{
	json_t *o = json_object(), *steps = json_array();

	json_object_set_new(o, "version", json_integer(r->version));
	for (size_t i = 0; i < r->nsteps; i++) {
		const struct result_step *s = &r->steps[i];
		json_t *st = json_object();

		json_object_set_new(st, "name", json_string(s->name));
		json_object_set_new(st, "status", json_string(result_status_name(s->status)));
		json_object_set_new(st, "seconds", json_real(s->seconds));
		json_object_set_new(st, "exit_code",
		                    s->has_exit_code ? json_integer(s->exit_code) : json_null());
		json_array_append_new(steps, st);
	}
	json_object_set_new(o, "steps", steps);
	json_object_set_new(o, "failed_step", str_or_null(r->failed_step));
	if (r->has_claude) {
		json_t *c = json_object();

		json_object_set_new(c, "exit_code",
		                    r->claude.has_exit_code ? json_integer(r->claude.exit_code)
		                                            : json_null());
		json_object_set_new(c, "num_turns",
		                    r->claude.has_turns ? json_integer(r->claude.num_turns)
		                                        : json_null());
		json_object_set_new(c, "duration_ms",
		                    r->claude.has_duration ? json_integer(r->claude.duration_ms)
		                                           : json_null());
		json_object_set_new(c, "total_cost_usd",
		                    r->claude.has_cost ? json_real(r->claude.cost_usd)
		                                       : json_null());
		json_object_set_new(c, "ended_by",
		                    r->claude.has_ended_by
		                        ? json_string(result_ended_name(r->claude.ended_by))
		                        : json_null());
		/* Cut to its bound after the sanitizer, which may lengthen it (a tab is 8
		 * spaces): a record must read back through result_parse(). */
		json_object_set_new(c, "last_message",
		                    text_value_max(r->claude.last_message, RESULT_MESSAGE_MAX));
		json_object_set_new(o, "claude", c);
	} else {
		json_object_set_new(o, "claude", json_null());
	}
	json_object_set_new(o, "start_commit",
	                    r->start_commit[0] ? json_string(r->start_commit) : json_null());
	json_object_set_new(o, "end_commit",
	                    r->end_commit[0] ? json_string(r->end_commit) : json_null());
	json_object_set_new(o, "changes", json_boolean(r->changes));
	if (r->has_check) {
		json_t *c = json_object();

		json_object_set_new(c, "exit_code",
		                    r->check.has_exit_code ? json_integer(r->check.exit_code)
		                                           : json_null());
		json_object_set_new(c, "timed_out", json_boolean(r->check.timed_out));
		json_object_set_new(c, "seconds", json_real(r->check.seconds));
		json_object_set_new(c, "tail",
		                    json_string(r->check.tail)); /* sanitized when read */
		json_object_set_new(o, "check", c);
	} else {
		json_object_set_new(o, "check", json_null());
	}
	return o;
}

static json_t *report_object(const struct proxy_report *rep)
{
	struct buf b = BUF_INIT;
	json_t *o;

	proxy_report_json(rep, &b);
	o = json_loadb(b.buf, b.len, 0, NULL);
	buf_release(&b);
	return o ? o : json_null();
}

void task_record_json(const struct task_record_in *in, struct buf *out)
{
	const struct summary_in *s = in->sum;
	json_t *o = json_object();
	const char *id = in->name + strlen(in->name);
	char *text;

	if (strlen(in->name) >= TASK_ID_LEN)
		id -= TASK_ID_LEN;
	json_object_set_new(o, "version", json_integer(TASK_RECORD_VERSION));
	json_object_set_new(o, "folder", json_string(in->folder));
	json_object_set_new(o, "name", json_string(in->name));
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "group", str_or_null(in->group));
	json_object_set_new(o, "state", json_string(in->state));
	json_object_set_new(o, "exit", json_integer(in->exit_code));
	json_object_set_new(o, "why", in->why && *in->why ? text_value(in->why) : json_null());
	json_object_set_new(o, "seconds", json_real(in->seconds));
	json_object_set_new(o, "start_commit", str_or_null(in->start_commit));
	json_object_set_new(o, "start_time",
	                    in->start_time > 0 ? json_integer(in->start_time) : json_null());
	json_object_set_new(o, "end_time",
	                    in->end_time > 0 ? json_integer(in->end_time) : json_null());
	json_object_set_new(o, "end_commit", str_or_null(s ? s->end_commit : NULL));
	json_object_set_new(o, "branch", str_or_null(s ? s->branch : NULL));
	if (s && s->end_commit) {
		struct buf cmd = BUF_INIT;

		summary_fetch_command(s, &cmd);
		json_object_set_new(o, "fetch", text_value(cmd.buf));
		buf_release(&cmd);
	} else {
		json_object_set_new(o, "fetch", json_null());
	}
	json_object_set_new(o, "no_changes", json_boolean(s && s->no_changes));
	json_object_set_new(o, "result", s && s->result ? result_object(s->result) : json_null());
	json_object_set_new(o, "hosts", s && s->report ? report_object(s->report) : json_null());
	json_object_set_new(o, "hosts_why",
	                    s && !s->report && s->report_why ? text_value(s->report_why)
	                                                     : json_null());
	/* JSON_ENSURE_ASCII: the VM's text goes as \u escapes, never raw bytes. */
	text = json_dumps(o, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_COMPACT |
	                         JSON_REAL_PRECISION(12));
	if (text) {
		buf_addstr(out, text);
		buf_addch(out, '\n');
	}
	free(text);
	json_decref(o);
}

/* A string of at most max bytes, copied: 1 set, 0 missing, <0 refused. */
static int get_str(json_t *o, const char *key, size_t max, char **out, struct buf *err)
{
	const char *s = NULL;
	int r = json_get_str(o, key, JSON_OPTIONAL, max, &s, err);

	*out = r > 0 ? xstrdup(s) : NULL;
	return r;
}

/* A Unix time (after 1970, before 2^40 s): 0 when missing, <0 refused. */
static int get_time(json_t *o, const char *key, time_t *out, struct buf *err)
{
	int64_t t = 0;
	int r = json_get_int(o, key, JSON_OPTIONAL, 1, ((int64_t)1 << 40) - 1, &t, err);

	*out = (time_t)t;
	return r;
}

static int get_commit(json_t *o, const char *key, char out[OID_HEX_MAX + 1], struct buf *err)
{
	int r = result_commit_get(o, key, out);

	if (r < 0)
		buf_addf(err, "'%s' is not a commit id", key);
	return r;
}

int task_record_parse(const char *p, size_t n, struct task_record *r, struct buf *err)
{
	struct buf why = BUF_INIT;
	json_t *root, *v = NULL;
	json_error_t jerr;
	const char *state = NULL, *group = NULL;
	char *text = NULL;
	int64_t i;
	int ret = -EINVAL;

	memset(r, 0, sizeof(*r));
	if (n > TASK_RECORD_MAX) {
		buf_addf(err, "summary.json: over %d bytes", TASK_RECORD_MAX);
		return -EFBIG;
	}
	root = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		buf_addstr(err, "summary.json: not JSON (");
		json_error_why(&jerr, err);
		buf_addch(err, ')');
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		buf_addstr(&why, "not an object");
		goto out;
	}
	if (json_get_int(root, "version", 0, TASK_RECORD_VERSION, TASK_RECORD_VERSION, &i, &why) <
	        0 ||
	    json_get_str(root, "state", 0, 32, &state, &why) < 0)
		goto out;
	for (size_t k = 0; k < ARRAY_SIZE(states); k++)
		if (!strcmp(state, states[k]))
			memcpy(r->state, states[k], strlen(states[k]) + 1);
	if (!r->state[0]) {
		buf_addstr(&why, "'state' is not a known state");
		goto out;
	}
	if (json_get_int(root, "exit", 0, 0, 255, &i, &why) < 0)
		goto out;
	r->exit_code = (int)i;
	if (json_get_str(root, "group", JSON_OPTIONAL, TASK_ID_LEN, &group, &why) < 0)
		goto out;
	if (group && !task_id_valid(group)) {
		buf_addstr(&why, "'group' is not a group id");
		goto out;
	}
	if (group)
		memcpy(r->group, group, TASK_ID_LEN + 1);
	if (json_get_real(root, "seconds", 0, 0, 1e9, &r->seconds, &why) < 0 ||
	    get_str(root, "why", TASK_RECORD_WHY_MAX, &r->why, &why) < 0 ||
	    get_str(root, "hosts_why", TASK_RECORD_WHY_MAX, &r->report_why, &why) < 0 ||
	    get_commit(root, "start_commit", r->start_commit, &why) < 0 ||
	    get_time(root, "start_time", &r->start_time, &why) < 0 ||
	    get_time(root, "end_time", &r->end_time, &why) < 0 ||
	    get_commit(root, "end_commit", r->end_commit, &why) < 0 ||
	    json_get_bool(root, "no_changes", 0, &r->no_changes, &why) < 0 ||
	    json_get_obj(root, "result", JSON_OPTIONAL, &v, &why) < 0)
		goto out;
	if (v) {
		if (!(text = json_dumps(v, JSON_COMPACT)))
			die_oom();
		if (result_parse(text, strlen(text), &r->result, err) < 0)
			goto out;
		r->has_result = 1;
		free(text);
		text = NULL;
	}
	v = NULL;
	if (json_get_obj(root, "hosts", JSON_OPTIONAL, &v, &why) < 0)
		goto out;
	if (v) {
		if (!(text = json_dumps(v, JSON_COMPACT)))
			die_oom();
		if (proxy_report_parse(text, strlen(text), &r->report, err) < 0)
			goto out;
		r->has_report = 1;
	}
	ret = 0;
out:
	free(text);
	json_decref(root);
	if (why.len)
		buf_addf(err, "summary.json: %s", why.buf);
	buf_release(&why);
	if (ret < 0)
		task_record_release(r);
	return ret;
}

void task_record_release(struct task_record *r)
{
	free(r->why);
	free(r->report_why);
	if (r->has_result)
		result_release(&r->result);
	proxy_report_release(&r->report);
	memset(r, 0, sizeof(*r));
}

void task_start_line(struct buf *out, const char *id, const char *commit)
{
	buf_addf(out, "task %s starts from %s", id, commit);
}

void task_summary_print(int fd, time_t when, const char *id, const struct summary_in *in,
                        int finished, const char *why)
{
	struct summary sum = SUMMARY_INIT;
	struct buf b = BUF_INIT;

	summary_make(in, &sum);
	for (size_t i = 0; i < sum.nr; i++)
		out_write_at(fd, when, sum.v[i].vm ? "vm" : "aibox", id, sum.v[i].text,
		             strlen(sum.v[i].text));
	summary_release(&sum);
	if (why && *why)
		buf_addf(&b, "the task did not finish: %s", why);
	else if (!finished)
		buf_addstr(&b, "the task did not finish");
	/* the why may quote the VM (docs/internals.md, "Output") */
	if (b.len)
		out_write_quoting(fd, when, "aibox", id, b.buf, b.len);
	buf_release(&b);
}
