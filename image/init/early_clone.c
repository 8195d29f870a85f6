/*
 * The early clone (docs/init-task.md, "The early clone"): PID 1 starts the
 * prepared clone in a child while the host sets up its SSH session, and the
 * session's step clone takes its outcome instead of cloning again.  When
 * settings.json names no secrets the child runs the whole task instead
 * (early_task.c).
 *
 * Its folder, o->early (/run/aibox/early-clone, root's, 0700), holds:
 *   lock    made and locked (flock, exclusive) by PID 1 before the fork; the
 *           lock lives as long as the child's copy of it, so it is released
 *           only when the child has ended, however it ended
 *   result  "ok|failed <start> <end>\n" (clock_ms()), written to result.new
 *           and renamed (early_file_write()): whole or absent
 *   log     the child's vm.log lines, timed from its start
 * Only root writes there; the only process of the user's before the session
 * is the checkout's git, in the step group early-clone, killed with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "task_int.h"
#include "base/banned.h"

#define EARLY_LOCK    "lock"
#define EARLY_RESULT  "result"
#define EARLY_LOG     "log"
#define EARLY_GROUP   "early-clone"
#define EARLY_POLL_MS 5

void early_path(struct buf *b, const struct guest_task_opts *o, const char *name)
{
	buf_reset(b);
	buf_addf(b, "%s/%s", o->early, name);
}

void early_file_write(const struct guest_task_opts *o, const char *name, const struct buf *b)
{
	struct buf path = BUF_INIT, tmp = BUF_INIT;

	early_path(&path, o, name);
	buf_addf(&tmp, "%s.new", path.buf);
	if (buf_write_file(b, tmp.buf, 0600) == 0)
		rename(tmp.buf, path.buf);
	buf_release(&path);
	buf_release(&tmp);
}

/* The result file, whole. */
static void early_result_write(const struct guest_task_opts *o, int ok, int64_t start)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s %" PRId64 " %" PRId64 "\n", ok ? "ok" : "failed", start, clock_ms());
	early_file_write(o, EARLY_RESULT, &b);
	buf_release(&b);
}

/*
 * The child: the settings; with none of the secrets named or all of them
 * from the go message, the whole task (early_task_run()); else the prepared
 * clone as the session would run it.
 * lock and lsock (the early task's socket) are its copies of PID 1's (-1: none).
 */
__attribute__((noreturn)) static void early_child(const struct guest_task_opts *o, int lock,
                                                  int lsock)
{
	struct guest_task task, *t = &task;
	struct buf path = BUF_INIT, why = BUF_INIT;
	struct step_group g;
	sigset_t none;
	int fd, ok = 0, err;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Not the caller's stdin and stdout (the session's, in the native test). */
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		close(fd);
	}
	guest_task_init(t, o);
	if (read_settings(t, &why) == 0 && lsock >= 0 &&
	    (json_array_size(t->env_names) == 0 ||
	     (o->go_secrets && access(o->go_secrets, F_OK) == 0))) {
		json_decref(t->settings);
		early_task_run(o, lock, lsock);
	}
	/* A session waiting on the socket runs the task itself. */
	if (lsock >= 0) {
		close(lsock);
		early_task_unlisten(o);
	}
	early_path(&path, o, EARLY_LOG);
	t->log_fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	vmlog(t, "the early clone, started by the init while the host connects");
	if (why.len) {
		vmlog(t, "%s", why.buf);
		goto out;
	}
	if (!(t->git = find_in_path("git"))) {
		vmlog(t, "cannot find git in %s", GUEST_PATH);
		goto out;
	}
	if ((err = step_group_create(&g, o->backend, EARLY_GROUP)) < 0) {
		vmlog(t, "cannot make the group for the early clone: %s", strerror(-err));
		goto out;
	}
	err = clone_project_prepared(t, &g, t->t0 + o->git_limit_ms);
	if (err < 0)
		vmlog(t, "cannot make the project folder '%s': %s", t->path, strerror(-err));
	ok = err > 0;
	if ((err = step_group_destroy(&g)) < 0) {
		vmlog(t, "the group of the early clone did not go away cleanly: %s",
		      strerror(-err));
		ok = 0;
	}
