#include "task/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "vm/image.h"
#include "base/num.h"
#include "base/paths.h"
#include "config/project.h"
#include "config/usage.h"
#include "base/banned.h"

void policy_init(struct policy *p)
{
	memset(p, 0, sizeof(*p));
	config_init(&p->cfg);
	p->run = p->push = 1;
	strvec_init(&p->mounts);
	strvec_init(&p->images);
}

void policy_release(struct policy *p)
{
	struct config released;

	free(p->path);
	config_release(&p->cfg);
	strvec_clear(&p->mounts);
	strvec_clear(&p->images);
	/* As policy_init() leaves it, without a config holding defaults to free again. */
	released = p->cfg;
	memset(p, 0, sizeof(*p));
	p->cfg = released;
	p->run = p->push = 1;
	strvec_init(&p->mounts);
	strvec_init(&p->images);
}

/* Owned by root and not writable by group or others. */
static int safe_owner(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static int yes_no(const struct config_extra *x, const char *name, int *out, struct buf *err)
{
	static const char *const yes[] = {"yes", "true", "Yes", "True", "YES", "TRUE"};
	static const char *const no[] = {"no", "false", "No", "False", "NO", "FALSE"};

	if (!x->line)
		return 0;
	for (size_t i = 0; !x->is_list && x->values.nr == 1 && i < ARRAY_SIZE(yes); i++) {
		if (!strcmp(x->values.v[0], yes[i]))
			return *out = 1, 0;
		if (!strcmp(x->values.v[0], no[i]))
			return *out = 0, 0;
	}
	buf_addf(err, "%s:%zu: %s: must be yes or no", name, x->line, x->key);
	return -EINVAL;
}

/* The policy's own keys, once the config's are parsed. */
static int read_extra(struct policy *p, struct config_extra *x, struct buf *err)
{
	struct buf why = BUF_INIT;
	int ret;

	if ((ret = yes_no(&x[0], p->path, &p->run, err)) < 0 ||
	    (ret = yes_no(&x[1], p->path, &p->push, err)) < 0)
		return ret;
	p->run_line = x[0].line;
	p->push_line = x[1].line;
	if ((p->timeout_line = x[2].line)) {
		if (x[2].is_list || duration_parse(x[2].values.v[0], &p->timeout_ms, &why) < 0 ||
		    p->timeout_ms < 1000) {
			buf_addf(err, "%s:%zu: timeout: must be a duration like 30m or 2h%s%s",
			         p->path, x[2].line, why.len ? ": " : "", why.buf);
			buf_release(&why);
			return -EINVAL;
		}
	}
	p->mounts_line = x[3].line;
	for (size_t i = 0; i < x[3].values.nr; i++) {
		const char *m = x[3].values.v[i];

		if (!x[3].is_list || m[0] != '/' || strstr(m, "/../") || strstr(m, "/./") ||
		    strstr(m, "//")) {
			buf_addf(err,
			         "%s:%zu: mounts: '%.200s' must be an absolute folder, in a list",
			         p->path, x[3].lines[i] ? x[3].lines[i] : x[3].line, m);
			return -EINVAL;
		}
		p->mounts_lines[i] = x[3].lines[i];
		{
			/* "/srv/" and "/srv" are one prefix. */
			size_t n = strlen(m);

			while (n > 1 && m[n - 1] == '/')
				n--;
			buf_reset(&why);
			buf_add(&why, m, n);
			strvec_push(&p->mounts, why.buf);
		}
	}
	buf_release(&why);
	p->images_line = x[4].line;
	for (size_t i = 0; i < x[4].values.nr; i++) {
		if (!x[4].is_list || !image_name_ok(x[4].values.v[i])) {
			buf_addf(err, "%s:%zu: images: '%.200s' is not an image name, in a list",
			         p->path, x[4].lines[i] ? x[4].lines[i] : x[4].line,
			         x[4].values.v[i]);
			return -EINVAL;
		}
		p->images_lines[i] = x[4].lines[i];
		strvec_push(&p->images, x[4].values.v[i]);
	}
	return 0;
}

int policy_load_path(struct policy *p, const char *path, struct buf *err)
{
	static const char *const keys[] = {"run", "push", "timeout", "mounts", "images"};
	struct config_extra x[ARRAY_SIZE(keys)];
	struct buf data = BUF_INIT, dir = BUF_INIT;
	struct stat st, dst;
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "the policy '%s' cannot be read: %s", path, strerror(errno));
		return ret;
	}
	buf_addstr(&dir, path);
	while (dir.len > 1 && dir.buf[dir.len - 1] != '/')
		buf_setlen(&dir, dir.len - 1);
	if (fstat(fd, &st) < 0 || stat(dir.len ? dir.buf : ".", &dst) < 0) {
		ret = -errno;
		buf_addf(err, "the policy '%s' cannot be read: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		buf_addf(err, "the policy '%s' is not a regular file", path);
	} else if (!safe_owner(&st)) {
		ret = -EPERM;
		buf_addf(err,
		         "the policy '%s' is refused: it must be owned by root and not writable "
		         "by group or others (it is owned by uid %u, mode %04o)",
		         path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	} else if (!safe_owner(&dst)) {
		ret = -EPERM;
		buf_addf(err,
		         "the policy '%s' is refused: its folder '%s' must be owned by root and "
		         "not writable by group or others (it is owned by uid %u, mode %04o)",
		         path, dir.buf, (unsigned)dst.st_uid, (unsigned)(dst.st_mode & 07777));
	} else if ((n = buf_read_fd(&data, fd, CONFIG_MAX_BYTES)) < 0) {
		ret = (int)n == -EFBIG ? -EINVAL : (int)n;
		buf_addf(err, "the policy '%s' cannot be read: %s", path,
		         n == -EFBIG ? "larger than 256 KiB" : strerror((int)-n));
	} else {
		ret = 0;
	}
	close(fd);
	buf_release(&dir);
	if (ret < 0) {
		buf_release(&data);
		return ret;
	}
	policy_release(p);
	p->path = xstrdup(path);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		memset(&x[i], 0, sizeof(x[i]));
		x[i].key = keys[i];
		strvec_init(&x[i].values);
	}
	config_release(&p->cfg);
	ret = config_parse_extra(&p->cfg, path, data.buf, data.len, x, ARRAY_SIZE(x), err);
	if (!ret)
		ret = read_extra(p, x, err);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		strvec_clear(&x[i].values);
	buf_release(&data);
	return ret < 0 ? ret : 1;
}

