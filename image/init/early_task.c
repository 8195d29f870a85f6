/*
 * The early task (docs/init-task.md, "The early task"): when settings.json
 * names no secrets, PID 1's child (early_clone.c) runs the whole task before
 * the host's SSH session has come, and the session takes the task's stdin,
 * stdout and stderr when it does: Claude Code starts while the host sets up
 * its session.
 *
 * In o->early (root's, 0700), beside the early clone's files:
 *   sock      a SOCK_SEQPACKET socket PID 1 listens on before it serves SSH.
 *             The child answers the first connection with one message,
 *             EARLY_HELLO and three fds (the task's stdin to write, its
 *             stdout and stderr to read), then "exit N\n" once the task has
 *             ended.  A child that runs no task closes the socket: the
 *             session's connection ends with no message (or is refused), and
 *             the session runs the task itself.
 *   attached  "<ms> <fork>\n<line>\n": clock_ms() at the session's attach
 *             and at its process's start (-1: not known), and its vm.log
 *             line; written by the session (early_file_write()), read by
 *             the task for result.json and vm.log.
 * Only root can enter the folder; the only process of the user's is the
 * task's own (git, Claude Code), as in the session.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "task_int.h"
#include "base/banned.h"

#define EARLY_SOCK     "sock"
#define EARLY_ATTACHED "attached"
#define EARLY_HELLO    "task\n"
#define EARLY_NFDS     3
#define RELAY_BUF      65536

/* The socket's address into a, its path into path: 0, or -ENAMETOOLONG. */
static int sock_addr(const struct guest_task_opts *o, struct sockaddr_un *a, struct buf *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	early_path(path, o, EARLY_SOCK);
	if (path->len >= sizeof(a->sun_path))
		return -ENAMETOOLONG;
	memcpy(a->sun_path, path->buf, path->len + 1);
	return 0;
}