out:
	early_result_write(o, ok, t->t0);
	/* The lock goes with the process: only after the result is in place. */
	_exit(0);
}

void task_early_start(const struct guest_task_opts *o)
{
	struct buf path = BUF_INIT;
	pid_t pid;
	int fd, lsock;

	if (!o->early)
		return;
	buf_addf(&path, "%s/" GUEST_FILE_START_IDX, o->share);
	if (access(path.buf, F_OK) < 0)
		goto out; /* no prepared clone: the session clones as ever */
	if (mkdir(o->early, 0700) < 0) {
		error("cannot make '%s': %s", o->early, strerror(errno));
		goto out;
	}
	early_path(&path, o, EARLY_LOCK);
	fd = open(path.buf, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		error("cannot make '%s': %s", path.buf, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(path.buf);
		}
		goto out;
	}
	/* Before the session can connect: it then finds the socket, or never will. */
	lsock = early_task_listen(o);
	pid = fork();
	if (pid == 0)
		early_child(o, fd, lsock);
	if (pid < 0) {
		error("cannot start the early clone: %s", strerror(errno));
		unlink(path.buf);
		early_task_unlisten(o);
	}
	if (lsock >= 0)
		close(lsock);
	close(fd);
out:
	buf_release(&path);
}

/* Wait until the child has ended (its lock is free), up to deadline.  0, or -errno. */
static int early_wait(int fd, int64_t deadline)
{
	for (;;) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (clock_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(EARLY_POLL_MS);
	}
}

/* Parse "ok|failed <start> <end>\n": 1 ok, 0 failed, -EINVAL anything else. */
static int early_result_parse(const char *s, int64_t *start, int64_t *end)
{
	char word[8], nl;
	long long a, b;

	if (sscanf(s, "%7s %lld %lld%c", word, &a, &b, &nl) != 4 || nl != '\n' || a > b)
		return -EINVAL;
	*start = a;
	*end = b;
	if (!strcmp(word, "ok"))
		return 1;
	return strcmp(word, "failed") ? -EINVAL : 0;
}

int early_clone_take(struct guest_task *t, int64_t deadline)
{
	const struct guest_task_opts *o = t->o;
	struct buf path = BUF_INIT, b = BUF_INIT, log = BUF_INIT;
	int64_t waited = clock_ms(), start = 0, end = 0;
	int fd = -1, ret = 0, r;
	ssize_t n;

	if (!o->early || o->early_task)
		return 0; /* the early task clones itself */
	early_path(&path, o, EARLY_LOCK);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		goto out; /* none was started */
	if (fd < 0 || (r = early_wait(fd, deadline)) < 0) {
		ret = fd < 0 ? -errno : r;
		vmlog(t, "cannot wait for the early clone: %s", strerror(-ret));
		goto out;
	}
	waited = clock_ms() - waited;
	early_path(&path, o, EARLY_RESULT);
	n = buf_read_file(&b, path.buf, 256);
	r = n < 0 ? (int)n : early_result_parse(b.buf, &start, &end);
	early_path(&path, o, EARLY_LOG);
	if ((n = buf_read_file(&log, path.buf, LOG_MAX)) < 0)
		buf_reset(&log);
	if (r == 1) {
		vmlog(t,
		      "the clone was made while the session was set up (it ran from %+.3f s to "
		      "%+.3f s of this log, waited %lld ms for it); its lines, timed from its "
		      "start:",
		      (double)(start - t->t0) / 1e3, (double)(end - t->t0) / 1e3,
		      (long long)waited);
		ret = 1;
	} else if (r == 0) {
		vmlog(t, "the early clone failed; its lines, timed from its start:");
	} else {
		vmlog(t, "the early clone left no result (%s)",
		      r == -EINVAL ? "not one of ours" : strerror(-r));
	}
	log_raw(t, log.buf, log.len);
	if (ret != 1) {
		vmlog(t, "the clone runs again in the session");
		if ((r = empty_project(t)) < 0 && r != -ENOENT) {
			vmlog(t, "cannot empty '%s': %s", t->path, strerror(-r));
			ret = r;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	buf_release(&b);
	buf_release(&log);
	return ret;
}
