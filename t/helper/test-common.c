/*
 * test-common: the common library's internals, for t/0*.bats.
 *
 *   test-common sandbox [--none] [--no-sockets] [--no-processes] [--keep-files]
 *	lock down, then try open/creat/exec/socket/fork
 *   test-common spawn-fds                          spawn a child given fd 5, list its fds
 *   test-common spawn-missing                      spawn a program that does not exist
 *   test-common read-capped MAX [MS] < input      buf_read_fd with a cap (within MS)
 *   test-common spawn-within                       spawn_wait_within on children that
 *                                                  end on SIGTERM, and one that ignores it
 *   test-common capture-within MS SCRIPT           spawn_capture_within() of sh -c SCRIPT:
 *                                                  "RET MS" (its return, the time it took)
 *   test-common parse-long MIN MAX S
 *   test-common size MIN MAX S                     parse_size_mib(), MIN and MAX in MiB
 *   test-common bytes S                            parse_size() over 0..2^64-1
 *   test-common memory S | cpus S                  the rules of --memory and --cpus
 *   test-common opts ARGS...                       opt_next() on ARGS, one line per event
 *   test-common guest-valid env|path|tag S         "yes" or "no" by common/base/guest_abi.h's rule
 *   test-common guest-mount-tag N                  guest_mount_tag() of mount N
 *   test-common guest-results                      the result files: "NAME CAP" in order
 *   test-common guest-literals                     the contract's strings: "KIND HOME NAME VALUE"
 *   test-common guest-secrets stdin|env-var < TEXT guest_secrets_read(): NAME=value lines,
 *                                                  or "error: REASON" (exit 1)
 *   test-common bug                                a programmer's mistake: BUG() aborts
 *   test-common shell-quote S                      S as shell_quote() appends it
 *   test-common printable [keep-8bit] < bytes      the bytes as printable_ascii() leaves them
 *   test-common git-remote URL                     git_remote_url_parse(): "HOST PORT HOSTPORT
 *                                                  PATH", or "error: REASON"
 *   test-common clock MS                           sleep MS ms: what clock_ms() saw pass
 *   test-common ledger-add DIR N [EPOCH]           N times (0: until killed) add 1 nano-USD
 *                                                  to project DIR's ledger of today, or of
 *                                                  EPOCH's day (usage_ledger_open()), and set
 *                                                  a reservation (usage_ledger_sync()),
 *                                                  from the 4th the price flags too,
 *                                                  printing the total after each; "error:
 *                                                  REASON" (exit 1)
 *   test-common ledger-raise DIR FLOOR [EPOCH]     raise the total of DIR's ledger of today
 *                                                  (or EPOCH's day) to FLOOR when below
 *                                                  (usage_ledger_raise()), printing it;
 *                                                  "error: REASON" (exit 1)
 *   test-common json-get < LINES                   each line KIND|req or opt|JSON, KIND str,
 *	                                            int, real, bool, obj or list: member "k"
 *	                                            of JSON (\u0000 kept) by json_get, one
 *	                                            line each: "set VALUE", "missing" or
 *	                                            "error: REASON"
 */
#include <dirent.h>
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
#include "config/config.h"
#include "config/usage.h"
#include "base/err.h"
#include "net/git_remote.h"
#include "base/guest_abi.h"
#include "base/guest_secrets.h"
#include "base/json_get.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/printable.h"
#include "base/sandbox.h"
#include "base/shell_quote.h"
#include "base/spawn.h"
#include "base/banned.h"

