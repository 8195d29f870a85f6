/*
 * aibox tasks list [--all] [--json]
 *
 * The tasks of the current checkout's project (every project's with --all),
 * newest first: what each folder already holds (common/task/task_info.h), never
 * waking a running task.  Text from a task folder is sanitized before it is
 * printed (common/base/out.h); --json gives one array (docs/json.md).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/out.h"
#include "base/paths.h"
#include "config/project.h"
#include "base/strvec.h"
#include "task/task_info.h"
#include "base/banned.h"

/* The prompt's first line is shown up to this many characters in the table. */
#define PROMPT_COLS 60

static const char usage_text[] = "usage: aibox tasks list [--all] [--json]\n"
                                 "\n"
                                 "List this checkout's project's tasks, newest first.\n"
                                 "\n"
                                 "    --all       every project's tasks\n"
                                 "    --json      one JSON array, keys in docs/json.md\n"
                                 "    -h, --help  show this help\n"
                                 "\n"
                                 "Exit status: 0 listed, 2 usage or error.\n";

struct lister {
	int all, json;
	int proj_w; /* the project column's width, with --all */
	time_t now;
	json_t *array;
	size_t count;
};

/* At most cols characters of s (UTF-8), "..." marking a cut. */
static void cut_cols(struct buf *out, const char *s, size_t cols)
{
	size_t chars = 0, i;

	for (i = 0; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == cols - 3 &&
		    strlen(s + i) > 3) {
			buf_add(out, s, i);
			buf_addstr(out, "...");
			return;
		}
	}
	buf_addstr(out, s);
}

static void format_start(char out[32], time_t t, int iso)
{
	struct tm tm;

	out[0] = '\0';
	if (!localtime_r(&t, &tm))
		return;
	strftime(out, 32, iso ? "%Y-%m-%dT%H:%M:%S%z" : "%Y-%m-%d %H:%M", &tm);
}

static void add_json(struct lister *l, const char *project, const char *folder,
                     const struct task_info *ti, int fetched)
{
	json_array_append_new(l->array, task_info_json(ti, project, folder, fetched));
}

static void print_header(struct lister *l)
{
	printf("%-6s  %-*s%s%-15s  %-16s  %8s  %5s  %6s  %-7s  %s\n", "ID", l->proj_w,
	       l->all ? "PROJECT" : "", l->all ? "  " : "", "STATE", "STARTED", "TIME", "TURNS",
	       "COST", "FETCHED", "PROMPT");
}

static void print_row(struct lister *l, const char *project, const struct task_info *ti,
                      int fetched)
{
	struct buf time_s = BUF_INIT, turns = BUF_INIT, cost = BUF_INIT, line = BUF_INIT,
	           prompt = BUF_INIT;
	char start[32];

	if (!l->count++)
		print_header(l);
	format_start(start, ti->start, 0);
	if (ti->has_seconds)
		duration_format(&time_s, (int64_t)(ti->seconds + 0.5) * 1000);
	else
		buf_addstr(&time_s, "-");
	if (ti->has_turns)
		buf_addf(&turns, "%ld", ti->turns);
	else
		buf_addstr(&turns, "-");
	if (ti->has_cost)
		buf_addf(&cost, "%.2f", ti->cost_usd);
	else
		buf_addstr(&cost, "-");
	if (ti->prompt_line)
		task_text_line(&line, ti->prompt_line);
	cut_cols(&prompt, line.buf, PROMPT_COLS);
	printf("%-6s  %-*s%s%-15s  %-16s  %8s  %5s  %6s  %-7s  %s\n", ti->id, l->proj_w,
	       l->all ? project : "", l->all ? "  " : "", task_state_name(ti->state), start,
	       time_s.buf, turns.buf, cost.buf,
	       !ti->end_commit[0] ? "-"
	       : fetched > 0      ? "yes"
	       : fetched == 0     ? "no"
	                          : "?",
	       prompt.buf);
	buf_release(&time_s);
	buf_release(&turns);
	buf_release(&cost);
	buf_release(&line);
	buf_release(&prompt);
}

