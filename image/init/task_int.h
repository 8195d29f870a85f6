/*
 * The parts of aibox-init's task mode (task.h), which share one struct guest_task:
 *   task.c      settings.json, and the task from start to end (task_run)
 *   progress.c  vm.log and the progress lines
 *   env.c       the secrets and the environments git and Claude Code run in
 *   git.c       running git as the user
 *   clone.c     the step clone (and the prepared clone, prepared.h)
 *   early_clone.c  the prepared clone started by PID 1 before the session
 *   claude.c    the step claude
 *   stream.c    Claude Code's stream-json: transcript.jsonl, tool-call lines,
 *               the result line
 *   commit.c    the steps commit and bundle
 *   results_send.c  the results folder and the ustar stream of results
 *   resume.c    the conversation a continued task resumes (resume.h)
 * This header is theirs only; the rest of the init uses task.h.
 */
#ifndef AIBOX_INIT_TASK_INT_H
#define AIBOX_INIT_TASK_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/guest_abi.h"
#include "base/strvec.h"
#include "task.h"
#include "task/task_settings.h"

/* The guest's fixed places; the short names stand for common/base/guest_abi.h's. */
#define GUEST_SHARE GUEST_TASK_DIR
#define GUEST_STATE GUEST_STATE_DIR
#define GUEST_USER  "aibox"
#define BRANCH      GUEST_BRANCH
#define BRANCH_REF  GUEST_BRANCH_REF
/*
 * The start commit, as a ref the prepared clone writes beside BRANCH_REF: the
 * commit step's git status counts aibox/task against it (as its upstream,
 * given on the command line), which tells the bundle step the tip descends
 * from the start without a walk of its own (docs/init-task.md).
 */
#define START_REF           "refs/aibox/start"
#define START_REF_SHORT     "aibox/start"
#define API_FORWARD_URL     GUEST_API_FORWARD_URL
#define API_PLACEHOLDER_KEY GUEST_API_KEY_PLACEHOLDER

/* Caps: the host's (common/base/guest_abi.h) and our own on what we read. */
#define SECRETS_WAIT_MS    60000
#define PROMPT_MAX         GUEST_PROMPT_MAX
#define BUNDLE_MAX         RESULT_BUNDLE_MAX
#define TRANSCRIPT_MAX     RESULT_TRANSCRIPT_MAX
#define LOG_MAX            (RESULT_VM_LOG_MAX - 4096)
#define RESULT_MAX         RESULT_JSON_MAX
#define LINE_MAX_PARSE     (16 << 20)
#define LAST_MESSAGE_MAX   65536
#define GIT_OUT_MAX        (1 << 20)
#define CLAUDE_MAX_RETRIES "4"

enum { S_CLONE, S_CLAUDE, S_COMMIT, S_BUNDLE, S_NR };

struct step_info {
	const char *status; /* NULL until run: "skipped" */
	int64_t start_ms;   /* its start, from the task's (t0) */
	int64_t ms;
	int exit_code; /* valid when has_exit */
	int has_exit;
};

struct guest_task {
	const struct guest_task_opts *o;
	int64_t t0;
	int out_broken;

	/* settings.json */
	json_t *settings;
	const char *model, *start, *api, *proxy, *path, *system_prompt, *git_name, *git_email;
	long timeout_s;
	double budget;
	int has_budget;
	json_t *env_names;
	const char *git_remotes[TASK_SETTINGS_REMOTES_MAX]; /* in settings */
	size_t ngit_remotes;
	/* the placeholders' names and values, only for Claude Code's environment */
	const char *ph_names[TASK_SETTINGS_ENV_MAX], *ph_values[TASK_SETTINGS_ENV_MAX];
	size_t nph;
	const char *resume;      /* the session Claude Code resumes; NULL: a new one */
	struct strvec secrets;   /* NAME=value, only for Claude Code's environment */
	int secrets_later;       /* an early task: the session's secrets read after Claude Code */
	int secrets_go;          /* t->secrets came with the go message (o->go_secrets) */
	int64_t session_ms;      /* the session's attach, from t0: 0 when it started the task */
	int64_t session_fork_ms; /* the session's process start, from t0; -1: not known */
	int task_ca; /* the task CA is in the bundle: Claude Code gets the CA variables */

