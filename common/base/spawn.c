#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/banned.h"

extern char **environ;

void spawn_give_fd(struct spawn *sp, int from, int to)
{
	if (sp->ngive >= SPAWN_MAX_FDS || to < 3)
		BUG("spawn_give_fd: bad request (%d -> %d)", from, to);
	sp->give[sp->ngive].from = from;
	sp->give[sp->ngive].to = to;
	sp->ngive++;
}

int fd_set_cloexec(int fd, int on)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
	return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

int fd_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

/* Find the program in PATH, in the parent: nothing after fork may allocate. */
static char *find_program(const char *name)
{
	const char *path = getenv("PATH");
	struct buf b = BUF_INIT;

	if (strchr(name, '/'))
		return xstrdup(name);
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *end = strchrnul(path, ':');

		buf_reset(&b);
		if (end == path)
			buf_addch(&b, '.');
		else
			buf_add(&b, path, (size_t)(end - path));
		buf_addch(&b, '/');
		buf_addstr(&b, name);
		if (access(b.buf, X_OK) == 0)
			return buf_detach(&b, NULL);
		path = *end ? end + 1 : end;
	}
	buf_release(&b);
	return NULL;
}

static int env_matches(const char *entry, const char *name, size_t n)
{
	return !strncmp(entry, name, n) && (entry[n] == '=' || entry[n] == '\0');
}

/* The child's environment: ours (unless replaced) with sp->env applied. */
static void build_env(struct spawn *sp, struct strvec *out)
{
	if (!sp->env_replace)
		for (char **e = environ; *e; e++) {
			size_t n = strcspn(*e, "=");
			int overridden = 0;

			for (size_t i = 0; i < sp->env.nr; i++)
				if (env_matches(sp->env.v[i], *e, n) &&
				    strcspn(sp->env.v[i], "=") == n)
					overridden = 1;
			if (!overridden)
				strvec_push(out, *e);
		}
	for (size_t i = 0; i < sp->env.nr; i++)
		if (strchr(sp->env.v[i], '='))
			strvec_push(out, sp->env.v[i]);
}

static void child_fail(int errfd, int err)
{
	/* async-signal-safe: write and _exit only */
	ssize_t w = write(errfd, &err, sizeof(err));

	(void)w;
	_exit(127);
}

/* Move fd to a number >= floor, clear of 0-2 and every target fd. */
static int lift_fd(int fd, int floor)
{
	return fcntl(fd, F_DUPFD, floor);
}

/* spawn_start()'s pipes ([0] the read end, [1] the write end) and /dev/null; -1: none. */
struct spawn_fds {
	int in[2], out[2], err[2], status[2];
	int devnull;
};

/*
 * Between fork and exec (async-signal-safe calls only): the signals reset,
 * the session and the parent-death signal, fds 0-2 and the given fds at
 * their numbers, every other fd closed, then exec.  An exec that fails, or
 * anything before it, sends its errno on the status pipe.
 */
