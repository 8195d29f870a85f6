/*
 * What aibox task and aibox run both tell aibox-broker about the config's
 * git: entries (docs/broker.md, "In aibox task"): one --remote group per entry
 * in config order, so that entry n is remote n of the VM's insteadOf rewrite,
 * and the tokens, which travel over a pipe (--token-fd), never through an
 * environment.
 */
#ifndef AIBOX_BROKER_SPAWN_H
#define AIBOX_BROKER_SPAWN_H

#include "base/buf.h"
#include "net/git_remote.h"
#include "base/spawn.h"

/*
 * Appends to sp->args, for each of the nr remotes r (the config's git:
 * entries, in order), --remote URL and its --token-env, --auth or
 * --auth-user, --fetch and --push options; and to sp->env the names the
 * broker must not inherit: ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN and
 * env_names (the config's env names).  The caller adds the program first
 * and its fd options after.
 */
void broker_spawn_remotes(struct spawn *sp, const struct git_remote *r, size_t nr,
                          const struct strvec *env_names);

/*
 * Takes the token of each of the nr remotes r out of our environment
 * (secret_take_env(): its bytes wiped there), checks that it is set and
 * non-empty printable ASCII without spaces, and appends "NAME=value\n" for
 * each variable (once, however many entries name it) to lines: the text
 * aibox-broker reads from --token-fd (docs/broker.md).  Call it before
 * anything is started, so that no child inherits a token.  0, or -EINVAL
 * with the message in err; lines may then hold a part (wipe it).
 */
int broker_tokens_take(const struct git_remote *r, size_t nr, struct buf *lines, struct buf *err);

/*
 * 1 when a token's value v[0..n) can go into an Authorization header: not
 * empty, printable ASCII without spaces (0x21-0x7e).  The one rule for
 * broker_tokens_take() and aibox-broker.
 */
int broker_token_ok(const char *v, size_t n);

/*
 * Before anything starts: each of the nr remotes r has a URL of the one
 * grammar (git_remote.h) whose host resolves (as aibox-broker will resolve
 * it).  0, or -EINVAL with
 * the first problem appended to err (one wording for aibox task and aibox
 * run).  The tokens are checked by broker_tokens_take().
 */
int broker_remotes_check(const struct git_remote *r, size_t nr, struct buf *err);

/*
 * The value of the variable name in lines (broker_tokens_take()'s text),
 * appended to value.  1 when found, 0 when not.
 */
int broker_token_lookup(const char *lines, size_t len, const char *name, struct buf *value);

#endif
