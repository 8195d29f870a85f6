/*
 * Secrets on the host: the API key, the subscription token, the git
 * remotes' tokens and the config's env values (docs/task-host.md, "Secrets
 * on the host").
 *
 * A secret reaches aibox through its environment (the user's shell).  There
 * it is visible to every child that inherits the environment and, for the
 * whole life of the process, in /proc/PID/environ, which shows the initial
 * environment block whatever unsetenv() did later.  So each process takes
 * the secrets it needs out of its environment as it starts, overwriting the
 * bytes in place, and hands a secret to the one child that needs it over a
 * pipe at a documented fd number (aibox-proxy --key-fd, aibox-broker
 * --token-fd), never through the child's environment.
 */
#ifndef AIBOX_SECRET_H
#define AIBOX_SECRET_H

#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"

/* The most a secret pipe carries (a pipe's default capacity). */
#define SECRET_PIPE_MAX 65536

/*
 * Take the variable name out of our environment: its value (getenv()'s) is
 * appended to value, the value bytes of every entry of that name where the
 * environment holds them (for an inherited variable, the initial block that
 * /proc/PID/environ shows) are overwritten with NULs, and the variable is
 * unset.  Returns 1 when it was
 * set (empty included), 0 when it was not (value untouched).  Taking it again
 * finds it unset.  value should be wiped by the caller (buf_wipe_release()):
 * it is grown once, before the copy, so no stale copy is left behind.
 */
int secret_take_env(const char *name, struct buf *value);

/*
 * A pipe that holds data, for a child's fd: returns the read end
 * (close-on-exec; the caller gives it to the child and closes it) with
 * data written and the write end closed, so the child reads data then EOF.
 * -E2BIG when len > SECRET_PIPE_MAX, or -errno.
 */
int secret_pipe(const void *data, size_t len);

/*
 * Read fd to EOF (then close it) into out, at most max bytes; out is grown
 * once before reading, so no stale copy is left behind.  Returns the number
 * of bytes read, -EFBIG when fd holds more than max, or -errno; out is wiped
 * and emptied on failure.
 */
ssize_t secret_read_fd(int fd, struct buf *out, size_t max);

/*
 * Overwrite with zeros the bytes of every string member of the JSON object
 * obj (jansson's copies of secret values, as the init parses them) before
 * the caller frees it; members of another type and a NULL or non-object obj
 * are left alone.
 */
struct json_t;
void secret_json_wipe(struct json_t *obj);

/*
 * A secret's placeholder, the value the VM holds in its place
 * (docs/config.md, "secrets"): SECRET_PLACEHOLDER_PREFIX then 32 lowercase
 * hex digits of getrandom(2), new at each call, NUL-terminated in out.
 * 0, or -errno when the kernel has no randomness to give.
 */
#define SECRET_PLACEHOLDER_PREFIX "aibox-secret-"
#define SECRET_PLACEHOLDER_LEN    (sizeof(SECRET_PLACEHOLDER_PREFIX) - 1 + 32)
int secret_placeholder(char out[SECRET_PLACEHOLDER_LEN + 1]);

/* 1 when the n bytes at p are a placeholder of secret_placeholder()'s form, else 0. */
int secret_placeholder_valid(const char *p, size_t n);

#endif
