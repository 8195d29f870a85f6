/*
 * aibox-broker: git's smart HTTP between the VM and a real remote, holding
 * the token on the host and letting through only what its caller allows.
 *
 * Mechanism without policy: every remote, what it may do and where the
 * token comes from are arguments (one --remote group each).  The broker
 * serves one HTTP request per connection (it always answers
 * "Connection: close"), each in a child process, so a connection that a
 * proxy hands over cannot be reused for anything else.
 *
 * Requests it knows (the path starts with the remote's index, /<n>/):
 *   GET  /<n>/info/refs?service=git-upload-pack    fetch  (needs --fetch)
 *   POST /<n>/git-upload-pack                      fetch  (needs --fetch)
 *   GET  /<n>/info/refs?service=git-receive-pack   push   (needs a --push)
 *   POST /<n>/git-receive-pack                     push: the command list is
 *        read and checked before anything goes upstream
 * The target may also be absolute (http://git.aibox.internal/<n>/...), as a
 * client that talks to a proxy sends it.  See docs/broker.md.
 *
 * This file keeps the options, the setup before the lockdown, listening,
 * the hand-off loop and the children; serving a request is common/broker/broker.c
 * (docs/internals.md, "Broker hand-off", lists where each part lives).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "task/broker_spawn.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/err.h"
#include "net/git_remote.h"
#include "git/gitproto.h"
#include "net/handoff.h"
#include "net/resolve.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/sandbox.h"
#include "base/secret.h"
#include "net/tls.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox-broker --remote URL [--token-env NAME] [--fetch] [--push PATTERN]...\n"
    "                    [--token-fd N]\n"
    "                    [--auth basic|bearer] [--auth-user NAME] [--remote ...]...\n"
    "                    (--listen HOST:PORT | --listen-fd N | --conn-fd N | --handoff-fd N)\n"
    "                    [--log FILE | --log-fd N] [--ready-fd N] [--ca FILE] [--no-sandbox]\n"
    "                    [--client-timeout DURATION]\n"
    "\n"
    "  --remote URL        an https remote; the options up to the next --remote apply to it;\n"
    "                      the first is served under /0/, the next under /1/, ...\n"
    "  --token-env NAME    the environment variable holding its token (read at start);\n"
    "                      without it, requests go to the remote with no credentials\n"
    "  --token-fd N        read the --token-env variables from fd N instead, as\n"
    "                      NAME=value lines up to EOF\n"
    "  --fetch             allow fetch and clone\n"
    "  --push PATTERN      allow pushing branches matching PATTERN ('*' stays within one\n"
    "                      '/' level: aibox/* matches aibox/x); repeatable\n"
    "  --auth basic|bearer how the token is sent (default basic, user x-access-token)\n"
    "  --auth-user NAME    the user name for basic auth\n"
    "  --listen HOST:PORT  listen on TCP (port 0: any; the ready line names it)\n"
    "  --listen-fd N       accept on this listening socket\n"
    "  --conn-fd N         serve the one connection on fd N, then exit\n"
    "  --handoff-fd N      receive connections over this unix socket (SCM_RIGHTS)\n"
    "  --log FILE          append one line per operation (default: stderr)\n"
    "  --log-fd N          the same, to an open fd\n"
    "  --ready-fd N        write \"ready ...\\n\" here once serving, then close it\n"
    "  --ca FILE           trust only the CAs in FILE (for tests; also AIBOX_BROKER_CA)\n"
    "  --no-sandbox        do not lock the process down (seccomp)\n"
    "  --client-timeout DURATION  end a request whose client sends nothing for this\n"
    "                      long (default 30s)\n";

#define CHILDREN_MAX 32

/*
 * With every child busy and a new connection in hand, a child that has
 * waited on its client at least this long is ended to make room
 * (docs/broker.md, "Limits").
 */
#define EVICT_IDLE_MS 2000

/* ---- setup ---- */

static struct broker_remote *cur_remote(struct broker *br, const char *opt)
{
	if (!br->nremotes)
		die("%s must follow a --remote", opt);
	return &br->remotes[br->nremotes - 1];
}

