/*
 * What the host hands the guest init for one task (docs/internals.md,
 * "settings.json"): the settings file in the task folder, and the secrets,
 * which never touch a disk: they go as the task command's stdin.
 *
 * The strings are the caller's (from the config, git and flags); they are
 * checked here so the init gets nothing malformed: ids and commits by their
 * form, env names as shell variable names, every string valid UTF-8.
 */
#ifndef AIBOX_TASK_SETTINGS_H
#define AIBOX_TASK_SETTINGS_H

#include <stddef.h>

#include "buf.h"

enum task_api {
	TASK_API_NONE,	  /* no login: Claude Code gets nothing */
	TASK_API_FORWARD, /* placeholder key + ANTHROPIC_BASE_URL to the proxy's 3129 */
	TASK_API_OAUTH,	  /* CLAUDE_CODE_OAUTH_TOKEN comes in with the secrets */
};

struct task_mount {
	const char *tag;  /* the share's tag, [A-Za-z0-9._-], at most 31 bytes (vm.h) */
	const char *path; /* absolute path in the VM */
};

struct task_settings {
	const char *id;		  /* 6 lowercase hex */
	const char *model;	  /* NULL: Claude Code's default */
	long timeout_s;		  /* > 0 */
	int has_budget;
	double max_budget_usd;	  /* > 0 when has_budget */
	const char *git_name, *git_email;
	const char *start_commit; /* 40 or 64 lowercase hex */
	const char *branch;	  /* NULL: "aibox/task" */
	const char *const *env_names;
	size_t nenv;
	enum task_api api;
	const char *proxy;	  /* NULL: "http://10.0.2.100:3128" */
	const char *path;	  /* NULL: "/project" */
	const struct task_mount *mounts;
	size_t nmounts;
	const char *system_prompt; /* NULL: "" */
	/* The config's git: URLs in order; entry n is the broker's remote n. */
	const char *const *git_remotes;
	size_t ngit_remotes;
	/* NULL: a new conversation; else the session id Claude Code resumes, whose
	   file the share holds as resume.jsonl (common/session_file.h) */
	const char *resume_session;
};

/*
 * Is s a remote URL the init may write into git's config unquoted:
 * "https://" and then at most 2048 printable ASCII bytes with no space, '"',
 * '\\', '#' or ';'?
 */
int task_git_remote_valid(const char *s);

/*
 * Append settings.json's text for s to out (pretty-printed, ending in a
 * newline).  0, or -EINVAL with the reason in err ("the model name is not
 * valid UTF-8").
 */
int task_settings_json(const struct task_settings *s, struct buf *out, struct buf *err);

struct task_secret {
	const char *name;
	const char *value;
};

/*
 * Append {"env": {"NAME": "value", ...}} to out, for the task command's
 * stdin.  Written by hand rather than through jansson so that the values are
 * copied into no memory but out (which the caller wipes with
 * buf_wipe_release()).  0, or -EINVAL with the reason in err (a bad name, a
 * value that is not UTF-8, a name twice).
 */
int task_secrets_json(const struct task_secret *v, size_t n, struct buf *out, struct buf *err);

/* Overwrite b's memory with zeros, then release it. */
void buf_wipe_release(struct buf *b);

/* Is s a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes)? */
int task_env_name_valid(const char *s);

#endif
