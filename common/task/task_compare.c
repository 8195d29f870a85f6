/* The attempts of one group side by side (task/task_compare.h, docs/tasks.md). */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/paths.h"
#include "base/rmtree.h"
#include "base/spawn.h"
#include "config/project.h"
#include "task/task_compare.h"
#include "task/task_record.h"
#include "task/task_results.h"
#include "vm/host_system.h"
#include "base/banned.h"

/* The output of one git command is a few lines; a diff's numstat is one line a file. */
#define GIT_OUT_MAX (16 << 20)

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int task_group_attempts(const char *arg, char gid[TASK_ID_LEN + 1], struct strvec *dirs,
                        struct buf *err)
{
	struct buf dir = BUF_INIT, pdir = BUF_INIT, why = BUF_INIT;
	int ret = 0, dfd;

	/* A task's id names the task, a group's the group, as everywhere (task_lookup()). */
	if ((ret = task_lookup(arg, &dir, &pdir, dirs, err)) < 0)
		goto out;
	if (ret == TASK_LOOKUP_GROUP) {
		memcpy(gid, arg, TASK_ID_LEN + 1);
		ret = 0;
		goto sort;
	}
	dfd = open(dir.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", dir.buf, strerror(errno));
		goto out;
	}
	if (!task_group_read(dfd, gid)) {
		close(dfd);
		ret = -EINVAL;
		buf_addf(err, "'%s' is not an attempt of a group (aibox task --attempts N)", arg);
		goto out;
	}
	close(dfd);
	task_group_dirs_in(pdir.buf, gid, dirs);
sort:
	qsort(dirs->v, dirs->nr, sizeof(*dirs->v), cmp_str);
out:
	buf_release(&dir);
	buf_release(&pdir);
	buf_release(&why);
	return ret;
}

/* The time one row's git commands have together. */
struct budget {
	int seconds;
	int64_t deadline; /* clock_ms() */
};

/*
 * git args... in dir (GIT_DIR; NULL: none), its stdout into out, done
 * within the budget or killed.  0, or -1 with the reason in problem.
 */
static int git_in(const char *dir, const struct budget *bd, struct buf *out, struct buf *problem,
                  const char *const *args)
{
	struct spawn sp = SPAWN_INIT;
	int64_t left = bd->deadline - clock_ms();
	int ret;

	strvec_pushl(&sp.args, "git", "-c", "core.hooksPath=/dev/null", NULL);
	for (size_t i = 0; args[i]; i++)
		strvec_push(&sp.args, args[i]);
	if (dir)
		strvec_pushf(&sp.env, "GIT_DIR=%s", dir);
	strvec_push(&sp.env, "GIT_CONFIG_NOSYSTEM=1");
	strvec_push(&sp.env, "GIT_TERMINAL_PROMPT=0");
	sp.err = SPAWN_NULL;
	sp.pdeathsig = SIGKILL;
	ret = left > 0 ? spawn_capture_within(&sp, out, GIT_OUT_MAX, (int)left) : -ETIMEDOUT;
	spawn_clear(&sp);
	if (ret == -ETIMEDOUT) {
		buf_addf(problem, "git %s: not done within %d s: not counted", args[0],
		         bd->seconds);
		return -1;
	}
	if (ret != 0) {
		buf_addf(problem, "git %s: %s", args[0], ret < 0 ? strerror(-ret) : "it failed");
		return -1;
	}
	return 0;
}

