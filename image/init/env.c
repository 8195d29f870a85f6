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

#include "base/clock.h"
#include "base/err.h"
#include "base/guest_env.h"
#include "base/guest_secrets.h"
#include "base/secret.h"
#include "task_int.h"
#include "base/banned.h"

static int env_name_allowed(struct guest_task *t, const char *name)
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

int secrets_read(struct guest_task *t, struct buf *err)
{
	struct buf b = BUF_INIT;
	int ret = -1, r;

	/* Room for all of it at once: growing would leave copies in freed memory. */
	buf_grow(&b, GUEST_SECRETS_MAX + 65536);
	r = read_fd_timed(t->o->in, &b, GUEST_SECRETS_MAX, SECRETS_WAIT_MS);
	if (r < 0) {
		buf_addf(err, "cannot read the secrets from stdin: %s", strerror(-r));
		goto out;
	}
	if (guest_secrets_read(b.buf, b.len, GUEST_SECRETS_STDIN, &t->secrets, err) < 0)
		goto out;
	for (size_t i = 0; i < t->secrets.nr; i++) {
		const char *s = t->secrets.v[i];
		char name[GUEST_ENV_NAME_MAX + 1];
		size_t n = strcspn(s, "=");

		memcpy(name, s, n); /* guest_secrets_read() checked it: a valid name */
		name[n] = '\0';
		if (!env_name_allowed(t, name)) {
			buf_addf(err, "secret '%s' is not in env_names", name);
			strvec_wipe_clear(&t->secrets);
			goto out;
		}
	}
	ret = 0;
out:
	buf_wipe_release(&b);
	return ret;
}

void secrets_clear(struct guest_task *t)
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

void base_env(struct guest_task *t, struct strvec *env, const struct guest_env *more)
{
	struct guest_env g = {0};

	if (more)
		g = *more;
	g.path = GUEST_PATH;
	g.home = t->o->home;
	g.user = GUEST_USER;
	guest_env_build(&g, env);
}

void claude_env(struct guest_task *t, struct strvec *env)
{
	struct guest_env g = {0};

	g.claude = 1;
	g.claude_retries = 1;
	g.proxy = t->proxy;
	g.api_forward = !strcmp(t->api, "forward");
	g.api_oauth = !strcmp(t->api, "oauth");
	g.task_ca = t->task_ca;
	g.vars = (const char *const *)t->secrets.v;
	g.nvars = t->secrets.nr;
	g.ph_names = t->ph_names;
	g.ph_values = t->ph_values;
	g.nph = t->nph;
	base_env(t, env, &g);
}

void secrets_take_later(struct guest_task *t)
{
	struct buf why = BUF_INIT;

	t->secrets_later = 0;
	if (secrets_read(t, &why) < 0)
		progress(t, "%s (nothing of them was used: settings.json names none)", why.buf);
	secrets_clear(t);
	buf_release(&why);
}
