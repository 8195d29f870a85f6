#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "net/allow.h"
#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "net/git_remote.h"
#include "net/go_sum.h"
#include "git/gitproto.h"
#include "net/host_port.h"
#include "base/num.h"
#include "base/paths.h"
#include "net/allow.h"
#include "config/usage.h"
#include "base/banned.h"

#define PRESET_MAX_TEXT TOSTR(ALLOW_PRESET_NAME_MAX)

const char config_default_text[] =
    "# aibox project config.  docs/config.md in aibox describes every key.\n"
    "# Keys left out, or commented out, keep their defaults.\n"
    "\n"
    "# Hosts the VM may reach, through aibox's proxy; nothing else is reachable.\n"
    "# An entry is host (port 443), host:port, *.example.com (subdomains only),\n"
    "# an IP address, localhost:PORT for a port of this machine, or preset:NAME.\n"
    "# Interactive Claude Code connects to both of these when it starts: keep them.\n"
    "allow:\n"
    "  - api.anthropic.com\n"
    "  - platform.claude.com\n"
    "\n"
    "# Names of host variables handed to the VM; their values are read from your\n"
    "# shell when a task starts, never stored.  Claude Code's login is one of:\n"
    "#   ANTHROPIC_API_KEY (an API key; it stays on the host: aibox forwards it) or\n"
    "#   CLAUDE_CODE_OAUTH_TOKEN (a claude.ai subscription's token, made by\n"
    "#   claude setup-token; it stays on the host too: the VM gets a placeholder).\n"
    "# With a subscription, put CLAUDE_CODE_OAUTH_TOKEN in place of the key.\n"
    "env:\n"
    "  - ANTHROPIC_API_KEY\n"
    "\n"
    "# Secrets the VM uses without seeing them: it gets a placeholder under the\n"
    "# same name, which stands for the value only toward the hosts listed\n"
    "# (each also in allow; docs/config.md).\n"
    "# secrets:\n"
    "#   - env: NPM_TOKEN\n"
    "#     hosts: [registry.npmjs.org]\n"
    "\n"
    "# Host folders the VM sees, always read-only.\n"
    "# mounts:\n"
    "#   - host: ~/datasets\n"
    "#     vm: /data\n"
    "\n"
    "# Your ~/.claude/skills, agents and commands are mounted read-only.\n"
    "# Set one to none to leave it out, or to a folder to mount that instead.\n"
    "# skills: none\n"
    "# agents: none\n"
    "# commands: none\n"
    "\n"
    "# Where the project sits in the VM.\n"
    "# path: /project\n"
    "\n"
    "# Remotes the VM may fetch from and push to without holding the token:\n"
    "# aibox's broker adds it on the host, and only for the branches in push.\n"
    "# git:\n"
    "#   - url: https://github.com/you/project.git\n"
    "#     token: GITHUB_TOKEN\n"
    "#     fetch: yes\n"
    "#     push: [aibox/*]\n"
    "\n"
    "# The VM's size: memory (like 4G), cpus (1 up to this machine's count),\n"
    "# and the task's state disk (like 20G).\n"
    "# memory: 4G\n"
    "# cpus: 2\n"
    "# disk: 20G\n"
    "\n"
    "# Spend caps in USD, counted by aibox's proxy from what the API reports:\n"
    "# per task, and per day across all of this project's tasks and aibox runs.\n"
    "# budget:\n"
    "#   task: 5.00\n"
    "#   day: 50.00\n"
    "\n"
    "# Run each task's VM as a job on a Slurm cluster (docs/slurm.md); the\n"
    "# project's folder must be on storage the nodes see.\n"
    "# slurm:\n"
    "#   partition: agents\n"
    "#   account: myteam\n"
    "#   options: [--qos=low]\n"
    "#   shared: [/shared/home]\n";

/* The document as a tree, built from libyaml's events. */
enum node_kind { NODE_SCALAR, NODE_SEQ, NODE_MAP };

struct node {
	enum node_kind kind;
	size_t line, col; /* from 1 */
	char *str;        /* scalar: NUL-terminated (NULs inside are refused) */
	size_t len;
	int plain;           /* scalar: plain style (can be a number, bool, null) */
	struct node **items; /* seq: values; map: key, value, key, value... */
	size_t nr, alloc;
};

struct ctx {
	const char *name;
	struct buf *err;
	size_t nodes;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nr; i++)
		node_free(n->items[i]);
	free(n->items);
	free(n->str);
	free(n);
}

static int failv(struct ctx *c, size_t line, size_t col, const char *key, const char *fmt,
                 va_list ap)
{
	buf_addf(c->err, "%s:%zu:%zu: ", c->name, line, col);
	if (key && *key)
		buf_addf(c->err, "%s: ", key);
	buf_vaddf(c->err, fmt, ap);
	return -EINVAL;
}

__attribute__((format(printf, 4, 5))) static int fail(struct ctx *c, const struct node *at,
                                                      const char *key, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = failv(c, at ? at->line : 1, at ? at->col : 1, key, fmt, ap);
	va_end(ap);
	return ret;
}

__attribute__((format(printf, 4, 5))) static int fail_mark(struct ctx *c, yaml_mark_t m,
                                                           const char *key, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = failv(c, m.line + 1, m.column + 1, key, fmt, ap);
	va_end(ap);
	return ret;
}

/*
 * Before libyaml sees the bytes: refuse NULs and anything that is not UTF-8
 * (overlong forms, surrogates and code points over U+10FFFF included), with
 * the position where it starts.  libyaml would also take UTF-16 with a BOM;
 * a config is UTF-8 only.
 */
static int check_text(struct ctx *c, const unsigned char *s, size_t len)
{
	size_t line = 1, col = 1;

	for (size_t i = 0; i < len;) {
		unsigned char b = s[i];
		size_t n;
		uint32_t cp, min;

		if (b == 0) {
			buf_addf(c->err, "%s:%zu:%zu: the file holds a NUL byte", c->name, line,
			         col);
			return -EINVAL;
		}
		if (b < 0x80) {
			n = 1;
		} else {
			if (b >= 0xc2 && b <= 0xdf)
				n = 2, cp = b & 0x1f, min = 0x80;
			else if (b >= 0xe0 && b <= 0xef)
				n = 3, cp = b & 0x0f, min = 0x800;
			else if (b >= 0xf0 && b <= 0xf4)
				n = 4, cp = b & 0x07, min = 0x10000;
			else
				goto bad;
			if (i + n > len)
				goto bad;
			for (size_t k = 1; k < n; k++) {
				if ((s[i + k] & 0xc0) != 0x80)
					goto bad;
				cp = cp << 6 | (s[i + k] & 0x3f);
			}
			if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				goto bad;
		}
		if (b == '\n')
			line++, col = 1;
		else
			col++;
		i += n;
	}
	return 0;
bad:
	buf_addf(c->err, "%s:%zu:%zu: the file is not UTF-8 text", c->name, line, col);
	return -EINVAL;
}

static int is_null(const struct node *n)
{
	return n->kind == NODE_SCALAR && n->plain &&
	       (!n->len || !strcmp(n->str, "~") || !strcmp(n->str, "null") ||
	        !strcmp(n->str, "Null") || !strcmp(n->str, "NULL"));
}

static const char *kind_name(const struct node *n)
{
	if (n->kind == NODE_MAP)
		return "a mapping";
	if (n->kind == NODE_SEQ)
		return "a list";
	return "a string";
}

/* Attach child to parent (or make it the root); checks keys. */
static int attach(struct ctx *c, struct node **root, struct node *parent, struct node *child)
{
	if (!parent) {
		*root = child;
		return 0;
	}
	if (parent->kind == NODE_MAP && parent->nr % 2 == 0) {
		if (child->kind != NODE_SCALAR)
			return fail(c, child, NULL, "a key must be a plain string, not %s",
			            kind_name(child));
		for (size_t i = 0; i < parent->nr; i += 2)
			if (!strcmp(parent->items[i]->str, child->str))
				return fail(c, child, NULL,
				            "duplicate key '%s' (first at line %zu)", child->str,
				            parent->items[i]->line);
	}
	ALLOC_GROW(parent->items, parent->nr + 1, parent->alloc);
	parent->items[parent->nr++] = child;
	return 0;
}

static struct node *node_new(enum node_kind kind, yaml_mark_t m)
{
	struct node *n = xcalloc(1, sizeof(*n));

	n->kind = kind;
	n->line = m.line + 1;
	n->col = m.column + 1;
	return n;
}

