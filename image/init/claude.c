/*
 * Task mode's step claude: Claude Code on the prompt, in the project folder,
 * until it ends or the task's time is up (task_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "resume.h"
#include "task_int.h"
#include "base/banned.h"

const char *ended_by(const struct guest_task *t)
{
	json_t *sub = json_object_get(t->result_line, "subtype");
	json_t *is_error = json_object_get(t->result_line, "is_error");

	if (t->claude_timed_out)
		return "timeout";
	if (json_is_string(sub) && strstr(json_string_value(sub), "budget"))
		return "budget";
	if (t->claude_exit == 0 && t->result_line && !json_is_true(is_error))
		return "completed";
	return "error";
}

void step_claude(struct guest_task *t, struct step_info *si, struct step_group *g, int64_t unused)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct buf file = BUF_INIT;
	struct step_proc p = {0};
	struct step_result r;
	struct step_job job;
	struct stat st;
	int prompt = -1, err;

	si->status = "failed";
	buf_addf(&file, "%s/" GUEST_FILE_PROMPT, t->o->share);
	prompt = open(file.buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (prompt < 0 || fstat(prompt, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > PROMPT_MAX) {
		progress(t, "cannot use '%s': %s", file.buf,
		         prompt < 0 ? strerror(errno) : "not a plain file of at most 1 MiB");
		goto out;
	}
	buf_reset(&file);
	buf_addf(&file, "%s/%s", t->results, guest_results[RESULT_TRANSCRIPT].name);
	t->transcript_fd =
	    open(file.buf, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (t->transcript_fd < 0) {
		progress(t, "cannot open '%s': %s", file.buf, strerror(errno));
		goto out;
	}

	strvec_pushl(&argv, t->claude, "--print", "--verbose", "--output-format", "stream-json",
	             "--permission-mode", "bypassPermissions", NULL);
	/* NAME=value: a value starting with '-' must not read as an option. */
	if (t->model)
		strvec_pushf(&argv, "--model=%s", t->model);
	if (t->has_budget)
		strvec_pushf(&argv, "--max-budget-usd=%.10g", t->budget);
	if (t->system_prompt)
		strvec_pushf(&argv, "--append-system-prompt=%s", t->system_prompt);
	if (t->resume) {
		buf_reset(&file);
		if (resume_place(t->o, t->path, t->resume, &file) < 0) {
			progress(t, "%s", file.buf);
			goto out;
		}
		strvec_pushf(&argv, "--resume=%s", t->resume);
	}
	claude_env(t, &env);

	p.argv = argv.v;
	p.envp = env.v;
	p.dir = t->path;
	p.drop = t->o->drop;
	p.uid = t->o->uid;
	p.gid = t->o->gid;
	p.in = prompt; /* on stdin: a 1 MiB prompt would strain ARG_MAX */
	p.on_out = transcript_sink;
	p.on_err = log_sink;
	p.ctx = t;
	progress(t, "claude started");
	/* Started without waiting for its exec: the session's line is read meanwhile. */
	err = step_start(&p, g, clock_ms() + (int64_t)t->timeout_s * 1000, &job);
	if (err == 0) {
		log_session_start(t);
		err = step_finish(&job, &r);
	}
	if (err < 0) {
		progress(t, "cannot start claude: %s", strerror(-err));
		goto out;
	}
	transcript_flush(t);
	t->claude_ran = 1;
	t->claude_exit = r.code;
	t->claude_timed_out = r.timed_out;
	if (r.timed_out) {
		si->status = "timeout";
		progress(t, "claude timed out after %ld s and was stopped", t->timeout_s);
	} else {
		si->exit_code = r.code;
		si->has_exit = 1;
		progress(t, "claude exited with %d", r.code);
		if (!strcmp(ended_by(t), "completed"))
			si->status = "ok";
	}
out:
	if (prompt >= 0)
		close(prompt);
	strvec_clear(&argv);
	strvec_wipe_clear(&env);
	buf_release(&file);
}
