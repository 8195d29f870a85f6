/*
 * aibox tasks show [--json] [--wait] TASK
 *
 * A task's summary again, as aibox task printed it at its end (docs/tasks.md,
 * "Results"), with the fetch command: from its record (summary.json,
 * common/task/task_record.h), or for a task without one from result.json alone.
 * TASK is an id, a folder's name or a folder's path (common/task/task_info.h,
 * task_find()).  The lines aibox task printed, its start line ("task ...
 * starts from <commit>") and its summary, come again with the times it
 * printed them at.  Everything from the folder is sanitized before it is
 * printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "vm/host_system.h"
#include "base/opt.h"
#include "base/out.h"
#include "task/task_results.h"
#include "task/slurm_detach.h"
#include "task/task_group.h"
#include "task/task_info.h"
#include "task/task_record.h"
#include "base/strvec.h"
#include "base/taskid.h"
#include "base/guest_abi.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox tasks show [--json] [--wait] TASK\n"
    "\n"
    "Show a task's summary again, with the command that fetches its changes.\n"
    "TASK is the task's id (6 hex), its folder's name or its folder's path; with\n"
    "--wait, a group's id (aibox task --attempts) waits for and shows each attempt.\n"
    "\n"
    "    --json      one JSON object, keys in docs/json.md\n"
    "    --wait      wait until the task is neither queued nor running, then show it\n"
    "    -h, --help  show this help\n"
    "\n"
    "Exit status: 0 shown, 2 usage or error (no such task); with --wait, the task's\n"
    "own: 0 it finished, 1 it did not, 2 it failed to start (a group: 0 one finished,\n"
    "2 none started, else 1).\n";

/* --wait looks at the task this often. */
#define WAIT_POLL_S 2

struct shown {
	struct task_dir td;
	struct buf why;
	struct task_info ti;
	int has_record, has_result;
	struct task_record rec;
	struct task_result res; /* without a record: result.json */
	struct buf problem;
};

static void open_task(struct shown *s, const char *arg)
{
	int ret;

	if (task_open(arg, &s->td, &s->why) < 0)
		die("%s", s->why.buf);
	ret = task_info_read(s->td.tasks_fd, s->td.name, time(NULL), &s->ti);
	if (ret < 0)
		die_err(ret, "cannot read '%s'", s->td.dir.buf);
}

/*
 * --wait: until the task has ended, polled, as a detached task's job on a
 * cluster can only be asked about.  A detached task whose job ended is
 * checked here (the one writer of its record, docs/slurm.md): the check
 * finds the lock held while another command checks it, and we wait for that.
 */
static void wait_ended(struct shown *s)
{
	int ret;

	for (;;) {
		if (s->ti.state == TASK_UNCHECKED) {
			ret = slurm_detached_check(s->td.dir.buf);
			if (ret < 0)
				die_err(ret, "cannot check the task '%s'", s->td.name);
			if (ret > 0)
				die("cannot check the task '%s' (aibox-task --slurm-check exit %d)",
				    s->td.name, ret);
		} else if (s->ti.state == TASK_RUNNING || s->ti.state == TASK_QUEUED) {
			sleep(WAIT_POLL_S);
		} else {
			return;
		}
		task_info_release(&s->ti);
		ret = task_info_read(s->td.tasks_fd, s->td.name, time(NULL), &s->ti);
		if (ret < 0)
			die_err(ret, "cannot read '%s'", s->td.dir.buf);
		if (s->ti.state == TASK_UNCHECKED)
			sleep(WAIT_POLL_S); /* another command checks it */
	}
}

/* The record, else result.json; what cannot be read goes to s->problem. */
static void read_facts(struct shown *s)
{
	struct buf b = BUF_INIT, err = BUF_INIT;
	ssize_t n;

	n = task_file_read(s->td.dfd, "summary.json", TASK_RECORD_MAX, &b);
	/* An empty one is no problem: its task was killed (common/task/task_info.h). */
	if (n > 0) {
		if (task_record_parse(b.buf, b.len, &s->rec, &err) == 0)
			s->has_record = 1;
		else
			buf_add(&s->problem, err.buf, err.len);
	} else if (n < 0 && n != -ENOENT) {
		buf_addf(&s->problem, "summary.json: %s", strerror((int)-n));
	}
	if (!s->has_record) {
		buf_reset(&b);
		buf_reset(&err);
		n = task_file_read(s->td.dfd, guest_results[RESULT_JSON].name, RESULT_JSON_MAX, &b);
		if (n > 0 && result_parse(b.buf, b.len, &s->res, &err) == 0)
			s->has_result = 1;
		else if (n > 0 && !s->problem.len)
			buf_add(&s->problem, err.buf, err.len);
	}
	buf_release(&b);
	buf_release(&err);
}