/* rm's URL by the one grammar (common/net/git_remote.h), taken apart. */
static void parse_url(struct broker_remote *rm)
{
	struct git_remote_url u;
	struct buf why = BUF_INIT;

	if (git_remote_url_parse(rm->url, &u, &why) < 0)
		die("remote '%s' %s", rm->url, why.buf);
	rm->host = u.host;
	rm->port = u.port;
	rm->hostport = u.hostport;
	rm->path = u.path;
}

/*
 * rm's URL taken apart and its host looked up, by the proxy's one lookup
 * (common/net/resolve.h): the hosts table, then DNS for the absolute name.
 */
static void setup_remote(struct broker_remote *rm, struct resolver *res)
{
	long port;

	parse_url(rm);
	if (!rm->fetch && !rm->npush)
		warning("remote '%s' allows neither fetch nor push", rm->url);
	if (parse_long(rm->port, 1, 65535, &port) < 0)
		BUG("git_remote_url_parse() let port '%s' through", rm->port);
	resolver_lookup_now(res, rm->host, (int)port, &rm->addrs);
	if (rm->addrs.err)
		die("cannot resolve '%s': %s", rm->host, resolve_strerror(rm->addrs.err));
	broker_remote_credentials(rm);
}

/*
 * Every token: from the NAME=value lines on token_fd when there is one (what
 * aibox task and aibox run send, broker_spawn.h), else from the environment,
 * taken out of it (its bytes wiped: /proc/PID/environ shows the initial
 * block).
 */
static void read_tokens(struct broker *br, int token_fd)
{
	struct buf lines = BUF_INIT, v = BUF_INIT;

	if (token_fd >= 0) {
		ssize_t n = secret_read_fd(token_fd, &lines, SECRET_PIPE_MAX);

		if (n < 0)
			die_err((int)n, "cannot read the tokens from --token-fd");
	}
	for (size_t i = 0; i < br->nremotes; i++) {
		const char *name = br->remotes[i].token_env;
		int found = 0;

		if (!name)
			continue;
		for (size_t j = 0; j < i; j++)
			if (br->remotes[j].token_env && !strcmp(br->remotes[j].token_env, name)) {
				br->remotes[i].token = xstrdup(br->remotes[j].token);
				break;
			}
		if (br->remotes[i].token)
			continue;
		buf_reset(&v);
		if (token_fd >= 0)
			found = broker_token_lookup(lines.buf, lines.len, name, &v);
		else
			found = secret_take_env(name, &v);
		if (!found || !v.len)
			die(token_fd >= 0 ? "the token '%s' is not on --token-fd"
			                  : "the token variable '%s' is not set",
			    name);
		if (!broker_token_ok(v.buf, v.len))
			die("the token in '%s' holds a space or control character", name);
		br->remotes[i].token = xstrdup(v.buf);
	}
	buf_wipe_release(&v);
	buf_wipe_release(&lines);
}

/*
 * The TLS client context (common/net/tls.h), its CAs loaded now: the sandbox
 * forbids opening files later.
 */
