/* The broker's remotes and environment for aibox task and aibox run (broker_spawn.h). */
#include <stdlib.h>
#include <string.h>

#include "broker_spawn.h"
#include "config.h"
#include "spawn.h"
#include "strvec.h"
#include "banned.h"

void broker_spawn_remotes(struct spawn *sp, const struct config *cfg)
{
	for (size_t i = 0; i < cfg->nr_git; i++) {
		const struct config_git *g = &cfg->git[i];

		strvec_pushl(&sp->args, "--remote", g->url, NULL);
		if (g->token_env)
			strvec_pushl(&sp->args, "--token-env", g->token_env, NULL);
		if (g->auth == CONFIG_GIT_BEARER)
			strvec_pushl(&sp->args, "--auth", "bearer", NULL);
		else if (g->user)
			strvec_pushl(&sp->args, "--auth-user", g->user, NULL);
		if (g->fetch)
			strvec_push(&sp->args, "--fetch");
		for (size_t j = 0; j < g->push.nr; j++)
			strvec_pushl(&sp->args, "--push", g->push.v[j], NULL);
	}
	strvec_pushl(&sp->env, "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", NULL);
	for (size_t i = 0; i < cfg->env.nr; i++)
		strvec_push(&sp->env, cfg->env.v[i]);
}

void broker_tokens_forget(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->nr_git; i++) {
		const char *name = cfg->git[i].token_env;
		char *v = name ? getenv(name) : NULL;

		if (v)
			explicit_bzero(v, strlen(v));
		if (name)
			unsetenv(name);
	}
}
