#include "task/slurm_submit.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/shell_quote.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "config/config.h"
#include "proxy/proxy_report.h"
#include "task/slurm.h"
#include "task/slurm_detach.h"
#include "task/task_folder.h"
#include "task/task_vm.h"
#include "base/banned.h"

int slurm_task_dir(const char *opt, const char *dir, char name[TASK_NAME_LEN + 1], struct buf *err)
{
	const char *last = strrchr(dir, '/');

	if (dir[0] != '/' || !last || !task_name_valid(last + 1)) {
		buf_addf(err, "%s: '%s' is not a task folder", opt, dir);
		return -EINVAL;
	}
	memcpy(name, last + 1, TASK_NAME_LEN + 1);
	return 0;
}

void slurm_project_dir(const char *dir, struct buf *out)
{
	const char *last = strrchr(dir, '/');
	size_t at = out->len;

	buf_add(out, dir, last ? (size_t)(last - dir) : strlen(dir));
	if (out->len - at > strlen("/tasks") &&
	    !strcmp(out->buf + out->len - strlen("/tasks"), "/tasks"))
		buf_setlen(out, out->len - strlen("/tasks"));
}

int slurm_config_copy(const char *project_dir, const char *dir, struct buf *err)
{
	struct buf path = BUF_INIT, data = BUF_INIT;
	ssize_t n;
	int ret;

	buf_addf(&path, "%s/config.yaml", project_dir);
	if ((n = buf_read_file(&data, path.buf, CONFIG_MAX_BYTES)) < 0) {
		buf_addf(err, "cannot read '%s': %s", path.buf, strerror((int)-n));
		ret = (int)n;
	} else if ((ret = task_folder_write(dir, SLURM_CONFIG_NAME, &data, 0644)) < 0) {
		buf_addf(err, "cannot write '%s/%s': %s", dir, SLURM_CONFIG_NAME, strerror(-ret));
	}
	buf_release(&path);
	buf_release(&data);
	return ret;
}

void slurm_node_argv(const struct slurm_node_opts *o, struct strvec *argv)
{
	strvec_pushf(argv, "%s/aibox-task", libexec_dir());
	strvec_pushl(argv, "--slurm-node", o->dir, NULL);
	strvec_pushf(argv, "--memory=%lluM", (unsigned long long)o->memory_mib);
	strvec_pushf(argv, "--cpus=%d", o->cpus);
	strvec_pushf(argv, "--timeout=%lldms", (long long)o->timeout_ms);
	if (o->image)
		strvec_pushf(argv, "--image=%s", o->image);
	if (o->no_sandbox)
		strvec_push(argv, "--no-sandbox");
	if (o->has_budget)
		strvec_pushf(argv, "--max-budget-usd=%.6f", o->budget);
	if (o->detach)
		strvec_push(argv, "--detach");
}

int slurm_srun_start(struct spawn *sp, const struct slurm_job *job, const struct strvec *node)
{
	/* --quit-on-interrupt: a SIGINT (our parent-death signal for it) ends the job at once. */
	strvec_pushl(&sp->args, "srun", "--quiet", "--quit-on-interrupt", NULL);
	slurm_job_args(&sp->args, job);
	for (size_t i = 0; i < node->nr; i++)
		strvec_push(&sp->args, node->v[i]);
	sp->in = SPAWN_NULL;
	sp->out = SPAWN_NULL; /* the folder's path is the caller's stdout's only line */
	sp->new_session = 1;  /* the terminal's Ctrl-C reaches the caller only */
	sp->pdeathsig = SIGINT;
	return spawn_start(sp);
}

