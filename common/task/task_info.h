/*
 * What a task folder says about its task, for `aibox tasks list`, `show` and
 * `log` (docs/tasks.md, "Seeing your tasks"), and which folder a TASK
 * argument names.
 *
 * Reading a task never wakes or signals it: whether it runs is its lock
 * (common/config/project.h, task_check(), which takes a free lock for a moment and
 * lets it go); the rest is what the folder already holds: summary.json (the
 * record of its end, common/task/task_record.h), result.json when there is no
 * record, the end of aibox.log, start.bundle, the first line of prompt.txt.
 * Every file is opened without following a link, must be a regular file, and
 * is read with a cap; a file that is missing, too big or not what it should
 * be leaves its facts unknown and says why in `problem`, never more.  Text
 * read here is raw: sanitize it before it reaches a terminal (common/base/out.h).
 */
#ifndef AIBOX_TASK_INFO_H
#define AIBOX_TASK_INFO_H

#include <time.h>

#include "base/buf.h"
#include "base/taskid.h"

/*
 * How a task is, or how it ended; `aibox tasks clean` changes none of it
 * (task_info.cleaned says it removed the start.bundle).  running: its lock
 * is held.  finished, not finished: its record says so (or, without one,
 * aibox.log's last "total Xs exit N": 0 finished, 1 not).  timed out: not
 * finished, and its record's result says a step or Claude Code ran out of
 * time (the VM's word).  killed: not finished because a signal stopped aibox
 * task (its record's why starts with TASK_WHY_STOPPED), or aibox task died
 * without writing its record (summary.json left empty, as it is made when
 * the task starts).  failed to start: ended with exit 2 before its VM's
 * session, the folder made but the task never ran.  queued: a detached
 * Slurm task whose job waits in Slurm's queue; such a task is running while
 * its job runs, unchecked once its job has ended, and shows how it ended
 * only once checked on a submitting host (common/task/slurm_detach.h,
 * slurm_detached_check(): `aibox tasks show --wait` and `aibox task
 * --continue` run it; a reader never does).
 */
enum task_state {
	TASK_RUNNING,
	TASK_FINISHED,
	TASK_NOT_FINISHED,
	TASK_TIMED_OUT,
	TASK_KILLED,
	TASK_FAILED_TO_START,
	TASK_QUEUED,
	TASK_UNCHECKED
};

/*
 * "running", "finished", "not finished", "timed out", "killed", "failed to
 * start", "queued", "unchecked".
 */
const char *task_state_name(enum task_state s);

/* The first line of the prompt is kept up to this many bytes (then cut, marked "..."). */
#define TASK_INFO_PROMPT_MAX 200
/* The end of aibox.log read for its "total" line. */
#define TASK_INFO_LOG_TAIL 4096

struct task_info {
	char name[TASK_NAME_LEN + 1];
	char id[TASK_ID_LEN + 1];
	time_t start; /* from the name, local time */
	enum task_state state;
	int finished;   /* 1, 0, or -1 when not known (running, no record) */
	int exit_code;  /* aibox task's, -1 when not known */
	int has_record; /* summary.json was read */
	int has_seconds;
	double seconds; /* start to end; for a running task, to now */
	int has_turns, has_cost;
	long turns;                  /* the VM's word, from result.json */
	double cost_usd;             /* the VM's word */
	char end_commit[65];         /* the checked tip, "" when nothing to fetch */
	char *prompt_line;           /* owned, raw, NULL when prompt.txt cannot be read */
	char *problem;               /* owned: what could not be read, NULL when nothing */
	int cleaned;                 /* ended, and its start.bundle is gone (aibox tasks clean) */
	int empty_record;            /* summary.json is empty: aibox task died before writing it */
	char group[TASK_ID_LEN + 1]; /* an attempt's group (task_group_read()), "" when none */
};

#define TASK_INFO_INIT                                                                             \
	{                                                                                          \
		.finished = -1, .exit_code = -1                                                    \
	}

/*
 * Read the task `name` (a valid task folder name, common/base/taskid.h) in the
 * folder tasks_fd, at time now.  0 with ti filled (release it), or a
 * negative errno when the folder cannot be opened or its lock checked.
 */
int task_info_read(int tasks_fd, const char *name, time_t now, struct task_info *ti);
void task_info_release(struct task_info *ti);

/*
 * The group of the attempt whose folder is dfd (its file "group": 6 hex
 * digits and a newline, docs/tasks.md, "Several attempts") into group
 * (TASK_ID_LEN + 1 bytes).  1 when it has one, 0 when not (no file, or one
 * not of that form: group is then "").
 */
int task_group_read(int dfd, char *group);

/*
 * The attempts of the group gid, as task folder paths appended to dirs:
 * task_group_dirs_in() in the project folder project_dir; task_group_dirs()
 * in the project of the current checkout, else in the first project that
 * has any (as task_find() looks a group up).  The count found.
 */
