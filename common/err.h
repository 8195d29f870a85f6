/*
 * Errors, messages and the process-wide program name.
 *
 * Library code (common/) never calls die(): it returns 0 or a negative errno
 * and leaves the message to its caller.  Tools call die() when they cannot go
 * on.  Messages follow git: "prog: cannot open 'x': No such file or directory",
 * lowercase, no full stop, the subject quoted.
 *
 * Exit codes (docs/exit-codes.md): 0 done, 1 the job ran and its answer is no
 * (task did not finish, bundle refused, something not cleaned), 2 usage or
 * error before the job ran.  die() exits with EXIT_ERROR.
 */
#ifndef AIBOX_ERR_H
#define AIBOX_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define EXIT_REFUSED 1
#define EXIT_ERROR 2

/* The name messages start with; set by tool_init() from argv[0]. */
extern const char *progname;

/*
 * The exit status of die() and usage_die(): EXIT_ERROR, unless a tool that
 * passes on another program's status says otherwise before it can die
 * (aibox run: 125, as env(1) and timeout(1) do).
 */
extern int die_status;

/*
 * A tool's own way to say its last word: when set, die(), die_errno() and
 * die_err() hand the message (without "prog: ", the reason appended) to it
 * instead of printing it, then exit with die_status.  aibox task sets it once
 * its task folder exists (the message as an aibox[id] line, aibox.log's end).
 */
extern void (*die_routine)(const char *msg);

/* Print "prog: <msg>\n" to stderr and exit with die_status. */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

/* die() with ": <strerror(errno)>" appended. */
__attribute__((noreturn, format(printf, 1, 2))) void die_errno(const char *fmt, ...);

/* die() with ": <strerror(-err)>" appended, for the library's negative errnos. */
__attribute__((noreturn, format(printf, 2, 3))) void die_err(int err, const char *fmt, ...);

/* Print "prog: <msg>\n" to stderr and return -1. */
__attribute__((format(printf, 1, 2))) int error(const char *fmt, ...);

/* Print "prog: warning: <msg>\n" to stderr. */
__attribute__((format(printf, 1, 2))) void warning(const char *fmt, ...);

/* Print a usage text (already formatted) to stderr and exit with die_status. */
__attribute__((noreturn)) void usage_die(const char *usage);

/*
 * Allocation that cannot fail: on exhaustion the process aborts with a
 * message.  Every caller would otherwise have to invent a path for a state it
 * cannot recover from (git's xmalloc does the same).
 */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Grow an array of `nr` used elements to hold at least `want`, doubling. */
#define ALLOC_GROW(p, want, alloc)                                                          \
	do {                                                                                \
		if ((size_t)(want) > (alloc)) {                                             \
			size_t alloc_grow_n_ = (alloc) ? (alloc) * 2 : 16;                  \
			if (alloc_grow_n_ < (size_t)(want))                                 \
				alloc_grow_n_ = (want);                                     \
			(p) = xrealloc((p), alloc_grow_n_ * sizeof(*(p)));                  \
			(alloc) = alloc_grow_n_;                                            \
		}                                                                           \
	} while (0)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Start of every tool's main: sets progname from argv[0] (its basename),
 * makes sure fds 0, 1 and 2 are open (on /dev/null if not) so that no file
 * the tool opens lands on them, and ignores SIGPIPE (writes return EPIPE).
 */
void tool_init(int argc, char **argv);

#endif
