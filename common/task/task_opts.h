/*
 * aibox task's command line (docs/man/aibox-task.1): its options, anywhere
 * among the prompt's words (common/base/opt.h), each value checked as it is read.
 * The tool keeps the usage text and what it does with a failure.
 */
#ifndef AIBOX_TASK_OPTS_H
#define AIBOX_TASK_OPTS_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct opt_spec;

#define TASK_OPTS_MAX_FILES          64 /* --file, at most this many times */
#define TASK_OPTS_DEFAULT_TIMEOUT_MS (60LL * 60 * 1000)

struct task_opts {
	const char *model;
	const char *from;
	const char *cont; /* --continue TASK */
	const char *files[TASK_OPTS_MAX_FILES];
	size_t nfiles;
	int64_t timeout_ms;
	int has_budget;
	double budget;
	uint64_t memory_mib;
	int cpus;
	const char *image;
	int no_sandbox;
	int json;
	int slurm;               /* --slurm, or the config's slurm: (docs/slurm.md) */
	int detach;              /* --detach: sbatch, no waiting (common/task/slurm_detach.h) */
	const char *slurm_node;  /* --slurm-node DIR: the node's part of a --slurm task */
	const char *slurm_check; /* --slurm-check DIR: a detached task's check on the host */
	int attempts;            /* --attempts N (1 to ATTEMPTS_MAX), 0 not given */
	const char *attempt_of;  /* --attempt-of GROUP: one attempt of a group (docs/tasks.md,
	                            "Several attempts"), its prompt on stdin */
	long long err_base;      /* --err-base BYTES: an attempt's stderr, a regular file,
	                            had this size when its group started (task_session.h's
	                            err_base); -1 not given */
	char **words;            /* the prompt's words in order, NULL-terminated */
	size_t nwords;
};

#define TASK_OPTS_HELP     1 /* -h or --help: the caller prints its usage */
#define TASK_OPTS_USAGE    2 /* an unknown option or a missing value: the reason in err */
#define TASK_OPTS_DESCRIBE 3 /* completion's question: the caller describes task_opts_table */

/*
 * aibox task's options (common/base/opt.h): --slurm-node, --slurm-check,
 * --attempt-of and --err-base are plumbing.
 */
extern const struct opt_spec task_opts_table[];

/*
 * Parse argv into o (zeroed by the caller; the values point into argv, the
 * words array is allocated and stays the caller's for the process's life).
 * Returns 0; TASK_OPTS_HELP at -h; TASK_OPTS_DESCRIBE for OPT_DESCRIBE_ARG; TASK_OPTS_USAGE with
 * the reason appended to why; or -EINVAL or -E2BIG for a value refused, with the whole message
 * appended to err ("--timeout: '5ms' is less than a second").  Uses
 * the option parser's globals (common/base/opt.h): one parse per process.
 */
int task_opts_parse(struct task_opts *o, int argc, char **argv, struct buf *err);

#endif
