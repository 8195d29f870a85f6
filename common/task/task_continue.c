#include "task/task_continue.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "git/bundle_check.h"
#include "git/checkout.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "base/guest_abi.h"
#include "base/json_get.h"
#include "config/project.h"
#include "task/task_results.h"
#include "task/session_mend.h"
#include "task/task_info.h"
#include "task/slurm_detach.h"
#include "base/banned.h"

static const char cleaned_hint[] =
    "no such task in this project (aibox tasks clean --all removes ended tasks' folders)";

/*
 * The folder name of ref into c->name, found as every command finds a task
 * (task_find()), and only in this project's tasks_dir; -ENOENT when there is
 * none.
 */
static int find_name(struct task_continue *c, const char *tasks_dir, const char *ref,
                     struct buf *err)
{
	struct buf dir = BUF_INIT, project = BUF_INIT, e = BUF_INIT;
	char real_tasks[PATH_MAX];
	const char *base;
	int ret = task_find(ref, &dir, &project, &e);

	if (ret == -ENOENT) {
		buf_addf(err, "task '%s': %s", ref, cleaned_hint);
		goto out;
	}
	base = ret < 0 ? NULL : strrchr(dir.buf, '/');
	if (!base || !realpath(tasks_dir, real_tasks) ||
	    (size_t)(base - dir.buf) != strlen(real_tasks) ||
	    strncmp(dir.buf, real_tasks, strlen(real_tasks))) {
		buf_addf(err, "'%s' is no task id, task folder name or task folder of this project",
		         ref);
		ret = -ENOENT;
		goto out;
	}
	memcpy(c->name, base + 1, TASK_NAME_LEN + 1);
out:
	buf_release(&dir);
	buf_release(&project);
	buf_release(&e);
	return ret;
}

/* Read the task folder's file name (at most max bytes) into out; -errno. */
static ssize_t read_in(struct task_continue *c, const char *name, struct buf *out, size_t max)
{
	struct buf path = BUF_INIT;
	ssize_t n;

	buf_addf(&path, "%s/%s", c->dir.buf, name);
	n = buf_read_file(out, path.buf, max);
	buf_release(&path);
	return n;
}

static int read_start_commit(struct task_continue *c, struct buf *err)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	json_t *j = NULL;
	const char *s = NULL;
	int ret = -EINVAL;

	if (read_in(c, GUEST_FILE_SETTINGS, &b, GUEST_SETTINGS_MAX) < 0 ||
	    !(j = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, NULL)) ||
	    json_get_str(j, "start_commit", 0, OID_HEX_MAX, &s, &why) < 0 ||
	    !oid_hex_valid(s, strlen(s))) {
		buf_addf(err, "task '%s' has no readable settings.json with its start commit",
		         c->name);
		goto out;
	}
	memcpy(c->start_commit, s, strlen(s) + 1);
	ret = 0;
out:
	json_decref(j);
	buf_release(&why);
	buf_release(&b);
	return ret;
}

/* result.json must say the task made changes. */
static int check_result(struct task_continue *c, struct buf *err)
{
	struct buf b = BUF_INIT, sub = BUF_INIT;
	struct task_result r;
	ssize_t n = read_in(c, guest_results[RESULT_JSON].name, &b, RESULT_JSON_MAX);
	int ret = -EINVAL;

	if (n <= 0) {
		buf_addf(err, "task '%s' sent no results: it did not finish", c->name);
		goto out;
	}
	if (result_parse(b.buf, b.len, &r, &sub) < 0) {
		buf_addf(err, "task '%s': %s", c->name, sub.buf);
		goto out;
	}
	if (!r.changes)
		buf_addf(err,
		         "task '%s' ended with no changes: there is no commit to continue from",
		         c->name);
	else
		ret = 0;
	result_release(&r);
out:
	buf_release(&b);
	buf_release(&sub);
	return ret;
}

static int check_bundle(struct task_continue *c, const char *checkout, const char *limits,
                        struct buf *err)
{
	struct bundle_check chk = BUNDLE_CHECK_INIT;
	struct bundle_verdict v;
	struct buf path = BUF_INIT, sub = BUF_INIT;
	struct stat st;
	int fd, ret;

