/*
 * What aibox-proxy is told on its --secrets-fd (docs/proxy.md, "Secrets
 * and interception"): each secret's name, placeholder, value and hosts, and
 * the allow rules.  aibox task and aibox run write it into a pipe
 * (common/task/helpers.c); the proxy reads it before its lockdown.  Never argv,
 * the environment or a file.
 *
 * The text, one item a line, each line "WORD REST":
 *	secret NAME PLACEHOLDER     a new secret
 *	value VALUE                 its value (the rest of the line)
 *	host ENTRY                  a host it may go to (an allow entry)
 *	api bearer                  it goes to the API forward only, as
 *	                            "Authorization: Bearer" (no host lines)
 *	rule ENTRY                  a new rule, on an allow entry
 *	method METHOD               a method the rule lets through
 *	path PATTERN                a path pattern it lets through (the rest of the line)
 *	cache KIND                  the rule's host is cached (docs/cache.md): npm, pypi,
 *	                            crates, go or debian
 *	sumdb-key VKEY              a Go checksum database's verifier key its lookups
 *	                            may be signed by
 *	prefix PATH                 the path the rule's GOPROXY is served under
 *	                            (go_prefix_check())
 */
#ifndef AIBOX_PROXY_SECRETS_H
#define AIBOX_PROXY_SECRETS_H

#include <stddef.h>

#include "net/allow.h"
#include "config/config.h"
#include "proxy/secret_swap.h"
#include "base/strvec.h"

struct buf;
struct strvec;

/* The text is far shorter: 32 secrets of at most 4 KiB each, and the rules. */
#define PROXY_SECRETS_MAX (1024 * 1024)
/* A value's longest (printable ASCII, 0x20 to 0x7e). */
#define PROXY_SECRET_VALUE_MAX 4096

struct proxy_secrets {
	struct swap_secret *secrets; /* their strings owned here; values wiped at release */
	size_t nr;
	struct config_rule *rules;
	struct allow_list *rule_hosts; /* rule_hosts[i]: rules[i].host, to match with */
	size_t nr_rules;
	/* Every host a secret or a rule names: the hosts the proxy intercepts. */
	struct allow_list intercept;
	struct strvec hosts; /* the same entries, for the task CA */
};

#define PROXY_SECRETS_INIT                                                                         \
	{                                                                                          \
		NULL, 0, NULL, NULL, 0, ALLOW_LIST_INIT, STRVEC_INIT                               \
	}

/*
 * The text for cfg's secrets (values[i] and placeholders[i] for
 * cfg->secrets[i]; values NULL: no secrets, the rules only) and rules,
 * appended to out (wipe it after use).  api, when not NULL, is the API
 * forward's bearer token: written first as the secret named
 * api->name, with "api bearer" in place of hosts.
 */
void proxy_secrets_write(const struct config *cfg, const struct strvec *values,
                         const struct strvec *placeholders, const struct swap_secret *api,
                         struct buf *out);

/*
 * Parse the text (len bytes) into ps (PROXY_SECRETS_INIT).  0, or -EINVAL
 * with the line and the reason in err (never the value): an unknown word,
 * a value or host before a secret, a secret without a value or hosts, a
 * value that is not printable ASCII or too long, a placeholder that is not
 * one, a host entry the allow list refuses, a method or path outside a
 * rule, more than CONFIG_MAX_SECRETS secrets, an "api bearer" secret with
 * hosts or a second one.
 */
int proxy_secrets_parse(const char *text, size_t len, struct proxy_secrets *ps, struct buf *err);

/* The secret marked "api bearer", or NULL. */
const struct swap_secret *proxy_secrets_api(const struct proxy_secrets *ps);

/* Wipe the values and free everything; ps is PROXY_SECRETS_INIT again. */
void proxy_secrets_release(struct proxy_secrets *ps);

#endif
