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
struct config;
struct strvec;

#define AUDIT_FILE     "audit.jsonl"
#define AUDIT_LINE_MAX (64 * 1024)
#define AUDIT_HASH_HEX 64
/* The system log's copy: syslog's identifier, the text before the entry. */
#define AUDIT_IDENT "aibox"
#define AUDIT_TAG   "aibox-audit: "
/* Where journald listens for its native protocol (sd_journal_send()). */
#define AUDIT_JOURNAL_SOCKET "/run/systemd/journal/socket"

/* 1 when journald listens at AUDIT_JOURNAL_SOCKET (a socket is there). */
int audit_journal_running(void);

/* $AIBOX_HOME/audit.jsonl appended to out. */
void audit_path(struct buf *out);

/*
 * Open the file at path for audit_append() (creating it, mode 0600) and
 * choose the system log: the journal when audit_journal_running(), else
 * syslog(3), connected now.  A process that locks itself down afterwards
 * (one with SANDBOX_NO_NEW_SOCKETS, common/base/sandbox.h) can still append once it has
 * appended one entry before (the journal's socket is made at the first
 * send).  The fd, or a negative errno with the reason in err.
 */
int audit_open(const char *path, struct buf *err);

/*
 * Append entry (a jansson object, json_t *, of strings and integers; "seq",
 * "prev" and "hash" are set here) to fd, audit_open()'s of path (named in
 * messages), under an exclusive
 * flock, after the last line's chain, then send the line to the system log:
 * to the journal through sd_journal_send() (MESSAGE "aibox-audit: " and the
 * line, SYSLOG_IDENTIFIER "aibox", SYSLOG_FACILITY authpriv, PRIORITY info,
 * AIBOX_AUDIT the line, AIBOX_EVENT, AIBOX_PROJECT, AIBOX_TASK (a task's or
 * a run's name), AIBOX_SEQ, AIBOX_HASH; no trusted field: journald stamps
 * _UID), or, without a journal or when it refuses, through syslog(3)
 * (LOG_AUTHPRIV, ident "aibox", "aibox-audit: " and the line).  0, or
 * a negative errno with the reason in err (the line then is not written; a
 * chain whose last line cannot be read is not extended: -EBADMSG).
 */
int audit_append(int fd, const char *path, void *entry, struct buf *err);

/*
 * A new entry (json_t *) with "time" (now, Unix seconds), "event", and who
 * runs us: "uid" and "user" (the name looked up at the first call, so that
 * a locked-down process still has it; "" when it has none).
 */
void *audit_entry(const char *event);

/*
 * audit_append() entry to $AIBOX_HOME/audit.jsonl, opened with audit_open()
 * into *fd first when *fd is negative (kept open for the next).  entry is
 * not released.  0, or a negative errno with the reason in err.
 */
int audit_write(int *fd, void *entry, struct buf *err);

/* list's entries joined by commas, as an entry's string (json_t *). */
void *audit_joined(const struct strvec *list);

/*
 * The secrets a task or a run is given, by name, as an entry's string
 * (json_t *): ANTHROPIC_API_KEY when the key is forwarded, the env names
 * set, the names given a placeholder, the config's git tokens.
 */
void *audit_secrets(int forward_key, const struct strvec *env_names, const struct strvec *ph_names,
                    const struct config *cfg);

/*
 * Record that the administrator's policy refused a command ("task", "run")
 * on project (docs/security.md, "The audit record"): an entry "refused"
 * with "command", "project", "policy" (the policy's file) and "why" (the
 * refusal), through audit_write().  0, or a negative errno with the reason
 * in err.
 */
int audit_refusal(int *fd, const char *command, const char *project, const char *policy,
                  const char *why, struct buf *err);

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
