/*
 * aibox task [flags] [prompt...]
 *
 * Runs Claude Code unattended in a fresh VM on a bundle of one commit and
 * hands back a checked bundle of what it did (docs/tasks.md, from "Tasks" to
 * "How a task runs"; docs/task-host.md).
 *
 * In order: the flags, the prompt, the config and the login checks, the
 * locks and the task folder (its path on stdout), prompt.txt, settings.json,
 * the task's SSH keys, start.bundle, aibox-proxy on a unix socket in the task
 * folder, the result files opened, the VM, the lockdown, the session, the
 * check of changes.bundle, the summary.  aibox.log in the task folder gets
 * each phase's time.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker_spawn.h"
#include "buf.h"
#include "bundle_read.h"
#include "bundle_write.h"
#include "claude_share.h"
#include "config.h"
#include "duration.h"
#include "err.h"
#include "image.h"
#include "num.h"
#include "out.h"
#include "paths.h"
#include "project.h"
#include "prompt.h"
#include "results.h"
#include "sandbox.h"
#include "spawn.h"
#include "ssh.h"
#include "strvec.h"
#include "task_settings.h"
#include "task_session.h"
#include "taskid.h"
#include "vm.h"
#include "banned.h"

#define DEFAULT_TIMEOUT_MS (60LL * 60 * 1000)
#define MAX_FILES 64
/* From QEMU's start to the guest's SSH banner, at most. */
#define SSH_WAIT_MS (600 * 1000)

static const char usage_text[] =
	"usage: aibox task [options] [prompt...]\n"
	"\n"
	"Run Claude Code unattended in a fresh VM on a bundle of one commit.\n"
	"The task folder's path goes to stdout, everything else to stderr.\n"
	"\n"
	"    --model NAME           the model Claude Code uses (default: its own)\n"
	"    --from REV             start from this branch, tag, commit or stash (default HEAD)\n"
	"    --file PATH            add the text of PATH to the prompt; - reads stdin (repeatable)\n"
	"    --timeout DURATION     Claude Code's time limit, like 60m or 1h30m (default 60m)\n"
	"    --max-budget-usd N     the cost cap passed to Claude Code\n"
	"    --memory SIZE          the VM's memory, like 4096M or 8G (default from the config)\n"
	"    --cpus N               the VM's CPUs (default from the config)\n"
	"    --image NAME           the VM image (default: default)\n"
	"    --no-sandbox           skip aibox's own lockdown (seccomp), with a warning\n"
	"    -h, --help             show this help\n"
	"\n"
	"Without prompt words or --file, the prompt is read from stdin unless it is a\n"
	"terminal.  Exit status: 0 the task finished, 1 it did not, 2 usage or error.\n";

struct opts {
	const char *model;
	const char *from;
	const char *files[MAX_FILES];
	size_t nfiles;
	int64_t timeout_ms;
	int has_budget;
	double budget;
	uint64_t memory_mib;
	int cpus;
	const char *image;
	int no_sandbox;
	char **words;
	size_t nwords;
};

struct task {
	struct opts o;
	struct project p;
	struct config cfg;
	struct claude_shares shares; /* ~/.claude's skills, agents, commands */
	struct buf checkout;
	struct buf prompt;
	char start_commit[65];
	struct buf git_name, git_email;
	struct strvec env_names; /* names whose values go in over stdin */
	struct strvec env_values;
	enum task_api api;
	int project_lock_fd, task_lock_fd;
	char name[TASK_NAME_LEN + 1];
	const char *id; /* the end of name */
	struct buf dir; /* the task folder */
	struct ssh_task_keys keys;
	int result_fds[4];
	int console_fd, proxy_log_fd, aibox_log_fd, broker_log_fd;
	int broker_sock; /* the proxy's end of the hand-off socket pair; -1 without git: */
	struct spawn proxy, broker;
	struct vm vm;
	struct buf proxy_sock;
	pid_t checker_pid;		/* the bundle checker (start_checker()), or -1 */
	int checker_go, checker_answer; /* its pipes */
	struct timespec t0, tphase;
	double boot_s, session_s; /* for the derived lines of aibox.log */
};

static const char *const result_names[] = { "changes.bundle", "transcript.jsonl", "vm.log",
					    "result.json" };

/* "4096", "4096M", "4G": MiB, within the config's range. */
static int parse_memory(const char *s, uint64_t *mib)
{
	struct buf num = BUF_INIT;
	size_t n = strlen(s);
	uint64_t mult = 1;
	long v;
	int ret;

	if (n && (s[n - 1] == 'G' || s[n - 1] == 'g')) {
		mult = 1024;
		n--;
	} else if (n && (s[n - 1] == 'M' || s[n - 1] == 'm')) {
		n--;
	}
	buf_add(&num, s, n);
	ret = parse_long(num.buf, 1, LONG_MAX / 1024, &v);
	buf_release(&num);
	if (ret < 0)
		return ret;
	*mib = (uint64_t)v * mult;
	if (*mib < CONFIG_MIN_MEMORY_MIB || *mib > CONFIG_MAX_MEMORY_MIB)
		return -ERANGE;
	return 0;
}

static const char *option_value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (!strncmp(a, name, n) && a[n] == '=')
		return a + n + 1;
	if (++*i >= argc) {
		error("%s needs a value", name);
		usage_die(usage_text);
	}
	return argv[*i];
}

