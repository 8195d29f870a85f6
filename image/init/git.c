/*
 * Task mode runs git as the user, with its hooks and the system's and the
 * user's config off (task_int.h).
 */
#include <errno.h>
#include <string.h>

#include "base/guest_env.h"
#include "task_int.h"
#include "base/banned.h"

struct capture {
	struct guest_task *t;
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

static int run_git_core(struct guest_task *t, struct step_group *g, int64_t deadline,
                        const char *dir, int in, struct buf *out, step_sink_fn fn, void *fn_ctx,
                        const char *const *extra_env, const char *const *args)
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
	base_env(t, &env, &(struct guest_env){.git = 1});
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
	p.in = in;
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

int run_git_to(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
               struct buf *out, step_sink_fn fn, void *fn_ctx, const char *const *extra_env,
               const char *const *args)
{
	return run_git_core(t, g, deadline, dir, -1, out, fn, fn_ctx, extra_env, args);
}

int run_git_in(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
               int in, struct buf *out, step_sink_fn fn, void *fn_ctx, const char *const *args)
{
	return run_git_core(t, g, deadline, dir, in, out, fn, fn_ctx, NULL, args);
}

int run_git(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir,
            struct buf *out, const char *const *extra_env, const char *const *args)
{
	return run_git_to(t, g, deadline, dir, out, NULL, NULL, extra_env, args);
}

int git_ok(struct guest_task *t, struct step_info *si, int ret, const char *what)
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