static void setup_tls(struct broker *br, const char *ca)
{
	struct buf err = BUF_INIT;

	br->ssl_ctx = tls_client_ctx(ca, &err);
	if (!br->ssl_ctx)
		die("%s", err.buf);
	/* A remote that closes without close_notify still ends an answer read to the end. */
	SSL_CTX_set_options(br->ssl_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
}

static int listen_on(const char *spec, struct buf *addr)
{
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints, *ai;
	char *host;
	int fd, r, one = 1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char hbuf[NI_MAXHOST], pbuf[NI_MAXSERV];

	if (!colon)
		die("--listen wants HOST:PORT, not '%s'", spec);
	host = xstrndup(spec, (size_t)(colon - spec));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	r = getaddrinfo(host, colon + 1, &hints, &ai);
	if (r)
		die("cannot resolve '%s': %s", spec, gai_strerror(r));
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		die_errno("cannot make a socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die_errno("cannot listen on '%s'", spec);
	if (listen(fd, 64) < 0)
		die_errno("cannot listen on '%s'", spec);
	freeaddrinfo(ai);
	free(host);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof(hbuf), pbuf, sizeof(pbuf),
	                NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		buf_addf(addr, strchr(hbuf, ':') ? "[%s]:%s" : "%s:%s", hbuf, pbuf);
	return fd;
}

static void check_fd(int fd, const char *opt)
{
	if (fcntl(fd, F_GETFD) < 0)
		die_errno("%s %d", opt, fd);
}

/* ---- the serving loop ---- */

static volatile sig_atomic_t stop;
static size_t nchildren;
/* One per child, shared with the children (struct broker_slot); pid 0: free. */
static struct broker_slot *slots;

static void on_signal(int sig)
{
	stop = sig;
}

static void reap(int block)
{
	while (nchildren) {
		pid_t p = waitpid(-1, NULL, block ? 0 : WNOHANG);

		if (p <= 0)
			break;
		nchildren--;
		for (size_t i = 0; i < CHILDREN_MAX; i++)
			if (slots[i].pid == p)
				slots[i].pid = 0;
		block = 0;
	}
}

/*
 * Every child is busy and a connection waits: end the child that has waited
 * longest on its client, if that is EVICT_IDLE_MS or more.  1 when one was
 * ended.
 */
static int evict_one(const struct broker *br)
{
	int64_t now = clock_ms(), oldest = 0;
	size_t pick = CHILDREN_MAX;

	for (size_t i = 0; i < CHILDREN_MAX; i++) {
		int64_t since = __atomic_load_n(&slots[i].client_wait_ms, __ATOMIC_RELAXED);

		if (slots[i].pid > 0 && since && now - since >= EVICT_IDLE_MS &&
		    (pick == CHILDREN_MAX || since < oldest)) {
			pick = i;
			oldest = since;
		}
	}
	if (pick == CHILDREN_MAX)
		return 0;
	broker_log(br,
	           "result=refused why=\"every child busy: ended pid %d, which had waited %lld ms "
	           "on its client\"",
	           (int)slots[pick].pid, (long long)(now - oldest));
	(void)kill(slots[pick].pid, SIGKILL);
	return 1;
}

/* Wait until a child is free: reap, ending an idle one (evict_one()) when there is one. */
static void make_room(const struct broker *br)
{
	while (nchildren >= CHILDREN_MAX && !stop) {
		if (evict_one(br)) {
			reap(1);
			continue;
		}
		(void)poll(NULL, 0, 100);
		reap(0);
	}
}

/* Serve fd in a child; closes fd in the parent. */
static void spawn_server(const struct broker *br, int fd, int close_in_child, const char *prefix,
                         size_t plen, long want_idx)
{
	size_t slot = 0;
	pid_t pid;

	make_room(br);
	if (stop) {
		close(fd);
		return;
	}
	while (slots[slot].pid)
		slot++;
	slots[slot].client_wait_ms = 0;
	pid = fork();
	if (pid < 0) {
		broker_log(br, "result=failed why=\"cannot fork: %s\"", strerror(errno));
		close(fd);
		return;
	}
	if (pid == 0) {
		struct broker mine = *br;

		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (close_in_child >= 0)
			close(close_in_child);
		mine.slot = &slots[slot];
		broker_serve(&mine, fd, prefix, plen, want_idx);
		_exit(0);
	}
	slots[slot].pid = pid;
	nchildren++;
	close(fd);
}

/* One hand-off message (common/net/handoff.h).  Returns 0 at the end, else 1. */
static int handoff_one(const struct broker *br, int hfd)
{
	struct handoff_msg *m = xmalloc(sizeof(*m));
	int r = handoff_recv(hfd, m);

	if (r == -EBADMSG)
		broker_log(br, "handoff result=refused why=\"malformed hand-off message\"");
	else if (r < 0 && r != -EINTR)
		broker_log(br, "handoff result=failed why=\"%s\"", strerror(-r));
	else if (r > 0)
		spawn_server(br, m->fd, -1, m->data, m->len, m->remote);
	free(m);
	return r == 0 || (r < 0 && r != -EINTR && r != -EBADMSG) ? 0 : 1;
}

/* Accept or take hand-offs until a signal or the hand-off socket's end. */
static void serve_loop(const struct broker *br, int listen_fd, int handoff_fd)
{
	while (!stop) {
		struct pollfd pfd = {listen_fd >= 0 ? listen_fd : handoff_fd, POLLIN, 0};

		reap(0);
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if (listen_fd >= 0) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0)
				spawn_server(br, fd, listen_fd, NULL, 0, -1);
		} else if (handoff_one(br, handoff_fd) == 0) {
			break;
		}
	}
	/*
	 * At the end of the hand-off socket, let the requests being served
	 * finish.  After a signal, leave: the children die with us
	 * (PR_SET_PDEATHSIG).
	 */
	while (nchildren && !stop)
		reap(1);
}

