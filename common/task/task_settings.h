/*
 * What the host hands the guest init for one task or run (docs/internals.md,
 * "settings.json"): the settings file in the task (or run) folder, and the
 * secrets, which never touch a disk: they go as the task command's stdin.
 *
 * settings.json has one writer, task_settings_json(), used by aibox task and
 * aibox run, and one parser, task_settings_parse(), used by the guest init
 * (PID 1's mounts, the task command, the run command).  Both check a
 * struct task_settings with task_settings_check(), so what one writes the
 * other reads: ids and commits by their form, env names, paths and tags by
 * the rules of common/base/guest_abi.h, every string valid UTF-8.
 */
#ifndef AIBOX_TASK_SETTINGS_H
#define AIBOX_TASK_SETTINGS_H

#include <stddef.h>

#include "base/buf.h"
#include "base/guest_abi.h"

enum task_mode {
	TASK_MODE_TASK, /* aibox task: "mode": "task" */
	TASK_MODE_RUN,  /* aibox run: "mode": "run" */
};

enum task_api {
	TASK_API_NONE,    /* no login: Claude Code gets nothing */
	TASK_API_FORWARD, /* placeholder key + ANTHROPIC_BASE_URL to the proxy's 3129 */
	/* ANTHROPIC_BASE_URL to the proxy's 3129, which adds the subscription's
	   token; its placeholder is among the placeholders as CLAUDE_CODE_OAUTH_TOKEN */
	TASK_API_OAUTH,
};

struct task_mount {
	const char *tag;  /* guest_tag_valid(), not GUEST_TAG_TASK */
	const char *path; /* guest_path_valid() */
};

/* The caps of settings.json's lists and strings. */
#define TASK_SETTINGS_ENV_MAX     256
#define TASK_SETTINGS_MOUNTS_MAX  64
#define TASK_SETTINGS_REMOTES_MAX 32
#define TASK_SETTINGS_COMMAND_MAX 256    /* words of run's command */
#define TASK_SETTINGS_STRING_MAX  256    /* model, git name and email, proxy */
#define TASK_SETTINGS_PROMPT_MAX  120000 /* one argument: MAX_ARG_STRLEN is 128 KiB */
#define TASK_SETTINGS_TIMEOUT_MAX (7 * 86400)
#define TASK_SETTINGS_BUDGET_MAX  1e6
#define TASK_SETTINGS_ID_MAX      4294967294L /* a uid or gid: all but (uid_t)-1 */

/*
 * The fields of both modes; a run's settings.json has only version, id,
 * mode, command, path, mounts, uid, gid, api, proxy, env_names,
 * placeholders and git_remotes (the task's fields are left zero by the parser and not
 * written by the writer).
 */
struct task_settings {
	enum task_mode mode;
	const char *id;    /* 6 lowercase hex */
	const char *model; /* NULL: Claude Code's default */
	long timeout_s;    /* > 0 */
	int has_budget;
	double max_budget_usd; /* > 0 when has_budget */
	const char *git_name, *git_email;
	const char *start_commit; /* 40 or 64 lowercase hex */
	const char *branch;       /* NULL: GUEST_BRANCH, the only one */
	const char *const *env_names;
	size_t nenv;
	/* The variables the VM gets a placeholder in (the config's secrets, the
	   subscription's token): their names, not among env_names, and their
	   placeholders, secret_placeholder_valid() each.  Not secrets (the proxy
	   swaps them for the values), so they are in the file (docs/internals.md). */
	const char *const *ph_names, *const *ph_values;
	size_t nph;
	enum task_api api;
	const char *proxy; /* NULL: GUEST_PROXY_URL; else an http:// URL */
	const char *path;  /* NULL: GUEST_PROJECT_PATH; else guest_path_valid() */
	const struct task_mount *mounts;
	size_t nmounts;
	const char *system_prompt; /* NULL: "" */
	/* The config's git: URLs in order; entry n is the broker's remote n. */
	const char *const *git_remotes;
	size_t ngit_remotes;
	/* NULL: a new conversation; else the session id Claude Code resumes, whose
	   file the share holds as resume.jsonl (common/base/session_file.h) */
	const char *resume_session;
	/* NULL: none; else the config's check: (GUEST_CHECK_MAX bytes, one printable line) */
	const char *check;
	/* the check's time limit: GUEST_CHECK_TIMEOUT_MIN_MS to _MAX_MS; 0: GUEST_CHECK_TIMEOUT_MS
	 */
	long check_timeout_ms;
	/* Run mode only: the command (NULL, 0: claude), the host user's ids. */
	const char *const *command;
	size_t ncommand;
	long uid, gid; /* 0 to TASK_SETTINGS_ID_MAX */
};

/*
 * 0 when s is settings the init accepts (the caps above, the forms said at
 * each field, strings UTF-8 without control characters except in the system
 * prompt); else -EINVAL with the first problem in err ("the task id is not 6
 * lowercase hex digits").  NULL fields with a default count as the default.
 */
int task_settings_check(const struct task_settings *s, struct buf *err);

/*
 * settings.json read back: s's strings and lists point into root (jansson's
 * json_t) and the arrays here, so they live as long as d does and root is
 * not released.
 */
struct task_settings_doc {
	struct task_settings s;
	struct json_t *root;
	const char *env_names[TASK_SETTINGS_ENV_MAX];
	const char *ph_names[TASK_SETTINGS_ENV_MAX], *ph_values[TASK_SETTINGS_ENV_MAX];
	struct task_mount mounts[TASK_SETTINGS_MOUNTS_MAX];
	const char *git_remotes[TASK_SETTINGS_REMOTES_MAX];
	const char *command[TASK_SETTINGS_COMMAND_MAX];
};

/*
 * Parse settings.json's text (at most GUEST_SETTINGS_MAX bytes) into d and
 * check it with task_settings_check().  A member of the other mode is
 * ignored; an absent optional member is its default (null, [], "path"
 * GUEST_PROJECT_PATH, "uid" and "gid" GUEST_USER_UID and GUEST_USER_GID).
 * 0, or -EINVAL with the reason in err, starting "settings.json: ", and d
 * empty.  Release d with task_settings_doc_release().
 */
int task_settings_parse(const char *text, size_t len, struct task_settings_doc *d, struct buf *err);

/*
 * The part of task_settings_parse() that PID 1 needs before either mode
 * starts: only "path" and "mounts", read and checked as there; the other
 * members are the task or run command's to read (a bad one fails the task's
 * clone step, with results, instead of the boot).  As task_settings_parse().
 */
int task_settings_parse_place(const char *text, size_t len, struct task_settings_doc *d,
                              struct buf *err);

/* Release d's root and empty d; an empty d is fine. */
void task_settings_doc_release(struct task_settings_doc *d);

/* The name of api in settings.json ("none", "forward", "oauth"). */
const char *task_api_name(enum task_api api);

/*
 * Append settings.json's text for s to out (pretty-printed, ending in a
 * newline).  0, or -EINVAL with the reason in err ("the model name is not
 * valid UTF-8").
 */
int task_settings_json(const struct task_settings *s, struct buf *out, struct buf *err);

#endif
