/* The VM launcher (vm.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/log_cap.h"
#include "base/paths.h"
#include "base/shell_quote.h"
#include "base/spawn.h"
#include "vm/vm.h"
#include "base/banned.h"

#define DEFAULT_MEMORY_MB  2048
#define DEFAULT_CPUS       2
#define DEFAULT_DISK_BYTES (16ULL << 30)

/* What QEMU's environment gets of ours (vm.h). */
static const char *const qemu_env[] = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"};

/*
 * Under TCG, the most QEMU's translated code may take, in MiB: QEMU 7.2's
 * default buffer is 1 GiB, touched as it fills, and a task's Claude Code
 * filled about 350 MiB of it in every VM.  A full buffer is flushed and its
 * code translated again: at 256 a task's memory fell by 80 MiB for no CPU
 * measured; at 64 by 290 MiB for a third more CPU (docs/performance.md,
 * "Many tasks at once").
 */
#define TCG_TB_MIB 256

/* The fd numbers QEMU gets (spawn_give_fd). */
#define FD_STATE 3
#define FD_SSH   4

int vm_kvm_usable(void)
{
	struct buf cpuinfo = BUF_INIT;
	int ok = 0, fd;

	if (buf_read_file(&cpuinfo, "/proc/cpuinfo", 16 << 20) < 0)
		goto out;
	/* Flags are space separated: look for whole words. */
	if (!strstr(cpuinfo.buf, " vmx") && !strstr(cpuinfo.buf, " svm"))
		goto out;
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		goto out;
	close(fd);
	ok = 1;
out:
	buf_release(&cpuinfo);
	return ok;
}

void vm_add_opt_value(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == ',')
			buf_addch(b, ',');
		buf_addch(b, *s);
	}
}

