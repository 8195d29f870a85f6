/*
 * What a task sent back, read and summed up for the user (docs/internals.md,
 * "result.json"; docs/tasks.md, "Results").
 *
 * result.json comes from the VM and is untrusted: it is parsed from a capped
 * buffer, every field is checked for its type and range, enums against their
 * values, commits as lowercase hex of 40 or 64 digits; unknown fields are
 * ignored, a field of the wrong type refuses the whole file.  Strings are
 * capped here and must still be sanitized before they reach a terminal (the
 * output writer does that for every vm line).
 *
 * The summary is a list of lines, each marked as aibox's own or as the VM's
 * word, for the output writer to print with the time, the source and the
 * task's id.
 */
#ifndef AIBOX_TASK_RESULTS_H
#define AIBOX_TASK_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "git/bundle_check.h"
#include "base/guest_abi.h" /* RESULT_JSON_MAX */
#include "base/oid.h"
#include "proxy/proxy_report.h"
#include "base/strvec.h"

/*
 * The init cuts Claude Code's last message at 64 KiB and adds a line saying
 * so; the cap leaves room for that line.
 */
#define RESULT_MESSAGE_MAX (65 * 1024)
#define RESULT_STEPS_MAX   8

enum result_status { RESULT_OK, RESULT_FAILED, RESULT_TIMEOUT, RESULT_SKIPPED };
enum result_ended { ENDED_COMPLETED, ENDED_TIMEOUT, ENDED_BUDGET, ENDED_ERROR };

struct result_step {
	const char *name; /* "clone", "claude", "commit" or "bundle" (static) */
	enum result_status status;
	double start_s; /* from the task's start in the guest; 0 when not given */
	double seconds;
	int has_exit_code;
	int exit_code; /* 0-255 */
};

struct task_result {
	int version; /* 1 */
	struct result_step steps[RESULT_STEPS_MAX];
	size_t nsteps;
	const char *failed_step; /* a step name, or NULL */
	/*
	 * From the task's start in the guest: the session's attach to it (0: the
	 * session started it) and the session's process start (its fork by sshd;
	 * has_session_fork 0 when not given).  docs/init-task.md, "The early task".
	 */
	double session_s, session_fork_s;
	int has_session_fork;

	int has_claude; /* "claude" was an object, not null or absent */
	struct {
		int has_exit_code, has_turns, has_duration, has_cost, has_ended_by;
		int exit_code;    /* 0-255 */
		long num_turns;   /* 0-1000000 */
		long duration_ms; /* 0 to 100 days */
		double cost_usd;  /* 0-1000000 */
		enum result_ended ended_by;
		char *last_message; /* owned, NULL if absent; at most RESULT_MESSAGE_MAX bytes */
	} claude;

	char start_commit[OID_HEX_MAX + 1]; /* "" if null or absent */
	char end_commit[OID_HEX_MAX + 1];
	int changes;

	int has_check; /* "check" was an object: the config's check: ran (docs/tasks.md, "The
	                  check") */
	struct {
		int has_exit_code; /* 0 when it timed out */
		int exit_code;     /* 0-255 (128 + a signal's number when killed by one) */
		int timed_out;
		double seconds; /* 0 to GUEST_CHECK_TIMEOUT_MAX_MS / 1000 + 60 */
		char *tail; /* owned: the end of its output, at most GUEST_CHECK_TAIL_MAX bytes */
	} check;
};

/*
 * Parse len bytes of result.json into r (zeroed first).  0, or -EFBIG (over
 * RESULT_JSON_MAX) or -EINVAL with the reason in err ("result.json: 'steps'
 * is not an array").  On failure r holds nothing to release.
 */
int result_parse(const char *json, size_t len, struct task_result *r, struct buf *err);

void result_release(struct task_result *r);

/*
 * The commit id member key of the JSON object o, as result.json and
 * summary.json hold them: 1 with its 40 or 64 lowercase hex digits in out, 0
 * when it is absent or null, -EINVAL when it is anything else.  out is ""
 * unless 1.
 */
struct json_t;
int result_commit_get(struct json_t *o, const char *key, char out[OID_HEX_MAX + 1]);

const char *result_status_name(enum result_status s);
const char *result_ended_name(enum result_ended e);

/* One line of the summary; vm: the VM's word (printed as vm[id]), else aibox's own. */
struct summary_line {
	int vm;
	char *text;
};

struct summary {
	struct summary_line *v;
	size_t nr, alloc;
};

#define SUMMARY_INIT                                                                               \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