/* The parser's reason for stopping, as the config's error: -EINVAL. */
static int parse_failed(struct ctx *c, const yaml_parser_t *parser)
{
	const char *problem = parser->problem ? parser->problem : "cannot parse";

	if (parser->context)
		return fail_mark(c, parser->problem_mark, NULL, "invalid YAML: %s %s (line %zu)",
		                 problem, parser->context, parser->context_mark.line + 1);
	return fail_mark(c, parser->problem_mark, NULL, "invalid YAML: %s", problem);
}

/*
 * A new node at depth, counted against the caps: no anchor or tag, no NUL,
 * the longest value, the most values, the deepest nesting.  0 or -EINVAL.
 */
static int node_check(struct ctx *c, struct node *n, int depth, const yaml_char_t *anchor,
                      const yaml_char_t *tag)
{
	if (anchor)
		return fail(c, n, NULL, "anchors and aliases are not supported");
	if (tag)
		return fail(c, n, NULL, "YAML tags are not supported ('%s')", (const char *)tag);
	if (n->kind == NODE_SCALAR && memchr(n->str, '\0', n->len))
		return fail(c, n, NULL, "a value holds a NUL character");
	if (n->kind == NODE_SCALAR && n->len > CONFIG_MAX_SCALAR)
		return fail(c, n, NULL, "a value is longer than %d bytes", CONFIG_MAX_SCALAR);
	if (++c->nodes > CONFIG_MAX_NODES)
		return fail(c, n, NULL, "more than %d values", CONFIG_MAX_NODES);
	if (n->kind != NODE_SCALAR && depth == CONFIG_MAX_DEPTH)
		return fail(c, n, NULL, "nested deeper than %d levels", CONFIG_MAX_DEPTH);
	return 0;
}

/*
 * Build the tree.  Returns 0 with *root set (NULL for an empty stream), or
 * -EINVAL with the reason in c->err.
 */
static int build_tree(struct ctx *c, const char *data, size_t len, struct node **root)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	struct node *stack[CONFIG_MAX_DEPTH];
	int depth = 0, docs = 0, done = 0, ret = 0;

	*root = NULL;
	if (!yaml_parser_initialize(&parser))
		return fail(c, NULL, NULL, "cannot start the YAML parser");
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);

	while (!done && !ret) {
		struct node *n = NULL;
		yaml_char_t *anchor = NULL, *tag = NULL;

		if (!yaml_parser_parse(&parser, &ev)) {
			ret = parse_failed(c, &parser);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				ret = fail_mark(c, ev.start_mark, NULL,
				                "only one YAML document is allowed");
			else if (ev.data.document_start.version_directive ||
			         ev.data.document_start.tag_directives.start !=
			             ev.data.document_start.tag_directives.end)
				ret = fail_mark(c, ev.start_mark, NULL,
				                "YAML directives are not supported");
			break;
		case YAML_ALIAS_EVENT:
			ret = fail_mark(c, ev.start_mark, NULL,
			                "anchors and aliases are not supported");
			break;
		case YAML_SCALAR_EVENT:
			anchor = ev.data.scalar.anchor;
			tag = ev.data.scalar.tag;
			n = node_new(NODE_SCALAR, ev.start_mark);
			n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
			n->len = ev.data.scalar.length;
			n->str = xstrndup((const char *)ev.data.scalar.value, n->len);
			break;
		case YAML_SEQUENCE_START_EVENT:
			anchor = ev.data.sequence_start.anchor;
			tag = ev.data.sequence_start.tag;
			n = node_new(NODE_SEQ, ev.start_mark);
			break;
		case YAML_MAPPING_START_EVENT:
			anchor = ev.data.mapping_start.anchor;
			tag = ev.data.mapping_start.tag;
			n = node_new(NODE_MAP, ev.start_mark);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		default:
			break;
		}
		if (n) {
			ret = node_check(c, n, depth, anchor, tag);
			if (!ret)
				ret = attach(c, root, depth ? stack[depth - 1] : NULL, n);
			if (ret)
				node_free(n); /* attach() takes it only on success */
			else if (n->kind != NODE_SCALAR)
				stack[depth++] = n;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	if (ret) {
		node_free(*root);
		*root = NULL;
	}
	return ret;
}

/* ---- the schema ---- */

static const char *const top_keys[] = {
    "allow", "mounts", "skills", "agents", "commands", "path",     "env",   "git", "memory",
    "cpus",  "disk",   "budget", "slurm",  "secrets",  "attempts", "check", NULL};
static const char *const mount_keys[] = {"host", "vm", "read-only", NULL};
static const char *const git_keys[] = {"url", "token", "auth", "user", "fetch", "push", NULL};
static const char *const budget_keys[] = {"task", "day", NULL};
static const char *const check_keys[] = {"run", "timeout", NULL};
static const char *const rule_keys[] = {"host",      "methods", "paths", "cache",
                                        "sumdb-key", "prefix",  NULL};
static const char *const secret_keys[] = {"env", "hosts", NULL};
static const char *const slurm_keys[] = {"partition", "account", "options", "shared", NULL};

static void list_keys(struct buf *b, const char *const *keys)
{
	for (int i = 0; keys[i]; i++)
		buf_addf(b, "%s%s", i ? ", " : "", keys[i]);
}

static int unknown_key(struct ctx *c, const struct node *key, const char *where,
                       const char *const *keys)
{
	struct buf known = BUF_INIT;
	int ret;

	list_keys(&known, keys);
	ret = fail(c, key, where, "unknown key '%s' (known keys: %s)", key->str, known.buf);
	buf_release(&known);
	return ret;
}

static int known(const char *s, const char *const *keys)
{
	for (int i = 0; keys[i]; i++)
		if (!strcmp(s, keys[i]))
			return 1;
	return 0;
}

static int want_string(struct ctx *c, const struct node *n, const char *key)
{
	if (n->kind != NODE_SCALAR)
		return fail(c, n, key, "must be a string, not %s", kind_name(n));
	if (is_null(n))
		return fail(c, n, key, "needs a value (leave the key out for the default)");
	return 0;
}

/* A list, or null for an empty one.  Sets *nr. */
static int want_list(struct ctx *c, const struct node *n, const char *key, size_t max,
                     const char *example, size_t *nr)
{
	*nr = 0;
	if (is_null(n))
		return 0;
	if (n->kind != NODE_SEQ)
		return fail(c, n, key, "must be a list, like %s, not %s", example, kind_name(n));
	if (n->nr > max)
		return fail(c, n, key, "more than %zu entries", max);
	*nr = n->nr;
	return 0;
}

static int has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

static int want_bool(struct ctx *c, const struct node *n, const char *key, int *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", NULL};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", NULL};

	if (n->kind == NODE_SCALAR && n->plain) {
		if (known(n->str, yes)) {
			*out = 1;
			return 0;
		}
		if (known(n->str, no)) {
			*out = 0;
			return 0;
		}
	}
	return fail(c, n, key, "must be yes or no (true or false)");
}

/* One allow entry, lowercased: 0, or -EINVAL with the reason in err. */
static int check_allow_entry(char *s, struct buf *err)
{
	if (strstr(s, "://"))
		return buf_refuse(err, -EINVAL,
		                  "name a host, not a URL (like example.com or example.com:8443)");
	if (!strcmp(s, "*") || !strncmp(s, "*:", 2))
		return buf_refuse(err, -EINVAL, "allowing every host is not supported");
	if (!strncmp(s, "preset:", 7))
		return allow_preset_name_ok(s + 7)
		           ? 0
		           : buf_refuse(err, -EINVAL,
		                        "a preset name is 1 to " PRESET_MAX_TEXT
		                        " lowercase letters, digits and '-'");
	return host_port_check(s, err);
}

/* A method of an allow rule: an uppercase token, like GET. */
static int rule_method_ok(const char *m)
{
	size_t n = strlen(m);

	return n && n <= 32 && strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == n;
}

/*
 * A path pattern of an allow rule: '/' then printable ASCII without space,
 * '?', '#' or '%', no '.' or '..' segment and no '//' (the proxy matches
 * the request's path after it decoded and resolved those: docs/proxy.md).
 */
static const char *rule_path_why(const char *p)
{
	if (p[0] != '/')
		return "must start with '/'";
	if (strlen(p) > 1024)
		return "is longer than 1024 bytes";
	for (const char *q = p; *q; q++)
		if (*q <= ' ' || *q > '~' || *q == '?' || *q == '#' || *q == '%')
			return "holds a space, a control or non-ASCII byte, '?', '#' or '%'";
	for (const char *q = p; q; q = strchr(q + 1, '/'))
		if (!strcmp(q, "/.") || !strncmp(q, "/./", 3) || !strcmp(q, "/..") ||
		    !strncmp(q, "/../", 4) || !strncmp(q, "//", 2))
			return "cannot hold '.', '..' or '//' segments";
	return NULL;
}

