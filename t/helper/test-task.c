/*
 * test-task: the host-side parts of aibox task, for t/5*.bats.
 *
 *   test-task tar-in DIR [NAME=CAP...] < tar
 *	read a results tar into DIR/<name> (the four result names, with the
 *	caps of docs/internals.md unless NAME=CAP overrides one), feeding it in
 *	chunks of varying size; print "ok NAME SIZE..." or "refused: REASON"
 *   test-task ssh-keys [--pty] DIR
 *	make a task's keys under DIR (with --pty, aibox run's: restrict,pty);
 *	keep the user key in DIR/test_user_key
 *   test-task ssh-run [--user U] [--timeout-ms N] [--idle-ms N] [--disk DIR] [--count]
 *		[--interactive] [--in FILE] --key FILE --host-pub FILE COMMAND -- SSHD-ARGV...
 *	start SSHD-ARGV (sshd -i) on one end of a socketpair and run COMMAND
 *	over the other; print stdout (or with --count its size and speed),
 *	"stderr: LINE" for each stderr line, then "exit N" or "error: MSG".
 *	With --interactive, ssh_interactive() without a terminal: --in FILE
 *	(else nothing) on its stdin, its stdout on ours, its stderr on our stderr
 *   test-task report-count N
 *	the proxy's record (common/proxy_report) after N distinct allowed hosts,
 *	each twice, one refusal and one failure: written, read back, written
 *   test-task results FILE [--end HEX] [--bundle PATH] [--branch B]
 *                          [--report F | --no-report WHY] [--no-changes 0|1]
 *	parse result.json (FILE "-" for none) and print the summary lines,
 *	"aibox: TEXT" or "vm: TEXT" (a minimal printer, for these tests only);
 *	the fetch command quoted for AIBOX_HOST_SYSTEM's shells, as aibox-task does
 *   test-task session [--user U] [--timeout-ms N] [--idle-ms N] [--err-base N]
 *		[--env NAME=VALUE...] KEYDIR OUTDIR -- SSHD-ARGV...
 *	task_session_run() against SSHD-ARGV with the keys of `ssh-keys KEYDIR`,
 *	the results into OUTDIR; vm lines on stderr; "ok ..." or "failed: ..."
 *   test-task windows-quote STRING
 *	print STRING as windows_quote() appends it, or "error: REASON" (exit 1)
 *   test-task settings [--id ID] [--commit HEX] [--model M] [--timeout S]
 *		[--budget USD] [--api none|forward|oauth] [--env NAME=VALUE...]
 *		[--placeholder NAME=VALUE...]
 *		[--mount TAG:PATH...] [--system-prompt S] [--git NAME:EMAIL] [--remote URL...]
 *		[--secrets FILE] [--run] [--command WORD...] [--uid N] [--gid N] [--path P]
 *		[--resume ID] [--branch B] [--proxy URL] [--check CMD] [--check-timeout MS]
 *	print settings.json (--run: a run's); write the secrets JSON for stdin to FILE
 *   test-task settings-parse [--place] FILE
 *	task_settings_parse() FILE, then print settings.json written back from
 *	what it read, or "error: REASON" (exit 1); with --place,
 *	task_settings_parse_place(): "path P" and "mount TAG PATH" lines
 *   test-task check-bundle [--repo DIR] [--max BYTES] [--child] START FILE
 *	result_check_bundle() on FILE (opened O_RDWR as aibox-task has it) with
 *	START as the start commit and DIR for the thin pack's bases; print
 *	"ok END" (exit 0), or the reason (exit 1 refused, 2 error).  With
 *	--child, as aibox-task runs it: result_bundle_check_start() (limits
 *	from AIBOX_BUNDLE_LIMITS), bundle_check_run(); the child's cost on
 *	stderr, "checker: cpu SECONDS peak KIB"
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "vm/host_system.h"
#include "base/num.h"
#include "task/task_results.h"
#include "base/spawn.h"
#include "vm/ssh.h"
#include "base/guest_secrets.h"
#include "git/tar_in.h"
#include "task/task_session.h"
#include "task/task_settings.h"
#include "base/banned.h"

static int cmd_tar_in(int argc, char **argv)
{
	struct tar_in_file files[] = {
	    {.name = "changes.bundle", .max = 2ULL << 30},
	    {.name = "transcript.jsonl", .max = 256ULL << 20},
	    {.name = "vm.log", .max = 64ULL << 20},
	    {.name = "result.json", .max = 1ULL << 20, .last = 1},
	};
	static const size_t chunks[] = {1, 7, 512, 100, 4096, 3, 65536};
	struct tar_in t;
	char data[65536];
	size_t ci = 0;
	int ret = 0;

	if (argc < 1)
		die("usage: test-task tar-in DIR [NAME=CAP...]");
	for (int i = 1; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		long cap;

		if (!eq || parse_long(eq + 1, 0, LONG_MAX, &cap) < 0)
			die("bad cap '%s'", argv[i]);
		for (size_t j = 0; j < ARRAY_SIZE(files); j++)
			if (!strncmp(files[j].name, argv[i], (size_t)(eq - argv[i])) &&
			    !files[j].name[eq - argv[i]])
				files[j].max = (uint64_t)cap;
	}
	for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
		struct buf p = BUF_INIT;

		buf_addf(&p, "%s/%s", argv[0], files[j].name);
		files[j].fd = open(p.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (files[j].fd < 0)
			die_errno("cannot open '%s'", p.buf);
		buf_release(&p);
	}
	tar_in_init(&t, files, ARRAY_SIZE(files));
	for (;;) {
		size_t want = chunks[ci++ % ARRAY_SIZE(chunks)];
		ssize_t n = read(0, data, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_errno("cannot read stdin");
		if (n == 0) {
			ret = tar_in_finish(&t);
			break;
		}
		if ((ret = tar_in_feed(&t, data, (size_t)n)) < 0)
			break;
	}
	if (ret < 0) {
		printf("refused: %s\n", t.err.buf);
		tar_in_clear(&t);
		return 1;
	}
	tar_in_clear(&t);
	printf("ok");
	for (size_t j = 0; j < ARRAY_SIZE(files); j++)
		if (files[j].seen)
			printf(" %s %llu", files[j].name, (unsigned long long)files[j].size);
	printf("\n");
	return 0;
}

static int cmd_ssh_keys(int argc, char **argv)
{
	struct ssh_task_keys k = SSH_TASK_KEYS_INIT;
	struct buf err = BUF_INIT, path = BUF_INIT;
	int ret, pty = argc == 2 && !strcmp(argv[0], "--pty");

	argc -= pty;
	argv += pty;
	if (argc != 1)
		die("usage: test-task ssh-keys [--pty] DIR");
	if ((ret = ssh_task_keys_make(argv[0], NULL, pty, &k, &err)) < 0)
		die("%s", err.buf);
	buf_addf(&path, "%s/test_user_key", argv[0]);
	if ((ret = buf_write_file(&k.user_key, path.buf, 0600)) < 0)
		die_err(ret, "cannot write '%s'", path.buf);
	printf("host key blob %zu bytes\n", k.host_blob.len);
	ssh_task_keys_release(&k);
	buf_release(&err);
	buf_release(&path);
	return 0;
}

struct run_ctx {
	int count;
};

static int on_stdout(void *ctx, const char *data, size_t n)
{
	struct run_ctx *rc = ctx;

	if (!rc->count)
		return write_all(1, data, n);
	return 0;
}

static void on_stderr_line(void *ctx, const char *line, size_t n)
{
	fflush(stdout);
	printf("stderr: %.*s\n", (int)n, line);
	fflush(stdout);
}

/* ssh_interactive() with x's command, in on its stdin (a pipe), its exit into x. */
static int run_interactive(struct ssh_client *c, struct ssh_exec *x, const struct buf *in)
{
	struct ssh_interactive ix = {.command = x->command, .resize_fd = -1, .stop_fd = -1};
	int p[2], ret;

	if (pipe2(p, O_CLOEXEC) < 0)
		die_errno("pipe");
	/* The pipe holds a test's input (at most 64 KiB) whole. */
	if (in->len > 65536 || write_all(p[1], in->buf, in->len) < 0)
		die("cannot pass the input");
	close(p[1]);
	ix.in_fd = p[0];
	ix.out_fd = 1;
	ix.err_fd = 2;
	ret = ssh_interactive(c, &ix);
	close(p[0]);
	x->exit_status = ix.exit_status;
	memcpy(x->exit_signal, ix.exit_signal, sizeof(x->exit_signal));
	return ret;
}

