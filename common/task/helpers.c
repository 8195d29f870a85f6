/* The host's helpers: aibox-broker and aibox-proxy (helpers.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "task/broker_spawn.h"
#include "base/buf.h"
#include "base/clock.h"
#include "config/config.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "task/helpers.h"
#include "base/paths.h"
#include "proxy/proxy_report.h"
#include "proxy/proxy_secrets.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "proxy/spend.h"
#include "base/strvec.h"
#include "base/banned.h"

/* A ready line's cap: "ready unix:PATH" is far shorter. */
#define READY_MAX 4096

/* Close those of fds[0..n) that are open (>= 0). */
static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int forwards_key(const struct helpers_opts *o)
{
	return o->api_key && o->api_key->len;
}

/*
 * The secrets' values, when there is one for each of the config's secrets
 * (a Slurm node has none: docs/slurm.md), else NULL.
 */
static const struct strvec *secret_values(const struct helpers_opts *o)
{
	if (!o->cfg->nr_secrets || !o->secret_values || !o->placeholders ||
	    o->secret_values->nr != o->cfg->nr_secrets || o->placeholders->nr != o->cfg->nr_secrets)
		return NULL;
	return o->secret_values;
}

/* The proxy intercepts: the config has secrets (their values given) or allow rules. */
static int intercepts(const struct helpers_opts *o)
{
	return secret_values(o) || o->cfg->nr_rules;
}

/* The subscription's token goes to the proxy, with the secrets. */
static int forwards_oauth(const struct helpers_opts *o)
{
	if (o->oauth && o->oauth->len && forwards_key(o))
		BUG("both the key and the token for the API");
	return o->oauth && o->oauth->len;
}

/* Append "opt fd" to args: an fd number of helpers.h, spelled once. */
static void push_fd(struct strvec *args, const char *opt, int fd)
{
	strvec_push(args, opt);
	strvec_pushf(args, "%d", fd);
}

void helpers_broker_args(struct spawn *sp, const char *prog, const struct helpers_opts *o)
{
	if (!o->cfg->nr_git)
		return;
	strvec_push(&sp->args, prog);
	broker_spawn_remotes(sp, o->cfg->git, o->cfg->nr_git, &o->cfg->env);
	push_fd(&sp->args, "--handoff-fd", HELPER_B_HANDOFF);
	push_fd(&sp->args, "--log-fd", HELPER_B_LOG);
	push_fd(&sp->args, "--ready-fd", HELPER_B_READY);
	push_fd(&sp->args, "--token-fd", HELPER_B_TOKENS);
	if (o->no_sandbox)
		strvec_push(&sp->args, "--no-sandbox");
}

/* A rule of the config has a cache kind (docs/cache.md). */
static int caches(const struct helpers_opts *o)
{
	for (size_t i = 0; i < o->cfg->nr_rules; i++)
		if (o->cfg->rules[i].cache)
			return 1;
	return 0;
}

void helpers_proxy_args(struct strvec *args, const char *prog, const struct helpers_opts *o,
                        int with_broker)
{
	strvec_push(args, prog);
	push_fd(args, "--listen-fd", HELPER_P_LISTEN);
	push_fd(args, "--log-fd", HELPER_P_LOG);
	push_fd(args, "--ready-fd", HELPER_P_READY);
	if (o->report)
		push_fd(args, "--report-fd", HELPER_P_REPORT);
	for (size_t i = 0; i < o->cfg->allow.nr; i++)
		strvec_pushl(args, "--allow", o->cfg->allow.v[i], NULL);
	if (forwards_key(o)) {
		push_fd(args, "--key-fd", HELPER_P_KEY);
		if (o->spend)
			spend_proxy_args(o->spend, args, HELPER_P_LEDGER, HELPER_P_USER_LEDGER);
	}
	if (with_broker)
		push_fd(args, "--broker-fd", HELPER_P_BROKER);
	if (intercepts(o) || forwards_oauth(o))
		push_fd(args, "--secrets-fd", HELPER_P_SECRETS);
	if (intercepts(o))
		push_fd(args, "--ca-fd", HELPER_P_CA);
	if (intercepts(o) && caches(o)) {
		strvec_pushl(args, "--cache-dir", deps_cache_dir(), "--cache-key",
		             deps_scope_key_file(), NULL);
		if (o->cache_max)
			strvec_pushf(args, "--cache-max=%llu", (unsigned long long)o->cache_max);
		if (o->cache_scope)
			strvec_pushl(args, "--cache-scope", o->cache_scope, NULL);
	}
	if (o->no_sandbox)
		strvec_push(args, "--no-sandbox");
}

/* Read a child's ready line from fd, then close fd: 0 when it starts with "ready". */
static int read_ready(int fd)
{
	struct buf line = BUF_INIT;
	ssize_t n = buf_read_fd(&line, fd, READY_MAX);
	int ok = n > 0 && !strncmp(line.buf, "ready", 5);

	close(fd);
	buf_release(&line);
	return ok ? 0 : -ECHILD;
}