static int cmd_sandbox(int argc, char **argv)
{
	enum sandbox_backend be = SANDBOX_SECCOMP;
	unsigned flags = 0;
	int fd, ret;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--none"))
			be = SANDBOX_NONE;
		else if (!strcmp(argv[i], "--no-sockets"))
			flags |= SANDBOX_NO_NEW_SOCKETS;
		else if (!strcmp(argv[i], "--no-processes"))
			flags |= SANDBOX_NO_PROCESSES;
		else if (!strcmp(argv[i], "--keep-files"))
			flags |= SANDBOX_KEEP_FILES;
	}
	ret = sandbox_lockdown(be, flags);
	if (ret < 0)
		die_err(ret, "lockdown failed");
	fd = open("/etc/hostname", O_RDONLY);
	printf("open: %s\n", fd >= 0 ? "ok" : strerror(errno));
	fd = open("sandbox-created", O_WRONLY | O_CREAT, 0600);
	printf("create: %s\n", fd >= 0 ? "ok" : strerror(errno));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	printf("socket: %s\n", fd >= 0 ? "ok" : strerror(errno));
	fflush(stdout);
	{
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		printf("fork: %s\n", pid >= 0 ? "ok" : strerror(errno));
		fflush(stdout);
	}
	{
		struct spawn sp = SPAWN_INIT;

		strvec_pushl(&sp.args, "/bin/true", NULL);
		ret = spawn_run(&sp);
		printf("exec: %s\n", ret == 0 ? "ok" : strerror(ret < 0 ? -ret : EINVAL));
		spawn_clear(&sp);
	}
	{
		char path[64];
		int n;

		snprintf(path, sizeof(path), "/proc/%d/status", (int)getpid());
		(void)path;
		n = 0;
		(void)n;
	}
	return 0;
}

static int cmd_spawn_fds(void)
{
	struct spawn sp = SPAWN_INIT;
	struct buf out = BUF_INIT;
	int p[2], ret;

	/* An fd not meant for the child: it must not see it. */
	if (pipe(p) < 0)
		die_errno("pipe");
	fd_set_cloexec(p[0], 0);
	strvec_pushl(&sp.args, "sh", "-c",
	             "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; cat <&5", NULL);
	spawn_give_fd(&sp, p[0], 5);
	sp.out = SPAWN_PIPE;
	ret = spawn_start(&sp);
	if (ret < 0)
		die_err(ret, "spawn");
	close(p[0]);
	if (write_all(p[1], "via-fd-5\n", 9) < 0)
		die_errno("write");
	close(p[1]);
	buf_read_fd(&out, sp.out_fd, 1 << 20);
	ret = spawn_wait(&sp);
	printf("%sstatus %d\n", out.buf, ret);
	buf_release(&out);
	spawn_clear(&sp);
	return 0;
}

static int cmd_spawn_missing(void)
{
	struct spawn sp = SPAWN_INIT;
	int ret;

	strvec_pushl(&sp.args, "/nonexistent/program", NULL);
	ret = spawn_start(&sp);
	printf("%d %s\n", ret, strerror(-ret));
	spawn_clear(&sp);
	sp = (struct spawn)SPAWN_INIT;
	strvec_pushl(&sp.args, "/etc/hostname", NULL);
	ret = spawn_start(&sp);
	printf("%d %s\n", ret, strerror(-ret));
	spawn_clear(&sp);
	sp = (struct spawn)SPAWN_INIT;
	strvec_pushl(&sp.args, "sh", "-c", "exit 7", NULL);
	printf("exit %d\n", spawn_run(&sp));
	spawn_clear(&sp);
	sp = (struct spawn)SPAWN_INIT;
	strvec_pushl(&sp.args, "sh", "-c", "kill -TERM $$", NULL);
	printf("signal %d\n", spawn_run(&sp));
	spawn_clear(&sp);
	return 0;
}

static int cmd_read_capped(const char *max, const char *ms)
{
	struct buf b = BUF_INIT;
	long cap, within = -1;
	ssize_t n;

	if (parse_long(max, 0, 1L << 30, &cap) < 0)
		die("bad cap '%s'", max);
	if (ms && parse_long(ms, 0, 60000, &within) < 0)
		die("bad time '%s'", ms);
	n = ms ? buf_read_fd_within(&b, 0, (size_t)cap, (int)within)
	       : buf_read_fd(&b, 0, (size_t)cap);
	if (n < 0)
		printf("error %s, kept %zu\n", strerror((int)-n), b.len);
	else
		printf("read %zd\n", n);
	buf_release(&b);
	return 0;
}

