/* The start that aibox task and aibox run share (host_start.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "task/broker_spawn.h"
#include "task/host_start.h"
#include "base/err.h"
#include "vm/image.h"
#include "config/project.h"
#include "proxy/proxy_secrets.h"
#include "base/secret.h"
#include "task/shares.h"
#include "task/task_settings.h"
#include "vm/vm.h"
#include "base/banned.h"

int host_project_open(struct buf *checkout, struct project *p, struct buf *cfg_path,
                      struct config *cfg, struct buf *err)
{
	int ret, created;

	if ((ret = project_checkout_here(checkout, err)) < 0)
		return ret;
	if ((ret = project_open(checkout->buf, p, &created)) < 0) {
		buf_addf(err, "cannot open the project of '%s': %s", checkout->buf, strerror(-ret));
		return ret;
	}
	buf_addf(cfg_path, "%s/config.yaml", p->dir);
	return config_load(cfg, cfg_path->buf, err);
}

int host_project_lock(const struct project *p, struct buf *err)
{
	int fd = project_lock(p->dir, PROJECT_LOCK_SHARED | PROJECT_LOCK_NONBLOCK);

	if (fd == -EWOULDBLOCK)
		buf_addf(err, "the project '%s' is being removed", p->name);
	else if (fd < 0)
		buf_addf(err, "cannot lock the project '%s': %s", p->name, strerror(-fd));
	return fd;
}

/* A value the proxy can swap in (common/proxy/proxy_secrets.h): printable ASCII, not too long. */
static int value_ok(const struct buf *v)
{
	if (v->len > PROXY_SECRET_VALUE_MAX)
		return 0;
	for (size_t i = 0; i < v->len; i++)
		if ((unsigned char)v->buf[i] < 0x20 || (unsigned char)v->buf[i] >= 0x7f)
			return 0;
	return 1;
}

/* Each of cfg's secrets: its value kept for the proxy, its placeholder for the VM. */
static int take_secrets(struct host_env *e, const struct config *cfg, const char *cfg_path,
                        struct buf *err)
{
	struct buf v = BUF_INIT;
	char ph[SECRET_PLACEHOLDER_LEN + 1];
	int ret = 0;

	for (size_t i = 0; i < cfg->nr_secrets && !ret; i++) {
		const struct config_secret *sc = &cfg->secrets[i];

		buf_reset(&v);
		buf_grow(&v, 4096);
		if (secret_take_env(sc->env, &v) <= 0 || !v.len) {
			buf_addf(err, "%s:%zu: secrets[%zu].env: %s is not set in your shell",
			         cfg_path, sc->line, i, sc->env);
			ret = -EINVAL;
		} else if (!value_ok(&v)) {
			buf_addf(err,
			         "%s:%zu: secrets[%zu].env: %s holds a value the proxy cannot swap "
			         "in (1 to %d printable ASCII characters)",
			         cfg_path, sc->line, i, sc->env, PROXY_SECRET_VALUE_MAX);
			ret = -EINVAL;
		} else if ((ret = secret_placeholder(ph)) < 0) {
			buf_addf(err, "cannot make a placeholder for %s: %s", sc->env,
			         strerror(-ret));
		} else {
			strvec_push(&e->secret_values, v.buf);
			strvec_push(&e->placeholders, ph);
			strvec_push(&e->ph_names, sc->env);
			strvec_push(&e->ph_values, ph);
		}
	}
	buf_wipe_release(&v);
	return ret;
}

int host_env_take(struct host_env *e, const struct config *cfg, const char *cfg_path,
                  struct buf *err)
{
	struct buf v = BUF_INIT, oauth = BUF_INIT;
	struct login *l = &e->login;
	int ret;