struct summary_in {
	const struct task_result *result; /* NULL when no acceptable result.json came */
	/* What the VM connected to, from aibox-proxy's record; NULL when it has none */
	const struct proxy_report *report;
	const char *report_why;  /* why there is no record */
	const char *end_commit;  /* the tip of aibox/task from the checked bundle;
	                            NULL when there are no changes to fetch */
	const char *bundle_path; /* the task folder's changes.bundle */
	int no_changes;          /* the VM says so: the session ended with its results
	                            accepted, result.json's changes false, no changes.bundle */
	const char *branch;      /* "aibox/task-<folder name>" */
	int windows;             /* quote the fetch command with windows_quote(), not
	                            shell_quote() (which a path it refuses falls back to) */
};

/*
 * The summary lines, in the order of docs/tasks.md, "Results":
 *	the VM connected to HOST:PORT		(each host in the record)
 *	the VM connected to N more hosts ...	(past the record's list: partial)
 *	the hosts the VM connected to are not known: WHY	(no record)
 *	proxy.log left out N lines ...		(its cap)
 *	Claude Code exited with N
 *	N turns in Xs, about $ USD at API prices, ended by R
 *	| line					(vm: the last message, line by line)
 *	the changes end at <12 hex>, fetch them with
 *	  git fetch '<bundle>' aibox/task:<branch>
 * or, without an end commit, "nothing to fetch" when result.json says there
 * were changes (the bundle was refused or not checked), "no changes" when
 * no_changes says so, and nothing otherwise (a failed boot, a stop, refused
 * results: the task did not get as far as knowing); and, when the VM says a
 * step failed, "the step S failed" (or "timed out").  Parts the result does not have are left out.
 */
void summary_make(const struct summary_in *in, struct summary *s);

/* Append the fetch command the summary prints (without its indent) for in's bundle and branch. */
void summary_fetch_command(const struct summary_in *in, struct buf *out);
void summary_release(struct summary *s);

/*
 * Append path for pasting into PowerShell, cmd.exe and Git Bash alike, as the
 * fetch command names the bundle on Windows (docs/platforms.md).  Each
 * backslash becomes a forward slash.  Then the path goes as is when it is
 * non-empty and only has [A-Za-z0-9_./:+-]; else in double quotes, which all
 * three read alike, when it has none of $ ` % ! and no double quote (" or
 * U+201C..U+201E, which PowerShell reads as one); else quoted for PowerShell
 * alone: in single quotes, each ' and U+2018..U+201B (which PowerShell reads
 * as ') doubled.  Returns 0, or -EINVAL with nothing appended for a control
 * character or bytes that are not UTF-8, which no Windows path holds.
 */
int windows_quote(struct buf *out, const char *path);

/*
 * Start the check of a task's changes.bundle (docs/tasks.md, "Reviewing the
 * commits": only aibox/task, no prerequisite but the start commit;
 * docs/bundles.md): a bundle_check (bundle_check.h) of fd with refs exactly
 * refs/heads/aibox/task, start_commit the only base, the thin pack's bases
 * from repo_dir (which has the start commit), the indexer's folder under
 * tmp_parent (NULL: $TMPDIR or /tmp), the pack at most RESULT_BUNDLE_CHECK_MAX bytes, the default
 * limits changed by limits ("name=value,...", the AIBOX_BUNDLE_LIMITS variable; NULL: none), and
 * its child forked (it waits for bundle_check_run()).  The indexer opens the project's objects and
 * writes its index, so the child must be forked before a sandbox_lockdown() without
 * SANDBOX_KEEP_FILES.  0, or -EINVAL with the fault in limits, or -errno of the fork, appended to
 * err.
 */
#define RESULT_BUNDLE_CHECK_MAX (2ULL << 30)
int result_bundle_check_start(struct bundle_check *c, int fd, const char *start_commit,
                              const char *repo_dir, const char *tmp_parent, const char *limits,
                              struct buf *err);

/*
 * The verdict as the task says it: 0 with aibox/task's commit (lowercase hex)
 * in end (in the pack, or the start commit itself: no changes);
 * BUNDLE_REFUSED (1) with "changes.bundle refused: <reason>" appended to err;
 * or a negative errno with "cannot check changes.bundle: <what>".
 */
int result_bundle_verdict(const struct bundle_verdict *v, char end[OID_HEX_MAX + 1],
                          struct buf *err);

/*
 * The same check in this process, no child, no rlimit (the test helper):
 * max_bytes for the pack, lim's caps (NULL: the defaults).  As
 * result_bundle_verdict().
 */
int result_check_bundle(int fd, const char *start_commit, const char *repo_dir,
                        const char *tmp_parent, uint64_t max_bytes, const struct bundle_limits *lim,
                        char end[OID_HEX_MAX + 1], struct buf *err);

#endif