/* ---- options ---- */

struct options {
	const char *listen_spec, *log_path, *ca;
	int listen_fd, conn_fd, handoff_fd, ready_fd, token_fd, sandbox, nsources;
};

enum {
	O_REMOTE = 256,
	O_TOKEN_ENV,
	O_FETCH,
	O_PUSH,
	O_AUTH,
	O_AUTH_USER,
	O_LISTEN,
	O_LISTEN_FD,
	O_CONN_FD,
	O_HANDOFF_FD,
	O_LOG,
	O_LOG_FD,
	O_READY_FD,
	O_CA,
	O_NO_SANDBOX,
	O_TOKEN_FD,
	O_CLIENT_TIMEOUT,
};

/* An option of the current --remote group. */
static void remote_option(struct broker *br, int opt, const char *arg)
{
	struct broker_remote *rm;

	switch (opt) {
	case O_REMOTE:
		ALLOC_GROW(br->remotes, br->nremotes + 1, br->remotes_alloc);
		memset(&br->remotes[br->nremotes], 0, sizeof(br->remotes[0]));
		br->remotes[br->nremotes++].url = xstrdup(arg);
		break;
	case O_TOKEN_ENV:
		rm = cur_remote(br, "--token-env");
		if (rm->token_env)
			die("remote '%s' has two --token-env", rm->url);
		if (!*arg)
			die("--token-env wants a variable name");
		rm->token_env = arg;
		break;
	case O_FETCH:
		cur_remote(br, "--fetch")->fetch = 1;
		break;
	case O_PUSH:
		rm = cur_remote(br, "--push");
		if (!branch_pattern_ok(arg))
			die("--push '%s' is not a branch name or pattern", arg);
		ALLOC_GROW(rm->push, rm->npush + 1, rm->push_alloc);
		rm->push[rm->npush++] = arg;
		break;
	case O_AUTH:
		rm = cur_remote(br, "--auth");
		if (!strcmp(arg, "basic"))
			rm->auth = BROKER_AUTH_BASIC;
		else if (!strcmp(arg, "bearer"))
			rm->auth = BROKER_AUTH_BEARER;
		else
			die("--auth wants basic or bearer, not '%s'", arg);
		break;
	case O_AUTH_USER:
		rm = cur_remote(br, "--auth-user");
		if (!*arg || strchr(arg, ':'))
			die("--auth-user '%s' is not a user name", arg);
		rm->auth_user = arg;
		break;
	}
}

/* An option that takes an fd number. */
static void fd_option(struct broker *br, struct options *o, int opt, const char *arg,
                      const char *name)
{
	int fd;

	if (parse_fd(arg, &fd) < 0)
		die("'%s' is not an fd number", arg);
	check_fd(fd, name);
	if (opt == O_LISTEN_FD)
		o->listen_fd = fd, o->nsources++;
	else if (opt == O_CONN_FD)
		o->conn_fd = fd, o->nsources++;
	else if (opt == O_HANDOFF_FD)
		o->handoff_fd = fd, o->nsources++;
	else if (opt == O_LOG_FD)
		br->log_fd = fd;
	else if (opt == O_TOKEN_FD)
		o->token_fd = fd;
	else
		o->ready_fd = fd;
}