static void list_project(struct lister *l, const char *project, const char *project_dir)
{
	struct strvec names = STRVEC_INIT;
	struct task_branches *tb = NULL;
	struct buf folder = BUF_INIT;
	int fd, ret;

	if ((ret = task_list_names(project_dir, &names, &fd)) < 0)
		die_err(ret, "cannot read '%s/tasks'", project_dir);
	if (names.nr)
		tb = task_branches_open(project_dir);
	for (size_t i = 0; i < names.nr; i++) {
		struct task_info ti;
		int fetched;

		buf_reset(&folder);
		buf_addf(&folder, "%s/tasks/%s", project_dir, names.v[i]);
		ret = task_info_read(fd, names.v[i], l->now, &ti);
		if (ret < 0) {
			/* Gone meanwhile (cleaned) is no error; anything else is said. */
			if (ret != -ENOENT)
				error("cannot read '%s/tasks/%s': %s", project_dir, names.v[i],
				      strerror(-ret));
			continue;
		}
		fetched = ti.end_commit[0] ? task_branches_has(tb, ti.name) : -1;
		if (l->json)
			add_json(l, project, folder.buf, &ti, fetched);
		else
			print_row(l, project, &ti, fetched);
		task_info_release(&ti);
	}
	if (fd >= 0)
		close(fd);
	task_branches_free(tb);
	strvec_clear(&names);
	buf_release(&folder);
}

static void parse_options(struct lister *l, int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"all", 0, OPT_FLAG, NULL, 'a', "every project's tasks"},
	    {"json", 0, OPT_FLAG, NULL, 'j', "one JSON array, keys in docs/json.md"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct strvec words = STRVEC_INIT;
	unsigned flags;

	opt_words_exit(argc, argv, options, 0, &flags, &words, usage_text);
	l->all = !!(flags & 1);
	l->json = !!(flags & 2);
	strvec_clear(&words);
}

int main(int argc, char **argv)
{
	struct lister l = {0};
	struct project p = PROJECT_INIT;

	tool_init(argc, argv);
	parse_options(&l, argc, argv);
	l.now = time(NULL);
	l.array = json_array();
	if (l.all) {
		struct strvec names = STRVEC_INIT;
		int ret = projects_list(&names);

		if (ret < 0)
			die_err(ret, "cannot read the projects in '%s/projects'", aibox_home());
		l.proj_w = 7;
		for (size_t i = 0; i < names.nr; i++)
			if (strlen(names.v[i]) > (size_t)l.proj_w)
				l.proj_w = (int)strlen(names.v[i]);
		/* Project by project: newest first across them would read every task first. */
		for (size_t i = 0; i < names.nr; i++) {
			if (project_by_name(names.v[i], &p) < 0)
				continue;
			list_project(&l, p.name, p.dir);
			project_release(&p);
		}
		strvec_clear(&names);
	} else {
		struct buf checkout = BUF_INIT, why = BUF_INIT;
		int ret;

		if (project_checkout_here(&checkout, &why) < 0)
			die("%s", why.buf);
		ret = project_find(checkout.buf, &p);
		if (ret < 0 && ret != -ENOENT)
			die_err(ret, "cannot read the projects in '%s/projects'", aibox_home());
		if (ret == 0)
			list_project(&l, p.name, p.dir);
		project_release(&p);
		buf_release(&checkout);
		buf_release(&why);
	}
	if (l.json) {
		char *text = json_dumps(l.array, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
		                                     JSON_REAL_PRECISION(12));

		if (text)
			puts(text);
		free(text);
	} else if (!l.count) {
		printf(l.all ? "no tasks\n" : "no tasks in this checkout's project\n");
	}
	json_decref(l.array);
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write the list");
	return 0;
}