/* ssh-run's options, the keys and the input read. */
struct ssh_run_opts {
	const char *command;
	int interactive;
	struct buf key, pub, in;
};

/* An option with a value, argv[i + 1]: the value's index. */
static int ssh_run_value(int argc, char **argv, int i, struct ssh_client *c, struct ssh_run_opts *o)
{
	const char *a = argv[i], *v;
	struct buf *file = NULL;
	long n, max = 16384;

	if (i + 1 >= argc)
		die("option '%s' needs a value", a);
	v = argv[i + 1];
	if (!strcmp(a, "--user")) {
		c->user = v;
	} else if (!strcmp(a, "--timeout-ms") && !parse_long(v, 0, LONG_MAX, &n)) {
		c->timeout_ms = n;
	} else if (!strcmp(a, "--idle-ms") && !parse_long(v, 0, LONG_MAX, &n)) {
		c->idle_ms = n;
	} else if (!strcmp(a, "--disk")) {
		c->disk_name = v;
		if ((c->disk_fd = open(v, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			die_errno("cannot open '%s'", v);
	} else if (!strcmp(a, "--in")) {
		file = &o->in;
		max = 1 << 20;
	} else if (!strcmp(a, "--key")) {
		file = &o->key;
	} else if (!strcmp(a, "--host-pub")) {
		file = &o->pub;
	} else {
		die("unknown option '%s'", a);
	}
	if (file && buf_read_file(file, v, (size_t)max) < 0)
		die_errno("cannot read '%s'", v);
	return i + 1;
}

/* ssh-run [options] COMMAND -- SSHD-ARGV...: argv's index of SSHD-ARGV. */
static int ssh_run_args(int argc, char **argv, struct ssh_client *c, struct run_ctx *rc,
                        struct ssh_run_opts *o)
{
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--count")) {
			rc->count = 1;
		} else if (!strcmp(a, "--interactive")) {
			o->interactive = 1;
		} else if (a[0] != '-') {
			if (o->command)
				die("more than one command: '%s'", a);
			o->command = a;
		} else {
			i = ssh_run_value(argc, argv, i, c, o);
		}
	}
	if (!o->command || i >= argc)
		die("usage: test-task ssh-run [options] COMMAND -- SSHD-ARGV...");
	return i;
}

/* The command's end as the tests read it: "exit N [signal S]", or the error. */
static void ssh_run_print(int ret, const struct ssh_client *c, const struct ssh_exec *x,
                          const struct run_ctx *rc, double dt)
{
	if (ret < 0) {
		printf("error: %s\n", c->err.buf);
		return;
	}
	if (rc->count)
		printf("stdout %llu bytes, %.1f MB/s\n", (unsigned long long)x->out_bytes,
		       (double)x->out_bytes / 1e6 / (dt > 0 ? dt : 1e-9));
	printf("exit %d%s%s\n", x->exit_status, x->exit_signal[0] ? " signal " : "",
	       x->exit_signal);
}

static int cmd_ssh_run(int argc, char **argv)
{
	struct ssh_client c = SSH_CLIENT_INIT;
	struct ssh_exec x = {0};
	struct run_ctx rc = {0};
	struct spawn sp = SPAWN_INIT;
	struct ssh_run_opts o = {NULL, 0, BUF_INIT, BUF_INIT, BUF_INIT};
	struct buf blob = BUF_INIT;
	int sv[2], i, ret;
	double t0;

	i = ssh_run_args(argc, argv, &c, &rc, &o);
	if (ssh_pubkey_blob(o.pub.buf, o.pub.len, &blob) < 0)
		die("not a P-256 public key");

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die_errno("socketpair");
	strvec_pushv(&sp.args, (const char *const *)argv + i);
	sp.in = sv[1];
	sp.out = sv[1];
	sp.err = SPAWN_NULL; /* its log goes to -E; a stopped sshd must not hold our stderr */
	if ((ret = spawn_start(&sp)) < 0)
		die_err(ret, "cannot start '%s'", argv[i]);
	close(sv[1]);

	c.fd = sv[0];
	c.host_key = (const unsigned char *)blob.buf;
	c.host_key_len = blob.len;
	c.user_key = o.key.buf;
	c.user_key_len = o.key.len;
	x.command = o.command;
	x.in = o.in.buf;
	x.in_len = o.in.len;
	x.on_stdout = on_stdout;
	x.on_stderr_line = on_stderr_line;
	x.ctx = &rc;

	t0 = (double)clock_ms() / 1000;
	ret = ssh_connect(&c);
	if (!ret && o.interactive)
		ret = run_interactive(&c, &x, &o.in);
	else if (!ret)
		ret = ssh_exec(&c, &x);
	fflush(stdout);
	ssh_run_print(ret, &c, &x, &rc, (double)clock_ms() / 1000 - t0);
	ssh_close(&c);
	close(sv[0]);
	/* SIGKILL: sshd -i waits for a session child that a test may have stopped. */
	kill(sp.pid, SIGKILL);
	spawn_wait(&sp);
	spawn_clear(&sp);
	explicit_bzero(o.key.buf, o.key.len);
	buf_release(&o.key);
	buf_release(&o.pub);
	buf_release(&blob);
	buf_release(&o.in);
	return ret < 0 ? 1 : 0;
}

static int cmd_results(int argc, char **argv)
{
	struct task_result r;
	struct summary_in in = {.bundle_path = "/tasks/x/changes.bundle", .branch = "aibox/task-x"};
	struct summary sum = SUMMARY_INIT;
	struct proxy_report rep = PROXY_REPORT_INIT;
	struct buf json = BUF_INIT, err = BUF_INIT, rec = BUF_INIT, rep_why = BUF_INIT;
	enum host_system sys;
	int have = 0, ret;

	if (argc < 1)
		die("usage: test-task results FILE [options]");
	in.report = &rep; /* empty unless --report: no host lines */
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--end"))
			in.end_commit = argv[i + 1];
		else if (!strcmp(argv[i], "--bundle"))
			in.bundle_path = argv[i + 1];
		else if (!strcmp(argv[i], "--branch"))
			in.branch = argv[i + 1];
		else if (!strcmp(argv[i], "--no-changes"))
			in.no_changes = !strcmp(argv[i + 1], "1");
		else if (!strcmp(argv[i], "--report")) {
			/* The proxy's record, read as aibox-task reads it (stop_proxy()). */
			ssize_t n = buf_read_file(&rec, argv[i + 1], PROXY_REPORT_MAX + 1);

			if (n < 0)
				die_err((int)n, "cannot read '%s'", argv[i + 1]);
			in.report =
			    proxy_report_parse(rec.buf, rec.len, &rep, &rep_why) ? NULL : &rep;
			in.report_why = rep_why.buf;
		} else if (!strcmp(argv[i], "--no-report")) {
			in.report = NULL;
			in.report_why = argv[i + 1];
		} else
			die("unknown option '%s'", argv[i]);
	}
	if (strcmp(argv[0], "-")) {
		ssize_t n = buf_read_file(&json, argv[0], RESULT_JSON_MAX + 1);

		if (n < 0)
			die_err((int)n, "cannot read '%s'", argv[0]);
		if ((ret = result_parse(json.buf, json.len, &r, &err)) < 0) {
			printf("refused: %s\n", err.buf);
			goto out;
		}
		have = 1;
		in.result = &r;
	}
	/* As aibox-task does it: the host system, or AIBOX_HOST_SYSTEM's. */
	if (host_system_get(&sys) < 0)
		die("%s: not linux, macos or windows", HOST_SYSTEM_ENV);
	in.windows = sys == HOST_WINDOWS;
	summary_make(&in, &sum);
	for (size_t i = 0; i < sum.nr; i++)
		printf("%s: %s\n", sum.v[i].vm ? "vm" : "aibox", sum.v[i].text);
	summary_release(&sum);
	ret = 0;
out:
	if (have)
		result_release(&r);
	proxy_report_release(&rep);
	buf_release(&json);
	buf_release(&err);
	buf_release(&rec);
	buf_release(&rep_why);
	return ret < 0 ? 1 : 0;
}