int slurm_job_wait(struct spawn *sp, const char *name, volatile sig_atomic_t *stop)
{
	const struct timespec tick = {0, 100 * 1000 * 1000};
	int status, cancelled = 0;

	for (;;) {
		pid_t r;

		/*
		 * srun's own interrupt would kill the step at once, before the
		 * node can write its status: the job is cancelled instead.
		 */
		if (*stop && !cancelled) {
			struct spawn sc = SPAWN_INIT;

			strvec_pushl(&sc.args, "scancel", "--quiet", NULL);
			strvec_pushf(&sc.args, "--name=%s", name);
			strvec_pushf(&sc.args, "--user=%u", (unsigned)getuid());
			sc.out = SPAWN_NULL;
			spawn_run(&sc);
			spawn_clear(&sc);
			cancelled = 1;
		}
		r = waitpid(sp->pid, &status, WNOHANG);
		if (r == sp->pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		nanosleep(&tick, NULL);
	}
	sp->pid = -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int slurm_secrets_left(const char *dir)
{
	struct buf path = BUF_INIT;
	int left;

	buf_addf(&path, "%s/%s", dir, SLURM_SECRETS_NAME);
	left = unlink(path.buf) == 0;
	buf_release(&path);
	return left;
}

int slurm_submit_batch(const char *dir, const struct slurm_job *job, const struct strvec *node,
                       const char *start_commit, struct slurm_job_rec *rec, struct buf *err)
{
	struct spawn sp = SPAWN_INIT;
	struct buf wrap = BUF_INIT, out = BUF_INIT;
	int ret;

	buf_addstr(&wrap, "exec");
	for (size_t i = 0; i < node->nr; i++) {
		buf_addstr(&wrap, " ");
		shell_quote(&wrap, node->v[i]);
	}
	strvec_pushl(&sp.args, "sbatch", "--parsable", NULL);
	slurm_job_args(&sp.args, job);
	strvec_pushf(&sp.args, "--chdir=%s", dir);
	strvec_pushl(&sp.args, "--output=" SLURM_OUT_NAME, "--open-mode=append", NULL);
	strvec_pushf(&sp.args, "--wrap=%s", wrap.buf);
	sp.in = SPAWN_NULL;
	ret = spawn_capture(&sp, &out, 4096);
	spawn_clear(&sp);
	if (ret == 0 && slurm_job_id_parse(out.buf, out.len, rec->id) < 0)
		ret = -EPROTO;
	if (ret != 0) {
		slurm_secrets_left(dir);
		if (ret == -EPROTO)
			buf_addstr(err, "the Slurm job did not start: sbatch gave no job id");
		else if (ret < 0)
			buf_addf(err, "cannot start sbatch: %s", strerror(-ret));
		else
			buf_addf(
			    err,
			    "the Slurm job did not start (sbatch exit %d; Slurm's reason above)",
			    ret);
		goto out;
	}
	memcpy(rec->start_commit, start_commit, sizeof(rec->start_commit));
	if ((ret = slurm_job_write(dir, rec, err)) < 0) {
		struct spawn sc = SPAWN_INIT;

		strvec_pushl(&sc.args, "scancel", "--quiet", rec->id, NULL);
		spawn_run(&sc);
		spawn_clear(&sc);
		buf_addf(err, " (the job %s is cancelled)", rec->id);
	}
out:
	buf_release(&wrap);
	buf_release(&out);
	return ret;
}

void slurm_status_outcome(const char *dir, struct vm_outcome *o)
{
	struct slurm_status st = SLURM_STATUS_INIT;
	struct buf path = BUF_INIT, data = BUF_INIT, err = BUF_INIT;
	ssize_t n;

	o->session_ret = -1;
	buf_addf(&path, "%s/%s", dir, SLURM_STATUS_NAME);
	n = buf_read_file(&data, path.buf, SLURM_STATUS_MAX);
	if (n == -ENOENT || n == 0) {
		buf_addstr(&o->why, "the job on the Slurm node ended without its status");
		buf_addstr(&o->report_why, "the job on the Slurm node gave no status");
		goto out;
	}
	if (n < 0 || slurm_status_parse(data.buf, data.len, &st, &err) < 0) {
		if (n < 0)
			buf_addf(&err, "cannot read '%s': %s", path.buf, strerror((int)-n));
		buf_addf(&o->why, "the Slurm node's status refused: %s", err.buf);
		buf_addstr(&o->report_why, "the Slurm node's status was refused");
		goto out;
	}
	o->session_ret = st.session_ok ? 0 : -1;
	if (st.why.len)
		buf_add(&o->why, st.why.buf, st.why.len);
	else if (!st.session_ok)
		buf_addstr(&o->why, "the session on the Slurm node failed");
	o->boot_s = st.boot_s;
	o->session_s = st.session_s;
	buf_reset(&err);
	if (st.have_report &&
	    proxy_report_parse(st.report.buf, st.report.len, &o->report, &err) == 0)
		o->have_report = 1;
	else if (st.have_report)
		buf_addf(&o->report_why, "aibox-proxy's record from the node refused: %s", err.buf);
	else
		buf_add(&o->report_why, st.report_why.buf, st.report_why.len);
out:
	slurm_status_release(&st);
	buf_release(&path);
	buf_release(&data);
	buf_release(&err);
}
