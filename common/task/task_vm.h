/*
 * The VM phase of a task: the helpers (common/task/helpers.h), the VM, the
 * lockdown, the session and the stops, up to the results in the task
 * folder (docs/task-host.md, "How a task runs").  The same on one host and
 * on a Slurm node (docs/slurm.md); aibox-task's main, or its node part,
 * calls it once.
 */
#ifndef AIBOX_TASK_VM_H
#define AIBOX_TASK_VM_H

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include "base/buf.h"
#include "proxy/proxy_report.h"

struct config;
struct shares;
struct spend;
struct ssh_task_keys;

/* What the VM phase leaves for the checks and the summary (from a Slurm node: slurm.status). */
struct vm_outcome {
	int session_ret; /* task_session_run()'s, or the boot's failure */
	struct buf why;  /* why the task did not finish, or empty */
	int have_report; /* the proxy's record, in report; else why not in report_why */
	struct proxy_report report;
	struct buf report_why;
	double boot_s, session_s; /* the two phases' times, for aibox.log's derived lines */
	double ssh_s; /* the SSH set-up, the banner to the command's start (0: not reached) */
};

#define VM_OUTCOME_INIT                                                                            \
	{                                                                                          \
		0, BUF_INIT, 0, PROXY_REPORT_INIT, BUF_INIT, 0, 0, 0                               \
	}

struct task_vm {
	const char *id;         /* the task's id, for aibox[id] lines */
	const char *dir;        /* the task folder: shared as aibox.task, its files made here */
	const char *image_dir;  /* the image (image.h) */
	const char *state_dir;  /* where QEMU's state disk is made (vm.h) */
	const char *proxy_sock; /* the proxy's socket, in dir */
	const struct config *cfg;
	const struct shares *shares;
	const struct ssh_task_keys *keys;
	const int *result_fds; /* RESULT_NFILES of them, open (task_session.h) */
	int aibox_log_fd;      /* aibox.log, or -1 */
	long long err_base;    /* stderr's size its cap counts from (task_session.h) */
	int64_t *tphase;       /* aibox.log's phase clock (task_log.h) */
	long timeout_ms;       /* the task's timeout (the session's limit is later: task_vm.c) */
	long idle_ms;          /* the session's silence limit; 0: 300 s */
	int snapshot;          /* start from the image's snapshot (vm.h) */
	int no_sandbox;        /* no lockdown (the caller says so) */
	/* For the helpers: the key (NULL: not forwarded) and the tokens, wiped once passed on. */
	struct buf *api_key;
	const struct spend *spend;
	struct buf *tokens;
	/* The config's secrets' values and placeholders (struct host_env's), for the proxy. */
	const struct strvec *secret_values, *placeholders;
	/* The subscription's token (NULL: none; wiped once passed on) and its placeholder. */
	struct buf *oauth;
	const char *oauth_placeholder;
	/*
	 * The caller's stop: *stop set by its signal handler (SIGINT, SIGTERM,
	 * SIGHUP), which kills *qemu_pid (set while any QEMU of the start or the
	 * session runs, a snapshot's saving and restoring ones too: vm.h; else -1).
	 */
	const volatile sig_atomic_t *stop;
	volatile pid_t *qemu_pid;
	/* A line for the user (why the VM booted cold, no KVM): the caller prints it. */
	void (*say)(void *ctx, const char *line);
	void *say_ctx;
	/*
	 * NULL, or called (with say_ctx) once a session ended well, before the
	 * VM and the helpers stop: the result files are whole, and work on them
	 * may start beside the stops.  Nothing may be opened or started in it.
	 */
	void (*results_in)(void *ctx);
};

/*
 * Run the VM phase: broker.log, proxy.log, usage.json (with the key) and
 * console.log made in dir, the helpers started, the VM started, aibox-task
 * locked down (sandbox.h; nothing is opened or started after it), the
 * session with secrets on its stdin (after a restore they went with the go
 * message instead, and the stdin is empty; wiped at the end), the VM, the proxy (its
 * record read) and the broker stopped; aibox.log gets the phases proxy,
 * boot, session and stop.  0 with o filled, the task's own failures
 * included (o->why); a negative errno with err set when the phase could not
 * run (a file, a helper, QEMU or the lockdown), what had started stopped.
 */
int task_vm_run(const struct task_vm *v, struct buf *secrets, struct vm_outcome *o,
                struct buf *err);

/*
 * Whether the task finished: the session ended well and no signal stopped
 * it, o->why is empty, a result.json came (r, NULL when none) with no step
 * failed, Claude Code exited 0 and ended as completed, its changes (when it
 * made any) were checked (end_commit, NULL when not), and no spend cap in
 * the proxy's record ended it.  Pure.
 */
struct task_result;
int task_vm_finished(const struct vm_outcome *o, int stopped, const struct task_result *r,
                     const char *end_commit);

/*
 * The time cfg's check: (its timeout:) may take beyond the default's
 * GUEST_CHECK_TIMEOUT_MS, 0 without one: added to the VM's session limit and
 * to a Slurm job's time, which leave room for the default's already.
 */
int64_t task_check_extra_ms(const struct config *cfg);

#endif