	char *git, *claude;
	char *results; /* <state>/aibox-results */
	int log_fd;    /* vm.log */
	uint64_t log_len;
	int log_full;

	struct step_info steps[S_NR];
	int failed_step; /* -1 none */

	/* Claude Code */
	int claude_ran, claude_exit, claude_timed_out;
	json_t *result_line;
	int transcript_fd;
	uint64_t transcript_len;
	int transcript_full;
	int claude_sent; /* the transcript and the session file are sent (claude_results_send()) */
	struct buf line;
	int line_long;

	/* the config's check: (check.c) */
	const char *check;        /* in settings; NULL: none */
	int64_t check_timeout_ms; /* its time limit (settings, else GUEST_CHECK_TIMEOUT_MS) */
	int check_ran, check_code, check_timed_out;
	int64_t check_ms;
	struct buf check_tail;

	/* after */
	/* aibox/task's tip as the commit step left it: TIP_UNKNOWN (0) when HEAD was elsewhere */
	enum { TIP_UNKNOWN, TIP_AT_START, TIP_MOVED } tip;
	/*
	 * With TIP_MOVED and no commit of ours: the tip's commit (40 hex) and git
	 * status's count of its commits past START_REF and of START_REF's it
	 * lacks; ahead and behind are -1 when status named no START_REF upstream.
	 */
	char tip_oid[65];
	long ahead, behind;
	char *end_commit;
	int changes;
	int bundle_fd;
	uint64_t bundle_len;
	int bundle_too_big; /* the bundle went past BUNDLE_MAX */
	int bundle_werr;    /* errno of the bundle's failed write, 0: none */
	int said_bundling;  /* the progress line "bundling" is out */
	/* the bundle's pack started beside the commit step's status (commit.c); NULL: none */
	struct bundle_spec *spec;
};

extern const char *const step_names[S_NR];

/* progress.c */

/* Append to vm.log, up to LOG_MAX bytes; past that one note, then nothing. */
void log_raw(struct guest_task *t, const char *data, size_t n);

/* A step_sink_fn (ctx a struct guest_task) that appends to vm.log. */
int log_sink(void *ctx, const char *data, size_t n);

/* A line in vm.log only, with the time since the start. */
__attribute__((format(printf, 2, 3))) void vmlog(struct guest_task *t, const char *fmt, ...);

/* A progress line: to stderr (the host shows it) and to vm.log. */
__attribute__((format(printf, 2, 3))) void progress(struct guest_task *t, const char *fmt, ...);

/*
 * A vm.log line with how long before the task its SSH session started: from
 * the start of the outermost sshd above this process (the one the relay
 * started when the host connected, just before the banner) to this
 * process's fork by sshd (key exchange, authentication, sshd's own forks),
 * and from there to the task's start (the init's exec and its start, and the
 * shell before it if root's shell is not the init: the line names which, from
 * SHELL).  Read from /proc, in the kernel's clock ticks; no line when no sshd
 * is above (the native tests).
 */
void log_session_start(struct guest_task *t);

/*
 * That line's text into out (n bytes), for a task whose start (or the
 * session's attach to it) was at t0 (clock_ms()), what it did then named by
 * what ("started the task"); *later (if not NULL) gets the seconds from this
 * process's start to t0.  0, or -1 when no sshd is above.
 */
int session_line(int64_t t0, const char *what, char *out, size_t n, double *later);

/* early_clone.c: b = o->early/name. */
void early_path(struct buf *b, const struct guest_task_opts *o, const char *name);

/* early_clone.c: b into o->early/name whole or not at all (name.new, then renamed). */
void early_file_write(const struct guest_task_opts *o, const char *name, const struct buf *b);

/* early_task.c (docs/init-task.md, "The early task") */

/*
 * PID 1: the socket the session connects to, listening in o->early (made
 * already): its fd, or -1 after an error() line (the session then runs the
 * task itself).
 */
int early_task_listen(const struct guest_task_opts *o);

/* Remove that socket (no child was started to answer it). */
void early_task_unlisten(const struct guest_task_opts *o);

