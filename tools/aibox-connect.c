/*
 * aibox-connect SOCKET: join stdin/stdout to a unix stream socket.
 *
 * QEMU runs it (through /bin/sh) for each connection the guest makes to the
 * guestfwd address 10.0.2.100:3128, with the connection as stdin and stdout;
 * it connects to the task's proxy socket and copies both ways until both
 * directions are done.  A tiny socat, so aibox does not depend on one.  The
 * tests use it as ssh's ProxyCommand too.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "err.h"
#include "banned.h"

static const char usage_text[] = "usage: aibox-connect <socket>\n";

int main(int argc, char **argv)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char up[65536], down[65536];
	size_t uplen = 0, downlen = 0;
	int in_eof = 0, sock_eof = 0, s;

	tool_init(argc, argv);
	/*
	 * ssh sends its ProxyCommand SIGHUP as it exits, maybe before we passed
	 * on its last packet (the disconnect that ends the server): finish the
	 * copy first, EOF on stdin says when.
	 */
	signal(SIGHUP, SIG_IGN);
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc != 2)
		usage_die(usage_text);
	if (strlen(argv[1]) >= sizeof(sun.sun_path))
		die("socket path too long: '%s'", argv[1]);
	memcpy(sun.sun_path, argv[1], strlen(argv[1]) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die_errno("cannot make a socket");
	if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		die_errno("cannot connect to '%s'", argv[1]);

	while (!(in_eof && sock_eof && !uplen && !downlen)) {
		struct pollfd pfd[3] = {
		    {.fd = 0, .events = (!in_eof && uplen < sizeof(up)) ? POLLIN : 0},
		    {.fd = s,
		     .events = (!sock_eof && downlen < sizeof(down) ? POLLIN : 0) |
		               (uplen ? POLLOUT : 0)},
		    {.fd = 1, .events = downlen ? POLLOUT : 0},
		};
		ssize_t n;

		if (in_eof && !uplen && sock_eof && !downlen)
			break;
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			die_errno("poll");
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(0, up + uplen, sizeof(up) - uplen);
			if (n > 0)
				uplen += (size_t)n;
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				in_eof = 1;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR) && !sock_eof) {
			n = read(s, down + downlen, sizeof(down) - downlen);
			if (n > 0)
				downlen += (size_t)n;
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				sock_eof = 1;
		}
		if (pfd[1].revents & POLLOUT && uplen) {
			n = write(s, up, uplen);
			if (n > 0) {
				memmove(up, up + n, uplen - (size_t)n);
				uplen -= (size_t)n;
			} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				return 0; /* the proxy closed: nothing more to say */
			}
		}
		if (pfd[2].revents & (POLLOUT | POLLERR | POLLHUP) && downlen) {
			n = write(1, down, downlen);
			if (n > 0) {
				memmove(down, down + n, downlen - (size_t)n);
				downlen -= (size_t)n;
			} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				return 0; /* the guest closed */
			}
		}
		if (in_eof && !uplen)
			shutdown(s, SHUT_WR);
		if (sock_eof && !downlen)
			shutdown(1, SHUT_WR); /* fails harmlessly when stdout is no socket */
	}
	return 0;
}
