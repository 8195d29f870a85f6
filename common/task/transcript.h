/*
 * Claude Code's stream-json transcript (transcript.jsonl, one JSON object a
 * line) as a person reads it (docs/tasks.md, "Seeing your tasks"): the
 * agent's text as it is, one line per tool call with its input cut short,
 * each tool result abbreviated to its first line and its size, errors
 * marked, and the end with its turns and cost.
 *
 * Both sides use it: `aibox tasks log` renders the transcript on the host,
 * and the guest's init makes a progress line of each tool call
 * (transcript_tool_calls()), which reaches the host as a vm[id] line.
 *
 * The text comes from the VM: a line is parsed only up to
 * TRANSCRIPT_LINE_MAX bytes (longer ones are named, not parsed), what is
 * not JSON or not of a known shape is left out or named, never guessed at.
 * The output is raw: sanitize it before it reaches a terminal
 * (common/base/out.h); it has no line break but the ones between its lines.
 */
#ifndef AIBOX_TRANSCRIPT_H
#define AIBOX_TRANSCRIPT_H

#include <stddef.h>

#include "base/buf.h"

/* A line longer than this is not parsed (the init keeps the same bound). */
#define TRANSCRIPT_LINE_MAX (1024 * 1024)
/* A tool call's input, and a result's first line, are cut at this many characters. */
#define TRANSCRIPT_COLS 100

/*
 * Append to out the lines one transcript line (line[0..n), without its
 * newline) reads as, each ending in '\n'; nothing for a line of no interest
 * (the system's, empty ones).  A line over TRANSCRIPT_LINE_MAX, or one that
 * is not JSON, becomes one line saying so.
 *	the agent's text		as it is, line by line
 *	> Bash: npm test		a tool call
 *	< 12 lines: first line ...	a tool's result
 *	! error: first line ...		a tool's result marked as an error
 *	= success: 4 turns, 8.3 s, 0.05 USD	the end (the result line)
 */
void transcript_render(const char *line, size_t n, struct buf *out);

/*
 * Only the end: the "= ..." line transcript_render() appends for a line
 * that is the result entry (its "type" is "result"), else nothing, whatever
 * other entries' text reads like.  Within the same bound.
 */
void transcript_render_end(const char *line, size_t n, struct buf *out);

/*
 * Append "Name: input\n" for each tool call in one transcript line (an
 * assistant message), the input cut at TRANSCRIPT_COLS characters and on one
 * line.  Returns how many it appended.
 */
int transcript_tool_calls(const char *line, size_t n, struct buf *out);

#endif