static int cmd_spawn_within(void)
{
	/*
	 * Each says it is ready (its trap set) on a pipe, then leaves it: no
	 * grandchild may hold the caller's stdout, or that pipe, after its time.
	 */
	static const char *const scripts[] = {
	    "echo ready; exec sleep 30 >/dev/null",
	    "trap '' TERM; echo ready; exec >/dev/null; while :; do sleep 0.05; done"};

	for (size_t i = 0; i < ARRAY_SIZE(scripts); i++) {
		struct spawn sp = SPAWN_INIT;
		char c;
		int ret;

		strvec_pushl(&sp.args, "sh", "-c", scripts[i], NULL);
		sp.in = sp.err = SPAWN_NULL;
		sp.out = SPAWN_PIPE;
		if ((ret = spawn_start(&sp)) < 0)
			die_err(ret, "cannot start sh");
		/* its line, not a sleep: a slow machine may take long to run sh */
		while ((ret = read(sp.out_fd, &c, 1)) < 0 && errno == EINTR)
			;
		if (ret != 1)
			die("sh ended before it was ready");
		kill(sp.pid, SIGTERM);
		printf("%d\n", spawn_wait_within(&sp, 300));
		spawn_clear(&sp);
	}
	return 0;
}

static int cmd_capture_within(const char *ms, const char *script)
{
	struct spawn sp = SPAWN_INIT;
	struct buf out = BUF_INIT;
	int64_t start;
	long timeout;
	int ret;

	if (parse_long(ms, 0, 600000, &timeout) < 0)
		die("bad time: %s", ms);
	strvec_pushl(&sp.args, "sh", "-c", script, NULL);
	sp.err = SPAWN_NULL;
	start = clock_ms();
	ret = spawn_capture_within(&sp, &out, 4096, (int)timeout);
	printf("%d %lld\n", ret, (long long)(clock_ms() - start));
	spawn_clear(&sp);
	buf_release(&out);
	return 0;
}

static int cmd_parse_long(char **argv)
{
	long min, max, v;
	int ret;

	if (parse_long(argv[0], -1000000, 1000000, &min) < 0 ||
	    parse_long(argv[1], -1000000, 1000000, &max) < 0)
		die("bad range");
	ret = parse_long(argv[2], min, max, &v);
	if (ret < 0)
		printf("error %s\n", strerror(-ret));
	else
		printf("%ld\n", v);
	return 0;
}

static int cmd_value(const char *what, char **argv)
{
	struct buf why = BUF_INIT;
	uint64_t mib = 0;
	long min = 0, max = 0;
	int ret, cpus = 0;

	if (!strcmp(what, "size")) {
		if (parse_long(argv[0], 0, LONG_MAX, &min) < 0 ||
		    parse_long(argv[1], 0, LONG_MAX, &max) < 0)
			die("bad range");
		ret = parse_size_mib(argv[2], (uint64_t)min, (uint64_t)max, &mib, &why);
	} else if (!strcmp(what, "memory")) {
		ret = config_parse_memory(argv[0], &mib, &why);
	} else {
		ret = parse_cpus(argv[0], &cpus, &why);
	}
	if (ret < 0)
		printf("error %s: %s\n", ret == -EINVAL ? "EINVAL" : "ERANGE", why.buf);
	else if (!strcmp(what, "cpus"))
		printf("%d\n", cpus);
	else
		printf("%llu\n", (unsigned long long)mib);
	buf_release(&why);
	return 0;
}

