#include "task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "prepared.h"
#include "resume.h"
#include "session_file.h"
#include "rmtree.h"
#include "strvec.h"
#include "tar_out.h"
#include "task_settings.h"
#include "transcript.h"
#include "banned.h"

/* The guest's fixed places; the short names stand for common/guest_abi.h's. */
#define GUEST_SHARE         GUEST_TASK_DIR
#define GUEST_STATE         GUEST_STATE_DIR
#define GUEST_USER          "aibox"
#define GUEST_PATH          "/usr/local/bin:/usr/bin:/bin"
#define BRANCH              GUEST_BRANCH
#define BRANCH_REF          GUEST_BRANCH_REF
#define API_FORWARD_URL     GUEST_API_FORWARD_URL
#define API_PLACEHOLDER_KEY GUEST_API_KEY_PLACEHOLDER

/* Caps: the host's (common/guest_abi.h) and our own on what we read. */
#define SECRETS_MAX        (1 << 20)
#define SECRETS_WAIT_MS    60000
#define PROMPT_MAX         (4 << 20)
#define BUNDLE_MAX         RESULT_BUNDLE_MAX
#define TRANSCRIPT_MAX     RESULT_TRANSCRIPT_MAX
#define LOG_MAX            (RESULT_VM_LOG_MAX - 4096)
#define RESULT_MAX         RESULT_JSON_MAX
#define LINE_MAX_PARSE     (16 << 20)
#define LAST_MESSAGE_MAX   65536
#define GIT_OUT_MAX        (1 << 20)
#define CLAUDE_MAX_RETRIES "4"

enum { S_CLONE, S_CLAUDE, S_COMMIT, S_BUNDLE, S_NR };
static const char *const step_names[S_NR] = {"clone", "claude", "commit", "bundle"};

struct step_info {
	const char *status; /* NULL until run: "skipped" */
	int64_t ms;
	int exit_code; /* valid when has_exit */
	int has_exit;
};

struct task {
	const struct task_opts *o;
	int64_t t0;
	int out_broken;

	/* settings.json */
	json_t *settings;
	const char *model, *start, *api, *proxy, *path, *system_prompt, *git_name, *git_email;
	long timeout_s;
	double budget;
	int has_budget;
	json_t *env_names;
	json_t *git_remotes; /* NULL: none */
	const char *resume;  /* the session Claude Code resumes; NULL: a new one */
	struct strvec secrets; /* NAME=value, only for Claude Code's environment */

	char *git, *claude;
	char *results; /* <state>/aibox-results */
	int log_fd;    /* vm.log */
	uint64_t log_len;
	int log_full;

	struct step_info steps[S_NR];
	int failed_step; /* -1 none */

	/* Claude Code */
	int claude_ran, claude_exit, claude_timed_out;
	json_t *result_line;
	int transcript_fd;
	uint64_t transcript_len;
	int transcript_full;
	struct buf line;
	int line_long;

	/* after */
	char *end_commit;
	int changes;
	int bundle_fd;
	uint64_t bundle_len;
	int bundle_too_big;
};

/* ---- logging ----------------------------------------------------------- */

static void log_raw(struct task *t, const char *data, size_t n)
{
	if (t->log_fd < 0 || t->log_full)
		return;
	if (t->log_len + n > LOG_MAX) {
		static const char note[] = "\n[aibox-init: vm.log is full, the rest is left out]\n";

		t->log_full = 1;
		write_all(t->log_fd, note, sizeof(note) - 1);
		return;
	}
	if (write_all(t->log_fd, data, n) == 0)
		t->log_len += n;
}

static int log_sink(void *ctx, const char *data, size_t n)
{
	log_raw(ctx, data, n);
	return 0;
}

/* A line in vm.log only, with the time since the start. */
__attribute__((format(printf, 2, 3))) static void vmlog(struct task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	int64_t ms = now_ms() - t->t0;
	va_list ap;

	buf_addf(&b, "[%6lld.%03lld] ", (long long)(ms / 1000), (long long)(ms % 1000));
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	buf_addch(&b, '\n');
	log_raw(t, b.buf, b.len);
	buf_release(&b);
}

/* A progress line: to stderr (the host shows it) and to vm.log. */
__attribute__((format(printf, 2, 3))) static void progress(struct task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	vmlog(t, "%s", b.buf);
	buf_addch(&b, '\n');
	write_all(t->o->err, b.buf, b.len);
	buf_release(&b);
}

/* ---- settings and secrets ---------------------------------------------- */

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* settings.json through the one parser (common/task_settings.h), task mode only. */
static int read_settings(struct task *t, struct buf *why)
{
	struct task_settings_doc d;
	struct buf b = BUF_INIT, file = BUF_INIT;
	ssize_t n;
	int ret = -1;

	buf_addf(&file, "%s/settings.json", t->o->share);
	n = buf_read_file(&b, file.buf, GUEST_SETTINGS_MAX);
	if (n < 0) {
		buf_addf(why, "cannot read '%s': %s", file.buf, strerror((int)-n));
		goto out;
	}
	if (task_settings_parse(b.buf, b.len, &d, why) < 0)
		goto out;
	if (d.s.mode != TASK_MODE_TASK) {
		buf_addstr(why, "settings.json: \"mode\" is not 'task'");
		task_settings_doc_release(&d);
		goto out;
	}
	/* The strings stay in the JSON, which t keeps until the task ends. */
	t->settings = d.root;
	t->model = d.s.model;
	t->timeout_s = d.s.timeout_s;
	t->has_budget = d.s.has_budget;
	t->budget = d.s.max_budget_usd;
	t->git_name = d.s.git_name;
	t->git_email = d.s.git_email;
	t->start = d.s.start_commit;
	t->env_names = json_object_get(d.root, "env_names");
	t->api = task_api_name(d.s.api);
	t->proxy = d.s.proxy;
	t->path = d.s.path;
	t->system_prompt = d.s.system_prompt;
	t->git_remotes = json_object_get(d.root, "git_remotes");
	t->resume = d.s.resume_session;
	ret = 0;
out:
	buf_release(&b);
	buf_release(&file);
	return ret;
}

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
	int64_t until = now_ms() + ms;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int64_t left = until - now_ms();
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