int policy_load(struct policy *p, struct buf *err)
{
	const char *alt = getenv(POLICY_ENV);
	struct stat st;

	if (lstat(POLICY_PATH, &st) == 0 || errno != ENOENT)
		return policy_load_path(p, POLICY_PATH, err);
	if (alt && *alt)
		return policy_load_path(p, alt, err);
	return 0;
}

/* entry's host and port apart: "[::1]:80" is "[::1]" and "80"; no port is 443. */
static void split_entry(const char *e, struct buf *host, struct buf *port)
{
	const char *colon = e[0] == '[' ? strstr(e, "]:") : strrchr(e, ':');

	if (colon && e[0] == '[')
		colon++;
	buf_add(host, e, colon ? (size_t)(colon - e) : strlen(e));
	buf_addstr(port, colon ? colon + 1 : "443");
}

int policy_allow_covers(const char *pol, const char *want)
{
	struct buf ph = BUF_INIT, pp = BUF_INIT, wh = BUF_INIT, wp = BUF_INIT;
	int ok;

	if (!strcmp(pol, want))
		return 1;
	if (!strncmp(pol, "preset:", 7) || !strncmp(want, "preset:", 7))
		return 0;
	split_entry(pol, &ph, &pp);
	split_entry(want, &wh, &wp);
	ok = !strcmp(pp.buf, wp.buf);
	if (ok && !strcmp(ph.buf, wh.buf)) {
		ok = 1;
	} else if (ok && !strncmp(ph.buf, "*.", 2)) {
		/* "*.d" covers "x.d", "*.d" and "*.x.d": what is under d, not d itself. */
		const char *suffix = ph.buf + 1;
		size_t sl = strlen(suffix);

		ok = wh.len > sl && !strcmp(wh.buf + wh.len - sl, suffix);
	} else {
		ok = 0;
	}
	buf_release(&ph);
	buf_release(&pp);
	buf_release(&wh);
	buf_release(&wp);
	return ok;
}

