/*
 * aibox-connect [--max N [--log FILE]] SOCKET: join stdin/stdout to a unix
 * stream socket.
 *
 * QEMU runs it (through /bin/sh) for each connection the guest makes to the
 * guestfwd address 10.0.2.100:3128, with the connection as stdin and stdout;
 * it connects to the task's proxy socket and copies both ways until both
 * directions are done.  A tiny socat, so aibox does not depend on one.  The
 * tests use it as ssh's ProxyCommand too.
 *
 * The guest decides how many connections it opens, and each costs one of
 * us: with --max N at most N run at once for SOCKET.  Each holds a write
 * lock on one byte, 0 to N-1, of the file SOCKET.slots (made beside the
 * socket) while it runs; the kernel drops the lock when the process ends,
 * however it ends.  One that finds no byte free closes the connection at
 * once and exits 1.  The refusals are counted in the same file (8 bytes at
 * COUNT_AT, under a lock on the byte after them), and the 1st, 2nd, 4th,
 * 8th... append a `refused` line in proxy.log's format to FILE, so a guest
 * that keeps trying adds at most one line per doubling (docs/task-host.md,
 * "The guest's connections").
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log_cap.h"
#include "proxy/log_line.h"
#include "base/num.h"
#include "base/opt.h"
#include "proxy/proxy.h"
#include "base/banned.h"

static const char usage_text[] = "usage: aibox-connect [--max N [--log FILE]] <socket>\n";

/* The most --max allows: each slot is one byte of the slots file. */
#define MAX_SLOTS 100000
/* Where the refusals are counted in the slots file: past every slot. */
#define COUNT_AT MAX_SLOTS

/*
 * Take one of the max slots of socket: 0, the lock held until we exit, or
 * -EBUSY when all are taken (-errno when the file cannot be opened).
 */