/* The secrets from stdin: kept only in memory, for Claude Code's environment. */
static int read_secrets(struct task *t, struct buf *why)
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
		env = json_object_get(s, "env");
		if (json_is_object(env))
			json_object_foreach(env, name, v) if (json_is_string(v))
			    explicit_bzero((char *)json_string_value(v), json_string_length(v));
		json_decref(s);
	}
	explicit_bzero(b.buf, b.alloc ? b.alloc : b.len);
	buf_release(&b);
	return ret;
}

static void clear_secrets(struct task *t)
{
	for (size_t i = 0; i < t->secrets.nr; i++)
		explicit_bzero((char *)t->secrets.v[i], strlen(t->secrets.v[i]));
	strvec_clear(&t->secrets);
}

/* ---- running things ----------------------------------------------------- */

static char *find_in_path(const char *name)
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

static void base_env(struct task *t, struct strvec *env)
{
	strvec_pushf(env, "PATH=%s", GUEST_PATH);
	strvec_pushf(env, "HOME=%s", t->o->home);
	strvec_pushl(env, "USER=" GUEST_USER, "LOGNAME=" GUEST_USER, "SHELL=/bin/bash",
	             "LANG=C.UTF-8", "TERM=dumb", NULL);
}

struct capture {
	struct task *t;
	struct buf *out;
	int too_long;
	step_sink_fn fn; /* instead of out */
	void *fn_ctx;
};

static int capture_out(void *ctx, const char *data, size_t n)
{
	struct capture *c = ctx;

	if (c->fn)
		return c->fn(c->fn_ctx, data, n);
	if (c->out->len + n > GIT_OUT_MAX) {
		c->too_long = 1;
		return -1;
	}
	buf_add(c->out, data, n);
	return 0;
}

static int capture_err(void *ctx, const char *data, size_t n)
{
	struct capture *c = ctx;

	log_raw(c->t, data, n);
	return 0;
}

/*
 * Run git as the user with hooks and fsmonitor off, in dir, in group g, until
 * deadline; stdout into out (if set), stderr into vm.log.  extra_env adds to
 * the environment.  Returns git's exit code, -ETIMEDOUT, or -errno.
 */
static int run_git_to(struct task *t, struct step_group *g, int64_t deadline, const char *dir,
                      struct buf *out, step_sink_fn fn, void *fn_ctx, const char *const *extra_env,
                      const char *const *args)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct step_proc p = {0};
	struct step_result r;
	struct buf sink = BUF_INIT;
	struct capture c = {t, out ? out : &sink, 0, fn, fn_ctx};
	struct buf cmd = BUF_INIT;
	int ret;

	strvec_pushl(&argv, t->git, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
	             "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c",
	             "commit.gpgSign=false", "-c", "core.pager=cat", "-c",
	             "advice.detachedHead=false", NULL);
	strvec_pushv(&argv, args);
	base_env(t, &env);
	strvec_pushl(&env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	             "GIT_TERMINAL_PROMPT=0", "GIT_ATTR_NOSYSTEM=1", "LC_ALL=C", NULL);
	if (extra_env)
		strvec_pushv(&env, extra_env);
	for (size_t i = 0; args[i]; i++)
		buf_addf(&cmd, " %s", args[i]);
	vmlog(t, "git%s", cmd.buf);

	p.argv = argv.v;
	p.envp = env.v;
	p.dir = dir;
	p.drop = t->o->drop;
	p.uid = t->o->uid;
	p.gid = t->o->gid;
	p.in = -1;
	p.on_out = capture_out;
	p.on_err = capture_err;
	p.ctx = &c;
	ret = step_run(&p, g, deadline, &r);
	if (ret < 0)
		vmlog(t, "cannot run git: %s", strerror(-ret));
	else if (r.timed_out)
		ret = -ETIMEDOUT;
	else if (c.too_long)
		ret = -EFBIG;
	else
		ret = r.code;
	strvec_clear(&argv);
	strvec_clear(&env);
	buf_release(&sink);
	buf_release(&cmd);
	return ret;
}

static int run_git(struct task *t, struct step_group *g, int64_t deadline, const char *dir,
                   struct buf *out, const char *const *extra_env, const char *const *args)
{
	return run_git_to(t, g, deadline, dir, out, NULL, NULL, extra_env, args);
}

#define GIT(t, g, dl, dir, out, ...)                                                               \
	run_git((t), (g), (dl), (dir), (out), NULL, (const char *const[]){__VA_ARGS__, NULL})

/* A git command that must succeed; else the step fails with a reason in vm.log. */
static int git_ok(struct task *t, struct step_info *si, int ret, const char *what)
{
	if (ret == 0)
		return 1;
	if (ret == -ETIMEDOUT) {
		si->status = "timeout";
		progress(t, "%s: out of time", what);
	} else {
		si->status = "failed";
		if (ret > 0) {
			si->exit_code = ret;
			si->has_exit = 1;
		}
		progress(t, "%s failed%s%s", what, ret < 0 ? ": " : "",
		         ret < 0 ? strerror(-ret) : "");
	}
	return 0;
}

/* ---- step: clone -------------------------------------------------------- */

