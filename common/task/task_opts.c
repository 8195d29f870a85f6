/* aibox task's command line (common/task/task_opts.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/duration.h"
#include "base/err.h"
#include "vm/image.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/taskid.h"
#include "task/task_opts.h"
#include "base/banned.h"

enum {
	O_MODEL = 256,
	O_FROM,
	O_FILE,
	O_TIMEOUT,
	O_BUDGET,
	O_MEMORY,
	O_CPUS,
	O_IMAGE,
	O_NO_SANDBOX,
	O_JSON,
	O_CONTINUE,
	O_SLURM,
	O_SLURM_NODE,
	O_DETACH,
	O_SLURM_CHECK,
	O_ATTEMPTS,
	O_ATTEMPT_OF,
	O_ERR_BASE
};

const struct opt_spec task_opts_table[] = {
    {"model", 0, OPT_TEXT, "NAME", O_MODEL, "the model Claude Code uses (default: its own)"},
    {"from", 0, OPT_REF, "REV", O_FROM,
     "start from this branch, tag, commit or stash (default HEAD)"},
    {"continue", 0, OPT_TASK, "TASK", O_CONTINUE,
     "start from TASK's changes and resume its conversation"},
    {"file", 0, OPT_FILE, "PATH", O_FILE,
     "add the text of PATH to the prompt; - reads stdin (repeatable)"},
    {"timeout", 0, OPT_DURATION, "DURATION", O_TIMEOUT,
     "Claude Code's time limit, like 60m or 1h30m (default 60m)"},
    {"max-budget-usd", 0, OPT_TEXT, "N", O_BUDGET,
     "the cost cap, kept by aibox's proxy and Claude Code"},
    {"memory", 0, OPT_TEXT, "SIZE", O_MEMORY,
     "the VM's memory, 512M to 1T, like 8G (default from the config)"},
    {"cpus", 0, OPT_TEXT, "N", O_CPUS,
     "the VM's CPUs, 1 to this machine's (default from the config)"},
    {"image", 0, OPT_IMAGE, "NAME", O_IMAGE, "the VM image (default: default)"},
    {"no-sandbox", 0, OPT_FLAG, NULL, O_NO_SANDBOX,
     "skip aibox's own lockdown (seccomp), with a warning"},
    {"json", 0, OPT_FLAG, NULL, O_JSON,
     "at the end, one JSON object on stdout instead of the folder's"},
    {"slurm", 0, OPT_FLAG, NULL, O_SLURM, "run the VM part as a Slurm job on a compute node"},
    {"slurm-node", 0, OPT_TEXT, "DIR", O_SLURM_NODE, NULL},
    {"detach", 0, OPT_FLAG, NULL, O_DETACH,
     "with Slurm: submit the job and return at once with the"},
    {"slurm-check", 0, OPT_TEXT, "DIR", O_SLURM_CHECK, NULL},
    {"attempts", 0, OPT_TEXT, "N", O_ATTEMPTS,
     "run N attempts (1 to 8) side by side, one folder each"},
    {"attempt-of", 0, OPT_TEXT, "GROUP", O_ATTEMPT_OF, NULL},
    {"err-base", 0, OPT_TEXT, "BYTES", O_ERR_BASE, NULL},
    {NULL, 0, 0, NULL, 0, NULL},
};

/* The options without a value: 0, or -ENOENT when opt is not one of them. */
static int set_flag(struct task_opts *o, int opt)
{
	switch (opt) {
	case O_NO_SANDBOX:
		o->no_sandbox = 1;
		return 0;
	case O_JSON:
		o->json = 1;
		return 0;
	case O_SLURM:
		o->slurm = 1;
		return 0;
	case O_DETACH:
		o->detach = 1;
		return 0;
	}
	return -ENOENT;
}

