/*
 * The VM launcher: boots an aibox image in QEMU for `aibox task` and
 * `aibox run`, and hands back a stream to the guest's SSH server.
 *
 *	struct vm_config cfg = VM_CONFIG_INIT;
 *	struct vm vm = VM_INIT;
 *	cfg.image_dir = "~/.cache/aibox/images/default";
 *	cfg.share_dir = task_folder;
 *	cfg.mode = "task";
 *	cfg.state_dir = task_folder_parent;   (the disk file is never visible)
 *	cfg.proxy_socket = "/.../proxy.sock";
 *	if ((err = vm_start(&cfg, &vm)) < 0) ...
 *	if ((err = vm_wait_ssh(&vm, 120000)) < 0) ...   (banner arrived)
 *	... libssh2 on vm.ssh_fd ...
 *	vm_stop(&vm, 5000);
 *
 * What the guest gets (docs/image.md has the guest's side):
 *   - the image's kernel and initramfs, with "aibox.mode=<mode>" on the
 *     kernel command line;
 *   - the image's rootfs.ext4 as a read-only virtio disk (serial aibox-root);
 *   - a new sparse state disk of disk_bytes (serial aibox-state), made in
 *     state_dir with O_TMPFILE (or created and unlinked at once where the
 *     file system has no O_TMPFILE) and handed to QEMU as /dev/fd/N: it
 *     never has a name, and it is gone when QEMU is;
 *   - share_dir over 9p, tag aibox.task, read-only (QEMU enforces it), and
 *     each of mounts[] the same way under its own tag (read-write for a
 *     mount marked writable: aibox run's project folder and home);
 *   - a virtio-serial port named aibox.ssh whose host end is ssh_fd, one end
 *     of a socketpair (QEMU holds the other as `-chardev socket,fd=`);
 *   - user networking with restrict=on and one guestfwd, 10.0.2.100:3128,
 *     whose `cmd:` runs aibox-connect on proxy_socket for each connection
 *     (no proxy_socket: no network device at all), at most max_conns at
 *     once: one more is closed at once, with a line in conns_log
 *     (aibox-connect --max, --log);
 *   - the console (serial) on log_fd, which also gets QEMU's own stderr.
 *
 * ssh_fd carries one SSH connection at a time.  Another may follow once the
 * previous one ended with an SSH disconnect message (the guest's sshd then
 * exits and a new one sends a new banner: call vm_wait_ssh() again before
 * the new client speaks).  Closing ssh_fd ends the channel for good: the
 * guest sees the host gone, and in task mode powers off.
 *
 * Acceleration: KVM only where /proc/cpuinfo shows vmx or svm and /dev/kvm
 * opens; else TCG with -cpu max (Claude Code's binary needs newer x86
 * instructions than qemu64 has).  vm.kvm says which, so the caller can say
 * so once.  Machine q35 (docs/performance.md, "Boot", has the measurements).
 *
 * QEMU runs in its own session and gets SIGKILL when the thread that called
 * vm_start() ends (PR_SET_PDEATHSIG), so it never outlives its parent.
 *
 * QEMU's environment, which every aibox-connect inherits, is not ours: only
 * PATH, HOME, TMPDIR, LANG and LC_ALL pass (those set), so no secret of
 * ours reaches it whatever our environment holds.
 */
#ifndef AIBOX_VM_H
#define AIBOX_VM_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct vm_mount {
	const char *host_path; /* a folder, shared read-only */
	const char *tag;       /* 9p tag: 1-31 of [A-Za-z0-9._-], not aibox.task */
	/*
	 * aibox run only: share read-write instead (security_model=none, so
	 * what the guest creates belongs to the user QEMU runs as).
	 */
	int writable;
};