static int ensure_project_dir(struct task *t)
{
	struct stat st;

	if (lstat(t->path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return -errno;
	if (mkdir(t->path, 0755) < 0)
		return -errno;
	if (t->o->drop && chown(t->path, t->o->uid, t->o->gid) < 0)
		return -errno;
	return 0;
}

/*
 * 1 when the fresh clone is on BRANCH at the start commit, as a clone of the
 * host's start.bundle (HEAD a symref to BRANCH) is.  Read straight from the
 * files git just wrote: nothing else has run in the repository yet.
 */
static int clone_on_start(struct task *t)
{
	struct buf file = BUF_INIT, b = BUF_INIT, want = BUF_INIT;
	int ok = 0;

	buf_addf(&file, "%s/.git/HEAD", t->path);
	if (buf_read_file(&b, file.buf, 256) < 0 || strcmp(b.buf, "ref: " BRANCH_REF "\n"))
		goto out;
	buf_reset(&file);
	buf_reset(&b);
	buf_addf(&file, "%s/.git/" BRANCH_REF, t->path);
	buf_addf(&want, "%s\n", t->start);
	ok = buf_read_file(&b, file.buf, 256) >= 0 && !strcmp(b.buf, want.buf);
out:
	buf_release(&file);
	buf_release(&b);
	buf_release(&want);
	return ok;
}

static void gitconfig_value(struct buf *out, const char *s);

/* Empty the project folder (it is a mount point: it stays) for the plain clone. */
static int empty_project(struct task *t)
{
	struct buf where = BUF_INIT;
	struct dirent *e;
	DIR *d;
	int fd, ret = 0;

	fd = open(t->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = rmtree_at(dirfd(d), e->d_name, NULL, &where);
		if (r < 0 && !ret) {
			ret = r;
			vmlog(t, "cannot remove '%s': %s", where.buf, strerror(-r));
		}
	}
	closedir(d);
	buf_release(&where);
	return ret;
}

/* Create path (no such file yet) with mode, owned by the user; the fd or -errno. */
static int create_user_file(struct task *t, const char *path, int mode, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, mode);

	if (fd < 0)
		return -errno;
	if ((t->o->drop && fchown(fd, t->o->uid, t->o->gid) < 0) || fchmod(fd, mode) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* Copy the pack out of the bundle into .git/objects/pack, in large reads (9p). */
static int place_pack(struct task *t, int bundle_fd, const struct prepared *p,
                      const struct buf *idx)
{
	const size_t chunk = 1 << 20;
	struct buf path = BUF_INIT;
	char *data = NULL;
	uint64_t off = p->pack_off, left = p->pack_len;
	int fd = -1, ret = 0;

	buf_addf(&path, "%s/.git/objects/pack/pack-%s.idx", t->path, p->pack_hex);
	if ((fd = create_user_file(t, path.buf, 0444, O_EXCL)) < 0 ||
	    write_all(fd, idx->buf, idx->len) < 0 || close(fd) < 0) {
		ret = fd < 0 ? fd : -errno;
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/.git/objects/pack/pack-%s.pack", t->path, p->pack_hex);
	if ((fd = create_user_file(t, path.buf, 0444, O_EXCL)) < 0) {
		ret = fd;
		goto out;
	}
	data = xmalloc(chunk);
	while (left) {
		ssize_t n = pread(bundle_fd, data, left < chunk ? (size_t)left : chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto out;
		}
		if (write_all(fd, data, (size_t)n) < 0) {
			ret = -errno;
			goto out;
		}
		off += (uint64_t)n;
		left -= (uint64_t)n;
	}
out:
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	free(data);
	buf_release(&path);
	return ret;
}

/* The branch at the start commit, and the user's name and email in the config. */
static int write_branch_and_user(struct task *t)
{
	struct buf path = BUF_INIT, b = BUF_INIT;
	int fd, ret = 0;

	buf_addf(&path, "%s/.git/refs/heads/aibox", t->path);
	if (mkdir(path.buf, 0755) < 0 ||
	    (t->o->drop && lchown(path.buf, t->o->uid, t->o->gid) < 0)) {
		ret = -errno;
		goto out;
	}
	buf_addstr(&path, "/task");
	buf_addf(&b, "%s\n", t->start);
	if ((fd = create_user_file(t, path.buf, 0644, O_EXCL)) < 0 ||
	    write_all(fd, b.buf, b.len) < 0 || close(fd) < 0) {
		ret = fd < 0 ? fd : -errno;
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/.git/config", t->path);
	buf_reset(&b);
	buf_addstr(&b, "[user]\n\tname = ");
	gitconfig_value(&b, t->git_name);
	buf_addstr(&b, "\n\temail = ");
	gitconfig_value(&b, t->git_email);
	buf_addch(&b, '\n');
	fd = open(path.buf, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || write_all(fd, b.buf, b.len) < 0 || close(fd) < 0)
		ret = -errno;
out:
	buf_release(&path);
	buf_release(&b);
	return ret;
}

/*
 * The prepared clone (docs/init-task.md): with the host's start.idx the
 * bundle's pack is placed as it is, beside that index, instead of being
 * indexed here (inflating and hashing every object under emulation).  Two
 * git processes: `git init` and the checkout (`read-tree --reset -u`).
 * 1 when the project is ready; 0 when there is no start.idx, it does not
 * match the bundle, or a step failed: the reason is in vm.log and the
 * project folder is empty again, for the plain clone.
 */
static int clone_prepared(struct task *t, struct step_group *g, int64_t deadline)
{
	struct buf path = BUF_INIT, idx = BUF_INIT, why = BUF_INIT;
	struct prepared p;
	struct stat st;
	int idx_fd = -1, bundle_fd = -1, ok = 0, ret;

	buf_addf(&path, "%s/start.idx", t->o->share);
	idx_fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (idx_fd < 0) {
		vmlog(t, "no start.idx (%s): cloning the bundle", strerror(errno));
		goto out;
	}
	/* One allocation and large reads: small ones are slow on the 9p share. */
	if (fstat(idx_fd, &st) == 0 && st.st_size > 0 && st.st_size <= PREPARED_IDX_MAX)
		buf_grow(&idx, (size_t)st.st_size + 1);
	if ((ret = (int)buf_read_fd(&idx, idx_fd, PREPARED_IDX_MAX)) < 0) {
		vmlog(t, "start.idx is not used: %s",
		      ret == -EFBIG ? "larger than 256 MiB" : strerror(-ret));
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/start.bundle", t->o->share);
	bundle_fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (bundle_fd < 0) {
		vmlog(t, "cannot open start.bundle: %s", strerror(errno));
		goto out;
	}
	if (prepared_check(bundle_fd, t->start, BRANCH, (const unsigned char *)idx.buf, idx.len, &p,
	                   &why) < 0) {
		vmlog(t, "the prepared clone is not used: %s", why.buf);
		goto out;
	}
	vmlog(t, "prepared clone: pack-%s, %u objects", p.pack_hex, p.objects);
	ret = GIT(t, g, deadline, t->o->home, NULL, "init", "-q", "--initial-branch=" BRANCH, "--",
	          t->path);
	if (ret != 0) {
		vmlog(t, "git init failed (%d)", ret);
		goto undo;
	}
	if ((ret = place_pack(t, bundle_fd, &p, &idx)) < 0 ||
	    (ret = write_branch_and_user(t)) < 0) {
		vmlog(t, "cannot write the repository: %s", strerror(-ret));
		goto undo;
	}
	vmlog(t, "placed the pack (%llu bytes), its index, aibox/task and the user",
	      (unsigned long long)p.pack_len);
	ret = GIT(t, g, deadline, t->path, NULL, "read-tree", "--reset", "-u", "HEAD");
	if (ret != 0) {
		vmlog(t, "git read-tree failed (%d)", ret);
		goto undo;
	}
	ok = 1;
	goto out;
undo:
	if ((ret = empty_project(t)) < 0)
		vmlog(t, "cannot empty '%s': %s", t->path, strerror(-ret));
out:
	if (idx_fd >= 0)
		close(idx_fd);
	if (bundle_fd >= 0)
		close(bundle_fd);
	buf_release(&path);
	buf_release(&idx);
	buf_release(&why);
	return ok;
}

/*
 * Two git processes, each of which costs a few hundred ms under emulation:
 * the clone (which writes user.name and user.email into the new repository's
 * config and checks out aibox/task) and the remote's removal.  A bundle whose
 * HEAD is not aibox/task at the start commit costs a checkout more.
 */
static void step_clone(struct task *t, struct step_info *si, struct step_group *g)
{
	int64_t deadline = now_ms() + t->o->git_limit_ms;
	struct buf bundle = BUF_INIT, name = BUF_INIT, email = BUF_INIT, head = BUF_INIT;
	int err;

	progress(t, "cloning");
	if ((err = ensure_project_dir(t)) < 0) {
		si->status = "failed";
		progress(t, "cannot make the project folder '%s': %s", t->path, strerror(-err));
		goto out;
	}
	if (clone_prepared(t, g, deadline)) {
		si->status = "ok";
		goto out;
	}
	buf_addf(&bundle, "%s/start.bundle", t->o->share);
	buf_addf(&name, "user.name=%s", t->git_name);
	buf_addf(&email, "user.email=%s", t->git_email);
	if (!git_ok(t, si,
	            GIT(t, g, deadline, t->o->home, NULL, "clone", "-q", "-c", name.buf, "-c",
	                email.buf, "--", bundle.buf, t->path),
	            "git clone"))
		goto out;
	if (!git_ok(t, si, GIT(t, g, deadline, t->path, NULL, "remote", "remove", "origin"),
	            "git remote remove"))
		goto out;
	if (!clone_on_start(t)) {
		/* Not a bundle as aibox-task writes them: its HEAD must still be the start. */
		vmlog(t, "the clone is not on %s at %s: checking it out", BRANCH, t->start);
		if (!git_ok(t, si,
		            GIT(t, g, deadline, t->path, &head, "rev-parse", "--verify", "-q",
		                "HEAD^{commit}"),
		            "finding the bundle's HEAD"))
			goto out;
		buf_rtrim(&head);
		if (strcmp(head.buf, t->start)) {
			si->status = "failed";
			progress(t, "the bundle's HEAD is %s, not the start commit %s", head.buf,
			         t->start);
			goto out;
		}
		if (!git_ok(t, si,
		            GIT(t, g, deadline, t->path, NULL, "checkout", "-q", "-B", BRANCH,
		                t->start),
		            "git checkout"))
			goto out;
	}
	si->status = "ok";
out:
	buf_release(&bundle);
	buf_release(&name);
	buf_release(&email);
	buf_release(&head);
}

/* ---- step: claude ------------------------------------------------------- */

static void transcript_write(struct task *t, const char *data, size_t n)
{
	int err;

	if (t->transcript_full)
		return;
	if (t->transcript_len + n > TRANSCRIPT_MAX) {
		t->transcript_full = 1;
		progress(t, "the transcript is longer than %llu MiB: the rest is left out",
		         TRANSCRIPT_MAX >> 20);
		return;
	}
	if ((err = write_all(t->transcript_fd, data, n)) < 0) {
		t->transcript_full = 1;
		progress(t, "cannot write transcript.jsonl: %s", strerror(-err));
		return;
	}
	t->transcript_len += n;
}

/*
 * One whole line of stream-json: a progress line for each tool call in it
 * (common/transcript.h), and keep it if it is the result line.
 */
static void transcript_line(struct task *t, const char *line, size_t n)
{
	struct buf calls = BUF_INIT;
	json_t *j, *type;

	if (transcript_tool_calls(line, n, &calls) > 0)
		for (char *p = calls.buf, *nl; (nl = strchr(p, '\n')); p = nl + 1)
			progress(t, "%.*s", (int)(nl - p), p);
	buf_release(&calls);
	if (!memmem(line, n, "\"result\"", 8))
		return;
	j = json_loadb(line, n, 0, NULL);
	type = json_object_get(j, "type");
	if (json_is_string(type) && !strcmp(json_string_value(type), "result")) {
		json_decref(t->result_line);
		t->result_line = j;
		return;
	}
	json_decref(j);
}

static int transcript_sink(void *ctx, const char *data, size_t n)
{
	struct task *t = ctx;

	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) + 1 : n;

		if (t->line_long) {
			/* Too long to be worth parsing: passed through as it is. */
			transcript_write(t, data, take);
		} else {
			buf_add(&t->line, data, take);
			if (t->line.len > LINE_MAX_PARSE) {
				transcript_write(t, t->line.buf, t->line.len);
				buf_reset(&t->line);
				t->line_long = 1;
			}
		}
		if (nl) {
			if (!t->line_long) {
				transcript_write(t, t->line.buf, t->line.len);
				transcript_line(t, t->line.buf, t->line.len);
			}
			buf_reset(&t->line);
			t->line_long = 0;
		}
		data += take;
		n -= take;
	}
	return 0;
}

static int env_has(const struct strvec *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return 1;
	return 0;
}

static void claude_env(struct task *t, struct strvec *env)
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

static const char *ended_by(struct task *t)
{
	json_t *sub = json_object_get(t->result_line, "subtype");
	json_t *is_error = json_object_get(t->result_line, "is_error");

	if (t->claude_timed_out)
		return "timeout";
	if (json_is_string(sub) && strstr(json_string_value(sub), "budget"))
		return "budget";
	if (t->claude_exit == 0 && t->result_line && !json_is_true(is_error))
		return "completed";
	return "error";
}

static void step_claude(struct task *t, struct step_info *si, struct step_group *g)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct buf file = BUF_INIT;
	struct step_proc p = {0};
	struct step_result r;
	struct stat st;
	int prompt = -1, err;

	si->status = "failed";
	buf_addf(&file, "%s/prompt.txt", t->o->share);
	prompt = open(file.buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (prompt < 0 || fstat(prompt, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > PROMPT_MAX) {
		progress(t, "cannot use '%s': %s", file.buf,
		         prompt < 0 ? strerror(errno) : "not a plain file of at most 4 MiB");
		goto out;
	}
	buf_reset(&file);
	buf_addf(&file, "%s/transcript.jsonl", t->results);
	t->transcript_fd = open(file.buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t->transcript_fd < 0) {
		progress(t, "cannot open '%s': %s", file.buf, strerror(errno));
		goto out;
	}

	strvec_pushl(&argv, t->claude, "--print", "--verbose", "--output-format", "stream-json",
	             "--permission-mode", "bypassPermissions", NULL);
	/* NAME=value: a value starting with '-' must not read as an option. */
	if (t->model)
		strvec_pushf(&argv, "--model=%s", t->model);
	if (t->has_budget)
		strvec_pushf(&argv, "--max-budget-usd=%.10g", t->budget);
	if (t->system_prompt)
		strvec_pushf(&argv, "--append-system-prompt=%s", t->system_prompt);
	if (t->resume) {
		buf_reset(&file);
		if (resume_place(t->o, t->path, t->resume, &file) < 0) {
			progress(t, "%s", file.buf);
			goto out;
		}
		strvec_pushf(&argv, "--resume=%s", t->resume);
	}
	claude_env(t, &env);

	p.argv = argv.v;
	p.envp = env.v;
	p.dir = t->path;
	p.drop = t->o->drop;
	p.uid = t->o->uid;
	p.gid = t->o->gid;
	p.in = prompt; /* on stdin: a 1 MiB prompt would strain ARG_MAX */
	p.on_out = transcript_sink;
	p.on_err = log_sink;
	p.ctx = t;
	progress(t, "claude started");
	err = step_run(&p, g, now_ms() + (int64_t)t->timeout_s * 1000, &r);
	if (err < 0) {
		progress(t, "cannot start claude: %s", strerror(-err));
		goto out;
	}
	if (t->line.len) {
		/* A last line without a newline. */
		transcript_write(t, t->line.buf, t->line.len);
		if (!t->line_long)
			transcript_line(t, t->line.buf, t->line.len);
		buf_reset(&t->line);
	}
	t->claude_ran = 1;
	t->claude_exit = r.code;
	t->claude_timed_out = r.timed_out;
	if (r.timed_out) {
		si->status = "timeout";
		progress(t, "claude timed out after %ld s and was stopped", t->timeout_s);
	} else {
		si->exit_code = r.code;
		si->has_exit = 1;
		progress(t, "claude exited with %d", r.code);
		if (!strcmp(ended_by(t), "completed"))
			si->status = "ok";
	}
out:
	if (prompt >= 0)
		close(prompt);
	for (size_t i = 0; i < env.nr; i++)
		explicit_bzero((char *)env.v[i], strlen(env.v[i]));
	strvec_clear(&argv);
	strvec_clear(&env);
	buf_release(&file);
}

/* ---- steps: commit and bundle ------------------------------------------- */

static const char *const aibox_ident[] = {
    "GIT_AUTHOR_NAME=aibox", "GIT_AUTHOR_EMAIL=aibox@localhost", "GIT_COMMITTER_NAME=aibox",
    "GIT_COMMITTER_EMAIL=aibox@localhost", NULL};

/* The head of `git status --porcelain=v2 -z` output: enough to see its first entry. */
#define STATUS_KEEP 4096

struct status_out {
	struct buf b;
	int more; /* output past STATUS_KEEP */
};

static int status_sink(void *ctx, const char *data, size_t n)
{
	struct status_out *so = ctx;
	size_t room = STATUS_KEEP - so->b.len;

	if (n > room) {
		so->more = 1;
		n = room;
	}
	buf_add(&so->b, data, n);
	return 0;
}

/*
 * Read `git status --porcelain=v2 --branch -z`: *on_branch is 1 when HEAD is
 * on BRANCH, *dirty is 1 when any entry (staged, unstaged or untracked)
 * follows the "# " header records, which git writes first.
 */
static void status_parse(const struct status_out *so, int *on_branch, int *dirty)
{
	const char *p = so->b.buf, *end = so->b.buf + so->b.len;

	*on_branch = *dirty = 0;
	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p));

		if (strncmp(p, "# ", 2) || (!z && so->more)) {
			*dirty = 1; /* an entry, or a header too long to be one of git's */
			return;
		}
		if (!z)
			return;
		if (!strcmp(p, "# branch.head " BRANCH))
			*on_branch = 1;
		p = z + 1;
	}
	if (so->more)
		*dirty = 1;
}

/*
 * One git process when Claude Code committed everything (status); add and
 * commit more when it left changes.
 */
static void step_commit(struct task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline)
{
	struct status_out so = {BUF_INIT, 0};
	int ret, on_branch, dirty;

	ret = run_git_to(t, g, deadline, t->path, NULL, status_sink, &so, NULL,
	                 (const char *const[]){"status", "--porcelain=v2", "--branch", "-z",
	                                       "--untracked-files=normal",
	                                       "--ignore-submodules=none", NULL});
	if (!git_ok(t, si, ret, "git status"))
		goto out;
	status_parse(&so, &on_branch, &dirty);
	if (!on_branch) {
		si->status = "skipped";
		progress(t, "HEAD is not on %s: changes left uncommitted stay out", BRANCH);
		goto out;
	}
	if (!dirty) {
		si->status = "ok";
		goto out;
	}
	if (!git_ok(t, si, GIT(t, g, deadline, t->path, NULL, "add", "-A"), "git add"))
		goto out;
	/* status counts changes git add may not take (an empty folder, a submodule's own) */
	ret = GIT(t, g, deadline, t->path, NULL, "diff", "--cached", "--quiet", "--no-ext-diff");
	if (ret == 0) {
		si->status = "ok";
		goto out;
	}
	if (ret != 1 && !git_ok(t, si, ret, "git diff"))
		goto out;
	progress(t, "committing leftover changes");
	ret = run_git(t, g, deadline, t->path, NULL, aibox_ident,
	              (const char *const[]){"commit", "-q", "--no-verify", "-m",
	                                    "Commit what Claude Code left uncommitted\n\n"
	                                    "Made by aibox-init when the task ended.",
	                                    NULL});
	if (git_ok(t, si, ret, "git commit"))
		si->status = "ok";
out:
	buf_release(&so.b);
}

static int bundle_sink(void *ctx, const char *data, size_t n)
{
	struct task *t = ctx;

	if (t->bundle_len + n > BUNDLE_MAX) {
		t->bundle_too_big = 1;
		return -1;
	}
	if (write_all(t->bundle_fd, data, n) < 0) {
		t->bundle_too_big = -1;
		return -1;
	}
	t->bundle_len += n;
	return 0;
}

/* aibox/task's commit into t->end_commit, by git rev-parse.  0, 1 when the branch is gone, or <0. */
static int branch_tip(struct task *t, struct step_group *g, int64_t deadline)
{
	struct buf out = BUF_INIT;
	int ret;

	ret = GIT(t, g, deadline, t->path, &out, "rev-parse", "--verify", "-q",
	          BRANCH_REF "^{commit}");
	if (ret == 0) {
		buf_rtrim(&out);
		free(t->end_commit);
		t->end_commit = xstrdup(out.buf);
	}
	buf_release(&out);
	return ret > 0 ? 1 : ret;
}

/* aibox/task's commit as the bundle's header names it, into t->end_commit.  1 when found. */
static int bundle_tip(struct task *t)
{
	char head[4096 + 1];
	size_t olen = strlen(t->start);
	ssize_t n = pread(t->bundle_fd, head, sizeof(head) - 1, 0);
	const char *p, *q;

	if (n <= 0)
		return 0;
	head[n] = '\0';
	for (p = head; (q = strchr(p, '\n')); p = q + 1) {
		if ((size_t)(q - p) == olen + 1 + strlen(BRANCH_REF) && p[olen] == ' ' &&
		    !strncmp(p + olen + 1, BRANCH_REF, strlen(BRANCH_REF)) &&
		    strspn(p, "0123456789abcdef") == olen) {
			free(t->end_commit);
			t->end_commit = xstrndup(p, olen);
			return 1;
		}
		if (q == p)
			break; /* the end of the header */
	}
	return 0;
}

/*
 * One git process when there is nothing to send (rev-list), two when there is
 * (and bundle create); rev-parse only to explain a failure.
 */
static void step_bundle(struct task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline)
{
	struct buf out = BUF_INIT, file = BUF_INIT, range = BUF_INIT;
	long left, right;
	char *end;
	int ret;

	si->status = "failed";
	/* left: start's commits that aibox/task lacks (none when it descends); right: new ones */
	buf_addf(&range, "%s..." BRANCH_REF, t->start);
	ret = GIT(t, g, deadline, t->path, &out, "rev-list", "--left-right", "--count", range.buf,
	          "--");
	if (ret > 0) {
		int tip = branch_tip(t, g, deadline);

		if (tip == 1)
			progress(t, "the branch %s is gone", BRANCH);
		else
			git_ok(t, si, tip < 0 ? tip : ret, "git rev-list");
		goto out;
	}
	if (!git_ok(t, si, ret, "git rev-list"))
		goto out;
	errno = 0;
	left = strtol(out.buf, &end, 10);
	right = *end == '\t' ? strtol(end + 1, &end, 10) : -1;
	if (errno || left < 0 || right < 0 || (*end && *end != '\n')) {
		progress(t, "git rev-list gave '%.40s', not two counts", out.buf);
		goto out;
	}
	if (left > 0) {
		branch_tip(t, g, deadline);
		progress(t, "%s does not descend from the start commit", BRANCH);
		goto out;
	}
	if (right == 0) {
		free(t->end_commit);
		t->end_commit = xstrdup(t->start);
		progress(t, "no changes");
		si->status = "ok";
		goto out;
	}

	progress(t, "bundling");
	buf_addf(&file, "%s/changes.bundle", t->results);
	t->bundle_fd = open(file.buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t->bundle_fd < 0) {
		progress(t, "cannot open '%s': %s", file.buf, strerror(errno));
		goto out;
	}
	buf_reset(&range);
	buf_addf(&range, "^%s", t->start);
	ret = run_git_to(
	    t, g, deadline, t->path, NULL, bundle_sink, t, NULL,
	    (const char *const[]){"bundle", "create", "-q", "-", BRANCH_REF, range.buf, NULL});
	if (ret == -EFBIG || t->bundle_too_big) {
		progress(t, "the bundle is larger than 2 GiB");
		goto out;
	}
	if (!git_ok(t, si, ret, "git bundle create"))
		goto out;
	if (!bundle_tip(t) && branch_tip(t, g, deadline) != 0) {
		progress(t, "cannot find %s's commit", BRANCH);
		goto out;
	}
	t->changes = 1;
	si->status = "ok";
out:
	buf_release(&out);
	buf_release(&file);
	buf_release(&range);
}

/* ---- results ------------------------------------------------------------ */

static void send_file(struct task *t, const char *name, int fd, uint64_t max)
{
	int err;

	if (t->out_broken)
		return;
	err = tar_out_file(t->o->out, name, fd, max);
	if (err < 0) {
		t->out_broken = 1;
		progress(t, "cannot send %s: %s", name, strerror(-err));
	}
}

/* The file of the session Claude Code ran (its result line names it), for a later --continue. */
static void send_session(struct task *t)
{
	const char *id = json_string_value(json_object_get(t->result_line, "session_id"));
	int fd = id ? resume_session_open(t->o, t->path, id) : -ENOENT;

	struct stat st;

	if (fd < 0) {
		vmlog(t, "no session file to send: %s", strerror(-fd));
		return;
	}
	/* Over the cap it stays here (a refused member would end the results). */
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size <= SESSION_FILE_MAX)
		send_file(t, SESSION_FILE_NAME, fd, SESSION_FILE_MAX);
	else
		progress(t,
		         "the conversation is over %llu MiB: it is left out, the task cannot "
		         "be continued",
		         SESSION_FILE_MAX >> 20);
	close(fd);
}

static json_t *json_cut_string(const char *s, size_t max)
{
	size_t n = strlen(s);
	struct buf b = BUF_INIT;
	json_t *j;

	if (n <= max)
		return json_string(s);
	/* Cut at a character boundary, and say so. */
	while (n > 0 && (n > max || ((unsigned char)s[n] & 0xc0) == 0x80))
		n--;
	buf_add(&b, s, n);
	buf_addf(&b, "\n[cut by aibox-init at %zu bytes]", max);
	j = json_string(b.buf);
	buf_release(&b);
	return j;
}

static json_t *claude_json(struct task *t)
{
	json_t *c, *r = t->result_line, *v;

	if (!t->claude_ran)
		return json_null();
	c = json_object();
	json_object_set_new(c, "exit_code",
	                    t->claude_timed_out ? json_null() : json_integer(t->claude_exit));
	v = json_object_get(r, "num_turns");
	json_object_set_new(c, "num_turns",
	                    json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null());
	v = json_object_get(r, "duration_ms");
	json_object_set_new(c, "duration_ms",
	                    json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null());
	v = json_object_get(r, "total_cost_usd");
	json_object_set_new(c, "total_cost_usd",
	                    json_is_number(v) ? json_real(json_number_value(v)) : json_null());
	json_object_set_new(c, "ended_by", json_string(ended_by(t)));
	v = json_object_get(r, "subtype");
	json_object_set_new(c, "subtype",
	                    json_is_string(v) ? json_cut_string(json_string_value(v), 64)
	                                      : json_null());
	v = json_object_get(r, "result");
	json_object_set_new(c, "last_message",
	                    json_is_string(v) &&
	                            strlen(json_string_value(v)) == json_string_length(v)
	                        ? json_cut_string(json_string_value(v), LAST_MESSAGE_MAX)
	                        : json_null());
	return c;
}

static char *result_json(struct task *t)
{
	json_t *root = json_object(), *steps = json_array();
	char *s;

	json_object_set_new(root, "version", json_integer(1));
	for (int i = 0; i < S_NR; i++) {
		struct step_info *si = &t->steps[i];
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(step_names[i]));
		json_object_set_new(o, "status", json_string(si->status ? si->status : "skipped"));
		json_object_set_new(o, "seconds", json_real((double)si->ms / 1000.0));
		json_object_set_new(o, "exit_code",
		                    si->has_exit ? json_integer(si->exit_code) : json_null());
		json_array_append_new(steps, o);
	}
	json_object_set_new(root, "steps", steps);
	json_object_set_new(root, "failed_step",
	                    t->failed_step >= 0 ? json_string(step_names[t->failed_step])
	                                        : json_null());
	json_object_set_new(root, "claude", claude_json(t));
	json_object_set_new(root, "start_commit", t->start ? json_string(t->start) : json_null());
	json_object_set_new(root, "end_commit",
	                    t->end_commit ? json_string(t->end_commit) : json_null());
	json_object_set_new(root, "changes", json_boolean(t->changes));
	s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	json_decref(root);
	return s;
}

