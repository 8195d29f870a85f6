/*
 * Task mode's results: the folder on the state disk they are written to, and
 * the ustar stream on stdout they are sent in, result.json last (task_int.h,
 * docs/internals.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "tar_out.h"
#include "task_int.h"
#include "base/banned.h"

void results_send_file(struct guest_task *t, const char *name, int fd, uint64_t max)
{
	int err;

	if (t->out_broken)
		return;
	err = tar_out_file(t->o->out, name, fd, max);
	if (err < 0) {
		t->out_broken = 1;
		progress(t, "cannot send %s: %s", name, strerror(-err));
	}
}

static json_t *json_cut_string(const char *s, size_t max)
{
	size_t n = strlen(s);
	struct buf b = BUF_INIT;
	json_t *j;

	if (n <= max)
		return json_string(s);
	/* Cut at a character boundary, and say so. */
	while (n > 0 && (n > max || ((unsigned char)s[n] & 0xc0) == 0x80))
		n--;
	buf_add(&b, s, n);
	buf_addf(&b, "\n[cut by aibox-init at %zu bytes]", max);
	j = json_string(b.buf);
	buf_release(&b);
	return j;
}

static json_t *claude_json(struct guest_task *t)
{
	json_t *c, *r = t->result_line, *v;

	if (!t->claude_ran)
		return json_null();
	c = json_object();
	json_object_set_new(c, "exit_code",
	                    t->claude_timed_out ? json_null() : json_integer(t->claude_exit));
	v = json_object_get(r, "num_turns");
	json_object_set_new(c, "num_turns",
	                    json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null());
	v = json_object_get(r, "duration_ms");
	json_object_set_new(c, "duration_ms",
	                    json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null());
	v = json_object_get(r, "total_cost_usd");
	json_object_set_new(c, "total_cost_usd",
	                    json_is_number(v) ? json_real(json_number_value(v)) : json_null());
	json_object_set_new(c, "ended_by", json_string(ended_by(t)));
	v = json_object_get(r, "subtype");
	json_object_set_new(c, "subtype",
	                    json_is_string(v) ? json_cut_string(json_string_value(v), 64)
	                                      : json_null());
	v = json_object_get(r, "result");
	json_object_set_new(c, "last_message",
	                    json_is_string(v) &&
	                            strlen(json_string_value(v)) == json_string_length(v)
	                        ? json_cut_string(json_string_value(v), LAST_MESSAGE_MAX)
	                        : json_null());
	return c;
}

static char *result_json(struct guest_task *t)
{
	json_t *root = json_object(), *steps = json_array();
	char *s;

	json_object_set_new(root, "version", json_integer(1));
	for (int i = 0; i < S_NR; i++) {
		struct step_info *si = &t->steps[i];
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(step_names[i]));
		json_object_set_new(o, "status", json_string(si->status ? si->status : "skipped"));
		json_object_set_new(o, "start_s", json_real((double)si->start_ms / 1000.0));
		json_object_set_new(o, "seconds", json_real((double)si->ms / 1000.0));
		json_object_set_new(o, "exit_code",
		                    si->has_exit ? json_integer(si->exit_code) : json_null());
		json_array_append_new(steps, o);
	}
	json_object_set_new(root, "steps", steps);
	json_object_set_new(root, "session_s", json_real((double)t->session_ms / 1000.0));
	if (t->session_fork_ms >= 0)
		json_object_set_new(root, "session_fork_s",
		                    json_real((double)t->session_fork_ms / 1000.0));
	json_object_set_new(root, "failed_step",
	                    t->failed_step >= 0 ? json_string(step_names[t->failed_step])
	                                        : json_null());
	json_object_set_new(root, "claude", claude_json(t));
	json_object_set_new(root, "start_commit", t->start ? json_string(t->start) : json_null());
	json_object_set_new(root, "end_commit",
	                    t->end_commit ? json_string(t->end_commit) : json_null());
	json_object_set_new(root, "changes", json_boolean(t->changes));
	json_object_set_new(root, "check", check_json(t));
	s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	json_decref(root);
	return s;
}

int results_open(struct guest_task *t)
{
	struct buf b = BUF_INIT;
	int ret = 0;

	buf_addf(&b, "%s/aibox-results", t->o->state);
	if (mkdir(b.buf, 0700) < 0 && errno != EEXIST)
		ret = -errno;
	t->results = buf_detach(&b, NULL);
	if (ret)
		return ret;
	buf_addf(&b, "%s/%s", t->results, guest_results[RESULT_VM_LOG].name);
	t->log_fd = open(b.buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (t->log_fd < 0)
		ret = -errno;
	buf_release(&b);
	return ret;
}

int results_finish(struct guest_task *t)
{
	struct buf line = BUF_INIT;
	char *result;
	int64_t at, fork;
	int ret = 0;

	/* An early task: when the session came, and its vm.log line. */
	if (t->o->early_task && early_task_attached(t->o, &at, &fork, &line) == 0) {
		t->session_ms = at > t->t0 ? at - t->t0 : 0;
		t->session_fork_ms = fork > t->t0 ? fork - t->t0 : fork >= 0 ? 0 : -1;
		if (line.len)
			vmlog(t, "%s (at %.3f s of this log)", line.buf,
			      (double)t->session_ms / 1e3);
	}
	buf_release(&line);
	result = result_json(t);

	if (!result || strlen(result) + 1 > RESULT_MAX) {
		free(result);
		result = xstrdup("{\"version\":1,\"failed_step\":\"bundle\",\"steps\":[],"
		                 "\"claude\":null,\"changes\":false}");
	}
	vmlog(t, "task ended%s%s", t->failed_step >= 0 ? ", failed step: " : "",
	      t->failed_step >= 0 ? step_names[t->failed_step] : "");
	if (t->log_fd >= 0)
		results_send_file(t, guest_results[RESULT_VM_LOG].name, t->log_fd, LOG_MAX + 4096);
	if (!t->out_broken) {
		struct buf r = BUF_INIT;

		buf_addstr(&r, result);
		buf_addch(&r, '\n');
		if (tar_out_buf(t->o->out, guest_results[RESULT_JSON].name, r.buf, r.len) < 0 ||
		    tar_out_end(t->o->out) < 0)
			t->out_broken = 1;
		buf_release(&r);
	}
	free(result);
	if (t->out_broken)
		ret = -1;
	return ret;
}