static void spawn_child(const struct spawn *sp, const char *prog, const struct strvec *envp,
                        const struct spawn_fds *f)
{
	int src[3], lifted[SPAWN_MAX_FDS], floor = 10, lo;
	int sfd = f->status[1];
	sigset_t all;

	/* Signals the parent ignored or blocked must not reach the program so. */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);

	if (sp->new_session)
		setsid();
	if (sp->pdeathsig) {
		prctl(PR_SET_PDEATHSIG, sp->pdeathsig);
		if (getppid() == 1)
			_exit(127);
	}
	for (int i = 0; i < sp->ngive; i++)
		if (sp->give[i].to >= floor)
			floor = sp->give[i].to + 1;
	lo = floor;
	if (sfd < floor) {
		sfd = fcntl(sfd, F_DUPFD_CLOEXEC, floor);
		if (sfd < 0)
			_exit(127);
		floor = sfd + 1;
	}

	src[0] = sp->in == SPAWN_PIPE ? f->in[0] : sp->in == SPAWN_NULL ? f->devnull : sp->in;
	src[1] = sp->out == SPAWN_PIPE ? f->out[1] : sp->out == SPAWN_NULL ? f->devnull : sp->out;
	src[2] = sp->err == SPAWN_PIPE ? f->err[1] : sp->err == SPAWN_NULL ? f->devnull : sp->err;
	/* Lift every source out of the way first, so no dup2 clobbers another. */
	for (int i = 0; i < 3; i++)
		if (src[i] >= 0 && (src[i] = lift_fd(src[i], floor)) < 0)
			child_fail(sfd, errno);
	for (int i = 0; i < sp->ngive; i++)
		if ((lifted[i] = lift_fd(sp->give[i].from, floor)) < 0)
			child_fail(sfd, errno);
	for (int i = 0; i < 3; i++)
		if (src[i] >= 0 && dup2(src[i], i) < 0)
			child_fail(sfd, errno);
	for (int i = 0; i < sp->ngive; i++)
		if (dup2(lifted[i], sp->give[i].to) < 0)
			child_fail(sfd, errno);
	/* Close everything else, keeping the status pipe until exec. */
	for (int fd = 3; fd < lo; fd++) {
		int keep = 0;

		for (int i = 0; i < sp->ngive; i++)
			if (sp->give[i].to == fd)
				keep = 1;
		if (!keep)
			close(fd);
	}
	if (sfd > lo)
		syscall(SYS_close_range, lo, sfd - 1, 0);
	syscall(SYS_close_range, sfd + 1, ~0U, 0);
	if (sp->dir && chdir(sp->dir) < 0)
		child_fail(sfd, errno);
	execve(prog, (char *const *)sp->args.v, (char *const *)envp->v);
	child_fail(sfd, errno);
}

/* The pipes spawn_start() needs for sp, and /dev/null if it is used.  0 or -errno. */
static int open_fds(const struct spawn *sp, struct spawn_fds *f)
{
	if ((sp->in == SPAWN_PIPE && pipe2(f->in, O_CLOEXEC) < 0) ||
	    (sp->out == SPAWN_PIPE && pipe2(f->out, O_CLOEXEC) < 0) ||
	    (sp->err == SPAWN_PIPE && pipe2(f->err, O_CLOEXEC) < 0) ||
	    pipe2(f->status, O_CLOEXEC) < 0)
		return -errno;
	if (sp->in == SPAWN_NULL || sp->out == SPAWN_NULL || sp->err == SPAWN_NULL) {
		f->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (f->devnull < 0)
			return -errno;
	}
	return 0;
}

static void close_fds(struct spawn_fds *f)
{
	for (int i = 0; i < 2; i++) {
		if (f->in[i] >= 0)
			close(f->in[i]);
		if (f->out[i] >= 0)
			close(f->out[i]);
		if (f->err[i] >= 0)
			close(f->err[i]);
		if (f->status[i] >= 0)
			close(f->status[i]);
	}
	if (f->devnull >= 0)
		close(f->devnull);
}

int spawn_start(struct spawn *sp)
{
	struct spawn_fds f = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, -1};
	struct strvec envp = STRVEC_INIT;
	char *prog = NULL;
	int ret = 0, child_err = 0;
	ssize_t n;
	pid_t pid;

	if (!sp->args.nr)
		return -EINVAL;
	prog = find_program(sp->args.v[0]);
	if (!prog)
		return -ENOENT;
	build_env(sp, &envp);
	if ((ret = open_fds(sp, &f)) < 0)
		goto out;

	pid = fork();
	if (pid < 0) {
		ret = -errno;
		goto out;
	}
	if (pid == 0)
		spawn_child(sp, prog, &envp, &f);

	sp->pid = pid;
	close(f.status[1]);
	f.status[1] = -1;
	do
		n = read(f.status[0], &child_err, sizeof(child_err));
	while (n < 0 && errno == EINTR);
	if (n == sizeof(child_err)) {
		/* The exec failed: reap the child and report. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		sp->pid = -1;
		ret = -child_err;
		goto out;
	}
	if (sp->in == SPAWN_PIPE) {
		sp->in_fd = f.in[1];
		f.in[1] = -1;
	}
	if (sp->out == SPAWN_PIPE) {
		sp->out_fd = f.out[0];
		f.out[0] = -1;
	}
	if (sp->err == SPAWN_PIPE) {
		sp->err_fd = f.err[0];
		f.err[0] = -1;
	}
out:
	close_fds(&f);
	free(prog);
	strvec_clear(&envp);
	return ret;
}

static void close_ends(struct spawn *sp)
{
	if (sp->in_fd >= 0)
		close(sp->in_fd);
	if (sp->out_fd >= 0)
		close(sp->out_fd);
	if (sp->err_fd >= 0)
		close(sp->err_fd);
	sp->in_fd = sp->out_fd = sp->err_fd = -1;
}

int spawn_wait(struct spawn *sp)
{
	int status;

	close_ends(sp);
	if (sp->pid < 0)
		return -ECHILD;
	while (waitpid(sp->pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	sp->pid = -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

int spawn_wait_within(struct spawn *sp, int timeout_ms)
{
	const struct timespec tick = {0, 10 * 1000 * 1000};

	if (sp->pid <= 0)
		return spawn_wait(sp);
	for (int waited = 0;; waited += 10) {
		siginfo_t si;

		si.si_pid = 0;
		if (waitid(P_PID, (id_t)sp->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 &&
		    errno != EINTR)
			break;
		if (si.si_pid == sp->pid || waited >= timeout_ms)
			break;
		nanosleep(&tick, NULL);
	}
	if (sp->pid > 0)
		kill(sp->pid, SIGKILL); /* harmless when it has exited: not reaped yet */
	return spawn_wait(sp);
}