/* Options --flag, --value V and -h; each event on a line, the words after `--` last. */
static int cmd_opts(int argc, char **argv)
{
	static const struct option options[] = {
	    {"flag", no_argument, NULL, 'f'},
	    {"value", required_argument, NULL, 'v'},
	    {NULL, 0, NULL, 0},
	};
	struct buf why = BUF_INIT;
	const char *arg;
	int opt;

	while ((opt = opt_next(argc, argv, "h", options, &arg, &why)) != OPT_END) {
		if (opt == OPT_WORD)
			printf("word %s\n", arg);
		else if (opt == OPT_BAD)
			printf("bad %s\n", why.buf);
		else if (opt == 'v')
			printf("value %s\n", arg);
		else
			printf("option %c\n", opt);
		buf_reset(&why);
	}
	while (optind < argc)
		printf("after %s\n", argv[optind++]);
	buf_release(&why);
	return 0;
}

static int cmd_guest_secrets(const char *framing)
{
	struct buf in = BUF_INIT, err = BUF_INIT;
	struct strvec out = STRVEC_INIT;
	int ret;

	if (buf_read_fd(&in, 0, 2 * GUEST_SECRETS_MAX) < 0)
		die_errno("cannot read stdin");
	ret = guest_secrets_read(
	    in.buf, in.len, !strcmp(framing, "stdin") ? GUEST_SECRETS_STDIN : GUEST_SECRETS_ENV_VAR,
	    &out, &err);
	if (ret < 0)
		printf("error: %s\n", err.buf);
	for (size_t i = 0; i < out.nr; i++)
		printf("%s\n", out.v[i]);
	strvec_wipe_clear(&out);
	buf_release(&in);
	buf_release(&err);
	return ret < 0 ? 1 : 0;
}

static int cmd_guest(int argc, char **argv)
{
	char tag[GUEST_TAG_MAX + 1];
	int ok;

	if (!strcmp(argv[0], "guest-results") && argc == 1) {
		for (int i = 0; i < RESULT_NFILES; i++)
			printf("%s %llu\n", guest_results[i].name,
			       (unsigned long long)guest_results[i].max);
		return 0;
	}
	if (!strcmp(argv[0], "guest-literals") && argc == 1) {
		static const char *const kinds[] = {"name", "token", "word"};

		for (const struct guest_literal *l = guest_literals; l->name; l++)
			printf("%s %s %s %s\n", kinds[l->kind], l->home, l->name, l->value);
		/* The result files' names are the table's, spelled in guest_abi.c. */
		for (int i = 0; i < RESULT_NFILES; i++)
			if (strcmp(guest_results[i].name, SESSION_FILE_NAME))
				printf("name common/base/guest_abi guest_results[%d] %s\n", i,
				       guest_results[i].name);
		return 0;
	}
	if (!strcmp(argv[0], "guest-secrets") && argc == 2)
		return cmd_guest_secrets(argv[1]);
	if (!strcmp(argv[0], "guest-mount-tag") && argc == 2) {
		guest_mount_tag(tag, strtoul(argv[1], NULL, 10));
		printf("%s %s\n", tag, guest_tag_valid(tag) ? "valid" : "invalid");
		return 0;
	}
	if (argc != 3)
		die("usage: test-common guest-valid env|path|tag S");
	if (!strcmp(argv[1], "env"))
		ok = guest_env_name_valid(argv[2]);
	else if (!strcmp(argv[1], "path"))
		ok = guest_path_valid(argv[2]);
	else if (!strcmp(argv[1], "tag"))
		ok = guest_tag_valid(argv[2]);
	else
		die("unknown kind '%s'", argv[1]);
	printf("%s\n", ok ? "yes" : "no");
	return 0;
}

/* A programmer's mistake: a child's fd 1 is not the caller's to give. */
static int cmd_bug(void)
{
	struct spawn sp = SPAWN_INIT;

	spawn_give_fd(&sp, 5, 1);
	return 0;
}

/* Sleep ms milliseconds and print the milliseconds clock_ms() saw pass. */
static int cmd_clock(const char *ms)
{
	long v;
	int64_t t0;
	struct timespec ts;

	if (parse_long(ms, 0, 10000, &v) < 0)
		die("invalid milliseconds '%s'", ms);
	ts.tv_sec = v / 1000;
	ts.tv_nsec = (v % 1000) * 1000000;
	t0 = clock_ms();
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	printf("%lld\n", (long long)(clock_ms() - t0));
	return 0;
}

