#include "task.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "gitconfig.h"
#include "resume.h"
#include "session_file.h"
#include "strvec.h"
#include "task_int.h"
#include "banned.h"

const char *const step_names[S_NR] = {"clone", "claude", "commit", "bundle"};

/* ---- settings --------------------------------------------------------- */

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

int is_env_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 128 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* A string member: NULL (with *why set) unless present, a string, 1..max bytes. */
static const char *get_str(json_t *o, const char *key, size_t max, int nullable, struct buf *why)
{
	json_t *v = json_object_get(o, key);

	if (nullable && (!v || json_is_null(v)))
		return NULL;
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		if (!why->len)
			buf_addf(why, "\"%s\" is missing or not a string of 1 to %zu bytes", key,
			         max);
		return NULL;
	}
	return json_string_value(v);
}

static int path_ok(const char *p)
{
	if (p[0] != '/' || !strcmp(p, "/") || strstr(p, "//") || has_control(p))
		return 0;
	for (const char *c = p; (c = strchr(c, '/')); c++)
		if (!strncmp(c, "/./", 3) || !strncmp(c, "/../", 4) || !strcmp(c, "/.") ||
		    !strcmp(c, "/.."))
			return 0;
	return p[strlen(p) - 1] != '/';
}

static int read_settings(struct task *t, struct buf *why)
{
	struct buf b = BUF_INIT, file = BUF_INIT;
	json_t *s, *v, *git;
	json_error_t jerr;
	ssize_t n;
	const char *str;

	buf_addf(&file, "%s/settings.json", t->o->share);
	n = buf_read_file(&b, file.buf, SETTINGS_MAX);
	if (n < 0) {
		buf_addf(why, "cannot read '%s': %s", file.buf, strerror((int)-n));
		goto fail;
	}
	s = t->settings = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!s || !json_is_object(s)) {
		buf_addf(why, "settings.json: %s", s ? "not an object" : jerr.text);
		goto fail;
	}
	v = json_object_get(s, "version");
	if (!json_is_integer(v) || json_integer_value(v) != 1) {
		buf_addstr(why, "settings.json: \"version\" is not 1");
		goto fail;
	}
	str = get_str(s, "mode", 16, 0, why);
	if (str && strcmp(str, "task"))
		buf_addf(why, "settings.json: \"mode\" is '%s', not 'task'", str);
	str = get_str(s, "id", 6, 0, why);
	if (str && !is_hex(str, 6) && !why->len)
		buf_addstr(why, "settings.json: \"id\" is not 6 lowercase hex digits");
	t->model = get_str(s, "model", 128, 1, why);
	if (t->model && (has_control(t->model) || t->model[0] == '-') && !why->len)
		buf_addstr(why, "settings.json: bad \"model\"");
	v = json_object_get(s, "timeout_s");
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 7 * 86400) {
		if (!why->len)
			buf_addstr(why, "settings.json: \"timeout_s\" is not 1 to 604800");
	} else {
		t->timeout_s = (long)json_integer_value(v);
	}
	v = json_object_get(s, "max_budget_usd");
	if (v && !json_is_null(v)) {
		if (!json_is_number(v) || !(json_number_value(v) > 0) ||
		    json_number_value(v) > 1e6) {
			if (!why->len)
				buf_addstr(why, "settings.json: bad \"max_budget_usd\"");
		} else {
			t->budget = json_number_value(v);
			t->has_budget = 1;
		}
	}
	git = json_object_get(s, "git");
	if (!json_is_object(git)) {
		if (!why->len)
			buf_addstr(why, "settings.json: \"git\" is not an object");
	} else {
		t->git_name = get_str(git, "name", 256, 0, why);
		t->git_email = get_str(git, "email", 256, 0, why);
		if (((t->git_name && has_control(t->git_name)) ||
		     (t->git_email && has_control(t->git_email))) &&
		    !why->len)
			buf_addstr(why, "settings.json: control characters in \"git\"");
	}
	t->start = get_str(s, "start_commit", 64, 0, why);
	if (t->start && !is_hex(t->start, strlen(t->start) == 64 ? 64 : 40) && !why->len)
		buf_addstr(why,
		           "settings.json: \"start_commit\" is not a lowercase hex object name");
	str = get_str(s, "branch", 64, 0, why);
	if (str && strcmp(str, BRANCH) && !why->len)
		buf_addf(why, "settings.json: \"branch\" is not '%s'", BRANCH);
	t->env_names = json_object_get(s, "env_names");
	if (!json_is_array(t->env_names) || json_array_size(t->env_names) > ENV_NAMES_MAX) {
		if (!why->len)
			buf_addstr(why, "settings.json: \"env_names\" is not an array of names");
	} else {
		size_t i;

		json_array_foreach(
		    t->env_names, i,
		    v) if ((!json_is_string(v) || !is_env_name(json_string_value(v))) && !why->len)
		    buf_addstr(why, "settings.json: bad name in \"env_names\"");
	}
	t->api = get_str(s, "api", 16, 0, why);
	if (t->api && strcmp(t->api, "forward") && strcmp(t->api, "oauth") &&
	    strcmp(t->api, "none") && !why->len)
		buf_addf(why, "settings.json: unknown \"api\" '%s'", t->api);
	t->proxy = get_str(s, "proxy", 256, 1, why);
	if (t->proxy &&
	    (strncmp(t->proxy, "http://", 7) || has_control(t->proxy) || strchr(t->proxy, ' ')) &&
	    !why->len)
		buf_addstr(why, "settings.json: \"proxy\" is not an http:// URL");
	t->path = json_object_get(s, "path") ? get_str(s, "path", 1024, 0, why) : "/project";
	if (t->path && !path_ok(t->path) && !why->len)
		buf_addstr(why, "settings.json: \"path\" is not a clean absolute path");
	t->system_prompt = get_str(s, "system_prompt", SYSTEM_PROMPT_MAX, 1, why);
	t->git_remotes = json_object_get(s, "git_remotes");
	t->resume = get_str(s, "resume_session", SESSION_ID_LEN, 1, why);
	if (t->resume && !session_id_valid(t->resume) && !why->len)
		buf_addstr(why, "settings.json: \"resume_session\" is not a session id");
	if (why->len)
		goto fail;
	buf_release(&b);
	buf_release(&file);
	return 0;