/* ---- the task ----------------------------------------------------------- */

/* Run one step in a group of its own; a step not ok becomes the failed step. */
typedef void (*step_fn)(struct task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline);

static int run_step(struct task *t, int idx, step_fn fn, int64_t deadline)
{
	struct step_info *si = &t->steps[idx];
	struct step_group g;
	int64_t start = now_ms();
	int err;

	err = step_group_create(&g, t->o->backend, step_names[idx]);
	if (err < 0) {
		si->status = "failed";
		progress(t, "cannot make the group for %s: %s", step_names[idx], strerror(-err));
	} else {
		fn(t, si, &g, deadline);
		err = step_group_destroy(&g);
		if (err < 0)
			vmlog(t, "the group of %s did not go away cleanly: %s", step_names[idx],
			      strerror(-err));
	}
	si->ms = now_ms() - start;
	if (!si->status)
		si->status = "failed";
	if (strcmp(si->status, "ok") && strcmp(si->status, "skipped") && t->failed_step < 0)
		t->failed_step = idx;
	return !strcmp(si->status, "ok") || !strcmp(si->status, "skipped");
}

static void do_clone(struct task *t, struct step_info *si, struct step_group *g, int64_t dl)
{
	(void)dl;
	step_clone(t, si, g);
}

static void do_claude(struct task *t, struct step_info *si, struct step_group *g, int64_t dl)
{
	(void)dl;
	step_claude(t, si, g);
}