static int take_slot(const char *socket, long max, int *slots_fd)
{
	struct buf path = BUF_INIT;
	int fd, ret = -EBUSY;

	buf_addf(&path, "%s.slots", socket);
	fd = open(path.buf, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		ret = -errno;
	for (long i = 0; fd >= 0 && i < max; i++) {
		struct flock fl = {
		    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = i, .l_len = 1};

		if (fcntl(fd, F_SETLK, &fl) == 0) {
			ret = 0; /* fd stays open: closing it would drop the lock */
			break;
		}
	}
	if (ret == -EBUSY)
		*slots_fd = fd; /* for count_refusal() */
	else if (ret < 0 && fd >= 0)
		close(fd);
	buf_release(&path);
	return ret;
}

/*
 * Add one to the refusals counted in the slots file fd: the new count, or 0
 * when it cannot be counted (then the refusal is logged as if it were the
 * first).
 */
static uint64_t count_refusal(int fd)
{
	struct flock fl = {
	    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = COUNT_AT + 8, .l_len = 1};
	unsigned char b[8] = {0};
	uint64_t n = 0;

	if (fcntl(fd, F_SETLKW, &fl) < 0)
		return 0;
	if (pread(fd, b, sizeof(b), COUNT_AT) < 0)
		return 0; /* the lock goes with the process */
	for (int i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	n++;
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(n >> (8 * i));
	if (pwrite(fd, b, sizeof(b), COUNT_AT) != (ssize_t)sizeof(b))
		return 0;
	return n;
}

/*
 * The refusal's line, appended to log as aibox-proxy writes its lines
 * (docs/proxy.md, "proxy.log"): the verdict refused, no host.
 */
static void log_refusal(const char *log, long max, uint64_t count)
{
	struct buf b = BUF_INIT;
	int fd;

	log_line_time(&b);
	buf_addf(&b,
	         " refused - (too many connections from the VM: %ld at once; %llu "
	         "refused so far, logged at powers of two) sent=0 received=0 duration=0.000s\n",
	         max, (unsigned long long)(count ? count : 1));
	if (!log) {
		error("too many connections from the VM: %ld at once", max);
	} else if ((fd = open(log, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		/* The proxy's cap, counting all the file holds; a full disk loses the line. */
		(void)log_line_append_capped(fd, b.buf, b.len, LOG_CAP_BYTES);
		close(fd);
	}
	buf_release(&b);
}

/*
 * No slot free: close the guest's connection without reading it, count the
 * refusal and log the 1st, 2nd, 4th... of them.  The exit code: 1.
 */
static int refuse(const char *log, long max, int slots_fd)
{
	uint64_t count;

	/* The guest sees its connection closed; nothing of it was read. */
	close(0);
	close(1);
	count = count_refusal(slots_fd);
	if (!(count & (count - 1))) /* 0 (not counted) or a power of two */
		log_refusal(log, max, count);
	return 1;
}

/*
 * Copy stdin to the socket s and s to stdout until both directions are done
 * (each EOF passed on as a shutdown), or either side closes for writing.
 *
 * poll() reports POLLHUP and POLLERR whatever was asked, so an fd with
 * nothing to wait for is left out (-1), else a side that hung up would make
 * every poll() return at once: a guest that keeps its connection open after
 * the proxy closed it, or leaves before the proxy answers, would keep us busy
 * (docs/task-host.md, "The guest's connections").  stdout is watched while the
 * proxy may still send: its hang-up says the guest can take nothing more.
 */
static void relay(int s)
{
	static char up[65536], down[65536];
	size_t uplen = 0, downlen = 0;
	int in_eof = 0, sock_eof = 0;

	while (!(in_eof && sock_eof && !uplen && !downlen)) {
		short in_ev = (!in_eof && uplen < sizeof(up)) ? POLLIN : 0;
		short s_ev = (short)((!sock_eof && downlen < sizeof(down) ? POLLIN : 0) |
		                     (uplen ? POLLOUT : 0));
		struct pollfd pfd[3] = {
		    {.fd = in_ev ? 0 : -1, .events = in_ev},
		    {.fd = s_ev ? s : -1, .events = s_ev},
		    {.fd = downlen || !sock_eof ? 1 : -1, .events = downlen ? POLLOUT : 0},
		};
		ssize_t n;

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
				return; /* the proxy closed: nothing more to say */
			}
		}
		if (pfd[2].revents & (POLLOUT | POLLERR | POLLHUP) && downlen) {
			n = write(1, down, downlen);
			if (n > 0) {
				memmove(down, down + n, downlen - (size_t)n);
				downlen -= (size_t)n;
			} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				/* The reader went: drop what it missed, still send what it said. */
				downlen = 0;
				sock_eof = 1;
			}
		} else if (pfd[2].revents & (POLLERR | POLLHUP)) {
			/* The reader went with nothing waiting for it: the same. */
			sock_eof = 1;
		}
		if (in_eof && !uplen)
			shutdown(s, SHUT_WR);
		if (sock_eof && !downlen)
			shutdown(1, SHUT_WR); /* fails harmlessly when stdout is no socket */
	}
}

/* The options; returns the socket's path. */
static const char *parse_options(int argc, char **argv, long *max, const char **log)
{
	static const struct opt_spec options[] = {
	    {"max", 0, OPT_TEXT, "N", 'm', "at most N at once for the socket"},
	    {"log", 0, OPT_FILE, "FILE", 'l', "with --max: where a refusal is logged"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT;
	const char *v, *path = NULL;
	int opt, nwords = 0;

	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
		if (opt == 'h' || opt == OPT_BAD)
			usage_exit(opt == 'h', why.buf, usage_text);
		if (opt == OPT_WORD && !nwords++)
			path = v;
		else if (opt == 'l')
			*log = v;
		else if (opt == 'm' && parse_long(v, 1, MAX_SLOTS, max) < 0)
			die("--max: '%s' is not a number from 1 to %d", v, MAX_SLOTS);
	}
	for (; optind < argc; optind++)
		if (!nwords++)
			path = argv[optind];
	if (nwords != 1 || (*log && !*max))
		usage_die(usage_text);
	buf_release(&why);
	return path;
}

/*
 * QEMU's guestfwd runs us with one socket, the guest's connection, as stdin,
 * stdout and stderr: a message of ours there would go to the guest and tell
 * it the host's paths.  Then stderr is /dev/null; as ssh's ProxyCommand
 * (stderr the user's) it is left alone.
 */
static void quiet_toward_guest(void)
{
	struct stat in, err;
	int null;

	if (fstat(0, &in) < 0 || fstat(2, &err) < 0 || !S_ISSOCK(err.st_mode) ||
	    in.st_dev != err.st_dev || in.st_ino != err.st_ino)
		return;
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 2) < 0)
		_exit(1); /* the guest's connection closes, told nothing */
	if (null > 2)
		close(null);
}

int main(int argc, char **argv)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int s, slots_fd = -1, ret;
	const char *log = NULL, *path;
	long max = 0;

	tool_init(argc, argv);
	quiet_toward_guest();
	/*
	 * ssh sends its ProxyCommand SIGHUP as it exits, maybe before we passed
	 * on its last packet (the disconnect that ends the server): finish the
	 * copy first, EOF on stdin says when.
	 */
	signal(SIGHUP, SIG_IGN);
	path = parse_options(argc, argv, &max, &log);
	if (strlen(path) >= sizeof(sun.sun_path))
		die("socket path too long: '%s'", path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (max && (ret = take_slot(path, max, &slots_fd)) < 0) {
		if (ret != -EBUSY)
			die_err(ret, "cannot open '%s.slots'", path);
		return refuse(log, max, slots_fd);
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die_errno("cannot make a socket");
	if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		die_errno("cannot connect to '%s'", path);
	relay(s);
	return 0;
}
