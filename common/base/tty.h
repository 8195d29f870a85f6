/*
 * The local terminal of `aibox run`: raw mode with its restore guaranteed,
 * the window size, and SIGWINCH as a readable fd.
 *
 *	if (tty_raw(0) < 0) ...        (saved state restored by tty_restore())
 *	int fd = tty_winch_fd();       (readable after each SIGWINCH)
 *	tty_size(0, &cols, &rows);
 *	...
 *	tty_restore();
 *
 * tty_raw() also makes sure the terminal is restored on every way out of the
 * process that runs code: exit() (atexit), and the signals that end it by
 * default (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1/2,
 * and the crashes SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): the handler
 * puts the terminal back and re-raises the signal with its default action,
 * so the exit status still tells what happened.  Only SIGKILL can leave the
 * terminal raw.  A stop signal sent from outside (SIGTSTP, SIGTTIN, SIGTTOU:
 * in raw mode the terminal sends none) puts the terminal back before the
 * process stops; SIGCONT makes it raw again when the process is in the
 * terminal's foreground, and counts as a SIGWINCH (the size may have
 * changed meanwhile).  One terminal per process.
 */
#ifndef AIBOX_TTY_H
#define AIBOX_TTY_H

/* Save fd's terminal state and put it in raw mode.  0 or -errno (-ENOTTY). */
int tty_raw(int fd);

/* Put the saved state back (async-signal-safe; a no-op before tty_raw()). */
void tty_restore(void);

/* The window size of the terminal on fd.  0 or -errno. */
int tty_size(int fd, unsigned *cols, unsigned *rows);

/*
 * The read end of a non-blocking pipe that gets a byte on each SIGWINCH
 * (the handler is installed on the first call).  -errno on failure.
 */
int tty_winch_fd(void);

#endif
