/*
 * Task mode's check: the config's check: command (settings.json "check"),
 * run after the bundle is made, as the task's user in the project folder
 * with Claude Code's environment, in a group of its own and within its
 * time limit (settings.json "check_timeout_ms").  Its exit status, time and the end of its output
 * go into result.json's "check" (docs/tasks.md, "The check"); its changes to the
 * files are not in the bundle, which was made before it.
 */
#include <errno.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "task_int.h"
#include "base/banned.h"

/* Keep the last GUEST_CHECK_TAIL_MAX bytes of stdout and stderr, as they come. */
static int tail_sink(void *ctx, const char *data, size_t n)
{
	struct guest_task *t = ctx;

	buf_add(&t->check_tail, data, n);
	if (t->check_tail.len > 2 * GUEST_CHECK_TAIL_MAX)
		buf_consume(&t->check_tail, t->check_tail.len - GUEST_CHECK_TAIL_MAX);
	return 0;
}

void task_check(struct guest_task *t)
{
	struct step_group g;
	struct step_proc p = {0};
	struct step_result r;
	struct strvec env = STRVEC_INIT;
	const char *argv[] = {"/bin/sh", "-c", t->check, NULL};
	int err;

	if ((err = step_group_create(&g, t->o->backend, "check")) < 0) {
		progress(t, "cannot make the group for the check: %s", strerror(-err));
		return;
	}
	claude_env(t, &env);
	p.argv = argv;
	p.envp = (const char *const *)env.v;
	p.dir = t->path;
	p.drop = t->o->drop;
	p.uid = t->o->uid;
	p.gid = t->o->gid;
	p.in = -1;
	p.on_out = tail_sink;
	p.on_err = tail_sink;
	p.ctx = t;
	progress(t, "check started");
	err = step_run(&p, &g, clock_ms() + t->check_timeout_ms, &r);
	if (err < 0) {
		progress(t, "cannot start the check: %s", strerror(-err));
	} else {
		t->check_ran = 1;
		t->check_code = r.code;
		t->check_timed_out = r.timed_out;
		t->check_ms = r.ms;
		if (r.timed_out)
			progress(t, "the check timed out after %g s and was stopped",
			         (double)t->check_timeout_ms / 1000.0);
		else
			progress(t, "the check exited with %d", r.code);
	}
	if ((err = step_group_destroy(&g)) < 0)
		vmlog(t, "the group of the check did not go away cleanly: %s", strerror(-err));
	strvec_wipe_clear(&env);
}

json_t *check_json(const struct guest_task *t)
{
	struct buf tail = BUF_INIT;
	const char *s = t->check_tail.buf;
	size_t n = t->check_tail.len;
	json_t *o;

	if (!t->check_ran)
		return json_null();
	if (n > GUEST_CHECK_TAIL_MAX) {
		s += n - GUEST_CHECK_TAIL_MAX;
		n = GUEST_CHECK_TAIL_MAX;
	}
	/* ASCII only, so that a cut never splits a character: the host reads it as text. */
	for (size_t i = 0; i < n; i++)
		buf_addch(&tail, (s[i] == '\n' || s[i] == '\t' ||
		                  ((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f))
		                     ? s[i]
		                     : '?');
	o = json_object();
	json_object_set_new(o, "exit_code",
	                    t->check_timed_out ? json_null() : json_integer(t->check_code));
	json_object_set_new(o, "timed_out", json_boolean(t->check_timed_out));
	json_object_set_new(o, "seconds", json_real((double)t->check_ms / 1000.0));
	json_object_set_new(o, "tail", json_string(tail.buf));
	buf_release(&tail);
	return o;
}
