/*
 * aibox task --attempts N: N attempts of one task side by side (docs/tasks.md,
 * "Several attempts").  Part of tools/aibox-task.c, included at its end.
 *
 * The group's process reads the prompt once and makes a group id; each
 * attempt is an aibox-task of its own (the same command line and
 * --attempt-of GROUP, the prompt on its stdin), so that each has its own
 * folder, proxy, proxy log, spend and caps, and one that fails stops no
 * other.  The group's process forwards each attempt's stdout a whole line at
 * a time (its folder first), passes SIGINT, SIGTERM and SIGHUP on to every
 * attempt, waits for them all and prints the group's line: how many
 * finished and what they spent together.
 */

/* The attempts asked for: --attempts, else the project config's attempts: (else 1). */
static int group_attempts(struct task *t)
{
	struct buf checkout = BUF_INIT, cfgpath = BUF_INIT, err = BUF_INIT;
	struct project p = PROJECT_INIT;
	struct config cfg;
	int n = 1;

	if (t->o.attempts)
		return t->o.attempts;
	/* Zeroed, it can be released whatever host_project_open() got to. */
	memset(&cfg, 0, sizeof(cfg));
	/* A project that cannot be opened: start() says why, as for any task. */
	if (host_project_open(&checkout, &p, &cfgpath, &cfg, &err) == 0)
		n = cfg.attempts;
	config_release(&cfg);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&cfgpath);
	buf_release(&err);
	return n;
}

static volatile sig_atomic_t group_signal;

static void on_group_stop(int sig)
{
	group_signal = sig;
}

/* One attempt as the group's process sees it. */
struct attempt {
	struct spawn sp;
	struct buf line; /* stdout not yet forwarded: less than a line */
	struct buf folder;
	int lines; /* whole lines read */
	int code;  /* its exit status, -1 while it runs */
};

/* Forward whole lines of a's stdout; the first is its folder.  0 at its end of file. */
static int attempt_read(struct attempt *a, int json)
{
	char chunk[4096];
	ssize_t n = read(a->sp.out_fd, chunk, sizeof(chunk));
	char *nl;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n <= 0) {
		close(a->sp.out_fd);
		a->sp.out_fd = -1;
		return 0;
	}
	buf_add(&a->line, chunk, (size_t)n);
	while ((nl = memchr(a->line.buf, '\n', a->line.len))) {
		size_t len = (size_t)(nl - a->line.buf) + 1;

		if (!a->lines++)
			buf_add(&a->folder, a->line.buf, len - 1);
		if (a->lines > 1 || !json)
			write_all(1, a->line.buf, len);
		buf_consume(&a->line, len);
	}
	return 1;
}

/*
 * The group's line once every attempt ended: how many finished, and what
 * aibox counted for them together (each attempt's summary.json); for
 * detached attempts, that they were submitted.
 */
static void group_line(const char *gid, struct attempt *a, int n, int detach)
{
	uint64_t nano = 0;
	int finished = 0, recorded = 0;
	struct buf b = BUF_INIT, path = BUF_INIT, data = BUF_INIT, err = BUF_INIT;

	for (int i = 0; i < n; i++) {
		struct task_record r;

		if (!a[i].folder.len)
			continue;
		buf_reset(&path);
		buf_reset(&data);
		buf_addf(&path, "%s/summary.json", a[i].folder.buf);
		if (buf_read_file(&data, path.buf, TASK_RECORD_MAX) <= 0)
			continue;
		buf_reset(&err);
		if (task_record_parse(data.buf, data.len, &r, &err) < 0)
			continue;
		recorded++;
		finished += !strcmp(r.state, "finished");
		if (r.has_report)
			nano = nano + r.report.usage.nano < nano ? UINT64_MAX
			                                         : nano + r.report.usage.nano;
		task_record_release(&r);
	}
	if (detach && !recorded) {
		buf_addf(&b, "group %s: %d attempts submitted", gid, n);
	} else {
		buf_addf(&b, "group %s: %d of %d attempts finished; aibox counted ", gid, finished,
		         n);
		usage_format_usd(&b, nano);
		buf_addstr(&b, " USD for them all");
	}
	out_write(2, "aibox", gid, b.buf, b.len);
	buf_release(&b);
	buf_release(&path);
	buf_release(&data);
	buf_release(&err);
}