/* A count from git's output: digits only, within a long. */
static int parse_count(const char *s, size_t n, long *out)
{
	long v = 0;

	if (!n || n > 18)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* What the walk of two trees found so far, and the time it has (the row's budget). */
struct file_count {
	size_t files;
	const struct budget *bd;
	unsigned steps;
	int stop; /* 1: past TASK_COMPARE_FILES_MAX, 2: the deadline, 3: too deep, -1: unreadable */
};

/* Trees nested deeper than this are not walked (git's core.maxTreeDepth is 2048). */
#define TREE_DEPTH_MAX 4096

static int walk_trees(git_repository *repo, const git_tree *a, const git_tree *b, int depth,
                      struct file_count *fc);

/* The entry e (a tree walked with nothing on the other side) changed. */
static int walk_one(git_repository *repo, const git_tree_entry *e, int side, int depth,
                    struct file_count *fc)
{
	git_tree *t = NULL;
	int r;

	if (git_tree_entry_type(e) != GIT_OBJECT_TREE) {
		if (++fc->files > TASK_COMPARE_FILES_MAX)
			fc->stop = 1;
		return fc->stop ? -1 : 0;
	}
	if (git_tree_lookup(&t, repo, git_tree_entry_id(e)) < 0) {
		fc->stop = -1;
		return -1;
	}
	r = side ? walk_trees(repo, NULL, t, depth + 1, fc)
	         : walk_trees(repo, t, NULL, depth + 1, fc);
	git_tree_free(t);
	return r;
}

/*
 * The files that differ between trees a and b (either NULL: empty), as git
 * diff --no-renames counts them, into fc: a walk of our own, not
 * git_diff_tree_to_tree(), whose iterator goes through any number of empty
 * trees in one step, with no callback to stop it.  Every entry counts
 * toward the deadline, a tree too.  0, or -1 with fc->stop saying why.
 */
static int walk_trees(git_repository *repo, const git_tree *a, const git_tree *b, int depth,
                      struct file_count *fc)
{
	size_t na = a ? git_tree_entrycount(a) : 0, nb = b ? git_tree_entrycount(b) : 0;
	size_t i = 0, j = 0;

	if (depth > TREE_DEPTH_MAX) {
		fc->stop = 3;
		return -1;
	}
	while (i < na || j < nb) {
		const git_tree_entry *ea = i < na ? git_tree_entry_byindex(a, i) : NULL;
		const git_tree_entry *eb = j < nb ? git_tree_entry_byindex(b, j) : NULL;
		int cmp = !ea ? 1 : !eb ? -1 : git_tree_entry_cmp(ea, eb);

		if (!(++fc->steps % 4096) && clock_ms() >= fc->bd->deadline) {
			fc->stop = 2;
			return -1;
		}
		if (cmp < 0) {
			i++;
			if (walk_one(repo, ea, 0, depth, fc) < 0)
				return -1;
		} else if (cmp > 0) {
			j++;
			if (walk_one(repo, eb, 1, depth, fc) < 0)
				return -1;
		} else {
			i++, j++;
			if (git_oid_equal(git_tree_entry_id(ea), git_tree_entry_id(eb)) &&
			    git_tree_entry_filemode(ea) == git_tree_entry_filemode(eb))
				continue;
			if (git_tree_entry_type(ea) == GIT_OBJECT_TREE &&
			    git_tree_entry_type(eb) == GIT_OBJECT_TREE) {
				git_tree *ta = NULL, *tb = NULL;
				int r = -1;

				if (git_tree_lookup(&ta, repo, git_tree_entry_id(ea)) < 0 ||
				    git_tree_lookup(&tb, repo, git_tree_entry_id(eb)) < 0)
					fc->stop = -1;
				else
					r = walk_trees(repo, ta, tb, depth + 1, fc);
				git_tree_free(ta);
				git_tree_free(tb);
				if (r < 0)
					return -1;
			} else {
				/* a file changed is one; a file that became a tree, both sides */
				int both = (git_tree_entry_type(ea) == GIT_OBJECT_TREE) !=
				           (git_tree_entry_type(eb) == GIT_OBJECT_TREE);

				if (walk_one(repo, ea, 0, depth, fc) < 0 ||
				    (both && walk_one(repo, eb, 1, depth, fc) < 0))
					return -1;
			}
		}
	}
	return 0;
}

/*
 * Whether the diff of the row's start and end commits in the repository
 * git_dir names at most TASK_COMPARE_FILES_MAX files: 0, else -1 with the
 * reason in the row's problem.  Trees may name each other many times over,
 * so a pack of a few KiB can name a hundred million files, or a billion
 * empty trees; git diff holds each file's pair in memory before it prints
 * the first.  The walk reads trees only, stops at the bound, and is held to
 * the row's budget (bd) as its git commands are.
 */
static int files_bounded(const char *git_dir, const struct budget *bd, struct task_compare_row *row)
{
	const char *ids[2] = {row->start_commit, row->end_commit};
	git_repository *repo = NULL;
	git_commit *commit = NULL;
	git_tree *trees[2] = {NULL, NULL};
	struct file_count fc = {0, bd, 0, 0};
	int ret = -1;

	git_libgit2_init();
	if (git_repository_open_bare(&repo, git_dir) < 0) {
		buf_addstr(&row->problem, "cannot open the commits' repository");
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		git_oid oid;

		if (git_oid_fromstr(&oid, ids[i]) < 0 ||
		    git_commit_lookup(&commit, repo, &oid) < 0 ||
		    git_commit_tree(&trees[i], commit) < 0) {
			buf_addf(&row->problem, "cannot read the commit %s", ids[i]);
			goto out;
		}
		git_commit_free(commit);
		commit = NULL;
	}
	if (!walk_trees(repo, trees[0], trees[1], 0, &fc))
		ret = 0;
	else if (fc.stop == 1)
		buf_addf(&row->problem, "more than %d files changed: not counted",
		         TASK_COMPARE_FILES_MAX);
	else if (fc.stop == 2)
		buf_addf(&row->problem, "the files changed: not counted within %d s", bd->seconds);
	else if (fc.stop == 3)
		buf_addf(&row->problem, "trees nested more than %d deep: not counted",
		         TREE_DEPTH_MAX);
	else
		buf_addstr(&row->problem, "cannot compare the commits' trees");
out:
	git_tree_free(trees[0]);
	git_tree_free(trees[1]);
	git_commit_free(commit);
	git_repository_free(repo);
	return ret;
}

/* --numstat lines "ADDED\tREMOVED\tPATH" ('-' for a binary file): the files and the sums. */
static int numstat(const struct buf *b, struct task_compare_row *row)
{
	const char *p = b->buf, *end = b->buf + b->len;

	row->files = row->added = row->removed = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *t1 = memchr(p, '\t', (size_t)((nl ? nl : end) - p)), *t2;
		long a = 0, r = 0;

		if (!nl || !t1 || !(t2 = memchr(t1 + 1, '\t', (size_t)(nl - t1 - 1))))
			return -1;
		if (!(t1 - p == 1 && *p == '-') && parse_count(p, (size_t)(t1 - p), &a) < 0)
			return -1;
		if (!(t2 - t1 - 1 == 1 && t1[1] == '-') &&
		    parse_count(t1 + 1, (size_t)(t2 - t1 - 1), &r) < 0)
			return -1;
		row->files++;
		row->added += a;
		row->removed += r;
		p = nl + 1;
	}
	return 0;
}

/*
 * The commits and the diff of the end commit against the start: the checked
 * changes.bundle fetched into a temporary bare repository that borrows the
 * checkout's objects (the bundle's prerequisite, the start commit, is there).
 */
static void diff_figures(const char *project_dir, int seconds, struct task_compare_row *row)
{
	struct budget bd = {seconds, clock_ms() + (int64_t)seconds * 1000};
	struct buf co = BUF_INIT, tmp = BUF_INIT, out = BUF_INIT, path = BUF_INIT, range = BUF_INIT;
	const char *tmpdir = temp_dir();
	struct spawn sp = SPAWN_INIT;
	int made = 0;

	if (project_read_checkout(project_dir, &co) < 0) {
		buf_addstr(&row->problem, "the project's checkout is not known");
		goto out;
	}
	buf_addf(&tmp, "%s/aibox-compare-XXXXXX", tmpdir);
	if (!mkdtemp(tmp.buf)) {
		buf_addf(&row->problem, "cannot make a folder in '%s': %s", tmpdir,
		         strerror(errno));
		goto out;
	}
	made = 1;
	strvec_pushl(&sp.args, "git", "init", "-q", "--bare", tmp.buf, NULL);
	sp.err = SPAWN_NULL;
	if (spawn_run(&sp) != 0) {
		buf_addstr(&row->problem, "git init: it failed");
		goto out;
	}
	/* The checkout's objects, where git keeps them (a linked worktree's are the common dir's).
	 */
	if (git_in(NULL, &bd, &out, &row->problem,
	           (const char *const[]){"-C", co.buf, "rev-parse", "--path-format=absolute",
	                                 "--git-common-dir", NULL}) < 0)
		goto out;
	buf_rtrim(&out);
	buf_addstr(&out, "/objects\n");
	buf_addf(&path, "%s/objects/info/alternates", tmp.buf);
	if (buf_write_file(&out, path.buf, 0644) < 0) {
		buf_addf(&row->problem, "cannot write '%s'", path.buf);
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/%s", row->dir.buf, guest_results[RESULT_BUNDLE].name);
	buf_reset(&out);
	if (git_in(tmp.buf, &bd, &out, &row->problem,
	           (const char *const[]){"fetch", "-q", path.buf, GUEST_BRANCH_REF, NULL}) < 0)
		goto out;
	buf_addf(&range, "%s..%s", row->start_commit, row->end_commit);
	buf_reset(&out);
	if (git_in(tmp.buf, &bd, &out, &row->problem,
	           (const char *const[]){"rev-list", "--count", range.buf, NULL}) < 0)
		goto out;
	buf_rtrim(&out);
	if (parse_count(out.buf, out.len, &row->commits) < 0) {
		buf_addstr(&row->problem, "git rev-list: not a count");
		goto out;
	}
	if (files_bounded(tmp.buf, &bd, row) < 0)
		goto out;
	buf_reset(&out);
	if (git_in(tmp.buf, &bd, &out, &row->problem,
	           (const char *const[]){"diff", "--numstat", "--no-renames", "--no-ext-diff",
	                                 "--no-textconv", row->start_commit, row->end_commit,
	                                 NULL}) < 0)
		goto out;
	if (numstat(&out, row) < 0) {
		buf_addstr(&row->problem, "git diff --numstat: a line not understood");
		goto out;
	}
	row->has_diff = 1;
out:
	if (made)
		rmtree_at(AT_FDCWD, tmp.buf, NULL, NULL);
	spawn_clear(&sp);
	buf_release(&co);
	buf_release(&tmp);
	buf_release(&out);
	buf_release(&path);
	buf_release(&range);
}

void task_compare_row_read(const char *dir, int seconds, struct task_compare_row *row)
{
	struct buf b = BUF_INIT, err = BUF_INIT, pdir = BUF_INIT, tasks = BUF_INIT;
	const char *slash = strrchr(dir, '/');
	struct task_record rec;
	int dfd = -1, tfd = -1, ret;

	*row = (struct task_compare_row){.ti = TASK_INFO_INIT,
	                                 .dir = BUF_INIT,
	                                 .fetch = BUF_INIT,
	                                 .problem = BUF_INIT,
	                                 .cap_line = BUF_INIT,
	                                 .check_tail = BUF_INIT};
	buf_addstr(&row->dir, dir);
	if (!slash || slash - dir < 6) /* task_group_attempts() gives PROJECT/tasks/NAME */
		BUG("task_compare_row_read: '%s' is not in a tasks folder", dir);
	buf_add(&tasks, dir, (size_t)(slash - dir));
	buf_add(&pdir, dir, (size_t)(slash - dir - 6));
	if ((tfd = open(tasks.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		ret = -errno;
	else
		ret = task_info_read(tfd, slash + 1, time(NULL), &row->ti);
	if (ret == 0 &&
	    (dfd = openat(tfd, slash + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		ret = -errno;
	if (ret == -ENOENT) {
		/* removed since the group was listed (aibox tasks clean): no state to show */
		task_info_release(&row->ti);
		row->ti = (struct task_info)TASK_INFO_INIT;
		if (strlen(slash + 1) == TASK_NAME_LEN)
			memcpy(row->ti.id, slash + 1 + TASK_NAME_LEN - TASK_ID_LEN,
			       TASK_ID_LEN + 1);
		row->gone = 1;
		buf_addstr(&row->problem, TASK_COMPARE_GONE);
		goto out;
	}
	if (ret < 0) {
		buf_addf(&row->problem, "cannot read the task: %s", strerror(-ret));
		goto out;
	}
	if (task_file_read(dfd, "summary.json", TASK_RECORD_MAX, &b) <= 0)
		goto out; /* running, or killed: task_info says which */
	if (task_record_parse(b.buf, b.len, &rec, &err) < 0) {
		buf_add(&row->problem, err.buf, err.len);
		goto out;
	}
	row->has_record = 1;
	memcpy(row->start_commit, rec.start_commit, sizeof(row->start_commit));
	memcpy(row->end_commit, rec.end_commit, sizeof(row->end_commit));
	if (rec.has_report && rec.report.usage.present) {
		row->has_spend = 1;
		row->spend_nano = rec.report.usage.nano;
		row->capped = rec.report.usage.capped;
		usage_capped_line(&row->cap_line, &rec.report.usage);
	}
	if (rec.has_result && rec.result.has_check) {
		row->has_check = 1;
		row->check_timed_out = rec.result.check.timed_out;
		row->check_exit = rec.result.check.exit_code;
		row->check_seconds = rec.result.check.seconds;
		buf_addstr(&row->check_tail, rec.result.check.tail);
	}
	task_record_release(&rec);
	if (row->end_commit[0] && row->start_commit[0]) {
		struct summary_in in = {0};
		struct buf branch = BUF_INIT, bundle = BUF_INIT;
		enum host_system sys = HOST_LINUX;

		host_system_get(&sys);
		buf_addf(&bundle, "%s/%s", dir, guest_results[RESULT_BUNDLE].name);
		buf_addf(&branch, GUEST_BRANCH "-%s", slash + 1);
		in.end_commit = row->end_commit;
		in.bundle_path = bundle.buf;
		in.branch = branch.buf;
		in.windows = sys == HOST_WINDOWS;
		summary_fetch_command(&in, &row->fetch);
		buf_release(&branch);
		buf_release(&bundle);
		diff_figures(pdir.buf, seconds, row);
	}
out:
	if (dfd >= 0)
		close(dfd);
	if (tfd >= 0)
		close(tfd);
	buf_release(&b);
	buf_release(&err);
	buf_release(&pdir);
	buf_release(&tasks);
}

const char *task_compare_state(const struct task_compare_row *row)
{
	return row->gone ? "gone" : task_state_name(row->ti.state);
}

void task_compare_row_release(struct task_compare_row *row)
{
	task_info_release(&row->ti);
	buf_release(&row->dir);
	buf_release(&row->fetch);
	buf_release(&row->problem);
	buf_release(&row->check_tail);
	buf_release(&row->cap_line);
}