struct vm_config {
	const char *image_dir;         /* vmlinuz, initramfs, rootfs.ext4 */
	const char *share_dir;         /* the task folder (tag aibox.task) */
	const char *mode;              /* "task" or "run" */
	unsigned memory_mb;            /* 0: 2048 */
	unsigned cpus;                 /* 0: 2 */
	unsigned long long disk_bytes; /* 0: 16 GiB */
	const char *state_dir;         /* where the state disk file is made */
	const char *proxy_socket;      /* the proxy's unix socket, or NULL */
	unsigned max_conns;            /* guest connections at once; 0: VM_MAX_CONNS */
	const char *conns_log;         /* proxy.log: a refused connection's line; NULL: none */
	const struct vm_mount *mounts;
	size_t nr_mounts;
	int log_fd;                /* console and QEMU's stderr, at most LOG_CAP_BYTES
	                              (common/base/log_cap.h) of it (vm_spawn()); -1:
	                              /dev/null */
	const char *qemu;          /* NULL: qemu-system-x86_64 from PATH */
	const char *connect_prog;  /* NULL: aibox-connect in libexec_dir() */
	const char *extra_cmdline; /* appended to the kernel command line, or NULL */
	int no_mem_merge;          /* 1: guest RAM not offered to KSM (mem-merge=off) */
	/*
	 * Task mode: the env values (GUEST_SECRETS_STDIN's text), which a
	 * restore sends after its go message to an init of this aibox's
	 * (snapshot.h; vm->secrets_sent); a cold boot or an image of another
	 * aibox's is sent nothing, they then go over the session.  NULL or
	 * empty: none.  Not copied: the caller wipes them.
	 */
	const char *secrets;
	size_t secrets_len;
	/*
	 * A stop the caller's signal handler may ask for, and where it finds
	 * the QEMU to kill (both NULL: none).  Every QEMU started for this VM
	 * (a snapshot's saving and restoring VMs too) is published in
	 * *qemu_pid as soon as it runs, and put back to -1 before it is
	 * reaped (vm_stop()), so the handler never kills a pid reused since;
	 * one started after *stop was set is killed at once.  A snapshot boot
	 * that sees *stop set gives up with -EINTR instead of booting cold.
	 */
	const volatile sig_atomic_t *stop;
	volatile pid_t *qemu_pid;
};

#define VM_CONFIG_INIT                                                                             \
	{                                                                                          \
		.log_fd = -1                                                                       \
	}

/* The default cap on the guest's connections at once (docs/task-host.md). */
#define VM_MAX_CONNS 64

struct vm {
	pid_t pid;        /* QEMU */
	int pidfd;        /* pidfd of QEMU (poll: readable when it exits), or -1 */
	int ssh_fd;       /* stream socket to the guest's SSH server */
	int kvm;          /* 1 with KVM, 0 under TCG */
	int restored;     /* 1 when started from a snapshot */
	int secrets_sent; /* 1 when the go message carried vm_config's secrets */
	/*
	 * After a restore: what the snapshot's stamp spared (snapshot.c, "The
	 * stamp"): bit 0, running QEMU for its version; bit 1, reading the RAM
	 * file for its digest.
	 */
	int stamped;
	int ctl_fd;        /* a snapshot's control port (snapshot.h), or -1 */
	int stop_fd;       /* the caller's: readable when the wait must end (-ECANCELED), or -1 */
	pid_t console_pid; /* the worker that copies QEMU's output to log_fd, or -1 */
	volatile pid_t *published; /* vm_config's qemu_pid, or NULL */
	/*
	 * After snapshot_boot() (snapshot.h): one line for the user, or "": why
	 * the VM booted cold ("booting cold: the snapshot is truncated"), or that
	 * a snapshot was saved.  vm_start() leaves it "".
	 */
	char note[512];
};

#define VM_INIT                                                                                    \
	{                                                                                          \
		.pid = -1, .pidfd = -1, .ssh_fd = -1, .ctl_fd = -1, .stop_fd = -1,                 \
		.console_pid = -1                                                                  \
	}