/* Each attempt gets what we were given, the group's id and the prompt; a failed start dies. */
static void start_attempt(struct attempt *a, const char *gid, const struct buf *prompt, int argc,
                          char **argv)
{
	int ret;

	strvec_pushl(&a->sp.args, "/proc/self/exe", "--attempt-of", gid, NULL);
	for (int i = 1; i < argc; i++)
		strvec_push(&a->sp.args, argv[i]);
	a->sp.in = SPAWN_PIPE;
	a->sp.out = SPAWN_PIPE;
	a->sp.pdeathsig = SIGTERM;
	if ((ret = spawn_start(&a->sp)) < 0)
		die_err(ret, "cannot start an attempt");
	/* It reads its whole prompt before anything else; one that died early gets EPIPE. */
	write_all(a->sp.in_fd, prompt->buf, prompt->len);
	close(a->sp.in_fd);
	a->sp.in_fd = -1;
}

static int run_group(struct task *t, int argc, char **argv)
{
	struct prompt_opts po = {0};
	struct buf prompt = BUF_INIT, err = BUF_INIT;
	struct attempt a[ATTEMPTS_MAX];
	struct sigaction sa = {0};
	char gid[TASK_ID_LEN + 1];
	int n = group_attempts(t), running, any_ok = 0, all_usage = 1, ret;

	po.args = t->o.words;
	po.nargs = t->o.nwords;
	po.files = t->o.files;
	po.nfiles = t->o.nfiles;
	po.stdin_fd = 0;
	if (prompt_read(&po, &prompt, &err) < 0)
		die("%s", err.buf);
	if ((ret = task_id_new(gid)) < 0)
		die_err(ret, "cannot make a group id");

	sa.sa_handler = on_group_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	for (int i = 0; i < n; i++) {
		a[i] = (struct attempt){
		    .sp = SPAWN_INIT, .line = BUF_INIT, .folder = BUF_INIT, .code = -1};
		start_attempt(&a[i], gid, &prompt, argc, argv);
	}
	buf_wipe_release(&prompt);

	running = n;
	while (running) {
		struct pollfd pfd[ATTEMPTS_MAX];

		for (int i = 0; i < n; i++) {
			pfd[i].fd = a[i].sp.out_fd; /* -1 once read to its end: poll skips it */
			pfd[i].events = POLLIN;
		}
		if (group_signal) {
			for (int i = 0; i < n; i++)
				if (a[i].code < 0)
					kill(a[i].sp.pid, group_signal);
			group_signal = 0;
		}
		if (poll(pfd, (nfds_t)n, 200) < 0 && errno != EINTR)
			die_errno("poll");
		for (int i = 0; i < n; i++)
			if (a[i].sp.out_fd >= 0 && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				attempt_read(&a[i], t->o.json);
		for (int i = 0; i < n; i++) {
			int status;

			if (a[i].code >= 0 || a[i].sp.out_fd >= 0)
				continue;
			if (waitpid(a[i].sp.pid, &status, 0) < 0)
				continue;
			a[i].code =
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			a[i].sp.pid = -1;
			running--;
		}
	}

	group_line(gid, a, n, t->o.detach);
	for (int i = 0; i < n; i++) {
		any_ok |= a[i].code == 0;
		all_usage &= a[i].code == 2;
		spawn_clear(&a[i].sp);
		buf_release(&a[i].line);
		buf_release(&a[i].folder);
	}
	buf_release(&err);
	/* 0 when one attempt finished (there is one to pick), 2 when none started, else 1. */
	return any_ok ? 0 : all_usage ? 2 : 1;
}