	l->nr_env = (int)cfg->env.nr;
	/* Both logins leave our environment, listed or not: no child needs them. */
	l->key_set = secret_take_env("ANTHROPIC_API_KEY", &e->api_key) > 0 && e->api_key.len;
	l->token_set = secret_take_env("CLAUDE_CODE_OAUTH_TOKEN", &oauth) > 0 && oauth.len;
	if (!l->key_set)
		buf_wipe_release(&e->api_key);
	for (size_t i = 0; i < cfg->env.nr; i++) {
		const char *name = cfg->env.v[i];
		int set;

		buf_reset(&v);
		if (!strcmp(name, "ANTHROPIC_API_KEY")) {
			l->key_listed = 1;
			continue; /* never into the VM */
		}
		if (!strcmp(name, "CLAUDE_CODE_OAUTH_TOKEN")) {
			/* Never into the VM: a placeholder in its place, the proxy swaps. */
			l->token_listed = 1;
			set = l->token_set;
			if (set && !e->oauth.len) {
				if ((ret = secret_placeholder(e->oauth_placeholder)) < 0) {
					buf_addf(err, "cannot make a placeholder for %s: %s", name,
					         strerror(-ret));
					goto out;
				}
				buf_add(&e->oauth, oauth.buf, oauth.len);
			}
			if (set) {
				strvec_push(&e->ph_names, name);
				strvec_push(&e->ph_values, e->oauth_placeholder);
				continue;
			}
		} else {
			set = secret_take_env(name, &v) > 0;
		}
		if (!set) {
			e->unset[e->nr_unset++] = name;
			continue;
		}
		if (login_other(name))
			l->other = 1;
		strvec_push(&e->names, name);
		strvec_push(&e->values, v.buf);
	}
	ret = broker_tokens_take(cfg->git, cfg->nr_git, &e->tokens, err);
	if (!ret)
		ret = take_secrets(e, cfg, cfg_path, err);
out:
	buf_wipe_release(&v);
	buf_wipe_release(&oauth);
	return ret;
}

int host_env_task_login(const struct host_env *e, const char *cfg_path, int *api, struct buf *msg,
                        struct strvec *warnings)
{
	const struct login *l = &e->login;
	int ret;

	if ((ret = login_check_task(l, cfg_path, msg)) < 0)
		return ret;
	if (msg->len)
		strvec_push(warnings, msg->buf);
	if (l->key_listed && !l->key_set)
		strvec_push(warnings,
		            "ANTHROPIC_API_KEY is in the config's env but not set: the task "
		            "goes without it");
	for (size_t i = 0; i < e->nr_unset; i++)
		strvec_pushf(warnings,
		             "%s is in the config's env but not set: the task goes without it",
		             e->unset[i]);
	if (l->key_listed && l->key_set)
		*api = TASK_API_FORWARD;
	else if (l->token_listed && l->token_set)
		*api = TASK_API_OAUTH;
	else
		*api = TASK_API_NONE;
	return 0;
}

int host_env_json(const struct strvec *names, const struct strvec *values,
                  enum guest_secrets_framing f, struct buf *out, struct buf *err)
{
	struct guest_secret *sec = xcalloc(names->nr + 1, sizeof(*sec));
	int ret;

	for (size_t i = 0; i < names->nr; i++) {
		sec[i].name = names->v[i];
		sec[i].value = values->v[i];
	}
	ret = guest_secrets_write(sec, names->nr, f, out, err);
	free(sec);
	return ret;
}

void host_env_release(struct host_env *e)
{
	buf_wipe_release(&e->api_key);
	buf_wipe_release(&e->oauth);
	buf_wipe_release(&e->tokens);
	strvec_wipe_clear(&e->values);
	strvec_clear(&e->names);
	strvec_clear(&e->ph_names);
	strvec_clear(&e->ph_values);
	strvec_wipe_clear(&e->secret_values);
	strvec_clear(&e->placeholders);
	e->nr_unset = 0;
}

int host_checks(struct config *cfg, const char *image, struct buf *image_dir, struct buf *err)
{
	int ret;

	if ((ret = image_find(image ? image : "default", image_dir, err)) < 0 ||
	    (ret = config_host_check(cfg, err)) < 0 ||
	    (ret = broker_remotes_check(cfg->git, cfg->nr_git, err)) < 0)
		return ret;
	return 0;
}

void host_size(struct config *cfg, uint64_t memory_mib, int cpus)
{
	if (memory_mib)
		cfg->memory_mib = memory_mib;
	if (cpus)
		cfg->cpus = cpus;
}

void host_vm_config(struct vm_config *vc, const struct config *cfg, const struct shares *s)
{
	vc->memory_mb = (unsigned)cfg->memory_mib;
	vc->cpus = (unsigned)cfg->cpus;
	vc->disk_bytes = (unsigned long long)cfg->disk_mib * 1024 * 1024;
	vc->mounts = s->vm;
	vc->nr_mounts = s->nr;
	/* AIBOX_MEM_MERGE=0: guest RAM kept out of KSM (docs/image.md, "KSM"). */
	vc->no_mem_merge = getenv("AIBOX_MEM_MERGE") && !strcmp(getenv("AIBOX_MEM_MERGE"), "0");
}