/*
 * PID 1's child, when settings.json names no secrets: start the task with
 * its stdin, stdout and stderr on pipes, hand their other ends to the first
 * session that connects to lsock, then its exit status; exits.  lock is the
 * early clone's lock (closed in the task: no one waits for it).
 */
__attribute__((noreturn)) void early_task_run(const struct guest_task_opts *o, int lock, int lsock);

/*
 * The early task: the session's attach time and vm.log line, written by the
 * session (task_early_attach()) into o->early; *at_ms is clock_ms() at the
 * attach, *fork_ms at the session's process start (-1 when not known), line
 * its vm.log line ("" without one).  0, or -1 when there is none.
 */
int early_task_attached(const struct guest_task_opts *o, int64_t *at_ms, int64_t *fork_ms,
                        struct buf *line);

/* env.c */

/*
 * Read the secrets from t->o->in: {"env": {"NAME": "value", ...}} then EOF,
 * at most SECRETS_MAX bytes within SECRETS_WAIT_MS; no input at all is no
 * secrets.  Each name must be in settings.json's env_names.  The values go
 * into t->secrets as NAME=value and are wiped from every other copy.  When
 * the go message carried them (o->go_secrets: the file is removed once
 * read), they are taken from there by the same rules, and the stdin must
 * bring none: read now, or in an early task once Claude Code has ended
 * (secrets_take_later()).  An early task with none from the go message
 * takes none now (its settings name none).  0, or -1 with the reason in err.
 */
int secrets_read(struct guest_task *t, struct buf *err);

/* Wipe and free t->secrets. */
void secrets_clear(struct guest_task *t);

/*
 * The session's secrets of an early task (t->secrets_later: its settings
 * name none, or the go message carried them), read once Claude Code has
 * ended so that it never waited for the session: they must be none;
 * anything else is said in a progress line (nothing of them was used) and
 * the task goes on.
 */
void secrets_take_later(struct guest_task *t);

/* The program name in GUEST_PATH (allocated), or NULL. */
char *find_in_path(const char *name);

/*
 * The environment of a program of the task: guest_env_build() (guest_env.h)
 * with more's switches and vars (NULL: none), and the task user's PATH, HOME,
 * USER and LOGNAME.
 */
struct guest_env;
void base_env(struct guest_task *t, struct strvec *env, const struct guest_env *more);

/*
 * Claude Code's environment: base_env() with its own switches, the proxy, the
 * API forward, then the secrets (guest_env_build()'s rules).  The caller
 * wipes it after use (it holds the secrets).
 */
void claude_env(struct guest_task *t, struct strvec *env);

/* check.c */

/* Run the check (t->check set) after the bundle step; its figures into t. */
void task_check(struct guest_task *t);

/* result.json's "check": null when it did not run. */
json_t *check_json(const struct guest_task *t);

/* git.c */

/*
 * Run git as the user with hooks and fsmonitor off, in dir, in group g, until
 * deadline; stdout into out (if set; at most GIT_OUT_MAX bytes, else -EFBIG)
 * or to fn (if set), stderr into vm.log.  extra_env adds to the environment.
 * Returns git's exit code, -ETIMEDOUT, or -errno.
 */
int run_git_to(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
               struct buf *out, step_sink_fn fn, void *fn_ctx, const char *const *extra_env,
               const char *const *args);

/* run_git_to() with stdin from the fd in (-1: /dev/null). */
int run_git_in(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
               int in, struct buf *out, step_sink_fn fn, void *fn_ctx, const char *const *args);

/* run_git_to() without a sink. */
int run_git(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
            struct buf *out, const char *const *extra_env, const char *const *args);

/* A git process git_start() started: git_finish() waits for it. */
struct capture;
struct git_job {
	struct step_job j;
	struct capture *c;
};

/*
 * run_git_in() with fn, without waiting: 0 when git started (git_finish()
 * must follow; kill g first to abandon it), or -errno.  Its output is passed
 * to fn only in git_finish().
 */
int git_start(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir, int in,
              step_sink_fn fn, void *fn_ctx, const char *const *args, struct git_job *gj);

/* Wait for gj's git until it ends or its deadline: run_git_to()'s result. */
int git_finish(struct guest_task *t, struct git_job *gj);