static int cmd_session(int argc, char **argv)
{
	struct task_session ts = {
	    .err_fd = 2, .err_base = -1, .id = "259e07", .disk_fd = -1, .stop_fd = -1};
	struct ssh_task_keys keys = SSH_TASK_KEYS_INIT;
	struct guest_secret secrets[8];
	struct buf pub = BUF_INIT, path = BUF_INIT, sec = BUF_INIT, err = BUF_INIT;
	struct spawn sp = SPAWN_INIT;
	const char *dirs[2] = {NULL, NULL};
	size_t nsec = 0, ndirs = 0;
	int sv[2], i, ret;
	long v;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (a[0] != '-') {
			if (ndirs == 2)
				die("too many folders");
			dirs[ndirs++] = a;
		} else if (i + 1 >= argc) {
			die("option '%s' needs a value", a);
		} else if (!strcmp(a, "--user")) {
			ts.user = argv[++i];
		} else if (!strcmp(a, "--timeout-ms") &&
		           !parse_long(argv[i + 1], 0, LONG_MAX, &v)) {
			ts.timeout_ms = v;
			i++;
		} else if (!strcmp(a, "--idle-ms") && !parse_long(argv[i + 1], 0, LONG_MAX, &v)) {
			ts.idle_ms = v;
			i++;
		} else if (!strcmp(a, "--err-base") && !parse_long(argv[i + 1], 0, LONG_MAX, &v)) {
			ts.err_base = v;
			i++;
		} else if (!strcmp(a, "--env") && nsec < 8 && strchr(argv[i + 1], '=')) {
			char *eq = strchr(argv[++i], '=');

			*eq = '\0';
			secrets[nsec].name = argv[i];
			secrets[nsec++].value = eq + 1;
		} else {
			die("unknown option '%s'", a);
		}
	}
	if (ndirs != 2 || i >= argc)
		die("usage: test-task session [options] KEYDIR OUTDIR -- SSHD-ARGV...");
	buf_addf(&path, "%s/test_user_key", dirs[0]);
	if (buf_read_file(&keys.user_key, path.buf, 16384) < 0)
		die_errno("cannot read '%s'", path.buf);
	buf_reset(&path);
	buf_addf(&path, "%s/ssh/" GUEST_SSH_HOST_KEY ".pub", dirs[0]);
	if (buf_read_file(&pub, path.buf, 16384) < 0 ||
	    ssh_pubkey_blob(pub.buf, pub.len, &keys.host_blob) < 0)
		die("cannot read the host key '%s'", path.buf);
	for (int j = 0; j < RESULT_NFILES; j++) {
		buf_reset(&path);
		buf_addf(&path, "%s/%s", dirs[1], guest_results[j].name);
		ts.result_fds[j] = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (ts.result_fds[j] < 0)
			die_errno("cannot create '%s'", path.buf);
	}
	if ((ret = guest_secrets_write(secrets, nsec, GUEST_SECRETS_STDIN, &sec, &err)) < 0)
		die("%s", err.buf);
	ts.secrets = sec.buf;
	ts.secrets_len = sec.len;
	ts.keys = &keys;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die_errno("socketpair");
	strvec_pushv(&sp.args, (const char *const *)argv + i);
	sp.in = sv[1];
	sp.out = sv[1];
	sp.err = SPAWN_NULL;
	if ((ret = spawn_start(&sp)) < 0)
		die_err(ret, "cannot start '%s'", argv[i]);
	close(sv[1]);
	ts.fd = sv[0];

	ret = task_session_run(&ts);
	if (ret < 0) {
		printf("failed: %s (%s)\n", ts.err.buf, strerror(-ret));
	} else {
		printf("ok exit %d", ts.exit_status);
		for (int j = 0; j < RESULT_NFILES; j++)
			if (ts.files[j].seen)
				printf(" %s %llu", ts.files[j].name,
				       (unsigned long long)ts.files[j].size);
		printf("\n");
	}
	task_session_clear(&ts);
	close(sv[0]);
	kill(sp.pid, SIGKILL);
	spawn_wait(&sp);
	spawn_clear(&sp);
	for (int j = 0; j < RESULT_NFILES; j++)
		close(ts.result_fds[j]);
	ssh_task_keys_release(&keys);
	buf_release(&pub);
	buf_release(&path);
	buf_wipe_release(&sec);
	buf_release(&err);
	return ret < 0 ? 1 : 0;
}

