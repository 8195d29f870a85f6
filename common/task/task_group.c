/* The attempts of one task (task/task_group.h, docs/tasks.md "Several attempts"). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/err.h"
#include "base/guest_abi.h"
#include "config/usage.h"
#include "task/task_folder.h"
#include "task/task_group.h"
#include "task/task_info.h"
#include "task/task_record.h"

/* Hand on whole lines of a's stdout; the first is its folder.  0 at its end of file. */
static int attempt_read(struct task_group *g, struct task_group_attempt *a)
{
	char chunk[4096];
	ssize_t n = read(a->sp.out_fd, chunk, sizeof(chunk));
	char *nl;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n <= 0) {
		close(a->sp.out_fd);
		a->sp.out_fd = -1;
		return 0;
	}
	buf_add(&a->line, chunk, (size_t)n);
	while ((nl = memchr(a->line.buf, '\n', a->line.len))) {
		size_t len = (size_t)(nl - a->line.buf) + 1;

		if (!a->lines++)
			buf_add(&a->folder, a->line.buf, len - 1);
		if ((a->lines > 1 || !g->json) && g->line_out)
			g->line_out(g->ctx, a->line.buf, len);
		buf_consume(&a->line, len);
	}
	return 1;
}

int task_group_cpus(int n, int cores, int cpus)
{
	int share = n > 0 ? cores / n : cores;

	if (share < 1)
		share = 1;
	return share < cpus ? share : 0;
}

/* Each attempt gets what the group was given, the group's id and the prompt. */
static int start_attempt(struct task_group *g, struct task_group_attempt *a,
                         const struct buf *prompt, struct buf *err)
{
	int ret;

	strvec_pushl(&a->sp.args, g->self, "--attempt-of", g->gid, NULL);
	if (g->cpus > 0) {
		strvec_push(&a->sp.args, "--cpus");
		strvec_pushf(&a->sp.args, "%d", g->cpus);
	}
	if (g->err_base >= 0) {
		strvec_push(&a->sp.args, "--err-base");
		strvec_pushf(&a->sp.args, "%lld", g->err_base);
	}
	for (int i = 0; i < g->argc; i++)
		strvec_push(&a->sp.args, g->argv[i]);
	a->sp.in = SPAWN_PIPE;
	a->sp.out = SPAWN_PIPE;
	a->sp.pdeathsig = SIGTERM;
	if ((ret = spawn_start(&a->sp)) < 0) {
		buf_addf(err, "cannot start an attempt: %s", strerror(-ret));
		return ret;
	}
	/* It reads its whole prompt before anything else; one that died early gets EPIPE. */
	write_all(a->sp.in_fd, prompt->buf, prompt->len);
	close(a->sp.in_fd);
	a->sp.in_fd = -1;
	return 0;
}

