/*
 * The record of a task's end: summary.json in the task folder, written by
 * aibox-task when the task ends (after the lockdown, through an fd opened
 * before it), and the same object on stdout for `aibox task --json`.  Its
 * keys are in docs/json.md, "aibox task --json"; `aibox tasks show` and
 * `aibox tasks list` read it back.
 *
 * aibox writes it, but the facts marked there as the VM's word (claude,
 * failed_step, changes) came from result.json: a reader sanitizes every
 * string before it reaches a terminal (common/base/out.h).  The reader takes a
 * capped buffer and refuses a field of the wrong type, so a damaged or
 * hand-edited file is refused whole, never half read.
 */
#ifndef AIBOX_TASK_RECORD_H
#define AIBOX_TASK_RECORD_H

#include <stddef.h>
#include <time.h>

#include "base/buf.h"
#include "base/oid.h"
#include "base/taskid.h"
#include "proxy/proxy_report.h"
#include "task/task_results.h"

#define TASK_RECORD_VERSION 1
/* result.json's cap, the proxy's record's cap and room for the rest. */
#define TASK_RECORD_MAX     (RESULT_JSON_MAX + PROXY_REPORT_MAX + 64 * 1024)
#define TASK_RECORD_WHY_MAX 4096
/*
 * How `why` starts when a signal stopped aibox task (and with it the VM):
 * "the VM was stopped by SIGINT" or "... by a signal".  `aibox tasks list`
 * reads it as a killed task (common/task/task_info.h).
 */
#define TASK_WHY_STOPPED "the VM was stopped by "

/*
 * Set why to TASK_WHY_STOPPED and the signal sig's name ("SIGTERM"), or "a
 * signal" for a number that has none.
 */
void task_why_stopped(struct buf *why, int sig);

/* What aibox-task knows at its end, besides the summary's input. */
struct task_record_in {
	const char *folder; /* the task folder's absolute path */
	const char *name;   /* its name, YYYYMMDD-HHMMSS-<id> */
	const char *state;  /* "finished", "not finished" or "failed to start" */
	int exit_code;      /* aibox task's: 0, 1 or 2 */
	const char *why;    /* why it did not finish, or NULL */
	double seconds;     /* aibox task's start to its end */
	const char *start_commit;
	/* When it printed its start line (task_start_line()) and its end: 0 not known. */
	time_t start_time, end_time;
	const struct summary_in *sum; /* NULL for a task that failed to start */
	const char *group;            /* the group of an attempt (--attempts), or NULL */
};

/*
 * Append the record as one JSON object and a newline (keys in the order of
 * docs/json.md) to out.
 */
void task_record_json(const struct task_record_in *in, struct buf *out);

/* What a reader gets back. */
struct task_record {
	char group[TASK_ID_LEN + 1]; /* the attempt's group, "" when not an attempt */
	char state[16];              /* "finished", "not finished" or "failed to start" */
	int exit_code;
	char *why; /* owned, NULL when none */
	double seconds;
	char start_commit[OID_HEX_MAX + 1];
	time_t start_time, end_time;      /* Unix times, 0 when the record has none */
	char end_commit[OID_HEX_MAX + 1]; /* "" when there is nothing to fetch */
	int no_changes;
	int has_result;            /* a result was recorded: result below */
	struct task_result result; /* the VM's facts, as result_parse() checks them */
	int has_report;
	struct proxy_report report;
	char *report_why; /* owned, NULL when none */
};

/*
 * Read a record from p[0..n).  0 with r filled (release it), or -EFBIG (over
 * TASK_RECORD_MAX) or -EINVAL with the reason appended to err; r then holds
 * nothing to release.
 */
int task_record_parse(const char *p, size_t n, struct task_record *r, struct buf *err);
void task_record_release(struct task_record *r);

/*
 * The line aibox task prints when the task starts, "task ID starts from
 * COMMIT" (the commit reviewers diff against, docs/tasks.md, "Reviewing the
 * commits"), appended to out; aibox tasks show prints it again.
 */
void task_start_line(struct buf *out, const char *id, const char *commit);

/*
 * Print a task's summary to fd as its end shows it (docs/tasks.md,
 * "Results"): summary_make()'s lines as aibox[id] and vm[id] lines, then
 * "the task did not finish[: why]" unless finished, each written at `when`.
 * id is the task's.
 */
void task_summary_print(int fd, time_t when, const char *id, const struct summary_in *in,
                        int finished, const char *why);

#endif
