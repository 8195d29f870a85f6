/*
 * The tasks whose VMs run on this machine now, for the share of its cores a
 * new task's VM gets when nothing chose its size (docs/tasks.md, "Many tasks
 * at once").
 *
 * Each aibox task that runs its VM here holds a registration: a file named by
 * its pid and the time (PID-NS) in running_dir() (common/base/paths.h), locked
 * (flock, exclusive) for as long as the process lives.  The kernel drops the lock however the
 * process ends, so a file whose lock is free is a task gone, and the next
 * count removes it.  A registration is made under a temporary name, locked,
 * then renamed into place: a count never sees a live one unlocked.  A task
 * registers before it counts, so of tasks starting at the same moment each
 * counts those registered before it.  Nothing here prints or exits.
 */
#ifndef AIBOX_RUNNING_H
#define AIBOX_RUNNING_H

#include "base/buf.h"

/* The registrations a count reads at most; past them it stops. */
#define RUNNING_MAX 4096

/*
 * Registers the calling process in dir (made, 0700, with its parent, when
 * missing): the registration's open and locked fd (close-on-exec), which the
 * caller keeps open for as long as its VM runs, or -errno with why in err.
 */
int running_register(const char *dir, struct buf *err);

/*
 * How many registrations in dir other than self_fd's are held now (at most
 * RUNNING_MAX); those whose lock is free are removed.  Entries that are not
 * plain files named by a number are left alone and not counted.  -errno when
 * dir cannot be read.
 */
int running_others(const char *dir, int self_fd);

#endif
