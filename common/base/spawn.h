/*
 * Starting child processes (after git's run-command).
 *
 * A child gets exactly the fds it is meant to: 0, 1 and 2 as chosen below,
 * the extra fds given with spawn_give_fd() at the numbers asked for, and
 * nothing else (every other fd is closed in the child, whatever its
 * close-on-exec flag).  Between fork and exec the child makes only
 * async-signal-safe calls; if exec fails, its errno comes back to the parent
 * over a close-on-exec pipe and spawn_start() returns it.
 *
 *	struct spawn sp = SPAWN_INIT;
 *	strvec_pushl(&sp.args, "git", "bundle", "create", ..., NULL);
 *	sp.out = SPAWN_PIPE;
 *	if ((err = spawn_start(&sp)) < 0) ...
 *	... read sp.out_fd ...
 *	status = spawn_wait(&sp);
 */
#ifndef AIBOX_SPAWN_H
#define AIBOX_SPAWN_H

#include <sys/types.h>

#include "base/strvec.h"

/* Values of in, out and err besides a real fd (>= 0) to dup into place. */
#define SPAWN_INHERIT (-1) /* the parent's own fd */
#define SPAWN_PIPE    (-2) /* a new pipe; the parent's end in in_fd/out_fd/err_fd */
#define SPAWN_NULL    (-3) /* /dev/null */

#define SPAWN_MAX_FDS 8

struct spawn {
	struct strvec args; /* args.v[0] is the program; searched in PATH without a '/' */
	struct strvec env;  /* "NAME=value" added to (or with env_replace, replacing) ours;
	                       "NAME" alone removes NAME */
	int env_replace;
	int in, out, err; /* SPAWN_* or an fd of ours to put there (not closed by us) */
	const char *dir;  /* chdir here first, if set */
	int pdeathsig;    /* signal the child gets when we die (PR_SET_PDEATHSIG), 0 none */
	int new_session;  /* setsid() in the child: own process group, no controlling tty */
	struct {
		int from, to;
	} give[SPAWN_MAX_FDS];
	int ngive;

	/* Set by spawn_start(). */
	pid_t pid;
	int in_fd;  /* write end of the child's stdin pipe, or -1 */
	int out_fd; /* read end of the child's stdout pipe, or -1 */
	int err_fd; /* read end of the child's stderr pipe, or -1 */
};

#define SPAWN_INIT                                                                                 \
	{                                                                                          \
		.args = STRVEC_INIT, .env = STRVEC_INIT, .in = SPAWN_INHERIT,                      \
		.out = SPAWN_INHERIT, .err = SPAWN_INHERIT, .pid = -1, .in_fd = -1, .out_fd = -1,  \
		.err_fd = -1                                                                       \
	}

/* Give our fd `from` to the child as its fd `to` (to >= 3). */
void spawn_give_fd(struct spawn *sp, int from, int to);

/*
 * Fork and exec.  Returns 0 with sp->pid set, or a negative errno: -ENOENT
 * when the program is not found, the exec's errno when it failed, or the
 * errno of a failed pipe/fork/dup in the child.  On failure no child is left
 * running and no pipe is left open.
 */
int spawn_start(struct spawn *sp);

/*
 * Wait for the child.  Returns its exit code (0-255), 128 + signal number if
 * a signal ended it, or a negative errno.  Closes any pipe ends still open.
 */
int spawn_wait(struct spawn *sp);

/*
 * Stop a child that may still run: when it has a pid, send it sig and wait
 * for it (spawn_wait()'s result).  Returns 0 when there was nothing to stop.
 */
int spawn_stop(struct spawn *sp, int sig);

/*
 * Wait for the child at most timeout_ms, then kill it with SIGKILL and wait
 * for that.  Returns as spawn_wait() (128 + 9 when it had to be killed).
 */
int spawn_wait_within(struct spawn *sp, int timeout_ms);

/* Free args and env and close pipe ends; does not wait. */
void spawn_clear(struct spawn *sp);

/*
 * Run to completion with stdin from /dev/null unless set, and return as
 * spawn_wait() (or the negative errno of spawn_start()).
 */
int spawn_run(struct spawn *sp);

/*
 * Run, capturing stdout into out (up to max bytes; more is an error), and
 * return as spawn_run().  stderr is inherited unless sp->err is set.
 */
struct buf;
int spawn_capture(struct spawn *sp, struct buf *out, size_t max);

/*
 * spawn_capture() within timeout_ms in all, from its start: a child whose
 * stdout has not ended by then is killed (SIGKILL), reaped and -ETIMEDOUT
 * returned; one whose stdout ended but that has not exited by then is killed
 * and reaped, and the signal returned (128 + 9) as spawn_wait() does.
 */
int spawn_capture_within(struct spawn *sp, struct buf *out, size_t max, int timeout_ms);

/*
 * A worker: a child of ours that runs our own code, not a program, forked
 * before a lockdown to do later what the lockdown forbids (aibox task's
 * bundle check, aibox run's cleaner).  Fork with stdout and stderr flushed;
 * in the child, stdin and stdout on /dev/null (stderr stays ours) and every
 * fd from 3 to 1023 closed but keep[0..nkeep).  With SPAWN_WORKER_PDEATH it
 * gets SIGKILL when we die (and exits at once if we already have), SIGINT
 * and SIGHUP ignored; with SPAWN_WORKER_DETACH it runs in a session of its
 * own with every signal ignored but SIGKILL and SIGSTOP, so that it outlives
 * us.  Returns as fork(): 0 in the child, which must end with _exit(); the
 * child's pid; or a negative errno.
 */
#define SPAWN_WORKER_PDEATH 1
#define SPAWN_WORKER_DETACH 2
pid_t spawn_worker(const int *keep, size_t nkeep, int flags);

/* Set O_CLOEXEC (on != 0) or clear it on fd.  0 or -errno. */
int fd_set_cloexec(int fd, int on);

/* Set O_NONBLOCK (on != 0) or clear it on fd.  0 or -errno. */
int fd_set_nonblock(int fd, int on);

#endif
