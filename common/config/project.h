/*
 * Projects, their folders and locks, and the locks of tasks.
 *
 * A project is a checkout: the work tree of a git repository (a linked
 * worktree is a checkout of its own).  Its folder is
 * $AIBOX_HOME/projects/<name>/ (docs/internals.md, "Files and names"), holding:
 *	config.yaml	the project config (common/config/config.h), default on creation
 *	checkout	the checkout's absolute path and a newline, for `aibox projects`
 *	home/		the VM home of `aibox run`
 *	tasks/		task folders and their locks (common/base/taskid.h)
 *	lock		the project lock (flock): shared by every task and `aibox run`,
 *			exclusive by `aibox projects remove`
 * The name comes from the checkout's folder name, lowercased, with anything
 * but [a-z0-9._-] made '-', at most 48 characters, and "-2", "-3"... added
 * when another checkout has it already.  Creation is serialised by a flock
 * on $AIBOX_HOME/projects/.lock, so two commands in a new checkout at once
 * make one project.
 *
 * Functions return 0 (or an fd) on success and a negative errno otherwise.
 */
#ifndef AIBOX_PROJECT_H
#define AIBOX_PROJECT_H

#include <time.h>

#include "base/taskid.h"

struct buf;
struct strvec;

#define PROJECT_NAME_MAX 64

struct project {
	char *name;
	char *dir;      /* $AIBOX_HOME/projects/<name> */
	char *checkout; /* absolute, resolved */
};

#define PROJECT_INIT                                                                               \
	{                                                                                          \
		NULL, NULL, NULL                                                                   \
	}

/*
 * The work tree of the git repository that holds dir (libgit2's discovery,
 * as git itself finds it).  0 with the resolved absolute path in out;
 * -ENOENT when dir is in no repository, -ENOTDIR for a bare repository.
 */
int project_checkout(const char *dir, struct buf *out);

/*
 * project_checkout() of the current folder, with the reason every tool gives
 * appended to err: "not in a git checkout: a project is the checkout of a
 * git repository" (-ENOENT), "a bare repository has no checkout, so no
 * project" (-ENOTDIR), "cannot find the git checkout of the current folder:
 * <strerror>" (other -errno).
 */
int project_checkout_here(struct buf *out, struct buf *err);

/* 1 when name is a name project_open() could have made. */
int project_name_valid(const char *name);

/* The name a checkout's project starts from (before "-2" and so on). */
void project_name_base(const char *checkout, struct buf *name);

/* Append $AIBOX_HOME/projects to out. */
void projects_dir(struct buf *out);

/*
 * The project of checkout (as project_checkout() gives it).  0 with p
 * filled, -ENOENT when there is none.
 */
int project_find(const char *checkout, struct project *p);

/* project_find(), creating the project (and $AIBOX_HOME) when there is none. */
int project_open(const char *checkout, struct project *p, int *created);

/* The project named name, whose folder exists.  -ENOENT when there is none. */
int project_by_name(const char *name, struct project *p);

void project_release(struct project *p);

/* Names of the project folders in $AIBOX_HOME/projects, sorted (none: empty). */
int projects_list(struct strvec *names);

/* Read the checkout path recorded in a project folder into out. */
int project_read_checkout(const char *project_dir, struct buf *out);

#define PROJECT_LOCK_SHARED    0
#define PROJECT_LOCK_EXCLUSIVE 1
#define PROJECT_LOCK_NONBLOCK  2

/*
 * Take the project lock of the folder project_dir.  Returns the fd holding
 * it (close it to let go), -EWOULDBLOCK when PROJECT_LOCK_NONBLOCK is given
 * and the lock is held the other way, -ENOENT when the folder is gone (also
 * when it was removed while we waited: the lock is checked to still be the
 * folder's).
 */
int project_lock(const char *project_dir, int flags);

/*
 * Start a task in tasks_dir: a new id, its name from now, the lock file
 * "<name>.lock" made (O_EXCL) and locked, then the folder made (0700).  The
 * lock comes first so that `aibox tasks clean` never sees the folder
 * unlocked.  0 with name and *lock_fd set (hold it while the task runs).
 */
int task_create(const char *tasks_dir, time_t now, char name[TASK_NAME_LEN + 1], int *lock_fd);

/*
 * Whether the task `name` (a folder in the folder tasks_fd) runs: its lock
 * "<name>.lock" beside it is held, or a lock inside it ("lock" or "*.lock",
 * as aibox 1.6 and before kept it) is.  Returns 1 running, 0 ended, or a
 * negative errno when it cannot tell (a lock or the folder cannot be opened,
 * a lock is not a regular file).  When ended, *lock_fd holds the lock beside
 * the folder (or -1 when there is none): keep it while cleaning the task.
 */
int task_check(int tasks_fd, const char *name, int *lock_fd);

#endif
