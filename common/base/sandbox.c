#include "base/sandbox.h"

#include <errno.h>
#include <seccomp.h>
#include <sys/prctl.h>

#include "base/err.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "base/banned.h"

static const int deny_eacces[] = {
    SCMP_SYS(open),
    SCMP_SYS(openat),
    SCMP_SYS(creat),
    SCMP_SYS(open_by_handle_at),
    SCMP_SYS(name_to_handle_at),
};

/* Changing the file system (SANDBOX_KEEP_FILES leaves these and deny_eacces). */
static const int deny_fs[] = {
    SCMP_SYS(mkdir),    SCMP_SYS(mkdirat),  SCMP_SYS(rmdir),    SCMP_SYS(unlink),
    SCMP_SYS(unlinkat), SCMP_SYS(rename),   SCMP_SYS(renameat), SCMP_SYS(renameat2),
    SCMP_SYS(link),     SCMP_SYS(linkat),   SCMP_SYS(symlink),  SCMP_SYS(symlinkat),
    SCMP_SYS(chmod),    SCMP_SYS(fchmodat), SCMP_SYS(chown),    SCMP_SYS(lchown),
    SCMP_SYS(fchownat), SCMP_SYS(truncate),
};

static const int deny_eperm[] = {
    SCMP_SYS(execve),
    SCMP_SYS(execveat),
    SCMP_SYS(mknod),
    SCMP_SYS(mknodat),
    SCMP_SYS(mount),
    SCMP_SYS(umount2),
    SCMP_SYS(pivot_root),
    SCMP_SYS(chroot),
    SCMP_SYS(io_uring_setup),
    SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register),
    SCMP_SYS(ptrace),
    SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev),
    SCMP_SYS(bpf),
    SCMP_SYS(setns),
    SCMP_SYS(unshare),
    SCMP_SYS(memfd_create),
    SCMP_SYS(fanotify_init),
    SCMP_SYS(open_tree),
    SCMP_SYS(move_mount),
    SCMP_SYS(fsopen),
    SCMP_SYS(fsmount),
    SCMP_SYS(userfaultfd),
};

static const int deny_sockets[] = {
    SCMP_SYS(socket),
    SCMP_SYS(socketpair),
};

static const int deny_processes[] = {
    SCMP_SYS(fork),
    SCMP_SYS(vfork),
    SCMP_SYS(clone),
};

static int add_rules(scmp_filter_ctx ctx, const int *sys, size_t n, int err)
{
	for (size_t i = 0; i < n; i++) {
		int ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), sys[i], 0);

		if (ret < 0)
			return ret;
	}
	return 0;
}

int sandbox_lockdown(enum sandbox_backend backend, unsigned flags)
{
	scmp_filter_ctx ctx;
	int ret;

	if (backend == SANDBOX_NONE)
		return 0;
#if defined(__SANITIZE_ADDRESS__)
	/*
	 * LeakSanitizer reads /proc at exit, which the filter forbids: check for
	 * leaks now, which also turns off the check at exit (sanitizer builds only).
	 */
	__lsan_do_leak_check();
#endif

	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	ret = add_rules(ctx, deny_eperm, ARRAY_SIZE(deny_eperm), EPERM);
	if (!ret && !(flags & SANDBOX_KEEP_FILES)) {
		/* openat2 has no glibc fallback to worry about: ENOSYS-style refusal. */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat2), 0);
		if (!ret)
			ret = add_rules(ctx, deny_eacces, ARRAY_SIZE(deny_eacces), EACCES);
		if (!ret)
			ret = add_rules(ctx, deny_fs, ARRAY_SIZE(deny_fs), EPERM);
	}
	if (!ret && (flags & SANDBOX_NO_NEW_SOCKETS))
		ret = add_rules(ctx, deny_sockets, ARRAY_SIZE(deny_sockets), EPERM);
	if (!ret && (flags & SANDBOX_NO_PROCESSES)) {
		ret = add_rules(ctx, deny_processes, ARRAY_SIZE(deny_processes), EPERM);
		/* glibc falls back from clone3 to clone on ENOSYS, and clone fails. */
		if (!ret)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	}
	/* Apply to every thread, and refuse to load half a filter. */
	if (!ret)
		ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!ret)
		ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (!ret)
		ret = seccomp_load(ctx);
	seccomp_release(ctx);
	return ret < 0 ? ret : 0;
}