static int cmd_windows_quote(int argc, char **argv)
{
	struct buf b = BUF_INIT;
	int ret;

	if (argc != 1)
		die("usage: test-task windows-quote STRING");
	if ((ret = windows_quote(&b, argv[0])) < 0)
		printf("error: %s\n", strerror(-ret));
	else
		printf("%s\n", b.buf);
	buf_release(&b);
	return ret < 0 ? 1 : 0;
}

/* settings' lists, filled from its options (16 of each at most). */
struct settings_args {
	struct guest_secret secrets[16];
	struct task_mount mounts[16];
	const char *names[16], *remotes[16], *words[16], *ph_names[16], *ph_values[16];
	const char *secrets_file;
	size_t nsec, nmounts, nremotes, nph;
};

/* settings' options, into ts and sa. */
static void settings_args(int argc, char **argv, struct task_settings *ts, struct settings_args *sa)
{
	for (int i = 0; i < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		char *sep;

		if (!strcmp(a, "--run")) {
			ts->mode = TASK_MODE_RUN;
			i--;
		} else if (i + 1 >= argc)
			die("'%s' needs a value", a);
		else if (!strcmp(a, "--command") && ts->ncommand < 16)
			sa->words[ts->ncommand++] = v;
		else if (!strcmp(a, "--uid"))
			ts->uid = strtol(v, NULL, 10);
		else if (!strcmp(a, "--gid"))
			ts->gid = strtol(v, NULL, 10);
		else if (!strcmp(a, "--path"))
			ts->path = v;
		else if (!strcmp(a, "--resume"))
			ts->resume_session = v;
		else if (!strcmp(a, "--check"))
			ts->check = v;
		else if (!strcmp(a, "--check-timeout"))
			ts->check_timeout_ms = strtol(v, NULL, 10);
		else if (!strcmp(a, "--branch"))
			ts->branch = v;
		else if (!strcmp(a, "--proxy"))
			ts->proxy = v;
		else if (!strcmp(a, "--id"))
			ts->id = v;
		else if (!strcmp(a, "--commit"))
			ts->start_commit = v;
		else if (!strcmp(a, "--model"))
			ts->model = v;
		else if (!strcmp(a, "--timeout"))
			ts->timeout_s = strtol(v, NULL, 10);
		else if (!strcmp(a, "--budget")) {
			ts->has_budget = 1;
			ts->max_budget_usd = strtod(v, NULL);
		} else if (!strcmp(a, "--api"))
			ts->api = !strcmp(v, "none")      ? TASK_API_NONE
			          : !strcmp(v, "oauth")   ? TASK_API_OAUTH
			          : !strcmp(v, "forward") ? TASK_API_FORWARD
			                                  : (enum task_api)7;
		else if (!strcmp(a, "--env") && sa->nsec < 16 && (sep = strchr(argv[i + 1], '='))) {
			*sep = '\0';
			sa->secrets[sa->nsec].name = sa->names[sa->nsec] = argv[i + 1];
			sa->secrets[sa->nsec++].value = sep + 1;
		} else if (!strcmp(a, "--placeholder") && sa->nph < 16 &&
		           (sep = strchr(argv[i + 1], '='))) {
			*sep = '\0';
			sa->ph_names[sa->nph] = argv[i + 1];
			sa->ph_values[sa->nph++] = sep + 1;
		} else if (!strcmp(a, "--mount") && sa->nmounts < 16 &&
		           (sep = strchr(argv[i + 1], ':'))) {
			*sep = '\0';
			sa->mounts[sa->nmounts].tag = argv[i + 1];
			sa->mounts[sa->nmounts++].path = sep + 1;
		} else if (!strcmp(a, "--system-prompt"))
			ts->system_prompt = v;
		else if (!strcmp(a, "--git") && (sep = strchr(argv[i + 1], ':'))) {
			*sep = '\0';
			ts->git_name = argv[i + 1];
			ts->git_email = sep + 1;
		} else if (!strcmp(a, "--secrets"))
			sa->secrets_file = v;
		else if (!strcmp(a, "--remote") && sa->nremotes < 16)
			sa->remotes[sa->nremotes++] = v;
		else
			die("unknown option '%s'", a);
	}
	ts->command = sa->words;
	ts->env_names = sa->names;
	ts->nenv = sa->nsec;
	ts->ph_names = sa->ph_names;
	ts->ph_values = sa->ph_values;
	ts->nph = sa->nph;
	ts->mounts = sa->mounts;
	ts->nmounts = sa->nmounts;
	ts->git_remotes = sa->remotes;
	ts->ngit_remotes = sa->nremotes;
}

