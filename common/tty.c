#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "tty.h"
#include "banned.h"

static struct termios saved;
static volatile sig_atomic_t saved_fd = -1;
static int winch_pipe[2] = { -1, -1 };

static const int fatal_signals[] = { SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1,
				     SIGUSR2, SIGSEGV, SIGBUS,	SIGFPE,	 SIGILL,  SIGABRT };

void tty_restore(void)
{
	int fd = saved_fd;

	if (fd < 0)
		return;
	/* TCSAFLUSH would drop what the user typed ahead; TCSADRAIN keeps it. */
	tcsetattr(fd, TCSADRAIN, &saved);
}

static void on_fatal(int sig)
{
	int e = errno;

	tty_restore();
	signal(sig, SIG_DFL);
	raise(sig);
	errno = e;
}

static void restore_at_exit(void)
{
	tty_restore();
}

int tty_raw(int fd)
{
	struct termios raw;
	struct sigaction sa;

	if (tcgetattr(fd, &saved) < 0)
		return -errno;
	raw = saved;
	cfmakeraw(&raw);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sigemptyset(&sa.sa_mask);
	/* SA_RESETHAND is not enough: the handler re-raises with SIG_DFL itself. */
	sa.sa_flags = SA_NODEFER;
	if (saved_fd < 0) {
		for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
			struct sigaction old;

			/* A signal ignored when we started (nohup) stays ignored. */
			if (sigaction(fatal_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
				continue;
			sigaction(fatal_signals[i], &sa, NULL);
		}
		atexit(restore_at_exit);
	}
	saved_fd = fd;
	if (tcsetattr(fd, TCSADRAIN, &raw) < 0) {
		int e = errno;

		saved_fd = -1;
		return -e;
	}
	return 0;
}

int tty_size(int fd, unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
		return -errno;
	*cols = ws.ws_col;
	*rows = ws.ws_row;
	return 0;
}

static void on_winch(int sig)
{
	int e = errno;
	char b = 0;
	ssize_t n = write(winch_pipe[1], &b, 1);

	(void)sig;
	(void)n;
	errno = e;
}

int tty_winch_fd(void)
{
	struct sigaction sa;

	if (winch_pipe[0] >= 0)
		return winch_pipe[0];
	if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_winch;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGWINCH, &sa, NULL) < 0) {
		int e = errno;

		close(winch_pipe[0]);
		close(winch_pipe[1]);
		winch_pipe[0] = winch_pipe[1] = -1;
		return -e;
	}
	return winch_pipe[0];
}
