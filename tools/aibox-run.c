/*
 * aibox run [--memory SIZE] [--cpus N] [--image NAME] [--no-sandbox] [-- COMMAND ARGS...]
 *
 * The interactive side of aibox: boots a VM of the project's image with the
 * project folder and the project's home shared read-write, and runs Claude
 * Code (or COMMAND) in it with the terminal passed straight through.  See
 * docs/man/aibox-run.1 and docs/internals.md ("aibox run").
 *
 * Order: find the project and its config, hold the project lock shared,
 * make the run folder (settings.json, SSH keys), start aibox-proxy, boot the
 * VM, fork the cleaner that removes the run folder once we are gone, lock
 * down, then the SSH session.  Exit status: the command's (128 + N when
 * signal N ended it, 126 or 127 when it could not start); 125 for aibox's
 * own errors, usage included, and a VM that went away, as env(1),
 * timeout(1) and nice(1) do (docs/exit-codes.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker_spawn.h"
#include "buf.h"
#include "claude_share.h"
#include "config.h"
#include "err.h"
#include "image.h"
#include "login.h"
#include "num.h"
#include "opt.h"
#include "paths.h"
#include "project.h"
#include "spend.h"
#include "rmtree.h"
#include "sandbox.h"
#include "secret.h"
#include "spawn.h"
#include "ssh.h"
#include "strvec.h"
#include "task_settings.h"
#include "taskid.h"
#include "tty.h"
#include "vm.h"
#include "banned.h"

static const char usage_text[] =
	"usage: aibox run [--memory SIZE] [--cpus N] [--image NAME] [--no-sandbox]\n"
	"                 [-- COMMAND ARGS...]\n"
	"\n"
	"Boot a VM on this checkout's project and run Claude Code (or COMMAND) in it,\n"
	"with the project folder shared read-write and the terminal passed through.\n"
	"\n"
	"  --memory SIZE   the VM's memory, 512M to 1T (default: the config's, 4G)\n"
	"  --cpus N        the VM's CPUs, 1 to this machine's (default: the config's, 2)\n"
	"  --image NAME    the image to boot (default: default)\n"
	"  --no-sandbox    do not lock aibox down with seccomp\n"
	"\n"
	"Exits with the command's exit status (128 + N when signal N ended it, 126 or\n"
	"127 when it could not be started), or 125 when aibox itself failed.\n";

#define BOOT_TIMEOUT_MS (300 * 1000)
#define CONNECT_TIMEOUT_MS (120 * 1000)
/* aibox run's own failures: not a status a command is likely to have (env(1)). */
#define EXIT_RUN_ERROR 125

struct run {
	struct project project;
	struct config cfg;
	struct buf run_dir;
	struct buf image_dir;
	char run_name[TASK_NAME_LEN + 1];
	char id[TASK_ID_LEN + 1];
	int lock_fd;
	struct strvec command;
	const char *image;
	uint64_t memory_mib;
	int cpus;
	int no_sandbox;
	int forward_key;
	struct buf api_key;		/* for the proxy (--key-fd) when forward_key */
	struct buf broker_tokens;	/* for the broker (--token-fd): NAME=value lines */
	struct strvec env;		/* the config's env, NAME=value */
	struct vm_mount *mounts;	/* config mounts, claude dirs, project, home */
	size_t nr_mounts;
	struct strvec tags;		/* owns the mounts' tags and guest paths */
	struct strvec guest_paths;	/* parallel to mounts */
	struct strvec host_paths;	/* owns host paths we made */
	struct spawn proxy, broker;
	int broker_sock;		/* the proxy's end of the hand-off pair; -1 without git: */
	struct spend spend;		/* the day's cap and ledger (docs/budget.md) */
	struct vm vm;
	int console_fd;
	int cleaner_fd;			/* write end: the cleaner removes the run folder at its EOF */
};

