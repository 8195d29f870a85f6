#include "step.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/banned.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* How long a killed group gets to empty, and output to drain after an exit. */
#define EMPTY_WAIT_MS 5000
#define DRAIN_MS      2000

void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Wait until the cgroup at path has no member left or until (clock_ms()
 * scale): 0 when it is empty, 1 when it is still populated, or -errno.
 * cgroup.events is read again when the kernel says it changed (POLLPRI), not
 * at a pace of ours: a killed group empties in the next few ms.
 */
static int cgroup_wait_empty(const char *path, int64_t until)
{
	struct buf file = BUF_INIT;
	char b[256];
	int fd, ret;

	buf_addf(&file, "%s/cgroup.events", path);
	fd = open(file.buf, O_RDONLY | O_CLOEXEC);
	buf_release(&file);
	if (fd < 0)
		return -errno;
	for (;;) {
		/* Each read re-arms the notification that poll() waits for. */
		ssize_t n = pread(fd, b, sizeof(b) - 1, 0);
		struct pollfd pf = {.fd = fd, .events = POLLPRI};
		const char *p;
		int64_t left;

		if (n < 0) {
			ret = -errno;
			break;
		}
		b[n] = '\0';
		p = strstr(b, "populated ");
		ret = p ? p[10] == '1' : -EINVAL;
		left = until - clock_ms();
		if (ret != 1 || left <= 0)
			break;
		if (poll(&pf, 1, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
	}
	close(fd);
	return ret;
}

/* Without cgroup.kill (before Linux 5.14): signal every member until none is left. */
static int cgroup_kill_each(const char *path)
{
	struct buf b = BUF_INIT, file = BUF_INIT;
	int ret = 0;

	buf_addf(&file, "%s/cgroup.procs", path);
	for (int round = 0; round < 100; round++) {
		const char *p;
		ssize_t n;

		buf_reset(&b);
		n = buf_read_file(&b, file.buf, 1 << 20);
		if (n < 0) {
			ret = (int)n;
			break;
		}
		if (!b.len)
			break;
		for (p = b.buf; *p;) {
			char *end;
			long pid = strtol(p, &end, 10);

			if (end == p)
				break;
			if (pid > 0)
				kill((pid_t)pid, SIGKILL);
			p = end;
			while (*p == '\n')
				p++;
		}
		sleep_ms(10);
	}
	buf_release(&b);
	buf_release(&file);
	return ret;
}

static int cgroup_kill(const char *path)
{
	struct buf file = BUF_INIT;
	int fd, ret = 0;

	buf_addf(&file, "%s/cgroup.kill", path);
	fd = open(file.buf, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		ret = cgroup_kill_each(path);
	else if (fd < 0)
		ret = -errno;
	else {
		ret = write_all(fd, "1", 1);
		close(fd);
	}
	buf_release(&file);
	return ret;
}

int step_group_create(struct step_group *g, enum step_backend backend, const char *name)
{
	struct buf b = BUF_INIT;
	int ret = 0;

	memset(g, 0, sizeof(*g));
	g->backend = backend;
	g->procs_fd = -1;
	if (backend == STEP_PGROUP)
		return 0;
	if (mkdir(STEP_CGROUP_ROOT, 0755) < 0 && errno != EEXIST)
		return -errno;
	buf_addf(&b, "%s/%s", STEP_CGROUP_ROOT, name);
	if (mkdir(b.buf, 0755) < 0) {
		if (errno != EEXIST) {
			ret = -errno;
			goto out;
		}
		/* Left over by an earlier session: empty it before reuse. */
		cgroup_kill(b.buf);
	}
	g->path = xstrdup(b.buf);
	buf_addstr(&b, "/cgroup.procs");
	g->procs_fd = open(b.buf, O_WRONLY | O_CLOEXEC);
	if (g->procs_fd < 0) {
		ret = -errno;
		rmdir(g->path);
		free(g->path);
		g->path = NULL;
	}
out:
	buf_release(&b);
	return ret;
}

int step_group_kill(struct step_group *g)
{
	if (g->backend == STEP_CGROUP)
		return g->path ? cgroup_kill(g->path) : -EINVAL;
	for (size_t i = 0; i < g->nr; i++)
		kill(-g->pgids[i], SIGKILL);
	return 0;
}

/*
 * The processes step_start() started that step_finish() has not reaped: the
 * reaping of another group's orphans (waitpid(-1)) may take one of them, and
 * keeps its wait status here for step_finish().
 */
#define HELD_MAX 4
static struct held {
	pid_t pid; /* 0: a free slot */
	int reaped, status;
} held[HELD_MAX];

/* A free slot of held[], or -EBUSY. */
static int held_slot(void)
{
	for (int i = 0; i < HELD_MAX; i++)
		if (!held[i].pid)
			return i;
	return -EBUSY;
}

/* A reaped child: its status kept when it is held. */
static void held_reaped(pid_t pid, int status)
{
	for (size_t i = 0; i < HELD_MAX; i++)
		if (held[i].pid == pid) {
			held[i].reaped = 1;
			held[i].status = status;
		}
}

/*
 * Release pid's slot; with status set, 0 and its wait status when it was
 * reaped already, else -1.
 */
static int held_take(pid_t pid, int *status)
{
	for (size_t i = 0; i < HELD_MAX; i++)
		if (held[i].pid == pid) {
			int reaped = held[i].reaped;

			if (status && !reaped)
				return -1;
			if (status)
				*status = held[i].status;
			held[i] = (struct held){0, 0, 0};
			return 0;
		}
	return -1;
}

/*
 * Reap the zombies of killed orphans that came back to us as subreaper;
 * patient: for a second at most while one of g's process groups has members.
 */
static void reap_orphans(const struct step_group *g, int patient)
{
	int64_t until = clock_ms() + (patient ? 1000 : 0);

	for (;;) {
		int status;
		pid_t r = waitpid(-1, &status, WNOHANG);
		int alive = 0;

		if (r > 0) {
			held_reaped(r, status);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || clock_ms() >= until)
			break;
		/* a child left that is none of g's: a held one, or another step's */
		for (size_t i = 0; i < g->nr; i++)
			alive |= kill(-g->pgids[i], 0) == 0;
		if (!alive)
			break;
		sleep_ms(10);
	}
}

int step_group_destroy(struct step_group *g)
{
	int ret = step_group_kill(g);

	if (g->backend == STEP_CGROUP && g->path) {
		int pop = cgroup_wait_empty(g->path, clock_ms() + EMPTY_WAIT_MS);

		reap_orphans(g, 0);
		if (pop == 1)
			ret = -EBUSY;
		else if (rmdir(g->path) < 0 && !ret)
			ret = -errno;
	} else {
		/* Signals are asynchronous: give the killed a moment to become zombies. */
		reap_orphans(g, g->nr > 0);
	}
	if (g->procs_fd >= 0)
		close(g->procs_fd);
	free(g->path);
	free(g->pgids);
	memset(g, 0, sizeof(*g));
	g->procs_fd = -1;
	return ret;
}

static void child_fail(int fd, int err)
{
	ssize_t w = write(fd, &err, sizeof(err));

	(void)w;
	_exit(127);
}

/* Between fork and exec: async-signal-safe calls only. */
static void child(const struct step_proc *p, const struct step_group *g, int sfd, int in, int out,
                  int err)
{
	struct sigaction sa;
	sigset_t none;
	int src[3] = {in, out, err};

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	if (g->backend == STEP_CGROUP) {
		if (write(g->procs_fd, "0", 1) != 1)
			child_fail(sfd, errno);
	} else if (setpgid(0, 0) < 0) {
		child_fail(sfd, errno);
	}
	for (int i = 0; i < 3; i++)
		if ((src[i] = fcntl(src[i], F_DUPFD, 10)) < 0)
			child_fail(sfd, errno);
	for (int i = 0; i < 3; i++)
		if (dup2(src[i], i) < 0)
			child_fail(sfd, errno);
	/* Everything else goes at exec; the status pipe stays until then. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(sfd, errno);
	if (p->drop) {
		if (setgroups(0, NULL) < 0 || setgid(p->gid) < 0 || setuid(p->uid) < 0)
			child_fail(sfd, errno);
		if (p->uid != 0 && setuid(0) == 0)
			child_fail(sfd, EPERM);
	}
	/* After the credentials change, which clears it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (p->dir && chdir(p->dir) < 0)
		child_fail(sfd, errno);
	execve(p->argv[0], (char *const *)p->argv, (char *const *)p->envp);
	child_fail(sfd, errno);
}

/*
 * Read the child's status pipe: 0 (end of file) once it has exec'd or died,
 * sizeof(int) with *cerr the errno of a start that failed.
 */
static ssize_t exec_wait(int fd, int *cerr)
{
	ssize_t n;

	do
		n = read(fd, cerr, sizeof(*cerr));
	while (n < 0 && errno == EINTR);
	return n;
}

struct stream {
	int fd;
	step_sink_fn sink;
	int dropping;
};

static void stream_read(struct stream *s, void *ctx)
{
	char chunk[65536];
	ssize_t n = read(s->fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	if (!s->dropping && s->sink(ctx, chunk, (size_t)n) < 0)
		s->dropping = 1;
}

/*
 * Fork p in group g, with its stdout and stderr on new pipes for the sinks it
 * has (else /dev/null).  0 with *pidp set and the pipes' read ends
 * (non-blocking) in streams[]; or -errno.  With exec_fd NULL it waits until
 * the child has exec'd, and a failed exec's -errno comes back from the child,
 * which is reaped; else *exec_fd gets the read end of the pipe that tells it
 * (exec_wait()), and nothing is waited for.
 */
static int spawn_step(const struct step_proc *p, struct step_group *g, int devnull,
                      struct stream streams[2], pid_t *pidp, int *exec_fd)
{
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, st[2] = {-1, -1};
	int cerr = 0, ret = 0;
	ssize_t n;
	pid_t pid;

	if ((p->on_out && pipe2(outp, O_CLOEXEC) < 0) ||
	    (p->on_err && pipe2(errp, O_CLOEXEC) < 0) || pipe2(st, O_CLOEXEC) < 0) {
		ret = -errno;
		goto out;
	}
	if (g->backend == STEP_PGROUP)
		ALLOC_GROW(g->pgids, g->nr + 1, g->alloc);

	pid = fork();
	if (pid < 0) {
		ret = -errno;
		goto out;
	}
	if (pid == 0)
		child(p, g, st[1], p->in >= 0 ? p->in : devnull, outp[1] >= 0 ? outp[1] : devnull,
		      errp[1] >= 0 ? errp[1] : devnull);

	if (g->backend == STEP_PGROUP) {
		setpgid(pid, pid); /* also here, so no kill comes before the child's own */
		g->pgids[g->nr++] = pid;
	}
	close(st[1]);
	st[1] = -1;
	if (exec_fd) {
		*exec_fd = st[0];
		st[0] = -1;
		n = 0;
	} else {
		n = exec_wait(st[0], &cerr);
	}
	if (n == sizeof(cerr)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		ret = -cerr;
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		int *pp = i ? errp : outp;

		streams[i].fd = pp[0];
		pp[0] = -1;
		if (streams[i].fd >= 0)
			fd_set_nonblock(streams[i].fd, 1);
	}
	*pidp = pid;
out:
	for (int i = 0; i < 2; i++) {
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
	return ret;
}

/* A started step process, watched until it has exited and its output is read. */
struct watch {
	pid_t pid;
	int pidfd;  /* -1: not watched */
	int exited; /* it exited or was killed: only its output is left to read */
	int64_t deadline, drain_until;
	struct stream streams[2];
};

static void watch_kill(struct watch *w, struct step_group *g)
{
	step_group_kill(g);
	kill(w->pid, SIGKILL);
}

/*
 * Poll the process and its output until it has exited and every writer is
 * gone, or the drain's time is up.  When the process exits, the rest of the
 * group is killed; at the deadline all of it is, and res->timed_out set.
 */
static void watch(struct watch *w, const struct step_proc *p, struct step_group *g,
                  struct step_result *res)
{
	for (;;) {
		struct pollfd pf[3];
		int nfds = 0, ipid = -1, istream[2] = {-1, -1};
		int64_t left;

		if (!w->exited) {
			pf[nfds] = (struct pollfd){.fd = w->pidfd, .events = POLLIN};
			ipid = nfds++;
		}
		for (int i = 0; i < 2; i++)
			if (w->streams[i].fd >= 0) {
				pf[nfds] =
				    (struct pollfd){.fd = w->streams[i].fd, .events = POLLIN};
				istream[i] = nfds++;
			}
		if (w->exited && istream[0] < 0 && istream[1] < 0)
			return;
		left = (w->exited ? w->drain_until : w->deadline) - clock_ms();
		if (left <= 0) {
			if (w->exited)
				return; /* a writer escaped the kill: stop listening to it */
			res->timed_out = 1;
			watch_kill(w, g);
			w->deadline = clock_ms() + EMPTY_WAIT_MS;
			continue;
		}
		if (poll(pf, (nfds_t)nfds, left > INT_MAX ? INT_MAX : (int)left) < 0) {
			if (errno == EINTR)
				continue;
			watch_kill(w, g);
			w->exited = 1;
			w->drain_until = clock_ms();
			continue;
		}
		for (int i = 0; i < 2; i++)
			if (istream[i] >= 0 && pf[istream[i]].revents)
				stream_read(&w->streams[i], p->ctx);
		if (ipid >= 0 && pf[ipid].revents) {
			/* The step's process ended: nothing it started may outlive it. */
			w->exited = 1;
			step_group_kill(g);
			w->drain_until = clock_ms() + DRAIN_MS;
		}
	}
}

/* spawn_step() and a pidfd to watch the process with: 0, or spawn_step()'s -errno. */
static int start(const struct step_proc *p, struct step_group *g, int64_t deadline, int unwaited,
                 struct step_job *j)
{
	struct stream streams[2] = {{-1, NULL, 0}, {-1, NULL, 0}};
	int devnull, slot, ret;

	memset(j, 0, sizeof(*j));
	j->pidfd = j->out_fd = j->err_fd = j->exec_fd = -1;
	j->on_out = p->on_out;
	j->on_err = p->on_err;
	j->ctx = p->ctx;
	j->g = g;
	j->start = clock_ms();
	j->deadline = deadline;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return -errno;
	slot = unwaited ? held_slot() : 0;
	ret = slot < 0 ? slot
	               : spawn_step(p, g, devnull, streams, &j->pid, unwaited ? &j->exec_fd : NULL);
	close(devnull);
	if (ret < 0)
		return ret;
	if (unwaited)
		held[slot] = (struct held){j->pid, 0, 0};
	j->out_fd = streams[0].fd;
	j->err_fd = streams[1].fd;
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0) {
		/* Cannot watch it: kill it rather than lose control of it. */
		step_group_kill(g);
		kill(j->pid, SIGKILL);
	}
	return 0;
}

/* Watch the process start() started until it has ended, then reap it. */
static int finish(struct step_job *j, int unwaited, struct step_result *res)
{
	struct watch w = {.pid = j->pid,
	                  .pidfd = j->pidfd,
	                  .deadline = j->deadline,
	                  .streams = {{j->out_fd, j->on_out, 0}, {j->err_fd, j->on_err, 0}}};
	struct step_proc p = {.ctx = j->ctx};
	int status = 0, ret = 0, cerr = 0;

	memset(res, 0, sizeof(*res));
	/* Started by step_start(): a failed exec ends here as step_run()'s does. */
	if (j->exec_fd >= 0) {
		if (exec_wait(j->exec_fd, &cerr) == sizeof(cerr))
			ret = -cerr;
		close(j->exec_fd);
		j->exec_fd = -1;
	}
	if (ret == 0 && w.pidfd < 0) {
		w.exited = 1;
		w.drain_until = clock_ms() + DRAIN_MS;
	}
	if (ret == 0)
		watch(&w, &p, j->g, res);
	/* It ran: whatever went wrong while watching it, *res tells how it ended. */
	/* reaped already with the orphans of another group's end (reap_orphans())? */
	if (!unwaited || held_take(w.pid, &status) < 0)
		while (waitpid(w.pid, &status, 0) < 0)
			if (errno != EINTR) {
				ret = ret < 0 ? ret : -errno;
				break;
			}
	if (unwaited)
		held_take(w.pid, NULL);
	res->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	res->ms = clock_ms() - j->start;
	for (int i = 0; i < 2; i++)
		if (w.streams[i].fd >= 0)
			close(w.streams[i].fd);
	if (w.pidfd >= 0)
		close(w.pidfd);
	j->pid = 0;
	j->pidfd = j->out_fd = j->err_fd = -1;
	return ret;
}

int step_run(const struct step_proc *p, struct step_group *g, int64_t deadline,
             struct step_result *res)
{
	struct step_job j;
	int ret;

	memset(res, 0, sizeof(*res));
	ret = start(p, g, deadline, 0, &j);
	return ret < 0 ? ret : finish(&j, 0, res);
}

int step_start(const struct step_proc *p, struct step_group *g, int64_t deadline,
               struct step_job *j)
{
	return start(p, g, deadline, 1, j);
}

int step_finish(struct step_job *j, struct step_result *res)
{
	return finish(j, 1, res);
}
