/*
 * aibox task [flags] [prompt...], the flags anywhere among the words
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
#include <pwd.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/duration.h"
#include "git/bundle_check.h"
#include "git/bundle_read.h"
#include "git/checkout.h"
#include "task/audit.h"
#include "config/config.h"
#include "task/policy.h"
#include "base/err.h"
#include "task/host_start.h"
#include "vm/host_system.h"
#include "vm/image.h"
#include "task/login.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/out.h"
#include "base/paths.h"
#include "config/project.h"
#include "config/prompt.h"
#include "proxy/proxy_report.h"
#include "proxy/spend.h"
#include "task/task_results.h"
#include "base/sandbox.h"
#include "task/shares.h"
#include "base/shell_quote.h"
#include "task/slurm.h"
#include "task/slurm_detach.h"
#include "task/slurm_submit.h"
#include "base/spawn.h"
#include "vm/ssh.h"
#include "base/strvec.h"
#include "task/system_prompt.h"
#include "task/task_continue.h"
#include "task/task_group.h"
#include "task/task_folder.h"
#include "task/task_info.h"
#include "task/task_log.h"
#include "task/task_opts.h"
#include "task/task_vm.h"
#include "task/task_settings.h"
#include "task/task_record.h"
#include "task/task_session.h"
#include "base/taskid.h"
#include "base/guest_abi.h"
#include "base/banned.h"

/* In an attempt's folder: its group's id and a newline (docs/tasks.md, "Several attempts"). */
#define GROUP_FILE "group"

static const char usage_text[] =
    "usage: aibox task [options] [prompt...]\n"
    "\n"
    "Run Claude Code unattended in a fresh VM on a bundle of one commit.\n"
    "The task folder's path goes to stdout, everything else to stderr.\n"
    "\n"
    "    --model NAME           the model Claude Code uses (default: its own)\n"
    "    --from REV             start from this branch, tag, commit or stash (default HEAD)\n"
    "    --continue TASK        start from TASK's changes and resume its conversation\n"
    "    --file PATH            add the text of PATH to the prompt; - reads stdin (repeatable)\n"
    "    --timeout DURATION     Claude Code's time limit, like 60m or 1h30m (default 60m)\n"
    "    --max-budget-usd N     the cost cap, kept by aibox's proxy and Claude Code\n"
    "    --memory SIZE          the VM's memory, 512M to 1T, like 8G (default from the config)\n"
    "    --cpus N               the VM's CPUs, 1 to this machine's (default from the config)\n"
    "    --image NAME           the VM image (default: default)\n"
    "    --no-sandbox           skip aibox's own lockdown (seccomp), with a warning\n"
    "    --json                 at the end, one JSON object on stdout instead of the folder's\n"
    "                           path (its keys: docs/json.md)\n"
    "    --slurm                run the VM part as a Slurm job on a compute node\n"
    "    --attempts N           run N attempts (1 to 8) side by side, one folder each\n"
    "                           (default: the config's attempts:, else 1)\n"
    "    --detach               with Slurm: submit the job and return at once with the\n"
    "                           folder's path ('aibox tasks show TASK' checks its results)\n"
    "    -h, --help             show this help\n"
    "\n"
    "Options may stand before, between or after the prompt's words; after '--'\n"
    "every word is the prompt's.  Without prompt words or --file, the prompt is\n"
    "read from stdin unless it is a terminal.\n"
    "Exit status: 0 the task finished, 1 it did not, 2 usage or error.\n";

struct task {
	struct task_opts o;
	struct project p;
	struct config cfg;
	struct shares shares; /* the VM's 9p shares (common/task/shares.h) */
	struct buf checkout;
	struct buf prompt;
	char start_commit[OID_HEX_MAX + 1];
	struct buf git_name, git_email;
	struct host_env env;      /* the env values, the login (the key and tokens: below) */
	struct buf api_key;       /* for the proxy (--key-fd), when api is forward */
	struct buf broker_tokens; /* for the broker (--token-fd): NAME=value lines */
	enum task_api api;
	int project_lock_fd, task_lock_fd;
	char name[TASK_NAME_LEN + 1];
	const char *id; /* the end of name */
	struct buf dir; /* the task folder */
	struct buf image_dir;
	struct ssh_task_keys keys;
	int result_fds[RESULT_NFILES];
	int aibox_log_fd;
	int record_fd;      /* summary.json (common/task/task_record.h) */
	struct spend spend; /* the caps and the day's ledger (docs/budget.md) */
	struct buf proxy_sock;
	struct bundle_check checker; /* the check of changes.bundle (start_checker()) */
	int64_t t0, tphase;          /* clock_ms() at the start, and at this phase's */
	time_t start_time, end_time; /* of its start line and its summary, for the record */
	double boot_s, session_s;    /* for the derived lines of aibox.log */
	double ssh_s;                /* the SSH set-up before the command (task_vm.h) */
	double agent_in_boot;        /* an early task's agent before the banner (task_log.h) */
	struct task_continue cont;   /* with --continue */
	int audit_started;           /* the audit record has this task's start */
	int audit_fd;                /* audit.jsonl, open from the start (common/task/audit.h) */
	struct buf policy_path;      /* the policy in force (common/task/policy.h), "" for none */
	char group[TASK_ID_LEN + 1]; /* a detached attempt's group, read by slurm_check() */
};

/* The session's silence limit from AIBOX_SESSION_IDLE; 0: the default. */
static long session_idle;

/*
 * AIBOX_SESSION_IDLE (test-only, docs/internals.md): the session's silence
 * limit instead of 300 s, a duration of 1s to 5m; 0 when unset.  Read with
 * the options, so that a bad one is refused before a task starts.
 */
static long session_idle_ms(void)
{
	const char *v = getenv("AIBOX_SESSION_IDLE");
	struct buf why = BUF_INIT;
	int64_t ms;

	if (!v)
		return 0;
	if (duration_in(v, 1000, 300000, &ms, &why) < 0)
		die("AIBOX_SESSION_IDLE: %s", why.buf);
	return (long)ms;
}