static int open_results(struct task *t)
{
	struct buf b = BUF_INIT;
	int ret = 0;

	buf_addf(&b, "%s/aibox-results", t->o->state);
	if (mkdir(b.buf, 0700) < 0 && errno != EEXIST)
		ret = -errno;
	t->results = buf_detach(&b, NULL);
	if (ret)
		return ret;
	buf_addf(&b, "%s/vm.log", t->results);
	t->log_fd = open(b.buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (t->log_fd < 0)
		ret = -errno;
	buf_release(&b);
	return ret;
}

/* ---- the git: remotes -------------------------------------------------- */

#define GIT_REMOTES_MAX TASK_SETTINGS_REMOTES_MAX
#define GIT_BROKER_URL  "http://git.aibox.internal/"

/* A config value in double quotes, with '"' and '\\' escaped. */
static void gitconfig_value(struct buf *out, const char *s)
{
	buf_addch(out, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addch(out, '\\');
		buf_addch(out, *s);
	}
	buf_addch(out, '"');
}

int git_remotes_write(const char *path, json_t *remotes, const char *proxy, struct buf *why)
{
	struct buf b = BUF_INIT;
	json_t *v;
	size_t i;
	int fd, ret = 0;

	if (!remotes || json_is_null(remotes))
		return 0;
	if (!json_is_array(remotes) || json_array_size(remotes) > GIT_REMOTES_MAX) {
		buf_addf(why, "settings.json: \"git_remotes\" is not a list of at most %d URLs",
		         GIT_REMOTES_MAX);
		return -EINVAL;
	}
	if (!json_array_size(remotes))
		return 0;
	if (!proxy || has_control(proxy)) {
		buf_addstr(why, "settings.json: no proxy for the git remotes");
		return -EINVAL;
	}
	json_array_foreach(remotes, i, v)
	{
		const char *u = json_string_value(v);
		size_t n;

		if (!u || strlen(u) != json_string_length(v) || !task_git_remote_valid(u)) {
			buf_addf(why, "settings.json: git_remotes[%zu] is not a plain https:// URL", i);
			buf_release(&b);
			return -EINVAL;
		}
		n = strlen(u);
		while (n > 8 && u[n - 1] == '/')
			n--;
		buf_addf(&b, "[url \"" GIT_BROKER_URL "%zu/\"]\n\tinsteadOf = %.*s\n", i, (int)n, u);
		if (n > 12 && !strncmp(u + n - 4, ".git", 4))
			buf_addf(&b, "\tinsteadOf = %.*s\n", (int)(n - 4), u);
		else
			buf_addf(&b, "\tinsteadOf = %.*s.git\n", (int)n, u);
	}
	buf_addstr(&b, "[http \"" GIT_BROKER_URL "\"]\n\tproxy = ");
	gitconfig_value(&b, proxy);
	buf_addch(&b, '\n');
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		buf_addf(why, "cannot open '%s': %s", path, strerror(errno));
	} else {
		if (write_all(fd, b.buf, b.len) < 0) {
			ret = -errno;
			buf_addf(why, "cannot write '%s': %s", path, strerror(errno));
		}
		close(fd);
	}
	buf_release(&b);
	return ret;
}