fail:
	buf_release(&b);
	buf_release(&file);
	return -1;
}

/* ---- the task ----------------------------------------------------------- */

/* Run one step in a group of its own; a step not ok becomes the failed step. */
typedef void (*step_fn)(struct task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline);

static int run_step(struct task *t, int idx, step_fn fn, int64_t deadline)
{
	struct step_info *si = &t->steps[idx];
	struct step_group g;
	int64_t start = now_ms();
	int err;

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
	si->ms = now_ms() - start;
	if (!si->status)
		si->status = "failed";
	if (strcmp(si->status, "ok") && strcmp(si->status, "skipped") && t->failed_step < 0)
		t->failed_step = idx;
	return !strcmp(si->status, "ok") || !strcmp(si->status, "skipped");
}

/* A failure before the steps: it counts as the clone's. */
static void fail_before(struct task *t)
{
	t->steps[S_CLONE].status = "failed";
	t->failed_step = S_CLONE;
}

/*
 * Everything the steps need: the results folder, the settings, the secrets,
 * git and Claude Code, the git remotes' rewrite.  0, or -1 after a progress
 * line and fail_before().
 */
static int task_prepare(struct task *t)
{
	const struct task_opts *o = t->o;
	struct buf why = BUF_INIT;
	int err, ret = -1;

	err = results_open(t);
	if (err < 0)
		progress(t, "cannot open the results folder '%s': %s", t->results, strerror(-err));
	vmlog(t, "task mode: share %s, state %s", o->share, o->state);

	/* Reading the settings and the secrets counts as part of the clone step. */
	if (read_settings(t, &why) < 0 || secrets_read(t, &why) < 0)
		progress(t, "%s", why.buf);
	else if (!(t->git = find_in_path("git")))
		progress(t, "cannot find git in %s", GUEST_PATH);
	else if (!(t->claude = o->claude ? xstrdup(o->claude) : find_in_path("claude")))
		progress(t, "cannot find claude in %s", GUEST_PATH);
	else if (err >= 0 && o->gitconfig &&
	         git_remotes_write(o->gitconfig, t->git_remotes,
	                           t->proxy ? t->proxy : "http://10.0.2.100:3128", &why) < 0)
		progress(t, "%s", why.buf);
	else if (err >= 0)
		ret = 0; /* else: said above */
	if (ret < 0)
		fail_before(t);
	buf_release(&why);
	return ret;
}

/* The steps, and the results each leaves, sent as soon as they are complete. */
static void task_steps(struct task *t)
{
	int64_t deadline;

	if (!run_step(t, S_CLONE, step_clone, 0))
		return;
	/* Whatever way Claude Code ended, what it left is committed and sent. */
	run_step(t, S_CLAUDE, step_claude, 0);
	deadline = now_ms() + t->o->git_limit_ms;

	if (t->transcript_fd >= 0)
		results_send_file(t, "transcript.jsonl", t->transcript_fd, TRANSCRIPT_MAX);
	resume_send(t);
	if (run_step(t, S_COMMIT, step_commit, deadline))
		run_step(t, S_BUNDLE, step_bundle, deadline);
	if (t->changes)
		results_send_file(t, "changes.bundle", t->bundle_fd, BUNDLE_MAX);
}

static void task_release(struct task *t)
{
	json_decref(t->result_line);
	json_decref(t->settings);
	buf_release(&t->line);
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

void task_opts_guest(struct task_opts *o)
{
	struct passwd *pw = getpwnam(GUEST_USER);

	memset(o, 0, sizeof(*o));
	o->share = GUEST_SHARE;
	o->state = GUEST_STATE;
	o->home = GUEST_HOME;
	o->claude = NULL;
	o->gitconfig = "/etc/gitconfig";
	o->backend = STEP_CGROUP;
	o->drop = 1;
	o->uid = pw ? pw->pw_uid : 1000;
	o->gid = pw ? pw->pw_gid : 1000;
	o->git_limit_ms = 10 * 60 * 1000;
	o->in = 0;
	o->out = 1;
	o->err = 2;
}
int task_run(const struct task_opts *o)
{
	struct task task = {0}, *t = &task;
	int ret;

	t->o = o;
	t->t0 = now_ms();
	t->log_fd = t->transcript_fd = t->bundle_fd = -1;
	t->failed_step = -1;
	strvec_init(&t->secrets);
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
	struct task_opts o;

	task_opts_guest(&o);
	return task_run(&o);
}