/* The options (common/task/task_opts.h): those that fail die, -h prints the usage. */
static void parse_args(struct task_opts *o, int argc, char **argv)
{
	struct buf why = BUF_INIT;
	int ret = task_opts_parse(o, argc, argv, &why);

	if (ret == TASK_OPTS_HELP) {
		fputs(usage_text, stdout);
		exit(0);
	}
	if (ret == TASK_OPTS_DESCRIBE)
		opt_describe_exit(task_opts_table);
	if (ret == TASK_OPTS_USAGE) {
		error("%s", why.buf);
		usage_die(usage_text);
	}
	if (ret < 0)
		die("%s", why.buf);
	buf_release(&why);
	session_idle = session_idle_ms();
}

/*
 * The administrator's policy (common/task/policy.h), read again wherever a task
 * starts (here and on a Slurm node): the config read from cfg_path and the
 * options are held to it before anything else is made, and what they leave
 * to defaults is brought within it.  A policy refused, or anything asked
 * beyond it, dies with exit 2.
 */
/* The user's ledger and cap under the policy's budget.day, for the proxy (t->spend). */
static int user_day(struct task *t, const struct policy *p, struct buf *err)
{
	if (t->spend.user_ledger_fd >= 0)
		close(t->spend.user_ledger_fd);
	return policy_user_day(p, &t->spend.user_ledger_fd, &t->spend.cap_user, err);
}

/* Hold project's config cfg (read from cfg_path) and the options to the policy; beyond it dies. */
static void check_policy_of(struct task *t, const char *project, struct config *cfg,
                            const char *cfg_path)
{
	struct policy p;
	struct buf err = BUF_INIT;
	struct policy_ask ask = {
	    .memory_mib = t->o.memory_mib,
	    .cpus = t->o.cpus,
	    .attempts = t->o.attempts,
	    /* the default is not asked for: the policy lowers it */
	    .timeout_ms = t->o.timeout_ms != TASK_OPTS_DEFAULT_TIMEOUT_MS ? t->o.timeout_ms : 0,
	    .budget = t->o.has_budget ? (uint64_t)(t->o.budget * 1e9 + 0.5) : 0,
	    .image = t->o.image,
	};

	policy_init(&p);
	if (policy_load(&p, &err) < 0 || policy_check(&p, cfg, cfg_path, &ask, &err) < 0 ||
	    user_day(t, &p, &err) < 0) {
		struct buf aerr = BUF_INIT;

		if (audit_refusal(&t->audit_fd, "task", project, p.path, err.buf, &aerr) < 0)
			warning("cannot write the audit record: %s", aerr.buf);
		die("%s", err.buf);
	}
	t->o.timeout_ms = policy_timeout(&p, t->o.timeout_ms);
	if (p.path)
		buf_addstr(&t->policy_path, p.path);
	policy_release(&p);
	buf_release(&err);
}

static void check_policy(struct task *t, const char *cfg_path)
{
	check_policy_of(t, t->p.name, &t->cfg, cfg_path);
}

/*
 * The audit record's entry of this task (common/task/audit.h): "start" once the
 * folder is made, "end" with the outcome.  A start that cannot be recorded
 * stops the task; an end that cannot warns.
 */
static void audit_task(struct task *t, const char *event, const char *result, int code,
                       const struct vm_outcome *o, const char *end_commit)
{
	json_t *e = audit_entry(event);
	struct buf err = BUF_INIT, digest = BUF_INIT;
	int ret;

	json_object_set_new(e, "project", json_string(t->p.name ? t->p.name : ""));
	json_object_set_new(e, "task", json_string(t->name));
	if (!strcmp(event, "start")) {
		audit_sha256_hex(t->prompt.buf, t->prompt.len, &digest);
		json_object_set_new(e, "prompt_sha256", json_string(digest.buf));
		json_object_set_new(e, "start_commit", json_string(t->start_commit));
		json_object_set_new(e, "memory_mib", json_integer((json_int_t)t->cfg.memory_mib));
		json_object_set_new(e, "cpus", json_integer(t->cfg.cpus));
		json_object_set_new(e, "timeout_s",
		                    json_integer((json_int_t)(t->o.timeout_ms / 1000)));
		json_object_set_new(e, "image", json_string(t->o.image ? t->o.image : "default"));
		json_object_set_new(e, "slurm", json_integer(t->o.slurm));
		json_object_set_new(e, "model", json_string(t->o.model ? t->o.model : ""));
		json_object_set_new(e, "allow", audit_joined(&t->cfg.allow));
		json_object_set_new(e, "policy",
		                    json_string(t->policy_path.len ? t->policy_path.buf : ""));
		json_object_set_new(e, "secrets",
		                    audit_secrets(t->api == TASK_API_FORWARD, &t->env.names,
		                                  &t->env.ph_names, &t->cfg));
	} else {
		struct buf hosts = BUF_INIT;

		json_object_set_new(e, "result", json_string(result));
		json_object_set_new(e, "exit", json_integer(code));
		for (size_t i = 0; o && o->have_report && i < o->report.nhosts; i++) {
			const struct proxy_report_host *h = &o->report.hosts[i];

			buf_addf(&hosts, "%s%s %llu requests %llu sent %llu received", i ? "," : "",
			         h->name, (unsigned long long)h->allowed,
			         (unsigned long long)h->sent, (unsigned long long)h->received);
		}
		json_object_set_new(e, "hosts", json_string(hosts.len ? hosts.buf : ""));
		json_object_set_new(
		    e, "spend_nano_usd",
		    json_integer(o && o->have_report ? (json_int_t)o->report.usage.nano : 0));
		json_object_set_new(e, "commit", json_string(end_commit ? end_commit : ""));
		buf_release(&hosts);
	}
	ret = audit_write(&t->audit_fd, e, &err);
	json_decref(e);
	if (ret < 0 && !strcmp(event, "start"))
		die("cannot write the audit record: %s", err.buf);
	if (ret < 0)
		warning("cannot write the audit record: %s", err.buf);
	buf_release(&err);
	buf_release(&digest);
}

/* The start commit and the identity the VM commits as (common/git/checkout.h). */
static void read_checkout(struct task *t)
{
	struct buf why = BUF_INIT;

	/* An attempt starts where its group does (write_start_bundle()); the commit comes then. */
	if ((!t->o.attempt_of &&
	     checkout_start_commit(t->checkout.buf, t->o.from, t->start_commit, &why) < 0) ||
	    checkout_identity(t->checkout.buf, &t->git_name, &t->git_email, &why) < 0)
		die("%s", why.buf);
	buf_release(&why);
}