static int is_option(const char *a, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(a, name, n) && (a[n] == '\0' || a[n] == '=');
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	int i;

	o->timeout_ms = DEFAULT_TIMEOUT_MS;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !strcmp(a, "-"))
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			exit(0);
		} else if (!strcmp(a, "--no-sandbox")) {
			o->no_sandbox = 1;
		} else if (is_option(a, "--model")) {
			o->model = option_value(argc, argv, &i, "--model");
			if (!*o->model)
				die("--model: the name is empty");
		} else if (is_option(a, "--from")) {
			o->from = option_value(argc, argv, &i, "--from");
			if (!*o->from || o->from[0] == '-')
				die("--from: '%s' is not a revision", o->from);
		} else if (is_option(a, "--file")) {
			v = option_value(argc, argv, &i, "--file");
			if (o->nfiles == MAX_FILES)
				die("--file: at most %d files", MAX_FILES);
			o->files[o->nfiles++] = v;
		} else if (is_option(a, "--timeout")) {
			struct buf why = BUF_INIT;

			v = option_value(argc, argv, &i, "--timeout");
			if (duration_parse(v, &o->timeout_ms, &why) < 0)
				die("--timeout: '%s' is not a duration: %s", v, why.buf);
			if (o->timeout_ms < 1000)
				die("--timeout: '%s' is less than a second", v);
			if (o->timeout_ms > 7LL * 24 * 3600 * 1000)
				die("--timeout: '%s' is more than a week", v);
		} else if (is_option(a, "--max-budget-usd")) {
			char *end;

			v = option_value(argc, argv, &i, "--max-budget-usd");
			errno = 0;
			o->budget = strtod(v, &end);
			if (!*v || *end || errno || !(o->budget > 0 && o->budget < 1e6))
				die("--max-budget-usd: '%s' is not a positive amount", v);
			o->has_budget = 1;
		} else if (is_option(a, "--memory")) {
			v = option_value(argc, argv, &i, "--memory");
			if (parse_memory(v, &o->memory_mib) < 0)
				die("--memory: '%s' is not a size from %dM to %dG", v,
				    CONFIG_MIN_MEMORY_MIB, CONFIG_MAX_MEMORY_MIB / 1024);
		} else if (is_option(a, "--cpus")) {
			long n;

			v = option_value(argc, argv, &i, "--cpus");
			if (parse_long(v, 1, 256, &n) < 0)
				die("--cpus: '%s' is not a number from 1 to 256", v);
			o->cpus = (int)n;
		} else if (is_option(a, "--image")) {
			o->image = option_value(argc, argv, &i, "--image");
			if (!*o->image || strchr(o->image, '/') || o->image[0] == '.')
				die("--image: '%s' is not an image name", o->image);
		} else {
			error("unknown option '%s'", a);
			usage_die(usage_text);
		}
	}
	o->words = argv + i;
	o->nwords = (size_t)(argc - i);
}

/* Run git in the checkout with hooks and fsmonitor off; its stdout in out. */
static int git_capture(struct task *t, struct buf *out, ...)
{
	struct spawn sp = SPAWN_INIT;
	va_list ap;
	const char *arg;
	int ret;

	strvec_pushl(&sp.args, "git", "-C", t->checkout.buf, "-c", "core.hooksPath=/dev/null", "-c",
		     "core.fsmonitor=false", NULL);
	va_start(ap, out);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&sp.args, arg);
	va_end(ap);
	sp.err = SPAWN_NULL;
	ret = spawn_capture(&sp, out, 64 * 1024);
	spawn_clear(&sp);
	buf_rtrim(out);
	return ret;
}

static void find_start_commit(struct task *t)
{
	struct buf out = BUF_INIT, rev = BUF_INIT;
	const char *from = t->o.from ? t->o.from : "HEAD";
	int ret;

	ret = git_capture(t, &out, "rev-parse", "--is-shallow-repository", NULL);
	if (ret != 0)
		die("cannot run git in '%s'", t->checkout.buf);
	if (!strcmp(out.buf, "true"))
		die("'%s' is a shallow clone: a task needs the full history (git fetch --unshallow)",
		    t->checkout.buf);
	buf_reset(&out);
	buf_addf(&rev, "%s^{commit}", from);
	ret = git_capture(t, &out, "rev-parse", "--verify", "--quiet", "--end-of-options", rev.buf,
			  NULL);
	if (ret != 0 || (out.len != 40 && out.len != 64))
		die("--from: '%s' names no commit in '%s'", from, t->checkout.buf);
	memcpy(t->start_commit, out.buf, out.len + 1);
	buf_release(&out);
	buf_release(&rev);
}

static void read_git_identity(struct task *t)
{
	if (git_capture(t, &t->git_name, "config", "user.name", NULL) != 0 || !t->git_name.len)
		die("git has no user.name: set it with git config --global user.name 'Your Name'");
	if (git_capture(t, &t->git_email, "config", "user.email", NULL) != 0 || !t->git_email.len)
		die("git has no user.email: set it with git config --global user.email you@example.com");
}

/*
 * The login and the other secrets: values from our environment, now.  The
 * API key stays on the host (the proxy adds it); a subscription token goes in.
 */
