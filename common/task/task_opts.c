/* aibox task's command line (common/task/task_opts.h). */
#include <errno.h>
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
	O_ATTEMPT_OF
};

static const struct option options[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"from", required_argument, NULL, O_FROM},
    {"continue", required_argument, NULL, O_CONTINUE},
    {"file", required_argument, NULL, O_FILE},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"max-budget-usd", required_argument, NULL, O_BUDGET},
    {"memory", required_argument, NULL, O_MEMORY},
    {"cpus", required_argument, NULL, O_CPUS},
    {"image", required_argument, NULL, O_IMAGE},
    {"no-sandbox", no_argument, NULL, O_NO_SANDBOX},
    {"json", no_argument, NULL, O_JSON},
    {"slurm", no_argument, NULL, O_SLURM},
    {"slurm-node", required_argument, NULL, O_SLURM_NODE},
    {"detach", no_argument, NULL, O_DETACH},
    {"slurm-check", required_argument, NULL, O_SLURM_CHECK},
    {"attempts", required_argument, NULL, O_ATTEMPTS},
    {"attempt-of", required_argument, NULL, O_ATTEMPT_OF},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
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
	/* The words, in order: at most argc of them, NULL-terminated. */
	o->words = xcalloc((size_t)argc + 1, sizeof(*o->words));
	while ((opt = opt_next(argc, argv, "h", options, &v, err)) != OPT_END) {
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
