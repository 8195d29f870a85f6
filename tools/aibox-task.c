/*
 * aibox task [flags] [prompt...]
 *
 * Runs Claude Code unattended in a fresh VM on a bundle of one commit and
 * hands back a checked bundle of what it did (issue 6, the product
 * description from "Tasks" to "How a task runs").
 *
 * Built so far: the flags, the prompt, the config and the login checks, the
 * locks and the task folder (its path on stdout), prompt.txt, settings.json,
 * the task's SSH keys and the result files opened before anything starts.
 * The start bundle, the proxy, the VM and the session come with the bundle
 * writer, aibox-proxy and the VM launcher (common/ssh, tar_in and results are
 * ready for the session and the report).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "duration.h"
#include "err.h"
#include "num.h"
#include "out.h"
#include "paths.h"
#include "project.h"
#include "prompt.h"
#include "spawn.h"
#include "ssh.h"
#include "strvec.h"
#include "task_settings.h"
#include "taskid.h"
#include "banned.h"

#define DEFAULT_TIMEOUT_MS (60LL * 60 * 1000)
#define MAX_FILES 64

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
	mounts = xcalloc(t->cfg.nr_mounts + 1, sizeof(*mounts));
	for (size_t i = 0; i < t->cfg.nr_mounts; i++) {
		char *tag = xmalloc(24);

		snprintf(tag, 24, "m%zu", i);
		mounts[i].tag = tag;
		mounts[i].path = t->cfg.mounts[i].vm;
	}
	ts.mounts = mounts;
	ts.nmounts = t->cfg.nr_mounts;
	ts.system_prompt = sys.buf;
	if ((ret = task_settings_json(&ts, &settings, &err)) < 0)
		die("cannot write settings.json: %s", err.buf);
	write_file(t, "settings.json", &settings, 0644);

	buf_reset(&err);
	if ((ret = ssh_task_keys_make(t->dir.buf, NULL, &t->keys, &err)) < 0)
		die("%s", err.buf);

	for (size_t i = 0; i < t->cfg.nr_mounts; i++)
		free((char *)mounts[i].tag);
	free(mounts);
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

	find_start_commit(t);
	read_git_identity(t);
	read_env(t);

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

int main(int argc, char **argv)
{
	struct task t = { .project_lock_fd = -1, .task_lock_fd = -1 };

	tool_init(argc, argv);
	t.p = (struct project)PROJECT_INIT;
	t.checkout = (struct buf)BUF_INIT;
	t.prompt = (struct buf)BUF_INIT;
	t.git_name = (struct buf)BUF_INIT;
	t.git_email = (struct buf)BUF_INIT;
	t.dir = (struct buf)BUF_INIT;
	t.env_names = (struct strvec)STRVEC_INIT;
	t.env_values = (struct strvec)STRVEC_INIT;
	t.keys = (struct ssh_task_keys)SSH_TASK_KEYS_INIT;
	parse_args(&t.o, argc, argv);
	start(&t);
	out_printf(2, "aibox", t.id, "task %s starts from %s", t.id, t.start_commit);

	/*
	 * Not built yet: start.bundle (bundle writer), aibox-proxy, the VM
	 * (launcher), the lockdown, the session (common/ssh + tar_in), the
	 * bundle check and the report (common/results).
	 */
	die("cannot run the task yet: the bundle writer, aibox-proxy and the VM launcher are not "
	    "in this build");
}
