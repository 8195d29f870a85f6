/*
 * aibox tasks clean [--all] [--older-than DURATION]
 *
 * Removes what ended tasks of the current checkout's project leave behind:
 * start.bundle (the only file a task cannot remove itself, being locked down
 * by then) with what writing it left if aibox was killed meanwhile, or with --all the whole folder
 * and its lock; locks of tasks that failed to start; and the folder of a group of attempts
 * whose aibox was killed (common/task/task_group.h).  A task has ended when its lock is free
 * (common/config/project.h, task_check) and, for a detached Slurm task, once its
 * results were checked (common/task/slurm_detach.h).  Everything is done relative to the
 * tasks/ folder's fd, and nothing is followed through a symlink
 * (common/base/rmtree.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/paths.h"
#include "config/project.h"
#include "base/rmtree.h"
#include "task/slurm_detach.h"
#include "task/task_group.h"
#include "base/strvec.h"
#include "base/taskid.h"
#include "base/guest_abi.h"
#include "base/banned.h"

/* A lock without its folder is left this long: its task may be starting. */
#define ORPHAN_LOCK_AGE 60

static const char usage_text[] =
    "usage: aibox tasks clean [--all] [--older-than DURATION]\n"
    "\n"
    "Remove what ended tasks of this checkout's project leave behind.\n"
    "\n"
    "    --all                  remove ended tasks' whole folders and locks, results\n"
    "                           included (default: only their start.bundle)\n"
    "    --older-than DURATION  only tasks that started longer ago, like 720h or 1h30m\n"
    "    -h, --help             show this help\n"
    "\n"
    "Running tasks are left alone.  Exit status: 0 cleaned, 1 something could not be\n"
    "checked or cleaned (named on stderr), 2 usage or error.\n";

struct clean {
	int all;
	int64_t older_ms; /* -1: no limit */
	time_t now;
	int tasks_fd;
	const char *tasks_dir;
	uint64_t freed;
	size_t removed, running;
	int failed;
};

static int old_enough(struct clean *c, const char *name)
{
	time_t start;

	if (c->older_ms < 0)
		return 1;
	if (task_name_parse(name, &start, NULL) < 0)
		return 0;
	/* A start in the future (a clock set back) is not older than anything. */
	return start <= c->now && (int64_t)(c->now - start) * 1000 > c->older_ms;
}

static void report_removed(struct clean *c, const char *what, uint64_t bytes)
{
	struct buf size = BUF_INIT;

	format_bytes(&size, bytes);
	printf("removed %s/%s (%s)\n", c->tasks_dir, what, size.buf);
	buf_release(&size);
	c->freed += bytes;
	c->removed++;
}

/*
 * What goes with start.bundle: its pack's index (start.idx, for the guest's
 * prepared clone, docs/init-task.md) and what writing them leaves when aibox
 * is killed (common/git/bundle_write.h).
 */
