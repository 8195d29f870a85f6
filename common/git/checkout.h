/*
 * What aibox task asks git about the user's checkout: the start commit and
 * the identity the VM commits as.  git runs in the checkout with hooks and
 * fsmonitor off (the checkout's own config runs nothing of ours).
 */
#ifndef AIBOX_CHECKOUT_H
#define AIBOX_CHECKOUT_H

#include "base/buf.h"
#include "base/oid.h"

/*
 * git -C checkout ARGS..., stderr to /dev/null, stdout appended to out
 * (at most 64 KiB; trailing whitespace trimmed).  Returns as spawn_run():
 * git's exit code, or a negative errno when it could not run.
 */
int checkout_git(const char *checkout, struct buf *out, const char *const *args);

/*
 * The commit from names (NULL: HEAD), as full hex into commit, by one git
 * process.  0, or -EINVAL with err set: git cannot run there, the checkout
 * is a shallow clone (a task needs the full history), or from names no
 * commit.
 */
int checkout_start_commit(const char *checkout, const char *from, char commit[OID_HEX_MAX + 1],
                          struct buf *err);

/*
 * git's user.name and user.email there (the last value of each, as `git
 * config user.name` gives it), appended to name and email, by one git
 * process.  0, or -ENOENT with err saying which is missing and how to set it.
 */
int checkout_identity(const char *checkout, struct buf *name, struct buf *email, struct buf *err);

#endif
