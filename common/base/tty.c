#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base/err.h"
#include "base/tty.h"
#include "base/banned.h"

static struct termios saved, raw_state;
static volatile sig_atomic_t saved_fd = -1;
static volatile sig_atomic_t is_raw; /* the terminal is in our raw mode now */
static int winch_pipe[2] = {-1, -1};
static struct sigaction tstp_action;

static const int fatal_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1,
                                    SIGUSR2, SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT};

void tty_restore(void)
{
	int fd = saved_fd;

	if (fd < 0 || !is_raw)
		return;
	/* TCSAFLUSH would drop what the user typed ahead; TCSADRAIN keeps it. */
	tcsetattr(fd, TCSADRAIN, &saved);
	is_raw = 0;
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

static void on_winch(int sig);

/* 1 when fd is the terminal of our process group's foreground. */
static int in_foreground(int fd)
{
	return fd >= 0 && tcgetpgrp(fd) == getpgrp();
}

/* Raw again (async-signal-safe). */
static void make_raw(int fd)
{
	if (tcsetattr(fd, TCSADRAIN, &raw_state) == 0)
		is_raw = 1;
}

/*
 * SIGTSTP, SIGTTIN, SIGTTOU sent from outside (in raw mode the terminal sends
 * none: Ctrl-Z goes to the VM): give the terminal back, stop as the default
 * action would, and on the way back take it raw again.
 */
static void on_stop_signal(int sig)
{
	int e = errno, fd = saved_fd;
	struct sigaction dfl;

	/* In the background the terminal is not ours (and touching it would stop us). */
	if (in_foreground(fd))
		tty_restore();
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig); /* SA_NODEFER: delivered now, and the process stops here */
	sigaction(sig, &tstp_action, NULL);
	/*
	 * Not stopped (the kernel drops stop signals in an orphaned process
	 * group), or continued before on_cont could run: raw again.
	 */
	if (!is_raw && in_foreground(fd))
		make_raw(fd);
	errno = e;
}

/* Continued (fg, or kill -CONT): raw again if the terminal is ours, and its size anew. */
static void on_cont(int sig)
{
	int e = errno, fd = saved_fd;

	if (in_foreground(fd)) {
		make_raw(fd);
		if (winch_pipe[1] >= 0)
			on_winch(sig);
	}
	errno = e;
}

static const int stop_signals[] = {SIGTSTP, SIGTTIN, SIGTTOU};

/* sa for each of the n signals, except one ignored when we started (nohup stays nohup). */
static void handle_unless_ignored(const int *sigs, size_t n, const struct sigaction *sa)
{
	for (size_t i = 0; i < n; i++) {
		struct sigaction old;

		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], sa, NULL);
	}
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
		handle_unless_ignored(fatal_signals, ARRAY_SIZE(fatal_signals), &sa);
		tstp_action = sa;
		tstp_action.sa_handler = on_stop_signal;
		handle_unless_ignored(stop_signals, ARRAY_SIZE(stop_signals), &tstp_action);
		sa.sa_handler = on_cont;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGCONT, &sa, NULL);
		atexit(restore_at_exit);
	}
	raw_state = raw;
	saved_fd = fd;
	if (tcsetattr(fd, TCSADRAIN, &raw) < 0) {
		int e = errno;

		saved_fd = -1;
		return -e;
	}
	is_raw = 1;
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