/* Options anywhere before `--` (common/opt.h); the command is what follows `--`. */
static void parse_options(struct run *r, int argc, char **argv)
{
	static const struct option options[] = {
		{ "memory", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "image", required_argument, NULL, 'i' },
		{ "no-sandbox", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct buf why = BUF_INIT;
	const char *v;
	int opt;

	while ((opt = opt_next(argc, argv, "h", options, &v, &why)) != OPT_END) {
		switch (opt) {
		case 'm':
			if (config_parse_memory(v, &r->memory_mib, &why) < 0)
				die("--memory: %s", why.buf);
			break;
		case 'c':
			if (parse_cpus(v, &r->cpus, &why) < 0)
				die("--cpus: %s", why.buf);
			break;
		case 'i':
			if (!image_name_ok(v))
				die("--image: '%s' is not an image name", v);
			r->image = v;
			break;
		case 'n':
			r->no_sandbox = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_WORD:
			error("'%s' is not an option: the command goes after '--'", v);
			usage_die(usage_text);
		default:
			error("%s", why.buf);
			usage_die(usage_text);
		}
	}
	for (int i = optind; i < argc; i++)
		strvec_push(&r->command, argv[i]);
	buf_release(&why);
}

static void find_project(struct run *r)
{
	struct buf cwd = BUF_INIT, checkout = BUF_INIT, path = BUF_INIT, err = BUF_INIT;
	int ret, created;

	if (project_checkout_here(&checkout, &err) < 0)
		die("%s", err.buf);
	if ((ret = project_open(checkout.buf, &r->project, &created)) < 0)
		die_err(ret, "cannot open the project of '%s'", checkout.buf);
	if ((r->lock_fd = project_lock(r->project.dir, PROJECT_LOCK_SHARED)) < 0)
		die_err(r->lock_fd, "cannot lock the project '%s'", r->project.name);
	buf_addf(&path, "%s/config.yaml", r->project.dir);
	if (config_load(&r->cfg, path.buf, &err) < 0)
		die("%s", err.buf);
	buf_release(&cwd);
	buf_release(&checkout);
	buf_release(&path);
	buf_release(&err);
}

static int mkdir_ok(const char *path, mode_t mode)
{
	return mkdir(path, mode) == 0 || errno == EEXIST ? 0 : -errno;
}

static void make_run_dir(struct run *r)
{
	struct buf runs = BUF_INIT;
	int ret;

	buf_addf(&runs, "%s/runs", r->project.dir);
	if ((ret = mkdir_ok(runs.buf, 0700)) < 0)
		die_err(ret, "cannot make '%s'", runs.buf);
	if ((ret = task_id_new(r->id)) < 0 ||
	    (ret = task_name_make(r->run_name, time(NULL), r->id)) < 0)
		die_err(ret, "cannot make a run id");
	buf_addf(&r->run_dir, "%s/%s", runs.buf, r->run_name);
	if (mkdir(r->run_dir.buf, 0700) < 0)
		die_errno("cannot make '%s'", r->run_dir.buf);
	buf_release(&runs);
}

/*
 * The cleaner: a child forked before the lockdown (which forbids unlink),
 * in a session of its own so the terminal's signals do not reach it.  It
 * waits for EOF on a pipe, which comes when we exit in any way, SIGKILL
 * included, and removes the run folder.
 */
static void start_cleaner(struct run *r)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	pid = fork();
	if (pid < 0)
		die_errno("cannot fork");
	if (pid == 0) {
		struct buf where = BUF_INIT, runs = BUF_INIT;
		char c;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC), dfd;

		setsid();
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_IGN);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		close(p[1]);
		/* Not the project lock, the VM's fds or anything else: only the pipe. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != p[0])
				close(fd);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		buf_addf(&runs, "%s/runs", r->project.dir);
		dfd = open(runs.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || rmtree_at(dfd, r->run_name, NULL, &where) < 0)
			fprintf(stderr, "aibox-run: cannot remove '%s/%s'\n", runs.buf,
				where.len ? where.buf : r->run_name);
		_exit(0);
	}
	close(p[0]);
	r->cleaner_fd = p[1];
}

static void add_mount(struct run *r, const char *host, const char *guest, const char *tag,
		      int writable)
{
	struct vm_mount *m;

	r->mounts = xrealloc(r->mounts, (r->nr_mounts + 1) * sizeof(*r->mounts));
	m = &r->mounts[r->nr_mounts++];
	m->host_path = host;
	m->tag = strvec_push(&r->tags, tag);
	m->writable = writable;
	strvec_push(&r->guest_paths, guest);
}

/* ~/.claude's skills, agents and commands, read-only (claude_share.h). */
static void add_claude_shares(struct run *r)
{
	struct claude_shares cs = CLAUDE_SHARES_INIT;
	struct buf err = BUF_INIT;

	if (claude_shares_plan(&r->cfg, getenv("HOME"), &cs, &err) < 0)
		die("%s", err.buf);
	/* The host paths must outlive the VM's start: keep them in the strvec. */
	for (size_t i = 0; i < cs.nr; i++)
		add_mount(r, strvec_push(&r->host_paths, cs.v[i].host), cs.v[i].guest, cs.v[i].tag,
			  0);
	claude_shares_release(&cs);
	buf_release(&err);
}

static void plan_mounts(struct run *r)
{
	struct buf home = BUF_INIT;
	char tag[GUEST_TAG_MAX + 1];
	int ret;

	for (size_t i = 0; i < r->cfg.nr_mounts; i++) {
		guest_mount_tag(tag, i);
		add_mount(r, r->cfg.mounts[i].host, r->cfg.mounts[i].vm, tag, 0);
	}
	add_claude_shares(r);

	buf_addf(&home, "%s/home", r->project.dir);
	if ((ret = mkdir_ok(home.buf, 0700)) < 0)
		die_err(ret, "cannot make '%s'", home.buf);
	add_mount(r, r->project.checkout, r->cfg.path, GUEST_TAG_PROJECT, 1);
	add_mount(r, strvec_push(&r->host_paths, home.buf), GUEST_HOME, GUEST_TAG_HOME, 1);
	buf_release(&home);
}

/*
 * The config's env values, the API key and the git tokens, taken out of our
 * environment (common/secret.h) so that no child inherits them: the values
 * go in over SSH, the key to the proxy and the tokens to the broker over
 * pipes.  No login is required: Claude Code in aibox run can be logged in
 * at its prompt, and the login stays in the project's home (docs/run.md).
 */
static void read_env(struct run *r, const char *cfg_path)
{
	struct buf v = BUF_INIT, oauth = BUF_INIT, err = BUF_INIT;
	int oauth_set, oauth_listed = 0;

	r->forward_key = secret_take_env("ANTHROPIC_API_KEY", &r->api_key) > 0 && r->api_key.len;
	oauth_set = secret_take_env("CLAUDE_CODE_OAUTH_TOKEN", &oauth) > 0;
	for (size_t i = 0; i < r->cfg.env.nr; i++) {
		const char *name = r->cfg.env.v[i];
		int set;

		buf_reset(&v);
		/* The key stays on the host: the proxy adds it. */
		if (!strcmp(name, "ANTHROPIC_API_KEY"))
			continue;
		if (!strcmp(name, "CLAUDE_CODE_OAUTH_TOKEN")) {
			oauth_listed = 1;
			set = oauth_set;
			buf_add(&v, oauth.buf, oauth.len);
		} else {
			set = secret_take_env(name, &v) > 0;
		}
		if (set)
			strvec_pushf(&r->env, "%s=%s", name, v.buf);
	}
	if (r->forward_key && oauth_listed && oauth_set && oauth.len) {
		buf_reset(&err);
		login_both_warning(cfg_path, &err);
		warning("%s", err.buf);
	} else if (!r->forward_key && !oauth_listed && oauth_set && oauth.len) {
		warning("CLAUDE_CODE_OAUTH_TOKEN is set in your shell, but the env of '%s' does not "
			"list it, so the VM does not get it: log in at Claude Code's prompt, or add "
			"it to env",
			cfg_path);
	}
	/* The git: remotes' tokens, for aibox-broker (docs/broker.md): taken now. */
	buf_reset(&err);
	if (broker_tokens_take(&r->cfg, &r->broker_tokens, &err) < 0)
		die("%s", err.buf);
	/*
	 * Before the run folder: the image, the mounts and presets and the git:
	 * remotes, in the words aibox task uses.
	 */
	buf_reset(&err);
	if (image_find(r->image, &r->image_dir, &err) < 0 || config_host_check(&r->cfg, &err) < 0 ||
	    broker_remotes_check(&r->cfg, &err) < 0)
		die("%s", err.buf);
	buf_wipe_release(&v);
	buf_wipe_release(&oauth);
	buf_release(&err);
}

static void write_settings(struct run *r)
{
	struct task_settings ts = {.mode = TASK_MODE_RUN, .id = r->id, .path = r->cfg.path};
	struct task_mount *mounts = xcalloc(r->nr_mounts + 1, sizeof(*mounts));
	const char **remotes = xcalloc(r->cfg.nr_git + 1, sizeof(*remotes));
	struct strvec names = STRVEC_INIT;
	struct buf path = BUF_INIT, text = BUF_INIT, err = BUF_INIT;
	int ret;

	/* The guest mounts the two read-write shares itself (run.h). */
	for (size_t i = 0; i < r->nr_mounts; i++)
		if (!r->mounts[i].writable) {
			mounts[ts.nmounts].tag = r->mounts[i].tag;
			mounts[ts.nmounts++].path = r->guest_paths.v[i];
		}
	ts.mounts = mounts;
	ts.command = (const char *const *)r->command.v;
	ts.ncommand = r->command.nr;
	ts.uid = (long)getuid();
	ts.gid = (long)getgid();
	ts.api = r->forward_key ? TASK_API_FORWARD : TASK_API_NONE;
	for (size_t i = 0; i < r->env.nr; i++)
		strvec_pushf(&names, "%.*s", (int)strcspn(r->env.v[i], "="), r->env.v[i]);
	ts.env_names = (const char *const *)names.v;
	ts.nenv = names.nr;
	for (size_t i = 0; i < r->cfg.nr_git; i++)
		remotes[i] = r->cfg.git[i].url;
	ts.git_remotes = remotes;
	ts.ngit_remotes = r->cfg.nr_git;
	if (task_settings_json(&ts, &text, &err) < 0)
		die("cannot write settings.json: %s", err.buf);
	buf_addf(&path, "%s/settings.json", r->run_dir.buf);
	if ((ret = buf_write_file(&text, path.buf, 0644)) < 0)
		die_err(ret, "cannot write '%s'", path.buf);
	free(mounts);
	free(remotes);
	strvec_clear(&names);
	buf_release(&path);
	buf_release(&text);
	buf_release(&err);
}

/* The run's key may ask for a terminal: `restrict,pty` instead of `restrict`. */
static void allow_pty(struct run *r)
{
	struct buf path = BUF_INIT, in = BUF_INIT, out = BUF_INIT;
	const char *at;
	ssize_t n;
	int ret;

	buf_addf(&path, "%s/ssh/authorized_keys", r->run_dir.buf);
	if ((n = buf_read_file(&in, path.buf, 16384)) < 0)
		die_err((int)n, "cannot read '%s'", path.buf);
	at = strstr(in.buf, "\",restrict ");
	if (!at)
		die("'%s' is not as expected", path.buf);
	buf_add(&out, in.buf, (size_t)(at - in.buf) + strlen("\",restrict"));
	buf_addstr(&out, ",pty");
	buf_addstr(&out, at + strlen("\",restrict"));
	if ((ret = buf_write_file(&out, path.buf, 0644)) < 0)
		die_err(ret, "cannot write '%s'", path.buf);
	buf_release(&path);
	buf_release(&in);
	buf_release(&out);
}

/*
 * aibox-broker for the config's git: remotes, as aibox task starts it
 * (docs/broker.md, "In aibox task"); its log is broker.log in the project's
 * folder, next to proxy.log.  The tokens, out of our environment since
 * read_env(), go over a pipe (--token-fd=5).
 */
static void start_broker(struct run *r)
{
	struct buf log = BUF_INIT, line = BUF_INIT;
	int sv[2], ready[2], tfd, ret;
	ssize_t n;

	if (!r->cfg.nr_git)
		return;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die_errno("cannot make a socket pair");
	if (pipe2(ready, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	buf_addf(&log, "%s/broker.log", r->project.dir);
	strvec_pushf(&r->broker.args, "%s/aibox-broker", libexec_dir());
	broker_spawn_remotes(&r->broker, &r->cfg);
	strvec_pushl(&r->broker.args, "--handoff-fd=3", "--ready-fd=4", "--token-fd=5", NULL);
	strvec_pushf(&r->broker.args, "--log=%s", log.buf);
	if (r->no_sandbox)
		strvec_push(&r->broker.args, "--no-sandbox");
	r->broker.in = SPAWN_NULL;
	r->broker.out = SPAWN_NULL;
	r->broker.pdeathsig = SIGTERM;
	r->broker.new_session = 1;
	if ((tfd = secret_pipe(r->broker_tokens.buf, r->broker_tokens.len)) < 0)
		die_err(tfd, "cannot pass the git tokens to aibox-broker");
	buf_wipe_release(&r->broker_tokens);
	spawn_give_fd(&r->broker, sv[0], 3);
	spawn_give_fd(&r->broker, ready[1], 4);
	spawn_give_fd(&r->broker, tfd, 5);
	if ((ret = spawn_start(&r->broker)) < 0)
		die_err(ret, "cannot start aibox-broker");
	close(sv[0]);
	close(ready[1]);
	close(tfd);
	r->broker_sock = sv[1];
	n = buf_read_fd(&line, ready[0], 4096);
	close(ready[0]);
	if (n <= 0 || strncmp(line.buf, "ready", 5))
		die("aibox-broker did not start (see its messages above)");
	buf_release(&log);
	buf_release(&line);
}

static void start_proxy(struct run *r, struct buf *sock)
{
	struct buf log = BUF_INIT, line = BUF_INIT;
	int ready[2], kfd = -1, ret;
	ssize_t n;

	buf_addf(sock, "%s/proxy.sock", r->run_dir.buf);
	buf_addf(&log, "%s/proxy.log", r->project.dir);
	if (pipe2(ready, O_CLOEXEC) < 0)
		die_errno("cannot make a pipe");
	strvec_pushf(&r->proxy.args, "%s/aibox-proxy", libexec_dir());
	strvec_pushf(&r->proxy.args, "--listen=unix:%s", sock->buf);
	strvec_pushf(&r->proxy.args, "--log=%s", log.buf);
	strvec_push(&r->proxy.args, "--ready-fd=3");
	for (size_t i = 0; i < r->cfg.allow.nr; i++)
		strvec_pushf(&r->proxy.args, "--allow=%s", r->cfg.allow.v[i]);
	if (r->forward_key) {
		strvec_push(&r->proxy.args, "--key-fd=5");
		if ((kfd = secret_pipe(r->api_key.buf, r->api_key.len)) < 0)
			die_err(kfd, "cannot pass the API key to aibox-proxy");
		buf_wipe_release(&r->api_key);
		spawn_give_fd(&r->proxy, kfd, 5);
		spend_proxy_args(&r->spend, &r->proxy.args, 6);
		if (r->spend.ledger_fd >= 0)
			spawn_give_fd(&r->proxy, r->spend.ledger_fd, 6);
	}
	if (r->broker_sock >= 0)
		strvec_push(&r->proxy.args, "--broker-fd=4");
	if (r->no_sandbox)
		strvec_push(&r->proxy.args, "--no-sandbox");
	if (r->broker_sock >= 0)
		spawn_give_fd(&r->proxy, r->broker_sock, 4);
	r->proxy.in = SPAWN_NULL;
	r->proxy.out = SPAWN_NULL;
	r->proxy.pdeathsig = SIGTERM;
	r->proxy.new_session = 1;
	spawn_give_fd(&r->proxy, ready[1], 3);
	if ((ret = spawn_start(&r->proxy)) < 0)
		die_err(ret, "cannot start aibox-proxy");
	close(ready[1]);
	if (kfd >= 0)
		close(kfd);
	if (r->broker_sock >= 0) {
		close(r->broker_sock);
		r->broker_sock = -1;
	}
	n = buf_read_fd(&line, ready[0], 4096);
	close(ready[0]);
	if (n <= 0 || strncmp(line.buf, "ready", 5))
		die("aibox-proxy did not start (see its messages above)");
	buf_release(&log);
	buf_release(&line);
}

static void show_console(struct run *r)
{
	char tail[2048];
	off_t size = lseek(r->console_fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(tail) ? size - (off_t)sizeof(tail) : 0;
	ssize_t n = pread(r->console_fd, tail, sizeof(tail), from);

	if (n > 0) {
		fputs("aibox-run: the VM's console ended with:\n", stderr);
		fwrite(tail, 1, (size_t)n, stderr);
	}
}

static void boot(struct run *r, const char *proxy_sock)
{
	struct vm_config vc = VM_CONFIG_INIT;
	struct buf console = BUF_INIT, plog = BUF_INIT;
	int ret;

	buf_addf(&console, "%s/console.log", r->run_dir.buf);
	r->console_fd = open(console.buf, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (r->console_fd < 0)
		die_errno("cannot open '%s'", console.buf);
	vc.image_dir = r->image_dir.buf;
	vc.share_dir = r->run_dir.buf;
	vc.mode = "run";
	vc.memory_mb = (unsigned)(r->memory_mib ? r->memory_mib : r->cfg.memory_mib);
	vc.cpus = (unsigned)(r->cpus ? r->cpus : r->cfg.cpus);
	vc.disk_bytes = r->cfg.disk_mib * 1024ULL * 1024ULL;
	vc.state_dir = r->run_dir.buf;
	vc.proxy_socket = proxy_sock;
	buf_addf(&plog, "%s/proxy.log", r->project.dir);
	vc.conns_log = plog.buf; /* aibox-connect's refusals (its cap: VM_MAX_CONNS) */
	vc.mounts = r->mounts;
	vc.nr_mounts = r->nr_mounts;
	vc.log_fd = r->console_fd;
	if ((ret = vm_start(&vc, &r->vm)) < 0)
		die_err(ret, "cannot start the VM");
	if ((ret = vm_wait_ssh(&r->vm, BOOT_TIMEOUT_MS)) < 0) {
		struct buf why = BUF_INIT;

		show_console(r);
		vm_wait_ssh_why(ret, BOOT_TIMEOUT_MS, &why);
		die("the VM did not come up: %s", why.buf);
	}
	buf_release(&console);
	buf_release(&plog);
}

static int get_size(void *ctx, unsigned *cols, unsigned *rows)
{
	return tty_size(0, cols, rows);
}

static void stop_all(struct run *r)
{
	tty_restore();
	if (r->vm.pid > 0)
		vm_stop(&r->vm, 10000);
	spawn_stop(&r->proxy, SIGTERM);
	spawn_stop(&r->broker, SIGTERM);
}

int main(int argc, char **argv)
{
	struct run r = { .project = PROJECT_INIT, .run_dir = BUF_INIT, .lock_fd = -1,
			 .command = STRVEC_INIT, .image = "default", .env = STRVEC_INIT,
			 .tags = STRVEC_INIT, .guest_paths = STRVEC_INIT, .host_paths = STRVEC_INIT, .proxy = SPAWN_INIT,
			 .broker = SPAWN_INIT, .broker_sock = -1, .image_dir = BUF_INIT,
			 .api_key = BUF_INIT, .broker_tokens = BUF_INIT,
			 .vm = VM_INIT, .console_fd = -1, .cleaner_fd = -1, .spend = SPEND_INIT };
	struct ssh_task_keys keys = SSH_TASK_KEYS_INIT;
	struct ssh_client c = SSH_CLIENT_INIT;
	struct ssh_interactive x = { 0 };
	struct buf sock = BUF_INIT, err = BUF_INIT;
	const char *env[2] = { NULL, NULL };
	char *env_json = NULL;
	int tty, ret, status;

	tool_init(argc, argv);
	die_status = EXIT_RUN_ERROR;
	/* find_project()'s config_load() initialises r.cfg (config_init() first would leak). */
	parse_options(&r, argc, argv);
	tty = isatty(0);

	find_project(&r);
	{
		struct buf cfg_path = BUF_INIT;

		buf_addf(&cfg_path, "%s/config.yaml", r.project.dir);
		read_env(&r, cfg_path.buf);
		buf_release(&cfg_path);
	}
	/* Counted against the project's daily cap where the key is forwarded. */
	if (r.forward_key && spend_start(&r.spend, r.project.dir, 0, r.cfg.budget_day, &err) < 0)
		die("%s", err.buf);
	make_run_dir(&r);
	start_cleaner(&r);
	if (ssh_task_keys_make(r.run_dir.buf, NULL, &keys, &err) < 0)
		die("%s", err.buf);
	allow_pty(&r);
	plan_mounts(&r);
	write_settings(&r);
	start_broker(&r);
	start_proxy(&r, &sock);
	boot(&r, sock.buf);

	{
		json_t *o = json_object();

		for (size_t i = 0; i < r.env.nr; i++) {
			const char *eq = strchr(r.env.v[i], '=');

			json_object_setn_new(o, r.env.v[i], (size_t)(eq - r.env.v[i]),
					     json_string(eq + 1));
		}
		env_json = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (!env_json)
			die("cannot encode the environment (not UTF-8?)");
		buf_addf(&err, "AIBOX_ENV=%s", env_json);
		explicit_bzero(env_json, strlen(env_json));
		free(env_json);
		env[0] = err.buf;
	}

	x.command = "run";
	x.env = env;
	x.in_fd = 0;
	x.out_fd = 1;
	x.err_fd = 2;
	x.resize_fd = -1;
	x.stop_fd = r.vm.pidfd;
	x.get_size = get_size;
	if (tty) {
		const char *term = getenv("TERM");

		x.term = term && *term ? term : "dumb";
		x.cols = 80;
		x.rows = 24;
		tty_size(0, &x.cols, &x.rows);
		if ((x.resize_fd = tty_winch_fd()) < 0)
			die_err(x.resize_fd, "cannot watch the window size");
	}

	if (r.no_sandbox)
		warning("running without the sandbox (--no-sandbox)");
	else if ((ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock down");

	c.fd = r.vm.ssh_fd;
	c.host_key = (const unsigned char *)keys.host_blob.buf;
	c.host_key_len = keys.host_blob.len;
	c.user_key = keys.user_key.buf;
	c.user_key_len = keys.user_key.len;
	c.timeout_ms = CONNECT_TIMEOUT_MS;
	if ((ret = ssh_connect(&c)) < 0) {
		ssh_close(&c);
		stop_all(&r);
		die("cannot connect to the VM: %s", c.error);
	}
	if (tty && (ret = tty_raw(0)) < 0)
		die_err(ret, "cannot put the terminal in raw mode");
	ret = ssh_interactive(&c, &x);
	tty_restore();
	explicit_bzero(err.buf, err.len);
	ssh_close(&c);
	ssh_task_keys_release(&keys);
	if (ret < 0) {
		stop_all(&r);
		die("%s", c.error);
	}
	stop_all(&r);
	if (x.exit_status < 0)
		error("the VM sent no exit status");
	status = x.exit_status < 0 ? EXIT_RUN_ERROR : x.exit_status;
	buf_release(&sock);
	buf_release(&err);
	free(r.mounts);
	strvec_clear(&r.tags);
	strvec_clear(&r.guest_paths);
	strvec_clear(&r.host_paths);
	for (size_t i = 0; i < r.env.nr; i++)
		explicit_bzero((char *)r.env.v[i], strlen(r.env.v[i]));
	strvec_clear(&r.env);
	strvec_clear(&r.command);
	spawn_clear(&r.proxy);
	spawn_clear(&r.broker);
	config_release(&r.cfg);
	project_release(&r.project);
	buf_release(&r.run_dir);
	buf_release(&r.image_dir);
	/* Our exit closes the cleaner's pipe: it removes the run folder then. */
	return status;
}
