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

#include "buf.h"
#include "config.h"
#include "duration.h"
#include "err.h"
#include "project.h"
#include "rmtree.h"
#include "taskid.h"
#include "banned.h"

static const char *claude_kind(const struct config_claude *c)
{
	return c->kind == CONFIG_CLAUDE_NONE   ? "none"
	       : c->kind == CONFIG_CLAUDE_PATH ? c->path
	                                       : "default";
}

static int cmd_config(const char *file)
{
	struct config cfg;
	struct buf err = BUF_INIT;

	if (config_load(&cfg, file, &err) < 0) {
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
	for (size_t i = 0; i < cfg.nr_git; i++) {
		const struct config_git *g = &cfg.git[i];

		printf("git %s host=%s token=%s auth=%s user=%s fetch=%d push=", g->url, g->host,
		       g->token_env ? g->token_env : "-",
		       g->auth == CONFIG_GIT_BEARER ? "bearer" : "basic", g->user ? g->user : "-",
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

int main(int argc, char **argv)
{
	const char *cmd;

	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-found <command> [args]");
	cmd = argv[1];
	if (!strcmp(cmd, "duration") && argc == 3) {
		struct buf why = BUF_INIT, out = BUF_INIT;
		int64_t ms;
		int ret = duration_parse(argv[2], &ms, &why);

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
	if (!strcmp(cmd, "task-id")) {
		char id[TASK_ID_LEN + 1];

		if (task_id_new(id) < 0)
			die("no id");
		printf("%s\n", id);
		return 0;
	}
	if (!strcmp(cmd, "task-name") && argc == 4) {
		char name[TASK_NAME_LEN + 1];
		int ret = task_name_make(name, (time_t)atoll(argv[2]), argv[3]);

		if (ret < 0) {
			printf("error %s\n", strerror(-ret));
			return 1;
		}
		printf("%s\n", name);
		return 0;
	}
	if (!strcmp(cmd, "task-parse") && argc == 3) {
		char id[TASK_ID_LEN + 1];
		time_t t;

		if (task_name_parse(argv[2], &t, id) < 0) {
			printf("invalid\n");
			return 1;
		}
		printf("%lld %s\n", (long long)t, id);
		return 0;
	}
	if (!strcmp(cmd, "task-lock-name") && argc == 3) {
		char folder[TASK_NAME_LEN + 1];

		if (!task_lock_name_parse(argv[2], folder)) {
			printf("invalid\n");
			return 1;
		}
		printf("%s\n", folder);
		return 0;
	}
	if (!strcmp(cmd, "task-create") && argc == 3) {
		char name[TASK_NAME_LEN + 1];
		int fd, ret = task_create(argv[2], time(NULL), name, &fd);

		if (ret < 0)
			die_err(ret, "cannot create a task in '%s'", argv[2]);
		printf("%s\n", name);
		return 0;
	}
	if (!strcmp(cmd, "task-check") && argc == 4) {
		int dfd = open(argv[2], O_RDONLY | O_DIRECTORY), fd, ret;

		if (dfd < 0)
			die_errno("cannot open '%s'", argv[2]);
		ret = task_check(dfd, argv[3], &fd);
		if (ret < 0)
			printf("error %s\n", strerror(-ret));
		else
			printf("%s%s\n", ret ? "running" : "ended", fd >= 0 ? " (locked)" : "");
		return ret < 0;
	}
	if (!strcmp(cmd, "config") && argc == 3)
		return cmd_config(argv[2]);
	if (!strcmp(cmd, "config-default")) {
		fputs(config_default_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "push-allowed") && argc == 4) {
		struct config_git g = { 0 };
		int m;

		strvec_push(&g.push, argv[2]);
		m = config_git_push_allowed(&g, argv[3]);
		strvec_clear(&g.push);

		printf("%s\n", m ? "match" : "no match");
		return !m;
	}
	if (!strcmp(cmd, "project-name") && argc == 3) {
		struct buf name = BUF_INIT;

		project_name_base(argv[2], &name);
		printf("%s %s\n", name.buf, project_name_valid(name.buf) ? "valid" : "INVALID");
		buf_release(&name);
		return 0;
	}
	if (!strcmp(cmd, "checkout") && argc == 3) {
		struct buf out = BUF_INIT;
		int ret = project_checkout(argv[2], &out);

		if (ret < 0) {
			printf("error %s\n", strerror(-ret));
			buf_release(&out);
			return 1;
		}
		printf("%s\n", out.buf);
		buf_release(&out);
		return 0;
	}
	if (!strcmp(cmd, "project-lock") && argc == 4) {
		int ret = project_lock(argv[2], lock_mode(argv[3]));

		if (ret < 0) {
			printf("error %s\n", strerror(-ret));
			return 1;
		}
		printf("locked\n");
		return 0;
	}
	if (!strcmp(cmd, "rmtree") && argc == 4) {
		struct rmtree_stats st = {0};
		struct buf where = BUF_INIT;
		int dfd = open(argv[2], O_RDONLY | O_DIRECTORY), ret;

		if (dfd < 0)
			die_errno("cannot open '%s'", argv[2]);
		ret = rmtree_at(dfd, argv[3], &st, &where);
		if (ret < 0) {
			printf("error %s: %s\n", where.buf, strerror(-ret));
			buf_release(&where);
			return 1;
		}
		printf("removed %zu entries\n", st.entries);
		return 0;
	}
	if (!strcmp(cmd, "bytes") && argc == 3) {
		struct buf out = BUF_INIT;

		format_bytes(&out, strtoull(argv[2], NULL, 10));
		printf("%s\n", out.buf);
		buf_release(&out);
		return 0;
	}
	die("unknown command or wrong arguments: '%s'", cmd);
}