static int bundle_leftover(const char *name)
{
	if (!strcmp(name, GUEST_FILE_START_IDX))
		return 1;
	if (!strcmp(name, GUEST_FILE_START_BUNDLE ".lock")) /* git's partial output */
		return 1;
	if (strncmp(name, ".start-bundle.", 14) || strlen(name) != 20)
		return 0;
	for (const char *p = name + 14; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

static void remove_bundle(struct clean *c, const char *name)
{
	struct strvec leftovers = STRVEC_INIT;
	struct buf rel = BUF_INIT, where = BUF_INIT;
	struct dirent *de;
	struct stat st;
	int dfd, lfd;
	DIR *d;

	dfd = openat(c->tasks_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		error("cannot clean '%s/%s': %s", c->tasks_dir, name, strerror(errno));
		c->failed = 1;
		return;
	}
	buf_addf(&rel, "%s/" GUEST_FILE_START_BUNDLE, name);
	if (fstatat(dfd, GUEST_FILE_START_BUNDLE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT) {
			error("cannot clean '%s/%s': %s", c->tasks_dir, rel.buf, strerror(errno));
			c->failed = 1;
		}
	} else if (S_ISDIR(st.st_mode)) {
		error("cannot clean '%s/%s': is a folder, not a bundle", c->tasks_dir, rel.buf);
		c->failed = 1;
	} else if (unlinkat(dfd, GUEST_FILE_START_BUNDLE, 0) < 0) {
		error("cannot clean '%s/%s': cannot remove start.bundle: %s", c->tasks_dir, name,
		      strerror(errno));
		c->failed = 1;
	} else {
		report_removed(c, rel.buf, st.st_nlink <= 1 ? (uint64_t)st.st_blocks * 512 : 0);
	}

	lfd = dup(dfd);
	if (lfd < 0 || !(d = fdopendir(lfd))) {
		if (lfd >= 0)
			close(lfd);
		error("cannot clean '%s/%s': %s", c->tasks_dir, name, strerror(errno));
		c->failed = 1;
		goto out;
	}
	while ((de = readdir(d)))
		if (bundle_leftover(de->d_name))
			strvec_push(&leftovers, de->d_name);
	closedir(d);
	for (size_t i = 0; i < leftovers.nr; i++) {
		struct rmtree_stats rs = {0};
		int ret;

		buf_reset(&where);
		ret = rmtree_at(dfd, leftovers.v[i], &rs, &where);
		if (ret < 0) {
			error("cannot clean '%s/%s': cannot remove '%s/%s/%s': %s", c->tasks_dir,
			      name, c->tasks_dir, name, where.buf, strerror(-ret));
			c->failed = 1;
			c->freed += rs.bytes;
			continue;
		}
		buf_reset(&rel);
		buf_addf(&rel, "%s/%s", name, leftovers.v[i]);
		report_removed(c, rel.buf, rs.bytes);
	}
out:
	close(dfd);
	strvec_clear(&leftovers);
	buf_release(&rel);
	buf_release(&where);
}

static void remove_task(struct clean *c, const char *name, int have_lock)
{
	struct rmtree_stats st = {0};
	struct buf where = BUF_INIT, rel = BUF_INIT;
	int ret = rmtree_at(c->tasks_fd, name, &st, &where);

	if (ret < 0) {
		error("cannot clean '%s/%s': cannot remove '%s/%s': %s", c->tasks_dir, name,
		      c->tasks_dir, where.buf, strerror(-ret));
		c->failed = 1;
		c->freed += st.bytes;
		goto out;
	}
	buf_addf(&rel, "%s.lock", name);
	if (have_lock && unlinkat(c->tasks_fd, rel.buf, 0) < 0 && errno != ENOENT) {
		error("cannot clean '%s/%s': %s", c->tasks_dir, rel.buf, strerror(errno));
		c->failed = 1;
		have_lock = 0;
	}
	buf_reset(&rel);
	buf_addf(&rel, have_lock ? "%s/ and %s.lock" : "%s/", name, name);
	report_removed(c, rel.buf, st.bytes);
out:
	buf_release(&where);
	buf_release(&rel);
}

static void clean_task(struct clean *c, const char *name)
{
	int lock_fd = -1;
	int ret;

	if (!old_enough(c, name))
		return;
	ret = task_check(c->tasks_fd, name, &lock_fd);
	if (ret < 0) {
		error("cannot check '%s/%s': %s", c->tasks_dir, name, strerror(-ret));
		c->failed = 1;
		return;
	}
	if (ret == 0) {
		int dfd =
		    openat(c->tasks_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		/* A detached Slurm task not yet checked is queued, running or to be checked. */
		if (dfd >= 0 && slurm_detached_unchecked(dfd))
			ret = 1;
		if (dfd >= 0)
			close(dfd);
	}
	if (ret == 1) {
		if (lock_fd >= 0)
			close(lock_fd);
		c->running++;
		return;
	}
	if (c->all)
		remove_task(c, name, lock_fd >= 0);
	else
		remove_bundle(c, name);
	if (lock_fd >= 0)
		close(lock_fd);
}

/* A lock whose folder was never made: its task failed to start. */
static void clean_orphan_lock(struct clean *c, const char *lock, const char *folder)
{
	struct stat st;
	int fd;

	if (!old_enough(c, folder))
		return;
	if (fstatat(c->tasks_fd, lock, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return;
	if (st.st_mtime > c->now - ORPHAN_LOCK_AGE)
		return;
	fd = openat(c->tasks_fd, lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		error("cannot check '%s/%s': %s", c->tasks_dir, lock, strerror(errno));
		c->failed = 1;
		return;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK) {
			error("cannot check '%s/%s': %s", c->tasks_dir, lock, strerror(errno));
			c->failed = 1;
		}
		close(fd);
		return;
	}
	/* Made its folder after all (between our look and the lock)? Then it is a task. */
	if (fstatat(c->tasks_fd, folder, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
		close(fd);
		return;
	}
	if (unlinkat(c->tasks_fd, lock, 0) < 0) {
		if (errno != ENOENT) {
			error("cannot clean '%s/%s': %s", c->tasks_dir, lock, strerror(errno));
			c->failed = 1;
		}
	} else {
		report_removed(c, lock, 0);
	}
	close(fd);
}

/*
 * A group's folder (tasks/.group-GID, its one start bundle: docs/tasks.md,
 * "Several attempts") whose aibox was killed before it could remove it.
 */
static void clean_group_dir(struct clean *c, const char *name)
{
	struct rmtree_stats rs = {0};
	struct buf where = BUF_INIT;
	int ret = task_group_dir_left(c->tasks_fd, name, c->now, ORPHAN_LOCK_AGE);

	if (ret < 0) {
		error("cannot check '%s/%s': %s", c->tasks_dir, name, strerror(-ret));
		c->failed = 1;
	} else if (ret == 0) {
		/* not left behind: its group runs, or is too young to tell */
	} else if ((ret = rmtree_at(c->tasks_fd, name, &rs, &where)) < 0) {
		error("cannot clean '%s/%s': cannot remove '%s': %s", c->tasks_dir, name, where.buf,
		      strerror(-ret));
		c->failed = 1;
		c->freed += rs.bytes;
	} else {
		buf_reset(&where);
		buf_addf(&where, "%s/", name);
		report_removed(c, where.buf, rs.bytes);
	}
	buf_release(&where);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void clean_tasks(struct clean *c)
{
	struct strvec folders = STRVEC_INIT, locks = STRVEC_INIT, groups = STRVEC_INIT;
	struct dirent *de;
	int dfd = dup(c->tasks_fd);
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd)))
		die_errno("cannot read '%s'", c->tasks_dir);
	errno = 0;
	while ((de = readdir(d))) {
		struct stat st;

		if (task_name_valid(de->d_name)) {
			if (fstatat(c->tasks_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				strvec_push(&folders, de->d_name);
		} else if (task_lock_name_parse(de->d_name, NULL)) {
			strvec_push(&locks, de->d_name);
		} else if (!strncmp(de->d_name, ".group-", 7)) {
			strvec_push(&groups, de->d_name);
		}
		errno = 0;
	}
	if (errno)
		die_errno("cannot read '%s'", c->tasks_dir);
	closedir(d);
	qsort(folders.v, folders.nr, sizeof(*folders.v), cmp_str);
	qsort(locks.v, locks.nr, sizeof(*locks.v), cmp_str);

	for (size_t i = 0; i < folders.nr; i++)
		clean_task(c, folders.v[i]);
	for (size_t i = 0; i < locks.nr; i++) {
		char folder[TASK_NAME_LEN + 1];
		size_t j;

		task_lock_name_parse(locks.v[i], folder);
		for (j = 0; j < folders.nr && strcmp(folders.v[j], folder); j++)
			;
		if (j == folders.nr)
			clean_orphan_lock(c, locks.v[i], folder);
	}
	qsort(groups.v, groups.nr, sizeof(*groups.v), cmp_str);
	for (size_t i = 0; i < groups.nr; i++)
		clean_group_dir(c, groups.v[i]);
	strvec_clear(&folders);
	strvec_clear(&locks);
	strvec_clear(&groups);
}

static void parse_options(struct clean *c, int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"all", 0, OPT_FLAG, NULL, 'a', "remove ended tasks' whole folders and locks, results"},
	    {"older-than", 0, OPT_DURATION, "DURATION", 'o',
	     "only tasks that started longer ago, like 720h or 1h30m"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT;
	const char *v;
	int opt;

	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
		switch (opt) {
		case 'a':
			c->all = 1;
			break;
		case 'o':
			if (duration_arg("older-than", v, 0, DURATION_MAX_MS, &c->older_ms, &why) <
			    0)
				die("%s", why.buf);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_WORD:
			error("unexpected argument '%s'", v);
			usage_die(usage_text);
		default:
			error("%s", why.buf);
			usage_die(usage_text);
		}
	}
	if (optind < argc) {
		error("unexpected argument '%s'", argv[optind]);
		usage_die(usage_text);
	}
	buf_release(&why);
}

int main(int argc, char **argv)
{
	struct clean c = {.older_ms = -1, .tasks_fd = -1};
	struct project p = PROJECT_INIT;
	struct buf checkout = BUF_INIT, tasks = BUF_INIT, size = BUF_INIT;
	int ret;

	tool_init(argc, argv);
	parse_options(&c, argc, argv);
	{
		struct buf why = BUF_INIT;

		if (project_checkout_here(&checkout, &why) < 0)
			die("%s", why.buf);
		buf_release(&why);
	}
	ret = project_find(checkout.buf, &p);
	if (ret == -ENOENT) {
		printf("nothing to clean: this checkout has no aibox project\n");
		buf_release(&checkout);
		return 0;
	}
	if (ret < 0)
		die_err(ret, "cannot read the projects in '%s/projects'", aibox_home());

	buf_addf(&tasks, "%s/tasks", p.dir);
	c.tasks_dir = tasks.buf;
	c.now = time(NULL);
	c.tasks_fd = open(tasks.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.tasks_fd < 0) {
		if (errno != ENOENT)
			die_errno("cannot open '%s'", tasks.buf);
	} else {
		clean_tasks(&c);
		close(c.tasks_fd);
	}

	if (c.running)
		printf("left %zu running task%s alone\n", c.running, c.running == 1 ? "" : "s");
	if (!c.removed && !c.failed) {
		printf("nothing to clean\n");
	} else {
		format_bytes(&size, c.freed);
		printf("freed %s\n", size.buf);
	}
	fflush(stdout);
	project_release(&p);
	buf_release(&checkout);
	buf_release(&tasks);
	buf_release(&size);
	return c.failed ? EXIT_REFUSED : 0;
}
