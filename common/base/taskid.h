/*
 * Task ids and task folder names.
 *
 * A task's id is 6 lowercase hex digits from getrandom(2).  Its folder in
 * the project's tasks/ is "YYYYMMDD-HHMMSS-<id>", the start time in local
 * time, and its lock sits beside it as "<folder>.lock" (docs/tasks.md, "The
 * task folder").  Nothing
 * else in tasks/ is a task: tools skip any other name, so a stray file or a
 * folder a user made there is never taken for one.
 */
#ifndef AIBOX_TASKID_H
#define AIBOX_TASKID_H

#include <stddef.h>
#include <time.h>

#define TASK_ID_LEN 6
/* "YYYYMMDD-HHMMSS-xxxxxx" */
#define TASK_NAME_LEN 22
/* The name plus ".lock" and a NUL. */
#define TASK_NAME_BUF (TASK_NAME_LEN + 6)

/* Fill id (TASK_ID_LEN + 1 bytes) with a new random id.  0 or -errno. */
int task_id_new(char id[TASK_ID_LEN + 1]);

/* 1 when s is exactly 6 lowercase hex digits, else 0. */
int task_id_valid(const char *s);

/*
 * Write the folder name for a task started at t (local time) with id into
 * name (TASK_NAME_LEN + 1 bytes).  0, -EINVAL for a bad id, or -EOVERFLOW
 * when t is not a time of a four-digit year.
 */
int task_name_make(char name[TASK_NAME_LEN + 1], time_t t, const char *id);

/*
 * Parse a folder name: exactly "YYYYMMDD-HHMMSS-<id>" with a real calendar
 * date and time of day.  Returns 0 and sets *start (local time; may be NULL)
 * and id (TASK_ID_LEN + 1 bytes; may be NULL), or -EINVAL.
 */
int task_name_parse(const char *name, time_t *start, char *id);

/* 1 when name is a task folder name (task_name_parse() accepts it). */
int task_name_valid(const char *name);

/*
 * 1 when name is "<task folder name>.lock"; the folder's name (without
 * ".lock") is then written into folder (TASK_NAME_LEN + 1 bytes, may be NULL).
 */
int task_lock_name_parse(const char *name, char *folder);

#endif
