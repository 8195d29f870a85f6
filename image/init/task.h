/*
 * aibox-init's task mode: the guest side of one task (docs/internals.md).
 *
 * The host runs the SSH command `task`; the session code calls task_session()
 * with stdin, stdout and stderr being the SSH channel:
 *   stdin   the secrets, {"env": {"NAME": "value", ...}}, then EOF
 *   stdout  the results as a ustar stream, result.json last
 *   stderr  progress lines, one per event
 * It runs the steps clone, claude, commit and bundle (each in a cgroup of its
 * own, killed when the step ends) and returns the session's exit code: 0 once
 * result.json is sent, whatever the task's own outcome, 2 when the results
 * could not be sent.
 */
#ifndef AIBOX_INIT_TASK_H
#define AIBOX_INIT_TASK_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "step.h"

/* The run of a task; task_session() uses the guest's fixed values. */
struct guest_task_opts {
	const char *share;     /* the read-only task folder: /run/aibox/task */
	const char *state;     /* the state disk; results go to <state>/aibox-results */
	const char *home;      /* the user's home: /home/aibox */
	const char *claude;    /* Claude Code; NULL: looked up in the guest's PATH */
	const char *gitconfig; /* the system git config the git_remotes rewrite is added to
	                          (/etc/gitconfig); NULL: not written */
	const char *ca_bundle; /* the system CA bundle the task CA is added to
	                          (GUEST_CA_BUNDLE); NULL: the task CA is not used */
	enum step_backend backend;
	int drop; /* run git and Claude Code as uid/gid (the user aibox) */
	uid_t uid;
	gid_t gid;
	int64_t git_limit_ms; /* the git steps before, and those after: 10 minutes each */
	const char *early;    /* the early clone's folder, root's only: /run/aibox/early-clone;
	                         NULL: none */
	/*
	 * Set in the task PID 1's child started before the session
	 * (task_early_start()): it takes no early clone, and reads the
	 * session's secrets only after Claude Code (they must be none).
	 */
	int early_task;
	/*
	 * The secrets a restored VM's go message carried (GUEST_GO_SECRETS,
	 * image/init/base.h): taken in place of the session's, and with them
	 * the task is early whatever settings.json names.  NULL: none.
	 */
	const char *go_secrets;
	int in, out, err;
};

/* Fill o with the guest's values (the user aibox looked up in /etc/passwd). */
void guest_task_opts_fill(struct guest_task_opts *o);

/*
 * PID 1 in task mode, before it serves SSH, when the task folder has
 * start.idx: a child reads settings.json and, when it names no secrets or
 * the go message carried them (o->go_secrets is there), runs
 * the whole task at once, its stdin, stdout and stderr held for the session
 * to take (task_early_attach(); docs/init-task.md, "The early task"); else it
 * starts the prepared clone (the same code and checks as the step clone's)
 * while the host connects, and the session's step clone waits for it and
 * takes its outcome, or clones as ever when it failed ("The early clone").
 * Nothing to do without o->early.  What goes wrong is said on stderr and
 * left to the session.
 */
void task_early_start(const struct guest_task_opts *o);

/*
 * The session: when PID 1's child runs the task (task_early_start()), take
 * its stdin, stdout and stderr and relay them to our own 0, 1 and 2 until it
 * has ended, and return its exit code; -1 when it runs no task (the session
 * runs it: task_run()).
 */
int task_early_attach(const struct guest_task_opts *o);

/* Run one task as o says and return the session's exit code (see above). */
int task_run(const struct guest_task_opts *o);

/* task_run() with guest_task_opts_fill(): what `aibox-init session` runs for `task`. */
int task_session(void);

#endif
