/* The secrets and rules on aibox-proxy's --secrets-fd (proxy_secrets.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/go_sum.h"
#include "proxy/proxy_secrets.h"
#include "base/secret.h"
#include "base/strvec.h"
#include "base/banned.h"

void proxy_secrets_write(const struct config *cfg, const struct strvec *values,
                         const struct strvec *placeholders, const struct swap_secret *api,
                         struct buf *out)
{
	size_t n = values ? cfg->nr_secrets : 0;

	if (values && (values->nr != n || !placeholders || placeholders->nr != n))
		BUG("%zu secrets, %zu values", n, values->nr);
	if (api)
		buf_addf(out, "secret %s %s\nvalue %s\napi bearer\n", api->name, api->placeholder,
		         api->value);
	for (size_t i = 0; i < n; i++) {
		const struct config_secret *s = &cfg->secrets[i];

		buf_addf(out, "secret %s %s\nvalue %s\n", s->env, placeholders->v[i], values->v[i]);
		for (size_t k = 0; k < s->hosts.nr; k++)
			buf_addf(out, "host %s\n", s->hosts.v[k]);
	}
	for (size_t i = 0; i < cfg->nr_rules; i++) {
		const struct config_rule *r = &cfg->rules[i];

		buf_addf(out, "rule %s\n", r->host);
		for (size_t k = 0; k < r->methods.nr; k++)
			buf_addf(out, "method %s\n", r->methods.v[k]);
		for (size_t k = 0; k < r->paths.nr; k++)
			buf_addf(out, "path %s\n", r->paths.v[k]);
		if (r->cache)
			buf_addf(out, "cache %s\n", config_cache_name(r->cache));
		if (r->sumdb_key)
			buf_addf(out, "sumdb-key %s\n", r->sumdb_key);
		if (r->prefix)
			buf_addf(out, "prefix %s\n", r->prefix);
	}
}

static char *dupz(const char *p, size_t n)
{
	char *s = xmalloc(n + 1);

	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static int has(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 1;
	return 0;
}

static int bad(struct buf *err, size_t line, const char *why)
{
	buf_addf(err, "secrets, line %zu: %s", line, why);
	return -EINVAL;
}

static int placeholder_ok(const char *p)
{
	size_t n = strlen(SECRET_PLACEHOLDER_PREFIX);

	if (strlen(p) != SECRET_PLACEHOLDER_LEN || strncmp(p, SECRET_PLACEHOLDER_PREFIX, n))
		return 0;
	return strspn(p + n, "0123456789abcdef") == SECRET_PLACEHOLDER_LEN - n;
}

static int token_ok(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

static int printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

/* The secret being read is whole: a value and a host at least. */
static int secret_done(const struct proxy_secrets *ps, size_t line, struct buf *err)
{
	const struct swap_secret *s = ps->nr ? &ps->secrets[ps->nr - 1] : NULL;

	if (s && !s->value)
		return bad(err, line, "a secret without a value");
	if (s && !s->hosts.nr && !s->api)
		return bad(err, line, "a secret without hosts");
	return 0;
}

const struct swap_secret *proxy_secrets_api(const struct proxy_secrets *ps)
{
	for (size_t i = 0; i < ps->nr; i++)
		if (ps->secrets[i].api)
			return &ps->secrets[i];
	return NULL;
}

/* "host ENTRY" or "rule ENTRY": an allow entry, added to what is intercepted. */
static int add_host(struct proxy_secrets *ps, struct allow_list *to, const char *entry, size_t line,
                    struct buf *err)
{
	struct buf why = BUF_INIT;
	int ret = 0;

	if (!strncmp(entry, "preset:", 7) || !strcmp(entry, "*") ||
	    allow_add(to, entry, NULL, &why) < 0 ||
	    allow_add(&ps->intercept, entry, NULL, &why) < 0) {
		buf_addf(err, "secrets, line %zu: host '%s': %s", line, entry,
		         why.len ? why.buf : "not a host");
		ret = -EINVAL;
	} else if (!has(&ps->hosts, entry)) {
		strvec_push(&ps->hosts, entry);
	}
	buf_release(&why);
	return ret;
}

