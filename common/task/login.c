/* Claude Code's login in the VM (login.h). */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "task/login.h"
#include "base/banned.h"

int login_other(const char *name)
{
	return !strcmp(name, "ANTHROPIC_AUTH_TOKEN") || !strcmp(name, "CLAUDE_CODE_USE_BEDROCK") ||
	       !strcmp(name, "CLAUDE_CODE_USE_VERTEX");
}

void login_both_warning(const char *cfg_path, struct buf *msg)
{
	buf_addf(msg,
	         "ANTHROPIC_API_KEY is forwarded and CLAUDE_CODE_OAUTH_TOKEN is in the env of "
	         "'%s': Claude Code's requests get the key, which stays on the host, and the "
	         "token is not used (the VM holds only its placeholder); remove one of them "
	         "from env",
	         cfg_path);
}

/* "env:" and the name, as the user adds them; a note when env already has names. */
static void add_lines(const struct login *l, const char *name, struct buf *msg)
{
	buf_addf(msg, "\n    env:\n      - %s", name);
	if (l->nr_env)
		buf_addf(msg, "\n(its env already lists names: add '- %s' to that list)", name);
}

int login_check_task(const struct login *l, const char *cfg_path, struct buf *msg)
{
	const char *set = l->key_set ? "ANTHROPIC_API_KEY" : "CLAUDE_CODE_OAUTH_TOKEN";

	if ((l->key_listed && l->key_set) || (l->token_listed && l->token_set) || l->other) {
		if (l->key_listed && l->key_set && l->token_listed && l->token_set)
			login_both_warning(cfg_path, msg);
		return 0;
	}
	if (l->key_listed || l->token_listed) {
		const char *name = l->key_listed ? "ANTHROPIC_API_KEY" : "CLAUDE_CODE_OAUTH_TOKEN";

		buf_addf(
		    msg,
		    "Claude Code in the VM would not be logged in: '%s' lists %s under env, but "
		    "it is not set in your shell; set it and start the task again",
		    cfg_path, name);
		if ((l->key_set && !l->key_listed) || (l->token_set && !l->token_listed))
			buf_addf(msg, " (%s is set in your shell, but not listed)", set);
		return -ENOKEY;
	}
	if (l->key_set || l->token_set) {
		buf_addf(
		    msg,
		    "Claude Code in the VM would not be logged in: %s is set in your shell, but "
		    "'%s' does not list it under env; add these two lines to it:",
		    set, cfg_path);
		add_lines(l, set, msg);
		return -ENOKEY;
	}
	buf_addf(msg,
	         "Claude Code in the VM would not be logged in: '%s' lists no login under env; "
	         "add these two lines to it:",
	         cfg_path);
	add_lines(l, "ANTHROPIC_API_KEY", msg);
	buf_addstr(msg,
	           "\nand set ANTHROPIC_API_KEY in your shell to an API key; for a claude.ai "
	           "subscription, CLAUDE_CODE_OAUTH_TOKEN instead (made by claude setup-token)");
	return -ENOKEY;
}
