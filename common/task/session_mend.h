/*
 * The messages a session file lacks, taken from the transcript (docs/tasks.md,
 * "Continuing a task").  Claude Code in print mode writes its session file
 * behind its output, in batches, and its exit gives that write a bounded time:
 * a slow VM can end with messages on stdout (transcript.jsonl) that never
 * reached the session file, most often the last answer.  A conversation
 * resumed from such a file has lost its end, and Claude Code fills the gap
 * with a "No response requested." of its own.
 *
 * The transcript's message lines carry the uuids the session file's entries
 * have, so what is missing can be told exactly and written back as the
 * entries Claude Code would have written.  Both inputs come from the VM: only
 * well-formed lines are used, and nothing is guessed at.
 */
#ifndef AIBOX_SESSION_MEND_H
#define AIBOX_SESSION_MEND_H

#include <stddef.h>

struct buf;

/*
 * session holds a session file that passed session_file_check(); transcript
 * (tlen bytes) holds whole lines of Claude Code's stream-json output, the
 * whole file when whole is 1, else only its end.
 *
 * The transcript's messages are its lines of type "user" or "assistant"
 * whose parent_tool_use_id is absent or null (a subagent's lines are not in
 * the session's main chain), with a "uuid" and "session_id" of the session
 * id form and a "message" object.  Those after the last one the session has
 * (by uuid) are appended to session, one compact JSON line each, in
 * transcript order: type, message, uuid, sessionId, "isSidechain": false,
 * "parentUuid" the entry before it (for the first, the last entry of the
 * session's main chain: the last line with a uuid and no "isSidechain":
 * true), and "timestamp" its own when it has one not earlier than the
 * session's latest, else the latest.  When the session has none of them,
 * all are appended, but only when whole (a transcript's end cannot tell
 * what came before it).  A line that is not such a message is skipped; a
 * message line that cannot be used (not JSON, over SESSION_LINE_MAX bytes
 * or SESSION_LINE_VALUES_MAX values) ends the appending, so what is added
 * is always an unbroken chain.
 *
 * Returns the number of entries appended (0: nothing missing, or no main
 * chain or timestamp in session to join), or -EFBIG when the result would
 * be over SESSION_FILE_MAX; session is then as it was.
 */
int session_mend(struct buf *session, const char *transcript, size_t tlen, int whole);

#endif