static int cmd_settings(int argc, char **argv)
{
	struct task_settings ts = {
	    .id = "259e07",
	    .start_commit = "0123456789abcdef0123456789abcdef01234567",
	    .timeout_s = 3600,
	    .git_name = "Test User",
	    .git_email = "test@example.com",
	    .api = TASK_API_FORWARD,
	};
	struct settings_args sa = {0};
	struct buf out = BUF_INIT, err = BUF_INIT, sec = BUF_INIT;
	int ret;

	settings_args(argc, argv, &ts, &sa);
	if ((ret = task_settings_json(&ts, &out, &err)) < 0) {
		printf("error: %s\n", err.buf);
		goto out;
	}
	if (sa.secrets_file) {
		if ((ret = guest_secrets_write(sa.secrets, sa.nsec, GUEST_SECRETS_STDIN, &sec,
		                               &err)) < 0) {
			printf("error: %s\n", err.buf);
			goto out;
		}
		if ((ret = buf_write_file(&sec, sa.secrets_file, 0600)) < 0)
			die_err(ret, "cannot write '%s'", sa.secrets_file);
	}
	fwrite(out.buf, 1, out.len, stdout);
out:
	buf_release(&out);
	buf_release(&err);
	buf_wipe_release(&sec);
	return ret < 0 ? 1 : 0;
}

