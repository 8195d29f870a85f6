/*
 * Claude Code's login in the VM, checked before anything starts
 * (docs/config.md, "env": the login).  A VM starts with an empty home, so
 * Claude Code is logged in only through a variable of the config's env that
 * is set in the user's shell: ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN
 * (each kept on the host, the proxy adds it; the VM holds a placeholder), or one of
 * Claude Code's other logins, which go in as they are: ANTHROPIC_AUTH_TOKEN,
 * CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX.
 */
#ifndef AIBOX_LOGIN_H
#define AIBOX_LOGIN_H

#include "base/buf.h"

struct login {
	int key_listed, key_set;     /* ANTHROPIC_API_KEY in env; set non-empty in the shell */
	int token_listed, token_set; /* CLAUDE_CODE_OAUTH_TOKEN, the same */
	int other;                   /* one of the other logins listed and set */
	int nr_env;                  /* how many names the config's env lists */
};

/* 1 when name is one of Claude Code's other logins (above). */
int login_other(const char *name);

/*
 * For aibox task.  -ENOKEY when Claude Code in the VM would have no login,
 * with the refusal in msg: what is missing (a login set in the shell but not
 * listed is named), the config's path and the two lines to add.  Else 0,
 * with in msg (when not empty) login_both_warning()'s text when both the key
 * and the token are listed and set.
 */
int login_check_task(const struct login *l, const char *cfg_path, struct buf *msg);

/*
 * The warning for a config that lists both the key and the token, both set
 * (aibox task and aibox run), appended to msg: the key is forwarded, the
 * token not used.
 */
void login_both_warning(const char *cfg_path, struct buf *msg);

#endif
