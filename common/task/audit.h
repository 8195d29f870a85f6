/*
 * The audit record of every task (docs/security.md, "The audit record"):
 * structured entries sent to the system log and appended to a hash-chained
 * JSON-lines file, $AIBOX_HOME/audit.jsonl.
 *
 * Each line is one JSON object with string and integer values only (so
 * that its text is reproducible), and three fields of the chain:
 *	"seq"	1 for the first line, one more for each next
 *	"prev"	the "hash" of the line before (64 zeros for the first)
 *	"hash"	SHA-256, in hex, of the line's object without "hash", written
 *		compact with its keys sorted (jansson's JSON_COMPACT |
 *		JSON_SORT_KEYS)
 * An edited line no longer matches its hash; a removed or moved one breaks
 * the seq and prev of the line after it.  The last lines removed leave a
 * shorter chain that is whole: the system log's copy is what shows them.
 */
#ifndef AIBOX_AUDIT_H
#define AIBOX_AUDIT_H

#include <stddef.h>
#include <stdint.h>

struct buf;

#define AUDIT_FILE     "audit.jsonl"
#define AUDIT_LINE_MAX (64 * 1024)
#define AUDIT_HASH_HEX 64

/* $AIBOX_HOME/audit.jsonl appended to out. */
void audit_path(struct buf *out);

/*
 * Open the file at path for audit_append() (creating it, mode 0600) and
 * connect to the system log, so that a process that locks itself down
 * afterwards (aibox task's lockdown) can still append.  The fd, or a
 * negative errno with the reason in err.
 */
int audit_open(const char *path, struct buf *err);

/*
 * Append entry (a jansson object, json_t *, of strings and integers; "seq",
 * "prev" and "hash" are set here) to fd, audit_open()'s of path (named in
 * messages), under an exclusive
 * flock, after the last line's chain, then send the line to the system log
 * (syslog(3), facility LOG_AUTHPRIV, "aibox-audit: " and the line).  0, or
 * a negative errno with the reason in err (the line then is not written; a
 * chain whose last line cannot be read is not extended: -EBADMSG).
 */
int audit_append(int fd, const char *path, void *entry, struct buf *err);

/*
 * Check the chain of the file at path.  0 with *n the number of lines;
 * -EBADMSG with "LINE: reason" appended to err for the first line that is
 * edited, out of its place, or not an entry; another negative errno when the
 * file cannot be read.  A missing file is 0 lines.
 */
int audit_verify(const char *path, size_t *n, struct buf *err);

/* SHA-256 of len bytes at p in lowercase hex, appended to out. */
void audit_sha256_hex(const void *p, size_t len, struct buf *out);

#endif