static int cmd_settings_parse(int argc, char **argv)
{
	struct task_settings_doc d;
	struct buf in = BUF_INIT, out = BUF_INIT, err = BUF_INIT;
	ssize_t n;
	int ret = 1;

	int place = argc == 2 && !strcmp(argv[0], "--place");

	if (argc != 1 + place)
		die("usage: test-task settings-parse [--place] FILE");
	if ((n = buf_read_file(&in, argv[place], GUEST_SETTINGS_MAX + 1)) < 0)
		die_err((int)n, "cannot read '%s'", argv[place]);
	if ((place ? task_settings_parse_place : task_settings_parse)(in.buf, in.len, &d, &err) <
	    0) {
		printf("error: %s\n", err.buf);
	} else if (place) {
		printf("path %s\n", d.s.path);
		for (size_t i = 0; i < d.s.nmounts; i++)
			printf("mount %s %s\n", d.s.mounts[i].tag, d.s.mounts[i].path);
		ret = 0;
	} else if (task_settings_json(&d.s, &out, &err) < 0) {
		printf("error: written back: %s\n", err.buf);
	} else {
		fwrite(out.buf, 1, out.len, stdout);
		ret = 0;
	}
	task_settings_doc_release(&d);
	buf_release(&in);
	buf_release(&out);
	buf_release(&err);
	return ret;
}