/*
 * Start sp, its ready pipe's write end given as fd 5 and err_fd (above 2) as
 * its stderr, and wait for its ready line; both ends of ready are closed (and
 * set to -1).
 */
static int start_one(struct spawn *sp, int ready[2], const char *name, int err_fd, struct buf *err)
{
	int ret;

	sp->in = SPAWN_NULL;
	sp->out = SPAWN_NULL;
	if (err_fd > 2)
		sp->err = err_fd;
	sp->pdeathsig = SIGKILL;
	sp->new_session = 1;
	spawn_give_fd(sp, ready[1], HELPER_B_READY);
	ret = spawn_start(sp);
	/* Only the child holds the write end now: its exit is our EOF. */
	close(ready[1]);
	if (ret < 0) {
		close(ready[0]);
		buf_addf(err, "cannot start '%s': %s", sp->args.v[0], strerror(-ret));
	} else if ((ret = read_ready(ready[0])) < 0) {
		buf_addf(err, "%s did not start (see its messages above)", name);
	}
	ready[0] = ready[1] = -1;
	return ret;
}

static int start_broker(struct helpers *h, const struct helpers_opts *o, int *proxy_end,
                        struct buf *err)
{
	struct buf prog = BUF_INIT;
	int sv[2] = {-1, -1}, ready[2] = {-1, -1}, tfd = -1, ret;

	buf_addf(&prog, "%s/aibox-broker", libexec_dir());
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(ready, O_CLOEXEC) < 0) {
		ret = -errno;
		buf_addf(err, "cannot make a socket pair or pipe: %s", strerror(errno));
		goto out;
	}
	if ((tfd = secret_pipe(o->tokens ? o->tokens->buf : "", o->tokens ? o->tokens->len : 0)) <
	    0) {
		ret = tfd;
		buf_addf(err, "cannot pass the git tokens to aibox-broker: %s", strerror(-ret));
		goto out;
	}
	helpers_broker_args(&h->broker, prog.buf, o);
	spawn_give_fd(&h->broker, sv[0], HELPER_B_HANDOFF);
	spawn_give_fd(&h->broker, o->broker_log_fd, HELPER_B_LOG);
	spawn_give_fd(&h->broker, tfd, HELPER_B_TOKENS);
	ret = start_one(&h->broker, ready, "aibox-broker", o->err_fd, err);
	if (ret == 0) {
		*proxy_end = sv[1];
		sv[1] = -1;
	}
out:
	close_fds((int[]){sv[0], sv[1], ready[0], ready[1], tfd}, 5);
	buf_release(&prog);
	return ret;
}

