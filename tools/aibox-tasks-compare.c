/*
 * aibox tasks compare [--json] GROUP
 *
 * The attempts of one group (aibox task --attempts N) side by side, one line
 * each: state, the check's outcome (the config's check:, as the VM reported
 * it), spend, time, commits, files changed, lines added and removed
 * against the start commit, and the command that fetches it (docs/tasks.md,
 * "Comparing attempts").  GROUP is the group's id, or any attempt's id,
 * folder name or path.  Reading only (common/task/task_compare.h): a
 * detached attempt whose job ended is left for aibox tasks show to check.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/paths.h"
#include "base/num.h"
#include "base/out.h"
#include "base/rmtree.h"
#include "base/strvec.h"
#include "config/usage.h"
#include "task/task_compare.h"
#include "task/task_info.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox tasks compare [--json] GROUP\n"
    "\n"
    "The attempts of one group (aibox task --attempts N) side by side: each one's\n"
    "state, check (the config's check:, as the VM reported it), spend, time,\n"
    "commits, files changed and lines added and removed against the start\n"
    "commit, and the command that fetches its changes.\n"
    "GROUP is the group's id, or any attempt's id, folder name or path.\n"
    "\n"
    "    --json      a JSON array, one object an attempt (keys in docs/json.md)\n"
    "    -h, --help  show this help\n"
    "\n"
    "AIBOX_COMPARE_SECONDS (60) bounds the time of one attempt's figures.\n"
    "\n"
    "Exit status: 0 shown, 2 usage or error (no such group).\n";

/* A text from a task folder, sanitized, as a JSON string (null for none). */
static json_t *text(const char *s)
{
	struct buf b = BUF_INIT;
	json_t *v;

	if (!s)
		return json_null();
	out_sanitize(&b, s, strlen(s));
	v = json_string(b.buf);
	buf_release(&b);
	return v ? v : json_null();
}

static json_t *row_json(const struct task_compare_row *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "id", json_string(r->ti.id));
	json_object_set_new(o, "folder", text(r->dir.buf));
	json_object_set_new(o, "state", json_string(task_compare_state(r)));
	json_object_set_new(o, "seconds",
	                    r->ti.has_seconds ? json_real(r->ti.seconds) : json_null());
	json_object_set_new(o, "spend_usd",
	                    r->has_spend ? json_real((double)r->spend_nano / 1e9) : json_null());
	json_object_set_new(o, "ended_by_cap",
	                    r->capped ? json_string(usage_capped_name(r->capped)) : json_null());
	if (r->has_check)
		json_object_set_new(
		    o, "check",
		    json_pack("{s:o, s:b, s:f, s:s}", "exit_code",
		              r->check_timed_out ? json_null() : json_integer(r->check_exit),
		              "timed_out", r->check_timed_out, "seconds", r->check_seconds, "tail",
		              r->check_tail.buf));
	else
		json_object_set_new(o, "check", json_null());
	json_object_set_new(o, "start_commit",
	                    r->start_commit[0] ? json_string(r->start_commit) : json_null());
	json_object_set_new(o, "end_commit",
	                    r->end_commit[0] ? json_string(r->end_commit) : json_null());
	json_object_set_new(o, "commits", r->has_diff ? json_integer(r->commits) : json_null());
	json_object_set_new(o, "files", r->has_diff ? json_integer(r->files) : json_null());
	json_object_set_new(o, "added", r->has_diff ? json_integer(r->added) : json_null());
	json_object_set_new(o, "removed", r->has_diff ? json_integer(r->removed) : json_null());
	json_object_set_new(o, "fetch", r->fetch.len ? text(r->fetch.buf) : json_null());
	json_object_set_new(o, "problem",
	                    r->problem.len  ? text(r->problem.buf)
	                    : r->ti.problem ? text(r->ti.problem)
	                                    : json_null());
	return o;
}

/* ID  STATE  SPEND  TIME  CHANGES, then the fetch command or the problem, indented. */
static void row_text(const struct task_compare_row *r)
{
	struct buf spend = BUF_INIT, time_s = BUF_INIT, changes = BUF_INIT, line = BUF_INIT,
	           check = BUF_INIT;

	if (r->has_spend) {
		usage_format_usd(&spend, r->spend_nano);
		buf_addstr(&spend, " USD");
	} else {
		buf_addstr(&spend, "-");
	}
	if (r->ti.has_seconds)
		duration_format(&time_s, (int64_t)(r->ti.seconds + 0.5) * 1000);
	else
		buf_addstr(&time_s, "-");
	if (r->has_diff)
		buf_addf(&changes, "%ld commit%s, %ld file%s, +%ld -%ld", r->commits,
		         r->commits == 1 ? "" : "s", r->files, r->files == 1 ? "" : "s", r->added,
		         r->removed);
	else
		buf_addstr(&changes, r->end_commit[0] ? "changes not counted" : "nothing to fetch");
	if (!r->has_check)
		buf_addstr(&check, "-");
	else if (r->check_timed_out)
		buf_addstr(&check, "timed out");
	else if (r->check_exit)
		buf_addf(&check, "failed %d", r->check_exit);
	else
		buf_addstr(&check, "passed");
	printf("%s  %-14s check %-10s %14s %8s  %s\n", r->ti.id, task_compare_state(r), check.buf,
	       spend.buf, time_s.buf, changes.buf);
	if (r->cap_line.len)
		printf("        %s\n", r->cap_line.buf);
	if (r->fetch.len) {
		out_sanitize(&line, r->fetch.buf, r->fetch.len);
		printf("        %s\n", line.buf);
	}
	if (r->problem.len || r->ti.problem) {
		buf_reset(&line);
		if (r->problem.len)
			out_sanitize(&line, r->problem.buf, r->problem.len);
		else
			out_sanitize(&line, r->ti.problem, strlen(r->ti.problem));
		printf("        not read: %s\n", line.buf);
	}
	buf_release(&spend);
	buf_release(&time_s);
	buf_release(&changes);
	buf_release(&line);
	buf_release(&check);
}