static int cmd_check_bundle(int argc, char **argv)
{
	const char *repo = NULL;
	uint64_t max = 2ULL << 30;
	struct buf why = BUF_INIT;
	char end[OID_HEX_MAX + 1] = "";
	int i, fd, ret, child = 0;

	for (i = 0; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--child")) {
			child = 1;
		} else if (i + 1 >= argc) {
			break;
		} else if (!strcmp(argv[i], "--repo")) {
			repo = argv[++i];
		} else if (!strcmp(argv[i], "--max")) {
			long v;

			if (parse_long(argv[i + 1], 0, LONG_MAX, &v) < 0)
				die("--max: '%s' is not a size", argv[i + 1]);
			max = (uint64_t)v;
			i++;
		} else {
			die("unknown option '%s'", argv[i]);
		}
	}
	if (argc - i != 2)
		die("usage: test-task check-bundle [--repo DIR] [--max BYTES] [--child] START "
		    "FILE");
	fd = open(argv[i + 1], O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die_errno("cannot open '%s'", argv[i + 1]);
	if (child) {
		struct bundle_check c = BUNDLE_CHECK_INIT;
		struct bundle_verdict v;

		if (result_bundle_check_start(&c, fd, argv[i], repo, NULL,
		                              getenv("AIBOX_BUNDLE_LIMITS"), &why) < 0)
			die("%s", why.buf);
		bundle_check_run(&c, &v, NULL);
		fprintf(stderr, "checker: cpu %.3f peak %ld\n", v.cpu_s, v.max_rss_kib);
		ret = result_bundle_verdict(&v, end, &why);
		bundle_verdict_clear(&v);
		bundle_check_clear(&c);
	} else {
		ret = result_check_bundle(fd, argv[i], repo, NULL, max, NULL, end, &why);
	}
	close(fd);
	if (ret == 0)
		printf("ok %s\n", end);
	else
		printf("%s\n", why.buf);
	buf_release(&why);
	return ret == 0 ? 0 : ret > 0 ? 1 : 2;
}

