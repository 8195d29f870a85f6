/*
 * What aibox task and aibox run both tell aibox-broker about the config's
 * git: entries (docs/broker.md, "In aibox task"): one --remote group per entry
 * in config order, so that entry n is remote n of the VM's insteadOf rewrite,
 * and an environment that holds the tokens and no other secret.
 */
#ifndef AIBOX_BROKER_SPAWN_H
#define AIBOX_BROKER_SPAWN_H

#include "config.h"
#include "spawn.h"

/*
 * Appends to sp->args, for each of cfg's git: entries, --remote URL and its
 * --token-env, --auth or --auth-user, --fetch and --push options; and to
 * sp->env the names the broker must not inherit: ANTHROPIC_API_KEY,
 * CLAUDE_CODE_OAUTH_TOKEN and the config's env names.  The caller adds the
 * program first and its fd options after.
 */
void broker_spawn_remotes(struct spawn *sp, const struct config *cfg);

/*
 * Before anything starts: each of cfg's git: remotes is a plain https:// URL
 * whose host resolves (as aibox-broker will resolve it), and the variable
 * holding its token is set, non-empty and free of spaces and control
 * characters.  0, or -EINVAL with the first problem appended to why (one
 * wording for aibox task and aibox run).  Reads the token values; keeps none.
 */
int broker_remotes_check(const struct config *cfg, struct buf *why);

/*
 * Overwrites and unsets, in this process's environment, every token variable
 * cfg's git: entries name: called once the broker has read them, so that no
 * later child (the proxy, QEMU) inherits a token.
 */
void broker_tokens_forget(const struct config *cfg);

#endif
