#include "task.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "gitconfig.h"
#include "guest_ca.h"
#include "base/guest_env.h"
#include "resume.h"
#include "base/session_file.h"
#include "base/strvec.h"
#include "task_int.h"
#include "task/task_settings.h"
#include "base/banned.h"

const char *const step_names[S_NR] = {"clone", "claude", "commit", "bundle"};

/* ---- settings --------------------------------------------------------- */

/* settings.json through the one parser (common/task/task_settings.h), task mode only. */
int read_settings(struct guest_task *t, struct buf *err)
{
	struct task_settings_doc d;
	struct buf b = BUF_INIT, file = BUF_INIT;
	ssize_t n;
	int ret = -1;

	buf_addf(&file, "%s/" GUEST_FILE_SETTINGS, t->o->share);
	n = buf_read_file(&b, file.buf, GUEST_SETTINGS_MAX);
	if (n < 0) {
		buf_addf(err, "cannot read '%s': %s", file.buf, strerror((int)-n));
		goto out;
	}
	if (task_settings_parse(b.buf, b.len, &d, err) < 0)
		goto out;
	if (d.s.mode != TASK_MODE_TASK) {
		buf_addstr(err, "settings.json: \"mode\" is not 'task'");
		task_settings_doc_release(&d);
		goto out;
	}
	/* The strings stay in the JSON, which t keeps until the task ends. */
	t->settings = d.root;
	t->model = d.s.model;
	t->timeout_s = d.s.timeout_s;
	t->has_budget = d.s.has_budget;
	t->budget = d.s.max_budget_usd;
	t->git_name = d.s.git_name;
	t->git_email = d.s.git_email;
	t->start = d.s.start_commit;
	t->env_names = json_object_get(d.root, "env_names");
	t->api = task_api_name(d.s.api);
	t->proxy = d.s.proxy;
	t->path = d.s.path;
	t->system_prompt = d.s.system_prompt;
	memcpy(t->git_remotes, d.s.git_remotes, d.s.ngit_remotes * sizeof(*t->git_remotes));
	t->ngit_remotes = d.s.ngit_remotes;
	memcpy(t->ph_names, d.s.ph_names, d.s.nph * sizeof(*t->ph_names));
	memcpy(t->ph_values, d.s.ph_values, d.s.nph * sizeof(*t->ph_values));
	t->nph = d.s.nph;
	t->resume = d.s.resume_session;
	t->check = d.s.check;
	t->check_timeout_ms = d.s.check_timeout_ms ? d.s.check_timeout_ms : GUEST_CHECK_TIMEOUT_MS;
	ret = 0;
out:
	buf_release(&b);
	buf_release(&file);
	return ret;
}

/* ---- the task ----------------------------------------------------------- */

/* Run one step in a group of its own; a step not ok becomes the failed step. */
typedef void (*step_fn)(struct guest_task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline);

static int run_step(struct guest_task *t, int idx, step_fn fn, int64_t deadline)
{
	struct step_info *si = &t->steps[idx];
	struct step_group g;
	int64_t start = clock_ms();
	int err;

	si->start_ms = start - t->t0;
	err = step_group_create(&g, t->o->backend, step_names[idx]);
	if (err < 0) {
		si->status = "failed";
		progress(t, "cannot make the group for %s: %s", step_names[idx], strerror(-err));
	} else {
		fn(t, si, &g, deadline);
		err = step_group_destroy(&g);
		if (err < 0)
			vmlog(t, "the group of %s did not go away cleanly: %s", step_names[idx],
			      strerror(-err));
	}
	si->ms = clock_ms() - start;
	if (!si->status)
		si->status = "failed";
	if (strcmp(si->status, "ok") && strcmp(si->status, "skipped") && t->failed_step < 0)
		t->failed_step = idx;
	return !strcmp(si->status, "ok") || !strcmp(si->status, "skipped");
}

/* A failure before the steps: it counts as the clone's. */
static void fail_before(struct guest_task *t)
{
	t->steps[S_CLONE].status = "failed";
	t->failed_step = S_CLONE;
}

/* The task CA of the task folder, if any, into o->ca_bundle (guest_ca.h). */
static int task_ca_add(struct guest_task *t, struct buf *why)
{
	struct buf pem = BUF_INIT;
	int r = guest_ca_read(t->o->share, &pem, why);

	if (r > 0 && (r = guest_ca_install(t->o->ca_bundle, &pem, why)) == 0) {
		t->task_ca = 1;
		vmlog(t, "the task CA is in %s", t->o->ca_bundle);
	}
	buf_release(&pem);
	return r < 0 ? r : 0;
}

/*
 * Everything the steps need but the secrets: the results folder, the
 * settings, git and Claude Code, the git remotes' rewrite.  The secrets are
 * read at the clone step's end (step_clone()), while they come from the host;
 * vm.log's session line is written beside Claude Code's start (step_claude()).
 * 0, or -1 after a progress line and fail_before().
 */