static int listed(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 1;
	return 0;
}

int64_t policy_timeout(const struct policy *p, int64_t ms)
{
	if (p->path && p->timeout_ms && ms > p->timeout_ms)
		return p->timeout_ms;
	return ms;
}

/* "<cfg>:<line>: <key>: " for what the config asks. */
__attribute__((format(printf, 4, 5))) static int beyond(struct buf *err, const char *cfg_name,
                                                        size_t line, const char *fmt, ...)
{
	va_list ap;

	if (cfg_name)
		buf_addf(err, "%s:%zu: ", cfg_name, line);
	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return -EPERM;
}

/* path is in folder (a prefix on a '/' boundary, or the folder itself). */
static int path_in(const char *path, const char *folder)
{
	size_t n = strlen(folder);

	if (!strcmp(folder, "/"))
		return 1;
	return !strncmp(path, folder, n) && (path[n] == '\0' || path[n] == '/');
}

/* The same remote: URLs compared without a trailing '/' or ".git", as the broker takes them. */
static int same_url(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	while (la && a[la - 1] == '/')
		la--;
	while (lb && b[lb - 1] == '/')
		lb--;
	if (la > 4 && !strncmp(a + la - 4, ".git", 4))
		la -= 4;
	if (lb > 4 && !strncmp(b + lb - 4, ".git", 4))
		lb -= 4;
	return la == lb && !strncmp(a, b, la);
}

/* A push pattern of the config within the policy's patterns of its remote. */
static int push_within(const struct git_remote *pol, const char *pattern)
{
	for (size_t i = 0; i < pol->push.nr; i++)
		if (!strcmp(pol->push.v[i], pattern))
			return 1;
	return !strpbrk(pattern, "*?") && config_git_push_allowed(pol, pattern);
}

static int check_allow(const struct policy *p, const struct config *cfg, const char *name,
                       struct buf *err)
{
	size_t pl = config_key_line(&p->cfg.lines, CONFIG_SET_ALLOW);

	for (size_t i = 0; i < cfg->allow.nr; i++) {
		size_t k;

		for (k = 0; k < p->cfg.allow.nr; k++)
			if (policy_allow_covers(p->cfg.allow.v[k], cfg->allow.v[i]))
				break;
		if (k == p->cfg.allow.nr)
			return beyond(err, name, cfg->lines.allow[i],
			              "allow[%zu]: '%s' is beyond the policy (%s:%zu: allow)", i,
			              cfg->allow.v[i], p->path, pl);
	}
	return 0;
}

/*
 * A secret's name the config gives (in env, secrets or as a git token; key
 * and its index i, what names it: "env[0]", "secrets[1].env",
 * "git[2].token") at line of cfg_name: refused unless the policy's env lists
 * it, or the policy bounds no env.
 */
static int check_secret(const struct policy *p, const char *cfg_name, size_t line, const char *key,
                        size_t i, const char *field, const char *secret, struct buf *err)
{
	if (!(p->cfg.set & CONFIG_SET_ENV) || listed(&p->cfg.env, secret))
		return 0;
	return beyond(err, cfg_name, line,
	              "%s[%zu]%s: the secret %s is beyond the policy (%s:%zu: env)", key, i, field,
	              secret, p->path, config_key_line(&p->cfg.lines, CONFIG_SET_ENV));
}

/* The policy's remote of url names secret as its token. */
static int policy_remote_token(const struct policy *p, const char *url, const char *secret)
{
	for (size_t k = 0; k < p->cfg.nr_git; k++)
		if (same_url(p->cfg.git[k].url, url) && p->cfg.git[k].token_env &&
		    !strcmp(p->cfg.git[k].token_env, secret))
			return 1;
	return 0;
}

