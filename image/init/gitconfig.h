/*
 * The guest's git config, written by the init for both modes: the rewrite of
 * settings.json's git remotes to the broker (docs/broker.md, "In the VM").
 */
#ifndef AIBOX_INIT_GITCONFIG_H
#define AIBOX_INIT_GITCONFIG_H

#include <stddef.h>

struct buf;

/* Add s to out as a git config value: in double quotes, '"' and '\\' escaped. */
void gitconfig_value(struct buf *out, const char *s);

/*
 * Add to the git config file at path (created 0644 if missing) the rewrite of
 * settings.json's "git_remotes" (docs/broker.md, "In the VM"): for entry i
 * of the n remotes with URL U, url."http://git.aibox.internal/<i>/".insteadOf
 * U and U with ".git" added or removed, and
 * http."http://git.aibox.internal/".proxy proxy.  remotes and proxy are as
 * the one settings parser (common/task/task_settings.h) read and checked them: at
 * most TASK_SETTINGS_REMOTES_MAX URLs each git_remote_url_check() (common/net/git_remote.h), a
 * proxy without control characters; this does not check them again.  n 0: nothing is written.  0,
 * or -errno with the reason in err.
 */
int git_remotes_write(const char *path, const char *const *remotes, size_t n, const char *proxy,
                      struct buf *err);

#endif
