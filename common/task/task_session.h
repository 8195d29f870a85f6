/*
 * The task's SSH session, host side: run the init's `task` command with the
 * secrets on its stdin, take the results tar off its stdout into the result
 * files opened beforehand (common/git/tar_in.h), and print its stderr as
 * vm[id] lines (common/base/out.h sanitizes them), kept in aibox.log too, where
 * `aibox tasks log` reads them while the task runs.  Everything it needs is open
 * before it starts, so it runs the same after the lockdown.
 */
#ifndef AIBOX_TASK_SESSION_H
#define AIBOX_TASK_SESSION_H

#include <stddef.h>
#include <sys/types.h>

#include "base/out.h"

#include "base/guest_abi.h"
#include "base/log_cap.h"
#include "vm/ssh.h"
#include "git/tar_in.h"

/*
 * The VM's lines toward aibox task's stderr fd: to a terminal or a pipe each
 * as out_write() writes it (a terminal's cut to its width), to a regular file
 * formatted and at most LOG_CAP_BYTES of them (common/base/log_cap.h), then
 * one line says the rest is left out.  The cap is the file's own, counted by
 * its size from base (-1: the file's size now): the attempts of a group
 * (docs/tasks.md, "Several attempts") share one such file and one cap.
 */
struct task_err {
	int fd;
	int file;   /* fd is a regular file: capped */
	int full;   /* it got its last line */
	off_t base; /* its size the cap counts from */
};

void task_err_init(struct task_err *e, int fd, long long base);

/*
 * The VM's line line[0..n) (its text, raw) of task id to e; vm its
 * out_format() when the caller has made it, else NULL.  Errors are dropped:
 * a terminal gone or a disk full must not stop the task.
 */
void task_err_line(struct task_err *e, const char *id, const char *line, size_t n,
                   const struct buf *vm);

/* A line of a Slurm node's stderr longer than this is written in pieces. */
#define TASK_NODE_LINE_MAX (4 * OUT_LINE_MAX)

/*
 * A relay for a task's Slurm node (srun's stderr, docs/slurm.md): what is
 * written to the pipe it makes goes to fd a line at a time, the node's VM
 * lines for id ("HH:MM:SS vm[id]: text") again through task_err_line(), so
 * capped in a regular file from base and cut to a terminal's width as a
 * local task's, every other line (the node's aibox lines, srun's) sanitized
 * as it is.  A worker as out_relay_start()'s, ended by out_relay_end().
 * 0, or -errno.
 */
int task_node_relay_start(struct out_relay *r, int fd, long long base, const char *id);

/*
 * The text of aibox's line in aibox.log where the VM's lines stop at their
 * cap (log_fd below); `aibox tasks log` shows it among the live lines.
 */
#define TASK_LOG_FULL_TEXT "the VM's lines past " LOG_CAP_MIB_TEXT " are left out of aibox.log"

struct task_session {
	int fd;           /* the stream to the guest's SSH server */
	const char *user; /* NULL: root */
	const struct ssh_task_keys *keys;
	const char *id;      /* the task id, for vm[id] lines */
	int err_fd;          /* where vm lines go: a terminal or a pipe all of them, a
	                        regular file (nohup.out, a detached Slurm job's
	                        slurm.out) at most LOG_CAP_BYTES
	                        (common/base/log_cap.h), then one line says the
	                        rest is left out: the file's own cap, counted by
	                        its size from err_base, as the attempts of a group
	                        (docs/tasks.md, "Several attempts") share one such
	                        file and one cap */
	long long err_base;  /* err_fd a regular file: its vm lines stop once they
	                        would take it past this size + LOG_CAP_BYTES
	                        (whoever wrote it meanwhile); -1: its size when the
	                        session starts */
	int log_fd;          /* when above 2, vm lines go here too (aibox.log), at
	                        most LOG_CAP_BYTES of them, as err_fd */
	const char *secrets; /* task_secrets_json() text, for stdin */
	size_t secrets_len;
	int result_fds[RESULT_NFILES]; /* open for writing, indexed as guest_results */
	long timeout_ms, idle_ms;      /* as struct ssh_client */
	int disk_fd;                   /* as struct ssh_client: -1, or the folder of */
	const char *disk_name;         /* the VM's state disk, and its name */
	int stop_fd;                   /* as struct ssh_client */

	/* Set by task_session_run(). */
	struct tar_in_file files[RESULT_NFILES];
	int exit_status;        /* the task command's, or -1 */
	struct ssh_times times; /* how far the SSH session got, and when */
	struct buf err;         /* why it failed, when it did */
};

/*
 * Connect, run `task`, read the results.  0 when the tar ended properly and
 * the command exited 0; otherwise a negative errno with the reason in s->err
 * (which it starts empty; task_session_clear() releases it):
 * -EPROTO or -EFBIG (results refused: the caller stops the VM), -ETIMEDOUT,
 * -EPERM (host key), -EACCES (our key refused), -ECONNRESET (the VM went
 * away), -ECHILD (the command exited non-zero or by a signal).
 */
int task_session_run(struct task_session *s);

/* Release what task_session_run() left in s (its err). */
void task_session_clear(struct task_session *s);

#endif
