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
#include "buf.h"
#include "err.h"
#include "gitconfig.h"
#include "run.h"
#include "strvec.h"
#include "task.h"
#include "banned.h"

#define RUN_SETTINGS_MAX (1024 * 1024)
#define RUN_ENV_MAX (1024 * 1024)
#define RUN_ENV_NAMES_MAX 128
#define GUEST_PATH_VALUE "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define API_FORWARD_URL "http://127.0.0.1:3129"
#define API_PLACEHOLDER_KEY "sk-ant-aibox-placeholder-the-host-adds-the-key"
#define MOUNT_9P_RW "trans=virtio,version=9p2000.L,msize=524288,access=client,cache=none"

struct run_settings {
	json_t *root;
	uid_t uid;
	gid_t gid;
	const char *path;
	const char *api;
	const char *proxy;
	json_t *command; /* array of strings, or NULL */
};

static int settings_load(struct run_settings *s)
{
	struct buf b = BUF_INIT;
	json_error_t jerr;
	json_t *v;
	ssize_t n;
	json_int_t id;

	memset(s, 0, sizeof(*s));
	s->uid = GUEST_USER_UID;
	s->gid = GUEST_USER_GID;
	s->path = "/project";
	s->api = "none";
	if ((n = buf_read_file(&b, GUEST_TASK_DIR "/settings.json", RUN_SETTINGS_MAX)) < 0) {
		error("cannot read settings.json: %s", strerror((int)-n));
		buf_release(&b);
		return (int)n;
	}
	s->root = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &jerr);
	buf_release(&b);
	if (!json_is_object(s->root)) {
		error("settings.json: %s", jerr.text);
		return -EINVAL;
	}
	/* The host user's ids; 0 (root) makes the VM's user root (run.h). */
	v = json_object_get(s->root, "uid");
	if (json_is_integer(v) && (id = json_integer_value(v)) >= 0 && id < 65535)
		s->uid = (uid_t)id;
	v = json_object_get(s->root, "gid");
	if (json_is_integer(v) && (id = json_integer_value(v)) >= 0 && id < 65535)
		s->gid = (gid_t)id;
	v = json_object_get(s->root, "path");
	if (json_is_string(v) && json_string_value(v)[0] == '/')
		s->path = json_string_value(v);
	v = json_object_get(s->root, "api");
	if (json_is_string(v))
		s->api = json_string_value(v);
	v = json_object_get(s->root, "proxy");
	if (json_is_string(v))
		s->proxy = json_string_value(v);
	v = json_object_get(s->root, "command");
	if (json_is_array(v) && json_array_size(v) > 0) {
		size_t i;
		json_t *a;

		json_array_foreach(v, i, a)
			if (!json_is_string(a)) {
				error("settings.json: command[%zu] is not a string", i);
				return -EINVAL;
			}
		s->command = v;
	}
	return 0;
}

/* Replace the line of the user (or group) aibox in file with `line`. */
static int set_id_line(const char *file, const char *line)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	const char *p, *end;
	ssize_t n;
	int r;

	if ((n = buf_read_file(&in, file, 1024 * 1024)) < 0) {
		error("cannot read %s: %s", file, strerror((int)-n));
		return (int)n;
	}
	for (p = in.buf; p < in.buf + in.len; p = end) {
		end = memchr(p, '\n', (size_t)(in.buf + in.len - p));
		end = end ? end + 1 : in.buf + in.len;
		if (!strncmp(p, "aibox:", 6))
			buf_addf(&out, "%s\n", line);
		else
			buf_add(&out, p, (size_t)(end - p));
	}
	if ((r = buf_write_file(&out, file, 0644)) < 0)
		error("cannot write %s: %s", file, strerror(-r));
	buf_release(&in);
	buf_release(&out);
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

