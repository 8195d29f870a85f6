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

#include "task/audit.h"
#include "task/broker_spawn.h"
#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "task/helpers.h"
#include "task/host_start.h"
#include "vm/image.h"
#include "task/policy.h"
#include "task/login.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/paths.h"
#include "config/project.h"
#include "proxy/spend.h"
#include "base/rmtree.h"
#include "base/sandbox.h"
#include "base/secret.h"
#include "task/shares.h"
#include "base/spawn.h"
#include "vm/ssh.h"
#include "base/strvec.h"
#include "task/task_settings.h"
#include "base/taskid.h"
#include "base/tty.h"
#include "vm/vm.h"
#include "base/guest_abi.h"
#include "base/banned.h"

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

#define BOOT_TIMEOUT_MS    (300 * 1000)
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
	struct host_env env;    /* the key, the env values, the git tokens */
	struct shares shares;   /* config mounts, claude dirs, project, home */
	struct helpers helpers; /* aibox-broker and aibox-proxy */
	struct spend spend;     /* the day's cap and ledger (docs/budget.md) */
	struct vm vm;
	int console_fd;
	int cleaner_fd;         /* write end: the cleaner removes the run folder at its EOF */
	int audit_fd;           /* audit.jsonl (common/task/audit.h), open from the run's start */
	struct buf policy_path; /* the policy in force, "" for none */
};

/* The run, for die_routine: its end in the audit record. */
static struct run *failing_run;

