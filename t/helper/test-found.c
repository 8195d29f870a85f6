/*
 * test-found: the foundation's internals, for t/1*.bats.
 *
 *   test-found duration S                 ms and Go form, or "error <reason>"
 *   test-found task-id                    a new id
 *   test-found task-name EPOCH ID         the folder name (TZ applies)
 *   test-found task-parse NAME            "EPOCH ID", or "invalid"
 *   test-found task-lock-name NAME        the folder of a lock name, or "invalid"
 *   test-found task-create TASKS_DIR      start a task: print its name, exit (lock freed)
 *   test-found task-check TASKS_DIR NAME  running, ended, or error
 *   test-found config FILE                the parsed config, or the refusal (exit 1)
 *   test-found config-host FILE           the same after config_host_check() (the
 *                                         presets' cache marks made rules)
 *   test-found config-default             the default config's text
 *   test-found push-allowed PATTERN BRANCH
 *   test-found project-name PATH          the base name of a checkout's project
 *   test-found checkout DIR               the work tree holding DIR
 *   test-found project-lock DIR MODE      MODE sh|ex|sh-nb|ex-nb: "locked" or the error
 *   test-found rmtree DIR NAME            remove DIR/NAME: "removed N entries" or the error
 *   test-found bytes N                    format_bytes
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/duration.h"
#include "base/err.h"
#include "config/project.h"
#include "base/rmtree.h"
#include "base/taskid.h"
#include "base/banned.h"

static const char *claude_kind(const struct config_claude *c)
{
	return c->kind == CONFIG_CLAUDE_NONE   ? "none"
	       : c->kind == CONFIG_CLAUDE_PATH ? c->path
	                                       : "default";
}

/* The parsed config FILE, after config_host_check() when host; or the refusal (1). */
static int show_config(const char *file, int host)
{
	struct config cfg;
	struct buf err = BUF_INIT;

	if (config_load(&cfg, file, &err) < 0 || (host && config_host_check(&cfg, &err) < 0)) {
		printf("%s\n", err.buf);
		config_release(&cfg);
		buf_release(&err);
		return 1;
	}
	for (size_t i = 0; i < cfg.allow.nr; i++)
		printf("allow %s\n", cfg.allow.v[i]);
	for (size_t i = 0; i < cfg.nr_mounts; i++)
		printf("mount %s %s\n", cfg.mounts[i].host, cfg.mounts[i].vm);
	printf("skills %s\nagents %s\ncommands %s\n", claude_kind(&cfg.skills),
	       claude_kind(&cfg.agents), claude_kind(&cfg.commands));
	printf("path %s\n", cfg.path);
	for (size_t i = 0; i < cfg.env.nr; i++)
		printf("env %s\n", cfg.env.v[i]);
	for (size_t i = 0; i < cfg.nr_rules; i++) {
		const struct config_rule *r = &cfg.rules[i];

		printf("rule %s line=%zu methods=", r->host, r->line);
		for (size_t j = 0; j < r->methods.nr; j++)
			printf("%s%s", j ? "," : "", r->methods.v[j]);
		printf(" paths=");
		for (size_t j = 0; j < r->paths.nr; j++)
			printf("%s%s", j ? "," : "", r->paths.v[j]);
		if (r->cache)
			printf(" cache=%s", config_cache_name(r->cache));
		if (r->sumdb_key)
			printf(" sumdb-key=%s", r->sumdb_key);
		if (r->prefix)
			printf(" prefix=%s", r->prefix);
		printf("\n");
	}
	for (size_t i = 0; i < cfg.nr_secrets; i++) {
		const struct config_secret *sc = &cfg.secrets[i];

		printf("secret %s line=%zu hosts=", sc->env, sc->line);
		for (size_t j = 0; j < sc->hosts.nr; j++)
			printf("%s%s", j ? "," : "", sc->hosts.v[j]);
		printf("\n");
	}
	for (size_t i = 0; i < cfg.nr_git; i++) {
		const struct git_remote *g = &cfg.git[i];

		printf("git %s host=%s token=%s auth=%s user=%s fetch=%d push=", g->url, g->host,
		       g->token_env ? g->token_env : "-",
		       g->auth == GIT_REMOTE_BEARER ? "bearer" : "basic", g->user ? g->user : "-",
		       g->fetch);
		for (size_t j = 0; j < g->push.nr; j++)
			printf("%s%s", j ? "," : "", g->push.v[j]);
		printf("\n");
	}
	if (cfg.set & CONFIG_SET_BUDGET)
		printf("budget task=%" PRIu64 " day=%" PRIu64 "\n", cfg.budget_task,
		       cfg.budget_day);
	if (cfg.set & CONFIG_SET_SLURM) {
		printf("slurm partition=%s account=%s options=",
		       cfg.slurm.partition ? cfg.slurm.partition : "-",
		       cfg.slurm.account ? cfg.slurm.account : "-");
		for (size_t j = 0; j < cfg.slurm.options.nr; j++)
			printf("%s%s", j ? "," : "", cfg.slurm.options.v[j]);
		printf(" shared=");
		for (size_t j = 0; j < cfg.slurm.shared.nr; j++)
			printf("%s%s", j ? "," : "", cfg.slurm.shared.v[j]);
		printf("\n");
	}
	if (cfg.check)
		printf("check %s\ncheck_timeout_ms %lld\n", cfg.check,
		       (long long)cfg.check_timeout_ms);
	printf("memory %" PRIu64 "\ncpus %d\ndisk %" PRIu64 "\nset 0x%03x\n", cfg.memory_mib,
	       cfg.cpus, cfg.disk_mib, cfg.set);
	config_release(&cfg);
	buf_release(&err);
	return 0;
}

