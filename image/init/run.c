#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "base/buf.h"
#include "base/err.h"
#include "gitconfig.h"
#include "guest_ca.h"
#include "base/guest_env.h"
#include "run.h"
#include "base/guest_secrets.h"
#include "base/secret.h"
#include "base/strvec.h"
#include "task.h"
#include "task/task_settings.h"
#include "base/banned.h"

#define MOUNT_9P_RW "trans=virtio,version=9p2000.L,msize=524288,access=client,cache=none"

/* settings.json in run mode, through the one parser (common/task/task_settings.h). */
static int settings_load(struct task_settings_doc *d)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	ssize_t n;
	int r = -EINVAL;

	memset(d, 0, sizeof(*d));
	n = buf_read_file(&b, GUEST_TASK_DIR "/" GUEST_FILE_SETTINGS, GUEST_SETTINGS_MAX);
	if (n < 0) {
		error("cannot read " GUEST_FILE_SETTINGS ": %s", strerror((int)-n));
		r = (int)n;
	} else if (task_settings_parse(b.buf, b.len, d, &why) < 0) {
		error("%s", why.buf);
	} else if (d->s.mode != TASK_MODE_RUN) {
		error("settings.json: \"mode\" is not 'run'");
		task_settings_doc_release(d);
	} else {
		r = 0;
	}
	buf_release(&b);
	buf_release(&why);
	return r;
}

static int mount_rw(const char *tag, const char *target)
{
	if (mkdir(target, 0755) < 0 && errno != EEXIST) {
		error("cannot make '%s': %s", target, strerror(errno));
		return -errno;
	}
	if (mount(tag, target, "9p", MS_NOSUID | MS_NODEV, MOUNT_9P_RW) < 0) {
		int e = errno;

		error("cannot mount %s on '%s': %s", tag, target, strerror(e));
		return -e;
	}
	return 0;
}

/* The run folder's task CA, if any, into GUEST_CA_BUNDLE (guest_ca.h). */
static int run_ca_add(struct buf *why)
{
	struct buf pem = BUF_INIT;
	int r = guest_ca_read(GUEST_TASK_DIR, &pem, why);

	if (r > 0)
		r = guest_ca_install(GUEST_CA_BUNDLE, &pem, why);
	buf_release(&pem);
	return r < 0 ? r : 0;
}