/* A unix socket listening on path (which must not exist). */
static int listen_unix(const char *path, struct buf *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	int fd, ret;

	if (n >= sizeof(sa.sun_path)) {
		buf_addf(err, "the path is too long for a socket: '%s'", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, n + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		ret = -errno;
		buf_addf(err, "cannot listen on '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	return fd;
}

static int start_proxy(struct helpers *h, const struct helpers_opts *o, int broker_end,
                       struct buf *err)
{
	struct buf prog = BUF_INIT;
	int lfd = -1, ready[2] = {-1, -1}, rep[2] = {-1, -1}, kfd = -1, sfd = -1, ret;
	int ca[2] = {-1, -1};

	buf_addf(&prog, "%s/aibox-proxy", libexec_dir());
	if ((lfd = ret = listen_unix(o->sock_path, err)) < 0)
		goto out;
	if (pipe2(ready, O_CLOEXEC) < 0 || (o->report && pipe2(rep, O_CLOEXEC) < 0)) {
		ret = -errno;
		buf_addf(err, "cannot make a pipe: %s", strerror(errno));
		goto out;
	}
	if (forwards_key(o) && (kfd = secret_pipe(o->api_key->buf, o->api_key->len)) < 0) {
		ret = kfd;
		buf_addf(err, "cannot pass the API key to aibox-proxy: %s", strerror(-ret));
		goto out;
	}
	if (intercepts(o) || forwards_oauth(o)) {
		struct buf text = BUF_INIT;
		struct swap_secret api = {"CLAUDE_CODE_OAUTH_TOKEN", o->oauth_placeholder,
		                          forwards_oauth(o) ? o->oauth->buf : NULL};

		proxy_secrets_write(o->cfg, secret_values(o), o->placeholders,
		                    api.value ? &api : NULL, &text);
		sfd = secret_pipe(text.buf, text.len);
		buf_wipe_release(&text);
		if (sfd < 0 || (intercepts(o) && pipe2(ca, O_CLOEXEC) < 0)) {
			ret = sfd < 0 ? sfd : -errno;
			buf_addf(err, "cannot pass the secrets to aibox-proxy: %s", strerror(-ret));
			goto out;
		}
		spawn_give_fd(&h->proxy, sfd, HELPER_P_SECRETS);
		if (ca[1] >= 0)
			spawn_give_fd(&h->proxy, ca[1], HELPER_P_CA);
	}
	helpers_proxy_args(&h->proxy.args, prog.buf, o, broker_end >= 0);
	spawn_give_fd(&h->proxy, lfd, HELPER_P_LISTEN);
	spawn_give_fd(&h->proxy, o->proxy_log_fd, HELPER_P_LOG);
	if (broker_end >= 0)
		spawn_give_fd(&h->proxy, broker_end, HELPER_P_BROKER);
	if (o->report)
		spawn_give_fd(&h->proxy, rep[1], HELPER_P_REPORT);
	if (kfd >= 0) {
		spawn_give_fd(&h->proxy, kfd, HELPER_P_KEY);
		if (o->spend && o->spend->ledger_fd >= 0)
			spawn_give_fd(&h->proxy, o->spend->ledger_fd, HELPER_P_LEDGER);
		if (o->spend && o->spend->user_ledger_fd >= 0)
			spawn_give_fd(&h->proxy, o->spend->user_ledger_fd, HELPER_P_USER_LEDGER);
	}
	ret = start_one(&h->proxy, ready, "aibox-proxy", o->err_fd, err);
	if (ca[1] >= 0) {
		/* The proxy wrote it before its ready line; a pipe holds it whole. */
		close(ca[1]);
		ca[1] = -1;
		if (ret == 0 && buf_read_fd(&h->ca_pem, ca[0], GUEST_CA_PEM_MAX) <= 0) {
			buf_addstr(err, "aibox-proxy gave no CA certificate");
			ret = -EPROTO;
		} else if (ret == 0 && !guest_ca_pem_valid(h->ca_pem.buf, h->ca_pem.len)) {
			buf_addstr(err, "aibox-proxy's CA certificate is not one PEM certificate");
			ret = -EPROTO;
		}
	}
	if (ret == 0 && o->report) {
		h->report_fd = rep[0];
		rep[0] = -1;
	}
out:
	close_fds((int[]){ready[0], ready[1], rep[0], rep[1], lfd, kfd, sfd, ca[0], ca[1]}, 9);
	buf_release(&prog);
	return ret;
}

int helpers_ca_write(const struct helpers *h, const char *dir, struct buf *err)
{
	struct buf path = BUF_INIT;
	int fd, ret = 0;

	if (!h->ca_pem.len)
		return 0;
	buf_addf(&path, "%s/" GUEST_FILE_TASK_CA, dir);
	fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || (ret = write_all(fd, h->ca_pem.buf, h->ca_pem.len)) < 0) {
		ret = fd < 0 ? -errno : ret;
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
	}
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	return ret;
}

int helpers_start(struct helpers *h, const struct helpers_opts *o, struct buf *err)
{
	int broker_end = -1, ret = 0;

	if (o->cfg->nr_git)
		ret = start_broker(h, o, &broker_end, err);
	if (o->tokens)
		buf_wipe_release(o->tokens);
	if (ret == 0)
		ret = start_proxy(h, o, broker_end, err);
	if (o->api_key)
		buf_wipe_release(o->api_key);
	if (o->oauth)
		buf_wipe_release(o->oauth);
	/* Only the proxy holds it now: when the proxy ends, the broker sees it. */
	if (broker_end >= 0)
		close(broker_end);
	if (ret < 0)
		helpers_stop(h);
	return ret;
}

int helpers_stop_proxy(struct helpers *h, struct proxy_report *rep, struct buf *err)
{
	struct buf rec = BUF_INIT;
	int64_t t0, used;
	int ret = -1, r;

	if (h->proxy.pid <= 0 || h->report_fd < 0) {
		buf_addstr(err, "aibox-proxy was not running");
		return -1;
	}
	t0 = clock_ms();
	kill(h->proxy.pid, SIGTERM);
	r = (int)buf_read_fd_within(&rec, h->report_fd, PROXY_REPORT_MAX, HELPERS_PROXY_STOP_MS);
	close(h->report_fd);
	h->report_fd = -1;
	used = clock_ms() - t0;
	spawn_wait_within(&h->proxy,
	                  used < HELPERS_PROXY_STOP_MS ? HELPERS_PROXY_STOP_MS - (int)used : 0);
	if (r == -ETIMEDOUT)
		buf_addf(err, "aibox-proxy gave no record within %d s",
		         HELPERS_PROXY_STOP_MS / 1000);
	else if (r == -EFBIG)
		buf_addf(err, "aibox-proxy's record is over %d bytes", PROXY_REPORT_MAX);
	else if (r < 0)
		buf_addf(err, "cannot read aibox-proxy's record: %s", strerror(-r));
	else if (!rec.len)
		buf_addstr(err, "aibox-proxy gave no record");
	else if (proxy_report_parse(rec.buf, rec.len, rep, err) == 0)
		ret = 0;
	buf_release(&rec);
	return ret;
}

void helpers_stop(struct helpers *h)
{
	if (h->report_fd >= 0)
		close(h->report_fd);
	h->report_fd = -1;
	spawn_stop(&h->proxy, SIGTERM);
	spawn_stop(&h->broker, SIGTERM);
	spawn_clear(&h->proxy);
	spawn_clear(&h->broker);
	buf_release(&h->ca_pem);
}
