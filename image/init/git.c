/*
 * Task mode runs git as the user, with its hooks and the system's and the
 * user's config off (task_int.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
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

/*
 * The step_proc of a git run in *p, its argv and envp in argv and env (the
 * caller clears them), the command in vm.log.
 */
static void git_proc(struct guest_task *t, const char *dir, int in, struct capture *c,
                     const char *const *extra_env, const char *const *args, struct strvec *argv,
                     struct strvec *env, struct step_proc *p)
{
	struct buf cmd = BUF_INIT;

	strvec_pushl(argv, t->git, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
	             "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c",
	             "commit.gpgSign=false", "-c", "core.pager=cat", "-c",
	             "advice.detachedHead=false", NULL);
	strvec_pushv(argv, args);
	base_env(t, env, &(struct guest_env){.git = 1});
	if (extra_env)
		strvec_pushv(env, extra_env);
	for (size_t i = 0; args[i]; i++)
		buf_addf(&cmd, " %s", args[i]);
	vmlog(t, "git%s", cmd.buf);
	buf_release(&cmd);

	memset(p, 0, sizeof(*p));
	p->argv = argv->v;
	p->envp = env->v;
	p->dir = dir;
	p->drop = t->o->drop;
	p->uid = t->o->uid;
	p->gid = t->o->gid;
	p->in = in;
	p->on_out = capture_out;
	p->on_err = capture_err;
	p->ctx = c;
}

/* git's result from step_run()'s or step_finish()'s. */
static int git_result(struct guest_task *t, const struct capture *c, int ret,
                      const struct step_result *r)
{
	if (ret < 0)
		vmlog(t, "cannot run git: %s", strerror(-ret));
	else if (r->timed_out)
		ret = -ETIMEDOUT;
	else if (c->too_long)
		ret = -EFBIG;
	else
		ret = r->code;
	return ret;
}

static int run_git_core(struct guest_task *t, struct step_group *g, int64_t deadline,
                        const char *dir, int in, struct buf *out, step_sink_fn fn, void *fn_ctx,
                        const char *const *extra_env, const char *const *args)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct step_proc p;
	struct step_result r;
	struct buf sink = BUF_INIT;
	struct capture c = {t, out ? out : &sink, 0, fn, fn_ctx};
	int ret;

	git_proc(t, dir, in, &c, extra_env, args, &argv, &env, &p);
	ret = git_result(t, &c, step_run(&p, g, deadline, &r), &r);
	strvec_clear(&argv);
	strvec_clear(&env);
	buf_release(&sink);
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

int git_start(struct guest_task *t, struct step_group *g, int64_t deadline, const char *dir, int in,
              step_sink_fn fn, void *fn_ctx, const char *const *args, struct git_job *gj)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct step_proc p;
	int ret;

	gj->c = xcalloc(1, sizeof(*gj->c));
	*gj->c = (struct capture){t, NULL, 0, fn, fn_ctx};
	git_proc(t, dir, in, gj->c, NULL, args, &argv, &env, &p);
	ret = step_start(&p, g, deadline, &gj->j);
	strvec_clear(&argv);
	strvec_clear(&env);
	if (ret < 0) {
		vmlog(t, "cannot run git: %s", strerror(-ret));
		free(gj->c);
		gj->c = NULL;
	}
	return ret;
}

int git_finish(struct guest_task *t, struct git_job *gj)
{
	struct step_result r;
	int ret = git_result(t, gj->c, step_finish(&gj->j, &r), &r);

	free(gj->c);
	gj->c = NULL;
	return ret;
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
