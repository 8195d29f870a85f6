/*
 * aibox tasks compare: the attempts of one group side by side (docs/tasks.md,
 * "Comparing attempts").  Reading only: nothing in a task folder or in the
 * project's checkout is written; the diff of an attempt is computed in a
 * temporary repository of its own that borrows the checkout's objects.
 */
#ifndef AIBOX_TASK_COMPARE_H
#define AIBOX_TASK_COMPARE_H

#include <stdint.h>

#include "base/buf.h"
#include "base/oid.h"
#include "base/strvec.h"
#include "base/taskid.h"
#include "task/task_info.h"

/*
 * The attempts of the group arg names, as task folder paths in dirs, oldest
 * first, and the group's id in gid: arg is a group's id, or any attempt's id,
 * folder name or path, read by task_lookup()'s rule (an id a task has names
 * the task, and so its group).  0, or -ENOENT (no such group or task),
 * -EINVAL (a task of no group) or another -errno, with err set.
 */
int task_group_attempts(const char *arg, char gid[TASK_ID_LEN + 1], struct strvec *dirs,
                        struct buf *err);

/*
 * At most this many files changed are counted: past it a row's problem says
 * so and git diff is not run (trees that name each other can name more
 * files than any memory holds).
 */
#define TASK_COMPARE_FILES_MAX 100000

/*
 * The time one attempt's git commands have together by default
 * (AIBOX_COMPARE_SECONDS, docs/tasks.md, "Comparing attempts"): a blob of
 * 16 MiB of empty lines takes git diff a second or more for each file that
 * names it.
 */
#define TASK_COMPARE_SECONDS     60
#define TASK_COMPARE_SECONDS_MAX 3600

/* One attempt's row; every text from the folder is the folder's (print it sanitized). */
struct task_compare_row {
	struct task_info ti; /* state, time, the VM's turns (task_info_read()) */
	struct buf dir;
	int has_record; /* summary.json was read: the fields below */
	int has_spend;
	uint64_t spend_nano; /* what aibox's proxy counted */
	int capped;          /* enum usage_capped: the cap that ended it, if one did */
	struct buf cap_line; /* usage_capped_line()'s words for it, "" when none */
	char start_commit[OID_HEX_MAX + 1];
	char end_commit[OID_HEX_MAX + 1]; /* "" when nothing to fetch */
	int has_check; /* the config's check: ran in the VM: the VM's word (task_result's check) */
	int check_timed_out, check_exit;
	double check_seconds;
	struct buf check_tail; /* sanitized by result_parse() */
	int has_diff;          /* the figures below: end_commit against start_commit */
	long commits, files, added, removed;
	struct buf fetch;   /* the fetch command, "" when nothing to fetch */
	struct buf problem; /* what could not be read or computed, "" when nothing */
	int gone;           /* its folder was removed since the group was listed */
};

/* A row's problem when its folder is gone. */
#define TASK_COMPARE_GONE "its folder is gone: it was removed"

/*
 * The row's state as compare shows it: task_state_name()'s, or "gone" when
 * its folder was removed since the group was listed (aibox tasks clean while
 * compare ran: nothing of it is read then, its id aside).
 */
const char *task_compare_state(const struct task_compare_row *row);

/*
 * The row of the task folder dir: its record, and for an end commit the
 * diff figures from its changes.bundle and the project's checkout (git
 * fetch into a temporary bare repository whose objects/info/alternates is
 * the checkout's, then rev-list, the files changed counted up to
 * TASK_COMPARE_FILES_MAX by a walk of the trees, and diff --numstat), the
 * git commands killed, or the walk stopped, once they have taken seconds
 * together.  Never fails: what
 * cannot be read goes to row->problem.  Release it with task_compare_row_release().
 */
void task_compare_row_read(const char *dir, int seconds, struct task_compare_row *row);
void task_compare_row_release(struct task_compare_row *row);

#endif
