/*
 * What a task sent back, read and summed up for the user (docs/internals.md,
 * "result.json"; the product description, "Results").
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
#ifndef AIBOX_RESULTS_H
#define AIBOX_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "strvec.h"

#define RESULT_JSON_MAX (1024 * 1024)
/*
 * The init cuts Claude Code's last message at 64 KiB and adds a line saying
 * so; the cap leaves room for that line.
 */
#define RESULT_MESSAGE_MAX (65 * 1024)
#define RESULT_STEPS_MAX 8

enum result_status { RESULT_OK, RESULT_FAILED, RESULT_TIMEOUT, RESULT_SKIPPED };
enum result_ended { ENDED_COMPLETED, ENDED_TIMEOUT, ENDED_BUDGET, ENDED_ERROR };

struct result_step {
	const char *name; /* "clone", "claude", "commit" or "bundle" (static) */
	enum result_status status;
	double seconds;
	int has_exit_code;
	int exit_code; /* 0-255 */
};

struct task_result {
	int version; /* 1 */
	struct result_step steps[RESULT_STEPS_MAX];
	size_t nsteps;
	const char *failed_step; /* a step name, or NULL */

	int has_claude; /* "claude" was an object, not null or absent */
	struct {
		int has_exit_code, has_turns, has_duration, has_cost, has_ended_by;
		int exit_code;	   /* 0-255 */
		long num_turns;	   /* 0-1000000 */
		long duration_ms;  /* 0 to 100 days */
		double cost_usd;   /* 0-1000000 */
		enum result_ended ended_by;
		char *last_message; /* owned, NULL if absent; at most RESULT_MESSAGE_MAX bytes */
	} claude;

	char start_commit[65]; /* "" if null or absent */
	char end_commit[65];
	int changes;
};

/*
 * Parse len bytes of result.json into r (zeroed first).  0, or -EFBIG (over
 * RESULT_JSON_MAX) or -EINVAL with the reason in err ("result.json: 'steps'
 * is not an array").  On failure r holds nothing to release.
 */
int result_parse(const char *json, size_t len, struct task_result *r, struct buf *err);

void result_release(struct task_result *r);

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

#define SUMMARY_INIT { NULL, 0, 0 }

struct summary_in {
	const struct task_result *result; /* NULL when no acceptable result.json came */
	const char *const *hosts;	  /* hosts the VM connected to (proxy_log_hosts) */
	size_t nhosts;
	const char *end_commit;	 /* the tip of aibox/task from the checked bundle;
				    NULL when there are no changes to fetch */
	const char *bundle_path; /* the task folder's changes.bundle */
	int no_changes;          /* the VM says so: the session ended with its results
	                            accepted, result.json's changes false, no changes.bundle */
	const char *branch;	 /* "aibox/task-<folder name>" */
};

/*
 * The summary lines, in the product description's order:
 *	the VM connected to HOST:PORT		(each host)
 *	Claude Code exited with N
 *	N turns in Xs, about $ USD at API prices, ended by R
 *	| line					(vm: the last message, line by line)
 *	the changes end at <12 hex>, fetch them with
 *	  git -c transfer.fsckObjects=true fetch '<bundle>' aibox/task:<branch>
 * or, without an end commit, "nothing to fetch" when result.json says there
 * were changes (the bundle was refused or not checked), "no changes" when
 * no_changes says so, and nothing otherwise (a failed boot, a stop, refused
 * results: the task did not get as far as knowing); and, when the VM says a
 * step failed, "the step S failed" (or "timed out").  Parts the result does not have are left out.
 */
void summary_make(const struct summary_in *in, struct summary *s);
void summary_release(struct summary *s);

/*
 * Append s quoted for a POSIX shell: as is when it is non-empty and only has
 * [A-Za-z0-9_@%+=:,./-], else in single quotes with each ' as '\''.
 */
void shell_quote(struct buf *out, const char *s);

/*
 * The distinct host:port the VM connected to, in order of first use, from
 * proxy.log's text (aibox-proxy's format: "TIME VERDICT HOST:PORT [METHOD
 * [PATH]] ..." with VERDICT "allowed", "refused" or "failed", both before
 * any field the VM controls; only "allowed" counts, "-" hosts are skipped).  At most max hosts are kept; returns the
 * number of distinct hosts seen (more than hosts->nr when some were left out).
 */
size_t proxy_log_hosts(const char *log, size_t len, size_t max, struct strvec *hosts);

/*
 * Check a task's changes.bundle, read from fd from its first byte (the
 * product description: only aibox/task, no prerequisite but the start
 * commit; docs/bundles.md):
 *   - the header (bundle_header_read_fd, bundle_header_expect): its refs are
 *     exactly refs/heads/aibox/task, its only possible prerequisite
 *     start_commit;
 *   - the pack (bundle_pack_verify_fd): at most max_bytes, every object
 *     inflates to its stated size, every delta resolves (the bases of the
 *     thin pack from the repository at repo_dir, which has the start
 *     commit), the object count and the checksum.  The indexer writes its
 *     index into a private folder under tmp_parent (NULL: $TMPDIR or /tmp),
 *     so this cannot run in a process under sandbox_lockdown().
 * 0 with aibox/task's commit (lowercase hex) in end; BUNDLE_REFUSED (1) with
 * "changes.bundle refused: <reason>" appended to why; or a negative errno
 * with "cannot read changes.bundle: <what>" appended to why.
 */
int result_check_bundle(int fd, const char *start_commit, const char *repo_dir,
			const char *tmp_parent, uint64_t max_bytes, char end[65], struct buf *why);

#endif
