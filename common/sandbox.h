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
 *   - with SANDBOX_NO_NEW_SOCKETS also socket() and socketpair().
 * Everything else (read, write, poll, connect on sockets, fork, signals,
 * memory) goes on.  The filter cannot be lifted.
 *
 * In a sanitizer build (make SANITIZE=1) the leak check runs at the
 * lockdown instead of at exit, since LeakSanitizer needs /proc.
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

/* 0, or a negative errno when the filter could not be built or loaded. */
int sandbox_lockdown(enum sandbox_backend backend, unsigned flags);

#endif
