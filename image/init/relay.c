/*
 * aibox-init: the SSH server on the private channel.
 *
 * `sshd -i` straight on a virtio-serial port corrupts the stream now and then,
 * and dropbear -i refuses a char device.  What works (docs/internals.md,
 * "Facts"): one process
 * owns the port, waits until the host is connected (POLLHUP clears), relays
 * the port to `sshd -i` over a socketpair, and starts over with a new sshd
 * when either side ends.  Bytes left over from an ended session are dropped,
 * so the next server only sees its own client, who waits for its banner.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/spawn.h"
#include "base/banned.h"

#define RELAY_BUF (64 * 1024)

enum relay_end { HOST_GONE, SERVER_DONE };

int find_port(const char *name, char *path, size_t n)
{
	struct buf p = BUF_INIT, val = BUF_INIT;
	int ret = -ENOENT;

	for (int tries = 0; tries < 100 && ret == -ENOENT; tries++) {
		DIR *d = opendir("/sys/class/virtio-ports");
		struct dirent *de;

		while (d && ret == -ENOENT && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			buf_reset(&p);
			buf_reset(&val);
			buf_addf(&p, "/sys/class/virtio-ports/%s/name", de->d_name);
			if (buf_read_file(&val, p.buf, 256) < 0)
				continue;
			buf_rtrim(&val);
			if (strcmp(val.buf, name))
				continue;
			if ((size_t)snprintf(path, n, "/dev/%s", de->d_name) >= n)
				ret = -ENAMETOOLONG;
			else
				ret = 0;
		}
		if (d)
			closedir(d);
		if (ret == -ENOENT)
			usleep(50 * 1000);
	}
	buf_release(&p);
	buf_release(&val);
	return ret;
}

/* Wait until the host end of the port is open: poll stops reporting POLLHUP. */
static void wait_host(int port)
{
	for (;;) {
		struct pollfd pfd = {.fd = port, .events = POLLIN};
		int r = poll(&pfd, 1, 100);

		if (r < 0 && errno != EINTR)
			return;
		if (r >= 0 && !(pfd.revents & POLLHUP))
			return;
		usleep(50 * 1000);
	}
}

/* Drop whatever is waiting on the port (left over from an ended session). */
static void drain_port(int port)
{
	char junk[4096];

	while (read(port, junk, sizeof(junk)) > 0)
		;
}

struct pipebuf {
	char data[RELAY_BUF];
	size_t len;
};

/* Move bytes from fd into pb.  1 moved or nothing ready, 0 EOF, -errno. */
static int fill(struct pipebuf *pb, int fd)
{
	ssize_t n = read(fd, pb->data + pb->len, sizeof(pb->data) - pb->len);

	if (n > 0) {
		pb->len += (size_t)n;
		return 1;
	}
	if (n == 0)
		return 0;
	return (errno == EAGAIN || errno == EINTR) ? 1 : -errno;
}

/* Move bytes from pb to fd.  0 or -errno. */
static int flush(struct pipebuf *pb, int fd)
{
	ssize_t n = write(fd, pb->data, pb->len);

	if (n > 0) {
		memmove(pb->data, pb->data + n, pb->len - (size_t)n);
		pb->len -= (size_t)n;
		return 0;
	}
	return (n < 0 && errno != EAGAIN && errno != EINTR) ? -errno : 0;
}

static struct pipebuf to_server, to_host;

static enum relay_end relay_session(int port)
{
	struct spawn sp = SPAWN_INIT;
	int sv[2];
	int server_eof = 0;
	enum relay_end end = HOST_GONE;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		error("cannot make a socketpair: %s", strerror(errno));
		sleep(1);
		return SERVER_DONE;
	}
	/* AIBOX_ENV: aibox run's env values, sent as an SSH env request (run.h). */
	strvec_pushl(&sp.args, "/usr/sbin/sshd", "-i", "-e", "-o", "AcceptEnv=" GUEST_RUN_ENV_VAR,
	             NULL);
	sp.in = sv[1];
	sp.out = sv[1];
	sp.new_session = 1;
	if (spawn_start(&sp) < 0) {
		error("cannot start sshd: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		spawn_clear(&sp);
		sleep(1);
		return SERVER_DONE;
	}
	close(sv[1]);
	fd_set_nonblock(sv[0], 1);
	to_server.len = to_host.len = 0;

	for (;;) {
		struct pollfd pfd[2] = {
		    {.fd = port, .events = 0},
		    {.fd = sv[0], .events = 0},
		};
		int r;

		if (to_server.len < sizeof(to_server.data))
			pfd[0].events |= POLLIN;
		if (to_host.len)
			pfd[0].events |= POLLOUT;
		if (!server_eof && to_host.len < sizeof(to_host.data))
			pfd[1].events |= POLLIN;
		if (to_server.len)
			pfd[1].events |= POLLOUT;
		if (server_eof && !to_host.len) {
			end = SERVER_DONE;
			break;
		}
		r = poll(pfd, 2, -1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = fill(&to_server, port);
			if (r <= 0 || (pfd[0].revents & POLLHUP && !(pfd[0].revents & POLLIN))) {
				end = HOST_GONE;
				break;
			}
		}
		if (pfd[0].revents & POLLOUT && flush(&to_host, port) < 0) {
			end = HOST_GONE;
			break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR) && !server_eof) {
			r = fill(&to_host, sv[0]);
			if (r <= 0)
				server_eof = 1;
		}
		if (pfd[1].revents & POLLOUT && flush(&to_server, sv[0]) < 0)
			server_eof = 1;
	}
	close(sv[0]);
	fprintf(stderr, "aibox-init: ssh session ended by the %s\n",
	        end == HOST_GONE ? "host" : "server");
	if (end == HOST_GONE)
		kill(-sp.pid, SIGKILL);
	spawn_wait(&sp);
	spawn_clear(&sp);
	return end;
}

int ssh_relay_loop(const char *port_path, int task_mode)
{
	int port = open(port_path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

	if (port < 0)
		return error("cannot open '%s': %s", port_path, strerror(errno)), -errno;
	for (;;) {
		enum relay_end end;

		wait_host(port);
		drain_port(port);
		end = relay_session(port);
		if (task_mode && (end == HOST_GONE || access(GUEST_SESSION_FLAG, F_OK) == 0))
			break;
	}
	close(port);
	return -ECONNRESET;
}