int vm_make_state_disk(const char *dir, unsigned long long size)
{
	struct buf path = BUF_INIT;
	int fd = open(dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		buf_addf(&path, "%s/.aibox-state-XXXXXX", dir);
		fd = mkostemp(path.buf, O_CLOEXEC);
		if (fd >= 0)
			unlink(path.buf);
	}
	buf_release(&path);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int check_image(const char *dir)
{
	static const char *const files[] = {"vmlinuz", "initramfs", "rootfs.ext4"};
	struct buf p = BUF_INIT;
	int ret = 0;

	for (size_t i = 0; i < ARRAY_SIZE(files) && !ret; i++) {
		buf_reset(&p);
		buf_addf(&p, "%s/%s", dir, files[i]);
		if (access(p.buf, R_OK) < 0)
			ret = -errno;
	}
	buf_release(&p);
	return ret;
}

unsigned vm_memory_mb(const struct vm_config *cfg)
{
	return cfg->memory_mb ? cfg->memory_mb : DEFAULT_MEMORY_MB;
}

unsigned vm_cpus(const struct vm_config *cfg)
{
	return cfg->cpus ? cfg->cpus : DEFAULT_CPUS;
}

unsigned long long vm_disk_bytes(const struct vm_config *cfg)
{
	return cfg->disk_bytes ? cfg->disk_bytes : DEFAULT_DISK_BYTES;
}

void vm_base_args(struct strvec *a, const struct vm_config *cfg, int kvm, const char *cmdline)
{
	struct buf b = BUF_INIT;

	strvec_push(a, cfg->qemu ? cfg->qemu : "qemu-system-x86_64");
	strvec_pushl(a, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-M",
	             "q35", NULL);
	/*
	 * Guest RAM is madvise(MERGEABLE) (QEMU's mem-merge, on by default): a
	 * host that runs KSM merges the VMs' identical pages; off on request
	 * (docs/image.md, "KSM").
	 */
	if (cfg->no_mem_merge)
		strvec_pushl(a, "-machine", "mem-merge=off", NULL);
	if (kvm)
		strvec_pushl(a, "-accel", "kvm", "-cpu", "host", NULL);
	else
		strvec_pushl(a, "-accel", "tcg,tb-size=" TOSTR(TCG_TB_MIB), "-cpu", "max", NULL);
	strvec_push(a, "-m");
	strvec_pushf(a, "%u", vm_memory_mb(cfg));
	strvec_push(a, "-smp");
	strvec_pushf(a, "%u", vm_cpus(cfg));

	strvec_push(a, "-kernel");
	strvec_pushf(a, "%s/vmlinuz", cfg->image_dir);
	strvec_push(a, "-initrd");
	strvec_pushf(a, "%s/initramfs", cfg->image_dir);
	strvec_push(a, "-append");
	strvec_pushf(a, "console=ttyS0 quiet panic=-1 " GUEST_CMDLINE_MODE "%s%s%s", cfg->mode,
	             cmdline ? " " : "", cmdline ? cmdline : "");
	strvec_pushl(a, "-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con", NULL);

	buf_addstr(&b, "file=");
	vm_add_opt_value(&b, cfg->image_dir);
	buf_addstr(&b, "/rootfs.ext4,format=raw,if=none,id=root,readonly=on");
	strvec_pushl(a, "-drive", b.buf, "-device",
	             "virtio-blk-pci,drive=root,serial=" GUEST_SERIAL_ROOT, NULL);
	buf_release(&b);
}

void vm_netdev_arg(const struct vm_config *cfg, struct buf *b)
{
	struct buf cmd = BUF_INIT;

	if (cfg->connect_prog) {
		shell_quote(&cmd, cfg->connect_prog);
	} else {
		struct buf prog = BUF_INIT;

		buf_addf(&prog, "%s/aibox-connect", libexec_dir());
		shell_quote(&cmd, prog.buf);
		buf_release(&prog);
	}
	buf_addf(&cmd, " --max %u", cfg->max_conns ? cfg->max_conns : VM_MAX_CONNS);
	if (cfg->conns_log) {
		buf_addstr(&cmd, " --log ");
		shell_quote(&cmd, cfg->conns_log);
	}
	buf_addch(&cmd, ' ');
	shell_quote(&cmd, cfg->proxy_socket);
	buf_addstr(b,
	           "user,id=net0,restrict=on,ipv6=off,guestfwd=tcp:" GUEST_PROXY_HOSTPORT "-cmd:");
	vm_add_opt_value(b, cmd.buf);
	buf_release(&cmd);
}

/*
 * The console worker's loop: the guest writes its serial console as fast as
 * it likes, so what comes on in goes to out, opened for appending, until out
 * holds LOG_CAP_BYTES (common/base/log_cap.h; counting what it held before:
 * a boot after a failed restore shares the cap), then one line says the rest
 * is left out; the rest is read and dropped, so that QEMU never waits on its
 * console, until the end of file (docs/task-host.md, "console.log").
 */
static __attribute__((noreturn)) void console_copy(int in, int out)
{
	static char chunk[65536];
	const uint64_t max = (uint64_t)LOG_CAP_BYTES;
	char full[96];
	struct stat st;
	uint64_t held = fstat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
	int full_len =
	    snprintf(full, sizeof(full),
	             "\naibox: the VM's console past %llu MiB is left out of console.log\n",
	             (unsigned long long)(max >> 20));
	ssize_t n;

	while ((n = read(in, chunk, sizeof(chunk))) != 0) {
		size_t k = (size_t)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (held >= max)
			continue;
		if (k > max - held)
			k = (size_t)(max - held);
		/* A full disk loses the console, not the task. */
		(void)write_all(out, chunk, k);
		held += k;
		if (held >= max)
			(void)write_all(out, full, (size_t)full_len);
	}
	_exit(0);
}

/*
 * Start the console worker on log_fd: 0 with the pipe's end for QEMU's
 * stdout and stderr in *w and the worker in vm->console_pid, or -errno.
 */
static int console_start(int log_fd, struct vm *vm, int *w)
{
	int p[2], out;
	pid_t pid;

	/* Above 2: a worker's stdout is /dev/null. */
	if ((out = fcntl(log_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0) {
		int e = -errno;

		close(out);
		return e;
	}
	pid = spawn_worker((int[]){p[0], out}, 2, SPAWN_WORKER_PDEATH);
	if (pid == 0)
		console_copy(p[0], out);
	close(p[0]);
	close(out);
	if (pid < 0) {
		close(p[1]);
		return (int)pid;
	}
	vm->console_pid = pid;
	*w = p[1];
	return 0;
}

/* Reap the console worker, which ends once QEMU has: at most 2 s for its last bytes. */
static void console_end(struct vm *vm)
{
	struct spawn w = SPAWN_INIT;

	if (vm->console_pid <= 0)
		return;
	w.pid = vm->console_pid;
	spawn_wait_within(&w, 2000);
	spawn_clear(&w);
	vm->console_pid = -1;
}

int vm_spawn(struct spawn *sp, const struct vm_config *cfg, struct vm *vm)
{
	int null_fd = -1, console_fd = -1, ret;

	if (cfg->log_fd < 0) {
		null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null_fd < 0)
			return -errno;
	} else if ((ret = console_start(cfg->log_fd, vm, &console_fd)) < 0) {
		return ret;
	}
	/* Our environment may hold secrets: QEMU and aibox-connect get only these. */
	sp->env_replace = 1;
	for (size_t i = 0; i < ARRAY_SIZE(qemu_env); i++) {
		const char *v = getenv(qemu_env[i]);

		if (v)
			strvec_pushf(&sp->env, "%s=%s", qemu_env[i], v);
	}
	sp->in = SPAWN_NULL;
	sp->out = cfg->log_fd >= 0 ? console_fd : null_fd;
	sp->err = sp->out;
	sp->new_session = 1;
	sp->pdeathsig = SIGKILL;
	ret = spawn_start(sp);
	if (null_fd >= 0)
		close(null_fd);
	/* QEMU holds the pipe now: the worker ends when it does. */
	if (console_fd >= 0)
		close(console_fd);
	if (ret < 0) {
		console_end(vm);
		return ret;
	}
	vm->pid = sp->pid;
	vm->pidfd = (int)syscall(SYS_pidfd_open, sp->pid, 0);
	/* Published before *stop is read: the handler sees the pid, or we see the stop. */
	vm->published = cfg->qemu_pid;
	if (vm->published) {
		*vm->published = sp->pid;
		if (cfg->stop && *cfg->stop)
			kill(sp->pid, SIGKILL);
	}
	return 0;
}

void vm_cold_args(struct strvec *a, const struct vm_config *cfg, int kvm)
{
	struct buf b = BUF_INIT;

	vm_base_args(a, cfg, kvm, cfg->extra_cmdline);
	strvec_pushl(a, "-drive",
	             "file=/dev/fd/" TOSTR(FD_STATE) ",format=raw,if=none,id=state,cache=unsafe",
	             "-device", "virtio-blk-pci,drive=state,serial=" GUEST_SERIAL_STATE, NULL);

	buf_addstr(&b, "local,path=");
	vm_add_opt_value(&b, cfg->share_dir);
	buf_addstr(&b, ",mount_tag=" GUEST_TAG_TASK ",security_model=none,readonly=on");
	strvec_pushl(a, "-virtfs", b.buf, NULL);
	for (size_t i = 0; i < cfg->nr_mounts; i++) {
		buf_reset(&b);
		buf_addstr(&b, "local,path=");
		vm_add_opt_value(&b, cfg->mounts[i].host_path);
		buf_addf(&b, ",mount_tag=%s,security_model=none", cfg->mounts[i].tag);
		/* aibox run: the project and its home; files made are the host user's. */
		if (!cfg->mounts[i].writable)
			buf_addstr(&b, ",readonly=on");
		strvec_pushl(a, "-virtfs", b.buf, NULL);
	}

	strvec_pushl(a, "-device", "virtio-serial-pci", "-chardev",
	             "socket,id=ssh,fd=" TOSTR(FD_SSH), "-device",
	             "virtserialport,chardev=ssh,name=" GUEST_PORT_SSH, NULL);

	if (cfg->proxy_socket) {
		buf_reset(&b);
		vm_netdev_arg(cfg, &b);
		strvec_pushl(a, "-netdev", b.buf, "-device",
		             "virtio-net-pci,netdev=net0,romfile=", NULL);
	}
	buf_release(&b);
}

/* The cold boot (vm.h). */
static int start_cold(const struct vm_config *cfg, struct vm *vm)
{
	struct spawn sp = SPAWN_INIT;
	int state_fd = -1, sv[2] = {-1, -1};
	int ret;

	if ((state_fd = vm_make_state_disk(cfg->state_dir, vm_disk_bytes(cfg))) < 0) {
		ret = state_fd;
		state_fd = -1;
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = -errno;
		goto out;
	}

	vm_cold_args(&sp.args, cfg, vm->kvm);
	spawn_give_fd(&sp, state_fd, FD_STATE);
	spawn_give_fd(&sp, sv[1], FD_SSH);
	if ((ret = vm_spawn(&sp, cfg, vm)) < 0)
		goto out;
	vm->ssh_fd = sv[0];
	sv[0] = -1;
	ret = 0;
out:
	spawn_clear(&sp);
	if (state_fd >= 0)
		close(state_fd);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return ret;
}

int vm_check_config(const struct vm_config *cfg)
{
	if (!cfg->image_dir || !cfg->share_dir || !cfg->state_dir || !cfg->mode ||
	    (strcmp(cfg->mode, GUEST_MODE_TASK) && strcmp(cfg->mode, GUEST_MODE_RUN)))
		return -EINVAL;
	for (size_t i = 0; i < cfg->nr_mounts; i++)
		if (!guest_tag_valid(cfg->mounts[i].tag) ||
		    !strcmp(cfg->mounts[i].tag, GUEST_TAG_TASK) || !cfg->mounts[i].host_path)
			return -EINVAL;
	return check_image(cfg->image_dir);
}

int vm_start(const struct vm_config *cfg, struct vm *vm)
{
	int ret;

	*vm = (struct vm)VM_INIT;
	if ((ret = vm_check_config(cfg)) < 0)
		return ret;
	vm->kvm = vm_kvm_usable();
	return start_cold(cfg, vm);
}

int vm_wait_ssh(struct vm *vm, int timeout_ms)
{
	long deadline = clock_ms() + timeout_ms;

	for (;;) {
		struct pollfd pfd[3] = {
		    {.fd = vm->ssh_fd, .events = POLLIN},
		    {.fd = vm->pidfd, .events = POLLIN},
		    {.fd = vm->stop_fd, .events = POLLIN},
		};
		char peek[256];
		long left = deadline - clock_ms();
		ssize_t n;
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		/* poll() passes over the entries whose fd is -1 */
		r = poll(pfd, 3, (int)left);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents & POLLIN)
			return -ECHILD;
		if (pfd[2].revents)
			return -ECANCELED;
		if (!(pfd[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = recv(vm->ssh_fd, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0) {
			/* QEMU closed the port: say -ECHILD if that is because it exited. */
			struct pollfd p = {.fd = vm->pidfd, .events = POLLIN};

			if (vm->pidfd >= 0 && poll(&p, 1, 2000) > 0)
				return -ECHILD;
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		if (n >= 4 && !memcmp(peek, "SSH-", 4))
			return 0;
		/* Not a banner (yet): drop bytes up to a possible "SSH-" start. */
		{
			ssize_t keep = n, i;
			char junk[256];

			for (i = 0; i < n; i++)
				if (peek[i] == 'S' &&
				    !memcmp(peek + i, "SSH-", (size_t)(n - i < 4 ? n - i : 4)))
					break;
			keep = i;
			if (keep == 0) {
				/* A partial "SSH-" at the start: wait for more. */
				struct timespec ts = {0, 10 * 1000000L};

				nanosleep(&ts, NULL);
				continue;
			}
			if (recv(vm->ssh_fd, junk, (size_t)keep, MSG_DONTWAIT) < 0 &&
			    errno != EAGAIN)
				return -errno;
		}
	}
}

void vm_wait_ssh_why(int ret, int timeout_ms, struct buf *err)
{
	if (ret == -ECHILD)
		buf_addstr(err, "QEMU exited before the VM's SSH server answered");
	else if (ret == -ETIMEDOUT)
		buf_addf(err, "the VM's SSH server did not answer within %d s", timeout_ms / 1000);
	else
		buf_addf(err, "the VM's SSH server did not answer: %s", strerror(-ret));
}

void vm_kill(const struct vm *vm)
{
	/* Not reaped yet: the pid is still QEMU's. */
	if (vm->pid > 0)
		kill(vm->pid, SIGKILL);
}

int vm_stop(struct vm *vm, int grace_ms)
{
	int status, ret = 0;

	/* Not the handler's to kill once it may be reaped (vm.h). */
	if (vm->published)
		*vm->published = -1;
	vm->published = NULL;
	if (vm->pid <= 0)
		return -ECHILD;
	if (grace_ms > 0 && vm->pidfd >= 0) {
		struct pollfd pfd = {.fd = vm->pidfd, .events = POLLIN};
		long deadline = clock_ms() + grace_ms;

		for (;;) {
			long left = deadline - clock_ms();
			int r;

			if (left <= 0)
				break;
			r = poll(&pfd, 1, (int)left);
			if (r > 0 || (r < 0 && errno != EINTR))
				break;
		}
		if (pfd.revents & POLLIN)
			ret = 1;
	} else if (grace_ms > 0) {
		/* No pidfd (old kernel): poll waitpid. */
		for (int t = 0; t < grace_ms; t += 10) {
			if (waitpid(vm->pid, &status, WNOHANG) == vm->pid) {
				vm->pid = -1;
				ret = 1;
				break;
			}
			usleep(10000);
		}
	}
	if (vm->pid > 0) {
		if (!ret)
			kill(vm->pid, SIGKILL);
		while (waitpid(vm->pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	vm->pid = -1;
	console_end(vm);
	if (vm->pidfd >= 0)
		close(vm->pidfd);
	if (vm->ssh_fd >= 0)
		close(vm->ssh_fd);
	if (vm->ctl_fd >= 0)
		close(vm->ctl_fd);
	vm->pidfd = vm->ssh_fd = vm->ctl_fd = -1;
	return ret;
}