/*
 * The login and the other secrets, taken out of our environment now
 * (common/base/secret.h), before any child starts, so that none inherits them and
 * /proc/PID/environ no longer shows them: the API key stays on the host (the
 * proxy gets it over a pipe), the other values go in over the session's
 * stdin, the git tokens to the broker over a pipe.  check_login() follows.
 */
static void read_env(struct task *t, const char *cfg_path)
{
	struct buf err = BUF_INIT;

	if (host_env_take(&t->env, &t->cfg, cfg_path, &err) < 0)
		die("%s", err.buf);
	/* Handed over to the fields the VM phase and the Slurm path wipe. */
	t->api_key = t->env.api_key;
	t->broker_tokens = t->env.tokens;
	t->env.api_key = t->env.tokens = (struct buf)BUF_INIT;
	buf_release(&err);
}

/*
 * Claude Code in the VM is logged in only through env (common/task/login.h): no
 * login stops the task before anything starts; then the names listed but not
 * set, and the key next to the token, are warned about.
 */
static void check_login(struct task *t, const char *cfg_path)
{
	struct strvec warnings = STRVEC_INIT;
	struct buf msg = BUF_INIT;
	int api;

	if (host_env_task_login(&t->env, cfg_path, &api, &msg, &warnings) < 0)
		die("%s", msg.buf);
	for (size_t i = 0; i < warnings.nr; i++)
		warning("%s", warnings.v[i]);
	t->api = api;
	if (t->api != TASK_API_FORWARD)
		buf_wipe_release(&t->api_key);
	/* The token goes to the proxy only when Claude Code uses it (docs/proxy.md). */
	if (t->api != TASK_API_OAUTH)
		buf_wipe_release(&t->env.oauth);
	strvec_clear(&warnings);
	buf_release(&msg);
}

/*
 * What can be checked before the task folder is made, is: the image, the
 * config's mounts and presets, the git: remotes' hosts (their tokens were
 * taken and checked by read_env()).  A task that fails later leaves a folder
 * (see task_failed()).
 */
static void check_before_folder(struct task *t)
{
	struct buf why = BUF_INIT;

	if (host_checks(&t->cfg, t->o.image, &t->image_dir, &why) < 0)
		die("%s", why.buf);
	if (t->o.slurm && slurm_shared_check(t->p.dir, &t->cfg.slurm.shared, &why) < 0)
		die("%s", why.buf);
	buf_release(&why);
}

/* The system aibox runs on (host_system.h): the host part, the fetch command's quoting. */
static enum host_system host_system(void)
{
	enum host_system sys;

	if (host_system_get(&sys) < 0)
		die("%s='%s' is not linux, macos or windows (it is for tests)", HOST_SYSTEM_ENV,
		    getenv(HOST_SYSTEM_ENV));
	return sys;
}

/* image/task.md and image/host/<system>.md (common/task/system_prompt.h). */
static void read_system_prompt(struct buf *out)
{
	struct strvec missing = STRVEC_INIT;
	struct buf err = BUF_INIT;

	if (system_prompt_read(host_system(), out, &missing, &err) < 0)
		die("%s", err.buf);
	for (size_t i = 0; i < missing.nr; i++)
		warning("no '%s': the task goes without that part of its system prompt",
		        missing.v[i]);
	strvec_clear(&missing);
	buf_release(&err);
}

static void write_file(struct task *t, const char *name, const struct buf *b, int mode)
{
	int ret = task_folder_write(t->dir.buf, name, b, mode);

	if (ret < 0)
		die_err(ret, "cannot write '%s/%s'", t->dir.buf, name);
}

/* --continue: the earlier task's end is the start (common/task/task_continue.h). */
static void continue_from(struct task *t)
{
	struct buf tasks = BUF_INIT, why = BUF_INIT;

	if (t->o.from)
		die("--continue and --from: a continued task starts where the earlier one ended");
	buf_addf(&tasks, "%s/tasks", t->p.dir);
	if (task_continue_prepare(&t->cont, tasks.buf, t->o.cont, t->checkout.buf,
	                          getenv("AIBOX_BUNDLE_LIMITS"), &why) < 0)
		die("cannot continue: %s", why.buf);
	t->o.from = t->cont.end_commit;
	if (t->cont.fetched[0]) {
		json_t *e = audit_entry("fetch");

		/* The one fetch aibox makes itself: the printed command's are git's. */
		json_object_set_new(e, "project", json_string(t->p.name ? t->p.name : ""));
		json_object_set_new(e, "task", json_string(t->cont.name));
		json_object_set_new(e, "commit", json_string(t->cont.end_commit));
		json_object_set_new(e, "refspec", json_string(t->cont.fetched));
		json_object_set_new(e, "by", json_string("aibox task --continue"));
		buf_reset(&why);
		if (audit_write(&t->audit_fd, e, &why) < 0)
			die("cannot write the audit record: %s", why.buf);
		json_decref(e);
	}
	buf_release(&tasks);
	buf_release(&why);
}

/* The continued task's conversation for the VM, and what the folder continues. */
static void write_continue(struct task *t)
{
	struct buf line = BUF_INIT;

	write_file(t, SESSION_RESUME_NAME, &t->cont.session, 0644);
	buf_addf(&line, "%s %s\n", t->cont.name, t->cont.end_commit);
	write_file(t, "continues", &line, 0644);
	buf_release(&line);
}