static pid_t worker;

static void pass_on(int sig)
{
	if (worker > 0)
		kill(worker, sig);
}

/*
 * The rows' temporary repositories (a copy of each pack) go in a folder of
 * this run's own, $TMPDIR/aibox-compare-XXXXXX, TMPDIR pointed at it for the
 * child that does the work; this process passes SIGINT, SIGTERM and SIGHUP
 * (those it was not started to ignore) on to it, waits, removes the folder
 * however the child ended (a signal included), and ends as the child did.
 * Returns in the child.
 */
static void work_in_child(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	const char *tmpdir = temp_dir();
	struct sigaction sa = {.sa_handler = pass_on};
	struct buf dir = BUF_INIT, where = BUF_INIT;
	sigset_t block, old;
	pid_t parent = getpid();
	int st = 0, ret;

	buf_addf(&dir, "%s/aibox-compare-XXXXXX", tmpdir);
	if (!mkdtemp(dir.buf))
		die_errno("cannot make a folder in '%s'", tmpdir);
	sigemptyset(&block);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(&block, sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	worker = fork();
	if (worker < 0)
		die_errno("cannot fork");
	if (!worker) {
		/* this process killed (SIGKILL) takes the work with it, even before the prctl */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (setenv("TMPDIR", dir.buf, 1) < 0)
			die_errno("cannot set TMPDIR");
		buf_release(&dir);
		return;
	}
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		struct sigaction was;

		/* one we were started to ignore (nohup, a background job) stays ignored */
		if (!sigaction(sigs[i], NULL, &was) && was.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(worker, &st, 0) < 0 && errno == EINTR)
		;
	/* git, killed with the child (its pdeathsig), may still be on its way out */
	for (int i = 0; (ret = rmtree_at(AT_FDCWD, dir.buf, NULL, &where)) < 0 && i < 20; i++) {
		buf_reset(&where);
		nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
	}
	if (ret < 0)
		error("cannot remove '%s': %s", where.buf, strerror(-ret));
	buf_release(&dir);
	buf_release(&where);
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		raise(WTERMSIG(st));
	}
	exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int main(int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"json", 0, OPT_FLAG, NULL, 2,
	     "a JSON array, one object an attempt (keys in docs/json.md)"}, /* bit 0 */
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct strvec words = STRVEC_INIT, dirs = STRVEC_INIT;
	struct buf why = BUF_INIT;
	char gid[TASK_ID_LEN + 1];
	unsigned flags;
	json_t *array = NULL;
	const char *env = getenv("AIBOX_COMPARE_SECONDS");
	long seconds = TASK_COMPARE_SECONDS;
	int json;

	tool_init(argc, argv);
	opt_words_exit(argc, argv, options, 1, &flags, &words, usage_text);
	if (words.nr != 1)
		usage_exit(0, "give the group: its id, or one attempt's", usage_text);
	json = !!(flags & 1);
	if (env && *env && parse_long(env, 1, TASK_COMPARE_SECONDS_MAX, &seconds) < 0)
		die("AIBOX_COMPARE_SECONDS: '%s' is not a whole number of seconds from 1 to %d",
		    env, TASK_COMPARE_SECONDS_MAX);
	if (task_group_attempts(words.v[0], gid, &dirs, &why) < 0)
		die("%s", why.buf);
	work_in_child();
	if (json)
		array = json_array();
	else
		printf("group %s: %zu attempt%s\n", gid, dirs.nr, dirs.nr == 1 ? "" : "s");
	for (size_t i = 0; i < dirs.nr; i++) {
		struct task_compare_row r;

		task_compare_row_read(dirs.v[i], (int)seconds, &r);
		if (json)
			json_array_append_new(array, row_json(&r));
		else
			row_text(&r);
		task_compare_row_release(&r);
	}
	if (json) {
		char *s = json_dumps(array, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
		                                JSON_REAL_PRECISION(12));

		if (s)
			puts(s);
		free(s);
		json_decref(array);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		die("cannot write the comparison: %s", strerror(errno));
	strvec_clear(&words);
	strvec_clear(&dirs);
	buf_release(&why);
	return 0;
}
