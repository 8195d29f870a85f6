/*
 * Task mode's environments: the secrets read from stdin, kept only in memory
 * for Claude Code, and what git and Claude Code run with (task_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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

/*
 * The go message's secrets (o->go_secrets, removed once read) into b: 1, 0
 * when there are none, or -errno.
 */
static int go_secrets_take(const struct guest_task_opts *o, struct buf *b)
{
	struct stat st;
	int fd, r;

	if (!o->go_secrets)
		return 0;
	fd = open(o->go_secrets, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	unlink(o->go_secrets);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = -EINVAL;
	} else {
		/* Room for all of it at once: growing would leave copies in freed memory. */
		buf_grow(b, GUEST_SECRETS_MAX + 65536);
		r = read_fd_timed(fd, b, GUEST_SECRETS_MAX, SECRETS_WAIT_MS);
	}
	close(fd);
	return r < 0 ? r : 1;
}

/*
 * The secrets' text b (framing f: from stdin or the go message) into out,
 * each name one of env_names.  0, or -1 with err set.
 */
static int secrets_parse(struct guest_task *t, const struct buf *b, enum guest_secrets_framing f,
                         struct strvec *out, struct buf *err)
{
	if (guest_secrets_read(b->buf, b->len, f, out, err) < 0)
		return -1;
	for (size_t i = 0; i < out->nr; i++) {
		const char *s = out->v[i];
		char name[GUEST_ENV_NAME_MAX + 1];
		size_t n = strcspn(s, "=");

		memcpy(name, s, n); /* guest_secrets_read() checked it: a valid name */
		name[n] = '\0';
		if (!env_name_allowed(t, name)) {
			buf_addf(err, "secret '%s' is not in env_names", name);
			strvec_wipe_clear(out);
			return -1;
		}
	}
	return 0;
}

/* The secrets on t->o->in into out (secrets_read()'s rules).  0, or -1 with err set. */
static int stdin_secrets(struct guest_task *t, struct strvec *out, struct buf *err)
{
	struct buf b = BUF_INIT;
	int ret = -1, r;

	/* Room for all of it at once: growing would leave copies in freed memory. */
	buf_grow(&b, GUEST_SECRETS_MAX + 65536);
	r = read_fd_timed(t->o->in, &b, GUEST_SECRETS_MAX, SECRETS_WAIT_MS);
	if (r < 0)
		buf_addf(err, "cannot read the secrets from stdin: %s", strerror(-r));
	else
		ret = secrets_parse(t, &b, GUEST_SECRETS_STDIN, out, err);
	buf_wipe_release(&b);
	return ret;
}

int secrets_read(struct guest_task *t, struct buf *err)
{
	struct buf b = BUF_INIT;
	struct strvec more = STRVEC_INIT;
	int ret = -1, go;

	go = go_secrets_take(t->o, &b);
	if (go < 0) {
		buf_addf(err, "cannot read the secrets of the go message: %s", strerror(-go));
		goto out;
	}
	if (!go && !t->o->early_task) {
		ret = stdin_secrets(t, &t->secrets, err);
		goto out;
	}
	if (!go && json_array_size(t->env_names)) {
		buf_addstr(err, "settings.json names secrets and the go message carried none");
		goto out;
	}
	if (go && secrets_parse(t, &b, GUEST_SECRETS_GO, &t->secrets, err) < 0)
		goto out;
	t->secrets_go = go;
	if (t->o->early_task) {
		/* The session's stdin has none: read once Claude Code has ended. */
		t->secrets_later = 1;
	} else if (stdin_secrets(t, &more, err) < 0 || more.nr) {
		if (more.nr)
			buf_addstr(err, "the secrets came both with the go message and on stdin");
		strvec_wipe_clear(&more);
		secrets_clear(t);
		goto out;
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
	const char *because =
	    t->secrets_go ? "the go message carried them" : "settings.json names none";
	struct strvec more = STRVEC_INIT;
	struct buf why = BUF_INIT;

	t->secrets_later = 0;
	if (stdin_secrets(t, &more, &why) < 0)
		progress(t, "%s (nothing of them was used: %s)", why.buf, because);
	else if (more.nr)
		progress(t, "the session sent secrets too (nothing of them was used: %s)", because);
	strvec_wipe_clear(&more);
	secrets_clear(t);
	buf_release(&why);
}
