/*
 * The one builder of every environment the VM's programs get (task mode's
 * Claude Code and git, aibox run's session): docs/init-task.md's claude
 * step and docs/internals.md, "aibox run (host <-> guest)".  Whatever a
 * variable's source (the init itself, settings.json, the config's env values,
 * the secrets' placeholders), it goes through guest_env_build(), so both
 * modes set the same names the same way.
 */
#ifndef AIBOX_GUEST_ENV_H
#define AIBOX_GUEST_ENV_H

#include <stddef.h>

#include "base/strvec.h"

/* The guest's file with the system bundle and the task's CA (docs/proxy.md). */
#define GUEST_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* What guest_env_build() makes an environment of. */
struct guest_env {
	const char *path; /* PATH */
	const char *home; /* HOME */
	const char *user; /* USER and LOGNAME */
	const char *term; /* TERM: NULL or not a short printable word: "dumb" */
	int sandbox;      /* IS_SANDBOX=1: the root session Claude Code asks for */
	/* Claude Code's own switches, both modes: no auto-update, no install
	   checks, no non-essential traffic (docs/run.md, "Updates, install
	   checks and side traffic") */
	int claude;
	int claude_retries; /* task mode's CLAUDE_CODE_MAX_RETRIES besides */
	int git;            /* git's: no system or global config, C locale, no prompt */
	const char *proxy;  /* HTTP(S)_PROXY in both cases, NULL: none */
	int api_forward;    /* ANTHROPIC_BASE_URL and the key's placeholder */
	/* ANTHROPIC_BASE_URL alone: the subscription's token, whose placeholder
	   comes among vars as CLAUDE_CODE_OAUTH_TOKEN (docs/proxy.md) */
	int api_oauth;
	int task_ca; /* the tools' CA variables point at GUEST_CA_BUNDLE */
	/* NAME=value each: the config's env values and the secrets' placeholders,
	   taken in order; a name already set above, a repeated one, a bad name and
	   NO_PROXY (which would bypass the proxy) are left out. */
	const char *const *vars;
	size_t nvars;
	/* Then settings.json's placeholders: NAME in ph_names[i], its value in
	   ph_values[i], left out by the same rules. */
	const char *const *ph_names, *const *ph_values;
	size_t nph;
};

/*
 * Append g's environment to env as NAME=value strings: the base (PATH, HOME,
 * USER, LOGNAME, SHELL, LANG, TERM), then per g's switches, then g's vars
 * and placeholders.
 * The caller wipes env when vars held secrets.
 */
void guest_env_build(const struct guest_env *g, struct strvec *env);

/* 1 when env has NAME=... (name of n bytes), else 0. */
int guest_env_has(const struct strvec *env, const char *name, size_t n);

#endif