void task_opts_guest(struct task_opts *o)
{
	struct passwd *pw = getpwnam(GUEST_USER);

	memset(o, 0, sizeof(*o));
	o->share = GUEST_SHARE;
	o->state = GUEST_STATE;
	o->home = GUEST_HOME;
	o->claude = NULL;
	o->gitconfig = "/etc/gitconfig";
	o->backend = STEP_CGROUP;
	o->drop = 1;
	o->uid = pw ? pw->pw_uid : 1000;
	o->gid = pw ? pw->pw_gid : 1000;
	o->git_limit_ms = 10 * 60 * 1000;
	o->in = 0;
	o->out = 1;
	o->err = 2;
}

int task_run(const struct task_opts *o)
{
	struct task task = {0}, *t = &task;
	struct buf why = BUF_INIT;
	char *result = NULL;
	int err, ret = 0;

	t->o = o;
	t->t0 = now_ms();
	t->log_fd = t->transcript_fd = t->bundle_fd = -1;
	t->failed_step = -1;
	strvec_init(&t->secrets);
	/* Orphans of a killed step come back to us, to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	err = open_results(t);
	if (err < 0)
		progress(t, "cannot open the results folder '%s': %s", t->results, strerror(-err));
	vmlog(t, "task mode: share %s, state %s", o->share, o->state);

	/* Reading the settings and the secrets counts as part of the clone step. */
	if (read_settings(t, &why) < 0 || read_secrets(t, &why) < 0) {
		progress(t, "%s", why.buf);
		t->steps[S_CLONE].status = "failed";
		t->failed_step = S_CLONE;
	} else if (!(t->git = find_in_path("git"))) {
		progress(t, "cannot find git in %s", GUEST_PATH);
		t->steps[S_CLONE].status = "failed";
		t->failed_step = S_CLONE;
	} else if (!(t->claude = o->claude ? xstrdup(o->claude) : find_in_path("claude"))) {
		progress(t, "cannot find claude in %s", GUEST_PATH);
		t->steps[S_CLONE].status = "failed";
		t->failed_step = S_CLONE;
	} else if (err < 0) {
		t->steps[S_CLONE].status = "failed";
		t->failed_step = S_CLONE;
	} else if (o->gitconfig &&
	           git_remotes_write(o->gitconfig, t->git_remotes,
	                             t->proxy ? t->proxy : GUEST_PROXY_URL, &why) < 0) {
		progress(t, "%s", why.buf);
		t->steps[S_CLONE].status = "failed";
		t->failed_step = S_CLONE;
	}

	if (t->failed_step < 0 && run_step(t, S_CLONE, do_clone, 0)) {
		int64_t deadline;

		/* Whatever way Claude Code ended, what it left is committed and sent. */
		run_step(t, S_CLAUDE, do_claude, 0);
		deadline = now_ms() + o->git_limit_ms;

		if (t->transcript_fd >= 0)
			send_file(t, "transcript.jsonl", t->transcript_fd, TRANSCRIPT_MAX);
		send_session(t);
		if (run_step(t, S_COMMIT, step_commit, deadline))
			run_step(t, S_BUNDLE, step_bundle, deadline);
		if (t->changes)
			send_file(t, "changes.bundle", t->bundle_fd, BUNDLE_MAX);
	}
	clear_secrets(t);

	result = result_json(t);
	if (!result || strlen(result) + 1 > RESULT_MAX) {
		free(result);
		result = xstrdup("{\"version\":1,\"failed_step\":\"bundle\",\"steps\":[],"
		                 "\"claude\":null,\"changes\":false}");
	}
	vmlog(t, "task ended%s%s", t->failed_step >= 0 ? ", failed step: " : "",
	      t->failed_step >= 0 ? step_names[t->failed_step] : "");
	if (t->log_fd >= 0)
		send_file(t, "vm.log", t->log_fd, LOG_MAX + 4096);
	if (!t->out_broken) {
		struct buf r = BUF_INIT;

		buf_addstr(&r, result);
		buf_addch(&r, '\n');
		if (tar_out_buf(o->out, "result.json", r.buf, r.len) < 0 || tar_out_end(o->out) < 0)
			t->out_broken = 1;
		buf_release(&r);
	}
	ret = t->out_broken ? EXIT_ERROR : 0;

	free(result);
	json_decref(t->result_line);
	json_decref(t->settings);
	buf_release(&t->line);
	buf_release(&why);
	free(t->git);
	free(t->claude);
	free(t->results);
	free(t->end_commit);
	if (t->log_fd >= 0)
		close(t->log_fd);
	if (t->transcript_fd >= 0)
		close(t->transcript_fd);
	if (t->bundle_fd >= 0)
		close(t->bundle_fd);
	return ret;
}

int task_session(void)
{
	struct task_opts o;

	task_opts_guest(&o);
	return task_run(&o);
}
