/*
 * A task's Claude Code conversation in the guest (docs/init-task.md, "Resuming a
 * conversation"; common/base/session_file.h has the shapes both sides share).  Claude
 * Code keeps a session as HOME/.claude/projects/<its folder for the working
 * folder>/<session id>.jsonl: a continued task's copy is put there before Claude
 * Code starts with --resume, and the file of the session it ran is sent back.
 */
#ifndef AIBOX_INIT_RESUME_H
#define AIBOX_INIT_RESUME_H

#include "task.h"

struct buf;

/*
 * Copy the share's resume.jsonl (at most SESSION_FILE_MAX bytes) to where
 * Claude Code, working in path, finds the session id: the folders made as
 * needed (0700), the file made new (0600), all owned by o->uid/o->gid when
 * o->drop; a folder that is a link is refused.  0, or -errno with err set.
 */
int resume_place(const struct guest_task_opts *o, const char *path, const char *id,
                 struct buf *err);

/*
 * Open, for reading, the file of the session id that Claude Code worked on
 * in path (a regular file, no link).  The fd, or -errno: -ENOENT when there
 * is none, -EINVAL for an id that is not a session id.
 */
int resume_session_open(const struct guest_task_opts *o, const char *path, const char *id);

struct guest_task;

/*
 * Send the file of the session Claude Code ran (its result line names it) as
 * SESSION_FILE_NAME of the results, for a later continued task.  None, or
 * one over SESSION_FILE_MAX: not sent, and said in vm.log or a progress line.
 */
void resume_send(struct guest_task *t);

#endif