int run_setup(struct guest_settings *gs)
{
	struct task_settings_doc d;
	const struct task_settings *s = &d.s;
	char line[128];
	int r;

	if ((r = settings_load(&d)) < 0)
		return r;
	/* For the prompt of a shell in the VM (nothing else sets it). */
	if (sethostname("aibox", 5) < 0)
		error("cannot set the host name: %s", strerror(errno));
	/* Root stays root: the user aibox keeps its ids then. */
	snprintf(line, sizeof(line), "aibox:x:%u:%u::" GUEST_HOME ":/bin/bash", (unsigned)s->uid,
	         (unsigned)s->gid);
	if (s->uid != 0 && (r = id_line_set("/etc/passwd", "aibox", line)) < 0)
		goto out;
	snprintf(line, sizeof(line), "aibox:x:%u:", (unsigned)s->gid);
	if (s->uid != 0 && s->gid != 0 && (r = id_line_set("/etc/group", "aibox", line)) < 0)
		goto out;
	if ((r = mount_rw(GUEST_TAG_PROJECT, s->path)) < 0 ||
	    (r = mount_rw(GUEST_TAG_HOME, GUEST_HOME)) < 0)
		goto out;
	gs->user_uid = (uid_t)s->uid;
	gs->user_gid = (gid_t)s->gid;
	{
		/* The git: remotes go through the proxy to the broker (docs/broker.md). */
		struct buf why = BUF_INIT;

		r = git_remotes_write("/etc/gitconfig", s->git_remotes, s->ngit_remotes,
		                      s->proxy ? s->proxy : GUEST_PROXY_URL, &why);
		/* The task CA, when the proxy intercepts (docs/proxy.md). */
		if (r >= 0)
			r = run_ca_add(&why);
		if (r < 0)
			error("%s", why.buf);
		buf_release(&why);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	task_settings_doc_release(&d);
	return r;
}

/*
 * The session's environment: guest_env_build() with the config's env values
 * of RUN_ENV_VAR (guest_secrets_read(): the one framing of the run mode's
 * secrets).  0, or a negative errno after error().
 */
static int build_env(const struct task_settings *s, struct strvec *env)
{
	const char *secrets = getenv(RUN_ENV_VAR);
	struct guest_env g = {0};
	struct strvec vals = STRVEC_INIT;
	struct buf err = BUF_INIT;
	int ret = 0;

	g.path = GUEST_PATH;
	g.home = GUEST_HOME;
	g.user = s->uid == 0 ? "root" : "aibox";
	/* The VM is the sandbox Claude Code asks for before it runs as root. */
	g.sandbox = s->uid == 0;
	/* for Claude Code, the default command, or a claude the command runs */
	g.claude = 1;
	g.term = getenv("TERM");
	g.proxy = s->proxy;
	g.api_forward = s->api == TASK_API_FORWARD;
	g.api_oauth = s->api == TASK_API_OAUTH;
	{
		/* PID 1 put it in the bundle (run_setup()) or stopped the boot. */
		struct buf pem = BUF_INIT;
		int r = guest_ca_read(GUEST_TASK_DIR, &pem, &err);

		buf_release(&pem);
		if (r < 0) {
			error("%s", err.buf);
			ret = r;
			goto out;
		}
		g.task_ca = r > 0;
	}
	if (secrets &&
	    guest_secrets_read(secrets, strlen(secrets), GUEST_SECRETS_ENV_VAR, &vals, &err) < 0) {
		error("%s", err.buf);
		ret = -EINVAL;
		goto out;
	}
	g.vars = (const char *const *)vals.v;
	g.nvars = vals.nr;
	g.ph_names = s->ph_names;
	g.ph_values = s->ph_values;
	g.nph = s->nph;
	guest_env_build(&g, env);
out:
	strvec_wipe_clear(&vals);
	buf_release(&err);
	return ret;
}

int run_session(void)
{
	static const int job_signals[] = {SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGHUP};
	struct task_settings_doc d;
	const struct task_settings *s = &d.s;
	struct strvec env = STRVEC_INIT, argv = STRVEC_INIT;
	int status, ret = 2, e;
	pid_t pid;

	if (settings_load(&d) < 0)
		return ret;
	if (build_env(s, &env) < 0)
		goto out;
	for (size_t i = 0; i < s->ncommand; i++)
		strvec_push(&argv, s->command[i]);
	if (!argv.nr)
		strvec_push(&argv, "claude");
	unsetenv(RUN_ENV_VAR);

	/*
	 * We act as a minimal job-control shell with one job.  The program
	 * gets a process group of its own, in the terminal's foreground, so
	 * the terminal's signals (Ctrl-C, Ctrl-Z) reach it and not us.  A
	 * shell run as the program makes groups for its jobs in turn: Ctrl-Z
	 * stops the shell's job and the shell takes the terminal back.
	 *
	 * A program run directly has no shell to bring it back, so when it
	 * stops (Ctrl-Z, or a program such as Claude Code that stops itself
	 * on Ctrl-Z) we continue its group at once: the session never hangs
	 * on a stopped program, and a program that waits for its SIGCONT
	 * gets it.  The group must not be orphaned for that: in an orphaned
	 * group (the program in ours, whose only outside parent, sshd, is in
	 * another session) the kernel drops SIGTSTP, and a program that
	 * stopped itself that way would wait for a SIGCONT forever.
	 */
	for (size_t i = 0; i < sizeof(job_signals) / sizeof(job_signals[0]); i++)
		signal(job_signals[i], SIG_IGN);
	pid = fork();
	if (pid < 0) {
		error("cannot fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* Before SIGTTOU is back to its default: we are not in the foreground yet. */
		setpgid(0, 0);
		if (isatty(0) && tcsetpgrp(0, getpid()) < 0)
			fprintf(stderr, "aibox-init: cannot take the terminal: %s\n",
			        strerror(errno));
		for (size_t i = 0; i < sizeof(job_signals) / sizeof(job_signals[0]); i++)
			signal(job_signals[i], SIG_DFL);
		if (setgroups(0, NULL) < 0 || setgid((gid_t)s->gid) < 0 ||
		    setuid((uid_t)s->uid) < 0) {
			fprintf(stderr, "aibox-init: cannot become the user: %s\n",
			        strerror(errno));
			_exit(127);
		}
		if (chdir(s->path) < 0) {
			fprintf(stderr, "aibox-init: cannot enter '%s': %s\n", s->path,
			        strerror(errno));
			_exit(127);
		}
		clearenv();
		for (size_t i = 0; i < env.nr; i++)
			putenv((char *)env.v[i]);
		execvp(argv.v[0], (char *const *)argv.v);
		e = errno;
		fprintf(stderr, "aibox-init: cannot run '%s': %s\n", argv.v[0], strerror(e));
		/* As a shell says it: 127 not found, 126 found but not runnable. */
		_exit(e == ENOENT ? 127 : 126);
	}
	setpgid(pid, pid); /* also here: no race with the child's own call */
	for (;;) {
		if (waitpid(pid, &status, WUNTRACED) < 0) {
			if (errno == EINTR)
				continue;
			error("cannot wait: %s", strerror(errno));
			goto out;
		}
		if (!WIFSTOPPED(status))
			break;
		killpg(pid, SIGCONT);
	}
	ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
	strvec_wipe_clear(&env);
	strvec_clear(&argv);
	task_settings_doc_release(&d);
	return ret;
}