static int cmd_shell_quote(const char *s)
{
	struct buf b = BUF_INIT;

	shell_quote(&b, s);
	printf("%s\n", b.buf);
	buf_release(&b);
	return 0;
}

static int cmd_printable(int argc, char **argv)
{
	struct buf b = BUF_INIT;
	ssize_t ret = buf_read_fd(&b, 0, 1 << 20);

	if (ret < 0) {
		fprintf(stderr, "test-common: cannot read stdin: %s\n", strerror((int)-ret));
		return 1;
	}
	printable_ascii(b.buf, b.len,
	                argc == 3 && !strcmp(argv[2], "keep-8bit") ? PRINTABLE_KEEP_8BIT : 0);
	ret = write_all(1, b.buf, b.len) < 0;
	buf_release(&b);
	return ret;
}

static int cmd_git_remote(const char *url)
{
	struct git_remote_url u;
	struct buf err = BUF_INIT;

	if (git_remote_url_parse(url, &u, &err) < 0) {
		printf("error: %s\n", err.buf);
		buf_release(&err);
		return 1;
	}
	printf("%s %s %s %s\n", u.host, u.port, u.hostport, u.path);
	git_remote_url_release(&u);
	return 0;
}

static void json_get_one(const char *kind, const char *need, const char *json)
{
	unsigned flags = !strcmp(need, "opt") ? JSON_OPTIONAL : 0;
	const char *key = "k", *s = NULL;
	struct buf err = BUF_INIT, out = BUF_INIT;
	json_t *root, *v = NULL;
	json_error_t je;
	int64_t i = 0;
	double d = 0;
	int b = 0;

	root = json_loads(json, JSON_ALLOW_NUL, &je);
	if (!root)
		die("not JSON: %s", je.text);
	if (!strcmp(kind, "str") && json_get_str(root, key, flags, 8, &s, &err) > 0)
		buf_addstr(&out, s);
	else if (!strcmp(kind, "int") && json_get_int(root, key, flags, -5, 5, &i, &err) > 0)
		buf_addf(&out, "%lld", (long long)i);
	else if (!strcmp(kind, "real") && json_get_real(root, key, flags, -0.5, 0.5, &d, &err) > 0)
		buf_addf(&out, "%g", d);
	else if (!strcmp(kind, "bool") && json_get_bool(root, key, flags, &b, &err) > 0)
		buf_addf(&out, "%d", b);
	else if (!strcmp(kind, "obj") && json_get_obj(root, key, flags, &v, &err) > 0)
		buf_addf(&out, "%zu members", json_object_size(v));
	else if (!strcmp(kind, "list") && json_get_list(root, key, flags, 2, &v, &err) > 0)
		buf_addf(&out, "%zu elements", json_array_size(v));
	json_decref(root);
	if (err.len)
		printf("error: %s\n", err.buf);
	else if (out.len)
		printf("set %s\n", out.buf);
	else
		printf("missing\n");
	buf_release(&err);
	buf_release(&out);
}

static int cmd_json_get(void)
{
	char line[512];

	while (fgets(line, sizeof(line), stdin)) {
		char *need = strchr(line, '|'), *json = need ? strchr(need + 1, '|') : NULL;

		if (!json)
			die("not KIND|NEED|JSON: %s", line);
		*need++ = '\0';
		*json++ = '\0';
		json[strcspn(json, "\n")] = '\0';
		json_get_one(line, need, json);
	}
	return 0;
}

