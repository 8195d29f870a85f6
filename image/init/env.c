/*
 * Task mode's environments: the secrets read from stdin, kept only in memory
 * for Claude Code, and what git and Claude Code run with (task_int.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "secret.h"
#include "task_int.h"
#include "banned.h"

static int env_name_allowed(struct task *t, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(t->env_names, i, v) if (!strcmp(json_string_value(v), name)) return 1;
	return 0;
}

/* Read all of fd, at most max bytes, giving up after ms.  0 or -errno. */
static int read_fd_timed(int fd, struct buf *b, size_t max, int ms)
{
	int64_t until = clock_ms() + ms;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int64_t left = until - clock_ms();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pf, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			continue;
		buf_grow(b, 65536);
		n = read(fd, b->buf + b->len, 65536);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return 0;
		if (b->len + (size_t)n > max) {
			explicit_bzero(b->buf, b->len + (size_t)n);
			return -EFBIG;
		}
		buf_setlen(b, b->len + (size_t)n);
	}
}

int secrets_read(struct task *t, struct buf *why)
{
	struct buf b = BUF_INIT;
	json_t *s = NULL, *env, *v;
	json_error_t jerr;
	const char *name;
	int ret = -1, err;

	/* Room for all of it at once: growing would leave copies in freed memory. */
	buf_grow(&b, SECRETS_MAX + 65536);
	err = read_fd_timed(t->o->in, &b, SECRETS_MAX, SECRETS_WAIT_MS);
	if (err < 0) {
		buf_addf(why, "cannot read the secrets from stdin: %s", strerror(-err));
		goto out;
	}
	if (!b.len) {
		ret = 0; /* no secrets at all */
		goto out;
	}
	s = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &jerr);
	env = s ? json_object_get(s, "env") : NULL;
	if (!json_is_object(s) || !json_is_object(env) || json_object_size(s) != 1) {
		buf_addstr(why, "the secrets on stdin are not {\"env\": {...}}");
		goto out;
	}
	json_object_foreach(env, name, v)
	{
		if (!guest_env_name_valid(name) || !env_name_allowed(t, name)) {
			buf_addf(why, "secret '%s' is not in env_names", name);
			goto out;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			buf_addf(why, "secret '%s' is not a string", name);
			goto out;
		}
		strvec_pushf(&t->secrets, "%s=%s", name, json_string_value(v));
	}
	ret = 0;
out:
	if (s) {
		/* jansson's copies: overwrite the values before they are freed. */
		secret_json_wipe(json_object_get(s, "env"));
		json_decref(s);
	}
	buf_wipe_release(&b);
	return ret;
}

void secrets_clear(struct task *t)
{
	strvec_wipe_clear(&t->secrets);
}

char *find_in_path(const char *name)
{
	const char *path = GUEST_PATH;
	struct buf b = BUF_INIT;

	while (*path) {
		const char *end = strchrnul(path, ':');

		buf_reset(&b);
		buf_add(&b, path, (size_t)(end - path));
		buf_addf(&b, "/%s", name);
		if (access(b.buf, X_OK) == 0)
			return buf_detach(&b, NULL);
		path = *end ? end + 1 : end;
	}
	buf_release(&b);
	return NULL;
}

void base_env(struct task *t, struct strvec *env)
{
	strvec_pushf(env, "PATH=%s", GUEST_PATH);
	strvec_pushf(env, "HOME=%s", t->o->home);
	strvec_pushl(env, "USER=" GUEST_USER, "LOGNAME=" GUEST_USER, "SHELL=/bin/bash",
	             "LANG=C.UTF-8", "TERM=dumb", NULL);
}

static int env_has(const struct strvec *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return 1;
	return 0;
}

void claude_env(struct task *t, struct strvec *env)
{
	base_env(t, env);
	strvec_pushl(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	             "CLAUDE_CODE_MAX_RETRIES=" CLAUDE_MAX_RETRIES, "DISABLE_AUTOUPDATER=1", NULL);
	if (t->proxy) {
		strvec_pushf(env, "HTTP_PROXY=%s", t->proxy);
		strvec_pushf(env, "HTTPS_PROXY=%s", t->proxy);
		strvec_pushf(env, "http_proxy=%s", t->proxy);
		strvec_pushf(env, "https_proxy=%s", t->proxy);
	}
	if (!strcmp(t->api, "forward"))
		strvec_pushl(env, "ANTHROPIC_BASE_URL=" API_FORWARD_URL,
		             "ANTHROPIC_API_KEY=" API_PLACEHOLDER_KEY, NULL);
	/* The config's env, except what we set ourselves (NO_PROXY would bypass the forward). */
	for (size_t i = 0; i < t->secrets.nr; i++) {
		const char *s = t->secrets.v[i];
		char name[130];
		size_t n = strcspn(s, "=");

		if (n >= sizeof(name))
			continue;
		memcpy(name, s, n);
		name[n] = '\0';
		if (env_has(env, name) || !strcasecmp(name, "NO_PROXY"))
			continue;
		strvec_push(env, s);
	}
}
