/*
 * aibox task --attempts N: N attempts of one task side by side (docs/tasks.md,
 * "Several attempts").  Part of tools/aibox-task.c, included at its end.
 *
 * The group's process reads the prompt once, makes a group id and runs the
 * attempts (common/task/task_group.h); it prints each attempt's stdout lines
 * as they come, passes SIGINT, SIGTERM and SIGHUP on and prints the group's
 * line at the end.
 */

/*
 * The attempts asked for: --attempts, else the project config's attempts:
 * (else 1).  More than one are held to the policy here, before any starts
 * (one refusal, not one per attempt); one is held to it by start().
 */
static int group_attempts(struct task *t)
{
	struct buf checkout = BUF_INIT, cfgpath = BUF_INIT, err = BUF_INIT;
	struct project p = PROJECT_INIT;
	struct config cfg;
	int n = t->o.attempts ? t->o.attempts : 1, opened;

	/* Zeroed, it can be released whatever host_project_open() got to. */
	memset(&cfg, 0, sizeof(cfg));
	/* A project that cannot be opened: start() (or each attempt's) says why. */
	opened = host_project_open(&checkout, &p, &cfgpath, &cfg, &err) == 0;
	if (opened && !t->o.attempts)
		n = cfg.attempts;
	if (opened && n > 1)
		check_policy_of(t, p.name, &cfg, cfgpath.buf);
	config_release(&cfg);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&cfgpath);
	buf_release(&err);
	return n;
}

/*
 * The group's start commit, resolved once, and its one start bundle in gdir
 * (task/task_group.h), which every attempt takes as its own.
 */
static void group_start_bundle(struct task *t, const char *gid, struct buf *gdir)
{
	struct buf checkout = BUF_INIT, cfgpath = BUF_INIT, err = BUF_INIT;
	struct project p = PROJECT_INIT;
	struct config cfg;
	char commit[OID_HEX_MAX + 1];

	memset(&cfg, 0, sizeof(cfg));
	if (host_project_open(&checkout, &p, &cfgpath, &cfg, &err) < 0 ||
	    checkout_start_commit(checkout.buf, t->o.from, commit, &err) < 0)
		die("%s", err.buf);
	task_group_dir(gdir, p.dir, gid);
	if (task_group_bundle_make(gdir->buf, checkout.buf, commit, &err) < 0)
		die("%s", err.buf);
	config_release(&cfg);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&cfgpath);
	buf_release(&err);
}

static volatile sig_atomic_t group_signal;

static void on_group_stop(int sig)
{
	group_signal = sig;
}

static void group_line_out(void *ctx, const char *s, size_t n)
{
	(void)ctx;
	write_all(1, s, n);
}

static int run_group(struct task *t, int argc, char **argv)
{
	struct prompt_opts po = {0};
	struct buf prompt = BUF_INIT, err = BUF_INIT, line = BUF_INIT, gdir = BUF_INIT;
	struct task_group g = {0};
	struct sigaction sa = {0};
	int ret, status;

	/* Each attempt would fetch the earlier task into the one checkout: one at a time. */
	if (t->o.cont)
		die("--continue and --attempts: a task is continued by one attempt at a time "
		    "(--attempts 1)");
	g.n = group_attempts(t);
	g.self = "/proc/self/exe";
	g.argv = argv + 1;
	g.argc = argc - 1;
	g.json = t->o.json;
	g.stop = &group_signal;
	g.line_out = group_line_out;

	po.args = t->o.words;
	po.nargs = t->o.nwords;
	po.files = t->o.files;
	po.nfiles = t->o.nfiles;
	po.stdin_fd = 0;
	if (prompt_read(&po, &prompt, &err) < 0)
		die("%s", err.buf);
	if ((ret = task_id_new(g.gid)) < 0)
		die_err(ret, "cannot make a group id");

	group_start_bundle(t, g.gid, &gdir);

	sa.sa_handler = on_group_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = task_group_run(&g, &prompt, &err);
	buf_wipe_release(&prompt);
	/* Every attempt has its own links by now, or never will (it ended). */
	task_group_bundle_remove(gdir.buf);
	if (ret < 0)
		die("%s", err.buf);

	task_group_summary(&g, t->o.detach, &line);
	out_write(2, "aibox", g.gid, line.buf, line.len);
	status = task_group_status(&g);
	task_group_release(&g);
	buf_release(&line);
	buf_release(&err);
	buf_release(&gdir);
	return status;
}