int run_setup(struct guest_settings *gs)
{
	struct run_settings s;
	char line[128];
	int r;

	if ((r = settings_load(&s)) < 0)
		goto out;
	/* For the prompt of a shell in the VM (nothing else sets it). */
	if (sethostname("aibox", 5) < 0)
		error("cannot set the host name: %s", strerror(errno));
	/* Root stays root: the user aibox keeps its ids then. */
	snprintf(line, sizeof(line), "aibox:x:%u:%u::" GUEST_HOME ":/bin/bash", (unsigned)s.uid,
		 (unsigned)s.gid);
	if (s.uid != 0 && (r = set_id_line("/etc/passwd", line)) < 0)
		goto out;
	snprintf(line, sizeof(line), "aibox:x:%u:", (unsigned)s.gid);
	if (s.uid != 0 && s.gid != 0 && (r = set_id_line("/etc/group", line)) < 0)
		goto out;
	if ((r = mount_rw(TAG_PROJECT, s.path)) < 0 || (r = mount_rw(TAG_HOME, GUEST_HOME)) < 0)
		goto out;
	gs->user_uid = s.uid;
	gs->user_gid = s.gid;
	{
		/* The git: remotes go through the proxy to the broker (docs/broker.md). */
		struct buf why = BUF_INIT;

		r = git_remotes_write("/etc/gitconfig", json_object_get(s.root, "git_remotes"),
				      s.proxy ? s.proxy : "http://10.0.2.100:3128", &why);
		if (r < 0)
			error("%s", why.buf);
		buf_release(&why);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	json_decref(s.root);
	return r;
}

static int env_has(const struct strvec *env, const char *name, size_t n)
{
	for (size_t i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return 1;
	return 0;
}

static int valid_env_name(const char *s)
{
	if (!*s || strlen(s) > 128 || (*s >= '0' && *s <= '9'))
		return 0;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return 0;
	return 1;
}

static int build_env(const struct run_settings *s, struct strvec *env)
{
	const char *term = getenv("TERM"), *secrets = getenv(RUN_ENV_VAR);
	json_t *obj, *v;
	const char *name;
	int ret = 0;

	strvec_push(env, "PATH=" GUEST_PATH_VALUE);
	if (s->uid == 0)
		/* The VM is the sandbox Claude Code asks for before it runs as root. */
		strvec_pushl(env, "HOME=" GUEST_HOME, "USER=root", "LOGNAME=root", "IS_SANDBOX=1",
		             NULL);
	else
		strvec_pushl(env, "HOME=" GUEST_HOME, "USER=aibox", "LOGNAME=aibox", NULL);
	strvec_pushl(env, "SHELL=/bin/bash", "LANG=C.UTF-8", NULL);
	strvec_pushf(env, "TERM=%s", term && *term && strlen(term) < 64 ? term : "dumb");
	if (s->proxy) {
		strvec_pushf(env, "HTTP_PROXY=%s", s->proxy);
		strvec_pushf(env, "HTTPS_PROXY=%s", s->proxy);
		strvec_pushf(env, "http_proxy=%s", s->proxy);
		strvec_pushf(env, "https_proxy=%s", s->proxy);
	}
	if (!strcmp(s->api, "forward"))
		strvec_pushl(env, "ANTHROPIC_BASE_URL=" API_FORWARD_URL,
			     "ANTHROPIC_API_KEY=" API_PLACEHOLDER_KEY, NULL);
	if (!secrets || !*secrets)
		return 0;
	if (strlen(secrets) > RUN_ENV_MAX) {
		error("%s is too long", RUN_ENV_VAR);
		return -E2BIG;
	}
	obj = json_loads(secrets, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(obj) || json_object_size(obj) > RUN_ENV_NAMES_MAX) {
		error("%s is not a JSON object of at most %d strings", RUN_ENV_VAR,
		      RUN_ENV_NAMES_MAX);
		ret = -EINVAL;
		goto out;
	}
	json_object_foreach(obj, name, v) {
		if (!json_is_string(v) || !valid_env_name(name) ||
		    memchr(json_string_value(v), '\0', json_string_length(v))) {
			error("%s: bad entry '%.64s'", RUN_ENV_VAR, name);
			ret = -EINVAL;
			goto out;
		}
		/* What we set ourselves wins; NO_PROXY would bypass the key forward. */
		if (env_has(env, name, strlen(name)) || !strcasecmp(name, "NO_PROXY"))
			continue;
		strvec_pushf(env, "%s=%s", name, json_string_value(v));
	}
out:
	if (obj)
		json_object_foreach(obj, name, v)
			if (json_is_string(v))
				explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(obj);
	return ret;
}

int run_session(void)
{
	static const int job_signals[] = { SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGHUP };
	struct run_settings s;
	struct strvec env = STRVEC_INIT, argv = STRVEC_INIT;
	int status, ret = 2, e;
	pid_t pid;

	if (settings_load(&s) < 0 || build_env(&s, &env) < 0)
		goto out;
	if (s.command) {
		size_t i;
		json_t *a;

		json_array_foreach(s.command, i, a)
			strvec_push(&argv, json_string_value(a));
	} else {
		strvec_push(&argv, "claude");
	}
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
			fprintf(stderr, "aibox-init: cannot take the terminal: %s\n", strerror(errno));
		for (size_t i = 0; i < sizeof(job_signals) / sizeof(job_signals[0]); i++)
			signal(job_signals[i], SIG_DFL);
		if (setgroups(0, NULL) < 0 || setgid(s.gid) < 0 || setuid(s.uid) < 0) {
			fprintf(stderr, "aibox-init: cannot become the user: %s\n", strerror(errno));
			_exit(127);
		}
		if (chdir(s.path) < 0) {
			fprintf(stderr, "aibox-init: cannot enter '%s': %s\n", s.path, strerror(errno));
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
	for (size_t i = 0; i < env.nr; i++)
		explicit_bzero((char *)env.v[i], strlen(env.v[i]));
	strvec_clear(&env);
	strvec_clear(&argv);
	json_decref(s.root);
	return ret;
}