static int cmd_ledger_add(const char *dir, const char *count, const char *epoch)
{
	struct buf err = BUF_INIT;
	long n = strtol(count, NULL, 10);
	time_t day = epoch ? (time_t)strtoll(epoch, NULL, 10) : time(NULL);
	int fd = usage_ledger_open(dir, day, &err);

	if (fd < 0)
		die("%s", err.buf);
	setvbuf(stdout, NULL, _IONBF, 0);
	for (long i = 0; n <= 0 || i < n; i++) {
		struct usage_ledger_view v;
		/* a reservation that comes and goes, so that its line is written too, and the
		 * flags' */
		int ret = usage_ledger_sync(fd, 0x5eed, 1, i % 2 ? 1000 : 0,
		                            i < 3   ? 0
		                            : i < 5 ? USAGE_PRICE_GEO
		                                    : USAGE_PRICE_TOP,
		                            time(NULL), &v);

		if (ret < 0) {
			printf("error: %s\n", strerror(-ret));
			return 1;
		}
		printf("%llu\n", (unsigned long long)v.total);
	}
	close(fd);
	return 0;
}

static int cmd_ledger_raise(const char *dir, const char *floor, const char *epoch)
{
	struct buf err = BUF_INIT;
	time_t day = epoch ? (time_t)strtoll(epoch, NULL, 10) : time(NULL);
	uint64_t total = 0;
	int fd = usage_ledger_open(dir, day, &err), ret;

	if (fd < 0)
		die("%s", err.buf);
	ret = usage_ledger_raise(fd, strtoull(floor, NULL, 10), &total);
	close(fd);
	if (ret < 0) {
		printf("error: %s\n", strerror(-ret));
		return 1;
	}
	printf("%llu\n", (unsigned long long)total);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-common <command> [args]");
	if (!strcmp(argv[1], "sandbox"))
		return cmd_sandbox(argc - 2, argv + 2);
	if (!strcmp(argv[1], "spawn-fds"))
		return cmd_spawn_fds();
	if (!strcmp(argv[1], "spawn-missing"))
		return cmd_spawn_missing();
	if (!strcmp(argv[1], "spawn-within"))
		return cmd_spawn_within();
	if (!strcmp(argv[1], "capture-within") && argc == 4)
		return cmd_capture_within(argv[2], argv[3]);
	if (!strcmp(argv[1], "read-capped") && (argc == 3 || argc == 4))
		return cmd_read_capped(argv[2], argc == 4 ? argv[3] : NULL);
	if (!strcmp(argv[1], "parse-long") && argc == 5)
		return cmd_parse_long(argv + 2);
	if (!strcmp(argv[1], "bytes") && argc == 3) {
		uint64_t v = 0;
		int ret = parse_size(argv[2], 0, UINT64_MAX, &v);

		if (ret < 0)
			printf("error %s\n", ret == -EINVAL ? "EINVAL" : "ERANGE");
		else
			printf("%llu\n", (unsigned long long)v);
		return 0;
	}
	if (!strcmp(argv[1], "size") && argc == 5)
		return cmd_value(argv[1], argv + 2);
	if ((!strcmp(argv[1], "memory") || !strcmp(argv[1], "cpus")) && argc == 3)
		return cmd_value(argv[1], argv + 2);
	if (!strcmp(argv[1], "opts"))
		return cmd_opts(argc - 1, argv + 1);
	if (!strncmp(argv[1], "guest-", 6))
		return cmd_guest(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bug"))
		return cmd_bug();
	if (!strcmp(argv[1], "shell-quote") && argc == 3)
		return cmd_shell_quote(argv[2]);
	if (!strcmp(argv[1], "printable") && (argc == 2 || argc == 3))
		return cmd_printable(argc, argv);
	if (!strcmp(argv[1], "git-remote") && argc == 3)
		return cmd_git_remote(argv[2]);
	if (!strcmp(argv[1], "json-get") && argc == 2)
		return cmd_json_get();
	if (!strcmp(argv[1], "ledger-raise") && (argc == 4 || argc == 5))
		return cmd_ledger_raise(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (!strcmp(argv[1], "ledger-add") && (argc == 4 || argc == 5))
		return cmd_ledger_add(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (!strcmp(argv[1], "clock") && argc == 3)
		return cmd_clock(argv[2]);
	die("unknown command '%s'", argv[1]);
}
