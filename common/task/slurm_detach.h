/*
 * aibox task --slurm --detach (docs/slurm.md, "Detached tasks"): a task whose
 * job was submitted with sbatch and whose submitter returned at once.
 *
 * Through the task folder, besides common/task/slurm.h's files:
 *   slurm.job  written by the submitter once sbatch accepted the job, while
 *              it still holds the task's lock: "<job id> <start commit>\n"
 *   slurm.out  the job's stdout and stderr (the node's aibox[id] lines)
 *
 * The task's lock ("<folder>.lock" beside the folder) is the submitter's
 * until slurm.job is written, then free while the job waits in Slurm's
 * queue, then the node's aibox-task's from before it takes slurm.secrets
 * until it ends.  summary.json is written by the check on a submitting host
 * of a task whose job ended (aibox-task --slurm-check DIR, under the lock,
 * run by slurm_detached_check()): until then the task is queued, running or
 * unchecked (its job ended, how is not known here), never ended.
 */
#ifndef AIBOX_SLURM_DETACH_H
#define AIBOX_SLURM_DETACH_H

#include <stddef.h>

#include "base/buf.h"
#include "base/oid.h"

#define SLURM_JOB_FILE "slurm.job"
#define SLURM_OUT_NAME "slurm.out"
/* slurm.job at most: an id and a SHA-256 commit. */
#define SLURM_JOB_FILE_MAX 128
/* A job id: decimal digits, at most this many. */
#define SLURM_JOB_ID_MAX 20

struct slurm_job_rec {
	char id[SLURM_JOB_ID_MAX + 1];
	char start_commit[OID_HEX_MAX + 1];
};

/*
 * sbatch --parsable's stdout, out[0..n): "<id>" or "<id>;<cluster>" and a
 * newline.  0 with the id in id, or -EINVAL.
 */
int slurm_job_id_parse(const char *out, size_t n, char id[SLURM_JOB_ID_MAX + 1]);

/* Write dir/slurm.job (O_EXCL, mode 0644).  0, or -errno with the reason in err. */
int slurm_job_write(const char *dir, const struct slurm_job_rec *r, struct buf *err);

/*
 * Read the folder dfd's slurm.job (a regular file, no link followed, at most
 * SLURM_JOB_FILE_MAX bytes, exactly one well-formed line).  0, -ENOENT, or
 * -EINVAL (anything else wrong with it).
 */
int slurm_job_read(int dfd, struct slurm_job_rec *r);

/*
 * 1 when the task folder dfd is a detached task not yet checked (slurm.job
 * and no summary.json), else 0: `aibox tasks clean` leaves it alone.
 */
int slurm_detached_unchecked(int dfd);

enum slurm_detached {
	SLURM_DETACHED_NO,      /* not a detached task, or one already checked */
	SLURM_DETACHED_QUEUED,  /* its job waits in Slurm's queue */
	SLURM_DETACHED_RUNNING, /* its job runs (or ends, not yet gone from the queue) */
	SLURM_DETACHED_ENDED    /* its job ended: the host's check is due */
};

/*
 * Which of the above the task folder dfd, named name, is in, when its lock
 * is free (a held lock: running, whatever this says).  A folder with
 * slurm.job and no summary.json is a detached task not yet checked: ended
 * when slurm.secrets is gone (the node takes the lock before it takes them
 * and holds it until it ends); else it is asked of Slurm (squeue, by the
 * job's name and our user): pending is queued, any other state running, not
 * listed ended (it never started).  When squeue cannot be run or fails, it
 * is queued, with why said in why.  Returns the state, or a negative errno
 * for a slurm.job that cannot be read (why says so).
 */
int slurm_detached_state(int dfd, const char *name, struct buf *err);

/*
 * Take the lock of the task folder dir ("<dir>.lock" beside it, which must
 * exist), waiting for it unless nonblock.  The fd holding it (close-on-exec),
 * -EWOULDBLOCK when nonblock and it is held, or another -errno.
 */
int slurm_task_lock(const char *dir, int nonblock);

/*
 * Run the host's check of the detached task in the folder dir:
 * <libexec>/aibox-task --slurm-check DIR, its stderr ours.  Returns as
 * spawn_run(): 0 when it checked the task or found nothing to do.  It
 * writes the task's record: only commands that settle a task call it
 * (`aibox tasks show --wait`, `aibox task --continue`), never a reader such
 * as `aibox tasks list` or a plain `show` (docs/slurm.md).
 */
int slurm_detached_check(const char *dir);

#endif
