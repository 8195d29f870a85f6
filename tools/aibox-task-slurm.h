/*
 * aibox task --slurm: the VM phase as a Slurm job (docs/slurm.md).  Part of
 * tools/aibox-task.c, included at its end: both sides run its functions on
 * its struct task, so the node runs the very run_vm() a task on one host
 * runs, and the submitter the very finish_task().
 *
 *   slurm_submit()  the submitting host, in place of run_vm(): the config
 *                   and the secrets into the task folder, srun in the
 *                   foreground, then the node's slurm.status
 *                   (with --detach: sbatch, slurm.job, and return)
 *   slurm_node()    the compute node (aibox-task --slurm-node DIR): the
 *                   secrets taken, the config read, the result files
 *                   opened, run_vm(), slurm.status written
 *   slurm_check()   a submitting host, for a detached task whose job ended
 *                   (aibox-task --slurm-check DIR, run by aibox tasks show
 *                   and list): finish_task() once, under the task's lock
 */

/* The node's status, as the submitter reads it: untrusted, bounded, checked. */
static void read_node_status(struct task *t, struct vm_outcome *o)
{
	struct slurm_status st = SLURM_STATUS_INIT;
	struct buf path = BUF_INIT, data = BUF_INIT, err = BUF_INIT;
	ssize_t n;

	o->session_ret = -1;
	buf_addf(&path, "%s/%s", t->dir.buf, SLURM_STATUS_NAME);
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
	t->boot_s = st.boot_s;
	t->session_s = st.session_s;
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

/*
 * Wait for srun.  On SIGINT, SIGTERM or SIGHUP (on_stop()), cancel the job
 * as scancel does by hand: the node's aibox-task gets SIGTERM and stops as on
 * one host, within the cluster's KillWait (srun's own interrupt kills the
 * step at once, before the node can write its status).  Returns as
 * spawn_wait().
 */
static int wait_job(struct spawn *sp, const char *name)
{
	const struct timespec tick = {0, 100 * 1000 * 1000};
	int status, cancelled = 0;

	for (;;) {
		pid_t r;

		if (stop_signal && !cancelled) {
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

/* A copy of the project's config into the task folder: what the node reads. */
static void write_config_copy(struct task *t)
{
	struct buf path = BUF_INIT, data = BUF_INIT;
	ssize_t n;

	buf_addf(&path, "%s/config.yaml", t->p.dir);
	if ((n = buf_read_file(&data, path.buf, CONFIG_MAX_BYTES)) < 0)
		die_err((int)n, "cannot read '%s'", path.buf);
	write_file(t, SLURM_CONFIG_NAME, &data, 0644);
	buf_release(&path);
	buf_release(&data);
}

/*
 * --detach: the job submitted with sbatch, its node part as the batch
 * script; slurm.job written while we still hold the task's lock, which the
 * node takes when it starts (common/task/slurm_detach.h).  A job sbatch refuses
 * is a task that failed to start.
 */
static void submit_detached(struct task *t, const struct slurm_job *job, const struct strvec *node)
{
	struct slurm_job_rec rec;
	struct spawn sp = SPAWN_INIT;
	struct buf wrap = BUF_INIT, out = BUF_INIT, err = BUF_INIT, path = BUF_INIT;
	int ret;

	buf_addstr(&wrap, "exec");
	for (size_t i = 0; i < node->nr; i++) {
		buf_addstr(&wrap, " ");
		shell_quote(&wrap, node->v[i]);
	}
	strvec_pushl(&sp.args, "sbatch", "--parsable", NULL);
	slurm_job_args(&sp.args, job);
	strvec_pushf(&sp.args, "--chdir=%s", t->dir.buf);
	strvec_pushl(&sp.args, "--output=" SLURM_OUT_NAME, "--open-mode=append", NULL);
	strvec_pushf(&sp.args, "--wrap=%s", wrap.buf);
	sp.in = SPAWN_NULL;
	ret = spawn_capture(&sp, &out, 4096);
	spawn_clear(&sp);
	if (ret == 0 && slurm_job_id_parse(out.buf, out.len, rec.id) < 0)
		ret = -EPROTO;
	if (ret != 0) {
		buf_addf(&path, "%s/%s", t->dir.buf, SLURM_SECRETS_NAME);
		unlink(path.buf);
		if (ret == -EPROTO)
			die("the Slurm job did not start: sbatch gave no job id");
		if (ret < 0)
			die_err(ret, "cannot start sbatch");
		die("the Slurm job did not start (sbatch exit %d; Slurm's reason above)", ret);
	}
	memcpy(rec.start_commit, t->start_commit, sizeof(rec.start_commit));
	if (slurm_job_write(t->dir.buf, &rec, &err) < 0) {
		struct spawn sc = SPAWN_INIT;

		strvec_pushl(&sc.args, "scancel", "--quiet", rec.id, NULL);
		spawn_run(&sc);
		spawn_clear(&sc);
		die("%s (the job %s is cancelled)", err.buf, rec.id);
	}
	out_printf(2, "aibox", t->id, "submitted as the Slurm job %s (job id %s)", job->name,
	           rec.id);
	/* The record is the host's check's to write (--slurm-check). */
	close(t->record_fd);
	t->record_fd = -1;
	buf_reset(&path);
	buf_addf(&path, "%s/summary.json", t->dir.buf);
	if (unlink(path.buf) < 0)
		die_errno("cannot remove '%s'", path.buf);
	phase_done(t, "submit");
	buf_release(&wrap);
	buf_release(&out);
	buf_release(&err);
	buf_release(&path);
}

static void slurm_submit(struct task *t, struct buf *secrets, struct vm_outcome *o)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct slurm_job job = {0};
	struct spawn sp = SPAWN_INIT;
	struct strvec node = STRVEC_INIT;
	struct buf err = BUF_INIT, name = BUF_INIT, prog = BUF_INIT, path = BUF_INIT;
	int ret = -EINTR;

	write_config_copy(t);
	/* The secrets leave this process only through the 0600 file (docs/slurm.md). */
	if (t->api == TASK_API_FORWARD)
		buf_add(&ss.key, t->api_key.buf, t->api_key.len);
	buf_add(&ss.tokens, t->broker_tokens.buf, t->broker_tokens.len);
	buf_add(&ss.env, secrets->buf, secrets->len);
	buf_add(&ss.user_key, t->keys.user_key.buf, t->keys.user_key.len);
	buf_add(&ss.host_blob, t->keys.host_blob.buf, t->keys.host_blob.len);
	/* Grown once, so no stale copy of a value is left behind. */
	buf_grow(&ss.secrets, 64 + 4200 * t->env.secret_values.nr);
	for (size_t i = 0; i < t->env.secret_values.nr; i++)
		slurm_pairs_add(&ss.secrets, t->env.placeholders.v[i], t->env.secret_values.v[i]);
	if (t->api == TASK_API_OAUTH) {
		buf_grow(&ss.oauth, 64 + t->env.oauth.len);
		slurm_pairs_add(&ss.oauth, t->env.oauth_placeholder, t->env.oauth.buf);
	}
	strvec_wipe_clear(&t->env.secret_values);
	buf_wipe_release(&t->env.oauth);
	buf_wipe_release(&t->api_key);
	buf_wipe_release(&t->broker_tokens);
	buf_wipe_release(secrets);
	buf_wipe_release(&t->keys.user_key);
	if (slurm_secrets_write(t->dir.buf, &ss, &err) < 0)
		die("%s", err.buf);
	slurm_secrets_wipe(&ss);

	buf_addf(&name, "aibox-%s", t->name);
	job.name = name.buf;
	job.partition = t->cfg.slurm.partition;
	job.account = t->cfg.slurm.account;
	job.options = &t->cfg.slurm.options;
	job.memory_mib = t->cfg.memory_mib;
	job.cpus = t->cfg.cpus;
	job.timeout_ms = t->o.timeout_ms;
	buf_addf(&prog, "%s/aibox-task", libexec_dir());
	strvec_pushl(&node, prog.buf, "--slurm-node", t->dir.buf, NULL);
	strvec_pushf(&node, "--memory=%lluM", (unsigned long long)t->cfg.memory_mib);
	strvec_pushf(&node, "--cpus=%d", t->cfg.cpus);
	strvec_pushf(&node, "--timeout=%lldms", (long long)t->o.timeout_ms);
	if (t->o.image)
		strvec_pushf(&node, "--image=%s", t->o.image);
	if (t->o.no_sandbox)
		strvec_push(&node, "--no-sandbox");
	if (t->o.has_budget)
		strvec_pushf(&node, "--max-budget-usd=%.6f", t->o.budget);
	if (t->o.detach) {
		strvec_push(&node, "--detach");
		submit_detached(t, &job, &node);
		goto out;
	}
	/* --quit-on-interrupt: a SIGINT (our parent-death signal for it) ends the job at once. */
	strvec_pushl(&sp.args, "srun", "--quiet", "--quit-on-interrupt", NULL);
	slurm_job_args(&sp.args, &job);
	for (size_t i = 0; i < node.nr; i++)
		strvec_push(&sp.args, node.v[i]);
	sp.in = SPAWN_NULL;
	sp.out = SPAWN_NULL; /* the folder's path is our stdout's only line */
	sp.new_session = 1;  /* the terminal's Ctrl-C reaches us only (wait_job()) */
	sp.pdeathsig = SIGINT;
	out_printf(2, "aibox", t->id, "submitted as the Slurm job %s", name.buf);
	if (!stop_signal) {
		if ((ret = spawn_start(&sp)) < 0)
			die_err(ret, "cannot start srun");
		ret = wait_job(&sp, name.buf);
		if (ret != 0)
			log_line(t, "srun exit %d\n", ret);
	}
	spawn_clear(&sp);
	phase_done(t, "slurm");
	/* Still there when the job never started: a failed start, unless we were stopped. */
	buf_addf(&path, "%s/%s", t->dir.buf, SLURM_SECRETS_NAME);
	if (unlink(path.buf) == 0 && !stop_signal)
		die("the Slurm job did not start (srun exit %d; Slurm's reason above)", ret);

	read_node_status(t, o);
	if (stop_signal) {
		buf_reset(&o->why);
		buf_addf(&o->why, TASK_WHY_STOPPED "%s",
		         stop_signal == SIGINT ? "SIGINT" : "a signal");
	}
	/* What the node wrote, through new descriptors (NFS's close-to-open consistency). */
	for (size_t i = 0; i < RESULT_NFILES; i++)
		close(t->result_fds[i]);
	open_results(t, 0);
	start_checker(t);
	if (!t->o.no_sandbox && (ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock aibox-task down");
out:
	strvec_clear(&node);
	buf_release(&err);
	buf_release(&name);
	buf_release(&prog);
	buf_release(&path);
}

/* The task folder DIR of --slurm-node or --slurm-check: t->dir, t->name, t->id. */
static void task_from_dir(struct task *t, const char *opt, const char *dir)
{
	const char *name = strrchr(dir, '/');

	if (dir[0] != '/' || !name || !task_name_valid(name + 1))
		die("%s: '%s' is not a task folder", opt, dir);
	buf_addstr(&t->dir, dir);
	memcpy(t->name, name + 1, TASK_NAME_LEN + 1);
	t->id = t->name + TASK_NAME_LEN - TASK_ID_LEN;
}

static int slurm_node(struct task *t)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct slurm_status st = SLURM_STATUS_INIT;
	struct strvec pair_ph = STRVEC_INIT, pair_val = STRVEC_INIT;
	struct vm_outcome o = VM_OUTCOME_INIT;
	struct buf err = BUF_INIT, path = BUF_INIT, out = BUF_INIT;
	struct timespec now;
	const char *name = strrchr(t->o.slurm_node, '/');
	int status_fd, ret;

	task_from_dir(t, "--slurm-node", t->o.slurm_node);
	/* Detached: the task's lock is ours from before the secrets are taken to our end. */
	if (t->o.detach && (t->task_lock_fd = slurm_task_lock(t->dir.buf, 0)) < 0 &&
	    t->task_lock_fd != -ENOENT)
		die_err(t->task_lock_fd, "cannot lock the task '%s'", t->dir.buf);
	ret = t->task_lock_fd == -ENOENT ? -ENOENT : slurm_secrets_take(t->dir.buf, &ss, &err);
	if (ret == -ENOENT)
		die("the task folder '%s' is not on this node's storage (no %s in it): AIBOX_HOME "
		    "must be on storage the Slurm nodes see (docs/slurm.md)",
		    t->dir.buf, SLURM_SECRETS_NAME);
	if (ret < 0)
		die("%s", err.buf);
	t->api = ss.key.len ? TASK_API_FORWARD : ss.oauth.len ? TASK_API_OAUTH : TASK_API_NONE;
	/* The config's secrets and the token, with their placeholders, for the node's proxy. */
	if (slurm_pairs_parse(&ss.secrets, &t->env.placeholders, &t->env.secret_values) < 0 ||
	    slurm_pairs_parse(&ss.oauth, &pair_ph, &pair_val) < 0 || pair_ph.nr > 1 ||
	    (pair_ph.nr && ss.key.len))
		die("'%s/%s' is not a secrets file of aibox (its secrets)", t->dir.buf,
		    SLURM_SECRETS_NAME);
	if (pair_ph.nr) {
		buf_addstr(&t->env.oauth, pair_val.v[0]);
		memcpy(t->env.oauth_placeholder, pair_ph.v[0], SECRET_PLACEHOLDER_LEN + 1);
	}
	strvec_clear(&pair_ph);
	strvec_wipe_clear(&pair_val);
	t->api_key = ss.key;
	t->broker_tokens = ss.tokens;
	t->keys.user_key = ss.user_key;
	t->keys.host_blob = ss.host_blob;
	/* Handed over: run_vm() wipes the key and the tokens once passed on, and the env. */
	ss.key = ss.tokens = ss.user_key = ss.host_blob = (struct buf)BUF_INIT;

	buf_addf(&path, "%s/aibox.log", t->dir.buf);
	t->aibox_log_fd = open(path.buf, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (t->aibox_log_fd < 0)
		die_errno("cannot open '%s'", path.buf);
	failing_task = t;
	die_routine = task_failed;
	clock_gettime(CLOCK_REALTIME, &now);
	log_line(t, "queue %.3fs (submitted to the node's start)\n",
	         (double)(now.tv_sec - ss.written.tv_sec) +
	             (double)(now.tv_nsec - ss.written.tv_nsec) / 1e9);

	buf_reset(&path);
	buf_addf(&path, "%s/%s", t->dir.buf, SLURM_CONFIG_NAME);
	buf_reset(&err);
	if (config_load(&t->cfg, path.buf, &err) < 0)
		die("%s", err.buf);
	if (t->env.secret_values.nr != t->cfg.nr_secrets)
		die("'%s/%s' holds %zu secrets' values, but '%s' lists %zu secrets", t->dir.buf,
		    SLURM_SECRETS_NAME, t->env.secret_values.nr, path.buf, t->cfg.nr_secrets);
	/* The node's own policy, read again here: the submitting host's may be another's. */
	check_policy(t, path.buf);
	host_size(&t->cfg, t->o.memory_mib, t->o.cpus);
	/* The same caps and day ledger as on one host: the project is the folder's grandparent. */
	if (t->api == TASK_API_FORWARD) {
		struct buf pdir = BUF_INIT;

		buf_add(&pdir, t->dir.buf, (size_t)(name - t->o.slurm_node));
		if (pdir.len > strlen("/tasks") &&
		    !strcmp(pdir.buf + pdir.len - strlen("/tasks"), "/tasks"))
			buf_setlen(&pdir, pdir.len - strlen("/tasks"));
		buf_reset(&err);
		if ((ret = spend_start(
		         &t->spend, pdir.buf,
		         spend_cap_min(t->cfg.budget_task,
		                       t->o.has_budget ? (uint64_t)(t->o.budget * 1e9 + 0.5) : 0),
		         t->cfg.budget_day, &err)) < 0)
			die("%s", err.buf);
		buf_release(&pdir);
	}
	buf_reset(&err);
	if (shares_plan(&t->shares, &t->cfg, getenv("HOME"), &err) < 0)
		die("%s", err.buf);
	buf_reset(&err);
	if (image_find(t->o.image ? t->o.image : "default", &t->image_dir, &err) < 0)
		die("%s", err.buf);
	open_results(t, 0);
	status_fd = open_in_task(t, SLURM_STATUS_NAME, O_WRONLY | O_CREAT | O_EXCL);

	catch_stops();
	run_vm(t, &ss.env, &o);

	st.session_ok = o.session_ret == 0 && !stop_signal && !o.why.len;
	st.stopped = stop_signal != 0;
	st.boot_s = t->boot_s;
	st.session_s = t->session_s;
	buf_add(&st.why, o.why.buf, o.why.len);
	if ((st.have_report = o.have_report))
		proxy_report_json(&o.report, &st.report);
	buf_add(&st.report_why, o.report_why.buf, o.report_why.len);
	slurm_status_json(&st, &out);
	if ((ret = write_all(status_fd, out.buf, out.len)) < 0)
		die_err(ret, "cannot write '%s/%s'", t->dir.buf, SLURM_STATUS_NAME);
	close(status_fd);
	slurm_status_release(&st);
	proxy_report_release(&o.report);
	buf_release(&o.why);
	buf_release(&o.report_why);
	buf_release(&err);
	buf_release(&path);
	buf_release(&out);
	buf_wipe_release(&t->broker_tokens); /* when there was no broker to pass them to */
	slurm_secrets_wipe(&ss);
	return 0;
}

/*
 * aibox-task --slurm-check DIR: a detached task whose job ended, checked on
 * this host as finish_task() checks a task that waited for its job, once,
 * under the task's lock (docs/slurm.md, "Detached tasks").  0 also when
 * there is nothing to do: the lock is held (the job runs, or another
 * command checks it), the task was checked, or its job has not ended.
 */
static int slurm_check(struct task *t)
{
	struct vm_outcome o = VM_OUTCOME_INIT;
	struct slurm_job_rec rec;
	struct buf why = BUF_INIT, pdir = BUF_INIT, path = BUF_INIT;
	struct stat st;
	time_t start, end = time(NULL);
	int dfd, ret;

	task_from_dir(t, "--slurm-check", t->o.slurm_check);
	if ((t->task_lock_fd = slurm_task_lock(t->dir.buf, 1)) == -EWOULDBLOCK)
		return 0;
	if (t->task_lock_fd < 0)
		die_err(t->task_lock_fd, "cannot lock the task '%s'", t->dir.buf);
	if ((dfd = open(t->dir.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		die_errno("cannot open '%s'", t->dir.buf);
	if ((ret = slurm_detached_state(dfd, t->name, &why)) < 0)
		die("cannot check the task '%s': %s", t->dir.buf, why.buf);
	task_group_read(dfd, t->group); /* a detached attempt's, for its record */
	if (ret != SLURM_DETACHED_ENDED || slurm_job_read(dfd, &rec) < 0)
		return 0;
	memcpy(t->start_commit, rec.start_commit, sizeof(rec.start_commit));
	/* The checkout is the project's, the folder's grandparent (its tasks/ is the parent). */
	buf_add(&pdir, t->dir.buf, t->dir.len - TASK_NAME_LEN - 1);
	if (pdir.len > strlen("/tasks"))
		buf_setlen(&pdir, pdir.len - strlen("/tasks"));
	if ((ret = project_read_checkout(pdir.buf, &t->checkout)) < 0)
		die_err(ret, "cannot read the checkout of the project '%s'", pdir.buf);

	buf_addf(&path, "%s/aibox.log", t->dir.buf);
	t->aibox_log_fd = open(path.buf, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (t->aibox_log_fd < 0)
		die_errno("cannot open '%s'", path.buf);
	t->record_fd = open_in_task(t, "summary.json", O_WRONLY | O_CREAT | O_EXCL);
	/* The task's time: its start to its job's end (slurm.status written), not to now. */
	if (fstatat(dfd, SLURM_STATUS_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0)
		end = st.st_mtime;
	if (task_name_parse(t->name, &start, NULL) == 0 && end >= start) {
		t->t0 = clock_ms() - ((int64_t)(end - start) + (time(NULL) - end)) * 1000;
	}
	if (fstatat(dfd, SLURM_JOB_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 && end >= st.st_mtime)
		log_line(t, "slurm %lds (submission to the job's end)\n",
		         (long)(end - st.st_mtime));

	/* slurm.secrets still there: the node never started the task. */
	buf_reset(&path);
	buf_addf(&path, "%s/%s", t->dir.buf, SLURM_SECRETS_NAME);
	if (unlink(path.buf) == 0) {
		const char *msg = "the Slurm job ended before it started the task (cancelled while "
		                  "queued, or refused: see slurm.out)";

		buf_reset(&path);
		buf_addf(&path, "%s/" GUEST_FILE_START_BUNDLE, t->dir.buf);
		unlink(path.buf);
		log_line(t, "total %.3fs exit 2\n", task_clock_since(t->t0));
		write_record(t, "failed to start", 2, msg, NULL);
		ret = 0;
		goto out;
	}
	open_results(t, 0);
	read_node_status(t, &o);
	start_checker(t);
	if ((ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock aibox-task down");
	finish_task(t, &o);
	ret = 0;
out:
	close(dfd);
	buf_release(&why);
	buf_release(&pdir);
	buf_release(&path);
	return ret;
}