static void print_text(struct shown *s)
{
	struct task_info *ti = &s->ti;
	struct summary_in in = {0};
	struct buf line = BUF_INIT, time_s = BUF_INIT, bpath = BUF_INIT, branch = BUF_INIT;
	char start[32] = "";
	struct tm tm;
	const char *why = NULL;
	time_t end;
	int finished;

	if (localtime_r(&ti->start, &tm))
		strftime(start, sizeof(start), "%Y-%m-%d %H:%M:%S", &tm);
	printf("task %s, %s: %s\n", ti->id, ti->name, task_state_name(ti->state));
	printf("folder: ");
	out_sanitize(&line, s->td.dir.buf, s->td.dir.len);
	printf("%s\n", line.buf);
	if (ti->has_seconds)
		duration_format(&time_s, (int64_t)(ti->seconds + 0.5) * 1000);
	printf("started %s%s%s\n", start, time_s.len ? ", for " : "", time_s.buf);
	buf_reset(&line);
	if (ti->prompt_line)
		task_text_line(&line, ti->prompt_line);
	printf("prompt: %s\n", line.buf);
	if (s->problem.len || ti->problem) {
		buf_reset(&line);
		if (s->problem.len)
			out_sanitize(&line, s->problem.buf, s->problem.len);
		else
			out_sanitize(&line, ti->problem, strlen(ti->problem));
		printf("cannot read all of it: %s\n", line.buf);
	}
	fflush(stdout);
	if (ti->state == TASK_QUEUED) {
		printf("its Slurm job waits in the queue: its results are checked here once it "
		       "has ended\n");
		goto out;
	}
	if (ti->state == TASK_UNCHECKED) {
		printf("its Slurm job has ended: 'aibox tasks show --wait %s' checks its results "
		       "here\n",
		       ti->id);
		goto out;
	}
	if (ti->state == TASK_RUNNING) {
		printf("it has no summary yet: 'aibox tasks log -f %s' follows it\n", ti->id);
		goto out;
	}

	buf_addf(&bpath, "%s/%s", s->td.dir.buf, guest_results[RESULT_BUNDLE].name);
	buf_addf(&branch, "aibox/task-%s", s->td.name);
	in.bundle_path = bpath.buf;
	in.branch = branch.buf;
	{
		enum host_system sys;

		in.windows = host_system_get(&sys) == 0 && sys == HOST_WINDOWS;
	}
	/*
	 * The lines with the times aibox task printed them at: the record's
	 * (an older one has none: the start from the name, the end from its
	 * seconds).
	 */
	end = ti->start + (ti->has_seconds ? (time_t)(ti->seconds + 0.5) : 0);
	if (s->has_record && s->rec.start_commit[0]) {
		buf_reset(&line);
		task_start_line(&line, ti->id, s->rec.start_commit);
		out_write_at(1, s->rec.start_time ? s->rec.start_time : ti->start, "aibox", ti->id,
		             line.buf, line.len);
	}
	if (s->has_record && s->rec.end_time)
		end = s->rec.end_time;
	if (s->has_record) {
		in.result = s->rec.has_result ? &s->rec.result : NULL;
		in.report = s->rec.has_report ? &s->rec.report : NULL;
		in.report_why = s->rec.report_why;
		in.end_commit = s->rec.end_commit[0] ? s->rec.end_commit : NULL;
		in.no_changes = s->rec.no_changes;
		finished = !strcmp(s->rec.state, "finished");
		why = s->rec.why;
	} else {
		in.result = s->has_result ? &s->res : NULL;
		in.report_why = "the task has no record of its end (summary.json)";
		finished = ti->finished > 0;
	}
	task_summary_print(1, end, ti->id, &in, finished, why);
out:
	buf_release(&line);
	buf_release(&time_s);
	buf_release(&bpath);
	buf_release(&branch);
}

static json_t *shown_json(struct shown *s)
{
	json_t *o;
	struct buf b = BUF_INIT;
	const char *project = strrchr(s->td.project_dir.buf, '/');

	o = task_info_json(&s->ti, project ? project + 1 : s->td.project_dir.buf, s->td.dir.buf,
	                   -1);
	/* The record as aibox task --json printed it (read again: it passed task_record_parse). */
	if (s->has_record && task_file_read(s->td.dfd, "summary.json", TASK_RECORD_MAX, &b) > 0)
		json_object_set_new(o, "record", json_loadb(b.buf, b.len, 0, NULL));
	else
		json_object_set_new(o, "record", json_null());
	buf_release(&b);
	return o;
}

