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

/* The guest's step name from result.json; NULL when it has none or it was skipped. */
static const struct result_step *step_of(const struct task_result *r, const char *name)
{
	for (size_t i = 0; r && i < r->nsteps; i++)
		if (!strcmp(r->steps[i].name, name))
			return r->steps[i].status == RESULT_SKIPPED ? NULL : &r->steps[i];
	return NULL;
}

/* Of step st, the seconds before the guest's moment at (its own clock), 0 to its length. */
static double before(const struct result_step *st, double at)
{
	double b = at - st->start_s;

	return b <= 0 ? 0 : b >= st->seconds ? st->seconds : b;
}

void task_log_guest_phases(int fd, const struct task_result *r, double session_s, double ssh_s,
                           double *agent, double *in_boot)
{
	const struct result_step *clone = step_of(r, "clone"), *claude = step_of(r, "claude");
	double at = r ? r->session_s : 0, clone_pre = 0, claude_pre = 0, rest = session_s;

	*agent = *in_boot = 0;
	if (clone) {
		clone_pre = before(clone, at);
		rest -= clone->seconds - clone_pre;
		if (clone_pre > 0)
			log_line(fd, "clone %.3fs (guest), %.3fs of it before the session\n",
			         clone->seconds, clone_pre);
		else
			log_line(fd, "clone %.3fs (guest)\n", clone->seconds);
	} else {
		log_line(fd, "clone - (guest)\n");
	}
	if (claude) {
		claude_pre = before(claude, at);
		rest -= claude->seconds - claude_pre;
		*agent = claude->seconds;
		if (claude_pre > 0) {
			/* The banner, in the guest's clock: the session's process start less the
			 * SSH set-up. */
			double banner = (r->has_session_fork ? r->session_fork_s : at) - ssh_s;

			*in_boot = before(claude, banner);
			log_line(fd,
			         "agent %.3fs (guest), %.3fs of it before the session, %.3fs "
			         "before the banner\n",
			         claude->seconds, claude_pre, *in_boot);
		} else {
			log_line(fd, "agent %.3fs (guest)\n", claude->seconds);
		}
	} else {
		log_line(fd, "agent - (guest)\n");
	}
	if (r && rest >= 0)
		log_line(fd, "results %.3fs (session - clone - agent%s)\n", rest,
		         clone_pre + claude_pre > 0 ? ", their parts in the session" : "");
	else
		log_line(fd, "results - (session - clone - agent)\n");
}