static int check_git(const struct policy *p, const struct config *cfg, const char *name,
                     struct buf *err)
{
	size_t gl = config_key_line(&p->cfg.lines, CONFIG_SET_GIT);

	for (size_t i = 0; i < cfg->nr_git; i++) {
		const struct git_remote *g = &cfg->git[i], *pg = NULL;
		size_t line = cfg->lines.git[i];
		int ret;

		if (g->push.nr && !p->push)
			return beyond(
			    err, name, line,
			    "git[%zu].push: pushes are beyond the policy (%s:%zu: push: no)", i,
			    p->path, p->push_line);
		if (g->token_env && !policy_remote_token(p, g->url, g->token_env) &&
		    (ret = check_secret(p, name, line, "git", i, ".token", g->token_env, err)) < 0)
			return ret;
		if (!(p->cfg.set & CONFIG_SET_GIT))
			continue;
		for (size_t k = 0; k < p->cfg.nr_git && !pg; k++)
			if (same_url(p->cfg.git[k].url, g->url))
				pg = &p->cfg.git[k];
		if (!pg)
			return beyond(err, name, line,
			              "git[%zu].url: '%s' is beyond the policy (%s:%zu: git)", i,
			              g->url, p->path, gl);
		if (pg->token_env && (!g->token_env || strcmp(pg->token_env, g->token_env)))
			return beyond(
			    err, name, line,
			    "git[%zu].token: the policy's remote takes the token %s (%s:%zu: "
			    "git)",
			    i, pg->token_env, p->path, p->cfg.lines.git[pg - p->cfg.git]);
		if (g->fetch && !pg->fetch)
			return beyond(err, name, line,
			              "git[%zu].fetch: fetching is beyond the policy (%s:%zu: git)",
			              i, p->path, p->cfg.lines.git[pg - p->cfg.git]);
		for (size_t b = 0; b < g->push.nr; b++)
			if (!push_within(pg, g->push.v[b]))
				return beyond(
				    err, name, line,
				    "git[%zu].push: '%s' is beyond the policy (%s:%zu: git)", i,
				    g->push.v[b], p->path, p->cfg.lines.git[pg - p->cfg.git]);
	}
	return 0;
}

/* A size or count: the config's above the policy's is refused, its default lowered. */
static int check_size(const struct policy *p, const struct config *cfg, const char *name,
                      unsigned bit, const char *key, uint64_t want, uint64_t max, uint64_t *set_to,
                      struct buf *err)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	int ret = 0;

	if (!(p->cfg.set & bit) || want <= max)
		return 0;
	if (cfg->set & bit) {
		if (bit == CONFIG_SET_CPUS || bit == CONFIG_SET_ATTEMPTS) {
			buf_addf(&a, "%llu", (unsigned long long)want);
			buf_addf(&b, "%llu", (unsigned long long)max);
		} else {
			format_size_mib(&a, want);
			format_size_mib(&b, max);
		}
		ret = beyond(err, name, config_key_line(&cfg->lines, bit),
		             "%s: %s is beyond the policy (%s:%zu: %s: %s)", key, a.buf, p->path,
		             config_key_line(&p->cfg.lines, bit), key, b.buf);
	} else {
		*set_to = max;
	}
	buf_release(&a);
	buf_release(&b);
	return ret;
}