static int lock_mode(const char *s)
{
	if (!strcmp(s, "sh"))
		return PROJECT_LOCK_SHARED;
	if (!strcmp(s, "ex"))
		return PROJECT_LOCK_EXCLUSIVE;
	if (!strcmp(s, "sh-nb"))
		return PROJECT_LOCK_SHARED | PROJECT_LOCK_NONBLOCK;
	if (!strcmp(s, "ex-nb"))
		return PROJECT_LOCK_EXCLUSIVE | PROJECT_LOCK_NONBLOCK;
	die("unknown lock mode '%s'", s);
}

static int cmd_duration(char **args)
{
	struct buf why = BUF_INIT, out = BUF_INIT;
	int64_t ms;
	int ret = duration_parse(args[0], &ms, &why);

	if (ret < 0) {
		printf("error %s (%s)\n", why.buf, ret == -ERANGE ? "ERANGE" : "EINVAL");
		buf_release(&why);
		return 1;
	}
	duration_format(&out, ms);
	printf("%" PRId64 " %s\n", ms, out.buf);
	buf_release(&out);
	return 0;
}

static int cmd_task_id(char **args)
{
	char id[TASK_ID_LEN + 1];

	(void)args;
	if (task_id_new(id) < 0)
		die("no id");
	printf("%s\n", id);
	return 0;
}

static int cmd_task_name(char **args)
{
	char name[TASK_NAME_LEN + 1];
	int ret = task_name_make(name, (time_t)atoll(args[0]), args[1]);

	if (ret < 0) {
		printf("error %s\n", strerror(-ret));
		return 1;
	}
	printf("%s\n", name);
	return 0;
}

static int cmd_task_parse(char **args)
{
	char id[TASK_ID_LEN + 1];
	time_t t;

	if (task_name_parse(args[0], &t, id) < 0) {
		printf("invalid\n");
		return 1;
	}
	printf("%lld %s\n", (long long)t, id);
	return 0;
}

static int cmd_task_lock_name(char **args)
{
	char folder[TASK_NAME_LEN + 1];

	if (!task_lock_name_parse(args[0], folder)) {
		printf("invalid\n");
		return 1;
	}
	printf("%s\n", folder);
	return 0;
}

static int cmd_task_create(char **args)
{
	char name[TASK_NAME_LEN + 1];
	int fd, ret = task_create(args[0], time(NULL), name, &fd);

	if (ret < 0)
		die_err(ret, "cannot create a task in '%s'", args[0]);
	printf("%s\n", name);
	return 0;
}