/*
 * QEMU's argv for a cold boot of cfg (vm_start()'s without a snapshot),
 * appended to a: the program, the machine (KVM or TCG as kvm says), the
 * kernel and its command line, the root and state disks, the task folder and
 * each of cfg->mounts over 9p, the SSH port and the network.  The state disk
 * and the SSH port are the fds 3 and 4 QEMU is given.  Pure: it opens,
 * checks and starts nothing (vm_start() checks cfg first).
 */
struct strvec;
void vm_cold_args(struct strvec *a, const struct vm_config *cfg, int kvm);

/* 1 when KVM can be used here (vmx/svm in /proc/cpuinfo and /dev/kvm opens). */
int vm_kvm_usable(void);

/*
 * 0 when cfg can start a VM: its mode is "task" or "run", its folders are
 * given, its mounts' tags are valid, and its image has every file; else
 * -EINVAL for a bad config (mode, tag) or -ENOENT when the image lacks a file.
 */
int vm_check_config(const struct vm_config *cfg);

/*
 * Boot QEMU cold (a snapshot is the caller's choice: snapshot_boot() in
 * snapshot.h).  0 with *vm filled, or a negative errno: vm_check_config()'s,
 * the errno of a failed open, socketpair or spawn.  On failure nothing is
 * left running.
 */
int vm_start(const struct vm_config *cfg, struct vm *vm);

/*
 * Wait until the guest's SSH server has sent its banner ("SSH-"), without
 * consuming it (MSG_PEEK): the host must not send before it, or a leftover
 * server could eat the client's first bytes.  Bytes before the banner (left
 * from an earlier session) are dropped.  0, -ETIMEDOUT, -ECHILD when QEMU
 * exited, or -errno.
 */
int vm_wait_ssh(struct vm *vm, int timeout_ms);

/*
 * Why vm_wait_ssh() failed with ret, in words for a user, appended to err:
 * QEMU exited, no banner within timeout_ms, or the errno's text.
 */
struct buf;
void vm_wait_ssh_why(int ret, int timeout_ms, struct buf *err);

/*
 * Wait up to grace_ms for QEMU to exit on its own (the guest powers off),
 * then kill it (SIGKILL) and reap it; close ssh_fd, ctl_fd and pidfd.  1 when QEMU
 * exited on its own, 0 when it had to be killed, or a negative errno.
 */
int vm_stop(struct vm *vm, int grace_ms);

/*
 * Kill QEMU (SIGKILL) and return: its exit, the unmapping of the guest's
 * memory, goes on while the caller does something else, and vm_stop(vm, 0)
 * reaps it later.  Nothing when it is not running.
 */
void vm_kill(const struct vm *vm);

/*
 * The launcher's parts common/vm/snapshot.c shares, so both boot one machine:
 * the memory, CPU count and disk size with their defaults; QEMU's program,
 * machine, accelerator, sizes, kernel, initramfs, command line (cmdline is
 * appended after aibox.mode=), console and root disk; the user network's
 * -netdev value for cfg->proxy_socket; the state disk file (vm_start()'s);
 * the spawn of QEMU with its environment, console (capped: LOG_CAP_BYTES)
 * and death signal (sets vm->pid, vm->pidfd and vm->console_pid, which
 * vm_stop() reaps); QEMU's option escaping (',' doubled) and /bin/sh
 * single quoting.
 */
struct strvec;
struct spawn;
unsigned vm_memory_mb(const struct vm_config *cfg);
unsigned vm_cpus(const struct vm_config *cfg);
unsigned long long vm_disk_bytes(const struct vm_config *cfg);
void vm_base_args(struct strvec *a, const struct vm_config *cfg, int kvm, const char *cmdline);
void vm_netdev_arg(const struct vm_config *cfg, struct buf *b);
int vm_make_state_disk(const char *dir, unsigned long long size);
int vm_spawn(struct spawn *sp, const struct vm_config *cfg, struct vm *vm);
void vm_add_opt_value(struct buf *b, const char *s);

#endif