static int one_line(struct proxy_secrets *ps, const char *w, size_t wl, const char *rest, size_t rl,
                    size_t line, int *in_rule, struct buf *err)
{
	char *r = dupz(rest, rl);
	int ret = 0;

	if (wl == 6 && !memcmp(w, "secret", 6)) {
		const char *sp = memchr(r, ' ', rl);
		struct swap_secret *s;

		if ((ret = secret_done(ps, line, err)) < 0)
			goto out;
		if (ps->nr == CONFIG_MAX_SECRETS) {
			ret = bad(err, line, "too many secrets");
			goto out;
		}
		if (!sp || !token_ok(r, sp - r) || !placeholder_ok(sp + 1)) {
			ret = bad(err, line, "not 'secret NAME PLACEHOLDER'");
			goto out;
		}
		ps->secrets = xrealloc(ps->secrets, (ps->nr + 1) * sizeof(*ps->secrets));
		s = &ps->secrets[ps->nr++];
		memset(s, 0, sizeof(*s));
		s->name = dupz(r, sp - r);
		s->placeholder = xstrdup(sp + 1);
		*in_rule = 0;
	} else if (wl == 5 && !memcmp(w, "value", 5)) {
		struct swap_secret *s = ps->nr && !*in_rule ? &ps->secrets[ps->nr - 1] : NULL;

		if (!s || s->value)
			ret = bad(err, line, "a value outside a secret");
		else if (!rl || rl > PROXY_SECRET_VALUE_MAX || !printable(r, rl))
			ret =
			    bad(err, line, "a value must be 1 to 4096 printable ASCII characters");
		else
			s->value = xstrdup(r);
	} else if (wl == 4 && !memcmp(w, "host", 4)) {
		if (!ps->nr || *in_rule)
			ret = bad(err, line, "a host outside a secret");
		else if (ps->secrets[ps->nr - 1].api)
			ret = bad(err, line, "a host for the API's bearer token");
		else
			ret = add_host(ps, &ps->secrets[ps->nr - 1].hosts, r, line, err);
	} else if (wl == 3 && !memcmp(w, "api", 3)) {
		struct swap_secret *s = ps->nr && !*in_rule ? &ps->secrets[ps->nr - 1] : NULL;

		if (!s || !s->value || s->api || s->hosts.nr || strcmp(r, "bearer"))
			ret = bad(err, line, "not 'api bearer' right after a secret's value");
		else if (proxy_secrets_api(ps))
			ret = bad(err, line, "a second bearer token for the API");
		else
			s->api = 1;
	} else if (wl == 4 && !memcmp(w, "rule", 4)) {
		struct config_rule *cr;

		if ((ret = secret_done(ps, line, err)) < 0)
			goto out;
		if (ps->nr_rules == CONFIG_MAX_ALLOW) {
			ret = bad(err, line, "too many rules");
			goto out;
		}
		ps->rule_hosts =
		    xrealloc(ps->rule_hosts, (ps->nr_rules + 1) * sizeof(*ps->rule_hosts));
		ps->rule_hosts[ps->nr_rules] = (struct allow_list)ALLOW_LIST_INIT;
		if ((ret = add_host(ps, &ps->rule_hosts[ps->nr_rules], r, line, err)) < 0) {
			allow_clear(&ps->rule_hosts[ps->nr_rules]);
			goto out;
		}
		ps->rules = xrealloc(ps->rules, (ps->nr_rules + 1) * sizeof(*ps->rules));
		cr = &ps->rules[ps->nr_rules++];
		memset(cr, 0, sizeof(*cr));
		cr->host = xstrdup(r);
		strvec_init(&cr->methods);
		strvec_init(&cr->paths);
		*in_rule = 1;
	} else if (wl == 6 && !memcmp(w, "method", 6)) {
		if (!*in_rule || !token_ok(r, rl))
			ret = bad(err, line, "a method outside a rule, or not a token");
		else
			strvec_push(&ps->rules[ps->nr_rules - 1].methods, r);
	} else if (wl == 4 && !memcmp(w, "path", 4)) {
		if (!*in_rule || !rl || r[0] != '/' || !printable(r, rl))
			ret = bad(err, line, "a path outside a rule, or not '/'-rooted");
		else
			strvec_push(&ps->rules[ps->nr_rules - 1].paths, r);
	} else if (wl == 5 && !memcmp(w, "cache", 5)) {
		struct config_rule *cr = *in_rule ? &ps->rules[ps->nr_rules - 1] : NULL;

		if (!cr || cr->cache)
			ret = bad(err, line, "a cache outside a rule, or a second one");
		else if (!strcmp(r, "npm"))
			cr->cache = CONFIG_CACHE_NPM;
		else if (!strcmp(r, "pypi"))
			cr->cache = CONFIG_CACHE_PYPI;
		else if (!strcmp(r, "crates"))
			cr->cache = CONFIG_CACHE_CRATES;
		else if (!strcmp(r, "go"))
			cr->cache = CONFIG_CACHE_GO;
		else if (!strcmp(r, "debian"))
			cr->cache = CONFIG_CACHE_DEBIAN;
		else
			ret = bad(err, line,
			          "a cache kind that is not npm, pypi, crates, go or debian");
	} else if (wl == 9 && !memcmp(w, "sumdb-key", 9)) {
		struct config_rule *cr = *in_rule ? &ps->rules[ps->nr_rules - 1] : NULL;
		struct go_vkey k;

		if (!cr || cr->sumdb_key || go_vkey_parse(r, &k, NULL) < 0)
			ret = bad(err, line,
			          "a sumdb-key outside a rule, a second one, or not a key");
		else
			cr->sumdb_key = xstrdup(r);
	} else if (wl == 6 && !memcmp(w, "prefix", 6)) {
		struct config_rule *cr = *in_rule ? &ps->rules[ps->nr_rules - 1] : NULL;

		if (!cr || cr->prefix || go_prefix_check(r, NULL) < 0)
			ret = bad(err, line,
			          "a prefix outside a rule, a second one, or not a path prefix");
		else
			cr->prefix = xstrdup(r);
	} else {
		ret = bad(err, line, "an unknown word");
	}
out:
	OPENSSL_cleanse(r, rl);
	free(r);
	return ret;
}