/* methods: or paths: of an allow rule at key, into out. */
static int check_rule_list(struct ctx *c, const struct node *v, const char *key, int methods,
                           struct strvec *out)
{
	size_t nr = 0;
	int ret = want_list(c, v, key, CONFIG_MAX_RULE_ITEMS,
	                    methods ? "[GET, POST]" : "[\"/repos/you/project/*\"]", &nr);

	if (!ret && !nr)
		return fail(c, v, key, "must list at least one %s (leave the key out for any)",
		            methods ? "method" : "path");
	for (size_t i = 0; !ret && i < nr; i++) {
		const struct node *e = v->items[i];
		const char *why;

		if ((ret = want_string(c, e, key)))
			break;
		if (methods && !rule_method_ok(e->str))
			return fail(c, e, key,
			            "'%.64s' is not an HTTP method in capitals, like GET", e->str);
		if (!methods && (why = rule_path_why(e->str)))
			return fail(c, e, key, "'%.64s' %s", e->str, why);
		strvec_push(out, e->str);
	}
	return ret;
}

const char *config_cache_name(enum config_cache k)
{
	switch (k) {
	case CONFIG_CACHE_NONE:
		return NULL;
	case CONFIG_CACHE_NPM:
		return "npm";
	case CONFIG_CACHE_PYPI:
		return "pypi";
	case CONFIG_CACHE_CRATES:
		return "crates";
	case CONFIG_CACHE_GO:
		return "go";
	case CONFIG_CACHE_DEBIAN:
		return "debian";
	}
	BUG("cache kind %d", (int)k);
}

/* cache: of an allow rule at key: npm, pypi, crates, go or debian. */
static int check_rule_cache(struct ctx *c, const struct node *v, const char *key,
                            struct config_rule *r)
{
	int ret = want_string(c, v, key);

	if (ret)
		return ret;
	if (!strcmp(v->str, "npm"))
		r->cache = CONFIG_CACHE_NPM;
	else if (!strcmp(v->str, "pypi"))
		r->cache = CONFIG_CACHE_PYPI;
	else if (!strcmp(v->str, "crates"))
		r->cache = CONFIG_CACHE_CRATES;
	else if (!strcmp(v->str, "go"))
		r->cache = CONFIG_CACHE_GO;
	else if (!strcmp(v->str, "debian"))
		r->cache = CONFIG_CACHE_DEBIAN;
	else
		return fail(c, v, key,
		            "'%.64s' is not a cache kind: npm, pypi, crates, go or debian", v->str);
	return 0;
}

/* sumdb-key: of an allow rule at key: a Go checksum database's verifier key. */
static int check_rule_sumdb_key(struct ctx *c, const struct node *v, const char *key,
                                struct config_rule *r)
{
	struct go_vkey k;
	struct buf why = BUF_INIT;
	int ret = want_string(c, v, key);

	if (!ret && go_vkey_parse(v->str, &k, &why) < 0)
		ret = fail(c, v, key, "'%.64s': %s, like %s", v->str, why.buf, GO_SUMDB_KEY);
	else if (!ret)
		r->sumdb_key = xstrdup(v->str);
	buf_release(&why);
	return ret;
}

/* prefix: of an allow rule at key: the path a GOPROXY is served under (go_prefix_check()). */
static int check_rule_prefix(struct ctx *c, const struct node *v, const char *key,
                             struct config_rule *r)
{
	struct buf why = BUF_INIT;
	int ret = want_string(c, v, key);

	if (!ret && go_prefix_check(v->str, &why) < 0)
		ret = fail(c, v, key, "'%.64s': %s, like /artifactory/api/go/go-remote", v->str,
		           why.buf);
	else if (!ret)
		r->prefix = xstrdup(v->str);
	buf_release(&why);
	return ret;
}

/* allow[i] in its map form: {host, methods, paths, cache, sumdb-key, prefix}. */
static int check_allow_rule(struct ctx *c, const struct node *e, const char *key,
                            struct config *cfg)
{
	struct config_rule *r;
	struct buf k = BUF_INIT, why = BUF_INIT;
	const struct node *host = NULL;
	int ret = 0;

	r = &cfg->rules[cfg->nr_rules];
	memset(r, 0, sizeof(*r));
	strvec_init(&r->methods);
	strvec_init(&r->paths);
	r->line = e->line;
	cfg->nr_rules++;
	for (size_t i = 0; !ret && i < e->nr; i += 2) {
		const struct node *kn = e->items[i], *vn = e->items[i + 1];

		if (!known(kn->str, rule_keys)) {
			ret = unknown_key(c, kn, key, rule_keys);
			break;
		}
		buf_reset(&k);
		buf_addf(&k, "%s.%s", key, kn->str);
		if (!strcmp(kn->str, "host")) {
			if ((ret = want_string(c, vn, k.buf)))
				break;
			host = vn;
		} else if (!strcmp(kn->str, "cache")) {
			ret = check_rule_cache(c, vn, k.buf, r);
		} else if (!strcmp(kn->str, "sumdb-key")) {
			ret = check_rule_sumdb_key(c, vn, k.buf, r);
		} else if (!strcmp(kn->str, "prefix")) {
			ret = check_rule_prefix(c, vn, k.buf, r);
		} else {
			ret =
			    check_rule_list(c, vn, k.buf, !strcmp(kn->str, "methods"),
			                    !strcmp(kn->str, "methods") ? &r->methods : &r->paths);
		}
	}
	if (!ret && !host)
		ret = fail(c, e, key, "needs a host, like {host: api.github.com, methods: [GET]}");
	if (!ret) {
		buf_reset(&k);
		buf_addf(&k, "%s.host", key);
		r->host = xstrdup(host->str);
		host_port_lower(r->host);
		if (!strncmp(r->host, "preset:", 7))
			ret = fail(c, host, k.buf, "a rule names one host, not a preset");
		else if (check_allow_entry(r->host, &why) < 0)
			ret = fail(c, host, k.buf, "'%s': %s", host->str, why.buf);
		else if (r->cache && !strcmp(r->host, "*"))
			ret = fail(c, host, k.buf, "a cached host is one host, not '*'");
		else if (r->sumdb_key && r->cache != CONFIG_CACHE_GO)
			ret = fail(c, host, k.buf, "a sumdb-key is for a rule with cache: go");
		else if (r->prefix && r->cache != CONFIG_CACHE_GO)
			ret = fail(c, host, k.buf, "a prefix is for a rule with cache: go");
	}
	for (size_t i = 0; !ret && i + 1 < cfg->nr_rules; i++)
		if (allow_entry_same(cfg->rules[i].host, r->host))
			ret = fail(c, host, k.buf, "%s has a rule already (line %zu)", r->host,
			           cfg->rules[i].line);
	if (!ret)
		strvec_push(&cfg->allow, r->host);
	buf_release(&k);
	buf_release(&why);
	return ret;
}

static int check_allow(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf key = BUF_INIT, why = BUF_INIT;
	size_t nr = 0;
	int ret = want_list(c, v, "allow", CONFIG_MAX_ALLOW, "[api.anthropic.com]", &nr);

	if (!ret && nr)
		cfg->rules = xcalloc(nr, sizeof(*cfg->rules));
	for (size_t i = 0; !ret && i < nr; i++) {
		const struct node *e = v->items[i];
		char *s;

		buf_reset(&key);
		buf_addf(&key, "allow[%zu]", i);
		if (e->kind == NODE_MAP) {
			ret = check_allow_rule(c, e, key.buf, cfg);
			continue;
		}
		if ((ret = want_string(c, e, key.buf)))
			break;
		s = xstrdup(e->str);
		host_port_lower(s);
		if (check_allow_entry(s, &why) < 0) {
			ret = fail(c, e, key.buf, "'%s': %s", e->str, why.buf);
			free(s);
			break;
		}
		strvec_push(&cfg->allow, s);
		free(s);
	}
	buf_release(&key);
	buf_release(&why);
	return ret;
}

/* "~" and "~/x" are expanded with $HOME; anything else must be absolute. */
static int host_path(struct ctx *c, const struct node *n, const char *key, char **out)
{
	const char *home = getenv("HOME");
	int ret = want_string(c, n, key);

	if (ret)
		return ret;
	if (has_ctl(n->str))
		return fail(c, n, key, "a path cannot hold control characters");
	if (!strcmp(n->str, "~") || !strncmp(n->str, "~/", 2)) {
		struct buf b = BUF_INIT;

		if (!home || home[0] != '/')
			return fail(c, n, key, "'~' needs HOME set to an absolute path");
		buf_addf(&b, "%s%s", home, n->str + 1);
		if (b.len > PATH_MAX) {
			buf_release(&b);
			return fail(c, n, key, "the path is too long");
		}
		*out = buf_detach(&b, NULL);
		return 0;
	}
	if (n->str[0] == '~')
		return fail(c, n, key, "'%s': only '~/' is understood, not '~user'", n->str);
	if (n->str[0] != '/')
		return fail(c, n, key, "'%s' must be an absolute path or start with '~/'", n->str);
	*out = xstrdup(n->str);
	return 0;
}

