/*
 * The guest's git config, written by the init for both modes: the rewrite of
 * settings.json's git remotes to the broker (docs/broker.md, "In the VM").
 */
#ifndef AIBOX_INIT_GITCONFIG_H
#define AIBOX_INIT_GITCONFIG_H

#include <jansson.h>

struct buf;

/* Add s to out as a git config value: in double quotes, '"' and '\\' escaped. */
void gitconfig_value(struct buf *out, const char *s);

/*
 * Add to the git config file at path (created 0644 if missing) the rewrite of
 * settings.json's "git_remotes" (docs/broker.md, "In the VM"): for entry n
 * with URL U, url."http://git.aibox.internal/<n>/".insteadOf U and U with
 * ".git" added or removed, and http."http://git.aibox.internal/".proxy
 * proxy.  remotes NULL or empty: nothing is written.  0, or -EINVAL (a
 * malformed list) or -errno with the reason in why.
 */
int git_remotes_write(const char *path, json_t *remotes, const char *proxy, struct buf *why);

#endif
