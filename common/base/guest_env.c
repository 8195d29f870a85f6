/* The guest's one environment builder (guest_env.h). */
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/guest_env.h"
#include "base/banned.h"

/* Claude Code's retries of a failed API request in a task. */
#define GUEST_CLAUDE_MAX_RETRIES "4"

/* The variables through which common tools find a CA bundle (docs/proxy.md). */
static const char *const ca_vars[] = {
    "SSL_CERT_FILE",     "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",    "GIT_SSL_CAINFO",      "PIP_CERT",
    "CARGO_HTTP_CAINFO",
};

int guest_env_has(const struct strvec *env, const char *name, size_t n)
{
	for (size_t i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return 1;
	return 0;
}

static int term_ok(const char *t)
{
	size_t n = t ? strlen(t) : 0;

	if (!n || n >= 64)
		return 0;
	for (; *t; t++)
		if (*t <= ' ' || *t > '~')
			return 0;
	return 1;
}

/* NAME=value s into env; what we set ourselves wins, NO_PROXY would bypass the proxy. */
static void add_var(struct strvec *env, const char *s)
{
	const char *eq = strchr(s, '=');
	char name[GUEST_ENV_NAME_MAX + 1];
	size_t n = eq ? (size_t)(eq - s) : 0;

	if (!eq || n >= sizeof(name))
		return;
	memcpy(name, s, n);
	name[n] = '\0';
	if (!guest_env_name_valid(name) || !strcasecmp(name, "NO_PROXY") ||
	    guest_env_has(env, s, n))
		return;
	strvec_push(env, s);
}

void guest_env_build(const struct guest_env *g, struct strvec *env)
{
	strvec_pushf(env, "PATH=%s", g->path);
	strvec_pushf(env, "HOME=%s", g->home);
	strvec_pushf(env, "USER=%s", g->user);
	strvec_pushf(env, "LOGNAME=%s", g->user);
	if (g->sandbox)
		strvec_push(env, "IS_SANDBOX=1");
	strvec_pushl(env, "SHELL=/bin/bash", "LANG=C.UTF-8", NULL);
	strvec_pushf(env, "TERM=%s", term_ok(g->term) ? g->term : "dumb");
	if (g->git)
		strvec_pushl(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		             "GIT_TERMINAL_PROMPT=0", "GIT_ATTR_NOSYSTEM=1", "LC_ALL=C", NULL);
	/* The image's binary is root's and pinned by the image: it cannot update
	   itself, and is not where a native install's checks look for it. */
	if (g->claude)
		strvec_pushl(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		             "DISABLE_AUTOUPDATER=1", "DISABLE_INSTALLATION_CHECKS=1", NULL);
	if (g->claude_retries)
		strvec_push(env, "CLAUDE_CODE_MAX_RETRIES=" GUEST_CLAUDE_MAX_RETRIES);
	if (g->proxy) {
		strvec_pushf(env, "HTTP_PROXY=%s", g->proxy);
		strvec_pushf(env, "HTTPS_PROXY=%s", g->proxy);
		strvec_pushf(env, "http_proxy=%s", g->proxy);
		strvec_pushf(env, "https_proxy=%s", g->proxy);
		/* Node's own fetch and http(s) agents, which ignore the above without it:
		   the VM has no other way out, with a task CA or without. */
		strvec_push(env, "NODE_USE_ENV_PROXY=1");
	}
	if (g->task_ca)
		for (size_t i = 0; i < ARRAY_SIZE(ca_vars); i++)
			strvec_pushf(env, "%s=%s", ca_vars[i], GUEST_CA_BUNDLE);
	if (g->api_forward || g->api_oauth)
		strvec_push(env, "ANTHROPIC_BASE_URL=" GUEST_API_FORWARD_URL);
	if (g->api_forward)
		strvec_push(env, "ANTHROPIC_API_KEY=" GUEST_API_KEY_PLACEHOLDER);
	for (size_t i = 0; i < g->nvars; i++)
		add_var(env, g->vars[i]);
	for (size_t i = 0; i < g->nph; i++) {
		struct buf b = BUF_INIT;

		buf_addf(&b, "%s=%s", g->ph_names[i], g->ph_values[i]);
		add_var(env, b.buf);
		buf_release(&b);
	}
}
