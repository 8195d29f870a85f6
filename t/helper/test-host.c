/*
 * test-host: the host layer of aibox task and aibox run (common/task/host_start.h),
 * for t/5009-host-layer.bats.
 *
 *   test-host env-json [--object] NAME=VALUE...
 *	print host_env_json() of the pairs: the task's stdin, or with --object
 *	aibox run's AIBOX_ENV; "error: REASON" (exit 1) when refused
 *   test-host guest-env [FLAG...] [NAME=VALUE...]
 *	print guest_env_build()'s environment, one variable a line; flags:
 *	--root, --git, --claude, --retries, --forward, --oauth, --ca, --proxy=URL, --term=T
 *   test-host env-take CONFIG
 *	host_env_take() of CONFIG: the names and values the VM would get,
 *	NAME=VALUE a line, then its placeholders, "placeholder NAME=VALUE" a
 *	line; "error: REASON" (exit 1) when refused
 *   test-host helpers [--no-values] CONFIG SOCK LOG
 *	host_env_take() of CONFIG, then helpers_start() with the proxy on the
 *	unix socket SOCK logging to LOG and the secrets passed on: prints the
 *	env (NAME=VALUE), the placeholders (placeholder NAME=VALUE), "args: ..." (the proxy's argv),
 *the task CA's PEM and "ready"; on EOF of stdin stops the helpers and prints the record;
 *	--no-values: no secret values given (as on a Slurm node)
 *   test-host worker pdeath|detach
 *	spawn_worker() with that flag, an extra fd open in the parent; the
 *	worker prints "fds: N..." (its open fds), "stdin: TARGET", and
 *	"session: own" or "session: ours", over the one fd it keeps
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/guest_env.h"
#include "task/helpers.h"
#include "task/host_start.h"
#include "proxy/proxy_report.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "base/banned.h"

static int cmd_env_json(int argc, char **argv)
{
	struct strvec names = STRVEC_INIT, values = STRVEC_INIT;
	struct buf out = BUF_INIT, err = BUF_INIT;
	int object = argc > 0 && !strcmp(argv[0], "--object"), ret;

	for (int i = object; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');

		if (!eq)
			die("usage: test-host env-json [--object] NAME=VALUE...");
		strvec_pushf(&names, "%.*s", (int)(eq - argv[i]), argv[i]);
		strvec_push(&values, eq + 1);
	}
	ret = host_env_json(&names, &values, object ? GUEST_SECRETS_ENV_VAR : GUEST_SECRETS_STDIN,
	                    &out, &err);
	if (ret < 0)
		printf("error: %s\n", err.buf);
	else
		fwrite(out.buf, 1, out.len, stdout);
	strvec_clear(&names);
	strvec_clear(&values);
	buf_release(&out);
	buf_release(&err);
	return ret < 0;
}

/* In the worker: what it has, written to fd. */
static void worker_report(int fd, pid_t parent_sid)
{
	struct buf out = BUF_INIT;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char target[256];
	ssize_t n;

	buf_addstr(&out, "fds:");
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			buf_addf(&out, " %s", e->d_name);
	if (d)
		closedir(d);
	n = readlink("/proc/self/fd/0", target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = 0;
	buf_addf(&out, "\nstdin: %s\nsession: %s\n", target,
	         getsid(0) == parent_sid ? "ours" : "own");
	(void)write_all(fd, out.buf, out.len);
	_exit(0);
}

static int cmd_worker(int argc, char **argv)
{
	struct buf out = BUF_INIT;
	int p[2], extra, flags, status;
	pid_t pid, sid = getsid(0);

	if (argc != 1 || (strcmp(argv[0], "pdeath") && strcmp(argv[0], "detach")))
		die("usage: test-host worker pdeath|detach");
	flags = !strcmp(argv[0], "pdeath") ? SPAWN_WORKER_PDEATH : SPAWN_WORKER_DETACH;
	if (pipe(p) < 0 || (extra = open("/dev/null", O_RDONLY)) < 0)
		die_errno("cannot make a pipe");
	pid = spawn_worker(&p[1], 1, flags);
	if (pid < 0)
		die_err(pid, "cannot fork");
	if (pid == 0)
		worker_report(p[1], sid);
	close(p[1]);
	if (buf_read_fd(&out, p[0], 4096) < 0)
		die("cannot read the worker");
	waitpid(pid, &status, 0);
	printf("kept: %d extra: %d\n%s", p[1], extra, out.buf);
	buf_release(&out);
	return 0;
}

static int cmd_env_take(int argc, char **argv)
{
	struct host_env e = HOST_ENV_INIT;
	struct config cfg;
	struct buf err = BUF_INIT;

	if (argc != 1)
		die("usage: test-host env-take CONFIG");
	if (config_load(&cfg, argv[0], &err) < 0 || host_env_take(&e, &cfg, argv[0], &err) < 0) {
		printf("error: %s\n", err.buf);
		buf_release(&err);
		host_env_release(&e);
		config_release(&cfg);
		return 1;
	}
	for (size_t i = 0; i < e.names.nr; i++)
		printf("%s=%s\n", e.names.v[i], e.values.v[i]);
	for (size_t i = 0; i < e.ph_names.nr; i++)
		printf("placeholder %s=%s\n", e.ph_names.v[i], e.ph_values.v[i]);
	host_env_release(&e);
	config_release(&cfg);
	return 0;
}

static int cmd_helpers(int argc, char **argv)
{
	struct host_env e = HOST_ENV_INIT;
	struct helpers h = HELPERS_INIT;
	struct helpers_opts o = {0};
	struct proxy_report rep = PROXY_REPORT_INIT;
	struct config cfg;
	struct buf err = BUF_INIT, rec = BUF_INIT;
	struct strvec none = STRVEC_INIT;
	int no_values = argc > 0 && !strcmp(argv[0], "--no-values");
	char c;

	argc -= no_values;
	argv += no_values;
	if (argc != 3)
		die("usage: test-host helpers CONFIG SOCK LOG");
	if (config_load(&cfg, argv[0], &err) < 0 || host_env_take(&e, &cfg, argv[0], &err) < 0)
		die("%s", err.buf);
	o.cfg = &cfg;
	o.sock_path = argv[1];
	o.proxy_log_fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (o.proxy_log_fd < 0)
		die_errno("cannot open '%s'", argv[2]);
	o.broker_log_fd = -1;
	o.secret_values = no_values ? &none : &e.secret_values;
	o.placeholders = &e.placeholders;
	o.report = 1;
	o.no_sandbox = 1;
	if (helpers_start(&h, &o, &err) < 0)
		die("%s", err.buf);
	close(o.proxy_log_fd);
	for (size_t i = 0; i < e.names.nr; i++)
		printf("%s=%s\n", e.names.v[i], e.values.v[i]);
	for (size_t i = 0; i < e.ph_names.nr; i++)
		printf("placeholder %s=%s\n", e.ph_names.v[i], e.ph_values.v[i]);
	printf("args:");
	for (size_t i = 0; i < h.proxy.args.nr; i++)
		printf(" %s", h.proxy.args.v[i]);
	printf("\n%sready\n", h.ca_pem.buf);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	if (helpers_stop_proxy(&h, &rep, &err) < 0)
		die("%s", err.buf);
	proxy_report_json(&rep, &rec);
	printf("%s", rec.buf);
	helpers_stop(&h);
	proxy_report_release(&rep);
	host_env_release(&e);
	config_release(&cfg);
	buf_release(&rec);
	return 0;
}

static int cmd_guest_env(int argc, char **argv)
{
	struct guest_env g = {.path = "/bin", .home = "/home/aibox", .user = "aibox"};
	struct strvec env = STRVEC_INIT;
	int i;

	for (i = 0; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--root"))
			g.sandbox = 1;
		else if (!strcmp(argv[i], "--git"))
			g.git = 1;
		else if (!strcmp(argv[i], "--claude"))
			g.claude = 1;
		else if (!strcmp(argv[i], "--retries"))
			g.claude_retries = 1;
		else if (!strcmp(argv[i], "--forward"))
			g.api_forward = 1;
		else if (!strcmp(argv[i], "--oauth"))
			g.api_oauth = 1;
		else if (!strcmp(argv[i], "--ca"))
			g.task_ca = 1;
		else if (!strncmp(argv[i], "--proxy=", 8))
			g.proxy = argv[i] + 8;
		else if (!strncmp(argv[i], "--term=", 7))
			g.term = argv[i] + 7;
		else
			die("unknown flag '%s'", argv[i]);
	}
	g.vars = (const char *const *)argv + i;
	g.nvars = (size_t)(argc - i);
	guest_env_build(&g, &env);
	for (size_t k = 0; k < env.nr; k++)
		printf("%s\n", env.v[k]);
	strvec_clear(&env);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "worker"))
		return cmd_worker(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "env-json"))
		return cmd_env_json(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "helpers"))
		return cmd_helpers(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "env-take"))
		return cmd_env_take(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "guest-env"))
		return cmd_guest_env(argc - 2, argv + 2);
	die("usage: test-host env-json [--object] NAME=VALUE...");
}
