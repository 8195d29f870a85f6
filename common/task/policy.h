/*
 * The administrator's policy: /etc/aibox/policy.yaml (docs/config.md, "The
 * administrator's policy"; docs/security.md says what it defends against).
 *
 * The file is written in the config's own keys and read by the config's
 * parser (config_parse_extra(), common/config/config.h), with the policy's own keys
 * beside them: what a key of the config sets, the same key of the policy
 * bounds.  It must be a regular file owned by root and not writable by group
 * or others, in a folder owned by root and not writable by group or others:
 * anything else is refused, never ignored.
 *
 * AIBOX_POLICY names another file, and is read only when
 * /etc/aibox/policy.yaml does not exist (so it can add a policy where there
 * is none, never replace the administrator's), with the same owner and mode
 * checks: the tests reach the policy through it, as root.
 *
 * Refusals are one line: the config's place first, then the policy's:
 *	"/home/u/.aibox/projects/p/config.yaml:3: allow[1]: 'evil.example' is
 *	 beyond the policy (/etc/aibox/policy.yaml:2: allow)"
 *	"--memory: 8G is beyond the policy (/etc/aibox/policy.yaml:5: memory: 2G)"
 */
#ifndef AIBOX_POLICY_H
#define AIBOX_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "base/strvec.h"

struct buf;

#define POLICY_PATH     "/etc/aibox/policy.yaml"
#define POLICY_ENV      "AIBOX_POLICY"
#define POLICY_MAX_LIST CONFIG_EXTRA_MAX

/* The policy's own keys, beside the config's (each: its line, 0 when not set). */
struct policy {
	char *path;           /* the file read; NULL: no policy, nothing is bounded */
	struct config cfg;    /* the config's keys: cfg.set says which the policy bounds */
	int run;              /* run: may `aibox run` start (default yes) */
	int push;             /* push: may a git remote list push branches (default yes) */
	int64_t timeout_ms;   /* timeout: the longest task, 0 for none */
	struct strvec mounts; /* mounts: host folders a mount may be in (absolute) */
	struct strvec images; /* images: the images a task or a run may boot */
	size_t run_line, push_line, timeout_line, mounts_line, images_line;
	size_t mounts_lines[POLICY_MAX_LIST], images_lines[POLICY_MAX_LIST];
};

/* An empty policy: no file, nothing bounded. */
void policy_init(struct policy *p);
void policy_release(struct policy *p);

/*
 * Find and read the policy in force (POLICY_PATH, else POLICY_ENV's file, as
 * above) into p (policy_init() first).  0 with p->path NULL when there is
 * none; 1 when one was read; or a negative errno with the reason in err: a
 * file that cannot be read, one owned by another user than root or writable
 * by group or others (or in such a folder), or one the parser refuses
 * ("/etc/aibox/policy.yaml:4:9: memory: ...").
 */
int policy_load(struct policy *p, struct buf *err);

/* policy_load() of the file at path, with the same checks (0 is never returned). */
int policy_load_path(struct policy *p, const char *path, struct buf *err);

/* What a command line asks beside the config: 0 / NULL for what it does not give. */
struct policy_ask {
	uint64_t memory_mib; /* --memory */
	int cpus;            /* --cpus */
	int attempts;        /* --attempts */
	int64_t timeout_ms;  /* --timeout */
	uint64_t budget;     /* --max-budget-usd, nano-USD */
	const char *image;   /* --image (NULL: "default") */
	int run;             /* 1: this is `aibox run` */
};

/*
 * Hold cfg (read from the file cfg_name) and ask to p.  -EPERM with the
 * first thing asked beyond it appended to err (both places, as above); else
 * 0, with what cfg leaves to its defaults brought within p: memory, cpus,
 * disk and attempts lowered to p's, budget.task set to p's when cfg's is larger or none.
 * A p without a path allows everything and changes nothing.
 */
int policy_check(const struct policy *p, struct config *cfg, const char *cfg_name,
                 const struct policy_ask *ask, struct buf *err);

/*
 * 1 when the policy's allow entry pol covers the config's entry want (both
 * as config_load() keeps them: lowercase, checked): the same entry; or pol
 * "*.d[:port]" and want a host under d, or "*.x.d", on the same port
 * (443 when none is written); preset:NAME only by the same preset.  Rules
 * of the allow list's map form go through here too when it has one.
 */
int policy_allow_covers(const char *pol, const char *want);

/*
 * The policy's budget.day is per user and local day, across all of the
 * user's projects (the config's is per project), kept by every proxy of the
 * user in the user's ledger, $AIBOX_HOME/spend/YYYY-MM-DD (common/config/usage.h,
 * docs/budget.md "The user's day under a policy").  Opens that ledger,
 * raising its total to the sum of the projects' day ledgers when it is
 * below (a day begun by an older aibox, or before the policy had
 * budget.day).  -EDQUOT with the refusal in err when the total reached the
 * cap; another negative errno when a ledger cannot be read; else 0 with
 * *ledger_fd the user's ledger (close-on-exec, for aibox-proxy's
 * --user-ledger-fd) and *cap the cap in nano-USD.  0 with *ledger_fd -1
 * and *cap 0 when p bounds no day.
 */
int policy_user_day(const struct policy *p, int *ledger_fd, uint64_t *cap, struct buf *err);

/* A task's timeout of ms (checked by policy_check() when asked for) within p's. */
int64_t policy_timeout(const struct policy *p, int64_t asked_ms);

#endif