static void read_env(struct task *t)
{
	int has_key = 0, has_base = 0;

	t->api = TASK_API_NONE;
	for (size_t i = 0; i < t->cfg.env.nr; i++) {
		const char *name = t->cfg.env.v[i], *value = getenv(name);

		if (!strcmp(name, "ANTHROPIC_BASE_URL"))
			has_base = 1;
		if (!value) {
			warning("%s is in the config's env but not set: the task goes without it", name);
			continue;
		}
		if (!strcmp(name, "ANTHROPIC_API_KEY")) {
			has_key = 1;
			continue; /* never into the VM */
		}
		if (!strcmp(name, "CLAUDE_CODE_OAUTH_TOKEN") && t->api == TASK_API_NONE)
			t->api = TASK_API_OAUTH;
		strvec_push(&t->env_names, name);
		strvec_push(&t->env_values, value);
	}
	if (has_key && has_base)
		die("the config sets ANTHROPIC_BASE_URL next to ANTHROPIC_API_KEY: the key would "
		    "leave through it; remove ANTHROPIC_BASE_URL from env");
	if (has_key)
		t->api = TASK_API_FORWARD;
}

/*
 * The git: remotes' tokens must be in our environment now: aibox-broker reads
 * them from its own (inherited) environment when it starts; they are never
 * written anywhere.
 */
static void check_git_tokens(struct task *t)
{
	for (size_t i = 0; i < t->cfg.nr_git; i++) {
		const struct config_git *g = &t->cfg.git[i];
		const char *v;

		if (!g->token_env)
			continue;
		v = getenv(g->token_env);
		if (!v || !*v)
			die("the git remote '%s' takes its token from %s, which is not set", g->url,
			    g->token_env);
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
				die("the token in %s (for the git remote '%s') holds a space or "
				    "control character",
				    g->token_env, g->url);
	}
}

/* When aibox's data has no system prompt parts (a build tree without them). */
static const char default_system_prompt[] =
	"You run unattended in a throwaway VM on a clone of the user's project, with no one to "
	"answer questions.  Do the task in the prompt, commit your work on the current branch "
	"with clear messages, and end with a short summary of what you did.\n";

static void read_system_prompt(struct buf *out)
{
	struct buf path = BUF_INIT;
	static const char *const parts[] = { "image/task.md", "image/host/linux.md" };

	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		ssize_t n;

		buf_reset(&path);
		buf_addf(&path, "%s/%s", data_dir(), parts[i]);
		if (out->len)
			buf_addstr(out, "\n");
		n = buf_read_file(out, path.buf, 256 * 1024);
		if (n == -ENOENT)
			warning("no '%s': the task goes without that part of its system prompt", path.buf);
		else if (n < 0)
			die_err((int)n, "cannot read '%s'", path.buf);
	}
	if (!out->len || out->len == 1)
		buf_addstr(out, default_system_prompt);
	buf_release(&path);
}

static void write_file(struct task *t, const char *name, const struct buf *b, int mode)
{
	struct buf path = BUF_INIT;
	int ret;

	buf_addf(&path, "%s/%s", t->dir.buf, name);
	if ((ret = buf_write_file(b, path.buf, mode)) < 0)
		die_err(ret, "cannot write '%s'", path.buf);
	buf_release(&path);
}

static void write_inputs(struct task *t)
{
	struct task_settings ts = { 0 };
	struct task_mount *mounts = NULL;
	const char **remotes;
	struct buf settings = BUF_INIT, err = BUF_INIT, sys = BUF_INIT;
	int ret;

	write_file(t, "prompt.txt", &t->prompt, 0644);

	read_system_prompt(&sys);
	ts.id = t->id;
	ts.model = t->o.model;
	ts.timeout_s = (long)((t->o.timeout_ms + 999) / 1000);
	ts.has_budget = t->o.has_budget;
	ts.max_budget_usd = t->o.budget;
	ts.git_name = t->git_name.buf;
	ts.git_email = t->git_email.buf;
	ts.start_commit = t->start_commit;
	ts.env_names = t->env_names.v;
	ts.nenv = t->env_names.nr;
	ts.api = t->api;
	ts.path = t->cfg.path;
	/* The tags follow the VM launcher's naming: m0, m1, ... for the config's mounts. */
	mounts = xcalloc(t->cfg.nr_mounts + t->shares.nr + 1, sizeof(*mounts));
	for (size_t i = 0; i < t->cfg.nr_mounts; i++) {
		char *tag = xmalloc(24);

		snprintf(tag, 24, "m%zu", i);
		mounts[i].tag = tag;
		mounts[i].path = t->cfg.mounts[i].vm;
	}
	/* Then ~/.claude's folders, under their own tags (start_vm() shares the same). */
	for (size_t i = 0; i < t->shares.nr; i++) {
		mounts[t->cfg.nr_mounts + i].tag = xstrdup(t->shares.v[i].tag);
		mounts[t->cfg.nr_mounts + i].path = t->shares.v[i].guest;
	}
	ts.mounts = mounts;
	ts.nmounts = t->cfg.nr_mounts + t->shares.nr;
	ts.system_prompt = sys.buf;
	remotes = xcalloc(t->cfg.nr_git + 1, sizeof(*remotes));
	for (size_t i = 0; i < t->cfg.nr_git; i++)
		remotes[i] = t->cfg.git[i].url;
	ts.git_remotes = remotes;
	ts.ngit_remotes = t->cfg.nr_git;
	if ((ret = task_settings_json(&ts, &settings, &err)) < 0)
		die("cannot write settings.json: %s", err.buf);
	write_file(t, "settings.json", &settings, 0644);

	buf_reset(&err);
	if ((ret = ssh_task_keys_make(t->dir.buf, NULL, &t->keys, &err)) < 0)
		die("%s", err.buf);

	for (size_t i = 0; i < ts.nmounts; i++)
		free((char *)mounts[i].tag);
	free(mounts);
	free(remotes);
	buf_release(&settings);
	buf_release(&err);
	buf_release(&sys);
}

