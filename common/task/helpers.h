/*
 * The host's helpers of a task or a run: aibox-broker (only with git:
 * entries) and aibox-proxy, started one way for aibox task and aibox run
 * (docs/internals.md, "The host layer").
 *
 * Both get their fds at fixed numbers (enum helpers_fds below, the one
 * spelling of them) and nothing through their environment.  Each runs in
 * a session of its own with SIGKILL as its parent-death signal, so neither
 * outlives its aibox; each is waited for until its ready line.
 *
 *	struct helpers h = HELPERS_INIT;
 *	struct helpers_opts o = { .cfg = &cfg, .sock_path = ..., ... };
 *	if (helpers_start(&h, &o, &err) < 0) die("%s", err.buf);
 *	... the VM ...
 *	helpers_stop_proxy(&h, &report, &why);   (a task: the proxy's record)
 *	helpers_stop(&h);
 */
#ifndef AIBOX_HELPERS_H
#define AIBOX_HELPERS_H

#include <stdint.h>

#include "base/buf.h"
#include "base/spawn.h"

/*
 * The helpers' fd numbers: the broker --handoff-fd, --log-fd, --ready-fd,
 * --token-fd; the proxy --listen-fd (a unix socket bound here), --log-fd,
 * --ready-fd, --broker-fd (the other end of the broker's hand-off pair),
 * --report-fd, --key-fd and the spend ledgers when the key is forwarded,
 * --secrets-fd and --ca-fd when the config has secrets or allow rules
 * (--secrets-fd alone for the subscription's token).
 */
enum helpers_fds {
	HELPER_B_HANDOFF = 3,
	HELPER_B_LOG,
	HELPER_B_READY,
	HELPER_B_TOKENS,
	HELPER_P_LISTEN = 3,
	HELPER_P_LOG,
	HELPER_P_READY,
	HELPER_P_BROKER,
	HELPER_P_REPORT,
	HELPER_P_KEY,
	HELPER_P_LEDGER,
	HELPER_P_SECRETS,
	HELPER_P_CA,
	HELPER_P_USER_LEDGER,
};

struct config;
struct spend;
struct strvec;
struct proxy_report;

struct helpers_opts {
	const struct config *cfg; /* its allow list, git: entries and env names */
	const char *sock_path;    /* the proxy's unix socket, bound by helpers_start() */
	int proxy_log_fd;         /* proxy.log, opened by the caller (and closed by it) */
	int broker_log_fd;        /* broker.log, with git: entries; else unused */
	/*
	 * The key the proxy forwards, or NULL (or empty): no --key-fd.  It goes
	 * over a pipe and is wiped here once the proxy has it.
	 */
	struct buf *api_key;
	const struct spend *spend; /* with api_key: the caps and the ledger (spend.h) */
	/* broker_tokens_take()'s lines (broker_spawn.h): passed on, then wiped. */
	struct buf *tokens;
	/*
	 * Above 2: an fd of ours both get as their stderr (aibox task's relay,
	 * common/base/out.h, so that each of their lines has its prefix); else they
	 * share our stderr.
	 */
	int err_fd;
	/*
	 * The values and placeholders of cfg's secrets, in its order (struct
	 * host_env's): with them, or with allow rules, the proxy gets the
	 * secrets and rules over a pipe (common/proxy/proxy_secrets.h) and intercepts
	 * their hosts.  NULL, or not one for each secret: the rules only.
	 */
	const struct strvec *secret_values, *placeholders;
	/*
	 * The subscription's token (NULL or empty: none) and its placeholder:
	 * the proxy forwards the API with it as "Authorization: Bearer", never
	 * with a key (api_key must then be NULL).  It goes with the secrets
	 * (--secrets-fd, as the "api bearer" secret) and is wiped here once the
	 * proxy has it.
	 */
	struct buf *oauth;
	const char *oauth_placeholder;
	int report; /* a pipe for the proxy's record (read by helpers_stop_proxy()) */
	/*
	 * With a rule that has a cache kind: the dependency cache's scope for
	 * artifacts fetched with a secret (the project's; docs/cache.md), or
	 * NULL: those are not kept.  The store and its cap are the user's
	 * (deps_cache_dir(), deps_cache_max_file()).
	 */
	const char *cache_scope;
	uint64_t cache_max; /* the cap read from deps_cache_max_file(); 0: the default */
	int no_sandbox;     /* --no-sandbox for both */
};

struct helpers {
	struct spawn proxy, broker;
	int report_fd; /* the read end of the proxy's --report-fd, or -1 */
	/* The task CA's certificate (PEM) when the proxy intercepts, else empty. */
	struct buf ca_pem;
};

#define HELPERS_INIT                                                                               \
	{                                                                                          \
		SPAWN_INIT, SPAWN_INIT, -1, BUF_INIT                                               \
	}

/*
 * When the proxy intercepts: write h's CA certificate (checked by
 * helpers_start() with guest_ca_pem_valid()) to dir/GUEST_FILE_TASK_CA, a new
 * file, for the guest to trust (docs/proxy.md).  Without a CA: nothing.  0,
 * or a negative errno with the message in err.
 */
int helpers_ca_write(const struct helpers *h, const char *dir, struct buf *err);

/* How long helpers_stop_proxy() waits for the record, then for the proxy. */
#define HELPERS_PROXY_STOP_MS 5000

/*
 * The argv of each helper, prog first, as helpers_start() runs it: pure, for
 * tests.  The broker's is empty without git: entries, and its sp->env gets
 * the names it must not inherit (broker_spawn_remotes()); with_broker says
 * the proxy gets --broker-fd.
 */
void helpers_broker_args(struct spawn *sp, const char *prog, const struct helpers_opts *o);
void helpers_proxy_args(struct strvec *args, const char *prog, const struct helpers_opts *o,
                        int with_broker);

/*
 * Start the broker (when o->cfg has git: entries) and then the proxy, and
 * wait for each one's ready line.  0, or a negative errno with the message
 * in err ("aibox-proxy did not start (see its messages above)", ...); what
 * did start is then stopped.  o->api_key, o->oauth and o->tokens are wiped
 * either way.
 */
int helpers_start(struct helpers *h, const struct helpers_opts *o, struct buf *err);

/*
 * Stop the proxy in order: SIGTERM (it ends its connections and writes its
 * record), the record read within HELPERS_PROXY_STOP_MS, then the proxy
 * waited for (SIGKILL at the same deadline).  0 with the record in rep, or
 * -1 with err set (no record, a refused one, ...): the proxy is stopped
 * either way.
 */
int helpers_stop_proxy(struct helpers *h, struct proxy_report *rep, struct buf *err);

/* SIGTERM to what still runs, the proxy first, and wait; frees h's args. */
void helpers_stop(struct helpers *h);

#endif
