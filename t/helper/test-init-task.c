/*
 * Runs aibox-init's task mode outside a VM, for t/4500-init-task.bats.
 *
 * The paths the guest has fixed come from the environment, which only this
 * test helper reads (aibox-init itself has no such switch):
 *   AIBOX_TEST_TASK_SHARE   the task folder (settings.json, prompt.txt, start.bundle)
 *   AIBOX_TEST_TASK_STATE   where aibox-results/ is made
 *   AIBOX_TEST_TASK_HOME    the user's home
 *   AIBOX_TEST_TASK_CLAUDE  the program run as Claude Code (t/fake-claude)
 *   AIBOX_TEST_TASK_GIT_LIMIT_MS  the git steps' time limit (default 10 minutes)
 *   AIBOX_TEST_TASK_GITCONFIG  where the git_remotes rewrite goes (default: not written)
 *   AIBOX_TEST_TASK_CA_BUNDLE  the bundle the task CA is added to (default: not used)
 *   AIBOX_TEST_TASK_EARLY  the early clone's folder (none yet): the early clone is
 *                          started first, as PID 1 starts it (default: none)
 *   AIBOX_TEST_TASK_GO_SECRETS  where the go message's secrets are, as a restored
 *                          VM's init leaves them (default: none)
 * The steps run as the calling user, in process groups instead of cgroups
 * (a test user cannot make cgroups here; see image/init/step.h).
 *
 * `test-init-task step PROGRAM [ARG...]` runs PROGRAM as the pack beside git
 * status runs (step_start(), then step_finish(), image/init/step.h) and prints
 * "started" when step_start() returns, then "exit N" or "error: MESSAGE".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/num.h"
#include "task.h"
#include "base/banned.h"

static const char *need(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v)
		die("%s is not set", name);
	return v;
}

static int step_main(char **argv)
{
	extern char **environ;
	struct step_proc p = {
	    .argv = (const char *const *)argv, .envp = (const char *const *)environ, .in = -1};
	struct step_group g;
	struct step_job j;
	struct step_result r;
	int ret;

	if (step_group_create(&g, STEP_PGROUP, "test") < 0)
		die("cannot make a process group");
	ret = step_start(&p, &g, clock_ms() + 60000, &j);
	if (ret < 0)
		die("step_start: %s", strerror(-ret));
	printf("started\n");
	fflush(stdout);
	ret = step_finish(&j, &r);
	if (ret < 0)
		printf("error: %s\n", strerror(-ret));
	else
		printf("exit %d\n", r.code);
	step_group_destroy(&g);
	return 0;
}

int main(int argc, char **argv)
{
	struct guest_task_opts o;
	const char *limit;
	long ms;
	int ret;

	tool_init(argc, argv);
	if (argc > 2 && !strcmp(argv[1], "step"))
		return step_main(argv + 2);
	guest_task_opts_fill(&o);
	o.share = need("AIBOX_TEST_TASK_SHARE");
	o.state = need("AIBOX_TEST_TASK_STATE");
	o.home = need("AIBOX_TEST_TASK_HOME");
	o.claude = need("AIBOX_TEST_TASK_CLAUDE");
	/* Not the host's /etc/gitconfig: a file of the test's, or none. */
	o.gitconfig = getenv("AIBOX_TEST_TASK_GITCONFIG");
	o.ca_bundle = getenv("AIBOX_TEST_TASK_CA_BUNDLE");
	o.backend = STEP_PGROUP;
	o.drop = 0;
	limit = getenv("AIBOX_TEST_TASK_GIT_LIMIT_MS");
	if (limit) {
		if (parse_long(limit, 1, 3600000, &ms) < 0)
			die("bad AIBOX_TEST_TASK_GIT_LIMIT_MS '%s'", limit);
		o.git_limit_ms = ms;
	}
	o.early = getenv("AIBOX_TEST_TASK_EARLY");
	o.go_secrets = getenv("AIBOX_TEST_TASK_GO_SECRETS");
	/* As PID 1 and then the session do (docs/init-task.md, "The early task"). */
	task_early_start(&o);
	/* The session coming later, as the host's SSH set-up makes it. */
	limit = getenv("AIBOX_TEST_TASK_ATTACH_MS");
	if (limit) {
		if (parse_long(limit, 0, 60000, &ms) < 0)
			die("bad AIBOX_TEST_TASK_ATTACH_MS '%s'", limit);
		sleep_ms(ms);
	}
	if ((ret = task_early_attach(&o)) >= 0)
		return ret;
	return task_run(&o);
}