static int task_prepare(struct guest_task *t)
{
	const struct guest_task_opts *o = t->o;
	struct buf why = BUF_INIT;
	int err, ret = -1;

	err = results_open(t);
	if (err < 0)
		progress(t, "cannot open the results folder '%s': %s", t->results, strerror(-err));
	vmlog(t, "task mode: share %s, state %s", o->share, o->state);
	if (o->early_task && o->go_secrets && access(o->go_secrets, F_OK) == 0)
		vmlog(t, "started by the init before the session (the go message carried the "
		         "secrets: Claude Code does not wait for them)");
	else if (o->early_task)
		vmlog(t, "started by the init before the session (settings.json names no secrets: "
		         "Claude Code does not wait for them)");

	/* The settings' reading counts as part of the clone step (as the secrets' does). */
	if (read_settings(t, &why) < 0)
		progress(t, "%s", why.buf);
	else if (!(t->git = find_in_path("git")))
		progress(t, "cannot find git in %s", GUEST_PATH);
	else if (!(t->claude = o->claude ? xstrdup(o->claude) : find_in_path("claude")))
		progress(t, "cannot find claude in %s", GUEST_PATH);
	else if (err >= 0 && o->gitconfig &&
	         git_remotes_write(o->gitconfig, t->git_remotes, t->ngit_remotes,
	                           t->proxy ? t->proxy : GUEST_PROXY_URL, &why) < 0)
		progress(t, "%s", why.buf);
	else if (err >= 0 && o->ca_bundle && task_ca_add(t, &why) < 0)
		progress(t, "%s", why.buf);
	else if (err >= 0)
		ret = 0; /* else: said above */
	if (ret < 0)
		fail_before(t);
	buf_release(&why);
	return ret;
}

void claude_results_send(struct guest_task *t)
{
	if (t->claude_sent)
		return;
	t->claude_sent = 1;
	if (t->transcript_fd >= 0)
		results_send_file(t, guest_results[RESULT_TRANSCRIPT].name, t->transcript_fd,
		                  TRANSCRIPT_MAX);
	resume_send(t);
	vmlog(t, "what Claude Code left is sent");
}

/* The steps, and the results each leaves, sent as soon as they are complete. */
static void task_steps(struct guest_task *t)
{
	int64_t deadline;

	if (!run_step(t, S_CLONE, step_clone, 0))
		return;
	/* Whatever way Claude Code ended, what it left is committed and sent. */
	run_step(t, S_CLAUDE, step_claude, 0);
	if (t->secrets_later)
		secrets_take_later(t);
	deadline = clock_ms() + t->o->git_limit_ms;

	/* What Claude Code left goes beside the commit step's git status (else here). */
	if (run_step(t, S_COMMIT, step_commit, deadline))
		run_step(t, S_BUNDLE, step_bundle, deadline);
	claude_results_send(t);
	bundle_spec_drop(t);
	if (t->changes)
		results_send_file(t, guest_results[RESULT_BUNDLE].name, t->bundle_fd, BUNDLE_MAX);
	/* After the bundle, so that what it changes stays out; after a stop too (the code may be
	 * worth checking). */
	if (t->check)
		task_check(t);
}

static void task_release(struct guest_task *t)
{
	json_decref(t->result_line);
	json_decref(t->settings);
	buf_release(&t->line);
	buf_release(&t->check_tail);
	free(t->git);
	free(t->claude);
	free(t->results);
	free(t->end_commit);
	if (t->log_fd >= 0)
		close(t->log_fd);
	if (t->transcript_fd >= 0)
		close(t->transcript_fd);
	if (t->bundle_fd >= 0)
		close(t->bundle_fd);
}

void guest_task_opts_fill(struct guest_task_opts *o)
{
	struct passwd *pw = getpwnam(GUEST_USER);

	memset(o, 0, sizeof(*o));
	o->share = GUEST_SHARE;
	o->state = GUEST_STATE;
	o->home = GUEST_HOME;
	o->claude = NULL;
	o->gitconfig = "/etc/gitconfig";
	o->ca_bundle = GUEST_CA_BUNDLE;
	o->backend = STEP_CGROUP;
	o->drop = 1;
	o->uid = pw ? pw->pw_uid : 1000;
	o->gid = pw ? pw->pw_gid : 1000;
	o->git_limit_ms = 10 * 60 * 1000;
	o->early = GUEST_RUN_DIR "/early-clone";
	o->go_secrets = GUEST_GO_SECRETS;
	o->in = 0;
	o->out = 1;
	o->err = 2;
}
void guest_task_init(struct guest_task *t, const struct guest_task_opts *o)
{
	memset(t, 0, sizeof(*t));
	t->o = o;
	t->t0 = clock_ms();
	t->log_fd = t->transcript_fd = t->bundle_fd = -1;
	t->failed_step = -1;
	t->session_fork_ms = -1;
	strvec_init(&t->secrets);
}

int task_run(const struct guest_task_opts *o)
{
	struct guest_task task, *t = &task;
	int ret;

	guest_task_init(t, o);
	/* Orphans of a killed step come back to us, to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	if (task_prepare(t) == 0)
		task_steps(t);
	secrets_clear(t);
	ret = results_finish(t) < 0 ? EXIT_ERROR : 0;
	task_release(t);
	return ret;
}

int task_session(void)
{
	struct guest_task_opts o;
	int ret;

	guest_task_opts_fill(&o);
	if ((ret = task_early_attach(&o)) >= 0)
		return ret;
	return task_run(&o);
}