/* Folders of the VM's system that no mount or project may cover or replace. */
static const char *const vm_system[] = {"/proc",   "/sys",  "/dev", "/etc",   "/usr",
                                        "/bin",    "/sbin", "/lib", "/lib32", "/lib64",
                                        "/libx32", "/boot", "/run", "/var",   NULL};
static const char *const vm_reserved_exact[] = {"/home", "/tmp", "/root",  "/mnt",
                                                "/opt",  "/srv", "/media", NULL};

/* 1 when a is b or inside it. */
static int path_within(const char *a, const char *b)
{
	size_t n = strlen(b);

	return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

static int check_vm_path(const char *s, struct buf *err)
{
	if (s[0] != '/')
		return buf_refuse(err, -EINVAL, "must be an absolute path");
	if (!strcmp(s, "/"))
		return buf_refuse(err, -EINVAL, "cannot be /");
	if (strlen(s) > GUEST_PATH_MAX)
		return buf_refuse(err, -EINVAL, "is too long");
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("/._-+@=~", *p)))
			return buf_refuse(err, -EINVAL,
			                  "may hold only letters, digits, '/' and ._-+@=~");
	if (strstr(s, "//") || s[strlen(s) - 1] == '/')
		return buf_refuse(err, -EINVAL,
		                  "must be written plainly, without '//' or a trailing '/'");
	if (!guest_path_valid(s))
		return buf_refuse(err, -EINVAL, "cannot hold '.' or '..'");
	for (int i = 0; vm_system[i]; i++)
		if (path_within(s, vm_system[i]))
			return buf_refuse(err, -EINVAL, "is a system folder of the VM");
	for (int i = 0; vm_reserved_exact[i]; i++)
		if (!strcmp(s, vm_reserved_exact[i]))
			return buf_refuse(err, -EINVAL,
			                  "is a folder the VM needs; use a folder inside it");
	return 0;
}

static int check_mounts(struct ctx *c, const struct node *v, struct config *cfg,
                        const struct node *path_node)
{
	struct buf key = BUF_INIT;
	size_t nr = 0;
	int ret = want_list(c, v, "mounts", CONFIG_MAX_MOUNTS, "[{host: ~/data, vm: /data}]", &nr);
	const struct node **vm_nodes = xcalloc(nr + 1, sizeof(*vm_nodes));

	if (!ret && nr)
		cfg->mounts = xcalloc(nr, sizeof(*cfg->mounts));
	for (size_t i = 0; !ret && i < nr; i++) {
		const struct node *e = v->items[i], *host = NULL, *vm = NULL;
		struct config_mount *m = &cfg->mounts[i];
		struct buf why = BUF_INIT;

		buf_reset(&key);
		buf_addf(&key, "mounts[%zu]", i);
		if (e->kind != NODE_MAP) {
			ret = fail(c, e, key.buf, "must be a mapping with host and vm, not %s",
			           kind_name(e));
			break;
		}
		for (size_t k = 0; !ret && k < e->nr; k += 2) {
			const struct node *kn = e->items[k], *vn = e->items[k + 1];
			size_t base = key.len;

			if (!known(kn->str, mount_keys)) {
				ret = unknown_key(c, kn, key.buf, mount_keys);
				break;
			}
			buf_addf(&key, ".%s", kn->str);
			if (!strcmp(kn->str, "host")) {
				host = vn;
			} else if (!strcmp(kn->str, "vm")) {
				vm = vn;
			} else {
				int ro;

				ret = want_bool(c, vn, key.buf, &ro);
				if (!ret && !ro)
					ret = fail(c, vn, key.buf,
					           "mounts are always read-only; to change files, "
					           "have the task commit them");
			}
			buf_setlen(&key, base);
		}
		if (ret)
			break;
		if (!host || !vm) {
			ret = fail(c, e, key.buf, "needs both host and vm");
			break;
		}
		cfg->nr_mounts++;
		buf_addstr(&key, ".host");
		if ((ret = host_path(c, host, key.buf, &m->host)))
			break;
		buf_setlen(&key, key.len - 5);
		buf_addstr(&key, ".vm");
		if ((ret = want_string(c, vm, key.buf)))
			break;
		if (check_vm_path(vm->str, &why) < 0) {
			ret = fail(c, vm, key.buf, "'%s' %s", vm->str, why.buf);
			buf_release(&why);
			break;
		}
		if (path_within(vm->str, cfg->path) || path_within(cfg->path, vm->str)) {
			ret = fail(c, vm, key.buf, "'%s' overlaps the project's path %s%s", vm->str,
			           cfg->path, path_node ? "" : " (the default of path)");
			break;
		}
		for (size_t j = 0; j < i; j++) {
			if (path_within(vm->str, vm_nodes[j]->str) ||
			    path_within(vm_nodes[j]->str, vm->str)) {
				ret = fail(c, vm, key.buf, "'%s' overlaps mounts[%zu].vm '%s'",
				           vm->str, j, vm_nodes[j]->str);
				break;
			}
		}
		if (ret)
			break;
		vm_nodes[i] = vm;
		m->vm = xstrdup(vm->str);
	}
	free(vm_nodes);
	buf_release(&key);
	return ret;
}

static int check_claude(struct ctx *c, const struct node *v, const char *key,
                        struct config_claude *out)
{
	int ret = want_string(c, v, key);

	if (ret)
		return ret;
	if (v->plain && !strcmp(v->str, "none")) {
		out->kind = CONFIG_CLAUDE_NONE;
		return 0;
	}
	if (v->plain && !strcmp(v->str, "default")) {
		out->kind = CONFIG_CLAUDE_DEFAULT;
		return 0;
	}
	if (v->str[0] != '/' && v->str[0] != '~')
		return fail(c, v, key, "'%s': must be none, default, or a folder (absolute or ~/)",
		            v->str);
	if ((ret = host_path(c, v, key, &out->path)))
		return ret;
	out->kind = CONFIG_CLAUDE_PATH;
	return 0;
}

static int check_path(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf why = BUF_INIT;
	int ret = want_string(c, v, "path");

	if (ret)
		return ret;
	if (check_vm_path(v->str, &why) < 0) {
		ret = fail(c, v, "path", "'%s' %s", v->str, why.buf);
		buf_release(&why);
		return ret;
	}
	free(cfg->path);
	cfg->path = xstrdup(v->str);
	return 0;
}

