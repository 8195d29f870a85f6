/* aibox.log (task_log.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "task/task_results.h"
#include "vm/ssh.h"
#include "task/task_log.h"
#include "base/banned.h"

double task_clock_since(int64_t since_ms)
{
	return (double)(clock_ms() - since_ms) / 1e3;
}

void task_log_vline(int fd, const char *fmt, va_list ap)
{
	char line[160];
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (fd >= 0 && n > 0 && (size_t)n < sizeof(line)) {
		ssize_t w = write(fd, line, (size_t)n);
		(void)w;
	}
}

__attribute__((format(printf, 2, 3))) static void log_line(int fd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_log_vline(fd, fmt, ap);
	va_end(ap);
}

double task_log_phase(int fd, int64_t *tphase, const char *name)
{
	int64_t now = clock_ms();
	double s = (double)(now - *tphase) / 1e3;

	log_line(fd, "%s %.3fs\n", name, s);
	*tphase = now;
	return s;
}

/* "S.SSSs" from a to b (ms), or "-" when either was not reached. */
static const char *span(char *out, size_t n, int64_t a, int64_t b)
{
	if (a > 0 && b >= a)
		snprintf(out, n, "%.3fs", (double)(b - a) / 1e3);
	else
		snprintf(out, n, "-");
	return out;
}

void task_log_ssh(int fd, const struct ssh_times *t)
{
	char kex[32], auth[32], start[32], close[32];

	log_line(
	    fd, "ssh: key exchange %s, authentication %s, command started %s, end to close %s\n",
	    span(kex, sizeof(kex), t->banner, t->kex), span(auth, sizeof(auth), t->kex, t->auth),
	    span(start, sizeof(start), t->auth, t->started),
	    span(close, sizeof(close), t->ended, t->closed));
}

/* The guest's own time for a step, from result.json; -1 when it has none. */
static double step_seconds(const struct task_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->nsteps; i++)
		if (!strcmp(r->steps[i].name, name))
			return r->steps[i].status == RESULT_SKIPPED ? -1 : r->steps[i].seconds;
	return -1;
}

void task_log_guest_phases(int fd, const struct task_result *r, double session_s, double *agent)
{
	double clone = step_seconds(r, "clone"), claude = step_seconds(r, "claude");
	double rest = session_s - (clone > 0 ? clone : 0) - (claude > 0 ? claude : 0);

	if (clone >= 0)
		log_line(fd, "clone %.3fs (guest)\n", clone);
	else
		log_line(fd, "clone - (guest)\n");
	if (claude >= 0)
		log_line(fd, "agent %.3fs (guest)\n", claude);
	else
		log_line(fd, "agent - (guest)\n");
	if (r && rest >= 0)
		log_line(fd, "results %.3fs (session - clone - agent)\n", rest);
	else
		log_line(fd, "results - (session - clone - agent)\n");
	*agent = claude > 0 ? claude : 0;
}