static int cmd_task_check(char **args)
{
	int dfd = open(args[0], O_RDONLY | O_DIRECTORY), fd, ret;

	if (dfd < 0)
		die_errno("cannot open '%s'", args[0]);
	ret = task_check(dfd, args[1], &fd);
	if (ret < 0)
		printf("error %s\n", strerror(-ret));
	else
		printf("%s%s\n", ret ? "running" : "ended", fd >= 0 ? " (locked)" : "");
	return ret < 0;
}

static int cmd_config(char **args)
{
	return show_config(args[0], 0);
}

static int cmd_config_host(char **args)
{
	return show_config(args[0], 1);
}

static int cmd_config_default(char **args)
{
	(void)args;
	fputs(config_default_text, stdout);
	return 0;
}

static int cmd_push_allowed(char **args)
{
	struct git_remote g = {0};
	int m;

	strvec_push(&g.push, args[0]);
	m = config_git_push_allowed(&g, args[1]);
	strvec_clear(&g.push);

	printf("%s\n", m ? "match" : "no match");
	return !m;
}

static int cmd_project_name(char **args)
{
	struct buf name = BUF_INIT;

	project_name_base(args[0], &name);
	printf("%s %s\n", name.buf, project_name_valid(name.buf) ? "valid" : "INVALID");
	buf_release(&name);
	return 0;
}

static int cmd_checkout(char **args)
{
	struct buf out = BUF_INIT;
	int ret = project_checkout(args[0], &out);

	if (ret < 0) {
		printf("error %s\n", strerror(-ret));
		buf_release(&out);
		return 1;
	}
	printf("%s\n", out.buf);
	buf_release(&out);
	return 0;
}

static int cmd_project_lock(char **args)
{
	int ret = project_lock(args[0], lock_mode(args[1]));

	if (ret < 0) {
		printf("error %s\n", strerror(-ret));
		return 1;
	}
	printf("locked\n");
	return 0;
}

static int cmd_rmtree(char **args)
{
	struct rmtree_stats st = {0};
	struct buf where = BUF_INIT;
	int dfd = open(args[0], O_RDONLY | O_DIRECTORY), ret;

	if (dfd < 0)
		die_errno("cannot open '%s'", args[0]);
	ret = rmtree_at(dfd, args[1], &st, &where);
	if (ret < 0) {
		printf("error %s: %s\n", where.buf, strerror(-ret));
		buf_release(&where);
		return 1;
	}
	printf("removed %zu entries\n", st.entries);
	return 0;
}

static int cmd_bytes(char **args)
{
	struct buf out = BUF_INIT;

	format_bytes(&out, strtoull(args[0], NULL, 10));
	printf("%s\n", out.buf);
	buf_release(&out);
	return 0;
}

/* The commands and how many arguments each takes (-1: any). */
static const struct {
	const char *name;
	int nargs;
	int (*fn)(char **args);
} commands[] = {
    {"duration", 1, cmd_duration},
    {"task-id", -1, cmd_task_id},
    {"task-name", 2, cmd_task_name},
    {"task-parse", 1, cmd_task_parse},
    {"task-lock-name", 1, cmd_task_lock_name},
    {"task-create", 1, cmd_task_create},
    {"task-check", 2, cmd_task_check},
    {"config", 1, cmd_config},
    {"config-host", 1, cmd_config_host},
    {"config-default", -1, cmd_config_default},
    {"push-allowed", 2, cmd_push_allowed},
    {"project-name", 1, cmd_project_name},
    {"checkout", 1, cmd_checkout},
    {"project-lock", 2, cmd_project_lock},
    {"rmtree", 2, cmd_rmtree},
    {"bytes", 1, cmd_bytes},
};

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-found <command> [args]");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name) &&
		    (commands[i].nargs < 0 || commands[i].nargs == argc - 2))
			return commands[i].fn(argv + 2);
	die("unknown command or wrong arguments: '%s'", argv[1]);
}
