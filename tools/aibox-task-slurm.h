/*
 * aibox task --slurm: the VM phase as a Slurm job (docs/slurm.md).  Part of
 * tools/aibox-task.c, included at its end: both sides run its functions on
 * its struct task, so the node runs the very run_vm() a task on one host
 * runs, and the submitter the very finish_task().
 *
 *   slurm_submit()  the submitting host, in place of run_vm(): the config
 *                   and the secrets into the task folder, srun in the
 *                   foreground, then the node's slurm.status
 *   slurm_node()    the compute node (aibox-task --slurm-node DIR): the
 *                   secrets taken, the config read, the result files
 *                   opened, run_vm(), slurm.status written
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
	const struct timespec tick = { 0, 100 * 1000 * 1000 };
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

static void slurm_submit(struct task *t, struct buf *secrets, struct vm_outcome *o)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct slurm_job job = {0};
	struct spawn sp = SPAWN_INIT;
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
	/* --quit-on-interrupt: a SIGINT (our parent-death signal for it) ends the job at once. */
	strvec_pushl(&sp.args, "srun", "--quiet", "--quit-on-interrupt", NULL);
	slurm_job_args(&sp.args, &job);
	buf_addf(&prog, "%s/aibox-task", libexec_dir());
	strvec_pushl(&sp.args, prog.buf, "--slurm-node", t->dir.buf, NULL);
	strvec_pushf(&sp.args, "--memory=%lluM", (unsigned long long)t->cfg.memory_mib);
	strvec_pushf(&sp.args, "--cpus=%d", t->cfg.cpus);
	strvec_pushf(&sp.args, "--timeout=%lldms", (long long)t->o.timeout_ms);
	if (t->o.image)
		strvec_pushf(&sp.args, "--image=%s", t->o.image);
	if (t->o.no_sandbox)
		strvec_push(&sp.args, "--no-sandbox");
	if (t->o.has_budget)
		strvec_pushf(&sp.args, "--max-budget-usd=%.6f", t->o.budget);
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
		buf_addf(&o->why, "the VM was stopped by %s",
		         stop_signal == SIGINT ? "SIGINT" : "a signal");
	}
	/* What the node wrote, through new descriptors (NFS's close-to-open consistency). */
	for (size_t i = 0; i < RESULT_NFILES; i++)
		close(t->result_fds[i]);
	open_results(t, 0);
	start_checker(t);
	if (!t->o.no_sandbox && (ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock aibox-task down");
	buf_release(&err);
	buf_release(&name);
	buf_release(&prog);
	buf_release(&path);
}

static int slurm_node(struct task *t)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct slurm_status st = SLURM_STATUS_INIT;
	struct vm_outcome o = VM_OUTCOME_INIT;
	struct buf err = BUF_INIT, path = BUF_INIT, out = BUF_INIT;
	struct timespec now;
	const char *name = strrchr(t->o.slurm_node, '/');
	int status_fd, ret;

	if (t->o.slurm_node[0] != '/' || !name || !task_name_valid(name + 1))
		die("--slurm-node: '%s' is not a task folder", t->o.slurm_node);
	buf_addstr(&t->dir, t->o.slurm_node);
	memcpy(t->name, name + 1, TASK_NAME_LEN + 1);
	t->id = t->name + TASK_NAME_LEN - TASK_ID_LEN;

	ret = slurm_secrets_take(t->dir.buf, &ss, &err);
	if (ret == -ENOENT)
		die("the task folder '%s' is not on this node's storage (no %s in it): AIBOX_HOME "
		    "must be on storage the Slurm nodes see (docs/slurm.md)",
		    t->dir.buf, SLURM_SECRETS_NAME);
	if (ret < 0)
		die("%s", err.buf);
	t->api = ss.key.len ? TASK_API_FORWARD : TASK_API_NONE;
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
	host_size(&t->cfg, t->o.memory_mib, t->o.cpus);
	/* The same caps and day ledger as on one host: the project is the folder's grandparent. */
	if (t->api == TASK_API_FORWARD) {
		struct buf pdir = BUF_INIT;

		buf_add(&pdir, t->dir.buf, (size_t)(name - t->o.slurm_node));
		if (pdir.len > strlen("/tasks") &&
		    !strcmp(pdir.buf + pdir.len - strlen("/tasks"), "/tasks"))
			buf_setlen(&pdir, pdir.len - strlen("/tasks"));
		buf_reset(&err);
		if ((ret = spend_start(&t->spend, pdir.buf,
		                       spend_cap_min(t->cfg.budget_task,
		                                     t->o.has_budget ? (uint64_t)(t->o.budget * 1e9 + 0.5)
		                                                     : 0),
		                       t->cfg.budget_day, &err)) < 0)
			die("%s", err.buf);
		buf_release(&pdir);
	}
	buf_reset(&err);
	if (shares_plan(&t->shares, &t->cfg, getenv("HOME"), "m", &err) < 0)
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
