/*
 * aibox.log: a task's phases and their times, one line each
 * (docs/task-host.md, "aibox.log").  A help for the reader, not part of the
 * task: a line that cannot be written, or would be over 159 bytes, is left
 * out.
 */
#ifndef AIBOX_TASK_LOG_H
#define AIBOX_TASK_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <time.h>

struct task_result;
struct ssh_times;

/* Seconds since since_ms, a reading of clock_ms() (base/clock.h). */
double task_clock_since(int64_t since_ms);

/* One line to fd (-1: none). */
__attribute__((format(printf, 2, 0))) void task_log_vline(int fd, const char *fmt, va_list ap);

/*
 * "NAME S.SSSs": the phase that began at *tphase ended now; *tphase becomes
 * now, the next phase's start.  Returns the phase's seconds.
 */
double task_log_phase(int fd, int64_t *tphase, const char *name);

/*
 * "ssh: key exchange S, authentication S, command started S, end to close
 * S": the parts of the session the host's SSH client sees beside the task
 * itself (t from the session's ssh_client), "-" for a part not reached.
 */
void task_log_ssh(int fd, const struct ssh_times *t);

/*
 * The phases inside the session, which the host does not see: clone and
 * agent are the guest's times for its clone and claude steps (r, NULL when
 * there is no result.json), results the rest of session_s (the SSH
 * connection, the commit and bundle steps, the transfer of the results);
 * "-" for a time not known.  *agent gets the agent's seconds (0 unknown).
 * A task the guest's init started before the session (docs/init-task.md,
 * "The early task") ran part of those steps before it: the lines say how
 * much, results counts only their parts in the session, and *in_boot gets
 * the agent's part before the SSH banner (the boot phase's end), from the
 * session's process start in the guest's clock less ssh_s, the host's SSH
 * set-up up to the command's start (0 when not known); 0 for any other task.
 */
void task_log_guest_phases(int fd, const struct task_result *r, double session_s, double ssh_s,
                           double *agent, double *in_boot);

#endif