int task_group_run(struct task_group *g, const struct buf *prompt, struct buf *err)
{
	int running, ret;

	if (g->n < 1 || g->n > ATTEMPTS_MAX)
		BUG("task_group_run: %d attempts", g->n);
	for (int i = 0; i < g->n; i++)
		g->a[i] = (struct task_group_attempt){
		    .sp = SPAWN_INIT, .line = BUF_INIT, .folder = BUF_INIT, .code = -1};
	g->started = 0;
	for (int i = 0; i < g->n; i++) {
		if ((ret = start_attempt(g, &g->a[i], prompt, err)) < 0)
			return ret;
		g->started++;
	}

	running = g->n;
	while (running) {
		struct pollfd pfd[ATTEMPTS_MAX];

		for (int i = 0; i < g->n; i++) {
			pfd[i].fd = g->a[i].sp.out_fd; /* -1 once read to its end: poll skips it */
			pfd[i].events = POLLIN;
		}
		if (g->stop && *g->stop) {
			for (int i = 0; i < g->n; i++)
				if (g->a[i].code < 0)
					kill(g->a[i].sp.pid, *g->stop);
			*g->stop = 0;
		}
		if (poll(pfd, (nfds_t)g->n, 200) < 0 && errno != EINTR) {
			ret = -errno;
			buf_addf(err, "poll: %s", strerror(-ret));
			return ret;
		}
		for (int i = 0; i < g->n; i++)
			if (g->a[i].sp.out_fd >= 0 &&
			    (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				attempt_read(g, &g->a[i]);
		for (int i = 0; i < g->n; i++) {
			struct task_group_attempt *a = &g->a[i];
			int status;

			if (a->code >= 0 || a->sp.out_fd >= 0)
				continue;
			if (waitpid(a->sp.pid, &status, 0) < 0)
				continue;
			a->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			a->sp.pid = -1;
			running--;
		}
	}
	return 0;
}

/* What the records of dirs[0..n) say (group_line()'s figures). */
struct group_counts {
	int recorded, finished, stopped;
	uint64_t nano;
	struct buf finished_ids, stopped_ids; /* "a1b2c3, d4e5f6" */
};

/* The id of the attempt whose folder is dir (PROJECT/tasks/YYYYMMDD-HHMMSS-ID), to ids. */
static void add_id(struct buf *ids, const char *dir)
{
	size_t len = strlen(dir);

	if (len < TASK_ID_LEN)
		return;
	buf_addf(ids, "%s%s", ids->len ? ", " : "", dir + len - TASK_ID_LEN);
}

static void group_count(const char *const *dirs, size_t n, struct group_counts *c)
{
	struct buf data = BUF_INIT, err = BUF_INIT;

	for (size_t i = 0; i < n; i++) {
		struct task_record r;
		ssize_t got;
		int dfd;

		if (!dirs[i] || !*dirs[i])
			continue;
		buf_reset(&data);
		/* a regular file, as every reader of a task's files takes one: no link, no FIFO */
		dfd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		got = task_file_read(dfd, "summary.json", TASK_RECORD_MAX, &data);
		close(dfd);
		if (got <= 0)
			continue;
		buf_reset(&err);
		if (task_record_parse(data.buf, data.len, &r, &err) < 0)
			continue;
		c->recorded++;
		if (!strcmp(r.state, "finished")) {
			c->finished++;
			add_id(&c->finished_ids, dirs[i]);
		} else if (r.why && !strncmp(r.why, TASK_WHY_STOPPED, strlen(TASK_WHY_STOPPED))) {
			c->stopped++;
			add_id(&c->stopped_ids, dirs[i]);
		}
		if (r.has_report)
			c->nano = c->nano + r.report.usage.nano < c->nano
			              ? UINT64_MAX
			              : c->nano + r.report.usage.nano;
		task_record_release(&r);
	}
	buf_release(&data);
	buf_release(&err);
}

static void group_line(const char *gid, const struct group_counts *c, size_t n, struct buf *out)
{
	buf_addf(out, "group %s: %d of %zu attempts finished", gid, c->finished, n);
	/* After a stop (Ctrl-C), which attempt is which: the ones to pick, the ones cut short. */
	if (c->stopped)
		buf_addf(out, " (%s), %d stopped (%s)", c->finished ? c->finished_ids.buf : "none",
		         c->stopped, c->stopped_ids.buf);
	buf_addstr(out, "; aibox counted ");
	usage_format_usd(out, c->nano);
	buf_addstr(out, " USD for them all");
}

static void group_counts_release(struct group_counts *c)
{
	buf_release(&c->finished_ids);
	buf_release(&c->stopped_ids);
}

void task_group_summary(const struct task_group *g, int detach, struct buf *out)
{
	const char *dirs[ATTEMPTS_MAX];
	struct group_counts c = {.finished_ids = BUF_INIT, .stopped_ids = BUF_INIT};

	for (int i = 0; i < g->started; i++)
		dirs[i] = g->a[i].folder.buf;
	group_count(dirs, (size_t)g->started, &c);
	if (detach && !c.recorded)
		buf_addf(out, "group %s: %d attempts submitted", g->gid, g->n);
	else
		group_line(g->gid, &c, (size_t)g->n, out);
	group_counts_release(&c);
}

void task_group_line(const char *gid, const char *const *dirs, size_t n, struct buf *out)
{
	struct group_counts c = {.finished_ids = BUF_INIT, .stopped_ids = BUF_INIT};

	group_count(dirs, n, &c);
	group_line(gid, &c, n, out);
	group_counts_release(&c);
}

int task_group_status(const struct task_group *g)
{
	int any_ok = 0, all_usage = 1;

	for (int i = 0; i < g->started; i++) {
		any_ok |= g->a[i].code == 0;
		all_usage &= g->a[i].code == 2;
	}
	return any_ok ? 0 : all_usage ? 2 : 1;
}

void task_group_release(struct task_group *g)
{
	/* task_group_run() made all n ready before starting any. */
	for (int i = 0; i < g->n && i < ATTEMPTS_MAX; i++) {
		spawn_clear(&g->a[i].sp);
		buf_release(&g->a[i].line);
		buf_release(&g->a[i].folder);
	}
}

/* The files of the group's folder, the commit file last (task_group_bundle_take() reads it first).
 */
static const char *const group_files[] = {GUEST_FILE_START_BUNDLE, GUEST_FILE_START_IDX,
                                          TASK_GROUP_COMMIT_FILE};

void task_group_dir(struct buf *out, const char *project_dir, const char *gid)
{
	buf_addf(out, "%s/tasks/.group-%s", project_dir, gid);
}

int task_group_bundle_make(const char *gdir, const char *checkout, const char *commit, int *lock_fd,
                           struct buf *err)
{
	struct buf tasks = BUF_INIT, line = BUF_INIT;
	const char *slash = strrchr(gdir, '/');
	int ret = 0;

	if (!slash)
		BUG("task_group_bundle_make: '%s' has no tasks folder", gdir);
	buf_add(&tasks, gdir, (size_t)(slash - gdir));
	if (mkdir(tasks.buf, 0755) < 0 && errno != EEXIST) {
		ret = -errno;
		buf_addf(err, "cannot create '%s': %s", tasks.buf, strerror(errno));
		goto out;
	}
	*lock_fd = -1;
	if (mkdir(gdir, 0700) < 0) {
		ret = -errno;
		buf_addf(err, "cannot create '%s': %s", gdir, strerror(errno));
		goto out;
	}
	/* Fresh and ours: nobody else holds its lock yet. */
	if ((*lock_fd = open(gdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    flock(*lock_fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		buf_addf(err, "cannot lock '%s': %s", gdir, strerror(errno));
		goto fail;
	}
	if ((ret = task_folder_start_bundle(gdir, checkout, commit, err)) < 0)
		goto fail;
	buf_addf(&line, "%s\n", commit);
	if ((ret = task_folder_write(gdir, TASK_GROUP_COMMIT_FILE, &line, 0644)) < 0) {
		buf_addf(err, "cannot write '%s/%s': %s", gdir, TASK_GROUP_COMMIT_FILE,
		         strerror(-ret));
		goto fail;
	}
	goto out;
fail:
	task_group_bundle_remove(gdir);
	if (*lock_fd >= 0)
		close(*lock_fd);
	*lock_fd = -1;
out:
	buf_release(&tasks);
	buf_release(&line);
	return ret;
}

/* from copied to a new file to (0644): where no hard link can be made.  0 or -errno. */
static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out = -1, ret = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0) {
		ret = -errno;
		goto out;
	}
	while ((n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) > 0)
		;
	if (n < 0) {
		ret = -errno;
		unlink(to);
	}
out:
	close(in);
	if (out >= 0)
		close(out);
	return ret;
}

int task_group_bundle_take(const char *gdir, const char *dir, char commit[OID_HEX_MAX + 1],
                           struct buf *err)
{
	struct buf from = BUF_INIT, to = BUF_INIT, line = BUF_INIT;
	ssize_t n;
	size_t len;
	int ret = 0;

	buf_addf(&from, "%s/%s", gdir, TASK_GROUP_COMMIT_FILE);
	if ((n = buf_read_file(&line, from.buf, OID_HEX_MAX + 1)) < 0) {
		ret = (int)n;
		buf_addf(err, "the group's start bundle '%s' cannot be read: %s", gdir,
		         strerror(-ret));
		goto out;
	}
	len = line.len ? line.len - 1 : 0;
	if (!OID_HEX_LEN_OK(len) || line.buf[len] != '\n' ||
	    strspn(line.buf, "0123456789abcdef") != len) {
		ret = -EINVAL;
		buf_addf(err, "the group's start bundle '%s' has no commit in '%s'", gdir,
		         TASK_GROUP_COMMIT_FILE);
		goto out;
	}
	memcpy(commit, line.buf, len);
	commit[len] = '\0';
	for (size_t i = 0; i < 2; i++) {
		buf_reset(&from);
		buf_reset(&to);
		buf_addf(&from, "%s/%s", gdir, group_files[i]);
		buf_addf(&to, "%s/%s", dir, group_files[i]);
		if (link(from.buf, to.buf) < 0 && (ret = copy_file(from.buf, to.buf)) < 0) {
			buf_addf(err, "cannot take the group's start bundle '%s' into '%s': %s",
			         from.buf, dir, strerror(-ret));
			goto out;
		}
	}
	/* As task_folder_start_bundle() leaves it: the folder passed through to the VM's user. */
	if (chmod(dir, 0711) < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s' to the VM: %s", dir, strerror(errno));
	}
out:
	buf_release(&from);
	buf_release(&to);
	buf_release(&line);
	return ret;
}

void task_group_bundle_remove(const char *gdir)
{
	struct buf path = BUF_INIT;

	for (size_t i = 0; i < ARRAY_SIZE(group_files); i++) {
		buf_reset(&path);
		buf_addf(&path, "%s/%s", gdir, group_files[i]);
		unlink(path.buf);
	}
	buf_reset(&path);
	buf_addf(&path, "%s/" GUEST_FILE_START_BUNDLE ".lock", gdir); /* git's, if it died */
	unlink(path.buf);
	rmdir(gdir);
	buf_release(&path);
}

int task_group_dir_left(int tasks_fd, const char *name, time_t now, time_t min_age)
{
	struct stat st;
	int fd, ret;

	if (strncmp(name, ".group-", 7) || !task_id_valid(name + 7))
		return 0;
	fd = openat(tasks_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
	} else if (st.st_mtime > now - min_age) {
		ret = 0;
	} else if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? 0 : -errno;
	} else {
		ret = 1;
	}
	close(fd);
	return ret;
}
