/*
 * Claude Code's conversation, kept so a later task can resume it (docs/tasks.md,
 * "Continuing a task"; docs/internals.md, "The results tar").  Both sides use this
 * header: the init sends the session file of the Claude Code it ran as the result
 * file session.jsonl, and places a continued task's copy (resume.jsonl in the share)
 * where Claude Code looks for it; aibox-task checks the file's form before it hands
 * it to a later VM, with what it lacks added from the transcript (common/task/session_mend.h).
 */
#ifndef AIBOX_SESSION_FILE_H
#define AIBOX_SESSION_FILE_H

#include <stddef.h>

struct buf;

/* The result file, its cap, and the name of the copy a continued task's VM gets. */
#define SESSION_FILE_NAME   "session.jsonl"
#define SESSION_FILE_MAX    (64ULL << 20)
#define SESSION_RESUME_NAME "resume.jsonl"
/*
 * One line of it, at most (Claude Code writes a tool result whole on one
 * line).  Not the cap on the logs the VM fills (common/base/log_cap.h),
 * though the same size: this one bounds what the host parses at once, and a
 * file with a longer line is refused whole, never cut.
 */
#define SESSION_LINE_MAX (16 << 20)
/*
 * The JSON values in one line, at most (json_vm_loadb()'s count), so that
 * parsing one takes at most about 230 MiB whatever its shape.
 */
#define SESSION_LINE_VALUES_MAX (1 << 20)

/* A session id: a UUID in lowercase, 8-4-4-4-12 hex digits. */
#define SESSION_ID_LEN 36

/* 1 when s is a session id, else 0. */
int session_id_valid(const char *s);

/*
 * Append the name of the folder under ~/.claude/projects/ where Claude Code
 * keeps the sessions of the working folder path: path with every byte but
 * [A-Za-z0-9] made '-'.  Claude Code shortens names over 200 bytes with a
 * hash of its own; such a path gives -ENAMETOOLONG and nothing is appended.
 */
int session_project_dir(struct buf *out, const char *path);

/*
 * Check len bytes of a session file: at most SESSION_FILE_MAX, UTF-8, lines
 * ending in '\n' of at most SESSION_LINE_MAX bytes and SESSION_LINE_VALUES_MAX
 * values (counted before it is parsed), each a JSON object; every
 * "sessionId" member a session id, and at least one line with one.  0 with
 * the last line's id in id (a resumed conversation's file may hold the
 * earlier turns under their first session's id), or -EFBIG or -EINVAL with
 * the reason in err ("line 3 is not a JSON object").
 */
int session_file_check(const char *data, size_t len, char id[SESSION_ID_LEN + 1], struct buf *err);

#endif
