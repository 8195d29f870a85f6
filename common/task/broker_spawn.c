/* The broker's remotes and environment for aibox task and aibox run (broker_spawn.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "task/broker_spawn.h"
#include "base/buf.h"
#include "net/git_remote.h"
#include "net/resolve.h"
#include "base/err.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "base/banned.h"

void broker_spawn_remotes(struct spawn *sp, const struct git_remote *r, size_t nr,
                          const struct strvec *env_names)
{
	for (size_t i = 0; i < nr; i++) {
		const struct git_remote *g = &r[i];

		strvec_pushl(&sp->args, "--remote", g->url, NULL);
		if (g->token_env)
			strvec_pushl(&sp->args, "--token-env", g->token_env, NULL);
		if (g->auth == GIT_REMOTE_BEARER)
			strvec_pushl(&sp->args, "--auth", "bearer", NULL);
		else if (g->user)
			strvec_pushl(&sp->args, "--auth-user", g->user, NULL);
		if (g->fetch)
			strvec_push(&sp->args, "--fetch");
		for (size_t j = 0; j < g->push.nr; j++)
			strvec_pushl(&sp->args, "--push", g->push.v[j], NULL);
	}
	strvec_pushl(&sp->env, "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", NULL);
	for (size_t i = 0; i < env_names->nr; i++)
		strvec_push(&sp->env, env_names->v[i]);
}

int broker_tokens_take(const struct git_remote *r, size_t nr, struct buf *lines, struct buf *err)
{
	struct buf v = BUF_INIT;
	int ret = 0;

	buf_grow(lines, 4096); /* fewer stale copies: the tokens are short */
	for (size_t i = 0; i < nr && !ret; i++) {
		const struct git_remote *g = &r[i];
		int seen = 0;

		if (!g->token_env)
			continue;
		for (size_t j = 0; j < i; j++)
			if (r[j].token_env && !strcmp(r[j].token_env, g->token_env))
				seen = 1;
		if (seen)
			continue;
		buf_reset(&v);
		if (secret_take_env(g->token_env, &v) <= 0 || !v.len) {
			buf_addf(err,
			         "the git remote '%s' takes its token from %s, which is not set",
			         g->url, g->token_env);
			ret = -EINVAL;
			break;
		}
		if (!broker_token_ok(v.buf, v.len)) {
			buf_addf(err,
			         "the token in %s (for the git remote '%s') holds a space or "
			         "control character",
			         g->token_env, g->url);
			ret = -EINVAL;
			break;
		}
		buf_addf(lines, "%s=%s\n", g->token_env, v.buf);
	}
	buf_wipe_release(&v);
	return ret;
}

int broker_token_ok(const char *v, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f)
			return 0;
	return 1;
}

int broker_token_lookup(const char *lines, size_t len, const char *name, struct buf *value)
{
	size_t n = strlen(name);
	const char *p = lines, *end = lines + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - p) > n && !memcmp(p, name, n) && p[n] == '=') {
			buf_add(value, p + n + 1, (size_t)(eol - p - (ptrdiff_t)n - 1));
			return 1;
		}
		p = eol + 1;
	}
	return 0;
}

/* g's host resolves as aibox-broker resolves it: by the proxy's one lookup (common/net/resolve.h).
 */
static int check_host(struct resolver *res, const struct git_remote *g, struct buf *err)
{
	struct resolve_result rr;

	resolver_lookup_now(res, g->host, 443, &rr);
	if (rr.err) {
		buf_addf(err, "the git remote '%s': cannot resolve '%s': %s", g->url, g->host,
		         resolve_strerror(rr.err));
		return -EINVAL;
	}
	return 0;
}

int broker_remotes_check(const struct git_remote *r, size_t nr, struct buf *err)
{
	struct resolver *res = NULL;
	int ret = 0;

	for (size_t i = 0; i < nr && !ret; i++) {
		const struct git_remote *g = &r[i];
		struct buf e = BUF_INIT;

		if (git_remote_url_check(g->url, &e) < 0) {
			buf_addf(err, "the git remote '%.200s' %s", g->url, e.buf);
			buf_release(&e);
			ret = -EINVAL;
			break;
		}
		if (!res && !(res = resolver_new_default(0, err))) {
			ret = -EINVAL;
			break;
		}
		ret = check_host(res, g, err);
	}
	resolver_free(res);
	return ret;
}
