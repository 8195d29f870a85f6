/* aibox.log (task_log.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "task/task_results.h"
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