static void write_inputs(struct task *t)
{
	struct task_settings ts = {0};
	const char **remotes;
	struct buf settings = BUF_INIT, err = BUF_INIT, sys = BUF_INIT;
	int ret;

	write_file(t, GUEST_FILE_PROMPT, &t->prompt, 0644);
	if (t->o.attempt_of) {
		struct buf g = BUF_INIT;

		buf_addf(&g, "%s\n", t->o.attempt_of);
		write_file(t, GROUP_FILE, &g, 0644);
		buf_release(&g);
	}

	read_system_prompt(&sys);
	ts.id = t->id;
	ts.model = t->o.model;
	ts.timeout_s = (long)((t->o.timeout_ms + 999) / 1000);
	ts.has_budget = t->o.has_budget;
	ts.max_budget_usd = t->o.budget;
	ts.git_name = t->git_name.buf;
	ts.git_email = t->git_email.buf;
	ts.start_commit = t->start_commit;
	ts.env_names = t->env.names.v;
	ts.nenv = t->env.names.nr;
	ts.ph_names = (const char *const *)t->env.ph_names.v;
	ts.ph_values = (const char *const *)t->env.ph_values.v;
	ts.nph = t->env.ph_names.nr;
	ts.api = t->api;
	ts.path = t->cfg.path;
	ts.mounts = t->shares.settings;
	ts.nmounts = t->shares.nr_settings;
	ts.system_prompt = sys.buf;
	remotes = xcalloc(t->cfg.nr_git + 1, sizeof(*remotes));
	for (size_t i = 0; i < t->cfg.nr_git; i++)
		remotes[i] = t->cfg.git[i].url;
	ts.git_remotes = remotes;
	ts.check = t->cfg.check;
	ts.check_timeout_ms = (long)t->cfg.check_timeout_ms;
	ts.ngit_remotes = t->cfg.nr_git;
	if (t->o.cont) {
		ts.resume_session = t->cont.session_id;
		write_continue(t);
	}
	if ((ret = task_settings_json(&ts, &settings, &err)) < 0)
		die("cannot write settings.json: %s", err.buf);
	write_file(t, GUEST_FILE_SETTINGS, &settings, 0644);

	buf_reset(&err);
	if ((ret = ssh_task_keys_make(t->dir.buf, NULL, 0, &t->keys, &err)) < 0)
		die("%s", err.buf);

	free(remotes);
	buf_release(&settings);
	buf_release(&err);
	buf_release(&sys);
}

/*
 * The result files exist and are open before the VM starts (no open after
 * the lockdown); create 0 opens the ones the submitter of a --slurm task made.
 */
static void open_results(struct task *t, int create)
{
	struct buf err = BUF_INIT;

	if (task_folder_open_results(t->dir.buf, t->result_fds, create, &err) < 0)
		die("%s", err.buf);
	buf_release(&err);
}

static int open_in_task(struct task *t, const char *name, int flags);
static void log_line(struct task *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * die() once the task folder exists: the reason as an aibox[id] line, the
 * end of aibox.log, and a folder that is an ended task's (docs/task-host.md,
 * "A task that fails to start"): start.bundle and proxy.sock go (best effort: after
 * the lockdown nothing can be removed, and aibox tasks clean removes
 * start.bundle later), the results and logs stay.  QEMU, the proxy and the
 * broker die with us (their parent-death signal).
 */
static struct task *failing_task;

/*
 * summary.json, and with --json the same object on stdout
 * (common/task/task_record.h); in is NULL for a task that failed to start.
 */
static void write_record(struct task *t, const char *state, int code, const char *why,
                         const struct summary_in *in)
{
	struct task_record_in ri = {t->dir.buf,
	                            t->name,
	                            state,
	                            code,
	                            why,
	                            task_clock_since(t->t0),
	                            t->start_commit,
	                            t->start_time,
	                            t->end_time ? t->end_time : time(NULL),
	                            in};
	struct buf json = BUF_INIT;
	int ret;

	ri.group = t->o.attempt_of ? t->o.attempt_of : t->group[0] ? t->group : NULL;
	task_record_json(&ri, &json);
	if (t->record_fd >= 0 && (ret = write_all(t->record_fd, json.buf, json.len)) < 0)
		out_printf(2, "aibox", t->id, "cannot write summary.json: %s", strerror(-ret));
	if (t->o.json) {
		fputs(json.buf, stdout);
		fflush(stdout);
	}
	buf_release(&json);
}

static void task_failed(const char *msg)
{
	struct task *t = failing_task;
	struct buf path = BUF_INIT;

	out_printf(2, "aibox", t->id, "%s", msg);
	buf_addf(&path, "%s/" GUEST_FILE_START_BUNDLE, t->dir.buf);
	unlink(path.buf);
	if (t->proxy_sock.len)
		unlink(t->proxy_sock.buf);
	log_line(t, "total %.3fs exit %d\n", task_clock_since(t->t0), die_status);
	write_record(t, "failed to start", die_status, msg, NULL);
	if (t->audit_started)
		audit_task(t, "end", "failed to start", die_status, NULL, NULL);
	buf_release(&path);
}

/* error() and warning() once the task folder exists: aibox[id] lines. */
static void task_report(const char *msg)
{
	out_printf(2, "aibox", failing_task->id, "%s", msg);
}

static void take_group_start(struct task *t);

