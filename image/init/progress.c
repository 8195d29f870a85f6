/*
 * Task mode's vm.log and progress lines (task_int.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "task_int.h"
#include "base/banned.h"

void log_raw(struct guest_task *t, const char *data, size_t n)
{
	if (t->log_fd < 0 || t->log_full)
		return;
	if (t->log_len + n > LOG_MAX) {
		static const char note[] = "\n[aibox-init: vm.log is full, the rest is left out]\n";

		t->log_full = 1;
		write_all(t->log_fd, note, sizeof(note) - 1);
		return;
	}
	if (write_all(t->log_fd, data, n) == 0)
		t->log_len += n;
}

int log_sink(void *ctx, const char *data, size_t n)
{
	log_raw(ctx, data, n);
	return 0;
}

void vmlog(struct guest_task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	int64_t ms = clock_ms() - t->t0;
	va_list ap;

	buf_addf(&b, "[%6lld.%03lld] ", (long long)(ms / 1000), (long long)(ms % 1000));
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	buf_addch(&b, '\n');
	log_raw(t, b.buf, b.len);
	buf_release(&b);
}

void progress(struct guest_task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	vmlog(t, "%s", b.buf);
	buf_addch(&b, '\n');
	write_all(t->o->err, b.buf, b.len);
	buf_release(&b);
}

/* comm, the parent and the start (clock ticks since boot) of /proc/PID/stat; 0 or -1. */
static int proc_stat(pid_t pid, char *comm, size_t n, pid_t *ppid, unsigned long long *start)
{
	struct buf path = BUF_INIT, st = BUF_INIT;
	const char *open_paren, *close_paren, *p;
	int ret = -1, field;

	buf_addf(&path, "/proc/%d/stat", (int)pid);
	if (buf_read_file(&st, path.buf, 4096) <= 0)
		goto out;
	open_paren = strchr(st.buf, '(');
	close_paren = strrchr(st.buf, ')'); /* the name may hold ')' itself */
	if (!open_paren || !close_paren || close_paren < open_paren ||
	    (size_t)(close_paren - open_paren - 1) >= n)
		goto out;
	memcpy(comm, open_paren + 1, (size_t)(close_paren - open_paren - 1));
	comm[close_paren - open_paren - 1] = '\0';
	/* After the name, p at the space before each field: 3 (state), 4 (ppid) ... 22 (starttime).
	 */
	for (p = close_paren + 1, field = 3; field < 22 && p; field++) {
		p = strchr(p + 1, ' ');
		if (p && field + 1 == 4)
			*ppid = (pid_t)strtol(p + 1, NULL, 10);
	}
	if (p) {
		*start = strtoull(p + 1, NULL, 10);
		ret = 0;
	}
out:
	buf_release(&path);
	buf_release(&st);
	return ret;
}

int session_line(int64_t t0, const char *what, char *out, size_t n, double *later)
{
	unsigned long long self_start, sshd_start = 0, start;
	long hz = sysconf(_SC_CLK_TCK);
	char comm[64], how[128];
	const char *shell;
	pid_t pid = getppid(), ppid = 0, self_ppid;
	struct timespec now;
	double task_s;

	if (hz <= 0 || proc_stat(getpid(), comm, sizeof(comm), &self_ppid, &self_start) < 0 ||
	    clock_gettime(CLOCK_BOOTTIME, &now) < 0)
		return -1;
	/* The outermost of the sshd processes above: the one that sent the banner. */
	for (int depth = 0; depth < 16 && pid > 1; depth++, pid = ppid) {
		if (proc_stat(pid, comm, sizeof(comm), &ppid, &start) < 0 || strcmp(comm, "sshd"))
			break;
		sshd_start = start;
	}
	if (!sshd_start || sshd_start > self_start)
		return -1;
	task_s = (double)now.tv_sec + (double)now.tv_nsec / 1e9 - (double)(clock_ms() - t0) / 1e3;
	/* sshd sets SHELL to root's login shell, which ran the forced command. */
	shell = getenv("SHELL");
	if (shell && !strcmp(shell, GUEST_INIT_PATH))
		snprintf(how, sizeof(how), "no shell: the init is root's shell");
	else
		snprintf(how, sizeof(how), "root's shell %.64s, then the init",
		         shell ? shell : "?");
	if (later)
		*later = task_s - (double)self_start / (double)hz;
	snprintf(out, n,
	         "session: sshd started %.2f s before this process (forked by sshd for the "
	         "session), which %s %.2f s later (%s)",
	         (double)(self_start - sshd_start) / (double)hz, what,
	         task_s - (double)self_start / (double)hz, how);
	return 0;
}

void log_session_start(struct guest_task *t)
{
	char line[320];

	if (session_line(t->t0, "started the task", line, sizeof(line), NULL) == 0)
		vmlog(t, "%s", line);
}
