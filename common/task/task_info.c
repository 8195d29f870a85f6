#include "task/task_info.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/opt.h"
#include "base/out.h"
#include "config/project.h"
#include "task/task_results.h"
#include "task/slurm_detach.h"
#include "base/strvec.h"
#include "task/task_record.h"
#include "base/guest_abi.h"
#include "base/banned.h"

static const char *const state_names[] = {"running",   "finished", "not finished",
                                          "timed out", "killed",   "failed to start",
                                          "queued",    "unchecked"};

const char *task_state_name(enum task_state s)
{
	return state_names[s];
}

static int open_regular(int dirfd, const char *name, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return errno == ELOOP ? -EINVAL : -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

ssize_t task_file_read(int dirfd, const char *name, size_t max, struct buf *out)
{
	struct stat st;
	ssize_t n;
	int fd = open_regular(dirfd, name, &st);

	if (fd < 0)
		return fd;
	n = (uint64_t)st.st_size > max ? -EFBIG : buf_read_fd(out, fd, max);
	close(fd);
	return n;
}

/* The whole lines among the last max bytes of a regular file. */
static ssize_t file_tail(int dirfd, const char *name, size_t max, struct buf *out)
{
	struct stat st;
	ssize_t n;
	int fd = open_regular(dirfd, name, &st);

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max && lseek(fd, st.st_size - (off_t)max, SEEK_SET) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	n = buf_read_fd(out, fd, max);
	close(fd);
	if (n >= 0 && (uint64_t)st.st_size > max) {
		/* Cut in the middle of a line: that line is no line of the file. */
		const char *nl = memchr(out->buf, '\n', out->len);

		buf_consume(out, nl ? (size_t)(nl - out->buf) + 1 : out->len);
		n = (ssize_t)out->len;
	}
	return n;
}

/* The first max bytes of a regular file (all of a shorter one). */
static ssize_t file_head(int dirfd, const char *name, size_t max, struct buf *out)
{
	struct stat st;
	ssize_t n = 0;
	int fd = open_regular(dirfd, name, &st), err = 0;

	if (fd < 0)
		return fd;
	buf_grow(out, max);
	while (out->len < max) {
		n = read(fd, out->buf + out->len, max - out->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		if (n <= 0)
			break;
		buf_setlen(out, out->len + (size_t)n);
	}
	close(fd);
	return err ? err : (ssize_t)out->len;
}

static void problem(struct task_info *ti, const char *what, const char *why)
{
	struct buf b = BUF_INIT;

	if (ti->problem)
		return; /* the first one says enough */
	buf_addf(&b, "%s: %s", what, why);
	ti->problem = buf_detach(&b, NULL);
}

static void read_prompt(struct task_info *ti, int dfd)
{
	struct buf b = BUF_INIT;
	ssize_t n = file_head(dfd, GUEST_FILE_PROMPT, TASK_INFO_PROMPT_MAX + 1, &b);
	size_t len;

	if (n < 0) {
		if (n != -ENOENT)
			problem(ti, GUEST_FILE_PROMPT, strerror((int)-n));
		buf_release(&b);
		return;
	}
	len = strcspn(b.buf, "\n");
	if (len > TASK_INFO_PROMPT_MAX) {
		len = TASK_INFO_PROMPT_MAX;
		/* Not in the middle of a character. */
		while (len && ((unsigned char)b.buf[len] & 0xc0) == 0x80)
			len--;
		buf_setlen(&b, len);
		buf_addstr(&b, "...");
	} else {
		buf_setlen(&b, len);
	}
	ti->prompt_line = buf_detach(&b, NULL);
}

/*
 * aibox.log's last "total Xs exit N" line: aibox-task's alone, as every line
 * from the VM starts with its time (docs/task-host.md, "aibox.log").
 */
static void read_log_total(struct task_info *ti, int dfd)
{
	struct buf b = BUF_INIT;
	ssize_t n = file_tail(dfd, "aibox.log", TASK_INFO_LOG_TAIL, &b);
	const char *p = b.buf, *line = NULL;

	if (n < 0) {
		if (n != -ENOENT)
			problem(ti, "aibox.log", strerror((int)-n));
		buf_release(&b);
		return;
	}
	for (const char *q = p; q < b.buf + b.len; q++)
		if ((q == b.buf || q[-1] == '\n') && !strncmp(q, "total ", 6))
			line = q;
	if (line) {
		double s;
		int code;
		char c;

		if (sscanf(line, "total %lfs exit %d%c", &s, &code, &c) == 3 && c == '\n' &&
		    s >= 0 && s < 1e9 && code >= 0 && code <= 255) {
			ti->has_seconds = 1;
			ti->seconds = s;
			ti->exit_code = code;
		}
	}
	buf_release(&b);
}

/* The VM's facts: from the record, else from result.json. */
static void take_result(struct task_info *ti, const struct task_result *r)
{
	if (!r->has_claude)
		return;
	if ((ti->has_turns = r->claude.has_turns))
		ti->turns = r->claude.num_turns;
	if ((ti->has_cost = r->claude.has_cost))
		ti->cost_usd = r->claude.cost_usd;
}

/* A record's result says the task ran out of time: a step, or Claude Code. */
static int timed_out(const struct task_result *r)
{
	for (size_t i = 0; i < r->nsteps; i++)
		if (r->steps[i].name == r->failed_step && r->steps[i].status == RESULT_TIMEOUT)
			return 1;
	return r->has_claude && r->claude.has_ended_by && r->claude.ended_by == ENDED_TIMEOUT;
}

/* How a task with a record ended. */
static enum task_state record_state(const struct task_record *rec)
{
	if (!strcmp(rec->state, "finished"))
		return TASK_FINISHED;
	if (rec->exit_code == 2)
		return TASK_FAILED_TO_START;
	if (rec->why && !strncmp(rec->why, TASK_WHY_STOPPED, strlen(TASK_WHY_STOPPED)))
		return TASK_KILLED;
	if (rec->has_result && timed_out(&rec->result))
		return TASK_TIMED_OUT;
	return TASK_NOT_FINISHED;
}

static void read_record(struct task_info *ti, int dfd)
{
	struct buf b = BUF_INIT, err = BUF_INIT;
	struct task_record rec;
	struct task_result r;
	const char *name = guest_results[RESULT_JSON].name;
	ssize_t n = task_file_read(dfd, "summary.json", TASK_RECORD_MAX, &b);

	if (n > 0) {
		if (task_record_parse(b.buf, b.len, &rec, &err) < 0) {
			problem(ti, "summary.json", err.buf + strlen("summary.json: "));
			goto out;
		}
		ti->has_record = 1;
		ti->state = record_state(&rec);
		ti->finished = !strcmp(rec.state, "finished");
		ti->exit_code = rec.exit_code;
		ti->has_seconds = 1;
		ti->seconds = rec.seconds;
		memcpy(ti->end_commit, rec.end_commit, sizeof(ti->end_commit));
		if (rec.has_result)
			take_result(ti, &rec.result);
		task_record_release(&rec);
		goto out;
	}
	if (n == 0)
		ti->empty_record = 1; /* made at the start, never written: aibox task died */
	else if (n != -ENOENT)
		problem(ti, "summary.json", strerror((int)-n));
	/* No record (a task of an older aibox, or one whose aibox was killed). */
	buf_reset(&b);
	n = task_file_read(dfd, name, RESULT_JSON_MAX, &b);
	if (n > 0) {
		if (result_parse(b.buf, b.len, &r, &err) < 0) {
			/* result_parse()'s reason starts with the file's name. */
			problem(ti, name, err.buf + strlen(name) + strlen(": "));
		} else {
			take_result(ti, &r);
			result_release(&r);
		}
	} else if (n < 0 && n != -ENOENT) {
		problem(ti, name, strerror((int)-n));
	}
out:
	buf_release(&b);
	buf_release(&err);
}

int task_group_read(int dfd, char *group)
{
	struct buf b = BUF_INIT;
	int ok = task_file_read(dfd, "group", TASK_ID_LEN + 1, &b) == TASK_ID_LEN + 1 &&
	         b.buf[TASK_ID_LEN] == '\n';

	group[0] = '\0';
	if (ok) {
		b.buf[TASK_ID_LEN] = '\0';
		ok = task_id_valid(b.buf);
		if (ok)
			memcpy(group, b.buf, TASK_ID_LEN + 1);
	}
	buf_release(&b);
	return ok;
}

int task_info_read(int tasks_fd, const char *name, time_t now, struct task_info *ti)
{
	struct stat st;
	int lock_fd = -1, dfd, ret;

	*ti = (struct task_info)TASK_INFO_INIT;
	if (task_name_parse(name, &ti->start, ti->id) < 0)
		return -EINVAL;
	memcpy(ti->name, name, TASK_NAME_LEN + 1);
	ret = task_check(tasks_fd, name, &lock_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	if (ret < 0)
		return ret;
	dfd = openat(tasks_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	read_prompt(ti, dfd);
	task_group_read(dfd, ti->group);
	if (ret == 0) {
		struct buf why = BUF_INIT;
		int ds = slurm_detached_state(dfd, name, &why);

		if (why.len)
			problem(ti, "its Slurm job", why.buf);
		buf_release(&why);
		if (ds == SLURM_DETACHED_ENDED) {
			/* Its end is not known here until a submitting host checked it. */
			ti->state = TASK_UNCHECKED;
			close(dfd);
			return 0;
		}
		if (ds == SLURM_DETACHED_QUEUED || ds == SLURM_DETACHED_RUNNING) {
			ret = 1;
			if (ds == SLURM_DETACHED_QUEUED)
				ti->state = TASK_QUEUED;
		}
	}
	if (ret == 1) {
		if (ti->state != TASK_QUEUED)
			ti->state = TASK_RUNNING;
		ti->has_seconds = now >= ti->start;
		ti->seconds = ti->has_seconds ? (double)(now - ti->start) : 0;
		close(dfd);
		return 0;
	}
	read_record(ti, dfd);
	if (!ti->has_record)
		read_log_total(ti, dfd);
	if (!ti->has_record) {
		/* By aibox.log's last line, when aibox task lived to write it. */
		ti->finished = ti->exit_code == 0;
		ti->state = ti->finished                            ? TASK_FINISHED
		            : ti->exit_code == 2                    ? TASK_FAILED_TO_START
		            : ti->empty_record && ti->exit_code < 0 ? TASK_KILLED
		                                                    : TASK_NOT_FINISHED;
	}
	ti->cleaned =
	    fstatat(dfd, GUEST_FILE_START_BUNDLE, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
	close(dfd);
	return 0;
}

void task_info_release(struct task_info *ti)
{
	free(ti->prompt_line);
	free(ti->problem);
	ti->prompt_line = ti->problem = NULL;
}

static int cmp_down(const void *a, const void *b)
{
	return strcmp(*(const char *const *)b, *(const char *const *)a);
}

int task_list_names(const char *project_dir, struct strvec *names, int *tasks_fd)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	DIR *d;
	int fd, dup_fd;

	*tasks_fd = -1;
	buf_addf(&path, "%s/tasks", project_dir);
	fd = open(path.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	buf_release(&path);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if ((dup_fd = dup(fd)) < 0 || !(d = fdopendir(dup_fd))) {
		int e = -errno;

		if (dup_fd >= 0)
			close(dup_fd);
		close(fd);
		return e;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (task_name_valid(de->d_name) &&
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			strvec_push(names, de->d_name);
	}
	closedir(d);
	qsort(names->v, names->nr, sizeof(*names->v), cmp_down);
	*tasks_fd = fd;
	return 0;
}

/* The current checkout's project folder into out: 0, or -ENOENT when there is none. */
static int project_here(struct buf *out)
{
	struct buf co = BUF_INIT, why = BUF_INIT;
	struct project p = PROJECT_INIT;
	int ret = project_checkout_here(&co, &why);

	if (ret == 0 && (ret = project_find(co.buf, &p)) == 0)
		buf_addstr(out, p.dir);
	project_release(&p);
	buf_release(&co);
	buf_release(&why);
	return ret < 0 ? -ENOENT : 0;
}

/* Tasks in project_dir that arg names (a folder name or an id): pushed as "project_dir/name". */
static void find_in(const char *project_dir, const char *arg, struct strvec *found)
{
	struct strvec names = STRVEC_INIT;
	int fd;

	if (task_list_names(project_dir, &names, &fd) < 0)
		return;
	for (size_t i = 0; i < names.nr; i++) {
		const char *n = names.v[i];

		if (!strcmp(n, arg) || !strcmp(n + TASK_NAME_LEN - TASK_ID_LEN, arg))
			strvec_pushf(found, "%s/tasks/%s", project_dir, n);
	}
	if (fd >= 0)
		close(fd);
	strvec_clear(&names);
}

/* The attempts of the group arg in project_dir's tasks, appended to found as paths. */
static void find_group_in(const char *project_dir, const char *arg, struct strvec *found)
{
	struct strvec names = STRVEC_INIT;
	char group[TASK_ID_LEN + 1];
	int fd, dfd;

	if (task_list_names(project_dir, &names, &fd) < 0)
		return;
	for (size_t i = 0; i < names.nr; i++) {
		dfd = openat(fd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		if (task_group_read(dfd, group) && !strcmp(group, arg))
			strvec_pushf(found, "%s/tasks/%s", project_dir, names.v[i]);
		close(dfd);
	}
	if (fd >= 0)
		close(fd);
	strvec_clear(&names);
}

void task_group_dirs_in(const char *project_dir, const char *gid, struct strvec *dirs)
{
	find_group_in(project_dir, gid, dirs);
}

size_t task_group_dirs(const char *gid, struct strvec *dirs)
{
	struct strvec projects = STRVEC_INIT;
	struct buf here = BUF_INIT, pd = BUF_INIT;

	if (project_here(&here) == 0)
		find_group_in(here.buf, gid, dirs);
	if (!dirs->nr && projects_list(&projects) == 0)
		for (size_t i = 0; !dirs->nr && i < projects.nr; i++) {
			buf_reset(&pd);
			projects_dir(&pd);
			buf_addf(&pd, "/%s", projects.v[i]);
			find_group_in(pd.buf, gid, dirs);
		}
	strvec_clear(&projects);
	buf_release(&here);
	buf_release(&pd);
	return dirs->nr;
}

int task_lookup(const char *arg, struct buf *dir, struct buf *project_dir, struct strvec *group,
                struct buf *err)
{
	struct strvec found = STRVEC_INIT, projects = STRVEC_INIT;
	struct buf here = BUF_INIT, pd = BUF_INIT;
	int ret = TASK_LOOKUP_TASK;

	if (strchr(arg, '/')) {
		char *real = realpath(arg, NULL);
		const char *base, *slash;
		struct stat st;

		if (!real || stat(real, &st) < 0) {
			ret = -errno;
			buf_addf(err, "cannot find the task '%s': %s", arg, strerror(errno));
			free(real);
			goto out;
		}
		slash = strrchr(real, '/');
		base = slash + 1;
		if (!S_ISDIR(st.st_mode) || !task_name_valid(base) || slash - real < 6 ||
		    strncmp(slash - 6, "/tasks", 6)) {
			ret = -EINVAL;
			buf_addf(err, "'%s' is not a task folder", arg);
			free(real);
			goto out;
		}
		buf_addstr(dir, real);
		buf_add(project_dir, real, (size_t)(slash - 6 - real));
		free(real);
		goto out;
	}
	if (!task_name_valid(arg) && !task_id_valid(arg)) {
		ret = -EINVAL;
		buf_addf(err,
		         "'%s' is not a task: give its id (6 hex), its folder's name or its path",
		         arg);
		goto out;
	}
	if (project_here(&here) == 0)
		find_in(here.buf, arg, &found);
	if (!found.nr) {
		int r = projects_list(&projects);

		if (r < 0) {
			ret = r;
			buf_addf(err, "cannot read the projects: %s", strerror(-ret));
			goto out;
		}
		for (size_t i = 0; i < projects.nr; i++) {
			buf_reset(&pd);
			projects_dir(&pd);
			buf_addf(&pd, "/%s", projects.v[i]);
			find_in(pd.buf, arg, &found);
		}
	}
	/* No task of that id: the attempts of a group of that id, as one project's tasks. */
	if (!found.nr && task_id_valid(arg) && task_group_dirs(arg, group) > 0) {
		ret = TASK_LOOKUP_GROUP;
		goto out;
	}
	if (!found.nr) {
		ret = -ENOENT;
		buf_addf(err, "no task '%s' in any project", arg);
		goto out;
	}
	if (found.nr > 1) {
		ret = -EINVAL;
		buf_addf(err, "'%s' names %zu tasks, give the folder's path:", arg, found.nr);
		for (size_t i = 0; i < found.nr; i++)
			buf_addf(err, "\n  %s", found.v[i]);
		goto out;
	}
	buf_addstr(dir, found.v[0]);
	buf_add(project_dir, found.v[0], strlen(found.v[0]) - TASK_NAME_LEN - strlen("/tasks/"));
out:
	strvec_clear(&found);
	strvec_clear(&projects);
	buf_release(&here);
	buf_release(&pd);
	return ret;
}

int task_find(const char *arg, struct buf *dir, struct buf *project_dir, struct buf *err)
{
	struct strvec group = STRVEC_INIT;
	int ret = task_lookup(arg, dir, project_dir, &group, err);

	if (ret == TASK_LOOKUP_GROUP && group.nr == 1) {
		/* the one attempt a group has left */
		buf_addstr(dir, group.v[0]);
		buf_add(project_dir, group.v[0],
		        strlen(group.v[0]) - TASK_NAME_LEN - strlen("/tasks/"));
		ret = 0;
	} else if (ret == TASK_LOOKUP_GROUP) {
		ret = -EINVAL;
		buf_addf(err, "'%s' is the group of %zu attempts, give one of them:", arg,
		         group.nr);
		for (size_t i = 0; i < group.nr; i++)
			buf_addf(err, "\n  %s", group.v[i]);
	}
	strvec_clear(&group);
	return ret;
}

struct task_branches {
	git_repository *repo;
};

struct task_branches *task_branches_open(const char *project_dir)
{
	struct buf co = BUF_INIT;
	struct task_branches *tb = NULL;
	git_repository *repo;

	if (project_read_checkout(project_dir, &co) < 0)
		goto out;
	git_libgit2_init();
	if (git_repository_open_ext(&repo, co.buf, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		goto out;
	tb = xcalloc(1, sizeof(*tb));
	tb->repo = repo;
out:
	buf_release(&co);
	return tb;
}

int task_branches_has(struct task_branches *tb, const char *name)
{
	struct buf ref = BUF_INIT;
	git_reference *r = NULL;
	int ret;

	if (!tb)
		return -1;
	buf_addf(&ref, GUEST_BRANCH_REF "-%s", name);
	ret = git_reference_lookup(&r, tb->repo, ref.buf);
	git_reference_free(r);
	buf_release(&ref);
	if (ret == 0)
		return 1;
	return ret == GIT_ENOTFOUND ? 0 : -1;
}

void task_branches_free(struct task_branches *tb)
{
	if (!tb)
		return;
	git_repository_free(tb->repo);
	free(tb);
}

void task_text_line(struct buf *out, const char *s)
{
	struct buf b = BUF_INIT;

	out_sanitize(&b, s, strlen(s));
	buf_setlen(&b, strcspn(b.buf, "\n"));
	buf_add(out, b.buf, b.len);
	buf_release(&b);
}

static json_t *maybe_int(int has, long v)
{
	return has ? json_integer(v) : json_null();
}

/* A text from the folder, sanitized, as JSON; null for NULL. */
static json_t *text_or_null(const char *s, int first_line)
{
	struct buf b = BUF_INIT;
	json_t *v;

	if (!s)
		return json_null();
	if (first_line)
		task_text_line(&b, s);
	else
		out_sanitize(&b, s, strlen(s));
	v = json_stringn(b.buf, b.len);
	buf_release(&b);
	return v ? v : json_null();
}

json_t *task_info_json(const struct task_info *ti, const char *project, const char *folder,
                       int fetched)
{
	json_t *o = json_object();
	struct buf b = BUF_INIT;
	char start[32] = "";
	struct tm tm;

	if (localtime_r(&ti->start, &tm))
		strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%S%z", &tm);
	json_object_set_new(o, "id", json_string(ti->id));
	json_object_set_new(o, "group", ti->group[0] ? json_string(ti->group) : json_null());
	json_object_set_new(o, "name", json_string(ti->name));
	json_object_set_new(o, "project", json_string(project));
	json_object_set_new(o, "folder", text_or_null(folder, 0));
	json_object_set_new(o, "state", json_string(task_state_name(ti->state)));
	json_object_set_new(o, "finished",
	                    ti->finished < 0 ? json_null() : json_boolean(ti->finished));
	json_object_set_new(o, "exit", maybe_int(ti->exit_code >= 0, ti->exit_code));
	json_object_set_new(o, "cleaned", json_boolean(ti->cleaned));
	json_object_set_new(o, "started", json_string(start));
	json_object_set_new(o, "seconds", ti->has_seconds ? json_real(ti->seconds) : json_null());
	json_object_set_new(o, "turns", maybe_int(ti->has_turns, ti->turns));
	json_object_set_new(o, "cost_usd", ti->has_cost ? json_real(ti->cost_usd) : json_null());
	json_object_set_new(o, "end_commit",
	                    ti->end_commit[0] ? json_string(ti->end_commit) : json_null());
	buf_addf(&b, "aibox/task-%s", ti->name);
	json_object_set_new(o, "branch", json_string(b.buf));
	json_object_set_new(o, "fetched", fetched < 0 ? json_null() : json_boolean(fetched));
	json_object_set_new(o, "prompt", text_or_null(ti->prompt_line, 1));
	json_object_set_new(o, "problem", text_or_null(ti->problem, 0));
	buf_release(&b);
	return o;
}

int task_open(const char *arg, struct task_dir *td, struct buf *err)
{
	struct buf tasks = BUF_INIT;
	int ret;

	if ((ret = task_find(arg, &td->dir, &td->project_dir, err)) < 0)
		return ret;
	td->name = strrchr(td->dir.buf, '/') + 1;
	task_name_parse(td->name, NULL, td->id);
	buf_addf(&tasks, "%s/tasks", td->project_dir.buf);
	td->tasks_fd = open(tasks.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (td->tasks_fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", tasks.buf, strerror(errno));
		goto out;
	}
	td->dfd = openat(td->tasks_fd, td->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (td->dfd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", td->dir.buf, strerror(errno));
	}
out:
	buf_release(&tasks);
	return ret;
}

void task_dir_release(struct task_dir *td)
{
	if (td->dfd >= 0)
		close(td->dfd);
	if (td->tasks_fd >= 0)
		close(td->tasks_fd);
	buf_release(&td->dir);
	buf_release(&td->project_dir);
	*td = (struct task_dir)TASK_DIR_INIT;
}

int task_args(int argc, char **argv, const struct opt_spec *table, unsigned *flags,
              const char **task, struct buf *err)
{
	const char *v;
	int opt;

	*task = NULL;
	while ((opt = opt_parse(argc, argv, table, &v, err)) != OPT_END) {
		if (opt == OPT_HELP)
			return 1;
		if (opt == OPT_DESCRIBE)
			return 2;
		if (opt == OPT_BAD)
			return -EINVAL;
		if (opt == OPT_WORD && *task) {
			buf_addstr(err, "give one task");
			return -EINVAL;
		}
		if (opt == OPT_WORD) {
			*task = v;
			continue;
		}
		for (size_t i = 0; table[i].name; i++)
			if (table[i].id == opt)
				*flags |= 1u << i;
	}
	if (optind < argc && !*task)
		*task = argv[optind++];
	if (optind < argc) {
		buf_addstr(err, "give one task");
		return -EINVAL;
	}
	if (!*task) {
		buf_addstr(err, "which task? give its id, its folder's name or its path");
		return -EINVAL;
	}
	return 0;
}