/* The result files exist and are open before the VM starts (no open after the lockdown). */
static void open_results(struct task *t)
{
	for (size_t i = 0; i < ARRAY_SIZE(result_names); i++) {
		struct buf path = BUF_INIT;

		buf_addf(&path, "%s/%s", t->dir.buf, result_names[i]);
		/* O_RDWR: result.json and the bundle are read back after the lockdown. */
		t->result_fds[i] = open(path.buf, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					0644);
		if (t->result_fds[i] < 0)
			die_errno("cannot create '%s'", path.buf);
		buf_release(&path);
	}
}

static void start(struct task *t)
{
	struct buf err = BUF_INIT, cfgpath = BUF_INIT, tasks = BUF_INIT;
	struct prompt_opts po = { 0 };
	int ret, created = 0;

	po.args = t->o.words;
	po.nargs = t->o.nwords;
	po.files = t->o.files;
	po.nfiles = t->o.nfiles;
	po.stdin_fd = 0;
	if ((ret = prompt_read(&po, &t->prompt, &err)) < 0)
		die("%s", err.buf);

	ret = project_checkout(".", &t->checkout);
	if (ret == -ENOENT)
		die("not in a git checkout: run aibox task in a project's checkout");
	if (ret == -ENOTDIR)
		die("a bare repository has no checkout: run aibox task in a checkout");
	if (ret < 0)
		die_err(ret, "cannot find the git checkout of the current folder");
	if ((ret = project_open(t->checkout.buf, &t->p, &created)) < 0)
		die_err(ret, "cannot open the project of '%s'", t->checkout.buf);
	buf_addf(&cfgpath, "%s/config.yaml", t->p.dir);
	buf_reset(&err);
	/* config_load() initialises cfg itself (config_init() first would leak). */
	if ((ret = config_load(&t->cfg, cfgpath.buf, &err)) < 0)
		die("%s", err.buf);
	if (t->o.memory_mib)
		t->cfg.memory_mib = t->o.memory_mib;
	if (t->o.cpus)
		t->cfg.cpus = t->o.cpus;
	buf_reset(&err);
	if (claude_shares_plan(&t->cfg, getenv("HOME"), &t->shares, &err) < 0)
		die("%s", err.buf);

	find_start_commit(t);
	read_git_identity(t);
	read_env(t);
	check_git_tokens(t);

	t->project_lock_fd = project_lock(t->p.dir, PROJECT_LOCK_SHARED | PROJECT_LOCK_NONBLOCK);
	if (t->project_lock_fd == -EWOULDBLOCK)
		die("the project '%s' is being removed", t->p.name);
	if (t->project_lock_fd < 0)
		die_err(t->project_lock_fd, "cannot lock the project '%s'", t->p.name);
	buf_addf(&tasks, "%s/tasks", t->p.dir);
	if (mkdir(tasks.buf, 0700) < 0 && errno != EEXIST)
		die_errno("cannot make '%s'", tasks.buf);
	if ((ret = task_create(tasks.buf, time(NULL), t->name, &t->task_lock_fd)) < 0)
		die_err(ret, "cannot make a task folder in '%s'", tasks.buf);
	t->id = t->name + TASK_NAME_LEN - TASK_ID_LEN;
	buf_addf(&t->dir, "%s/%s", tasks.buf, t->name);
	printf("%s\n", t->dir.buf);
	fflush(stdout);

	write_inputs(t);
	open_results(t);
	buf_release(&err);
	buf_release(&cfgpath);
	buf_release(&tasks);
}


/* SIGINT/SIGTERM: kill QEMU (the session then sees the VM gone) and say so. */
static volatile sig_atomic_t stop_signal;
static volatile pid_t stop_qemu_pid = -1;

static void on_stop(int sig)
{
	stop_signal = sig;
	if (stop_qemu_pid > 0)
		kill(stop_qemu_pid, SIGKILL);
}

static double since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) + (double)(b.tv_nsec - a->tv_nsec) / 1e9;
}

/* One line in aibox.log (docs/task-host.md, "aibox.log"); a help, not the task. */
static void log_line(struct task *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(struct task *t, const char *fmt, ...)
{
	char line[160];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (t->aibox_log_fd >= 0 && n > 0 && (size_t)n < sizeof(line)) {
		ssize_t w = write(t->aibox_log_fd, line, (size_t)n);
		(void)w;
	}
}

/* The phase and its time as the host measured it, then the next phase starts. */
static double phase_done(struct task *t, const char *name)
{
	double s = since(&t->tphase);

	log_line(t, "%s %.3fs\n", name, s);
	clock_gettime(CLOCK_MONOTONIC, &t->tphase);
	return s;
}

/* The guest's own time for a step, from result.json; -1 when it has none. */
static double step_seconds(const struct task_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->nsteps; i++)
		if (!strcmp(r->steps[i].name, name))
			return r->steps[i].status == RESULT_SKIPPED ? -1 : r->steps[i].seconds;
	return -1;
}

/*
 * The phases inside the session, which the host does not see: clone and
 * agent are the guest's times for its clone and claude steps (result.json),
 * results the rest of the session (the SSH connection, the commit and bundle
 * steps, the transfer of the results).  "-" when result.json has no time.
 */
