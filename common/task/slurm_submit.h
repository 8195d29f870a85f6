/*
 * The steps of aibox task --slurm (docs/slurm.md) that need nothing of the
 * task but their parameters: the submitting host's srun and sbatch, the
 * node's command line, the reading of the node's slurm.status, and the
 * folder's names.  aibox-task runs them in its order and on its state; none
 * of them prints or exits: each returns 0 or a negative errno with its
 * reason appended to err, in the words aibox-task says (common/task/slurm.h
 * has the files, common/task/slurm_detach.h the detached task's).
 */
#ifndef AIBOX_SLURM_SUBMIT_H
#define AIBOX_SLURM_SUBMIT_H

#include <signal.h>
#include <stdint.h>

#include "base/taskid.h"

struct buf;
struct spawn;
struct strvec;
struct slurm_job;
struct slurm_job_rec;
struct vm_outcome;

/*
 * The task folder dir given to --slurm-node or --slurm-check (opt, for the
 * message): an absolute path whose last part is a task folder's name, copied
 * into name.  0, or -EINVAL with "OPT: 'DIR' is not a task folder".
 */
int slurm_task_dir(const char *opt, const char *dir, char name[TASK_NAME_LEN + 1], struct buf *err);

/*
 * The project folder of the task folder dir (which slurm_task_dir() took):
 * dir's parent without its "/tasks", appended to out.
 */
void slurm_project_dir(const char *dir, struct buf *out);

/*
 * The project's config (project_dir/config.yaml, at most CONFIG_MAX_BYTES)
 * copied to the task folder dir's SLURM_CONFIG_NAME (mode 0644, new): what
 * the node reads.  0, or -errno with "cannot read 'P'" or "cannot write
 * 'P'" and the reason.
 */
int slurm_config_copy(const char *project_dir, const char *dir, struct buf *err);

/* What the node's aibox-task is told besides its folder (aibox-task's own options). */
struct slurm_node_opts {
	const char *dir; /* the task folder */
	uint64_t memory_mib;
	int cpus;
	int64_t timeout_ms;
	const char *image; /* NULL: the default */
	int no_sandbox;
	int has_budget;
	double budget; /* USD, with has_budget */
	int detach;
};

/*
 * The node's command line, appended to argv: <libexec>/aibox-task
 * --slurm-node DIR and each of o's options in aibox task's own spelling.
 */
void slurm_node_argv(const struct slurm_node_opts *o, struct strvec *argv);

/*
 * srun for job with the node's command line node, started in sp (its stdin
 * and stdout /dev/null, in a session of its own so that the terminal's Ctrl-C
 * reaches only the caller, and SIGINT to it when the caller dies).  Returns
 * as spawn_start(); the caller waits with slurm_job_wait().
 */
int slurm_srun_start(struct spawn *sp, const struct slurm_job *job, const struct strvec *node);

/*
 * Wait for srun in sp.  Once *stop is set (a signal the caller caught),
 * cancel the job named name once, as scancel does by hand: the node's
 * aibox-task gets SIGTERM and stops as on one host.  Returns srun's exit
 * status (128 + the signal when killed), or -errno when it cannot be waited
 * for.
 */
int slurm_job_wait(struct spawn *sp, const char *name, volatile sig_atomic_t *stop);

/*
 * --detach: the job submitted with sbatch, node as its batch script, its
 * output appended to the folder's slurm.out; then slurm.job written with
 * the job's id and start_commit (the caller holds the task's lock), the id
 * in rec.  A job sbatch refuses leaves no slurm.secrets.  0, or:
 *   -EPROTO "the Slurm job did not start: sbatch gave no job id"
 *   > 0     "the Slurm job did not start (sbatch exit N; Slurm's reason above)"
 *   -errno  "cannot start sbatch: <reason>", or slurm_job_write()'s reason
 *           and " (the job ID is cancelled)"
 */
int slurm_submit_batch(const char *dir, const struct slurm_job *job, const struct strvec *node,
                       const char *start_commit, struct slurm_job_rec *rec, struct buf *err);

/*
 * Whether the folder dir still holds slurm.secrets, which the node takes
 * when it starts: 1 when it did (it is removed now: the job never started
 * the task), else 0.
 */
int slurm_secrets_left(const char *dir);

/*
 * The node's slurm.status in the folder dir, read as the submitter reads it:
 * untrusted, at most SLURM_STATUS_MAX, checked field by field.  Fills o:
 * session_ret (0 or -1), why, boot_s and session_s, and the proxy's record
 * (have_report) or why not (report_why).  A missing or refused status is an
 * outcome that says so, never an error.
 */
void slurm_status_outcome(const char *dir, struct vm_outcome *o);

#endif