struct strvec;
void task_group_dirs_in(const char *project_dir, const char *gid, struct strvec *dirs);
size_t task_group_dirs(const char *gid, struct strvec *dirs);

/*
 * Read the regular file `name` in the folder dirfd into out, at most max
 * bytes, without following a link.  The bytes read, -ENOENT, -EFBIG (over
 * max), -EINVAL (not a regular file) or another -errno.
 */
ssize_t task_file_read(int dirfd, const char *name, size_t max, struct buf *out);

/*
 * The task folders of the project folder project_dir, newest first (names
 * sorted down: the start time, then the id).  0, or -errno when tasks/
 * exists but cannot be read (none: an empty list).  *tasks_fd gets tasks/
 * opened (-1 when there is none); close it.
 */
struct strvec;
int task_list_names(const char *project_dir, struct strvec *names, int *tasks_fd);

/*
 * The task folder a TASK argument names, as every command that takes one
 * reads it: a path (it has a '/') to a task folder; a folder's name; or a
 * task's id (6 hex).  A name or an id is looked up in the project of the
 * current checkout first, then in every project; an id that more than one
 * task has is refused, naming them.  An id no task has may be a group's
 * (task_group_read()): the group of one attempt names it, of more is refused,
 * naming them ("'ID' is the group of 2 attempts, give one of them:").
 * 0 with the folder's path in dir and its
 * project's folder in project_dir; -ENOENT, -EINVAL (not a task, or
 * ambiguous) or another -errno, with the reason appended to err.
 */
int task_find(const char *arg, struct buf *dir, struct buf *project_dir, struct buf *err);

/*
 * The one rule by which every command reads a TASK or GROUP argument
 * (docs/tasks.md, "Several attempts"), task_find()'s: a path, a folder's
 * name, or an id a task has names that task (TASK_LOOKUP_TASK: dir and
 * project_dir set as task_find() sets them), even when a group has the same
 * id; an id no task has names the group of that id when it has attempts
 * (TASK_LOOKUP_GROUP: their folders appended to group, as
 * task_group_dirs() finds them).  Else -ENOENT, -EINVAL or another -errno,
 * the reason appended to err.
 */
#define TASK_LOOKUP_TASK  0
#define TASK_LOOKUP_GROUP 1
int task_lookup(const char *arg, struct buf *dir, struct buf *project_dir, struct strvec *group,
                struct buf *err);

/* Append s sanitized (common/base/out.h), its first line only. */
void task_text_line(struct buf *out, const char *s);

/*
 * The facts of ti as a JSON object (a new reference), the keys of
 * docs/json.md, "aibox tasks list --json", every text sanitized; fetched as
 * task_branches_has() says it (-1: null).
 */
struct json_t;
struct json_t *task_info_json(const struct task_info *ti, const char *project, const char *folder,
                              int fetched);

/*
 * The command line of a command that takes one TASK and flags (aibox tasks
 * show, log): options anywhere, read through table (common/base/opt.h), each
 * a flag; the option table[i] sets bit i of *flags.  -h and --help are always
 * there.  0 with *task set, 1 for help, 2 for completion's question
 * (OPT_DESCRIBE), or -EINVAL with the reason appended to err.
 */
struct opt_spec;
int task_args(int argc, char **argv, const struct opt_spec *table, unsigned *flags,
              const char **task, struct buf *err);

/* A task folder opened for reading, as task_open() gives it. */
struct task_dir {
	struct buf dir;         /* its path */
	struct buf project_dir; /* its project's folder */
	const char *name;       /* the end of dir */
	char id[TASK_ID_LEN + 1];
	int tasks_fd; /* the project's tasks/ */
	int dfd;      /* the folder */
};

#define TASK_DIR_INIT                                                                              \
	{                                                                                          \
		BUF_INIT, BUF_INIT, NULL, "", -1, -1                                               \
	}

/*
 * task_find() of arg, then its tasks/ and the folder opened (O_NOFOLLOW).
 * 0, or a negative errno with the reason appended to err; release td either way.
 */
int task_open(const char *arg, struct task_dir *td, struct buf *err);
void task_dir_release(struct task_dir *td);

/*
 * Which tasks' branches are in a project's checkout (the fetch command's
 * aibox/task-<name>, docs/internals.md, "Files and names"): open once per
 * project, NULL when its checkout cannot be opened.  task_branches_has():
 * 1 the branch exists, 0 it does not, -1 not known (tb NULL or an error).
 */
struct task_branches;
struct task_branches *task_branches_open(const char *project_dir);
int task_branches_has(struct task_branches *tb, const char *name);
void task_branches_free(struct task_branches *tb);

#endif