	buf_addf(&path, "%s/%s", c->dir.buf, guest_results[RESULT_BUNDLE].name);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !st.st_size) {
		buf_addf(err, "task '%s' has no changes.bundle%s", c->name,
		         fd < 0 && errno == ENOENT ? ": it was removed" : "");
		ret = -ENOENT;
		goto out;
	}
	ret = result_bundle_check_start(&chk, fd, c->start_commit, checkout, NULL, limits, &sub);
	if (ret == 0) {
		/* A check that could not run says err in the verdict, as for any task. */
		bundle_check_run(&chk, &v, NULL);
		ret = result_bundle_verdict(&v, c->end_commit, &sub);
		bundle_verdict_clear(&v);
		if (ret == 0 && !strcmp(c->end_commit, c->start_commit))
			buf_addstr(&sub, "its bundle holds no commit after the start");
	}
	if (sub.len || ret != 0) {
		buf_addf(err, "task '%s': %s", c->name, sub.buf);
		ret = -EINVAL;
	}
out:
	bundle_check_clear(&chk);
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	buf_release(&sub);
	return ret;
}

/*
 * Add to c->session what Claude Code printed in transcript.jsonl but did not
 * write to its session file before it exited (common/task/session_mend.h).  The
 * transcript's last SESSION_FILE_MAX bytes are enough: no more can be added.
 * A task without a readable transcript keeps its session as it is.
 */
static int mend_session(struct task_continue *c, struct buf *err)
{
	struct buf path = BUF_INIT, t = BUF_INIT, sub = BUF_INIT;
	struct stat st;
	size_t skip = 0;
	int fd, ret = 0, whole = 1;

	buf_addf(&path, "%s/%s", c->dir.buf, guest_results[RESULT_TRANSCRIPT].name);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((uint64_t)st.st_size > SESSION_FILE_MAX) {
		whole = 0;
		if (lseek(fd, st.st_size - (off_t)SESSION_FILE_MAX, SEEK_SET) < 0)
			goto out;
	}
	if (buf_read_fd(&t, fd, SESSION_FILE_MAX) < 0)
		goto out;
	if (!whole) {
		/* The first line is cut: from the next one on. */
		const char *nl = memchr(t.buf, '\n', t.len);

		skip = nl ? (size_t)(nl - t.buf) + 1 : t.len;
	}
	ret = session_mend(&c->session, t.buf + skip, t.len - skip, whole);
	if (ret == -EFBIG) {
		buf_addf(err,
		         "task '%s''s conversation with the messages its %s lacks is over %llu MiB",
		         c->name, SESSION_FILE_NAME, SESSION_FILE_MAX >> 20);
		goto out;
	}
	if (ret > 0 &&
	    session_file_check(c->session.buf, c->session.len, c->session_id, &sub) < 0) {
		buf_addf(err, "task '%s''s %s is refused once mended: %s", c->name,
		         SESSION_FILE_NAME, sub.buf);
		ret = -EINVAL;
		goto out;
	}
	if (ret > 0)
		buf_addf(&c->note, "added %d message%s its %s lacked from its transcript.jsonl",
		         ret, ret == 1 ? "" : "s", SESSION_FILE_NAME);
	ret = ret < 0 ? ret : 0;
out:
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	buf_release(&t);
	buf_release(&sub);
	return ret;
}

/* git in checkout (common/git/checkout.h); its exit code. */
static int git(const char *checkout, struct buf *out, const char *const *args)
{
	struct buf ignore = BUF_INIT;
	int ret = checkout_git(checkout, out ? out : &ignore, args);

	buf_release(&ignore);
	return ret;
}