/* check:'s command (or check.run's): one printable line, run by sh -c in the VM. */
static int check_check_run(struct ctx *c, const struct node *v, const char *key, struct config *cfg)
{
	int ret = want_string(c, v, key);

	if (ret)
		return ret;
	if (!*v->str || strlen(v->str) > CONFIG_CHECK_MAX)
		return fail(c, v, key, "must be a command of 1 to %d bytes, like 'make test'",
		            CONFIG_CHECK_MAX);
	for (const unsigned char *p = (const unsigned char *)v->str; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return fail(c, v, key,
			            "must be one line without control characters (byte 0x%02x)",
			            *p);
	free(cfg->check);
	cfg->check = xstrdup(v->str);
	return 0;
}

/* check.timeout: a duration (duration_parse()) of 1 s to 24 h. */
static int check_check_timeout(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf why = BUF_INIT;
	int ret = 0;

	if (v->kind != NODE_SCALAR || is_null(v))
		return fail(c, v, "check.timeout", "must be a duration, like 10m or 90s");
	if (duration_in(v->str, GUEST_CHECK_TIMEOUT_MIN_MS, GUEST_CHECK_TIMEOUT_MAX_MS,
	                &cfg->check_timeout_ms, &why) < 0)
		ret = fail(c, v, "check.timeout", "%s", why.buf);
	buf_release(&why);
	return ret;
}

/*
 * check: the command run in the VM after Claude Code (docs/tasks.md, "The check"),
 * either a string or {run: COMMAND, timeout: DURATION}.
 */
static int check_check(struct ctx *c, const struct node *v, struct config *cfg)
{
	const struct node *run = NULL, *timeout = NULL;

	if (v->kind != NODE_MAP)
		return check_check_run(c, v, "check", cfg);
	for (size_t k = 0; k < v->nr; k += 2) {
		const struct node *kn = v->items[k];

		if (!known(kn->str, check_keys))
			return unknown_key(c, kn, "check", check_keys);
		if (!strcmp(kn->str, "run"))
			run = v->items[k + 1];
		else
			timeout = v->items[k + 1];
	}
	if (!run)
		return fail(c, v, "check",
		            "has no run: (the command, like {run: make test, timeout: "
		            "10m})");
	if (timeout && check_check_timeout(c, timeout, cfg) < 0)
		return -EINVAL;
	return check_check_run(c, run, "check.run", cfg);
}

/* Names aibox sets in the VM itself: a host value would break the VM. */
static const char *const env_reserved[] = {"HOME", "PATH", "USER", "LOGNAME", "SHELL", NULL};

static int is_proxy_var(const char *s)
{
	static const char *const proxies[] = {"http_proxy", "https_proxy", "no_proxy", "all_proxy",
	                                      NULL};

	for (int i = 0; proxies[i]; i++)
		if (!strcasecmp(s, proxies[i]))
			return 1;
	return 0;
}

static int check_env(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf key = BUF_INIT;
	size_t nr = 0;
	const struct node *base_url = NULL, *api_key = NULL;
	int ret = want_list(c, v, "env", CONFIG_MAX_ENV, "[ANTHROPIC_API_KEY]", &nr);

	for (size_t i = 0; !ret && i < nr; i++) {
		const struct node *e = v->items[i];

		buf_reset(&key);
		buf_addf(&key, "env[%zu]", i);
		if ((ret = want_string(c, e, key.buf)))
			break;
		if (!guest_env_name_valid(e->str)) {
			ret = fail(c, e, key.buf,
			           "'%.64s' is not a variable name (list NAMES; aibox reads the "
			           "values from your shell when a task starts)",
			           e->str);
			break;
		}
		if (known(e->str, env_reserved) || is_proxy_var(e->str)) {
			ret = fail(c, e, key.buf, "%s is set by aibox in the VM", e->str);
			break;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(v->items[j]->str, e->str)) {
				ret = fail(c, e, key.buf, "%s is listed twice", e->str);
				break;
			}
		if (ret)
			break;
		if (!strcmp(e->str, "ANTHROPIC_BASE_URL"))
			base_url = e;
		if (!strcmp(e->str, "ANTHROPIC_API_KEY"))
			api_key = e;
		strvec_push(&cfg->env, e->str);
	}
	if (!ret && base_url && api_key)
		ret =
		    fail(c, base_url, "env",
		         "ANTHROPIC_BASE_URL cannot be set next to ANTHROPIC_API_KEY: aibox points "
		         "it at its own port, which adds the key on the host");
	buf_release(&key);
	return ret;
}

/*
 * Whether the allow list (its entries that are no preset) lets the VM reach
 * the secret's host entry h: a name or address it matches, or for
 * "*.domain" the same wildcard entry.
 */
static int secret_host_allowed(const struct config *cfg, const char *h)
{
	struct allow_list al = ALLOW_LIST_INIT, one = ALLOW_LIST_INIT;
	struct buf why = BUF_INIT;
	int ok = 0;

	for (size_t i = 0; i < cfg->allow.nr; i++)
		if (strncmp(cfg->allow.v[i], "preset:", 7))
			allow_add(&al, cfg->allow.v[i], NULL, &why);
	if (allow_add(&one, h, NULL, &why) == 0 && one.nr == 1) {
		const struct allow_entry *e = &one.v[0];

		if (e->kind != ALLOW_WILDCARD) {
			char lit[64];

			if (e->kind == ALLOW_ADDR)
				inet_ntop(e->family, e->addr, lit, sizeof(lit));
			ok = allow_match(&al, e->kind == ALLOW_ADDR ? lit : e->host, e->port) !=
			     NULL;
		}
		for (size_t i = 0; !ok && i < al.nr; i++)
			ok = al.v[i].kind == e->kind && al.v[i].port == e->port &&
			     !strcmp(al.v[i].host, e->host) && e->kind == ALLOW_WILDCARD;
	}
	allow_clear(&al);
	allow_clear(&one);
	buf_release(&why);
	return ok;
}

/* One secrets[i]: {env: NAME, hosts: [...]}. */
static int check_secret(struct ctx *c, const struct node *e, const char *key, struct config *cfg)
{
	struct config_secret *sc = &cfg->secrets[cfg->nr_secrets];
	const struct node *env = NULL, *hosts = NULL;
	struct buf k = BUF_INIT, why = BUF_INIT;
	size_t nr = 0;
	int ret = 0;

	memset(sc, 0, sizeof(*sc));
	strvec_init(&sc->hosts);
	sc->line = e->line;
	cfg->nr_secrets++;
	if (e->kind != NODE_MAP)
		return fail(c, e, key,
		            "must be a mapping like {env: NPM_TOKEN, hosts: "
		            "[registry.npmjs.org]}, not %s",
		            kind_name(e));
	for (size_t i = 0; !ret && i < e->nr; i += 2) {
		const struct node *kn = e->items[i];

		if (!known(kn->str, secret_keys))
			return unknown_key(c, kn, key, secret_keys);
		if (!strcmp(kn->str, "env"))
			env = e->items[i + 1];
		else
			hosts = e->items[i + 1];
	}
	if (!env)
		return fail(c, e, key, "needs env: the host variable that holds the value");
	if (!hosts)
		return fail(c, e, key, "needs hosts: the hosts the value may be sent to");
	buf_addf(&k, "%s.env", key);
	if ((ret = want_string(c, env, k.buf)))
		goto out;
	if (!guest_env_name_valid(env->str)) {
		ret = fail(c, env, k.buf, "'%.64s' is not a variable name", env->str);
		goto out;
	}
	if (known(env->str, env_reserved) || is_proxy_var(env->str)) {
		ret = fail(c, env, k.buf, "%s is set by aibox in the VM", env->str);
		goto out;
	}
	if (!strcmp(env->str, "ANTHROPIC_API_KEY") || !strcmp(env->str, "ANTHROPIC_BASE_URL")) {
		ret = fail(c, env, k.buf,
		           "%s is the API's: list ANTHROPIC_API_KEY under env, and the proxy adds "
		           "it on the host",
		           env->str);
		goto out;
	}
	for (size_t j = 0; j < cfg->env.nr; j++)
		if (!strcmp(cfg->env.v[j], env->str)) {
			ret =
			    fail(c, env, k.buf,
			         "%s is also in env, which would give the VM its value", env->str);
			goto out;
		}
	for (size_t j = 0; j < cfg->nr_git; j++)
		if (cfg->git[j].token_env && !strcmp(cfg->git[j].token_env, env->str)) {
			ret = fail(c, env, k.buf,
			           "%s is the token of git[%zu], which the broker keeps", env->str,
			           j);
			goto out;
		}
	for (size_t j = 0; j + 1 < cfg->nr_secrets; j++)
		if (!strcmp(cfg->secrets[j].env, env->str)) {
			ret = fail(c, env, k.buf, "%s is listed twice", env->str);
			goto out;
		}
	sc->env = xstrdup(env->str);
	buf_reset(&k);
	buf_addf(&k, "%s.hosts", key);
	if ((ret =
	         want_list(c, hosts, k.buf, CONFIG_MAX_SECRET_HOSTS, "[registry.npmjs.org]", &nr)))
		goto out;
	if (!nr) {
		ret = fail(c, hosts, k.buf, "must name at least one host the value may go to");
		goto out;
	}
	for (size_t i = 0; i < nr; i++) {
		const struct node *h = hosts->items[i];
		char *s;

		if ((ret = want_string(c, h, k.buf)))
			goto out;
		s = xstrdup(h->str);
		host_port_lower(s);
		buf_reset(&why);
		if (!strncmp(s, "preset:", 7))
			buf_addstr(&why, "name a host, not a preset");
		else if (check_allow_entry(s, &why) == 0 && !secret_host_allowed(cfg, s))
			buf_addstr(&why, "is not allowed: add it to allow too");
		if (why.len) {
			ret = fail(c, h, k.buf, "'%.200s': %s", h->str, why.buf);
			free(s);
			goto out;
		}
		strvec_push(&sc->hosts, s);
		free(s);
	}
out:
	buf_release(&k);
	buf_release(&why);
	return ret;
}

static int check_secrets(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf key = BUF_INIT;
	size_t nr = 0;
	int ret = want_list(c, v, "secrets", CONFIG_MAX_SECRETS,
	                    "[{env: NPM_TOKEN, hosts: [registry.npmjs.org]}]", &nr);

	if (!ret && nr)
		cfg->secrets = xcalloc(nr, sizeof(*cfg->secrets));
	for (size_t i = 0; !ret && i < nr; i++) {
		buf_reset(&key);
		buf_addf(&key, "secrets[%zu]", i);
		ret = check_secret(c, v->items[i], key.buf, cfg);
	}
	buf_release(&key);
	return ret;
}

/* Sizes and CPU counts: the rules are common/num's, shared with --memory and --cpus. */
static int check_size(struct ctx *c, const struct node *v, const char *key, uint64_t min,
                      uint64_t max, uint64_t *out)
{
	struct buf why = BUF_INIT;
	int ret = want_string(c, v, key);

	if (ret)
		return ret;
	if (parse_size_mib(v->str, min, max, out, &why) < 0)
		ret = fail(c, v, key, "%s", why.buf);
	buf_release(&why);
	return ret;
}

static int check_cpus(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf why = BUF_INIT;
	int ret = 0;

	if (v->kind != NODE_SCALAR || !v->plain || is_null(v))
		return fail(c, v, "cpus", "must be a whole number, like 2");
	if (parse_cpus(v->str, &cfg->cpus, &why) < 0)
		ret = fail(c, v, "cpus", "%s", why.buf);
	buf_release(&why);
	return ret;
}

/* attempts: how many attempts a task makes by default (parse_attempts()). */
static int check_attempts(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf why = BUF_INIT;
	int ret = 0;

	if (v->kind != NODE_SCALAR || !v->plain || is_null(v))
		return fail(c, v, "attempts", "must be a whole number, like 2");
	if (parse_attempts(v->str, &cfg->attempts, &why) < 0)
		ret = fail(c, v, "attempts", "%s", why.buf);
	buf_release(&why);
	return ret;
}

/* budget: {task: USD, day: USD}; the amount's rules are common/usage's, shared with the options. */
static int check_budget(struct ctx *c, const struct node *v, struct config *cfg)
{
	if (v->kind != NODE_MAP)
		return fail(c, v, "budget",
		            "must be a mapping like {task: 5.00, day: 50.00}, not %s",
		            kind_name(v));
	for (size_t k = 0; k < v->nr; k += 2) {
		const struct node *kn = v->items[k], *vn = v->items[k + 1];
		int task = !strcmp(kn->str, "task");
		char key[16];

		if (!known(kn->str, budget_keys))
			return unknown_key(c, kn, "budget", budget_keys);
		snprintf(key, sizeof(key), "budget.%s", kn->str);
		if (vn->kind != NODE_SCALAR || !vn->plain || is_null(vn) ||
		    usage_parse_usd(vn->str, task ? &cfg->budget_task : &cfg->budget_day) < 0)
			return fail(
			    c, vn, key,
			    "must be an amount of USD above 0 and at most %d, with at most 6 "
			    "decimals, like 5.00",
			    USAGE_CAP_MAX_USD);
	}
	return 0;
}

/*
 * The cache marks of allow's presets (docs/cache.md): a rule {host, cache}
 * for each marked host that has no rule of the config's own.  0, or -EINVAL
 * with err for a kind this aibox does not cache or too many rules.
 */
static int preset_rules(struct config *cfg, struct buf *err)
{
	struct strvec marks = STRVEC_INIT;
	struct buf why = BUF_INIT;
	int ret = 0;

	for (size_t i = 0; i < cfg->allow.nr && !ret; i++) {
		if (strncmp(cfg->allow.v[i], "preset:", 7))
			continue;
		strvec_clear(&marks);
		if (allow_preset_marks(cfg->allow.v[i], presets_dir(), &marks, &why) < 0) {
			buf_addf(err, "allow: %s", why.buf);
			ret = -ENOENT;
			break;
		}
		for (size_t k = 0; k + 1 < marks.nr && !ret; k += 2) {
			const char *host = marks.v[k], *kind = marks.v[k + 1];
			enum config_cache cache = CONFIG_CACHE_NONE;
			struct config_rule *r;
			int own = 0;

			for (enum config_cache c = CONFIG_CACHE_NPM; c <= CONFIG_CACHE_LAST; c++)
				if (!strcmp(kind, config_cache_name(c)))
					cache = c;
			for (size_t j = 0; j < cfg->nr_rules; j++)
				own |= allow_entry_same(cfg->rules[j].host, host);
			if (!cache) {
				buf_addf(
				    err,
				    "allow: %s marks %s with cache:%s, not a kind aibox caches",
				    cfg->allow.v[i], host, kind);
				ret = -EINVAL;
			} else if (!own && cfg->nr_rules == CONFIG_MAX_ALLOW) {
				buf_addf(err, "allow: %s makes more than %d rules", cfg->allow.v[i],
				         CONFIG_MAX_ALLOW);
				ret = -EINVAL;
			} else if (!own) {
				cfg->rules =
				    xrealloc(cfg->rules, (cfg->nr_rules + 1) * sizeof(*cfg->rules));
				r = &cfg->rules[cfg->nr_rules++];
				memset(r, 0, sizeof(*r));
				strvec_init(&r->methods);
				strvec_init(&r->paths);
				r->host = xstrdup(host);
				r->cache = cache;
			}
		}
	}
	strvec_clear(&marks);
	buf_release(&why);
	return ret;
}

int config_host_check(struct config *cfg, struct buf *err)
{
	struct allow_list al = ALLOW_LIST_INIT;
	struct buf why = BUF_INIT;
	struct stat st;
	int ret = 0;

	for (size_t i = 0; i < cfg->nr_mounts && !ret; i++) {
		const char *h = cfg->mounts[i].host;

		if (stat(h, &st) < 0)
			ret = -errno;
		else if (!S_ISDIR(st.st_mode))
			ret = -ENOTDIR;
		else if (access(h, R_OK | X_OK) < 0)
			ret = -errno;
		if (ret)
			buf_addf(err, "mounts[%zu].host: '%s' is not a folder: %s", i, h,
			         strerror(-ret));
	}
	for (size_t i = 0; i < cfg->allow.nr && !ret; i++) {
		if (strncmp(cfg->allow.v[i], "preset:", 7))
			continue;
		if (allow_add(&al, cfg->allow.v[i], presets_dir(), &why) < 0) {
			buf_addf(err, "allow: %s", why.buf);
			ret = -ENOENT;
		}
	}
	allow_clear(&al);
	buf_release(&why);
	return ret ? ret : preset_rules(cfg, err);
}

int config_parse_memory(const char *s, uint64_t *mib, struct buf *err)
{
	return parse_size_mib(s, CONFIG_MIN_MEMORY_MIB, CONFIG_MAX_MEMORY_MIB, mib, err);
}

/* 0 when s is a push pattern (branch_pattern_ok() is the rule), else -EINVAL and why in err. */
static int check_branch_pattern(const char *s, struct buf *err)
{
	if (!*s)
		return buf_refuse(err, -EINVAL, "is empty");
	if (strlen(s) > BRANCH_PATTERN_MAX)
		return buf_refuse(err, -EINVAL, "is too long");
	if (!strncmp(s, "refs/", 5))
		return buf_refuse(err, -EINVAL, "names a branch without refs/heads/");
	if (!strcmp(s, "HEAD") || !strcmp(s, "@"))
		return buf_refuse(err, -EINVAL, "is not a branch name");
	if (!branch_pattern_ok(s))
		return buf_refuse(err, -EINVAL, "is not a branch name or pattern");
	return 0;
}

static int check_git_entry(struct ctx *c, const struct node *e, struct buf *key,
                           struct git_remote *g)
{
	struct git_remote_url u;
	const struct node *url = NULL;
	size_t base = key->len;
	int ret = 0;

	if (e->kind != NODE_MAP)
		return fail(c, e, key->buf,
		            "must be a mapping with url, token, fetch and push, not %s",
		            kind_name(e));
	g->fetch = 1;
	g->auth = GIT_REMOTE_BASIC;
	for (size_t k = 0; !ret && k < e->nr; k += 2) {
		const struct node *kn = e->items[k], *vn = e->items[k + 1];
		struct buf why = BUF_INIT;

		buf_setlen(key, base);
		if (!known(kn->str, git_keys))
			return unknown_key(c, kn, key->buf, git_keys);
		buf_addf(key, ".%s", kn->str);
		if (!strcmp(kn->str, "url")) {
			if ((ret = want_string(c, vn, key->buf)))
				break;
			if (git_remote_url_parse(vn->str, &u, &why) < 0) {
				ret = fail(c, vn, key->buf, "'%.200s' %s", vn->str, why.buf);
				buf_release(&why);
				return ret;
			}
			url = vn;
			/* Scheme and host are case-insensitive: keep one spelling. */
			buf_addf(&why, "https://%s%s", u.hostport, strchr(vn->str + 8, '/'));
			g->url = buf_detach(&why, NULL);
			g->host = u.host;
			u.host = NULL;
			git_remote_url_release(&u);
		} else if (!strcmp(kn->str, "token")) {
			if ((ret = want_string(c, vn, key->buf)))
				break;
			if (!guest_env_name_valid(vn->str))
				return fail(c, vn, key->buf,
				            "names the host variable that holds the token (like "
				            "GITHUB_TOKEN), not the token itself");
			g->token_env = xstrdup(vn->str);
		} else if (!strcmp(kn->str, "auth")) {
			if ((ret = want_string(c, vn, key->buf)))
				break;
			if (!strcmp(vn->str, "basic"))
				g->auth = GIT_REMOTE_BASIC;
			else if (!strcmp(vn->str, "bearer"))
				g->auth = GIT_REMOTE_BEARER;
			else
				return fail(c, vn, key->buf, "must be basic or bearer");
		} else if (!strcmp(kn->str, "user")) {
			if ((ret = want_string(c, vn, key->buf)))
				break;
			if (strlen(vn->str) > 64 ||
			    strspn(vn->str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                    "0123456789._@+-") != strlen(vn->str))
				return fail(c, vn, key->buf,
				            "'%.64s' is not a user name (letters, digits, ._@+-)",
				            vn->str);
			g->user = xstrdup(vn->str);
		} else if (!strcmp(kn->str, "fetch")) {
			ret = want_bool(c, vn, key->buf, &g->fetch);
		} else {
			size_t nr = 0;

			if ((ret = want_list(c, vn, key->buf, CONFIG_MAX_PUSH, "[aibox/*]", &nr)))
				break;
			for (size_t i = 0; i < nr; i++) {
				const struct node *p = vn->items[i];
				size_t pbase = key->len;

				buf_addf(key, "[%zu]", i);
				if ((ret = want_string(c, p, key->buf)))
					return ret;
				if (check_branch_pattern(p->str, &why) < 0) {
					ret = fail(c, p, key->buf, "'%.64s' %s", p->str, why.buf);
					buf_release(&why);
					return ret;
				}
				strvec_push(&g->push, p->str);
				buf_setlen(key, pbase);
			}
		}
	}
	buf_setlen(key, base);
	if (ret)
		return ret;
	if (!url)
		return fail(c, e, key->buf, "needs a url");
	if (!g->user && g->auth == GIT_REMOTE_BASIC)
		g->user = xstrdup("x-access-token");
	if (g->user && g->auth == GIT_REMOTE_BEARER)
		return fail(c, e, key->buf, "user goes with auth: basic only");
	return 0;
}

static int check_git(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct buf key = BUF_INIT;
	size_t nr = 0;
	int ret = want_list(c, v, "git", CONFIG_MAX_GIT,
	                    "[{url: https://github.com/you/repo.git, token: GITHUB_TOKEN}]", &nr);

	if (!ret && nr)
		cfg->git = xcalloc(nr, sizeof(*cfg->git));
	for (size_t i = 0; !ret && i < nr; i++) {
		struct git_remote *g = &cfg->git[i];

		buf_reset(&key);
		buf_addf(&key, "git[%zu]", i);
		strvec_init(&g->push);
		cfg->nr_git++;
		if ((ret = check_git_entry(c, v->items[i], &key, g)))
			break;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(cfg->git[j].url, g->url)) {
				ret =
				    fail(c, v->items[i], key.buf, "the url is also in git[%zu]", j);
				break;
			}
	}
	buf_release(&key);
	return ret;
}

