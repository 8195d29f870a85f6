/*
 * `aibox task --continue TASK`: what a new task takes from an ended one
 * (docs/tasks.md, "Continuing a task"): its end commit, from its checked
 * changes.bundle, fetched into the project when it is not there yet, and its
 * Claude Code conversation, its checked session.jsonl (common/base/session_file.h).
 */
#ifndef AIBOX_TASK_CONTINUE_H
#define AIBOX_TASK_CONTINUE_H

#include "base/buf.h"
#include "base/oid.h"
#include "base/session_file.h"
#include "base/taskid.h"

struct task_continue {
	struct buf dir;                     /* the earlier task's folder */
	char name[TASK_NAME_LEN + 1];       /* its folder's name */
	char start_commit[OID_HEX_MAX + 1]; /* its start, from its settings.json (aibox's own) */
	char end_commit[OID_HEX_MAX + 1];   /* aibox/task in its checked changes.bundle */
	char session_id[SESSION_ID_LEN + 1];
	struct buf session; /* its session.jsonl, checked and mended */
	struct buf note;    /* what was done, for the user: "fetched ..." or "" */
};

#define TASK_CONTINUE_INIT                                                                         \
	{                                                                                          \
		.dir = BUF_INIT, .session = BUF_INIT, .note = BUF_INIT                             \
	}

/*
 * Find the task ref names in tasks_dir (its id, its folder's name, or its
 * folder's path, which must be in tasks_dir) and take what a new task needs
 * from it, checking each part: it has ended; its result.json says it made
 * changes; its changes.bundle passes the check every task's does
 * (result_bundle_check_start(), the limits from limits: AIBOX_BUNDLE_LIMITS)
 * against checkout's objects; its session.jsonl passes session_file_check(),
 * and gets the messages it lacks from its transcript.jsonl (session_mend(),
 * said in c->note; -EFBIG when that makes it too large).
 * Then, unless checkout has the end commit already, fetch it as the task's
 * fetch command does (into aibox/task-<folder>, or only its objects when
 * that branch exists).  0 with c filled; otherwise a negative errno with
 * why saying why the task cannot be continued ("task 'abc123' ended with no
 * changes: ...").
 */
int task_continue_prepare(struct task_continue *c, const char *tasks_dir, const char *ref,
                          const char *checkout, const char *limits, struct buf *err);

void task_continue_release(struct task_continue *c);

#endif
