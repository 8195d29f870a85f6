/*
 * test-vm: boot an aibox image through the launcher (common/vm/vm.h) for the
 * tests, and let a command talk to the guest's SSH server.
 *
 *   test-vm --image DIR --share DIR [--proxy SOCK] [--mount TAG=DIR]...
 *           [--log FILE] [--listen SOCK] [--memory MB] [--disk-mb N]
 *           [--mode task|run] [--grace-ms N] [--cmdline TEXT] [--snapshot 0|1]
 *           [--start-only 1] [-- CMD ARGS...]
 *
 * Starts the VM, waits for the SSH banner on vm.ssh_fd and prints
 * "ssh-ready <ms>" (stdout).  With --listen, each connection to the unix
 * socket SOCK is relayed to the guest's SSH server (after its banner), so
 * `ssh -o ProxyCommand='aibox-connect SOCK'` reaches it.  Then runs CMD (if
 * any), and stops the VM, waiting up to --grace-ms for it to power off on
 * its own; prints "vm: powered off" or "vm: killed".  Exits with CMD's
 * status, or 0 without CMD; 3 when the VM never got ready (after printing
 * "vm-exited <ms>" if QEMU exited: the bare boot of bench/boot).
 * --snapshot 1 starts from the image's snapshot (snapshot_boot()) and
 * prints "test-vm: restored" or "test-vm: cold", and vm.note if any.
 * --start-only 1 stops the VM right after that (no wait for SSH).
 *
 *   test-vm --args-only KVM(0|1) [--image DIR] [--share DIR] [--proxy SOCK]
 *           [--mount TAG=DIR] [--rw-mount TAG=DIR] [--memory MB] [--cpus N]
 *           [--connect PROG] [--conns-log FILE] [--cmdline TEXT] [--mode M]
 *
 * prints QEMU's argv for a cold boot (vm_cold_args()), one a line, and
 * starts nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/num.h"
#include "vm/snapshot.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "vm/vm.h"
#include "base/banned.h"

/* Copy between a client and the guest until the client is done. */
static void relay(int client, int guest)
{
	char buf[65536];

	for (;;) {
		struct pollfd pfd[2] = {{.fd = client, .events = POLLIN},
		                        {.fd = guest, .events = POLLIN}};
		ssize_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(client, buf, sizeof(buf));
			if (n <= 0 || write_all(guest, buf, (size_t)n) < 0)
				return;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(guest, buf, sizeof(buf));
			if (n <= 0 || write_all(client, buf, (size_t)n) < 0)
				return;
		}
	}
}

/*
 * Relay each connection to SOCK to the guest, one at a time, in a child.
 * The child ends when *stop (the write end of a pipe it watches) is closed
 * and no client is connected: the last bytes a client sent before it went
 * (SSH's channel close, which ends the guest's session) still reach the guest.
 */
static pid_t serve(const char *path, struct vm *vm, int *stop)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int p[2];
	pid_t pid;

	if (l < 0 || strlen(path) >= sizeof(sun.sun_path))
		die("cannot listen on '%s'", path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (bind(l, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(l, 4) < 0)
		die_errno("cannot listen on '%s'", path);
	if (pipe2(p, O_CLOEXEC) < 0)
		die_errno("pipe");
	pid = fork();
	if (pid < 0)
		die_errno("fork");
	if (pid > 0) {
		close(l);
		close(p[0]);
		*stop = p[1];
		return pid;
	}
	close(p[1]);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		struct pollfd pfd[2] = {{.fd = l, .events = POLLIN},
		                        {.fd = p[0], .events = POLLIN}};
		int c, r;

		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			_exit(0);
		c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		r = vm_wait_ssh(vm, 60000);
		if (r < 0) {
			fprintf(stderr, "test-vm: no SSH banner: %s\n", strerror(-r));
			close(c);
			continue;
		}
		relay(c, vm->ssh_fd);
		close(c);
	}
}

/* Close the relay's stop pipe and give it up to 10 s to finish, then kill it. */
static void serve_end(pid_t server, int stop)
{
	close(stop);
	for (int t = 0; t < 1000; t++) {
		if (waitpid(server, NULL, WNOHANG) == server)
			return;
		usleep(10000);
	}
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
}

struct opts {
	struct vm_config cfg;
	int snapshot; /* --snapshot 1: snapshot_boot() */
	struct vm_mount mounts[8];
	const char *listen_path;
	long grace, start_only, args_only;
	char **cmd; /* after --, or NULL */
};

/* An option whose value is a name or a path: 1 if a is one. */
static int set_path(struct opts *o, const char *a, const char *v)
{
	struct vm_config *cfg = &o->cfg;

	if (!strcmp(a, "--image"))
		cfg->image_dir = v;
	else if (!strcmp(a, "--share"))
		cfg->share_dir = v;
	else if (!strcmp(a, "--proxy"))
		cfg->proxy_socket = v;
	else if (!strcmp(a, "--mode"))
		cfg->mode = v;
	else if (!strcmp(a, "--listen"))
		o->listen_path = v;
	else if (!strcmp(a, "--cmdline"))
		cfg->extra_cmdline = v;
	else if (!strcmp(a, "--state-dir"))
		cfg->state_dir = v;
	else if (!strcmp(a, "--connect"))
		cfg->connect_prog = v;
	else if (!strcmp(a, "--conns-log"))
		cfg->conns_log = v;
	else if (!strcmp(a, "--log")) {
		cfg->log_fd = open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (cfg->log_fd < 0)
			die_errno("cannot open '%s'", v);
	} else if (!strcmp(a, "--mount") || !strcmp(a, "--rw-mount")) {
		char *eq = strchr(v, '=');

		if (!eq || cfg->nr_mounts >= ARRAY_SIZE(o->mounts))
			die("bad --mount '%s'", v);
		o->mounts[cfg->nr_mounts].tag = xstrndup(v, (size_t)(eq - v));
		o->mounts[cfg->nr_mounts].host_path = eq + 1;
		o->mounts[cfg->nr_mounts].writable = !strcmp(a, "--rw-mount");
		cfg->nr_mounts++;
	} else
		return 0;
	return 1;
}

