/*
 * aibox-init: PID 1 in the guest, and the command its SSH sessions run.
 *
 * As PID 1 (exec'd by the initramfs after it mounted the root): the mounts,
 * the state disk, the network and the SSH server on the private channel
 * (image/init/base.h, docs/image.md); it writes "aibox-init: ready" to the
 * console when the host can talk SSH, reaps orphans, and powers the VM off
 * when the session is over (task mode) or on any failure.
 *
 * As `aibox-init session` (the forced command of the per-task key), or as
 * `aibox-init -c '<the forced command>'` (root's login shell, which sshd
 * runs the forced command with: base.h, root_shell_set(); any other command
 * or login goes to bash, root's shell before): runs
 * the command the host asked for in SSH_ORIGINAL_COMMAND; in task mode the
 * only command is `task` (image/init/task.h), in run mode `run`
 * (image/init/run.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "base/err.h"
#include "run.h"
#include "task.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox-init              (as PID 1 in the aibox VM)\n"
    "       aibox-init session      (as the SSH forced command)\n"
    "       aibox-init -c '" GUEST_FORCED_COMMAND "'\n"
    "                               (the same, as root's shell; any other -c\n"
    "                               or login runs bash)\n";

static void console(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void console(const char *fmt, ...)
{
	va_list ap;
	long ms = uptime_ms();

	fprintf(stderr, "[%5ld.%03ld] aibox-init: ", ms / 1000, ms % 1000);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

__attribute__((noreturn)) static void power_off(void)
{
	/* Nothing on the state disk outlives the VM: no need to be gentle. */
	kill(-1, SIGKILL);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/*
 * PID 1: set the guest up, then serve SSH in a child and reap everything.
 * resumed: PID 1 of a restored snapshot, re-executed after its go message.
 */
static int pid1_main(int resumed)
{
	char mode[8], port[64];
	struct guest_settings settings;
	sigset_t all;
	pid_t relay;
	int r;

	/* Default actions of signals do not apply to PID 1; block them anyway. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	setsid();
	umask(022);
	if (setenv("PATH", GUEST_PATH, 1) < 0)
		power_off();

	if (!resumed && (mount_early() < 0 || root_shell_set() < 0))
		goto fail;
	console(resumed ? "resumed" : "started");
	if ((r = guest_mode(mode, sizeof(mode))) < 0) {
		error("no usable " GUEST_CMDLINE_MODE " on the kernel command line (%s)",
		      strerror(-r));
		goto fail;
	}
	if (resumed && snap_load_map() < 0)
		goto fail;
	if (!resumed && snap_mode()) {
		long long bytes, more;
		long t = uptime_ms();

		if (snap_warm(&bytes, &more) == 0)
			console(
			    "claude read (%lld bytes) and run once, what a task starts before it "
			    "read (%lld bytes), in %ld ms",
			    bytes, more, uptime_ms() - t);
		console("waiting for a task");
		if (snap_wait_go() < 0)
			goto fail;
		/*
		 * Every restored VM would share PID 1's address space layout and
		 * stack canary: a new exec draws them from the reseeded kernel.
		 */
		execl(GUEST_INIT_PATH, "aibox-init", "resumed", (char *)NULL);
		error("cannot re-execute aibox-init: %s", strerror(errno));
		goto fail;
	}
	if (mount_task_share() < 0 || settings_read(&settings) < 0 ||
	    state_disk_setup(&settings) < 0 ||
	    (!strcmp(mode, GUEST_MODE_RUN) && run_setup(&settings) < 0) ||
	    mount_extra(&settings) < 0 || net_setup() < 0 || ssh_prepare() < 0)
		goto fail;
	settings_clear(&settings);
	if (!strcmp(mode, GUEST_MODE_TASK)) {
		struct guest_task_opts o;

		/* The checkout overlaps the host's SSH set-up (docs/init-task.md). */
		guest_task_opts_fill(&o);
		task_early_start(&o);
	}
	if ((r = find_port(GUEST_PORT_SSH, port, sizeof(port))) < 0) {
		error("no virtio-serial port named %s", GUEST_PORT_SSH);
		goto fail;
	}

	relay = fork();
	if (relay < 0)
		goto fail;
	if (relay == 0) {
		sigprocmask(SIG_UNBLOCK, &all, NULL);
		/* aibox run ends like a task: when its session is over. */
		_exit(ssh_relay_loop(port, !strcmp(mode, GUEST_MODE_TASK) ||
		                               !strcmp(mode, GUEST_MODE_RUN)) < 0
		          ? 1
		          : 0);
	}
	console("ready (mode %s, ssh on %s)", mode, port);

	for (;;) {
		int status;
		pid_t pid = wait(&status);

		if (pid == relay) {
			console("session over, powering off");
			power_off();
		}
		if (pid < 0 && errno == ECHILD)
			break;
	}
fail:
	console("cannot set up the VM, powering off");
	power_off();
}

/* What root's login shell was: bash, with sshd's arguments (argv[0] "-" for a login). */
__attribute__((noreturn)) static void shell_exec(char **argv)
{
	argv[0] = argv[0][0] == '-' ? "-" GUEST_ROOT_SHELL_NAME : GUEST_ROOT_SHELL_NAME;
	execv(GUEST_ROOT_SHELL, argv);
	die("cannot run %s: %s", GUEST_ROOT_SHELL, strerror(errno));
}

static int session_main(void)
{
	const char *cmd = getenv("SSH_ORIGINAL_COMMAND");
	char mode[8];
	int fd;

	/* Tells PID 1 that this connection carried the task: when it ends, power off. */
	fd = open(GUEST_SESSION_FLAG, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	if (guest_mode(mode, sizeof(mode)) < 0)
		die("no mode on the kernel command line");
	if (!cmd)
		cmd = "";
	if (!strcmp(mode, GUEST_MODE_TASK) && !strcmp(cmd, GUEST_CMD_TASK))
		return task_session();
	if (!strcmp(mode, GUEST_MODE_RUN) && !strcmp(cmd, GUEST_CMD_RUN))
		return run_session();
	die("unknown session command '%.64s' in %s mode", cmd, mode);
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (getpid() == 1)
		return pid1_main(argc == 2 && !strcmp(argv[1], "resumed"));
	if (argc == 2 && !strcmp(argv[1], GUEST_INIT_SESSION))
		return session_main();
	/*
	 * As root's login shell (root_shell_set()): sshd runs the forced command
	 * as `aibox-init -c COMMAND`, which runs here as `aibox-init session`
	 * would, with no shell before it.  Any other login (a key without a forced
	 * command, which only the tests' VMs take) gets the shell root had.
	 */
	if (argc == 3 && !strcmp(argv[1], GUEST_SHELL_COMMAND_FLAG) &&
	    !strcmp(argv[2], GUEST_FORCED_COMMAND))
		return session_main();
	if ((argc > 0 && argv[0][0] == '-') ||
	    (argc >= 2 && !strcmp(argv[1], GUEST_SHELL_COMMAND_FLAG)))
		shell_exec(argv);
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	usage_die(usage_text);
}
