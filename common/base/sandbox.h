/*
 * Locking a process down once it holds everything it needs (OpenSSH's
 * ssh-sandbox, signify's pledge).
 *
 * The mechanism is policy-free: the caller opens its files, sockets and
 * certificates first and then says which extra powers to drop.  After
 * sandbox_lockdown() with SANDBOX_SECCOMP, in this thread and every thread
 * or child made later:
 *   - opening or creating files fails: open, openat, openat2, creat,
 *     open_by_handle_at, mknod (EACCES for the open family, EPERM else);
 *   - changing the file system fails with EPERM: mkdir, rmdir, unlink,
 *     rename, link, symlink, chmod, chown, truncate, mount (and their *at);
 *   - exec fails with EPERM: execve, execveat;
 *   - io_uring, ptrace, process_vm_* and bpf fail with EPERM (they would
 *     get round the rest);
 *   - with SANDBOX_NO_NEW_SOCKETS also socket() and socketpair();
 *   - with SANDBOX_NO_PROCESSES also fork, vfork and clone (EPERM) and
 *     clone3 (ENOSYS): no new process or thread;
 *   - with SANDBOX_KEEP_FILES the first two groups stay allowed (opening,
 *     creating, renaming and removing files), for a process that must write
 *     files but run nothing: exec, mount, ptrace and the rest still fail.
 * Everything else (read, write, poll, connect on sockets, signals, memory)
 * goes on.  The filter cannot be lifted; a second lockdown adds to the first.
 *
 * In a sanitizer build (make SANITIZE=1) the leak check runs at the
 * lockdown instead of at exit, since LeakSanitizer needs /proc and a
 * thread of its own.
 *
 * SANDBOX_NONE is the null backend for --no-sandbox: it changes nothing.
 */
#ifndef AIBOX_SANDBOX_H
#define AIBOX_SANDBOX_H

enum sandbox_backend {
	SANDBOX_SECCOMP,
	SANDBOX_NONE,
};

#define SANDBOX_NO_NEW_SOCKETS 0x1
#define SANDBOX_NO_PROCESSES   0x2
#define SANDBOX_KEEP_FILES     0x4

/* 0, or a negative errno when the filter could not be built or loaded. */
int sandbox_lockdown(enum sandbox_backend backend, unsigned flags);

#endif