int spawn_stop(struct spawn *sp, int sig)
{
	if (sp->pid <= 0)
		return 0;
	kill(sp->pid, sig);
	return spawn_wait(sp);
}

void spawn_clear(struct spawn *sp)
{
	close_ends(sp);
	strvec_clear(&sp->args);
	strvec_clear(&sp->env);
}

int spawn_run(struct spawn *sp)
{
	int ret;

	if (sp->in == SPAWN_INHERIT)
		sp->in = SPAWN_NULL;
	ret = spawn_start(sp);
	if (ret < 0)
		return ret;
	return spawn_wait(sp);
}

/* spawn_capture() and spawn_capture_within(); timeout_ms < 0: none. */
static int capture(struct spawn *sp, struct buf *out, size_t max, int timeout_ms)
{
	int64_t deadline, left;
	ssize_t n;
	int ret;

	if (sp->in == SPAWN_INHERIT)
		sp->in = SPAWN_NULL;
	sp->out = SPAWN_PIPE;
	deadline = clock_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	ret = spawn_start(sp);
	if (ret < 0)
		return ret;
	n = timeout_ms < 0 ? buf_read_fd(out, sp->out_fd, max)
	                   : buf_read_fd_within(out, sp->out_fd, max, timeout_ms);
	if (n < 0) {
		kill(sp->pid, SIGKILL);
		spawn_wait(sp);
		return (int)n;
	}
	if (timeout_ms < 0)
		return spawn_wait(sp);
	/* what is left of the one time: stdout's end and the exit share it */
	left = deadline - clock_ms();
	return spawn_wait_within(sp, left > 0 ? (int)left : 0);
}

int spawn_capture(struct spawn *sp, struct buf *out, size_t max)
{
	return capture(sp, out, max, -1);
}

int spawn_capture_within(struct spawn *sp, struct buf *out, size_t max, int timeout_ms)
{
	return capture(sp, out, max, timeout_ms);
}

/* In the worker: the signals, stdin and stdout, the fds (spawn.h). */
static void worker_setup(pid_t parent, const int *keep, size_t nkeep, int flags)
{
	int null;

	if ((flags & SPAWN_WORKER_PDEATH) &&
	    (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
		_exit(1);
	if (flags & SPAWN_WORKER_PDEATH) {
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
	}
	if (flags & SPAWN_WORKER_DETACH) {
		setsid();
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_IGN);
	}
	/* Not the caller's stdout: whoever reads it waits for its EOF, not ours. */
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
	}
	for (int fd = 3; fd < 1024; fd++) {
		int kept = 0;

		for (size_t i = 0; i < nkeep; i++)
			kept |= keep[i] == fd;
		if (!kept)
			close(fd);
	}
}

pid_t spawn_worker(const int *keep, size_t nkeep, int flags)
{
	pid_t parent = getpid(), pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		worker_setup(parent, keep, nkeep, flags);
	return pid;
}
