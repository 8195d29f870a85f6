/*
 * aibox-policy: the administrator's policy in force (docs/config.md, "The
 * administrator's policy"; common/task/policy.h).
 *
 *	aibox policy [--json] [PROJECT]
 *
 * Without PROJECT, what the policy bounds, key by key, with its lines; with
 * PROJECT (a name as `aibox projects list` gives it), also what the
 * project's config is allowed once the policy holds it, or the refusal a
 * task of it would get.  Exit 0; 1 when PROJECT's config asks beyond the
 * policy; 2 for a usage error, a policy refused, a config that cannot be
 * read.  See docs/man/aibox-policy.1.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/num.h"
#include "base/opt.h"
#include "task/policy.h"
#include "config/project.h"
#include "base/strvec.h"
#include "config/usage.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox policy [--json] [PROJECT]\n"
    "\n"
    "Show the administrator's policy in force (" POLICY_PATH "), what it bounds\n"
    "and where; with PROJECT, also what the project's config may do under it.\n"
    "\n"
    "    --json       as JSON on stdout\n"
    "    -h, --help   show this help\n"
    "\n"
    "Exit 0; 1: PROJECT's config asks beyond the policy (the refusal is shown);\n"
    "2: usage error, a policy that is refused, a config that cannot be read.\n";

static json_t *strings(const struct strvec *v)
{
	json_t *a = json_array();

	for (size_t i = 0; i < v->nr; i++)
		json_array_append_new(a, json_string(v->v[i]));
	return a;
}

/* A size or an amount as its text: format (format_size_mib(), usage_format_usd()) of v. */
static json_t *text_json(void (*format)(struct buf *, uint64_t), uint64_t v)
{
	struct buf b = BUF_INIT;
	json_t *s;

	format(&b, v);
	s = json_string(b.buf);
	buf_release(&b);
	return s;
}

static json_t *git_json(const struct config *c)
{
	json_t *a = json_array();

	for (size_t i = 0; i < c->nr_git; i++) {
		json_t *o = json_object();

		json_object_set_new(o, "url", json_string(c->git[i].url));
		json_object_set_new(o, "token",
		                    c->git[i].token_env ? json_string(c->git[i].token_env)
		                                        : json_null());
		json_object_set_new(o, "fetch", json_boolean(c->git[i].fetch));
		json_object_set_new(o, "push", strings(&c->git[i].push));
		json_array_append_new(a, o);
	}
	return a;
}

/* The keys of c that all (a project's config) or set (the policy's) has. */
static void config_keys(json_t *o, const struct config *c, unsigned set)
{
	if (set & CONFIG_SET_ALLOW)
		json_object_set_new(o, "allow", strings(&c->allow));
	if (set & CONFIG_SET_ENV)
		json_object_set_new(o, "env", strings(&c->env));
	if (set & CONFIG_SET_GIT)
		json_object_set_new(o, "git", git_json(c));
	if (set & CONFIG_SET_MEMORY)
		json_object_set_new(o, "memory", text_json(format_size_mib, c->memory_mib));
	if (set & CONFIG_SET_CPUS)
		json_object_set_new(o, "cpus", json_integer(c->cpus));
	if (set & CONFIG_SET_DISK)
		json_object_set_new(o, "disk", text_json(format_size_mib, c->disk_mib));
	if ((set & CONFIG_SET_BUDGET) && c->budget_task)
		json_object_set_new(o, "budget.task", text_json(usage_format_usd, c->budget_task));
	if ((set & CONFIG_SET_BUDGET) && c->budget_day)
		json_object_set_new(o, "budget.day", text_json(usage_format_usd, c->budget_day));
}

static json_t *policy_json(const struct policy *p)
{
	json_t *o = json_object(), *b = json_object();

	json_object_set_new(o, "path", p->path ? json_string(p->path) : json_null());
	if (!p->path)
		return json_decref(b), o;
	config_keys(b, &p->cfg, p->cfg.set);
	if (p->mounts_line)
		json_object_set_new(b, "mounts", strings(&p->mounts));
	if (p->images_line)
		json_object_set_new(b, "images", strings(&p->images));
	if (p->timeout_line) {
		struct buf t = BUF_INIT;

		duration_format(&t, p->timeout_ms);
		json_object_set_new(b, "timeout", json_string(t.buf));
		buf_release(&t);
	}
	json_object_set_new(b, "push", json_boolean(p->push));
	json_object_set_new(b, "run", json_boolean(p->run));
	json_object_set_new(o, "bounds", b);
	return o;
}