int early_task_listen(const struct guest_task_opts *o)
{
	struct sockaddr_un a;
	struct buf path = BUF_INIT;
	int fd = -1;

	if (sock_addr(o, &a, &path) < 0) {
		error("cannot listen on '%s': the path is too long", path.buf);
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0) {
		error("cannot listen on '%s': %s", path.buf, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
out:
	buf_release(&path);
	return fd;
}

void early_task_unlisten(const struct guest_task_opts *o)
{
	struct buf path = BUF_INIT;

	early_path(&path, o, EARLY_SOCK);
	unlink(path.buf);
	buf_release(&path);
}

/* One message on sock, with nfds fds (0: none).  0, or -errno. */
static int send_msg(int sock, const char *msg, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * EARLY_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = strlen(msg)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

void early_task_run(const struct guest_task_opts *o, int lock, int lsock)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int conn = -1, status = 0, code;
	char msg[32];
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		error("cannot start the early task: %s", strerror(errno));
		_exit(1); /* the session finds no task: it runs it */
	}
	pid = fork();
	if (pid == 0) {
		struct guest_task_opts to = *o;

		close(lsock);
		close(lock);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(2);
		close_pair(in);
		close_pair(out);
		close_pair(err);
		to.early_task = 1;
		to.in = 0;
		to.out = 1;
		to.err = 2;
		_exit(task_run(&to));
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(lock);
	if (pid < 0) {
		error("cannot start the early task: %s", strerror(errno));
		_exit(1);
	}
	do
		conn = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
	while (conn < 0 && errno == EINTR);
	close(lsock);
	early_task_unlisten(o);
	if (conn >= 0 &&
	    send_msg(conn, EARLY_HELLO, (const int[]){in[1], out[0], err[0]}, EARLY_NFDS) < 0) {
		close(conn);
		conn = -1;
	}
	/* The session holds them now (or no one: the task's writes then fail). */
	close(in[1]);
	close(out[0]);
	close(err[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	snprintf(msg, sizeof(msg), "exit %d\n", code);
	if (conn >= 0)
		send_msg(conn, msg, NULL, 0);
	_exit(0);
}

int early_task_attached(const struct guest_task_opts *o, int64_t *at_ms, int64_t *fork_ms,
                        struct buf *line)
{
	struct buf path = BUF_INIT, b = BUF_INIT;
	long long at, fork;
	char *nl;
	int used = 0, ret = -1;

	buf_reset(line);
	early_path(&path, o, EARLY_ATTACHED);
	if (buf_read_file(&b, path.buf, 4096) <= 0 || !(nl = strchr(b.buf, '\n')) ||
	    sscanf(b.buf, "%lld %lld%n", &at, &fork, &used) != 2 || b.buf + used != nl || at < 0)
		goto out;
	*at_ms = at;
	*fork_ms = fork >= 0 && fork <= at ? fork : -1;
	buf_addstr(line, nl + 1);
	while (line->len && line->buf[line->len - 1] == '\n')
		buf_setlen(line, line->len - 1);
	ret = 0;
out:
	buf_release(&path);
	buf_release(&b);
	return ret;
}

/* The attach's time and vm.log line, for the task (early_task_attached()). */
static void attached_write(const struct guest_task_opts *o, int64_t at)
{
	struct buf b = BUF_INIT;
	char line[320];
	double later = -1;

	if (session_line(at, "attached to the task the init started", line, sizeof(line), &later) <
	    0)
		line[0] = '\0';
	buf_addf(&b, "%" PRId64 " %" PRId64 "\n%s\n", at,
	         later >= 0 ? at - (int64_t)(later * 1e3) : (int64_t)-1, line);
	early_file_write(o, EARLY_ATTACHED, &b);
	buf_release(&b);
}

/* "exit N\n" from the task's holder: N, or -1. */
static int exit_parse(const char *s)
{
	char *end;
	long n;

	if (strncmp(s, "exit ", 5))
		return -1;
	errno = 0;
	n = strtol(s + 5, &end, 10);
	return errno || strcmp(end, "\n") || n < 0 || n > 255 ? -1 : (int)n;
}

/*
 * What *from has now into *to (a failed write closes *to: the other side is
 * gone, the rest is read and dropped); at its end *from is closed, and *to too
 * when end_to.  Either set to -1 once closed.
 */
static void pass_on(int *from, int *to, int end_to)
{
	static char buf[RELAY_BUF];
	ssize_t n = read(*from, buf, sizeof(buf));

	if (n > 0) {
		if (*to >= 0 && write_all(*to, buf, (size_t)n) < 0) {
			close(*to);
			*to = -1;
		}
	} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
		close(*from);
		*from = -1;
		if (end_to && *to >= 0) {
			close(*to);
			*to = -1;
		}
	}
}

/*
 * Relay our stdin into tin and tout, terr out to our stdout and stderr until
 * both end, and read the task's exit code from ctl: that code, or 2 when the
 * holder gave none.
 */
static int relay(int tin, int tout, int terr, int ctl)
{
	static char inbuf[RELAY_BUF];
	size_t inlen = 0, inoff = 0;
	int sin = 0, sout = 1, serr = 2, code = -1;

	signal(SIGPIPE, SIG_IGN);
	fcntl(tin, F_SETFL, O_NONBLOCK);
	while (tout >= 0 || terr >= 0 || (ctl >= 0 && code < 0)) {
		struct pollfd p[5];
		int np = 0, isin = -1, itin = -1, itout = -1, iterr = -1, ictl = -1;
		ssize_t n;

		if (sin >= 0 && tin >= 0 && inlen == 0)
			p[isin = np++] = (struct pollfd){.fd = sin, .events = POLLIN};
		if (tin >= 0 && inlen > 0)
			p[itin = np++] = (struct pollfd){.fd = tin, .events = POLLOUT};
		if (tout >= 0)
			p[itout = np++] = (struct pollfd){.fd = tout, .events = POLLIN};
		if (terr >= 0)
			p[iterr = np++] = (struct pollfd){.fd = terr, .events = POLLIN};
		if (ctl >= 0 && code < 0)
			p[ictl = np++] = (struct pollfd){.fd = ctl, .events = POLLIN};
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (isin >= 0 && p[isin].revents) {
			n = read(sin, inbuf, sizeof(inbuf));
			if (n > 0) {
				inlen = (size_t)n;
				inoff = 0;
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				sin = -1; /* the host's EOF: the task's, once what came is in */
			}
		}
		if (itin >= 0 && p[itin].revents) {
			n = write(tin, inbuf + inoff, inlen - inoff);
			if (n > 0 && (inoff += (size_t)n) == inlen)
				inlen = 0;
			else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				close(tin); /* the task reads no more */
				tin = -1;
				inlen = 0;
			}
		}
		if (tin >= 0 && sin < 0 && inlen == 0) {
			close(tin);
			tin = -1;
		}
		/* At the results' end the host sees ours end. */
		if (itout >= 0 && p[itout].revents)
			pass_on(&tout, &sout, 1);
		if (iterr >= 0 && p[iterr].revents)
			pass_on(&terr, &serr, 0);
		if (ictl >= 0 && p[ictl].revents) {
			char msg[32];

			n = recv(ctl, msg, sizeof(msg) - 1, 0);
			if (n > 0) {
				msg[n] = '\0';
				code = exit_parse(msg);
			}
			if (n <= 0 || code < 0) {
				close(ctl);
				ctl = -1;
			}
		}
	}
	if (tin >= 0)
		close(tin);
	if (ctl >= 0)
		close(ctl);
	return code < 0 ? 2 : code;
}

int task_early_attach(const struct guest_task_opts *o)
{
	struct sockaddr_un a;
	union {
		char buf[CMSG_SPACE(sizeof(int) * EARLY_NFDS)];
		struct cmsghdr align;
	} u;
	char msg[16];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr m = {.msg_iov = &iov,
	                   .msg_iovlen = 1,
	                   .msg_control = u.buf,
	                   .msg_controllen = sizeof(u.buf)};
	struct buf path = BUF_INIT;
	int fds[EARLY_NFDS], nfds = 0, fd = -1, ret = -1;
	struct cmsghdr *c;
	ssize_t n;

	if (!o->early)
		return -1;
	if (sock_addr(o, &a, &path) < 0)
		goto out;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto out; /* no early task: the session runs it */
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (nfds > EARLY_NFDS)
			nfds = EARLY_NFDS; /* MSG_CTRUNC below */
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)nfds);
	}
	if (n <= 0)
		goto out; /* the child runs no task (the early clone's, or none): the session runs
		             it */
	if ((size_t)n != strlen(EARLY_HELLO) || memcmp(msg, EARLY_HELLO, (size_t)n) ||
	    nfds != EARLY_NFDS || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		/* Not one of ours, and a task may run: never a second one. */
		error("the early task's answer is not one of ours");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		ret = 2;
		goto out;
	}
	attached_write(o, clock_ms());
	ret = relay(fds[0], fds[1], fds[2], fd);
	fd = -1; /* closed by relay() */
out:
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	return ret;
}