/* A partition or account name: Slurm's own are short words without spaces or commas. */
static int slurm_word(struct ctx *c, const struct node *v, const char *key, char **out)
{
	int ret = want_string(c, v, key);

	if (ret)
		return ret;
	if (!*v->str || strlen(v->str) > 64 ||
	    strspn(v->str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
	        strlen(v->str))
		return fail(c, v, key, "'%.64s' is not a Slurm name (letters, digits, ._-)",
		            v->str);
	*out = xstrdup(v->str);
	return 0;
}

/* slurm: {partition, account, options, shared} (docs/config.md, "slurm"). */
static int check_slurm(struct ctx *c, const struct node *v, struct config *cfg)
{
	struct config_slurm *s = &cfg->slurm;
	struct buf key = BUF_INIT;
	int ret = 0;

	if (is_null(v))
		return 0;
	if (v->kind != NODE_MAP)
		return fail(c, v, "slurm", "must be a mapping, like {partition: agents}, not %s",
		            kind_name(v));
	for (size_t k = 0; !ret && k < v->nr; k += 2) {
		const struct node *kn = v->items[k], *vn = v->items[k + 1];
		size_t nr = 0;

		if (!known(kn->str, slurm_keys))
			return unknown_key(c, kn, "slurm", slurm_keys);
		buf_reset(&key);
		buf_addf(&key, "slurm.%s", kn->str);
		if (!strcmp(kn->str, "partition")) {
			ret = slurm_word(c, vn, key.buf, &s->partition);
			continue;
		}
		if (!strcmp(kn->str, "account")) {
			ret = slurm_word(c, vn, key.buf, &s->account);
			continue;
		}
		if ((ret = want_list(c, vn, key.buf, CONFIG_MAX_SLURM_OPTIONS,
		                     !strcmp(kn->str, "options") ? "[--qos=low]" : "[/shared/home]",
		                     &nr)))
			break;
		for (size_t i = 0; !ret && i < nr; i++) {
			const struct node *e = vn->items[i];
			size_t base = key.len;

			buf_addf(&key, "[%zu]", i);
			if ((ret = want_string(c, e, key.buf)))
				break;
			if (has_ctl(e->str))
				ret = fail(c, e, key.buf, "has a control character");
			else if (!strcmp(kn->str, "options") && e->str[0] != '-')
				ret =
				    fail(c, e, key.buf,
				         "'%.64s' is not an option (srun and sbatch options start "
				         "with -)",
				         e->str);
			else if (!strcmp(kn->str, "shared") && e->str[0] != '/')
				ret =
				    fail(c, e, key.buf, "'%.200s' is not an absolute path", e->str);
			else
				strvec_push(!strcmp(kn->str, "options") ? &s->options : &s->shared,
				            e->str);
			buf_setlen(&key, base);
		}
	}
	buf_release(&key);
	return ret;
}

/* Each list entry's line (config_lines), once the keys are checked: one entry a node. */
static void record_lines(struct config *cfg, const struct node *const *val)
{
	static const struct {
		int key;
		size_t off, max;
	} lists[] = {
	    {0, offsetof(struct config_lines, allow), CONFIG_MAX_ALLOW},
	    {6, offsetof(struct config_lines, env), CONFIG_MAX_ENV},
	    {1, offsetof(struct config_lines, mounts), CONFIG_MAX_MOUNTS},
	    {7, offsetof(struct config_lines, git), CONFIG_MAX_GIT},
	};

	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		const struct node *v = val[lists[l].key];
		size_t *lines = (size_t *)((char *)&cfg->lines + lists[l].off);

		for (size_t i = 0; v && v->kind == NODE_SEQ && i < v->nr && i < lists[l].max; i++)
			lines[i] = v->items[i]->line;
	}
	for (size_t k = 0; val[11] && val[11]->kind == NODE_MAP && k < val[11]->nr; k += 2)
		*(strcmp(val[11]->items[k]->str, "task") ? &cfg->lines.budget_day
		                                         : &cfg->lines.budget_task) =
		    val[11]->items[k + 1]->line;
}