/*
 * The proxy's record for N distinct allowed hosts, each counted twice, and a
 * refused and a failed request: written, read back, written again.
 */
static int cmd_report_count(int argc, char **argv)
{
	struct proxy_report r = PROXY_REPORT_INIT, back;
	struct buf json = BUF_INIT, err = BUF_INIT;
	long n;

	if (argc != 1 || parse_long(argv[0], 0, 1000000, &n) < 0)
		die("usage: test-task report-count N");
	for (int round = 0; round < 2; round++)
		for (long i = 0; i < n; i++) {
			char name[64];

			snprintf(name, sizeof(name), "h%ld.example:443", i);
			proxy_report_count(&r, PROXY_ALLOWED, name, 10, 20);
		}
	proxy_report_count(&r, PROXY_REFUSED, "evil.example:443", 0, 0);
	proxy_report_count(&r, PROXY_FAILED, NULL, 0, 0);
	proxy_report_json(&r, &json);
	if (proxy_report_parse(json.buf, json.len, &back, &err) < 0)
		die("%s", err.buf);
	buf_reset(&json);
	proxy_report_json(&back, &json);
	fputs(json.buf, stdout);
	proxy_report_release(&r);
	proxy_report_release(&back);
	buf_release(&json);
	buf_release(&err);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (argc < 2)
		die("usage: test-task COMMAND ARGS...");
	if (!strcmp(argv[1], "tar-in"))
		return cmd_tar_in(argc - 2, argv + 2);
	if (!strcmp(argv[1], "ssh-keys"))
		return cmd_ssh_keys(argc - 2, argv + 2);
	if (!strcmp(argv[1], "ssh-run"))
		return cmd_ssh_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "results"))
		return cmd_results(argc - 2, argv + 2);
	if (!strcmp(argv[1], "session"))
		return cmd_session(argc - 2, argv + 2);
	if (!strcmp(argv[1], "windows-quote"))
		return cmd_windows_quote(argc - 2, argv + 2);
	if (!strcmp(argv[1], "settings"))
		return cmd_settings(argc - 2, argv + 2);
	if (!strcmp(argv[1], "settings-parse"))
		return cmd_settings_parse(argc - 2, argv + 2);
	if (!strcmp(argv[1], "check-bundle"))
		return cmd_check_bundle(argc - 2, argv + 2);
	if (!strcmp(argv[1], "report-count"))
		return cmd_report_count(argc - 2, argv + 2);
	die("unknown command '%s'", argv[1]);
}