static void log_guest_phases(struct task *t, const struct task_result *r, double *agent)
{
	double clone = step_seconds(r, "clone"), claude = step_seconds(r, "claude");
	double rest = t->session_s - (clone > 0 ? clone : 0) - (claude > 0 ? claude : 0);

	if (clone >= 0)
		log_line(t, "clone %.3fs (guest)\n", clone);
	else
		log_line(t, "clone - (guest)\n");
	if (claude >= 0)
		log_line(t, "agent %.3fs (guest)\n", claude);
	else
		log_line(t, "agent - (guest)\n");
	if (r && rest >= 0)
		log_line(t, "results %.3fs (session - clone - agent)\n", rest);
	else
		log_line(t, "results - (session - clone - agent)\n");
	*agent = claude > 0 ? claude : 0;
}

static int open_in_task(struct task *t, const char *name, int flags)
{
	struct buf path = BUF_INIT;
	int fd;

	buf_addf(&path, "%s/%s", t->dir.buf, name);
	fd = open(path.buf, flags | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		die_errno("cannot create '%s'", path.buf);
	buf_release(&path);
	return fd;
}

static void write_start_bundle(struct task *t)
{
	struct bundle_write_opts bo = { 0 };
	struct buf path = BUF_INIT, idx = BUF_INIT, err = BUF_INIT;
	char oid[BUNDLE_HEXSZ_MAX + 1];
	int ret;

	buf_addf(&path, "%s/start.bundle", t->dir.buf);
	buf_addf(&idx, "%s/start.idx", t->dir.buf);
	bo.repo_dir = t->checkout.buf;
	bo.rev = t->start_commit;
	bo.out_path = path.buf;
	bo.idx_path = idx.buf; /* the guest's clone places it beside the pack */
	if ((ret = bundle_write_start(&bo, oid, &err)) < 0)
		die("cannot write '%s': %s", path.buf, err.buf);
	if (strcmp(oid, t->start_commit))
		die("start.bundle holds %s, not %s", oid, t->start_commit);
	/*
	 * The guest clones it as its unprivileged user (the share shows the
	 * host's modes): the folder may be passed through, the bundle read;
	 * the rest stays the owner's (ssh/ is 0700).
	 */
	if (chmod(path.buf, 0644) < 0 || chmod(t->dir.buf, 0711) < 0)
		die_errno("cannot open '%s' to the VM", path.buf);
	buf_release(&path);
	buf_release(&idx);
	buf_release(&err);
}

/* Read a child's ready line from fd (then closed): 1 when it starts with "ready". */
static int read_ready(int fd)
{
	struct buf ready = BUF_INIT;
	char c[256];
	ssize_t n;
	int ok;

	while ((n = read(fd, c, sizeof(c))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		buf_add(&ready, c, (size_t)n);
		if (ready.len > 4096)
			break;
	}
	close(fd);
	ok = !strncmp(ready.buf ? ready.buf : "", "ready", 5);
	buf_release(&ready);
	return ok;
}

/*
 * aibox-broker for the config's git: remotes (docs/broker.md), remote n for
 * entry n, its log in broker.log; the proxy gets the other end of the
 * hand-off socket pair (t->broker_sock).  The tokens go to the broker through
 * its environment only, and leave ours once it has them, so that neither the
 * proxy nor QEMU inherits them.
 */
static void start_broker(struct task *t)
{
	struct spawn *sp = &t->broker;
	struct buf prog = BUF_INIT;
	int sv[2], pfd[2], ret;

	if (!t->cfg.nr_git)
		return;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die_errno("cannot make a socket pair");
	if (pipe2(pfd, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	t->broker_log_fd = open_in_task(t, "broker.log", O_WRONLY | O_CREAT | O_EXCL | O_APPEND);

	buf_addf(&prog, "%s/aibox-broker", libexec_dir());
	strvec_push(&sp->args, prog.buf);
	broker_spawn_remotes(sp, &t->cfg);
	strvec_pushl(&sp->args, "--handoff-fd", "3", "--log-fd", "4", "--ready-fd", "5", NULL);
	if (t->o.no_sandbox)
		strvec_push(&sp->args, "--no-sandbox");
	spawn_give_fd(sp, sv[0], 3);
	spawn_give_fd(sp, t->broker_log_fd, 4);
	spawn_give_fd(sp, pfd[1], 5);
	sp->in = SPAWN_NULL;
	sp->out = SPAWN_NULL;
	sp->pdeathsig = SIGKILL;
	sp->new_session = 1;
	if ((ret = spawn_start(sp)) < 0)
		die_err(ret, "cannot start '%s'", prog.buf);
	close(sv[0]);
	close(pfd[1]);
	t->broker_sock = sv[1];
	if (!read_ready(pfd[0]))
		die("aibox-broker did not start (see its messages above)");
	broker_tokens_forget(&t->cfg);
	buf_release(&prog);
}

/* aibox-proxy on a unix socket in the task folder, its log in proxy.log. */
static void start_proxy(struct task *t)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct spawn *sp = &t->proxy;
	struct buf prog = BUF_INIT;
	int lfd, pfd[2], ret;

	buf_addf(&t->proxy_sock, "%s/proxy.sock", t->dir.buf);
	if (t->proxy_sock.len >= sizeof(sa.sun_path))
		die("the task folder's path is too long for a socket: '%s'", t->proxy_sock.buf);
	memcpy(sa.sun_path, t->proxy_sock.buf, t->proxy_sock.len + 1);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0)
		die_errno("cannot listen on '%s'", t->proxy_sock.buf);
	if (pipe2(pfd, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	t->proxy_log_fd = open_in_task(t, "proxy.log", O_RDWR | O_CREAT | O_EXCL | O_APPEND);

	buf_addf(&prog, "%s/aibox-proxy", libexec_dir());
	strvec_pushl(&sp->args, prog.buf, "--listen-fd", "3", "--log-fd", "4", "--ready-fd", "5",
		     NULL);
	for (size_t i = 0; i < t->cfg.allow.nr; i++)
		strvec_pushl(&sp->args, "--allow", t->cfg.allow.v[i], NULL);
	if (t->api == TASK_API_FORWARD)
		strvec_pushl(&sp->args, "--key-env", "ANTHROPIC_API_KEY", NULL);
	if (t->broker_sock >= 0)
		strvec_pushl(&sp->args, "--broker-fd", "6", NULL);
	if (t->o.no_sandbox)
		strvec_push(&sp->args, "--no-sandbox");
	spawn_give_fd(sp, lfd, 3);
	spawn_give_fd(sp, t->proxy_log_fd, 4);
	spawn_give_fd(sp, pfd[1], 5);
	if (t->broker_sock >= 0)
		spawn_give_fd(sp, t->broker_sock, 6);
	sp->in = SPAWN_NULL;
	sp->out = SPAWN_NULL;
	sp->pdeathsig = SIGKILL;
	sp->new_session = 1;
	if ((ret = spawn_start(sp)) < 0)
		die_err(ret, "cannot start '%s'", prog.buf);
	close(lfd);
	close(pfd[1]);
	if (t->broker_sock >= 0) {
		/* Only the proxy holds it now: when the proxy ends, the broker sees it. */
		close(t->broker_sock);
		t->broker_sock = -1;
	}
	if (!read_ready(pfd[0]))
		die("aibox-proxy did not start (see its messages above)");
	buf_release(&prog);
}

static void start_vm(struct task *t, struct vm_mount *mounts, struct buf *tags)
{
	struct vm_config vc = VM_CONFIG_INIT;
	struct buf img = BUF_INIT, state = BUF_INIT;
	const char *name = t->o.image ? t->o.image : "default";
	int ret;

	ret = image_dir(name, &img);
	if (ret == -ENOENT)
		die("the image '%s' is not built: run aibox image build", name);
	if (ret < 0)
		die_err(ret, "cannot use the image '%s'", name);
	for (size_t i = 0; i < t->cfg.nr_mounts; i++) {
		mounts[i].host_path = t->cfg.mounts[i].host;
		mounts[i].tag = tags[i].buf;
	}
	for (size_t i = 0; i < t->shares.nr; i++) {
		mounts[t->cfg.nr_mounts + i].host_path = t->shares.v[i].host;
		mounts[t->cfg.nr_mounts + i].tag = t->shares.v[i].tag;
	}
	buf_addf(&state, "%s/..", t->dir.buf);
	vc.image_dir = img.buf;
	vc.share_dir = t->dir.buf;
	vc.mode = "task";
	vc.memory_mb = (unsigned)t->cfg.memory_mib;
	vc.cpus = (unsigned)t->cfg.cpus;
	vc.disk_bytes = (unsigned long long)t->cfg.disk_mib * 1024 * 1024;
	vc.state_dir = state.buf;
	vc.proxy_socket = t->proxy_sock.buf;
	vc.mounts = mounts;
	vc.nr_mounts = t->cfg.nr_mounts + t->shares.nr;
	vc.log_fd = t->console_fd;
	if ((ret = vm_start(&vc, &t->vm)) < 0)
		die_err(ret, "cannot start the VM");
	stop_qemu_pid = t->vm.pid;
	if (!t->vm.kvm)
		out_printf(2, "aibox", t->id, "no KVM here: the VM runs under TCG, much slower");
	buf_release(&img);
	buf_release(&state);
}

static ssize_t read_fd_all(int fd, struct buf *out, size_t max)
{
	char c[8192];
	off_t off = 0;

	for (;;) {
		ssize_t n = pread(fd, c, sizeof(c), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return (ssize_t)out->len;
		buf_add(out, c, (size_t)n);
		off += n;
		if (out->len > max)
			return -EFBIG;
	}
}

/*
 * The check of changes.bundle reads the project's objects (the thin pack's
 * bases) and creates files (libgit2's indexer writes an index), which the
 * lockdown forbids.  So a child forked before the lockdown does it: it holds
 * no fd but the bundle's and its two pipes, waits for one byte on "go" (EOF:
 * no check, it exits), runs result_check_bundle() and writes "<ret> <end or
 * reason>" to "answer".  It dies with us (PR_SET_PDEATHSIG).  It is not
 * locked down itself: like aibox-bundle-check --pack it reads the untrusted
 * bundle with our code and libgit2's indexer, bounded by the 2 GiB cap.
 */
#define CHECK_MAX_BYTES (2ULL << 30)

static void start_checker(struct task *t)
{
	int go[2], ans[2];
	pid_t parent = getpid(), pid;

	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ans, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		die_errno("cannot fork");
	if (pid == 0) {
		int bfd = t->result_fds[RESULT_BUNDLE], ret;
		struct buf why = BUF_INIT, ansb = BUF_INIT;
		char end[65] = "", c;
		ssize_t n;

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		/* Not our stdout: whoever reads it waits for its EOF, not ours. */
		if ((n = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
			dup2((int)n, 0);
			dup2((int)n, 1);
		}
		for (int fd = 3; fd < 1024; fd++)
			if (fd != go[0] && fd != ans[1] && fd != bfd)
				close(fd);
		while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			_exit(0);
		ret = result_check_bundle(bfd, t->start_commit, t->checkout.buf, t->dir.buf,
					  CHECK_MAX_BYTES, end, &why);
		buf_addf(&ansb, "%d %s", ret, ret == 0 ? end : why.buf);
		for (size_t off = 0; off < ansb.len;) {
			n = write(ans[1], ansb.buf + off, ansb.len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		_exit(0);
	}
	close(go[0]);
	close(ans[1]);
	t->checker_pid = pid;
	t->checker_go = go[1];
	t->checker_answer = ans[0];
}

/* Let the checker go without a check (or kill it on a stop), and reap it. */
static void stop_checker(struct task *t, int kill_it)
{
	if (t->checker_go >= 0)
		close(t->checker_go);
	t->checker_go = -1;
	if (t->checker_pid > 0) {
		if (kill_it)
			kill(t->checker_pid, SIGKILL);
		while (waitpid(t->checker_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	t->checker_pid = -1;
	if (t->checker_answer >= 0)
		close(t->checker_answer);
	t->checker_answer = -1;
}

/* changes.bundle: exactly aibox/task, no prerequisite but the start commit, a sound pack. */
static int check_changes(struct task *t, char *end, struct buf *why)
{
	struct buf ans = BUF_INIT;
	char c[1024], *rest;
	long ret;
	ssize_t n;

	if (t->checker_go < 0 || write(t->checker_go, "g", 1) != 1) {
		buf_addf(why, "cannot check changes.bundle: the checker is gone");
		stop_checker(t, 1);
		return -EPIPE;
	}
	while ((n = read(t->checker_answer, c, sizeof(c))) != 0) {
		if (n < 0 && errno == EINTR && !stop_signal)
			continue;
		if (n < 0)
			break;
		buf_add(&ans, c, (size_t)n);
		if (ans.len > 4 * BUNDLE_REASON_MAX)
			break;
	}
	stop_checker(t, n != 0);
	if (stop_signal) {
		buf_release(&ans);
		return -EINTR;
	}
	errno = 0;
	ret = strtol(ans.buf ? ans.buf : "", &rest, 10);
	if (!ans.len || errno || *rest != ' ' || ret < -4095 || ret > BUNDLE_REFUSED) {
		buf_addf(why, "cannot check changes.bundle: the checker ended without an answer");
		buf_release(&ans);
		return -EIO;
	}
	rest++;
	if (ret == 0) {
		if (strlen(rest) != 40 && strlen(rest) != 64) {
			buf_addf(why, "cannot check changes.bundle: the checker's answer is bad");
			ret = -EIO;
		} else {
			memcpy(end, rest, strlen(rest) + 1);
		}
	} else {
		buf_addstr(why, rest);
	}
	buf_release(&ans);
	return (int)ret;
}

static int run_task(struct task *t)
{
	struct task_session s = { 0 };
	struct task_secret *sec;
	struct buf secrets = BUF_INIT, err = BUF_INIT, rj = BUF_INIT, plog = BUF_INIT, why = BUF_INIT;
	struct buf *tags;
	struct vm_mount *mounts;
	struct task_result r;
	struct summary sum = SUMMARY_INIT;
	struct summary_in in = { 0 };
	struct strvec hosts = STRVEC_INIT;
	struct sigaction sa = { 0 };
	char end[BUNDLE_HEXSZ_MAX + 1] = "";
	double agent_s = 0, total_s;
	int ret, ok = 0, have_result = 0, session_ret;
	ssize_t n;

	write_start_bundle(t);
	phase_done(t, "bundle");
	start_checker(t);

	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	start_broker(t);
	start_proxy(t);
	t->console_fd = open_in_task(t, "console.log", O_WRONLY | O_CREAT | O_EXCL | O_APPEND);
	phase_done(t, "proxy");

	sec = xcalloc(t->env_names.nr + 1, sizeof(*sec));
	for (size_t i = 0; i < t->env_names.nr; i++) {
		sec[i].name = t->env_names.v[i];
		sec[i].value = t->env_values.v[i];
	}
	if (task_secrets_json(sec, t->env_names.nr, &secrets, &err) < 0)
		die("cannot pass the secrets: %s", err.buf);
	free(sec);

	tags = xcalloc(t->cfg.nr_mounts + 1, sizeof(*tags));
	mounts = xcalloc(t->cfg.nr_mounts + t->shares.nr + 1, sizeof(*mounts));
	for (size_t i = 0; i < t->cfg.nr_mounts; i++) {
		tags[i] = (struct buf)BUF_INIT;
		buf_addf(&tags[i], "m%zu", i);
	}
	if (!stop_signal)
		start_vm(t, mounts, tags);

	/* Everything is open: from here on no file is opened and nothing runs. */
	if (t->o.no_sandbox)
		warning("--no-sandbox: aibox-task runs without its own lockdown");
	else if ((ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock aibox-task down");

	if (!stop_signal) {
		ret = vm_wait_ssh(&t->vm, SSH_WAIT_MS);
		if (ret < 0 && !stop_signal)
			vm_wait_ssh_why(ret, SSH_WAIT_MS, &why);
	} else {
		ret = -EINTR;
	}
	t->boot_s = phase_done(t, "boot");
	session_ret = ret;
	if (ret == 0 && !stop_signal) {
		s.fd = t->vm.ssh_fd;
		s.keys = &t->keys;
		s.id = t->id;
		s.err_fd = 2;
		s.secrets = secrets.buf;
		s.secrets_len = secrets.len;
		for (int i = 0; i < RESULT_NFILES; i++)
			s.result_fds[i] = t->result_fds[i];
		/* The product's limit: the VM is stopped 25 minutes after the timeout. */
		s.timeout_ms = (long)(t->o.timeout_ms + 25LL * 60 * 1000);
		s.idle_ms = 300000;
		session_ret = task_session_run(&s);
		if (session_ret < 0 && !stop_signal)
			buf_addf(&why, "%s", s.reason);
	}
	t->session_s = phase_done(t, "session");
	buf_wipe_release(&secrets);

	if (t->vm.ssh_fd >= 0)
		shutdown(t->vm.ssh_fd, SHUT_RDWR);
	/*
	 * Everything the VM had to give is in the result files (or never
	 * will be): nothing in it is kept, so it is not waited for.
	 */
	if (t->vm.pid > 0)
		vm_stop(&t->vm, 0);
	stop_qemu_pid = -1;
	spawn_stop(&t->proxy, SIGTERM);
	spawn_stop(&t->broker, SIGTERM);
	phase_done(t, "stop");

	if (stop_signal) {
		buf_reset(&why);
		buf_addf(&why, "the VM was stopped by %s", stop_signal == SIGINT ? "SIGINT" : "a signal");
	}

	n = read_fd_all(t->result_fds[RESULT_JSON], &rj, RESULT_JSON_MAX);
	if (n > 0) {
		buf_reset(&err);
		if (result_parse(rj.buf, rj.len, &r, &err) < 0) {
			out_printf(2, "aibox", t->id, "result.json refused: %s", err.buf);
		} else {
			have_result = 1;
			in.result = &r;
		}
	}
	log_guest_phases(t, have_result ? &r : NULL, &agent_s);
	if (have_result && r.changes && session_ret == 0 && !stop_signal) {
		if (check_changes(t, end, &why) == 0)
			in.end_commit = end;
	}
	stop_checker(t, stop_signal != 0);
	phase_done(t, "check");

	if (read_fd_all(t->proxy_log_fd, &plog, 16 * 1024 * 1024) >= 0)
		proxy_log_hosts(plog.buf ? plog.buf : "", plog.len, 64, &hosts);
	{
		struct buf bpath = BUF_INIT, branch = BUF_INIT;
		const char *slash = strrchr(t->dir.buf, '/');

		buf_addf(&bpath, "%s/changes.bundle", t->dir.buf);
		buf_addf(&branch, "aibox/task-%s", slash ? slash + 1 : t->dir.buf);
		in.hosts = (const char *const *)hosts.v;
		in.nhosts = hosts.nr;
		in.bundle_path = bpath.buf;
		in.branch = branch.buf;
		summary_make(&in, &sum);
		for (size_t i = 0; i < sum.nr; i++)
			out_printf(2, sum.v[i].vm ? "vm" : "aibox", t->id, "%s", sum.v[i].text);
		summary_release(&sum);
		buf_release(&bpath);
		buf_release(&branch);
	}

	ok = session_ret == 0 && !stop_signal && !why.len && have_result && !r.failed_step &&
	     r.has_claude && r.claude.has_exit_code && r.claude.exit_code == 0 &&
	     (!r.claude.has_ended_by || r.claude.ended_by == ENDED_COMPLETED) &&
	     (!r.changes || in.end_commit);
	if (why.len)
		out_printf(2, "aibox", t->id, "the task did not finish: %s", why.buf);
	else if (!ok)
		out_printf(2, "aibox", t->id, "the task did not finish");
	total_s = since(&t->t0);
	log_line(t, "total %.3fs exit %d\n", total_s, ok ? 0 : 1);
	log_line(t, "overhead %.3fs (total - boot - agent)\n", total_s - t->boot_s - agent_s);
	if (have_result)
		result_release(&r);
	for (size_t i = 0; i < t->cfg.nr_mounts; i++)
		buf_release(&tags[i]);
	free(tags);
	free(mounts);
	strvec_clear(&hosts);
	buf_release(&err);
	buf_release(&rj);
	buf_release(&plog);
	buf_release(&why);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct task t = { .project_lock_fd = -1, .task_lock_fd = -1, .console_fd = -1,
			  .proxy_log_fd = -1, .aibox_log_fd = -1, .checker_pid = -1,
			  .checker_go = -1, .checker_answer = -1, .broker_log_fd = -1,
			  .broker_sock = -1 };

	tool_init(argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t.t0);
	t.tphase = t.t0;
	t.p = (struct project)PROJECT_INIT;
	t.checkout = (struct buf)BUF_INIT;
	t.prompt = (struct buf)BUF_INIT;
	t.git_name = (struct buf)BUF_INIT;
	t.git_email = (struct buf)BUF_INIT;
	t.dir = (struct buf)BUF_INIT;
	t.proxy_sock = (struct buf)BUF_INIT;
	t.env_names = (struct strvec)STRVEC_INIT;
	t.env_values = (struct strvec)STRVEC_INIT;
	t.keys = (struct ssh_task_keys)SSH_TASK_KEYS_INIT;
	t.proxy = (struct spawn)SPAWN_INIT;
	t.broker = (struct spawn)SPAWN_INIT;
	t.vm = (struct vm)VM_INIT;
	parse_args(&t.o, argc, argv);
	start(&t);
	t.aibox_log_fd = open_in_task(&t, "aibox.log", O_WRONLY | O_CREAT | O_EXCL | O_APPEND);
	phase_done(&t, "start");
	out_printf(2, "aibox", t.id, "task %s starts from %s", t.id, t.start_commit);
	return run_task(&t);
}