size_t config_key_line(const struct config_lines *l, unsigned set_bit)
{
	if (!set_bit || set_bit & (set_bit - 1) ||
	    (unsigned)__builtin_ctz(set_bit) >= ARRAY_SIZE(l->key))
		BUG("config_key_line: 0x%x is not one CONFIG_SET_* bit", set_bit);
	return l->key[__builtin_ctz(set_bit)];
}

/* Keys whose meaning depends on another key are checked after all of them. */
static int check_root(struct ctx *c, const struct node *root, struct config *cfg)
{
	const struct node *val[ARRAY_SIZE(top_keys)] = {0};
	int ret = 0;

	if (!root || is_null(root))
		return 0;
	if (root->kind != NODE_MAP)
		return fail(c, root, NULL,
		            "the config must be a mapping of keys, like 'allow:', not %s",
		            kind_name(root));
	for (size_t k = 0; k < root->nr; k += 2) {
		const struct node *kn = root->items[k];
		int i;

		for (i = 0; top_keys[i] && strcmp(kn->str, top_keys[i]); i++)
			;
		if (!top_keys[i])
			return unknown_key(c, kn, NULL, top_keys);
		val[i] = root->items[k + 1];
		cfg->set |= 1u << i;
		cfg->lines.key[i] = kn->line;
	}
	/* Indices follow top_keys. */
	if (!ret && val[5])
		ret = check_path(c, val[5], cfg);
	if (!ret && val[0])
		ret = check_allow(c, val[0], cfg);
	if (!ret && val[1])
		ret = check_mounts(c, val[1], cfg, val[5]);
	if (!ret && val[2])
		ret = check_claude(c, val[2], "skills", &cfg->skills);
	if (!ret && val[3])
		ret = check_claude(c, val[3], "agents", &cfg->agents);
	if (!ret && val[4])
		ret = check_claude(c, val[4], "commands", &cfg->commands);
	if (!ret && val[6])
		ret = check_env(c, val[6], cfg);
	if (!ret && val[7])
		ret = check_git(c, val[7], cfg);
	if (!ret && val[8])
		ret = check_size(c, val[8], "memory", CONFIG_MIN_MEMORY_MIB, CONFIG_MAX_MEMORY_MIB,
		                 &cfg->memory_mib);
	if (!ret && val[9])
		ret = check_cpus(c, val[9], cfg);
	if (!ret && val[10])
		ret = check_size(c, val[10], "disk", CONFIG_MIN_DISK_MIB, CONFIG_MAX_DISK_MIB,
		                 &cfg->disk_mib);
	if (!ret && val[11])
		ret = check_budget(c, val[11], cfg);
	if (!ret && val[12])
		ret = check_slurm(c, val[12], cfg);
	if (!ret && val[13])
		ret = check_secrets(c, val[13], cfg);
	if (!ret && val[14])
		ret = check_attempts(c, val[14], cfg);
	if (!ret && val[15])
		ret = check_check(c, val[15], cfg);
	if (!ret)
		record_lines(cfg, val);
	/* A token the broker holds must not also be handed to the VM. */
	for (size_t i = 0; !ret && i < cfg->nr_git; i++) {
		const char *t = cfg->git[i].token_env;

		for (size_t j = 0; t && j < cfg->env.nr; j++)
			if (!strcmp(cfg->env.v[j], t)) {
				ret = fail(
				    c, val[6]->items[j], "env",
				    "%s is the token of git[%zu]: listed in env it would enter "
				    "the VM, which git keeps it out of",
				    t, i);
				break;
			}
	}
	return ret;
}