/* o printed as show --json prints, its reference dropped. */
static void print_json(json_t *o)
{
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
	                               JSON_REAL_PRECISION(12));

	if (text)
		puts(text);
	free(text);
	json_decref(o);
}

/*
 * arg shown (after waiting, with wait): printed, or its JSON object added
 * to array when array is not NULL.  The task's exit status (1 for one out
 * of 0 to 2).
 */
static int show_one_to(struct shown *s, const char *arg, int json, int wait, json_t *array)
{
	int code;

	open_task(s, arg);
	if (wait)
		wait_ended(s);
	read_facts(s);
	if (array)
		json_array_append_new(array, shown_json(s));
	else if (json)
		print_json(shown_json(s));
	else
		print_text(s);
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write the summary");
	if (s->has_record)
		task_record_release(&s->rec);
	if (s->has_result)
		result_release(&s->res);
	code = s->ti.exit_code >= 0 && s->ti.exit_code <= 2 ? s->ti.exit_code : 1;
	task_info_release(&s->ti);
	task_dir_release(&s->td);
	return code;
}

static int show_one(struct shown *s, const char *arg, int json, int wait)
{
	return show_one_to(s, arg, json, wait, NULL);
}

/*
 * Whether arg names a group of more than one attempt (an id no task has,
 * task_lookup()'s rule): then dirs holds their folders.
 */
static int group_of(const char *arg, struct strvec *dirs)
{
	struct buf dir = BUF_INIT, pdir = BUF_INIT, err = BUF_INIT;
	int group = task_lookup(arg, &dir, &pdir, dirs, &err) == TASK_LOOKUP_GROUP && dirs->nr > 1;

	if (!group)
		strvec_clear(dirs);
	buf_release(&dir);
	buf_release(&pdir);
	buf_release(&err);
	return group;
}

/*
 * show --wait GROUP (docs/tasks.md, "Several attempts"): each attempt
 * waited for and shown in turn (a detached one checked here once its job
 * ended), then the group's line; exit 0 when one finished, 2 when none
 * started, else 1, as aibox task --attempts exits.
 */
static int show_group(const char *gid, struct strvec *dirs, int json)
{
	json_t *array = json ? json_array() : NULL;
	struct buf line = BUF_INIT;
	int any_ok = 0, all_usage = 1;

	for (size_t i = 0; i < dirs->nr; i++) {
		struct shown s = {.td = TASK_DIR_INIT, .why = BUF_INIT, .problem = BUF_INIT};
		int code;

		if (i && !json)
			putchar('\n');
		code = show_one_to(&s, dirs->v[i], json, 1, array);
		any_ok |= code == 0;
		all_usage &= code == 2;
		buf_release(&s.why);
		buf_release(&s.problem);
	}
	if (json) {
		print_json(array);
	} else {
		task_group_line(gid, (const char *const *)dirs->v, dirs->nr, &line);
		printf("\n%s\n", line.buf);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write the summary");
	buf_release(&line);
	strvec_clear(dirs);
	return any_ok ? 0 : all_usage ? 2 : 1;
}

int main(int argc, char **argv)
{
	struct shown s = {.td = TASK_DIR_INIT, .why = BUF_INIT, .problem = BUF_INIT};
	struct strvec dirs = STRVEC_INIT;
	const char *arg = NULL;
	int json = 0;
	static const struct opt_spec options[] = {
	    {"json", 0, OPT_FLAG, NULL, 256,
	     "one JSON object, keys in docs/json.md"}, /* flags bit 0 */
	    {"wait", 0, OPT_FLAG, NULL, 257,
	     "wait until the task is neither queued nor running, then show it"}, /* flags bit 1 */
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf bad = BUF_INIT;
	unsigned flags = 0;
	int ret, code;

	tool_init(argc, argv);
	if ((ret = task_args(argc, argv, options, &flags, &arg, &bad)) == 2)
		opt_describe_exit(options);
	if (ret == 1) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (ret < 0) {
		error("%s", bad.buf);
		usage_die(usage_text);
	}
	json = flags & 1;
	if ((flags & 2) && group_of(arg, &dirs))
		return show_group(arg, &dirs, json);
	code = show_one(&s, arg, json, flags & 2);
	buf_release(&s.why);
	buf_release(&s.problem);
	return flags & 2 ? code : 0;
}
