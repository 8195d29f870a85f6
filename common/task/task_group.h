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

#include "base/buf.h"
#include "base/num.h"
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
	int json; /* an attempt's first line (its folder) is kept, not handed on */
	volatile sig_atomic_t *stop; /* a signal to pass on when nonzero (reset to 0), or NULL */
	/* Each whole line of an attempt's stdout that is handed on, with its '\n'. */
	void (*line_out)(void *ctx, const char *s, size_t n);
	void *ctx;
	/* Filled by task_group_run(). */
	struct task_group_attempt a[ATTEMPTS_MAX];
	int started; /* attempts started (all n unless one could not be) */
};

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

/* 0 when one attempt finished (there is one to pick), 2 when none started (each exited 2), else 1.
 */
int task_group_status(const struct task_group *g);

/* Release what task_group_run() holds (g itself is the caller's); only after task_group_run(). */
void task_group_release(struct task_group *g);

#endif
