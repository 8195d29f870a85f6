/*
 * Files in a task folder (docs/internals.md, "Task folder"), for aibox-task:
 * made, opened and read back by one set of functions.  Each returns 0 (or
 * an fd, or a length) or a negative errno; the caller names the file in its
 * message.
 */
#ifndef AIBOX_TASK_FOLDER_H
#define AIBOX_TASK_FOLDER_H

#include <sys/types.h>

#include "base/buf.h"

/*
 * A new task folder of the project: "tasks" made in project_dir if need be,
 * then task_create() there (name, its lock held on *lock_fd), the folder's
 * path appended to dir.  0, or a negative errno with err set.
 */
int task_folder_create(const char *project_dir, char *name, int *lock_fd, struct buf *dir,
                       struct buf *err);

/*
 * The result files (task_session.h, in its order) opened O_RDWR into fds:
 * made anew (O_EXCL) with create, else the ones there (a --slurm task's
 * node and submitter).  0, or a negative errno with "cannot create 'PATH'"
 * and the reason in err; fds opened before the failure stay open.
 */
int task_folder_open_results(const char *dir, int *fds, int create, struct buf *err);

/* open() dir/name with flags | O_NOFOLLOW | O_CLOEXEC, mode 0644: the fd or -errno. */
int task_folder_open(const char *dir, const char *name, int flags);

/* Write b to dir/name, made with mode (truncated if it exists).  0 or -errno. */
int task_folder_write(const char *dir, const char *name, const struct buf *b, int mode);

/*
 * The whole of the file open on fd, from its start whatever its offset
 * (pread), appended to out: its length, -EFBIG past max bytes, or -errno.
 */
ssize_t task_folder_read_fd(int fd, struct buf *out, size_t max);

/*
 * start.bundle and start.idx in dir: commit and its history from the
 * checkout (bundle_write_start()), checked to hold commit, then opened to
 * the VM's unprivileged user: the bundle 0644, the folder 0711 (ssh/ stays
 * 0700).  0, or a negative errno with err set ("cannot write 'PATH': ...").
 */
int task_folder_start_bundle(const char *dir, const char *checkout, const char *commit,
                             struct buf *err);

/*
 * Remove the files names[0..n) of the folder dir once this process has
 * exited, in any way, SIGKILL included: for what a task makes and can no
 * longer remove after its lockdown, proxy.sock and proxy.sock.slots, which
 * would otherwise stay in every ended folder as sockets nobody listens on.
 * A worker (common/base/spawn.h, SPAWN_WORKER_DETACH: it outlives us) waits for
 * EOF on a pipe whose write end only this process holds (close-on-exec),
 * then unlinks each name relative to dir's fd, never following a link; a
 * name already gone, or a folder removed meanwhile, is no failure, and the
 * worker reports nothing.  0, or a negative errno.
 */
int task_folder_remove_at_exit(const char *dir, const char *const *names, size_t n);

#endif