static void start(struct task *t)
{
	struct buf err = BUF_INIT, cfgpath = BUF_INIT;
	struct prompt_opts po = {0};
	int ret;

	/* An attempt's prompt is its group's, made once, on stdin (task/task_group.h). */
	if (!t->o.attempt_of) {
		po.args = t->o.words;
		po.nargs = t->o.nwords;
		po.files = t->o.files;
		po.nfiles = t->o.nfiles;
	}
	po.stdin_fd = 0;
	if ((ret = prompt_read(&po, &t->prompt, &err)) < 0)
		die("%s", err.buf);

	buf_reset(&err);
	if (host_project_open(&t->checkout, &t->p, &cfgpath, &t->cfg, &err) < 0)
		die("%s", err.buf);
	check_policy(t, cfgpath.buf);
	host_size(&t->cfg, t->o.memory_mib, t->o.cpus);
	if (t->cfg.set & CONFIG_SET_SLURM)
		t->o.slurm = 1;
	if (t->o.detach && !t->o.slurm) {
		error("--detach: only for a task on Slurm (--slurm, or the config's slurm:)");
		usage_die(usage_text);
	}
	if (t->o.detach && t->o.json)
		die("--detach and --json: a detached task's record is "
		    "'aibox tasks show --json TASK'");
	buf_reset(&err);
	if (shares_plan(&t->shares, &t->cfg, getenv("HOME"), &err) < 0)
		die("%s", err.buf);

	read_env(t, cfgpath.buf);
	if (t->o.cont)
		continue_from(t);
	read_checkout(t);
	check_login(t, cfgpath.buf);
	check_before_folder(t);
	/* Spend is counted where the key is forwarded; refused here when the day is spent. */
	if (t->api == TASK_API_FORWARD &&
	    (ret = spend_start(
	         &t->spend, t->p.dir,
	         spend_cap_min(t->cfg.budget_task,
	                       t->o.has_budget ? (uint64_t)(t->o.budget * 1e9 + 0.5) : 0),
	         t->cfg.budget_day, &err)) < 0)
		die("%s", err.buf);

	if ((t->project_lock_fd = host_project_lock(&t->p, &err)) < 0)
		die("%s", err.buf);
	if (task_folder_create(t->p.dir, t->name, &t->task_lock_fd, &t->dir, &err) < 0)
		die("%s", err.buf);
	t->id = t->name + TASK_NAME_LEN - TASK_ID_LEN;
	if (!t->o.json || t->o.attempt_of) /* an attempt's group reads its folder first */
		printf("%s\n", t->dir.buf);
	fflush(stdout);
	t->aibox_log_fd = open_in_task(t, "aibox.log", O_WRONLY | O_CREAT | O_EXCL | O_APPEND);
	failing_task = t;
	die_routine = task_failed;
	report_routine = task_report;
	if (t->o.attempt_of)
		take_group_start(t);

	audit_task(t, "start", NULL, 0, NULL, NULL);
	t->audit_started = 1;
	write_inputs(t);
	open_results(t, 1);
	buf_release(&err);
	buf_release(&cfgpath);
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

/* One line in aibox.log (common/task/task_log.h). */
static void log_line(struct task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_log_vline(t->aibox_log_fd, fmt, ap);
	va_end(ap);
}

/* The phase and its time as the host measured it, then the next phase starts. */
static double phase_done(struct task *t, const char *name)
{
	return task_log_phase(t->aibox_log_fd, &t->tphase, name);
}

static int open_in_task(struct task *t, const char *name, int flags)
{
	int fd = task_folder_open(t->dir.buf, name, flags);

	if (fd < 0)
		die_err(fd, "cannot create '%s/%s'", t->dir.buf, name);
	return fd;
}

/* start.bundle: made from the start commit, or an attempt's taken from its group's. */
static void write_start_bundle(struct task *t)
{
	struct buf err = BUF_INIT;

	if (!t->o.attempt_of &&
	    task_folder_start_bundle(t->dir.buf, t->checkout.buf, t->start_commit, &err) < 0)
		die("%s", err.buf);
	buf_release(&err);
}

/* An attempt's start: its group's commit and start bundle (task/task_group.h). */
static void take_group_start(struct task *t)
{
	struct buf gdir = BUF_INIT, err = BUF_INIT;

	task_group_dir(&gdir, t->p.dir, t->o.attempt_of);
	if (task_group_bundle_take(gdir.buf, t->dir.buf, t->start_commit, &err) < 0)
		die("%s", err.buf);
	buf_release(&gdir);
	buf_release(&err);
}

/*
 * The check of changes.bundle reads the project's objects (the thin pack's
 * bases) and creates files (libgit2's indexer writes an index), which the
 * lockdown forbids.  So its child (common/git/bundle_check.h) is forked before
 * the lockdown and waits; it holds no fd but the bundle's and its two pipes,
 * and checks under its own limits and seccomp filter when the task lets it
 * go (docs/task-host.md, "The check of changes.bundle").
 */
static void start_checker(struct task *t)
{
	struct buf err = BUF_INIT;
	const char *limits = getenv("AIBOX_BUNDLE_LIMITS");
	int ret =
	    result_bundle_check_start(&t->checker, t->result_fds[RESULT_BUNDLE], t->start_commit,
	                              t->checkout.buf, t->dir.buf, limits, &err);

	if (ret == -EINVAL)
		die("AIBOX_BUNDLE_LIMITS: %s", err.buf);
	if (ret < 0)
		die("%s", err.buf);
	buf_release(&err);
}

/* changes.bundle: exactly aibox/task, no prerequisite but the start commit, a sound pack. */
static int check_changes(struct task *t, char *end, struct buf *err)
{
	struct bundle_verdict v;
	int ret = bundle_check_run(&t->checker, &v, &stop_signal);

	if (ret == -EINTR && stop_signal) {
		bundle_verdict_clear(&v);
		return ret;
	}
	log_line(t, "checker: cpu %.3fs, peak %ld KiB\n", v.cpu_s, v.max_rss_kib);
	ret = result_bundle_verdict(&v, end, err);
	bundle_verdict_clear(&v);
	return ret;
}

/* SIGINT, SIGTERM and SIGHUP to on (a task's or a group's), SIGPIPE ignored. */
static void catch_stops(void (*on)(int))
{
	struct sigaction sa = {0};

	sa.sa_handler = on;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The env values as the session's stdin takes them (docs/internals.md). */
static void make_secrets(struct task *t, struct buf *secrets)
{
	struct buf err = BUF_INIT;

	if (host_env_json(&t->env.names, &t->env.values, GUEST_SECRETS_STDIN, secrets, &err) < 0)
		die("cannot pass the secrets: %s", err.buf);
	buf_release(&err);
}

static void say(void *ctx, const char *line)
{
	out_printf(2, "aibox", ((struct task *)ctx)->id, "%s", line);
}

/*
 * The VM phase (common/task/task_vm.h): the helpers, the VM, the lockdown, the
 * session and the stops, up to the results in the task folder.  The same on
 * one host and on a Slurm node (docs/slurm.md).
 */
/* What the VM phase leaves that the task cannot remove once locked down. */
static const char *const proxy_sock_files[] = {"proxy.sock", "proxy.sock.slots"};

/* The checker goes on changes.bundle while the VM and the helpers stop (finish_task() waits). */
static void results_in(void *ctx)
{
	struct task *t = ctx;

	if (t->checker.pid > 0)
		bundle_check_go(&t->checker);
}

static void run_vm(struct task *t, struct buf *secrets, struct vm_outcome *o)
{
	struct task_vm v = {0};
	struct buf state = BUF_INIT, err = BUF_INIT;

	/* On a Slurm node the state disk goes to the node's own scratch space. */
	if (t->o.slurm_node)
		buf_addstr(&state, temp_dir());
	else if (strrchr(t->dir.buf, '/') > t->dir.buf) /* the tasks folder, its parent */
		buf_add(&state, t->dir.buf, (size_t)(strrchr(t->dir.buf, '/') - t->dir.buf));
	else
		buf_addf(&state, "%s/..", t->dir.buf);
	buf_addf(&t->proxy_sock, "%s/proxy.sock", t->dir.buf);
	if (task_folder_remove_at_exit(t->dir.buf, proxy_sock_files, 2) < 0)
		warning("proxy.sock will stay in the task folder when the task ends");
	v.id = t->id;
	v.dir = t->dir.buf;
	v.image_dir = t->image_dir.buf;
	v.state_dir = state.buf;
	v.proxy_sock = t->proxy_sock.buf;
	v.cfg = &t->cfg;
	v.shares = &t->shares;
	v.keys = &t->keys;
	v.result_fds = t->result_fds;
	v.aibox_log_fd = t->aibox_log_fd;
	v.err_base = t->o.err_base;
	v.tphase = &t->tphase;
	v.timeout_ms = (long)t->o.timeout_ms;
	v.idle_ms = session_idle;
	/* AIBOX_SNAPSHOT=0: always a cold boot (docs/image.md, "Snapshots"). */
	v.snapshot = !getenv("AIBOX_SNAPSHOT") || strcmp(getenv("AIBOX_SNAPSHOT"), "0");
	v.no_sandbox = t->o.no_sandbox;
	v.api_key = t->api == TASK_API_FORWARD ? &t->api_key : NULL;
	v.spend = &t->spend;
	v.tokens = &t->broker_tokens;
	v.secret_values = &t->env.secret_values;
	v.placeholders = &t->env.placeholders;
	v.oauth = t->api == TASK_API_OAUTH ? &t->env.oauth : NULL;
	v.oauth_placeholder = t->env.oauth_placeholder;
	v.stop = &stop_signal;
	v.qemu_pid = &stop_qemu_pid;
	v.say = say;
	v.say_ctx = t;
	v.results_in = results_in;
	if (t->o.no_sandbox)
		warning("--no-sandbox: aibox-task runs without its own lockdown");
	if (task_vm_run(&v, secrets, o, &err) < 0)
		die("%s", err.buf);
	t->boot_s = o->boot_s;
	t->session_s = o->session_s;
	t->ssh_s = o->ssh_s;
	buf_release(&state);
	buf_release(&err);
}

/* The results read, the bundle checked, the summary: on the host the task started on. */
static int finish_task(struct task *t, struct vm_outcome *o)
{
	struct buf err = BUF_INIT, rj = BUF_INIT;
	struct buf *why = &o->why;
	struct task_result r;
	struct summary_in in = {0};
	char end[OID_HEX_MAX + 1] = "";
	double agent_s = 0, total_s;
	int ok = 0, have_result = 0, session_ret = o->session_ret;
	ssize_t n;

	n = task_folder_read_fd(t->result_fds[RESULT_JSON], &rj, RESULT_JSON_MAX);
	if (n > 0) {
		buf_reset(&err);
		if (result_parse(rj.buf, rj.len, &r, &err) < 0) {
			out_printf(2, "aibox", t->id, "result.json refused: %s", err.buf);
		} else {
			have_result = 1;
			in.result = &r;
		}
	}
	task_log_guest_phases(t->aibox_log_fd, have_result ? &r : NULL, t->session_s, t->ssh_s,
	                      &agent_s, &t->agent_in_boot);
	if (have_result && r.changes && session_ret == 0 && !stop_signal) {
		if (check_changes(t, end, why) == 0)
			in.end_commit = end;
	}
	bundle_check_clear(&t->checker);
	phase_done(t, "check");

	{
		struct buf bpath = BUF_INIT, branch = BUF_INIT;
		struct stat st;
		const char *slash = strrchr(t->dir.buf, '/');

		buf_addf(&bpath, "%s/%s", t->dir.buf, guest_results[RESULT_BUNDLE].name);
		buf_addf(&branch, "aibox/task-%s", slash ? slash + 1 : t->dir.buf);
		in.report = o->have_report ? &o->report : NULL;
		in.report_why = o->report_why.buf;
		in.bundle_path = bpath.buf;
		in.branch = branch.buf;
		in.windows = host_system() == HOST_WINDOWS;
		in.no_changes = session_ret == 0 && !stop_signal && have_result && !r.changes &&
		                fstat(t->result_fds[RESULT_BUNDLE], &st) == 0 && st.st_size == 0;
		ok = task_vm_finished(o, stop_signal, have_result ? &r : NULL, in.end_commit);
		t->end_time = time(NULL);
		if (!t->o.slurm_check) /* aibox tasks show prints it */
			task_summary_print(2, t->end_time, t->id, &in, ok, why->buf);
		write_record(t, ok ? "finished" : "not finished", ok ? 0 : 1, why->buf, &in);
		audit_task(t, "end", ok ? "finished" : "not finished", ok ? 0 : 1, o,
		           in.end_commit);
		buf_release(&bpath);
		buf_release(&branch);
	}

	total_s = task_clock_since(t->t0);
	log_line(t, "total %.3fs exit %d\n", total_s, ok ? 0 : 1);
	if (t->agent_in_boot > 0)
		log_line(t, "overhead %.3fs (total - boot - agent + the agent's part in boot)\n",
		         total_s - t->boot_s - agent_s + t->agent_in_boot);
	else
		log_line(t, "overhead %.3fs (total - boot - agent)\n",
		         total_s - t->boot_s - agent_s);
	if (have_result)
		result_release(&r);
	proxy_report_release(&o->report);
	buf_release(&o->report_why);
	buf_release(&err);
	buf_release(&rj);
	buf_release(why);
	return ok ? 0 : 1;
}

static void slurm_submit(struct task *t, struct buf *secrets, struct vm_outcome *o);

static int run_task(struct task *t)
{
	struct vm_outcome o = VM_OUTCOME_INIT;
	struct buf secrets = BUF_INIT;

	write_start_bundle(t);
	phase_done(t, "bundle");
	if (!t->o.slurm)
		start_checker(t);
	catch_stops(on_stop);
	t->record_fd = open_in_task(t, "summary.json", O_WRONLY | O_CREAT | O_EXCL);
	make_secrets(t, &secrets);
	if (t->o.slurm)
		slurm_submit(t, &secrets, &o);
	else
		run_vm(t, &secrets, &o);
	if (t->o.detach) /* submitted: the host's check comes later (--slurm-check) */
		exit(0); /* from here, so that the leak check sees main's task reachable */
	return finish_task(t, &o);
}

/*
 * aibox task --slurm: the VM phase as a Slurm job (docs/slurm.md).  Both
 * sides run on struct task, so the node runs the very run_vm() a task on one
 * host runs, and the submitter the very finish_task(); the Slurm steps
 * themselves are common/task/slurm_submit.h's.
 *
 *   slurm_submit()  the submitting host, in place of run_vm(): the config
 *                   and the secrets into the task folder, srun in the
 *                   foreground, then the node's slurm.status
 *                   (with --detach: sbatch, slurm.job, and return)
 *   slurm_node()    the compute node (aibox-task --slurm-node DIR): the
 *                   secrets taken, the config read, the result files
 *                   opened, run_vm(), slurm.status written
 *   slurm_check()   a submitting host, for a detached task whose job ended
 *                   (aibox-task --slurm-check DIR, run by the commands that
 *                   settle a task: common/task/slurm_detach.h):
 *                   finish_task() once, under the task's lock
 */

/* The node's status into o, and its phase times into t. */
static void read_node_status(struct task *t, struct vm_outcome *o)
{
	slurm_status_outcome(t->dir.buf, o);
	t->boot_s = o->boot_s;
	t->session_s = o->session_s;
	t->ssh_s = o->ssh_s;
}

/*
 * --detach: submitted with sbatch; slurm.job written while we still hold the
 * task's lock, which the node takes when it starts.  A job sbatch refuses is
 * a task that failed to start.
 */
static void submit_detached(struct task *t, const struct slurm_job *job, const struct strvec *node)
{
	struct slurm_job_rec rec;
	struct buf err = BUF_INIT, path = BUF_INIT;

	if (slurm_submit_batch(t->dir.buf, job, node, t->start_commit, &rec, &err) != 0)
		die("%s", err.buf);
	out_printf(2, "aibox", t->id, "submitted as the Slurm job %s (job id %s)", job->name,
	           rec.id);
	/* The record is the host's check's to write (--slurm-check). */
	close(t->record_fd);
	t->record_fd = -1;
	buf_addf(&path, "%s/summary.json", t->dir.buf);
	if (unlink(path.buf) < 0)
		die_errno("cannot remove '%s'", path.buf);
	phase_done(t, "submit");
	buf_release(&err);
	buf_release(&path);
}

/* The secrets leave this process only through the 0600 file (docs/slurm.md). */
static void hand_secrets(struct task *t, struct buf *secrets)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct buf err = BUF_INIT;

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
	buf_release(&err);
}

static void slurm_submit(struct task *t, struct buf *secrets, struct vm_outcome *o)
{
	struct slurm_node_opts no = {
	    .dir = t->dir.buf,
	    .memory_mib = t->cfg.memory_mib,
	    .cpus = t->cfg.cpus,
	    .timeout_ms = t->o.timeout_ms,
	    .image = t->o.image,
	    .no_sandbox = t->o.no_sandbox,
	    .has_budget = t->o.has_budget,
	    .budget = t->o.budget,
	    .detach = t->o.detach,
	};
	struct slurm_job job = {0};
	struct spawn sp = SPAWN_INIT;
	struct strvec node = STRVEC_INIT;
	struct buf err = BUF_INIT, name = BUF_INIT;
	int ret = -EINTR;

	if (slurm_config_copy(t->p.dir, t->dir.buf, &err) < 0)
		die("%s", err.buf);
	hand_secrets(t, secrets);
	buf_addf(&name, "aibox-%s", t->name);
	job.name = name.buf;
	job.partition = t->cfg.slurm.partition;
	job.account = t->cfg.slurm.account;
	job.options = &t->cfg.slurm.options;
	job.memory_mib = t->cfg.memory_mib;
	job.cpus = t->cfg.cpus;
	job.timeout_ms = t->o.timeout_ms + task_check_extra_ms(&t->cfg);
	slurm_node_argv(&no, &node);
	if (t->o.detach) {
		submit_detached(t, &job, &node);
		goto out;
	}
	out_printf(2, "aibox", t->id, "submitted as the Slurm job %s", name.buf);
	if (!stop_signal) {
		struct out_relay relay;

		/* The node's VM lines are capped and cut here as a local task's (docs/slurm.md). */
		if ((ret = task_node_relay_start(&relay, 2, t->o.err_base, t->id)) < 0)
			die_err(ret, "cannot start the relay of the node's lines");
		sp.err = relay.fd;
		if ((ret = slurm_srun_start(&sp, &job, &node)) < 0)
			die_err(ret, "cannot start srun");
		ret = slurm_job_wait(&sp, name.buf, &stop_signal);
		/* srun has ended: what holds the pipe still (a child of its) has 5 s */
		out_relay_end(&relay, 5000);
		if (ret != 0)
			log_line(t, "srun exit %d\n", ret);
	}
	spawn_clear(&sp);
	phase_done(t, "slurm");
	/* Still there when the job never started: a failed start, unless we were stopped. */
	if (slurm_secrets_left(t->dir.buf) && !stop_signal)
		die("the Slurm job did not start (srun exit %d; Slurm's reason above)", ret);

	read_node_status(t, o);
	if (stop_signal)
		task_why_stopped(&o->why, stop_signal);
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
}

/* The task folder DIR of --slurm-node or --slurm-check: t->dir, t->name, t->id. */
static void task_from_dir(struct task *t, const char *opt, const char *dir)
{
	struct buf err = BUF_INIT;

	if (slurm_task_dir(opt, dir, t->name, &err) < 0)
		die("%s", err.buf);
	buf_addstr(&t->dir, dir);
	t->id = t->name + TASK_NAME_LEN - TASK_ID_LEN;
	buf_release(&err);
}

static int slurm_node(struct task *t)
{
	struct slurm_secrets ss = SLURM_SECRETS_INIT;
	struct slurm_status st = SLURM_STATUS_INIT;
	struct strvec pair_ph = STRVEC_INIT, pair_val = STRVEC_INIT;
	struct vm_outcome o = VM_OUTCOME_INIT;
	struct buf err = BUF_INIT, path = BUF_INIT, out = BUF_INIT;
	struct timespec now;
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

		slurm_project_dir(t->dir.buf, &pdir);
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

	catch_stops(on_stop);
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
	slurm_project_dir(t->dir.buf, &pdir);
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
	if (slurm_secrets_left(t->dir.buf)) {
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

/*
 * aibox task --attempts N: N attempts of one task side by side (docs/tasks.md,
 * "Several attempts").
 *
 * The group's process reads the prompt once, makes a group id and runs the
 * attempts (common/task/task_group.h); it prints each attempt's stdout lines
 * as they come, passes SIGINT, SIGTERM and SIGHUP on and prints the group's
 * line at the end.
 */

/*
 * The attempts asked for: --attempts, else the project config's attempts:
 * (else 1).  More than one are held to the policy here, before any starts
 * (one refusal, not one per attempt); one is held to it by start().  With
 * cpus, *cpus gets each attempt's share of this host's cores when neither
 * --cpus nor the config chose a size and the VMs run here, not on Slurm
 * (task_group_cpus()), else 0.
 */
static int group_attempts(struct task *t, int *cpus)
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
	if (cpus) {
		*cpus = 0;
		if (opened && n > 1 && !t->o.cpus && !t->o.slurm &&
		    !(cfg.set & (CONFIG_SET_CPUS | CONFIG_SET_SLURM)))
			*cpus = task_group_cpus(n, host_cpus(), cfg.cpus);
	}
	config_release(&cfg);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&cfgpath);
	buf_release(&err);
	return n;
}

/*
 * The group's start commit, resolved once, and its one start bundle in gdir
 * (task/task_group.h), which every attempt takes as its own; the folder's
 * lock is returned, held until the folder is removed.
 */
static int group_start_bundle(struct task *t, const char *gid, struct buf *gdir)
{
	struct buf checkout = BUF_INIT, cfgpath = BUF_INIT, err = BUF_INIT;
	struct project p = PROJECT_INIT;
	struct config cfg;
	char commit[OID_HEX_MAX + 1];
	int lock_fd;

	memset(&cfg, 0, sizeof(cfg));
	if (host_project_open(&checkout, &p, &cfgpath, &cfg, &err) < 0 ||
	    checkout_start_commit(checkout.buf, t->o.from, commit, &err) < 0)
		die("%s", err.buf);
	task_group_dir(gdir, p.dir, gid);
	if (task_group_bundle_make(gdir->buf, checkout.buf, commit, &lock_fd, &err) < 0)
		die("%s", err.buf);
	config_release(&cfg);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&cfgpath);
	buf_release(&err);
	return lock_fd;
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

/* The n attempts group_attempts() found, each with cpus vCPUs (0: the task's size). */
static int run_group(struct task *t, int n, int cpus, int argc, char **argv)
{
	struct prompt_opts po = {0};
	struct buf prompt = BUF_INIT, err = BUF_INIT, line = BUF_INIT, gdir = BUF_INIT;
	struct task_group g = {0};
	int ret, status, lock_fd;

	/* Each attempt would fetch the earlier task into the one checkout: one at a time. */
	if (t->o.cont)
		die("--continue and --attempts: a task is continued by one attempt at a time "
		    "(--attempts 1)");
	g.n = n;
	g.cpus = cpus;
	g.err_base = t->o.err_base; /* one cap for the stderr they share */
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

	lock_fd = group_start_bundle(t, g.gid, &gdir);

	catch_stops(on_group_stop);

	ret = task_group_run(&g, &prompt, &err);
	buf_wipe_release(&prompt);
	/* Every attempt has its own links by now, or never will (it ended). */
	task_group_bundle_remove(gdir.buf);
	close(lock_fd);
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

int main(int argc, char **argv)
{
	struct task t = {.project_lock_fd = -1,
	                 .audit_fd = -1,
	                 .task_lock_fd = -1,
	                 .aibox_log_fd = -1,
	                 .record_fd = -1,
	                 .checker = BUNDLE_CHECK_INIT,
	                 .spend = SPEND_INIT};

	tool_init(argc, argv);
	t.t0 = clock_ms();
	t.tphase = t.t0;
	t.p = (struct project)PROJECT_INIT;
	t.checkout = (struct buf)BUF_INIT;
	t.prompt = (struct buf)BUF_INIT;
	t.git_name = (struct buf)BUF_INIT;
	t.git_email = (struct buf)BUF_INIT;
	t.dir = (struct buf)BUF_INIT;
	t.proxy_sock = (struct buf)BUF_INIT;
	t.env = (struct host_env)HOST_ENV_INIT;
	t.api_key = (struct buf)BUF_INIT;
	t.broker_tokens = (struct buf)BUF_INIT;
	t.keys = (struct ssh_task_keys)SSH_TASK_KEYS_INIT;
	t.image_dir = (struct buf)BUF_INIT;
	t.policy_path = (struct buf)BUF_INIT;
	t.cont = (struct task_continue)TASK_CONTINUE_INIT;
	t.shares = (struct shares)SHARES_INIT;
	parse_args(&t.o, argc, argv);
	if (t.o.err_base < 0) {
		struct stat st;

		/* The VM's lines' cap in a file as stderr counts from here (task_session.h). */
		t.o.err_base =
		    fstat(2, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : 0;
	}
	if (t.o.slurm_node)
		return slurm_node(&t);
	if (t.o.slurm_check)
		exit(slurm_check(&t)); /* t stays reachable for the leak check */
	if (!t.o.attempt_of) {
		int cpus, n = group_attempts(&t, &cpus);

		if (n > 1)
			exit(run_group(&t, n, cpus, argc, argv));
	}
	start(&t);
	phase_done(&t, "start");
	{
		struct buf line = BUF_INIT;

		task_start_line(&line, t.id, t.start_commit);
		t.start_time = time(NULL);
		out_write_at(2, t.start_time, "aibox", t.id, line.buf, line.len);
		buf_release(&line);
	}
	if (t.o.cont)
		out_printf(2, "aibox", t.id,
		           "it continues task %s and resumes its conversation%s%s", t.cont.name,
		           t.cont.note.len ? "; " : "", t.cont.note.buf);
	return run_task(&t);
}
