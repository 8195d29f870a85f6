/*
 * What aibox task and aibox run both do as they start, before the task or
 * run folder is made (docs/internals.md, "The host layer"): the secrets
 * taken out of our environment, and the checks of the image, the config's
 * mounts and presets and its git: remotes, in the same words for both.
 */
#ifndef AIBOX_HOST_START_H
#define AIBOX_HOST_START_H

#include <stddef.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/guest_secrets.h"
#include "base/secret.h"
#include "task/login.h"
#include "base/strvec.h"

struct project;

/*
 * The project of the checkout the current folder is in (made when it has
 * none: project_open()), the checkout's path appended to checkout and the
 * config's to cfg_path, its config loaded into cfg (which needs no
 * config_init() first).  0, or a negative errno with err set.
 */
int host_project_open(struct buf *checkout, struct project *p, struct buf *cfg_path,
                      struct config *cfg, struct buf *err);

/*
 * Hold p's lock shared (project_lock()) for as long as the task or run
 * lives, without waiting: a project that `aibox projects remove` holds is
 * refused ("the project 'NAME' is being removed", -EWOULDBLOCK).  The lock's
 * fd, or a negative errno with err set.
 */
int host_project_lock(const struct project *p, struct buf *err);

struct host_env {
	/* ANTHROPIC_API_KEY when set and not empty (login.key_set), listed or not. */
	struct buf api_key;
	/* The config's env names set in the shell, in config order, and their
	   values: what the VM gets over the session's stdin (or aibox run's
	   variable).  Neither login is among them. */
	struct strvec names, values;
	/* The variables the VM gets a placeholder in, and the placeholders:
	   CLAUDE_CODE_OAUTH_TOKEN's when listed and set, then each of the config's
	   secrets: what settings.json's "placeholders" holds (not secrets). */
	struct strvec ph_names, ph_values;
	/* The config's env names not set (CLAUDE_CODE_OAUTH_TOKEN: or empty). */
	const char *unset[CONFIG_MAX_ENV];
	size_t nr_unset;
	/* The git: remotes' tokens: broker_tokens_take()'s lines (broker_spawn.h). */
	struct buf tokens;
	struct login login; /* which logins are listed and set (login.h) */
	/* The config's secrets, in config order: their values (which stay on the
	   host, for the proxy) and their placeholders (also among ph_values
	   above, which is how the VM gets them). */
	struct strvec secret_values, placeholders;
	/* CLAUDE_CODE_OAUTH_TOKEN when listed and set (login.token_listed and
	   token_set): its value, which stays on the host, and its placeholder,
	   which the VM gets under that name (among ph_names and ph_values). */
	struct buf oauth;
	char oauth_placeholder[SECRET_PLACEHOLDER_LEN + 1];
};

#define HOST_ENV_INIT                                                                              \
	{                                                                                          \
		BUF_INIT, STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, {NULL}, 0, BUF_INIT, \
		    {0}, STRVEC_INIT, STRVEC_INIT, BUF_INIT, ""                                    \
	}

/*
 * Take the secrets out of our environment (secret_take_env(), before any
 * child starts, so that none inherits them): ANTHROPIC_API_KEY and
 * CLAUDE_CODE_OAUTH_TOKEN whether listed or not, each of cfg's env names and
 * the git: remotes' tokens.  ANTHROPIC_API_KEY is never among names: it
 * stays on the host.  Nor is CLAUDE_CODE_OAUTH_TOKEN's value: when listed
 * and set it is kept in oauth and the VM gets a new placeholder under its
 * name (docs/proxy.md, "The OAuth login").  Each of cfg's secrets is taken too, and gets a new
 * placeholder (secret_placeholder()), which the VM gets under the secret's
 * name.  The placeholders go in ph_names and ph_values, the other values
 * in names and values.  0, or -EINVAL with the message in err (a git token not set or not
 * printable: broker_tokens_take(); a secret not set or empty:
 * "CFG_PATH:LINE: secrets[i].env: NAME is not set in your shell"; a value
 * that is not 1 to PROXY_SECRET_VALUE_MAX printable ASCII characters: "...
 * NAME holds a value the proxy cannot swap in (...)").
 */
int host_env_take(struct host_env *e, const struct config *cfg, const char *cfg_path,
                  struct buf *err);

/*
 * The env values as the VM takes them, appended to out in framing f by the
 * one writer, guest_secrets_write() (common/base/guest_secrets.h; no copy of a
 * value left anywhere but out, which the caller wipes): the task command's
 * stdin, or aibox run's GUEST_RUN_ENV_VAR.  0, or -EINVAL with err set (a
 * value that is not UTF-8, ...).
 */
int host_env_json(const struct strvec *names, const struct strvec *values,
                  enum guest_secrets_framing f, struct buf *out, struct buf *err);

/*
 * For aibox task, which needs a login (login.h): -ENOKEY with the refusal
 * in msg when the VM would have none.  Else 0, with in warnings one line
 * each: the key next to the token (login_check_task()'s), the key listed but
 * not set, each other name listed but not set.  api gets the VM's login:
 * the key forwarded when listed and set, else the token as it is, else none
 * (enum task_api, task_settings.h).
 */
int host_env_task_login(const struct host_env *e, const char *cfg_path, int *api, struct buf *msg,
                        struct strvec *warnings);

/* Wipe and free every secret of e. */
void host_env_release(struct host_env *e);

/*
 * Before the folder is made: the image named (NULL: "default") is built
 * (its folder appended to image_dir), the config's mounts and presets are
 * sound and the presets' cache marks made rules (config_host_check()), its git: remotes plain
 * https:// URLs whose hosts resolve (broker_remotes_check()).  0, or a negative errno with the
 * first problem in err.
 */
int host_checks(struct config *cfg, const char *image, struct buf *image_dir, struct buf *err);

/*
 * The VM's size, one rule for task and run: --memory and --cpus (memory_mib
 * and cpus, 0 when not given) win over the config's memory and cpus, which
 * have their defaults (docs/config.md).  Sets cfg's.
 */
void host_size(struct config *cfg, uint64_t memory_mib, int cpus);

/*
 * vc's memory, cpus and disk from cfg (after host_size()), its mounts from s;
 * no_mem_merge when AIBOX_MEM_MERGE is 0 (docs/image.md, "KSM").
 */
struct vm_config;
struct shares;
void host_vm_config(struct vm_config *vc, const struct config *cfg, const struct shares *s);

#endif