static int fetch(struct task_continue *c, const char *checkout, struct buf *err)
{
	struct buf commit = BUF_INIT, branch = BUF_INIT, bundle = BUF_INIT, spec = BUF_INIT;
	int ret = 0;

	buf_addf(&commit, "%s^{commit}", c->end_commit);
	buf_addf(&branch, GUEST_BRANCH_REF "-%s", c->name);
	buf_addf(&bundle, "%s/%s", c->dir.buf, guest_results[RESULT_BUNDLE].name);
	if (git(checkout, NULL, (const char *const[]){"cat-file", "-e", commit.buf, NULL}) == 0)
		goto out;
	if (git(checkout, NULL,
	        (const char *const[]){"rev-parse", "--verify", "--quiet", branch.buf, NULL}) == 0)
		buf_addstr(&spec, GUEST_BRANCH);
	else
		buf_addf(&spec, GUEST_BRANCH ":" GUEST_BRANCH "-%s", c->name);
	if (git(checkout, NULL,
	        (const char *const[]){"fetch", "--quiet", bundle.buf, spec.buf, NULL}) != 0) {
		buf_addf(err, "cannot fetch task '%s''s changes into '%s'", c->name, checkout);
		ret = -EIO;
		goto out;
	}
	buf_addf(&c->note, "%sfetched its changes (git fetch ... %s)", c->note.len ? "; " : "",
	         spec.buf);
	if (spec.len >= sizeof(c->fetched))
		BUG("refspec '%s' too long", spec.buf);
	memcpy(c->fetched, spec.buf, spec.len + 1);
out:
	buf_release(&commit);
	buf_release(&branch);
	buf_release(&bundle);
	buf_release(&spec);
	return ret;
}

int task_continue_prepare(struct task_continue *c, const char *tasks_dir, const char *ref,
                          const char *checkout, const char *limits, struct buf *err)
{
	struct buf serr = BUF_INIT;
	int tasks_fd = -1, lock_fd = -1, ret;
	ssize_t n;

	if ((ret = find_name(c, tasks_dir, ref, err)) < 0)
		goto out;
	buf_reset(&c->dir);
	buf_addf(&c->dir, "%s/%s", tasks_dir, c->name);
	tasks_fd = open(tasks_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tasks_fd < 0 || faccessat(tasks_fd, c->name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		buf_addf(err, "task '%s': %s", c->name, cleaned_hint);
		ret = -ENOENT;
		goto out;
	}
	/* A detached Slurm task whose job ended is checked first (common/task/slurm_detach.h). */
	slurm_detached_check(c->dir.buf);
	ret = task_check(tasks_fd, c->name, &lock_fd);
	if (ret == 0) {
		int dfd =
		    openat(tasks_fd, c->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (dfd >= 0 && slurm_detached_unchecked(dfd))
			ret = 1; /* queued or running on Slurm still */
		if (dfd >= 0)
			close(dfd);
	}
	if (ret == 1) {
		buf_addf(err, "task '%s' is still running: continue it once it has ended", c->name);
		ret = -EBUSY;
		goto out;
	}
	if (ret < 0) {
		buf_addf(err, "cannot tell whether task '%s' runs: %s", c->name, strerror(-ret));
		goto out;
	}
	if ((ret = check_result(c, err)) < 0 || (ret = read_start_commit(c, err)) < 0)
		goto out;
	buf_reset(&c->session);
	n = read_in(c, SESSION_FILE_NAME, &c->session, SESSION_FILE_MAX);
	if (n == 0 || n == -ENOENT) {
		buf_addf(err, "task '%s' kept no Claude Code conversation to resume", c->name);
		ret = -ENOENT;
		goto out;
	}
	if (n < 0 || session_file_check(c->session.buf, c->session.len, c->session_id, &serr) < 0) {
		buf_addf(err, "task '%s''s %s is refused: %s", c->name, SESSION_FILE_NAME,
		         n < 0 ? strerror((int)-n) : serr.buf);
		ret = -EINVAL;
		goto out;
	}
	if ((ret = mend_session(c, err)) < 0 || (ret = check_bundle(c, checkout, limits, err)) < 0)
		goto out;
	ret = fetch(c, checkout, err);
out:
	if (lock_fd >= 0)
		close(lock_fd);
	if (tasks_fd >= 0)
		close(tasks_fd);
	buf_release(&serr);
	return ret;
}

void task_continue_release(struct task_continue *c)
{
	buf_release(&c->dir);
	buf_release(&c->session);
	buf_release(&c->note);
}