#define GIT(t, g, dl, dir, out, ...)                                                               \
	run_git((t), (g), (dl), (dir), (out), NULL, (const char *const[]){__VA_ARGS__, NULL})

/*
 * The result ret of a git command that must succeed: 1 when it did; else 0,
 * with the step's status, exit code and a progress line saying what failed.
 */
int git_ok(struct guest_task *t, struct step_info *si, int ret, const char *what);

/* The steps: each fills in si->status ("ok", "failed", "timeout", "skipped"). */

/*
 * Clone start.bundle into the project folder on BRANCH; deadline: its own (git_limit_ms).
 * It takes the early clone's outcome first (early_clone_take()), and when the
 * clone is done reads the secrets (secrets_read()): a failure there fails it.
 */
void step_clone(struct guest_task *t, struct step_info *si, struct step_group *g, int64_t deadline);

/* clone.c: the project folder, then the prepared clone in it (docs/init-task.md, "The
 * prepared clone"): the step clone's first part, which the early clone runs too.  1 when
 * the project is ready; 0 when the plain clone is to run (the folder empty again, the
 * reason in vm.log); -errno when the folder cannot be made. */
int clone_project_prepared(struct guest_task *t, struct step_group *g, int64_t deadline);

/* clone.c: empty the project folder (a mount point: it stays).  0 or -errno. */
int empty_project(struct guest_task *t);

/*
 * early_clone.c: wait (until deadline) for the early clone PID 1 started
 * (task_early_clone_start(), task.h), carry its vm.log lines over and take its
 * outcome: 1 when the project is ready; 0 when none was started, or it failed
 * or left no result (the project folder is then emptied); -ETIMEDOUT, or
 * -errno when it cannot be waited for or its folder not emptied.
 */
int early_clone_take(struct guest_task *t, int64_t deadline);

/* task.c: t empty for o, its clock started now, no file open (fds -1). */
void guest_task_init(struct guest_task *t, const struct guest_task_opts *o);

/* task.c: settings.json into t (task mode only).  0, or -1 with the reason in err. */
int read_settings(struct guest_task *t, struct buf *err);

/* Run Claude Code on the prompt; deadline: its own (settings.json's timeout_s). */
void step_claude(struct guest_task *t, struct step_info *si, struct step_group *g,
                 int64_t deadline);

/* Commit what Claude Code left uncommitted on BRANCH. */
void step_commit(struct guest_task *t, struct step_info *si, struct step_group *g,
                 int64_t deadline);

/* Bundle BRANCH's new commits into <results>/changes.bundle; set end_commit and changes. */
void step_bundle(struct guest_task *t, struct step_info *si, struct step_group *g,
                 int64_t deadline);

/*
 * Send what Claude Code left (transcript.jsonl, its session file) unless sent
 * already: step_commit() does while its git status runs.
 */
void claude_results_send(struct guest_task *t);

/* Kill and release the pack the commit step kept (t->spec) if the bundle step left it. */
void bundle_spec_drop(struct guest_task *t);

/* claude.c: how Claude Code ended: "timeout", "budget", "completed" or "error". */
const char *ended_by(const struct guest_task *t);

/* stream.c */

/*
 * A step_sink_fn (ctx a struct guest_task) for Claude Code's stdout: copies it to
 * t->transcript_fd (at most TRANSCRIPT_MAX bytes), a progress line for each
 * tool call, and keeps the last result line in t->result_line.  Lines over
 * LINE_MAX_PARSE bytes are copied without being parsed.
 */
int transcript_sink(void *ctx, const char *data, size_t n);

/* The last line, when Claude Code's output did not end in a newline. */
void transcript_flush(struct guest_task *t);

/* results_send.c */

/* Make <state>/aibox-results (t->results) and open vm.log in it.  0 or -errno. */
int results_open(struct guest_task *t);

/*
 * Send fd (from its start, at most max bytes) as the member name of the
 * results; after a failure to send, nothing more is sent (t->out_broken).
 */
void results_send_file(struct guest_task *t, const char *name, int fd, uint64_t max);

/*
 * Send vm.log and result.json (the steps, Claude Code's result line, the
 * commits) and end the stream.  0, or -1 when the results could not be sent.
 */
int results_finish(struct guest_task *t);

#endif
