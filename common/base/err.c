#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/banned.h"

const char *progname = "aibox";
int die_status = EXIT_ERROR;
void (*die_routine)(const char *msg);
void (*report_routine)(const char *msg);

static void vreport(const char *prefix, const char *fmt, va_list ap, int err)
{
	char msg[4096];
	size_t n;

	snprintf(msg, sizeof(msg), "%s", prefix);
	n = strlen(msg);
	vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
	if (err) {
		n = strlen(msg);
		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(err));
	}
	if (report_routine)
		report_routine(msg);
	else
		fprintf(stderr, "%s: %s\n", progname, msg);
	fflush(stderr);
}

static __attribute__((noreturn)) void vdie(const char *fmt, va_list ap, int err)
{
	void (*routine)(const char *) = die_routine;
	char msg[4096];

	if (!routine) {
		vreport("", fmt, ap, err);
		exit(die_status);
	}
	die_routine = NULL; /* a die() inside it prints as usual */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (err) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(err));
	}
	routine(msg);
	exit(die_status);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(fmt, ap, 0);
}

void die_errno(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vdie(fmt, ap, err);
}

void die_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(fmt, ap, err < 0 ? -err : err);
}

int error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("", fmt, ap, 0);
	va_end(ap);
	return -1;
}

void warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, 0);
	va_end(ap);
}

void usage_die(const char *usage)
{
	fputs(usage, stderr);
	exit(die_status);
}

void usage_exit(int help, const char *why, const char *usage)
{
	if (help) {
		fputs(usage, stdout);
		if (fflush(stdout) || ferror(stdout))
			exit(die_status);
		exit(0);
	}
	error("%s", why);
	usage_die(usage);
}

void bug_at(const char *file, int line, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "BUG: %s:%d: %s\n", file, line, msg);
	fflush(stderr);
	abort();
}

void die_oom(void)
{
	/* No allocation here: we are out of memory. */
	char msg[] = "out of memory\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing left to report to */
	}
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die_oom();
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (!p)
		die_oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		die_oom();
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		die_oom();
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (!p)
		die_oom();
	return p;
}

void tool_init(int argc, char **argv)
{
	const char *slash;
	int fd;

	if (argc > 0 && argv[0]) {
		slash = strrchr(argv[0], '/');
		progname = slash ? slash + 1 : argv[0];
	}
	/* OpenSSH's sanitise_stdfd: a closed 0-2 would be taken by our next open. */
	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
		fcntl(fd, F_SETFD, 0);
	if (fd > 2)
		close(fd);
	signal(SIGPIPE, SIG_IGN);
}