/* An option whose value is a number: 1 if a is one and v in its range. */
static int set_number(struct opts *o, const char *a, const char *v)
{
	struct vm_config *cfg = &o->cfg;
	long val;

	if (!strcmp(a, "--cpus") && parse_long(v, 1, 1024, &val) == 0)
		cfg->cpus = (unsigned)val;
	else if (!strcmp(a, "--args-only") && parse_long(v, 0, 1, &val) == 0)
		o->args_only = val;
	else if (!strcmp(a, "--memory") && parse_long(v, 64, 65536, &val) == 0)
		cfg->memory_mb = (unsigned)val;
	else if (!strcmp(a, "--disk-mb") && parse_long(v, 16, 1 << 20, &val) == 0)
		cfg->disk_bytes = (unsigned long long)val << 20;
	else if (!strcmp(a, "--start-only") && parse_long(v, 0, 1, &val) == 0)
		o->start_only = val;
	else if (!strcmp(a, "--snapshot") && parse_long(v, 0, 1, &val) == 0)
		o->snapshot = (int)val;
	else if (!strcmp(a, "--grace-ms") && parse_long(v, 0, 600000, &val) == 0)
		o->grace = val;
	else
		return 0;
	return 1;
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	o->cfg.mode = "task";
	o->cfg.state_dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	o->cfg.memory_mb = 1024;
	o->cfg.disk_bytes = 1ULL << 30;
	o->cfg.mounts = o->mounts;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--")) {
			o->cmd = argv + i + 1;
			break;
		}
		if (!v)
			die("option '%s' needs a value", a);
		i++;
		if (!set_path(o, a, v) && !set_number(o, a, v))
			die("bad option '%s %s'", a, v);
	}
}

static void free_mounts(struct opts *o)
{
	for (size_t i = 0; i < o->cfg.nr_mounts; i++)
		free((char *)o->mounts[i].tag);
}

/* --args-only: QEMU's argv for a cold boot. */
static int print_args(struct opts *o)
{
	struct strvec a = STRVEC_INIT;

	vm_cold_args(&a, &o->cfg, (int)o->args_only);
	for (size_t i = 0; i < a.nr; i++)
		printf("%s\n", a.v[i]);
	strvec_clear(&a);
	free_mounts(o);
	return 0;
}

/* Run CMD while the VM is up: its status. */
static int run_cmd(char **cmd)
{
	struct spawn sp = SPAWN_INIT;
	int status;

	strvec_pushv(&sp.args, (const char *const *)cmd);
	status = spawn_run(&sp);
	spawn_clear(&sp);
	if (status < 0)
		die_err(status, "cannot run '%s'", cmd[0]);
	return status;
}

int main(int argc, char **argv)
{
	struct opts o = {.cfg = VM_CONFIG_INIT, .args_only = -1};
	struct vm vm = VM_INIT;
	pid_t server = -1;
	int stop = -1;
	long t0;
	int r, status = 0;

	tool_init(argc, argv);
	parse_args(&o, argc, argv);
	if (o.args_only >= 0)
		return print_args(&o);
	t0 = clock_ms();
	if ((r = o.snapshot ? snapshot_boot(&o.cfg, &vm) : vm_start(&o.cfg, &vm)) < 0)
		die_err(r, "cannot start the VM");
	fprintf(stderr, "test-vm: %s\n", vm.kvm ? "kvm" : "tcg");
	if (o.snapshot)
		fprintf(stderr, "test-vm: %s\n", vm.restored ? "restored" : "cold");
	if (vm.restored)
		fprintf(stderr, "test-vm: from the stamp: qemu %s, ram %s\n",
		        vm.stamped & 1 ? "yes" : "no", vm.stamped & 2 ? "yes" : "no");
	if (vm.note[0])
		fprintf(stderr, "test-vm: %s\n", vm.note);
	if (o.start_only) {
		vm_stop(&vm, 0);
		return 0;
	}
	r = vm_wait_ssh(&vm, 180000);
	if (r < 0) {
		if (r == -ECHILD)
			printf("vm-exited %ld\n", clock_ms() - t0);
		fprintf(stderr, "test-vm: the VM did not get ready: %s\n", strerror(-r));
		vm_stop(&vm, 0);
		return 3;
	}
	printf("ssh-ready %ld\n", clock_ms() - t0);
	fflush(stdout);
	if (o.listen_path)
		server = serve(o.listen_path, &vm, &stop);
	if (o.cmd && o.cmd[0])
		status = run_cmd(o.cmd);
	if (server > 0)
		serve_end(server, stop);
	r = vm_stop(&vm, (int)o.grace);
	printf("vm: %s\n", r == 1 ? "powered off" : "killed");
	free_mounts(&o);
	if (o.cfg.log_fd >= 0)
		close(o.cfg.log_fd);
	return status;
}
