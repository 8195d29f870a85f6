/* The broker's remotes and environment for aibox task and aibox run (broker_spawn.h). */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "broker_spawn.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "task_settings.h"
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

/* The token of g, from our environment: set, non-empty, no space or control character. */
static int check_token(const struct config_git *g, struct buf *why)
{
	const char *v = getenv(g->token_env);

	if (!v || !*v) {
		buf_addf(why, "the git remote '%s' takes its token from %s, which is not set",
		         g->url, g->token_env);
		return -EINVAL;
	}
	for (const char *p = v; *p; p++) {
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
			buf_addf(
			    why,
			    "the token in %s (for the git remote '%s') holds a space or control "
			    "character",
			    g->token_env, g->url);
			return -EINVAL;
		}
	}
	return 0;
}

/* g's host resolves as aibox-broker resolves it (tools/aibox-broker.c). */
static int check_host(const struct config_git *g, struct buf *why)
{
	struct addrinfo hints = {0}, *ai = NULL;
	size_t n = strlen(g->host);
	/* An IPv6 host keeps its brackets in the config. */
	char *h = g->host[0] == '[' && n > 2 ? xstrndup(g->host + 1, n - 2) : xstrdup(g->host);
	int r;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	r = getaddrinfo(h, NULL, &hints, &ai);
	free(h);
	if (r) {
		buf_addf(why, "the git remote '%s': cannot resolve '%s': %s", g->url, g->host,
		         gai_strerror(r));
		return -EINVAL;
	}
	freeaddrinfo(ai);
	return 0;
}

int broker_remotes_check(const struct config *cfg, struct buf *why)
{
	for (size_t i = 0; i < cfg->nr_git; i++) {
		const struct config_git *g = &cfg->git[i];

		if (!task_git_remote_valid(g->url)) {
			buf_addf(why, "the git remote '%s' is not a plain https:// URL", g->url);
			return -EINVAL;
		}
		if ((g->token_env && check_token(g, why) < 0) || check_host(g, why) < 0)
			return -EINVAL;
	}
	return 0;
}