void config_init(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	strvec_init(&cfg->allow);
	strvec_init(&cfg->env);
	strvec_init(&cfg->slurm.options);
	strvec_init(&cfg->slurm.shared);
	cfg->path = xstrdup(CONFIG_DEFAULT_PATH);
	cfg->memory_mib = CONFIG_DEFAULT_MEMORY_MIB;
	cfg->cpus = host_cpus() < CONFIG_DEFAULT_CPUS ? host_cpus() : CONFIG_DEFAULT_CPUS;
	cfg->disk_mib = CONFIG_DEFAULT_DISK_MIB;
	cfg->attempts = 1;
}

static void claude_release(struct config_claude *cc)
{
	free(cc->path);
	cc->path = NULL;
}

void config_release(struct config *cfg)
{
	strvec_clear(&cfg->allow);
	strvec_clear(&cfg->env);
	for (size_t i = 0; i < cfg->nr_rules; i++) {
		free(cfg->rules[i].host);
		free(cfg->rules[i].sumdb_key);
		free(cfg->rules[i].prefix);
		strvec_clear(&cfg->rules[i].methods);
		strvec_clear(&cfg->rules[i].paths);
	}
	free(cfg->rules);
	cfg->rules = NULL;
	cfg->nr_rules = 0;
	for (size_t i = 0; i < cfg->nr_secrets; i++) {
		free(cfg->secrets[i].env);
		strvec_clear(&cfg->secrets[i].hosts);
	}
	free(cfg->secrets);
	cfg->secrets = NULL;
	cfg->nr_secrets = 0;
	for (size_t i = 0; i < cfg->nr_mounts; i++) {
		free(cfg->mounts[i].host);
		free(cfg->mounts[i].vm);
	}
	free(cfg->mounts);
	for (size_t i = 0; i < cfg->nr_git; i++) {
		free(cfg->git[i].url);
		free(cfg->git[i].host);
		free(cfg->git[i].token_env);
		free(cfg->git[i].user);
		strvec_clear(&cfg->git[i].push);
	}
	free(cfg->git);
	claude_release(&cfg->skills);
	claude_release(&cfg->agents);
	claude_release(&cfg->commands);
	free(cfg->path);
	free(cfg->check);
	free(cfg->slurm.partition);
	free(cfg->slurm.account);
	strvec_clear(&cfg->slurm.options);
	strvec_clear(&cfg->slurm.shared);
	memset(cfg, 0, sizeof(*cfg));
	strvec_init(&cfg->allow);
	strvec_init(&cfg->env);
	strvec_init(&cfg->slurm.options);
	strvec_init(&cfg->slurm.shared);
}

/*
 * Take extra's keys out of root (a mapping) into extra (config_parse_extra()).
 * 0 or -EINVAL.
 */
static int take_extra(struct ctx *c, struct node *root, struct config_extra *extra, size_t nr)
{
	for (size_t e = 0; e < nr; e++) {
		struct config_extra *x = &extra[e];

		for (size_t k = 0; root && root->kind == NODE_MAP && k < root->nr; k += 2) {
			struct node *kn = root->items[k], *vn = root->items[k + 1];

			if (strcmp(kn->str, x->key))
				continue;
			x->line = kn->line;
			if (vn->kind == NODE_SCALAR && !is_null(vn)) {
				strvec_push(&x->values, vn->str);
				x->lines[0] = vn->line;
			} else if (vn->kind == NODE_SEQ || is_null(vn)) {
				x->is_list = 1;
				if (vn->nr > CONFIG_EXTRA_MAX)
					return fail(c, vn, x->key, "more than %d entries",
					            CONFIG_EXTRA_MAX);
				for (size_t i = 0; i < vn->nr; i++) {
					if (vn->items[i]->kind != NODE_SCALAR ||
					    is_null(vn->items[i]))
						return fail(c, vn->items[i], x->key,
						            "entries must be strings, not %s",
						            kind_name(vn->items[i]));
					strvec_push(&x->values, vn->items[i]->str);
					x->lines[i] = vn->items[i]->line;
				}
			} else {
				return fail(c, vn, x->key, "must be a string or a list, not %s",
				            kind_name(vn));
			}
			node_free(kn);
			node_free(vn);
			memmove(root->items + k, root->items + k + 2,
			        (root->nr - k - 2) * sizeof(*root->items));
			root->nr -= 2;
			break;
		}
	}
	return 0;
}

int config_parse(struct config *cfg, const char *name, const char *data, size_t len,
                 struct buf *err)
{
	return config_parse_extra(cfg, name, data, len, NULL, 0, err);
}

int config_parse_extra(struct config *cfg, const char *name, const char *data, size_t len,
                       struct config_extra *extra, size_t nr, struct buf *err)
{
	struct ctx c = {.name = name, .err = err};
	struct node *root = NULL;
	int ret;

	config_init(cfg);
	if (len > CONFIG_MAX_BYTES) {
		buf_addf(err, "%s:1:1: the file is larger than %d KiB", name,
		         CONFIG_MAX_BYTES / 1024);
		return -EINVAL;
	}
	ret = check_text(&c, (const unsigned char *)data, len);
	if (!ret)
		ret = build_tree(&c, data, len, &root);
	if (!ret && nr)
		ret = take_extra(&c, root, extra, nr);
	if (!ret)
		ret = check_root(&c, root, cfg);
	node_free(root);
	return ret;
}

int config_load(struct config *cfg, const char *path, struct buf *err)
{
	struct buf data = BUF_INIT;
	struct stat st;
	ssize_t n;
	int fd, ret;

	config_init(cfg);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ret = S_ISREG(st.st_mode) ? -errno : -EINVAL;
		buf_addf(err, "cannot read '%s': %s", path,
		         ret == -EINVAL ? "not a regular file" : strerror(-ret));
		close(fd);
		return ret;
	}
	n = buf_read_fd(&data, fd, CONFIG_MAX_BYTES);
	close(fd);
	if (n == -EFBIG) {
		buf_addf(err, "%s:1:1: the file is larger than %d KiB", path,
		         CONFIG_MAX_BYTES / 1024);
		buf_release(&data);
		return -EINVAL;
	}
	if (n < 0) {
		buf_addf(err, "cannot read '%s': %s", path, strerror((int)-n));
		buf_release(&data);
		return (int)n;
	}
	config_release(cfg);
	ret = config_parse(cfg, path, data.buf, data.len, err);
	buf_release(&data);
	return ret;
}

int config_git_push_allowed(const struct git_remote *g, const char *branch)
{
	for (size_t i = 0; i < g->push.nr; i++)
		if (branch_pattern_match(g->push.v[i], branch))
			return 1;
	return 0;
}