static void parse_options(int argc, char **argv, struct broker *br, struct options *o)
{
	static const struct opt_spec opts[] = {
	    {"remote", 0, OPT_TEXT, "URL", O_REMOTE,
	     "an https remote; the options up to the next --remote apply to it;"},
	    {"token-env", 0, OPT_TEXT, "NAME", O_TOKEN_ENV,
	     "the environment variable holding its token (read at start);"},
	    {"fetch", 0, OPT_FLAG, NULL, O_FETCH, "allow fetch and clone"},
	    {"push", 0, OPT_TEXT, "PATTERN", O_PUSH,
	     "allow pushing branches matching PATTERN ('*' stays within one"},
	    {"auth", 0, OPT_CHOICE, "basic|bearer", O_AUTH,
	     "how the token is sent (default basic, user x-access-token)"},
	    {"auth-user", 0, OPT_TEXT, "NAME", O_AUTH_USER, "the user name for basic auth"},
	    {"listen", 0, OPT_TEXT, "HOST:PORT", O_LISTEN,
	     "listen on TCP (port 0: any; the ready line names it)"},
	    {"listen-fd", 0, OPT_TEXT, "N", O_LISTEN_FD, "accept on this listening socket"},
	    {"conn-fd", 0, OPT_TEXT, "N", O_CONN_FD, "serve the one connection on fd N, then exit"},
	    {"handoff-fd", 0, OPT_TEXT, "N", O_HANDOFF_FD,
	     "receive connections over this unix socket (SCM_RIGHTS)"},
	    {"log", 0, OPT_FILE, "FILE", O_LOG, "append one line per operation (default: stderr)"},
	    {"log-fd", 0, OPT_TEXT, "N", O_LOG_FD, "the same, to an open fd"},
	    {"ready-fd", 0, OPT_TEXT, "N", O_READY_FD,
	     "write \"ready ...\\n\" here once serving, then close it"},
	    {"ca", 0, OPT_FILE, "FILE", O_CA,
	     "trust only the CAs in FILE (for tests; also AIBOX_BROKER_CA)"},
	    {"no-sandbox", 0, OPT_FLAG, NULL, O_NO_SANDBOX,
	     "do not lock the process down (seccomp)"},
	    {"token-fd", 0, OPT_TEXT, "N", O_TOKEN_FD,
	     "read the --token-env variables from fd N instead, as"},
	    {"client-timeout", 0, OPT_DURATION, "DURATION", O_CLIENT_TIMEOUT,
	     "end a request whose client sends nothing for this"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT, name = BUF_INIT;
	const char *v;
	int opt;

	while ((opt = opt_parse(argc, argv, opts, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(opts);
		switch (opt) {
		case O_REMOTE:
		case O_TOKEN_ENV:
		case O_FETCH:
		case O_PUSH:
		case O_AUTH:
		case O_AUTH_USER:
			remote_option(br, opt, v);
			break;
		case O_LISTEN:
			o->listen_spec = v;
			o->nsources++;
			break;
		case O_LISTEN_FD:
		case O_CONN_FD:
		case O_HANDOFF_FD:
		case O_LOG_FD:
		case O_READY_FD:
		case O_TOKEN_FD:
			buf_reset(&name);
			buf_addf(&name, "--%s", opt_spec_of(opts, opt)->name);
			fd_option(br, o, opt, v, name.buf);
			break;
		case O_LOG:
			o->log_path = v;
			break;
		case O_CA:
			o->ca = v;
			break;
		case O_NO_SANDBOX:
			o->sandbox = 0;
			break;
		case O_CLIENT_TIMEOUT: {
			struct buf dwhy = BUF_INIT;

			if (duration_arg("client-timeout", v, 1000, 3600000, &br->client_timeout_ms,
			                 &dwhy) < 0)
				die("%s", dwhy.buf);
			buf_release(&dwhy);
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_WORD:
			error("unexpected argument '%s'", v);
			usage_die(usage_text);
		default:
			error("%s", why.buf);
			usage_die(usage_text);
		}
	}
	if (optind != argc) {
		error("unexpected argument '%s'", argv[optind]);
		usage_die(usage_text);
	}
	if (!br->nremotes)
		usage_die(usage_text);
	buf_release(&why);
	buf_release(&name);
	if (o->nsources != 1)
		die("give exactly one of --listen, --listen-fd, --conn-fd and --handoff-fd");
	if (!o->ca)
		o->ca = getenv("AIBOX_BROKER_CA");
	if (o->ca && !*o->ca)
		o->ca = NULL;
}

/*
 * Everything opened before the lockdown: tokens, DNS, TLS, the log, the
 * listening socket (its address into addr).
 */
static void start(struct broker *br, struct options *o, struct buf *addr)
{
	struct buf err = BUF_INIT;
	struct resolver *res = resolver_new_default(0, &err);

	if (!res)
		die("%s", err.buf);
	read_tokens(br, o->token_fd);
	for (size_t i = 0; i < br->nremotes; i++)
		setup_remote(&br->remotes[i], res);
	resolver_free(res);
	buf_release(&err);
	setup_tls(br, o->ca);
	if (o->log_path) {
		br->log_fd = open(o->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (br->log_fd < 0)
			die_errno("cannot open '%s'", o->log_path);
	}
	if (o->listen_spec)
		o->listen_fd = listen_on(o->listen_spec, addr);
	slots = mmap(NULL, CHILDREN_MAX * sizeof(*slots), PROT_READ | PROT_WRITE,
	             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED)
		die_errno("cannot map the children's slots");
	br->log_count = mmap(NULL, sizeof(*br->log_count), PROT_READ | PROT_WRITE,
	                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (br->log_count == MAP_FAILED)
		die_errno("cannot map the log's count");
	br->ref_checks = mmap(NULL, sizeof(*br->ref_checks), PROT_READ | PROT_WRITE,
	                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (br->ref_checks == MAP_FAILED)
		die_errno("cannot map the count of ref checks");
	if (o->handoff_fd >= 0) {
		int type;
		socklen_t tl = sizeof(type);

		if (getsockopt(o->handoff_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
		    type != SOCK_SEQPACKET)
			die("--handoff-fd %d is not a unix SOCK_SEQPACKET socket", o->handoff_fd);
	}
}

int main(int argc, char **argv)
{
	struct broker br = {.log_fd = 2, .client_timeout_ms = BROKER_CLIENT_TIMEOUT_MS};
	struct options o = {.listen_fd = -1,
	                    .conn_fd = -1,
	                    .handoff_fd = -1,
	                    .ready_fd = -1,
	                    .token_fd = -1,
	                    .sandbox = 1};
	struct buf addr = BUF_INIT;
	struct sigaction sa;
	int r;

	tool_init(argc, argv);
	parse_options(argc, argv, &br, &o);
	start(&br, &o, &addr);
	if (o.sandbox) {
		r = sandbox_lockdown(SANDBOX_SECCOMP, 0);
		if (r < 0)
			die_err(r, "cannot lock down");
	}
	for (size_t i = 0; i < br.nremotes; i++)
		broker_log(&br, "start remote=%zu url=%s fetch=%s push=%zu", i, br.remotes[i].url,
		           br.remotes[i].fetch ? "yes" : "no", br.remotes[i].npush);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (o.ready_fd >= 0) {
		struct buf line = BUF_INIT;

		buf_addf(&line, "ready%s%s\n", addr.len ? " " : "", addr.buf);
		(void)write_all(o.ready_fd, line.buf, line.len);
		close(o.ready_fd);
		buf_release(&line);
	}
	if (o.conn_fd >= 0) {
		broker_serve(&br, o.conn_fd, NULL, 0, -1);
	} else {
		serve_loop(&br, o.listen_fd, o.handoff_fd);
		broker_log_stop(&br);
	}
	/*
	 * Nothing is buffered (the log is written with write()); leave without
	 * atexit handlers, which under the sandbox can do nothing useful (a
	 * sanitizer build's leak check cannot read /proc and would fail).
	 */
	if (o.sandbox)
		_exit(0);
	return 0;
}