/* The options that name something: as set_flag(), or -EINVAL or -E2BIG with why. */
static int set_name(struct task_opts *o, int opt, const char *v, struct buf *err)
{
	switch (opt) {
	case O_SLURM_NODE:
		o->slurm_node = v;
		break;
	case O_SLURM_CHECK:
		o->slurm_check = v;
		break;
	case O_CONTINUE:
		o->cont = v;
		break;
	case O_ATTEMPT_OF:
		o->attempt_of = v;
		if (!task_id_valid(v)) {
			buf_addf(err, "--attempt-of: '%s' is not a group id", v);
			return -EINVAL;
		}
		break;
	case O_MODEL:
		o->model = v;
		if (!*o->model) {
			buf_addstr(err, "--model: the name is empty");
			return -EINVAL;
		}
		break;
	case O_FROM:
		o->from = v;
		if (!*o->from || o->from[0] == '-') {
			buf_addf(err, "--from: '%s' is not a revision", o->from);
			return -EINVAL;
		}
		break;
	case O_FILE:
		if (o->nfiles == TASK_OPTS_MAX_FILES) {
			buf_addf(err, "--file: at most %d files", TASK_OPTS_MAX_FILES);
			return -E2BIG;
		}
		o->files[o->nfiles++] = v;
		break;
	case O_IMAGE:
		o->image = v;
		if (!image_name_ok(o->image)) {
			buf_addf(err, "--image: '%s' is not an image name", o->image);
			return -EINVAL;
		}
		break;
	default:
		return -ENOENT;
	}
	return 0;
}

/* --timeout: a second to a week. */
static int set_timeout(struct task_opts *o, const char *v, struct buf *err)
{
	return duration_arg("timeout", v, 1000, 7LL * 24 * 3600 * 1000, &o->timeout_ms, err);
}

/* --max-budget-usd: more than 0, less than a million. */
static int set_budget(struct task_opts *o, const char *v, struct buf *err)
{
	char *end;

	errno = 0;
	o->budget = strtod(v, &end);
	if (!*v || *end || errno || !(o->budget > 0 && o->budget < 1e6)) {
		buf_addf(err, "--max-budget-usd: '%s' is not a positive amount", v);
		return -EINVAL;
	}
	o->has_budget = 1;
	return 0;
}

/* The options that are amounts: as set_name(). */
static int set_amount(struct task_opts *o, int opt, const char *v, struct buf *err)
{
	struct buf reason = BUF_INIT;
	int ret = 0;
	long n = 0;

	switch (opt) {
	case O_TIMEOUT:
		return set_timeout(o, v, err);
	case O_BUDGET:
		return set_budget(o, v, err);
	case O_MEMORY:
		if (config_parse_memory(v, &o->memory_mib, &reason) < 0) {
			buf_addf(err, "--memory: %s", reason.buf);
			ret = -EINVAL;
		}
		break;
	case O_ATTEMPTS:
		if (parse_attempts(v, &o->attempts, &reason) < 0) {
			buf_addf(err, "--attempts: %s", reason.buf);
			ret = -EINVAL;
		}
		break;
	case O_ERR_BASE:
		if (parse_long(v, 0, LONG_MAX, &n) < 0) {
			buf_addf(err, "--err-base: '%s' is not a size", v);
			ret = -EINVAL;
		}
		o->err_base = n;
		break;
	case O_CPUS:
		if (parse_cpus(v, &o->cpus, &reason) < 0) {
			buf_addf(err, "--cpus: %s", reason.buf);
			ret = -EINVAL;
		}
		break;
	default:
		ret = -ENOENT;
	}
	buf_release(&reason);
	return ret;
}

int task_opts_parse(struct task_opts *o, int argc, char **argv, struct buf *err)
{
	const char *v;
	int opt, ret;

	o->timeout_ms = TASK_OPTS_DEFAULT_TIMEOUT_MS;
	o->err_base = -1;
	/* The words, in order: at most argc of them, NULL-terminated. */
	o->words = xcalloc((size_t)argc + 1, sizeof(*o->words));
	while ((opt = opt_parse(argc, argv, task_opts_table, &v, err)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			return TASK_OPTS_DESCRIBE;
		if (opt == OPT_WORD) {
			o->words[o->nwords++] = (char *)v;
			continue;
		}
		if (opt == 'h')
			return TASK_OPTS_HELP;
		if ((ret = set_flag(o, opt)) == -ENOENT &&
		    (ret = set_name(o, opt, v, err)) == -ENOENT)
			ret = set_amount(o, opt, v, err);
		if (ret == -ENOENT) /* OPT_BAD */
			return TASK_OPTS_USAGE;
		if (ret < 0)
			return ret;
	}
	/* After `--`: words, even those that look like options. */
	while (optind < argc)
		o->words[o->nwords++] = argv[optind++];
	return 0;
}