int proxy_secrets_parse(const char *text, size_t len, struct proxy_secrets *ps, struct buf *err)
{
	size_t line = 0;
	int in_rule = 0, ret = 0;

	if (len > PROXY_SECRETS_MAX)
		return bad(err, 0, "too long");
	while (len && !ret) {
		const char *nl = memchr(text, '\n', len);
		size_t ll = nl ? (size_t)(nl - text) : len;
		const char *sp = memchr(text, ' ', ll);

		line++;
		if (!nl)
			return bad(err, line, "no newline at the end");
		if (!sp)
			ret = bad(err, line, "not 'WORD REST'");
		else
			ret = one_line(ps, text, sp - text, sp + 1, ll - (sp + 1 - text), line,
			               &in_rule, err);
		text += ll + 1;
		len -= ll + 1;
	}
	if (!ret)
		ret = secret_done(ps, line, err);
	return ret;
}

void proxy_secrets_release(struct proxy_secrets *ps)
{
	for (size_t i = 0; i < ps->nr; i++) {
		struct swap_secret *s = &ps->secrets[i];

		if (s->value) {
			OPENSSL_cleanse((char *)s->value, strlen(s->value));
			free((char *)s->value);
		}
		free((char *)s->name);
		free((char *)s->placeholder);
		allow_clear(&s->hosts);
	}
	free(ps->secrets);
	for (size_t i = 0; i < ps->nr_rules; i++) {
		free(ps->rules[i].host);
		free(ps->rules[i].sumdb_key);
		free(ps->rules[i].prefix);
		strvec_clear(&ps->rules[i].methods);
		strvec_clear(&ps->rules[i].paths);
		allow_clear(&ps->rule_hosts[i]);
	}
	free(ps->rules);
	free(ps->rule_hosts);
	allow_clear(&ps->intercept);
	strvec_clear(&ps->hosts);
	*ps = (struct proxy_secrets)PROXY_SECRETS_INIT;
}
