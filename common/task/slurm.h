/*
 * The Slurm seam of aibox task (docs/slurm.md): what the submitting aibox-task
 * and the one on the compute node (aibox-task --slurm-node DIR) hand each
 * other through the task folder, and the srun/sbatch arguments of the job.
 *
 * Through the task folder, which is on storage both hosts see:
 *   config.yaml    the project's config as the task started with it (the
 *                  node reads it with config_load())
 *   slurm.secrets  mode 0600, made by the submitter right before the job is
 *                  submitted, read and removed by the node before it starts
 *                  anything: the API key, the git tokens, the env values,
 *                  the task's SSH user key and the pinned host key, the
 *                  config's secrets and the subscription's token (each
 *                  value with its placeholder) for the node's proxy
 *   slurm.status   written by the node once the VM is stopped: the session's
 *                  outcome and the proxy's record, read by the submitter as
 *                  untrusted input (bounded, checked field by field)
 */
#ifndef AIBOX_SLURM_H
#define AIBOX_SLURM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/buf.h"
#include "base/strvec.h"

#define SLURM_CONFIG_NAME  "config.yaml"
#define SLURM_SECRETS_NAME "slurm.secrets"
#define SLURM_STATUS_NAME  "slurm.status"

/* The job's memory past the VM's: QEMU itself, the proxy, the broker, aibox-task. */
#define SLURM_MEM_MARGIN_MIB 512
/*
 * The job's time past the task's timeout: the session's own limit (the
 * timeout plus 25 minutes, which holds the git steps' 10 + 10 minutes),
 * the boot's (10 minutes) and one more for the start and the stops.
 */
#define SLURM_TIME_MARGIN_MIN 36

/* Each of the secrets at most this (what a secret pipe holds); the file at most 7 of them. */
#define SLURM_SECRET_MAX (64 * 1024)
/* slurm.status at most (the proxy's record is at most 1 MiB, escaped in JSON). */
#define SLURM_STATUS_MAX (8 * 1024 * 1024)

struct slurm_job {
	const char *name;      /* the job's name */
	const char *partition; /* NULL: Slurm's default */
	const char *account;   /* NULL: Slurm's default */
	const struct strvec *options;
	uint64_t memory_mib; /* the VM's */
	int cpus;
	int64_t timeout_ms; /* the task's */
};

/* The job's memory (MiB) and time limit (minutes) for a task's. */
uint64_t slurm_job_mem_mib(uint64_t vm_mib);
long slurm_job_minutes(int64_t timeout_ms);

/*
 * Append to args the options that ask Slurm for the job's resources: one
 * task on one node, its CPUs, memory and time limit, its name, partition
 * and account when set, then the config's options as they are.  The caller
 * puts srun or sbatch before them and the command after.
 */
void slurm_job_args(struct strvec *args, const struct slurm_job *j);

/*
 * Whether the folder dir (which exists) is on storage a compute node sees:
 * yes when its real path is one of shared or below one, or when it is on a
 * network filesystem (NFS, SMB, Lustre, GPFS, CephFS, BeeGFS, AFS, GlusterFS
 * over FUSE does not count: a FUSE mount is often one host's).  0, or
 * -EXDEV with the reason appended to err (which names the folder and what
 * to do), or -errno when dir cannot be looked at.
 */
int slurm_shared_check(const char *dir, const struct strvec *shared, struct buf *err);

struct slurm_secrets {
	struct buf key;       /* ANTHROPIC_API_KEY for the proxy, or empty */
	struct buf tokens;    /* the git tokens, NAME=value lines, for the broker */
	struct buf env;       /* the secrets JSON for the session's stdin */
	struct buf user_key;  /* the task's SSH private key */
	struct buf host_blob; /* the guest's host key, to pin */
	/* The config's secrets for the proxy, in config order: slurm_pairs_add()'s lines. */
	struct buf secrets;
	/* The subscription's token for the proxy: one such line, or empty. */
	struct buf oauth;
	struct timespec written; /* slurm_secrets_take(): the file's mtime, about the submission */
};

#define SLURM_SECRETS_INIT                                                                         \
	{                                                                                          \
		BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT,              \
		{                                                                                  \
			0, 0                                                                       \
		}                                                                                  \
	}

/*
 * A secret's placeholder and value (printable ASCII, no newline) as one
 * line of slurm.secrets' secrets or oauth field, appended to out.
 */
void slurm_pairs_add(struct buf *out, const char *placeholder, const char *value);

/*
 * Those lines (in) into placeholders and values, one each per line, in order.
 * 0, or -EINVAL (nothing added) for a line whose placeholder is not one of
 * secret_placeholder()'s, whose value is empty or not printable ASCII, or
 * without its newline.
 */
int slurm_pairs_parse(const struct buf *in, struct strvec *placeholders, struct strvec *values);

/*
 * Write s to dir/slurm.secrets: created (O_EXCL, no link followed) with mode
 * 0600, each field as "<name> <length>\n<bytes>\n" after a first line
 * "aibox-slurm-secrets 1".  0, or -errno with the reason in err (a partial
 * file is removed).
 */
int slurm_secrets_write(const char *dir, const struct slurm_secrets *s, struct buf *err);

/*
 * Open dir/slurm.secrets (no link followed, a plain file of ours), remove it,
 * then read and parse it into s (every field at most SLURM_SECRET_MAX, each
 * once, none missing, nothing after them).  0; -ENOENT when there is no such
 * file (the folder is not the one the submitter made: not shared storage);
 * or another negative errno with the reason in err.  s is wiped on failure.
 */
int slurm_secrets_take(const char *dir, struct slurm_secrets *s, struct buf *err);

/* Overwrite and free every field. */
void slurm_secrets_wipe(struct slurm_secrets *s);

struct slurm_status {
	int session_ok;        /* 1: the session ended properly with the results accepted */
	int stopped;           /* the node was stopped by a signal (scancel, the time limit) */
	double boot_s;         /* the node's boot phase */
	double session_s;      /* the node's session phase */
	struct buf why;        /* why the session failed, or empty */
	int have_report;       /* the proxy's record is in report */
	struct buf report;     /* the proxy's record (common/proxy/proxy_report.h's JSON) */
	struct buf report_why; /* why there is no record */
};

#define SLURM_STATUS_INIT                                                                          \
	{                                                                                          \
		0, 0, 0, 0, BUF_INIT, 0, BUF_INIT, BUF_INIT                                        \
	}

/* Append st as one JSON object and a newline to out. */
void slurm_status_json(const struct slurm_status *st, struct buf *out);

/*
 * Parse p[0..n) (at most SLURM_STATUS_MAX) into st: a JSON object with
 * version 1, session_ok and stopped booleans, boot_s and session_s numbers
 * from 0 to a week, why and report_why strings of at most 4096 bytes, report a string
 * of at most 1 MiB or null.  0, or -EINVAL with the reason in err.
 */
int slurm_status_parse(const char *p, size_t n, struct slurm_status *st, struct buf *err);

void slurm_status_release(struct slurm_status *st);

#endif