static json_t *project_json(const struct project *pr, const char *cfg_path, struct config *cfg,
                            const char *refusal)
{
	json_t *o = json_object(), *e = json_object();
	json_t *mounts = json_array();

	json_object_set_new(o, "name", json_string(pr->name));
	json_object_set_new(o, "config", json_string(cfg_path));
	json_object_set_new(o, "within", json_boolean(!refusal));
	json_object_set_new(o, "refusal", refusal ? json_string(refusal) : json_null());
	if (refusal) {
		json_decref(e);
		json_decref(mounts);
		return o;
	}
	config_keys(e, cfg, ~0u);
	for (size_t i = 0; i < cfg->nr_mounts; i++)
		json_array_append_new(mounts, json_string(cfg->mounts[i].host));
	json_object_set_new(e, "mounts", mounts);
	json_object_set_new(o, "allowed", e);
	return o;
}

/* "key: value" lines: strings as they are, the rest as compact JSON. */
static void print_text(json_t *o, const char *indent)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v)
	{
		char *text;

		if (json_is_string(v)) {
			printf("%s%s: %s\n", indent, key, json_string_value(v));
			continue;
		}
		text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
		if (!text)
			die("cannot write JSON");
		printf("%s%s: %s\n", indent, key, text);
		free(text);
	}
}

int main(int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"json", 0, OPT_FLAG, NULL, 'j', "as JSON on stdout"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct policy p;
	struct buf err = BUF_INIT, cfg_path = BUF_INIT;
	struct strvec words = STRVEC_INIT;
	struct project pr = PROJECT_INIT;
	struct config cfg;
	json_t *out, *proj = NULL;
	const char *refusal = NULL;
	unsigned flags = 0;
	int ret;

	tool_init(argc, argv);
	opt_words_exit(argc, argv, options, 1, &flags, &words, usage_text);
	policy_init(&p);
	config_init(&cfg);
	if (policy_load(&p, &err) < 0)
		die("%s", err.buf);
	if (words.nr) {
		if (!project_name_valid(words.v[0]) || project_by_name(words.v[0], &pr) < 0)
			die("no project '%s' (aibox projects list names them)", words.v[0]);
		buf_addf(&cfg_path, "%s/config.yaml", pr.dir);
		config_release(&cfg);
		if (config_load(&cfg, cfg_path.buf, &err) < 0)
			die("%s", err.buf);
		if (policy_check(&p, &cfg, cfg_path.buf, NULL, &err) < 0)
			refusal = err.buf;
		proj = project_json(&pr, cfg_path.buf, &cfg, refusal);
	}
	out = policy_json(&p);
	if (proj)
		json_object_set_new(out, "project", proj);
	if (flags & 1) {
		char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		if (!text)
			die("cannot write JSON");
		puts(text);
		free(text);
	} else {
		json_t *b = json_object_get(out, "bounds");

		if (!p.path)
			printf("No policy: %s does not exist, and nothing is bounded.\n",
			       POLICY_PATH);
		else
			printf("The policy in force, %s, bounds:\n", p.path);
		if (b)
			print_text(b, "  ");
		if (proj && refusal) {
			printf("\nProject %s: its config asks beyond the policy:\n  %s\n", pr.name,
			       refusal);
		} else if (proj) {
			printf("\nProject %s (%s) may use, under the policy:\n", pr.name,
			       cfg_path.buf);
			print_text(json_object_get(proj, "allowed"), "  ");
		}
	}
	json_decref(out);
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write to stdout");
	ret = refusal ? EXIT_REFUSED : 0;
	policy_release(&p);
	config_release(&cfg);
	project_release(&pr);
	strvec_clear(&words);
	buf_release(&err);
	buf_release(&cfg_path);
	return ret;
}
