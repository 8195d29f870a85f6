/*
 * aibox task --attempts N: N attempts of one task side by side (docs/tasks.md,
 * "Several attempts").
 *
 * Each attempt is an aibox-task of its own (the same command line and
 * --attempt-of GROUP, the prompt on its stdin), so that each has its own
 * folder, proxy, proxy log, spend and caps, and one that fails stops no
 * other.  task_group_run() starts them, hands each attempt's stdout on a
 * whole line at a time (its folder first), passes a signal the caller caught
 * on to every attempt still running and waits for them all; the caller prints
 * (task_group_summary() makes the group's line).  Nothing here prints or exits.
 */
#ifndef AIBOX_TASK_GROUP_H
#define AIBOX_TASK_GROUP_H

#include <signal.h>
#include <time.h>

#include "base/buf.h"
#include "base/num.h"
#include "base/oid.h"
#include "base/spawn.h"
#include "base/taskid.h"

/* One attempt as the group's process sees it. */
struct task_group_attempt {
	struct spawn sp;
	struct buf line;   /* stdout not yet handed on: less than a line */
	struct buf folder; /* its first line: its folder's path */
	int lines;         /* whole lines read */
	int code;          /* its exit status (128 + signal when killed), -1 while it runs */
};

struct task_group {
	/* Set by the caller before task_group_run(). */
	int n;                     /* attempts, 1 to ATTEMPTS_MAX */
	char gid[TASK_ID_LEN + 1]; /* the group's id */
	const char *self;          /* the program each attempt runs */
	char *const *argv;         /* what each attempt gets after --attempt-of GROUP */
	int argc;
	int cpus;           /* > 0: each attempt gets --cpus CPUS first (task_group_cpus()) */
	long long err_base; /* each attempt gets --err-base ERR_BASE: the size of the
	                       stderr they share when the group started, where its
	                       one cap on the VM's lines counts from (task_session.h) */
	int json;           /* an attempt's first line (its folder) is kept, not handed on */
	volatile sig_atomic_t *stop; /* a signal to pass on when nonzero (reset to 0), or NULL */
	/* Each whole line of an attempt's stdout that is handed on, with its '\n'. */
	void (*line_out)(void *ctx, const char *s, size_t n);
	void *ctx;
	/* Filled by task_group_run(). */
	struct task_group_attempt a[ATTEMPTS_MAX];
	int started; /* attempts started (all n unless one could not be) */
};

/*
 * The vCPUs each of n attempts run on one host of cores CPUs gets when
 * neither --cpus nor the config's cpus chose (docs/tasks.md, "Several
 * attempts"): its share of the host's cores, cores / n, at least 1.  0 when
 * that share is not below cpus, the size the config leaves them: each keeps
 * it.  Pure.
 */
int task_group_cpus(int n, int cores, int cpus);

/*
 * Start g->n attempts, each with prompt on its stdin, and wait for every one
 * started.  SIGPIPE must be ignored by the caller (an attempt that died early
 * makes the prompt's write fail).  -errno (err says what) when an attempt
 * cannot be started or poll(2) fails: the attempts already started are left
 * running (they get SIGTERM when the caller exits: PR_SET_PDEATHSIG) and
 * task_group_release() is still to be called.
 */
int task_group_run(struct task_group *g, const struct buf *prompt, struct buf *err);

/*
 * The group's line once every attempt ended, into out: how many finished and
 * what aibox counted for them together (each attempt's summary.json); for
 * detached attempts with no summary yet, that they were submitted.
 */
void task_group_summary(const struct task_group *g, int detach, struct buf *out);

/*
 * The same line for the attempts of the group gid whose folders are dirs[0..n):
 * "group GID: F of N attempts finished; aibox counted X USD for them all",
 * each attempt's summary.json read as task_file_read() reads a task's files
 * (a regular file, never through a link nor from a FIFO; one without is not
 * finished, counts 0).
 * When a signal stopped some (their why starts with TASK_WHY_STOPPED), the
 * line names which finished and which were stopped: "F of N attempts
 * finished (ID, ...), S stopped (ID, ...); aibox counted ..." ("none" for
 * no finished one).
 */
void task_group_line(const char *gid, const char *const *dirs, size_t n, struct buf *out);

/* 0 when one attempt finished (there is one to pick), 2 when none started (each exited 2), else 1.
 */
int task_group_status(const struct task_group *g);

/*
 * The group's one start bundle (docs/tasks.md, "Several attempts"): every
 * attempt starts from the commit the group resolved once, so that a commit
 * made while the attempts start changes none of them.  The group makes it in
 * its folder PROJECT/tasks/.group-GID (task_group_dir(); a name the task
 * lists skip), and each attempt takes it into its own folder as hard links
 * (a copy where the file system has none): the VMs see their folder read-only
 * and nothing on the host writes a start bundle, so one file serves them all.
 */
#define TASK_GROUP_COMMIT_FILE "start_commit" /* the commit in hex and a newline */

/* project_dir/tasks/.group-GID appended to out. */
void task_group_dir(struct buf *out, const char *project_dir, const char *gid);

/*
 * Make gdir (and project's tasks folder if need be), lock it (flock(2) on
 * the folder, *lock_fd gets the descriptor, close-on-exec: hold it until
 * task_group_bundle_remove()) and in it start.bundle and start.idx of commit
 * from checkout (task_folder_start_bundle()) and the commit file.  0, or a
 * negative errno with err set; what was made is then removed and *lock_fd
 * is -1.  The lock tells aibox tasks clean that the group's process lives
 * (task_group_dir_left()).
 */
int task_group_bundle_make(const char *gdir, const char *checkout, const char *commit, int *lock_fd,
                           struct buf *err);

/*
 * Whether name, in a project's tasks folder tasks_fd, is a group's folder
 * (".group-" and 6 hex) that its group's process left behind: not locked
 * (the process died: SIGKILL) and last changed at least min_age seconds
 * before now (a group between its mkdir and its lock is younger).  1 left
 * behind, 0 not (not a group's folder, locked, or too young), or -errno
 * when it cannot be checked.
 */
int task_group_dir_left(int tasks_fd, const char *name, time_t now, time_t min_age);

/*
 * The group's start commit read from gdir into commit (full hex), and its
 * start.bundle and start.idx linked (else copied) into the task folder dir,
 * opened to the VM as task_folder_start_bundle() does.  0, or a negative
 * errno with err set ("the group's start bundle '...' ...").
 */
int task_group_bundle_take(const char *gdir, const char *dir, char commit[OID_HEX_MAX + 1],
                           struct buf *err);

/* Remove gdir and what task_group_bundle_make() put there (what is already gone is no failure). */
void task_group_bundle_remove(const char *gdir);

/* Release what task_group_run() holds (g itself is the caller's); only after task_group_run(). */
void task_group_release(struct task_group *g);

#endif