static int check_ask(const struct policy *p, const struct policy_ask *ask, struct buf *err)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	const char *image = ask->image ? ask->image : "default";
	int ret = 0;

	if (ask->run && !p->run)
		ret = beyond(err, NULL, 0, "aibox run is beyond the policy (%s:%zu: run: no)",
		             p->path, p->run_line);
	else if (ask->memory_mib && (p->cfg.set & CONFIG_SET_MEMORY) &&
	         ask->memory_mib > p->cfg.memory_mib) {
		format_size_mib(&a, ask->memory_mib);
		format_size_mib(&b, p->cfg.memory_mib);
		ret = beyond(err, NULL, 0, "--memory: %s is beyond the policy (%s:%zu: memory: %s)",
		             a.buf, p->path, config_key_line(&p->cfg.lines, CONFIG_SET_MEMORY),
		             b.buf);
	} else if (ask->cpus && (p->cfg.set & CONFIG_SET_CPUS) && ask->cpus > p->cfg.cpus) {
		ret = beyond(err, NULL, 0, "--cpus: %d is beyond the policy (%s:%zu: cpus: %d)",
		             ask->cpus, p->path, config_key_line(&p->cfg.lines, CONFIG_SET_CPUS),
		             p->cfg.cpus);
	} else if (ask->attempts && (p->cfg.set & CONFIG_SET_ATTEMPTS) &&
	           ask->attempts > p->cfg.attempts) {
		ret = beyond(err, NULL, 0,
		             "--attempts: %d is beyond the policy (%s:%zu: attempts: %d)",
		             ask->attempts, p->path,
		             config_key_line(&p->cfg.lines, CONFIG_SET_ATTEMPTS), p->cfg.attempts);
	} else if (ask->timeout_ms && p->timeout_ms && ask->timeout_ms > p->timeout_ms) {
		duration_format(&a, ask->timeout_ms);
		duration_format(&b, p->timeout_ms);
		ret =
		    beyond(err, NULL, 0, "--timeout: %s is beyond the policy (%s:%zu: timeout: %s)",
		           a.buf, p->path, p->timeout_line, b.buf);
	} else if (ask->budget && p->cfg.budget_task && ask->budget > p->cfg.budget_task) {
		usage_format_usd(&a, ask->budget);
		usage_format_usd(&b, p->cfg.budget_task);
		ret = beyond(err, NULL, 0,
		             "--max-budget-usd: %s is beyond the policy (%s:%zu: budget.task: %s)",
		             a.buf, p->path, p->cfg.lines.budget_task, b.buf);
	} else if (p->images_line && !listed(&p->images, image)) {
		ret = beyond(err, NULL, 0, "--image: '%s' is beyond the policy (%s:%zu: images)",
		             image, p->path, p->images_line);
	}
	buf_release(&a);
	buf_release(&b);
	return ret;
}

int policy_check(const struct policy *p, struct config *cfg, const char *name,
                 const struct policy_ask *ask, struct buf *err)
{
	uint64_t cpus = (uint64_t)cfg->cpus, attempts = (uint64_t)cfg->attempts;
	int ret;

	if (!p->path)
		return 0;
	if ((p->cfg.set & CONFIG_SET_ALLOW) && (ret = check_allow(p, cfg, name, err)) < 0)
		return ret;
	for (size_t i = 0; i < cfg->env.nr; i++)
		if ((ret = check_secret(p, name, cfg->lines.env[i], "env", i, "", cfg->env.v[i],
		                        err)) < 0)
			return ret;
	for (size_t i = 0; i < cfg->nr_secrets; i++)
		if ((ret = check_secret(p, name, cfg->secrets[i].line, "secrets", i, ".env",
		                        cfg->secrets[i].env, err)) < 0)
			return ret;
	if ((ret = check_git(p, cfg, name, err)) < 0)
		return ret;
	for (size_t i = 0; p->mounts_line && i < cfg->nr_mounts; i++) {
		size_t k;

		for (k = 0; k < p->mounts.nr; k++)
			if (path_in(cfg->mounts[i].host, p->mounts.v[k]))
				break;
		if (k == p->mounts.nr)
			return beyond(
			    err, name, cfg->lines.mounts[i],
			    "mounts[%zu].host: '%s' is beyond the policy (%s:%zu: mounts)", i,
			    cfg->mounts[i].host, p->path, p->mounts_line);
	}
	if ((ret = check_size(p, cfg, name, CONFIG_SET_MEMORY, "memory", cfg->memory_mib,
	                      p->cfg.memory_mib, &cfg->memory_mib, err)) < 0 ||
	    (ret = check_size(p, cfg, name, CONFIG_SET_DISK, "disk", cfg->disk_mib, p->cfg.disk_mib,
	                      &cfg->disk_mib, err)) < 0 ||
	    (ret = check_size(p, cfg, name, CONFIG_SET_CPUS, "cpus", cpus, (uint64_t)p->cfg.cpus,
	                      &cpus, err)) < 0 ||
	    (ret = check_size(p, cfg, name, CONFIG_SET_ATTEMPTS, "attempts", attempts,
	                      (uint64_t)p->cfg.attempts, &attempts, err)) < 0)
		return ret;
	cfg->cpus = (int)cpus;
	cfg->attempts = (int)attempts;
	if (p->cfg.budget_task && cfg->budget_task > p->cfg.budget_task) {
		struct buf a = BUF_INIT, b = BUF_INIT;

		usage_format_usd(&a, cfg->budget_task);
		usage_format_usd(&b, p->cfg.budget_task);
		ret = beyond(err, name, cfg->lines.budget_task,
		             "budget.task: %s is beyond the policy (%s:%zu: budget.task: %s)",
		             a.buf, p->path, p->cfg.lines.budget_task, b.buf);
		buf_release(&a);
		buf_release(&b);
		return ret;
	}
	if (p->cfg.budget_task && !cfg->budget_task)
		cfg->budget_task = p->cfg.budget_task;
	return ask ? check_ask(p, ask, err) : 0;
}

