/*
 * Errors, messages and the process-wide program name.
 *
 * How a reason for failure travels, the one form everywhere:
 *
 *  - A function that can fail returns 0 (or a count or a pointer) on success
 *    and a negative errno (or NULL) on failure.
 *  - When its caller needs the words, it takes `struct buf *err` as its last
 *    parameter and, on failure only, appends one reason: no program name, no
 *    newline, lowercase, the subject quoted ("'x' is not a task").  Nothing is
 *    appended (and nothing allocated) when all is well.
 *  - An object that meets its error later (a streaming reader) keeps the
 *    reason of its failure in a `struct buf` member named `err`, under the
 *    same rule, released by the object's clear function.
 *
 * There are no `const char **why` out-parameters, no fixed `char reason[N]`
 * arrays and no positive codes that index a table of reasons.
 *
 * Library code (common/) never calls die() and never prints: it returns as
 * above and leaves the message to its caller.  Tools call die() when they
 * cannot go on.  A programmer's mistake (an impossible request, a broken
 * invariant) is BUG(), never a user-facing error.  Messages follow git:
 * "prog: cannot open 'x': No such file or directory", lowercase, no full stop,
 * the subject quoted.
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
#define EXIT_ERROR   2

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

/*
 * The same for error() and warning(): when set, they hand it the message
 * ("warning: " and the text for a warning) instead of printing it.  aibox
 * task sets it with die_routine (its lines as aibox[id] lines).
 */
extern void (*report_routine)(const char *msg);

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

/*
 * A programmer's mistake, not the user's: print "BUG: file:line: <msg>\n" to
 * stderr and abort() (a core, not an exit status a caller could take for an
 * answer).  For states the code itself rules out, never for bad input.
 */
#define BUG(...) bug_at(__FILE__, __LINE__, __VA_ARGS__)
__attribute__((noreturn, format(printf, 3, 4))) void bug_at(const char *file, int line,
                                                            const char *fmt, ...);

/* Print a usage text (already formatted) to stderr and exit with die_status. */
__attribute__((noreturn)) void usage_die(const char *usage);

/*
 * The end of a command line that asked for help or was refused (common/base/opt.h):
 * with help, the usage on stdout and exit 0; else "prog: <why>" and the usage
 * on stderr and exit with die_status.
 */
__attribute__((noreturn)) void usage_exit(int help, const char *why, const char *usage);

/*
 * Allocation that cannot fail: on exhaustion the process aborts with a
 * message.  Every caller would otherwise have to invent a path for a state it
 * cannot recover from (git's xmalloc does the same).  die_oom() is that one
 * path, for an allocator that is not ours (jansson's json_dumps() returning
 * NULL): it writes "out of memory" to stderr and aborts.
 */
__attribute__((noreturn)) void die_oom(void);
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Grow an array of `nr` used elements to hold at least `want`, doubling. */
#define ALLOC_GROW(p, want, alloc)                                                                 \
	do {                                                                                       \
		if ((size_t)(want) > (alloc)) {                                                    \
			size_t alloc_grow_n_ = (alloc) ? 2 * (alloc) : 16;                         \
			if (alloc_grow_n_ < (size_t)(want))                                        \
				alloc_grow_n_ = (want);                                            \
			(p) = xrealloc((p), alloc_grow_n_ * sizeof(*(p)));                         \
			(alloc) = alloc_grow_n_;                                                   \
		}                                                                                  \
	} while (0)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* TOSTR(MACRO): the macro's value as a string literal, for building strings at compile time. */
#define TOSTR_(x) #x
#define TOSTR(x)  TOSTR_(x)

/*
 * Start of every tool's main: sets progname from argv[0] (its basename),
 * makes sure fds 0, 1 and 2 are open (on /dev/null if not) so that no file
 * the tool opens lands on them, and ignores SIGPIPE (writes return EPIPE).
 */
void tool_init(int argc, char **argv);

#endif
