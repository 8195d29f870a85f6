/*
 * The task's steps as groups of processes, and running one process of a step
 * with a deadline.
 *
 * In the VM every step gets a cgroup v2 of its own, /sys/fs/cgroup/aibox/<step>:
 * a process joins it between fork and exec, so everything it starts is in the
 * group too, and killing the group (cgroup.kill) ends all of it at once, even
 * what daemonized or made a session of its own.
 *
 * STEP_PGROUP is a fallback for the native test helper only (a test user cannot
 * make cgroups on the host): each process is the leader of a process group of
 * its own, and killing the step kills those process groups.  A process that
 * leaves its process group (setsid, setpgid) escapes it; the product never uses
 * this backend.
 *
 * The caller should be a child subreaper (PR_SET_CHILD_SUBREAPER), so that
 * the orphans of a killed step come back to it and step_group_destroy() can
 * reap them.
 */
#ifndef AIBOX_INIT_STEP_H
#define AIBOX_INIT_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum step_backend { STEP_CGROUP, STEP_PGROUP };

struct step_group {
	enum step_backend backend;
	char *path;   /* cgroup: its folder */
	int procs_fd; /* cgroup: its cgroup.procs, open for writing (close-on-exec) */
	pid_t *pgids; /* pgroup: the process groups made so far */
	size_t nr, alloc;
};

/* Where the step cgroups go (made if missing). */
#define STEP_CGROUP_ROOT "/sys/fs/cgroup/aibox"

/*
 * Make the group for the step `name` (a plain word).  A cgroup left over by
 * an earlier session under the same name is killed and reused.  0 or -errno.
 */
int step_group_create(struct step_group *g, enum step_backend backend, const char *name);

/* Kill every process in the group now (SIGKILL).  0 or -errno. */
int step_group_kill(struct step_group *g);

/*
 * Kill the group, wait (a few seconds at most) until it is empty, reap the
 * orphans that came back to us, and remove the cgroup.  0 or -errno; the
 * group is released either way.
 */
int step_group_destroy(struct step_group *g);

/* Receives a chunk of a child's output; returning < 0 stops reading (the fd is drained and
 * dropped). */
typedef int (*step_sink_fn)(void *ctx, const char *data, size_t n);

struct step_proc {
	const char *const *argv; /* argv[0] is an absolute path */
	const char *const *envp; /* the whole environment */
	const char *dir;         /* chdir here, if set */
	int drop;                /* switch to uid/gid with no supplementary groups */
	uid_t uid;
	gid_t gid;
	int in;              /* the child's stdin: an fd of ours, or -1 for /dev/null */
	step_sink_fn on_out; /* NULL: stdout goes to /dev/null */
	step_sink_fn on_err; /* NULL: stderr goes to /dev/null */
	void *ctx;
};

struct step_result {
	int code;      /* exit code, or 128 + signal */
	int timed_out; /* the deadline passed and we killed it */
	int64_t ms;    /* how long it ran */
};

/* Sleep ms milliseconds, on through signals. */
void sleep_ms(long ms);

/*
 * Run p in group g until it exits or the deadline (clock_ms() scale, common/base/clock.h) passes.
 * When the process exits, the rest of the group is killed at once (nothing
 * it started outlives it); at the deadline all of the group is.  Its output
 * is passed to the sinks until every writer is gone.  Returns 0 with *res
 * filled in, or a negative errno when the process could not be started (the
 * exec's errno comes back from the child).
 */
int step_run(const struct step_proc *p, struct step_group *g, int64_t deadline,
             struct step_result *res);

/*
 * A process of a step started by step_start() and not waited for yet.  When
 * another group's step_group_destroy() reaps it with that group's orphans
 * (waitpid(-1)), its wait status is kept for step_finish().  At most four at
 * once.
 */
struct step_job {
	pid_t pid;
	int pidfd; /* -1: not watched (it was killed at the start) */
	int out_fd, err_fd;
	int exec_fd; /* the child's status pipe until step_finish() reads it; -1 then */
	step_sink_fn on_out, on_err;
	void *ctx; /* the sinks' */
	struct step_group *g;
	int64_t start, deadline;
};

/*
 * Start p in group g as step_run() does, without waiting for it, not even for
 * its exec (a fork's time under TCG, where the exec costs tens of ms more):
 * its output waits in its pipes (the process blocks when one is full) until
 * step_finish().  0, or -errno (-EBUSY: four are started already); on 0,
 * step_finish() must follow (kill the group first to abandon it), and a
 * failed exec's -errno comes back from it.  p's sinks and ctx must live until
 * then.
 */
int step_start(const struct step_proc *p, struct step_group *g, int64_t deadline,
               struct step_job *j);

/*
 * step_run()'s wait and result for a process step_start() started: 0 with
 * *res, or -errno when its exec failed (the child reaped, *res not its).
 */
int step_finish(struct step_job *j, struct step_result *res);

#endif