int policy_user_day(const struct policy *p, int *ledger_fd, uint64_t *cap, struct buf *err)
{
	struct strvec names = STRVEC_INIT;
	struct buf dir = BUF_INIT, a = BUF_INIT, b = BUF_INIT;
	uint64_t spent = 0, total = 0;
	time_t now = time(NULL);
	int ret = 0, fd = -1;

	*ledger_fd = -1;
	*cap = 0;
	if (!p->path || !p->cfg.budget_day)
		return 0;
	if ((ret = projects_list(&names)) < 0) {
		buf_addf(err, "cannot list the projects for the policy's daily budget: %s",
		         strerror(-ret));
		return ret;
	}
	/* each project's ledger alone, never under the user's lock (usage.h: the lock order) */
	for (size_t i = 0; !ret && i < names.nr; i++) {
		uint64_t t = 0;

		buf_reset(&dir);
		projects_dir(&dir);
		buf_addf(&dir, "/%s", names.v[i]);
		if ((fd = usage_ledger_open(dir.buf, now, err)) < 0) {
			ret = fd;
			break;
		}
		if ((ret = usage_ledger_add(fd, 0, &t)) < 0)
			buf_addf(err, "cannot read the ledger of today's spend in '%s/spend': %s",
			         dir.buf, ret == -EINVAL ? "not one number" : strerror(-ret));
		close(fd);
		fd = -1;
		spent = spent + t < spent ? UINT64_MAX : spent + t;
	}
	/* the user's ledger holds at least what the projects' do (a day an older aibox began) */
	if (!ret && (fd = ret = usage_ledger_open(aibox_home(), now, err)) >= 0 &&
	    (ret = usage_ledger_raise(fd, spent, &total)) < 0)
		buf_addf(err, "cannot read the ledger of today's spend in '%s/spend': %s",
		         aibox_home(), ret == -EINVAL ? "not one number" : strerror(-ret));
	if (!ret && total >= p->cfg.budget_day) {
		usage_format_usd(&a, total);
		usage_format_usd(&b, p->cfg.budget_day);
		buf_addf(err,
		         "your daily budget under the policy is spent (%s USD today across your "
		         "projects, by aibox's count; %s:%zu: budget.day: %s): nothing starts "
		         "before tomorrow (local time)",
		         a.buf, p->path, p->cfg.lines.budget_day, b.buf);
		ret = -EDQUOT;
	}
	if (ret < 0 && fd >= 0)
		close(fd);
	if (ret >= 0) {
		*ledger_fd = fd;
		*cap = p->cfg.budget_day;
		ret = 0;
	}
	strvec_clear(&names);
	buf_release(&dir);
	buf_release(&a);
	buf_release(&b);
	return ret;
}