/* Options anywhere before `--` (common/base/opt.h); the command is what follows `--`. */
static void parse_options(struct run *r, int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"memory", 0, OPT_TEXT, "SIZE", 'm',
	     "the VM's memory, 512M to 1T (default: the config's, 4G)"},
	    {"cpus", 0, OPT_TEXT, "N", 'c',
	     "the VM's CPUs, 1 to this machine's (default: the config's, 2)"},
	    {"image", 0, OPT_IMAGE, "NAME", 'i', "the image to boot (default: default)"},
	    {"no-sandbox", 0, OPT_FLAG, NULL, 'n', "do not lock aibox down with seccomp"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT;
	const char *v;
	int opt;

	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
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

/*
 * The project, held shared, and its config (common/task/host_start.h), held to
 * the administrator's policy (common/task/policy.h) with the options.
 */
static void find_project(struct run *r, struct buf *cfg_path)
{
	struct buf checkout = BUF_INIT, err = BUF_INIT;
	struct policy_ask ask = {
	    .memory_mib = r->memory_mib, .cpus = r->cpus, .image = r->image, .run = 1};
	struct policy p;

	policy_init(&p);
	if (host_project_open(&checkout, &r->project, cfg_path, &r->cfg, &err) < 0)
		die("%s", err.buf);
	if (policy_load(&p, &err) < 0 || policy_check(&p, &r->cfg, cfg_path->buf, &ask, &err) < 0 ||
	    policy_user_day(&p, &r->spend.user_ledger_fd, &r->spend.cap_user, &err) < 0) {
		struct buf aerr = BUF_INIT;

		if (audit_refusal(&r->audit_fd, "run", r->project.name, p.path, err.buf, &aerr) < 0)
			warning("cannot write the audit record: %s", aerr.buf);
		die("%s", err.buf);
	}
	if ((r->lock_fd = host_project_lock(&r->project, &err)) < 0)
		die("%s", err.buf);
	if (p.path)
		buf_addstr(&r->policy_path, p.path);
	policy_release(&p);
	host_size(&r->cfg, r->memory_mib, r->cpus);
	buf_release(&checkout);
	buf_release(&err);
}

/*
 * The run's entry in the audit record (docs/security.md, "The audit
 * record"): "run-start" once its folder is made (one that cannot be recorded
 * stops the run), "run-end" with its exit status (one that cannot warns).
 * The command is recorded by its program and a digest of all its words.
 */
static void audit_run(struct run *r, const char *event, const char *result, int code)
{
	json_t *e = audit_entry(event);
	struct buf err = BUF_INIT, words = BUF_INIT;
	int ret;

	json_object_set_new(e, "project", json_string(r->project.name ? r->project.name : ""));
	json_object_set_new(e, "run", json_string(r->run_name));
	if (!strcmp(event, "run-start")) {
		for (size_t i = 0; i < r->command.nr; i++)
			buf_add(&words, r->command.v[i], strlen(r->command.v[i]) + 1);
		json_object_set_new(e, "command",
		                    json_string(r->command.nr ? r->command.v[0] : "claude"));
		buf_reset(&err);
		audit_sha256_hex(words.buf, words.len, &err);
		json_object_set_new(e, "command_sha256", json_string(err.buf));
		buf_reset(&err);
		json_object_set_new(e, "memory_mib", json_integer((json_int_t)r->cfg.memory_mib));
		json_object_set_new(e, "cpus", json_integer(r->cfg.cpus));
		json_object_set_new(e, "image", json_string(r->image));
		json_object_set_new(e, "allow", audit_joined(&r->cfg.allow));
		json_object_set_new(e, "policy",
		                    json_string(r->policy_path.len ? r->policy_path.buf : ""));
		json_object_set_new(
		    e, "secrets",
		    audit_secrets(r->forward_key, &r->env.names, &r->env.ph_names, &r->cfg));
	} else {
		json_object_set_new(e, "result", json_string(result));
		json_object_set_new(e, "exit", json_integer(code));
	}
	ret = audit_write(&r->audit_fd, e, &err);
	json_decref(e);
	if (ret < 0 && !strcmp(event, "run-start"))
		die("cannot write the audit record: %s", err.buf);
	if (ret < 0)
		warning("cannot write the audit record: %s", err.buf);
	buf_release(&words);
	buf_release(&err);
}

/* die() once the run has started: its end in the audit record, then the message. */
static void run_failed(const char *msg)
{
	struct run *r = failing_run;

	failing_run = NULL;
	fprintf(stderr, "%s: %s\n", progname, msg);
	if (r)
		audit_run(r, "run-end", "failed", die_status);
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
	/* Not the project lock, the VM's fds or anything else: only the pipe. */
	pid = spawn_worker(&p[0], 1, SPAWN_WORKER_DETACH);
	if (pid < 0)
		die_err(pid, "cannot fork");
	if (pid == 0) {
		struct buf where = BUF_INIT, runs = BUF_INIT;
		char c;
		int dfd;

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

/*
 * The config's mounts and ~/.claude's folders read-only, the checkout and
 * the project's home read-write (common/task/shares.h).
 */
static void plan_mounts(struct run *r)
{
	struct buf home = BUF_INIT, err = BUF_INIT;
	int ret;

	if (shares_plan(&r->shares, &r->cfg, getenv("HOME"), &err) < 0)
		die("%s", err.buf);
	buf_addf(&home, "%s/home", r->project.dir);
	if ((ret = mkdir_ok(home.buf, 0700)) < 0)
		die_err(ret, "cannot make '%s'", home.buf);
	shares_add_writable(&r->shares, r->project.checkout, GUEST_TAG_PROJECT);
	shares_add_writable(&r->shares, home.buf, GUEST_TAG_HOME);
	buf_release(&home);
	buf_release(&err);
}

/*
 * The config's env values, the API key and the git tokens, taken out of our
 * environment (common/base/secret.h) so that no child inherits them: the values
 * go in over SSH, the key to the proxy and the tokens to the broker over
 * pipes.  No login is required: Claude Code in aibox run can be logged in
 * at its prompt, and the login stays in the project's home (docs/run.md).
 */
static void read_env(struct run *r, const char *cfg_path)
{
	struct buf err = BUF_INIT;
	const struct login *l = &r->env.login;

	if (host_env_take(&r->env, &r->cfg, cfg_path, &err) < 0)
		die("%s", err.buf);
	r->forward_key = l->key_set;
	/* The token goes to the proxy only when Claude Code uses it (docs/proxy.md). */
	if (r->forward_key)
		buf_wipe_release(&r->env.oauth);
	if (l->key_set && l->token_listed && l->token_set) {
		login_both_warning(cfg_path, &err);
		warning("%s", err.buf);
	} else if (!l->key_set && !l->token_listed && l->token_set) {
		warning(
		    "CLAUDE_CODE_OAUTH_TOKEN is set in your shell, but the env of '%s' does not "
		    "list it, so the VM does not get it: log in at Claude Code's prompt, or add "
		    "it to env",
		    cfg_path);
	}
	/* Before the run folder, in the words aibox task uses. */
	buf_reset(&err);
	if (host_checks(&r->cfg, r->image, &r->image_dir, &err) < 0)
		die("%s", err.buf);
	buf_release(&err);
}

static void write_settings(struct run *r)
{
	struct task_settings ts = {.mode = TASK_MODE_RUN, .id = r->id, .path = r->cfg.path};
	const char **remotes = xcalloc(r->cfg.nr_git + 1, sizeof(*remotes));
	struct buf path = BUF_INIT, text = BUF_INIT, err = BUF_INIT;
	int ret;

	/* The guest mounts the two read-write shares itself (run.h). */
	ts.mounts = r->shares.settings;
	ts.nmounts = r->shares.nr_settings;
	ts.command = (const char *const *)r->command.v;
	ts.ncommand = r->command.nr;
	ts.uid = (long)getuid();
	ts.gid = (long)getgid();
	ts.api = r->forward_key     ? TASK_API_FORWARD
	         : r->env.oauth.len ? TASK_API_OAUTH
	                            : TASK_API_NONE;
	ts.env_names = (const char *const *)r->env.names.v;
	ts.nenv = r->env.names.nr;
	ts.ph_names = (const char *const *)r->env.ph_names.v;
	ts.ph_values = (const char *const *)r->env.ph_values.v;
	ts.nph = r->env.ph_names.nr;
	for (size_t i = 0; i < r->cfg.nr_git; i++)
		remotes[i] = r->cfg.git[i].url;
	ts.git_remotes = remotes;
	ts.ngit_remotes = r->cfg.nr_git;
	if (task_settings_json(&ts, &text, &err) < 0)
		die("cannot write settings.json: %s", err.buf);
	buf_addf(&path, "%s/" GUEST_FILE_SETTINGS, r->run_dir.buf);
	if ((ret = buf_write_file(&text, path.buf, 0644)) < 0)
		die_err(ret, "cannot write '%s'", path.buf);
	free(remotes);
	buf_release(&path);
	buf_release(&text);
	buf_release(&err);
}

/* A log of the project's folder, appended to (created 0600). */
static int open_log(struct run *r, const char *name)
{
	struct buf path = BUF_INIT;
	int fd;

	buf_addf(&path, "%s/%s", r->project.dir, name);
	fd = open(path.buf, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		die_errno("cannot open '%s'", path.buf);
	buf_release(&path);
	return fd;
}

/*
 * aibox-broker for the config's git: remotes and aibox-proxy, as aibox task
 * starts them (common/task/helpers.h); their logs are broker.log and proxy.log in
 * the project's folder.  The key and the tokens, out of our environment
 * since read_env(), are wiped once passed on.
 */
static void start_helpers(struct run *r, struct buf *sock)
{
	struct helpers_opts ho = {0};
	struct buf err = BUF_INIT;

	buf_addf(sock, "%s/proxy.sock", r->run_dir.buf);
	ho.cfg = &r->cfg;
	ho.sock_path = sock->buf;
	ho.proxy_log_fd = open_log(r, "proxy.log");
	ho.broker_log_fd = r->cfg.nr_git ? open_log(r, "broker.log") : -1;
	ho.api_key = r->forward_key ? &r->env.api_key : NULL;
	ho.spend = &r->spend;
	ho.tokens = &r->env.tokens;
	ho.secret_values = &r->env.secret_values;
	ho.placeholders = &r->env.placeholders;
	ho.oauth = &r->env.oauth;
	ho.oauth_placeholder = r->env.oauth_placeholder;
	ho.no_sandbox = r->no_sandbox;
	if (helpers_start(&r->helpers, &ho, &err) < 0 ||
	    helpers_ca_write(&r->helpers, r->run_dir.buf, &err) < 0)
		die("%s", err.buf);
	close(ho.proxy_log_fd);
	if (ho.broker_log_fd >= 0)
		close(ho.broker_log_fd);
	buf_release(&err);
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
	vc.mode = GUEST_MODE_RUN;
	host_vm_config(&vc, &r->cfg, &r->shares);
	vc.state_dir = r->run_dir.buf;
	vc.proxy_socket = proxy_sock;
	buf_addf(&plog, "%s/proxy.log", r->project.dir);
	vc.conns_log = plog.buf; /* aibox-connect's refusals (its cap: VM_MAX_CONNS) */
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
	helpers_stop(&r->helpers);
}

/* The interactive session's terminal side: a pty with TERM and the size when stdin is one. */
static void setup_terminal(struct ssh_interactive *x, int tty)
{
	const char *term = getenv("TERM");

	x->command = GUEST_CMD_RUN;
	x->in_fd = 0;
	x->out_fd = 1;
	x->err_fd = 2;
	x->resize_fd = -1;
	x->get_size = get_size;
	if (!tty)
		return;
	x->term = term && *term ? term : "dumb";
	x->cols = 80;
	x->rows = 24;
	tty_size(0, &x->cols, &x->rows);
	if ((x->resize_fd = tty_winch_fd()) < 0)
		die_err(x->resize_fd, "cannot watch the window size");
}

/*
 * Lock down, connect and run the command with the env values as one SSH
 * environment request (docs/internals.md, "aibox run"); everything is then
 * stopped.  The command's exit status, or EXIT_RUN_ERROR without one.
 */
static int session(struct run *r, struct ssh_task_keys *keys, int tty)
{
	struct ssh_client c = SSH_CLIENT_INIT;
	struct ssh_interactive x = {0};
	struct buf envb = BUF_INIT, err = BUF_INIT;
	const char *env[2] = {NULL, NULL};
	int ret;

	buf_addstr(&envb, GUEST_RUN_ENV_VAR "=");
	if (host_env_json(&r->env.names, &r->env.values, GUEST_SECRETS_ENV_VAR, &envb, &err) < 0)
		die("cannot pass the environment: %s", err.buf);
	env[0] = envb.buf;
	x.env = env;
	x.stop_fd = r->vm.pidfd;
	setup_terminal(&x, tty);

	if (r->no_sandbox)
		warning("running without the sandbox (--no-sandbox)");
	else if ((ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0)
		die_err(ret, "cannot lock down");

	c.fd = r->vm.ssh_fd;
	c.host_key = (const unsigned char *)keys->host_blob.buf;
	c.host_key_len = keys->host_blob.len;
	c.user_key = keys->user_key.buf;
	c.user_key_len = keys->user_key.len;
	c.timeout_ms = CONNECT_TIMEOUT_MS;
	if ((ret = ssh_connect(&c)) < 0) {
		char *why = buf_detach(&c.err, NULL);

		ssh_close(&c);
		stop_all(r);
		die("cannot connect to the VM: %s", why);
	}
	if (tty && (ret = tty_raw(0)) < 0)
		die_err(ret, "cannot put the terminal in raw mode");
	ret = ssh_interactive(&c, &x);
	tty_restore();
	buf_wipe_release(&envb);
	if (ret < 0) {
		char *why = buf_detach(&c.err, NULL);

		ssh_close(&c);
		stop_all(r);
		die("%s", why);
	}
	ssh_close(&c);
	stop_all(r);
	if (x.exit_status < 0)
		error("the VM sent no exit status");
	buf_release(&err);
	return x.exit_status < 0 ? EXIT_RUN_ERROR : x.exit_status;
}

int main(int argc, char **argv)
{
	struct run r = {.project = PROJECT_INIT,
	                .run_dir = BUF_INIT,
	                .lock_fd = -1,
	                .command = STRVEC_INIT,
	                .image = "default",
	                .env = HOST_ENV_INIT,
	                .shares = SHARES_INIT,
	                .helpers = HELPERS_INIT,
	                .image_dir = BUF_INIT,
	                .vm = VM_INIT,
	                .console_fd = -1,
	                .cleaner_fd = -1,
	                .audit_fd = -1,
	                .policy_path = BUF_INIT,
	                .spend = SPEND_INIT};
	struct ssh_task_keys keys = SSH_TASK_KEYS_INIT;
	struct buf sock = BUF_INIT, err = BUF_INIT, cfg_path = BUF_INIT;
	int tty, status;

	tool_init(argc, argv);
	die_status = EXIT_RUN_ERROR;
	parse_options(&r, argc, argv);
	tty = isatty(0);

	find_project(&r, &cfg_path);
	read_env(&r, cfg_path.buf);
	/* Counted against the project's daily cap where the key is forwarded. */
	if (r.forward_key && spend_start(&r.spend, r.project.dir, 0, r.cfg.budget_day, &err) < 0)
		die("%s", err.buf);
	make_run_dir(&r);
	audit_run(&r, "run-start", NULL, 0);
	failing_run = &r;
	die_routine = run_failed;
	start_cleaner(&r);
	if (ssh_task_keys_make(r.run_dir.buf, NULL, 1, &keys, &err) < 0)
		die("%s", err.buf);
	plan_mounts(&r);
	write_settings(&r);
	start_helpers(&r, &sock);
	boot(&r, sock.buf);
	status = session(&r, &keys, tty);
	die_routine = NULL;
	audit_run(&r, "run-end", "ended", status);

	ssh_task_keys_release(&keys);
	buf_release(&sock);
	buf_release(&err);
	buf_release(&cfg_path);
	shares_release(&r.shares);
	host_env_release(&r.env);
	strvec_clear(&r.command);
	config_release(&r.cfg);
	project_release(&r.project);
	buf_release(&r.run_dir);
	buf_release(&r.image_dir);
	buf_release(&r.policy_path);
	/* Our exit closes the cleaner's pipe: it removes the run folder then. */
	return status;
}
