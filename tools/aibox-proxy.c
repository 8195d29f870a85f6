/*
 * aibox-proxy: a task's only way out, with the API key kept on the host.
 * See docs/proxy.md and docs/man/aibox-proxy.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "net/allow.h"
#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "net/http.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/paths.h"
#include "base/log_cap.h"
#include "proxy/proxy.h"
#include "proxy/proxy_report.h"
#include "proxy/proxy_secrets.h"
#include "net/resolve.h"
#include "base/sandbox.h"
#include "net/dep_cache.h"
#include "base/secret.h"
#include "base/spawn.h"
#include "net/task_ca.h"
#include "net/tls.h"
#include "config/usage.h"
#include <openssl/crypto.h>
#include "base/banned.h"

static const char usage[] =
    "usage: aibox-proxy [--listen HOST:PORT | --listen unix:PATH | --listen-fd N]\n"
    "                   [--allow ENTRY]... [--allow-file FILE] [--log FILE | --log-fd N]\n"
    "                   [--log-max BYTES] [--report-fd N]\n"
    "                   [--key-env NAME | --key-fd N] [--ready-fd N] [--presets DIR]\n"
    "                   [--header-timeout T] [--idle-timeout T] [--connect-timeout T]\n"
    "                   [--max-conns N] [--api-pool N] [--api-pool-idle T]\n"
    "                   [--drain-timeout T] [--drain-max BYTES] [--fill-wait T]\n"
    "                   [--secrets-fd N [--ca-fd N] [--ca-valid T]\n"
    "                    [--cache-dir DIR [--cache-max SIZE] [--cache-scope S]\n"
    "                     [--cache-key FILE]]]\n"
    "                   [--broker-fd N] [--prices FILE] [--budget-task USD]\n"
    "                   [--budget-day USD --ledger-fd N]\n"
    "                   [--budget-user USD --user-ledger-fd N] [--no-sandbox]\n"
    "\n"
    "  --listen ADDR        listen on HOST:PORT (an IP address or localhost; default\n"
    "                       127.0.0.1:3128) or on the unix socket unix:PATH\n"
    "  --listen-fd N        accept on the listening socket N instead\n"
    "  --allow ENTRY        allow host, host:port, *.domain, an IP literal or preset:NAME\n"
    "  --allow-file FILE    allow the entries in FILE, one a line\n"
    "  --log FILE           append one line per request or tunnel to FILE\n"
    "  --log-fd N           write those lines to fd N\n"
    "  --log-max BYTES      write at most BYTES of log lines, then count them\n"
    "                       (default " LOG_CAP_MIB_TEXT "; 0: no cap)\n"
    "  --report-fd N        when told to stop, write the record (what the VM\n"
    "                       reached, counted; one JSON object) to fd N\n"
    "  --key-env NAME       forward 127.0.0.1:3129 to the API with the key in $NAME\n"
    "  --key-fd N           the same with the key read from fd N (to its EOF)\n"
    "  --ready-fd N         write \"ready ADDR\" to fd N once listening, then close it\n"
    "  --presets DIR        read preset:NAME from DIR/NAME (default: aibox's data)\n"
    "  --header-timeout T   time for a request head to arrive (default 30s; T a\n"
    "                       duration with its unit: 500ms, 30s, 10m, 1h)\n"
    "  --idle-timeout T     time a tunnel or connection may sit idle (default 600s)\n"
    "  --connect-timeout T  time to resolve, connect and shake hands (default 30s)\n"
    "  --max-conns N        connections at once (default 10000)\n"
    "  --api-pool N         keep up to N idle TLS connections to the API upstream\n"
    "                       for the next request (default 4; 0: one per request)\n"
    "  --api-pool-idle T    close an idle pooled connection (the API's, or one kept\n"
    "                       for the proxy's own metadata fetches) after T (default 20s)\n"
    "  --drain-timeout T    read a paid answer whose client went away for at most T\n"
    "                       (default 10m)\n"
    "  --drain-max BYTES    ... and at most BYTES of it (default 64M)\n"
    "  --fill-wait T        wait at most T for another task's fill of an artifact\n"
    "                       before fetching it unstored (default 30s)\n"
    "  --secrets-fd N       the secrets and rules to apply, read from fd N (to its\n"
    "                       EOF); their hosts are intercepted (docs/proxy.md); a\n"
    "                       secret marked 'api bearer' is forwarded to the API\n"
    "                       as Authorization: Bearer, in place of a key\n"
    "  --ca-fd N            write the task CA's certificate (PEM) to fd N, then\n"
    "                       close it\n"
    "  --ca-valid T         how long the task CA is valid (default 7 days)\n"
    "  --cache-dir DIR      the dependency cache (docs/cache.md) for the rules'\n"
    "                       cache kinds; files are then written after the lockdown\n"
    "  --cache-max SIZE     its cap (default 4G)\n"
    "  --cache-scope S      keep artifacts fetched with a secret under scope S\n"
    "                       (without it they are not kept)\n"
    "  --cache-key FILE     the key of secrets' scopes, outside the store (made\n"
    "                       when missing; without it, what a secret's value\n"
    "                       fetched is not kept)\n"
    "  --own-fetch-max N    begin at most N metadata fetches of the proxy's own in\n"
    "                       the task (default 20000, at most 100000; for tests)\n"
    "  --broker-fd N        hand requests for git.aibox.internal to aibox-broker over\n"
    "                       the unix SOCK_SEQPACKET socket N (its --handoff-fd)\n"
    "  --prices FILE        count key forwarding's spend with this price table\n"
    "                       (default: aibox's share/prices with ~/.aibox/prices over it)\n"
    "  --budget-task USD    refuse paid API requests once this task spent USD\n"
    "  --budget-day USD     refuse them once the day's ledger reached USD\n"
    "  --ledger-fd N        add each cost to the day's ledger open on fd N\n"
    "  --budget-user USD    refuse them once the user's ledger reached USD\n"
    "  --user-ledger-fd N   add each cost to the user's day ledger open on fd N too\n"
    "  --no-sandbox         do not lock the process down with seccomp\n"
    "\n"
    "T is a duration with its unit (500ms, 30s, 10m, 1h); a bare number other than 0\n"
    "is refused, as in every aibox tool.\n";

enum {
	OPT_LISTEN = 256,
	OPT_LISTEN_FD,
	OPT_ALLOW,
	OPT_ALLOW_FILE,
	OPT_LOG,
	OPT_LOG_FD,
	OPT_LOG_MAX,
	OPT_REPORT_FD,
	OPT_KEY_ENV,
	OPT_KEY_FD,
	OPT_READY_FD,
	OPT_PRESETS,
	OPT_HEADER_TIMEOUT,
	OPT_IDLE_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_MAX_CONNS,
	OPT_OWN_FETCH_MAX,
	OPT_API_POOL,
	OPT_API_POOL_IDLE,
	OPT_DRAIN_TIMEOUT,
	OPT_DRAIN_MAX,
	OPT_FILL_WAIT,
	OPT_BROKER_FD,
	OPT_SECRETS_FD,
	OPT_CA_FD,
	OPT_CA_VALID,
	OPT_CACHE_DIR,
	OPT_CACHE_MAX,
	OPT_CACHE_SCOPE,
	OPT_CACHE_KEY,
	OPT_PRICES,
	OPT_BUDGET_TASK,
	OPT_BUDGET_DAY,
	OPT_LEDGER_FD,
	OPT_BUDGET_USER,
	OPT_USER_LEDGER_FD,
	OPT_NO_SANDBOX,
};

static const struct opt_spec options[] = {
    {"listen", 0, OPT_TEXT, "ADDR", OPT_LISTEN,
     "listen on HOST:PORT (an IP address or localhost; default"},
    {"listen-fd", 0, OPT_TEXT, "N", OPT_LISTEN_FD, "accept on the listening socket N instead"},
    {"allow", 0, OPT_TEXT, "ENTRY", OPT_ALLOW,
     "allow host, host:port, *.domain, an IP literal or preset:NAME"},
    {"allow-file", 0, OPT_FILE, "FILE", OPT_ALLOW_FILE, "allow the entries in FILE, one a line"},
    {"log", 0, OPT_FILE, "FILE", OPT_LOG, "append one line per request or tunnel to FILE"},
    {"log-fd", 0, OPT_TEXT, "N", OPT_LOG_FD, "write those lines to fd N"},
    {"log-max", 0, OPT_TEXT, "BYTES", OPT_LOG_MAX,
     "write at most BYTES of log lines, then count them"},
    {"report-fd", 0, OPT_TEXT, "N", OPT_REPORT_FD,
     "when told to stop, write the record (what the VM"},
    {"key-env", 0, OPT_TEXT, "NAME", OPT_KEY_ENV,
     "forward 127.0.0.1:3129 to the API with the key in $NAME"},
    {"key-fd", 0, OPT_TEXT, "N", OPT_KEY_FD, "the same with the key read from fd N (to its EOF)"},
    {"ready-fd", 0, OPT_TEXT, "N", OPT_READY_FD,
     "write \"ready ADDR\" to fd N once listening, then close it"},
    {"presets", 0, OPT_FILE, "DIR", OPT_PRESETS,
     "read preset:NAME from DIR/NAME (default: aibox's data)"},
    {"header-timeout", 0, OPT_DURATION, "T", OPT_HEADER_TIMEOUT,
     "time for a request head to arrive (default 30s; T a"},
    {"idle-timeout", 0, OPT_DURATION, "T", OPT_IDLE_TIMEOUT,
     "time a tunnel or connection may sit idle (default 600s)"},
    {"connect-timeout", 0, OPT_DURATION, "T", OPT_CONNECT_TIMEOUT,
     "time to resolve, connect and shake hands (default 30s)"},
    {"max-conns", 0, OPT_TEXT, "N", OPT_MAX_CONNS, "connections at once (default 10000)"},
    {"own-fetch-max", 0, OPT_TEXT, "N", OPT_OWN_FETCH_MAX,
     "metadata fetches of the proxy's own a task begins (default 20000)"},
    {"api-pool", 0, OPT_TEXT, "N", OPT_API_POOL,
     "keep up to N idle TLS connections to the API upstream"},
    {"api-pool-idle", 0, OPT_DURATION, "T", OPT_API_POOL_IDLE,
     "close an idle pooled connection after T (default 20s)"},
    {"drain-timeout", 0, OPT_DURATION, "T", OPT_DRAIN_TIMEOUT,
     "read a paid answer whose client went away for at most T"},
    {"drain-max", 0, OPT_TEXT, "BYTES", OPT_DRAIN_MAX, "... and at most BYTES of it (default 64M)"},
    {"fill-wait", 0, OPT_DURATION, "T", OPT_FILL_WAIT,
     "wait at most T for another task's fill of an artifact"},
    {"broker-fd", 0, OPT_TEXT, "N", OPT_BROKER_FD,
     "hand requests for git.aibox.internal to aibox-broker over"},
    {"secrets-fd", 0, OPT_TEXT, "N", OPT_SECRETS_FD,
     "the secrets and rules to apply, read from fd N (to its"},
    {"ca-fd", 0, OPT_TEXT, "N", OPT_CA_FD, "write the task CA's certificate (PEM) to fd N, then"},
    {"ca-valid", 0, OPT_DURATION, "T", OPT_CA_VALID,
     "how long the task CA is valid (default 7 days)"},
    {"cache-dir", 0, OPT_FILE, "DIR", OPT_CACHE_DIR,
     "the dependency cache (docs/cache.md) for the rules'"},
    {"cache-max", 0, OPT_TEXT, "SIZE", OPT_CACHE_MAX, "its cap (default 4G)"},
    {"cache-scope", 0, OPT_TEXT, "S", OPT_CACHE_SCOPE,
     "keep artifacts fetched with a secret under scope S"},
    {"cache-key", 0, OPT_FILE, "FILE", OPT_CACHE_KEY,
     "the key of secrets' scopes, outside the store"},
    {"prices", 0, OPT_FILE, "FILE", OPT_PRICES,
     "count key forwarding's spend with this price table"},
    {"budget-task", 0, OPT_TEXT, "USD", OPT_BUDGET_TASK,
     "refuse paid API requests once this task spent USD"},
    {"budget-day", 0, OPT_TEXT, "USD", OPT_BUDGET_DAY,
     "refuse them once the day's ledger reached USD"},
    {"ledger-fd", 0, OPT_TEXT, "N", OPT_LEDGER_FD,
     "add each cost to the day's ledger open on fd N"},
    {"budget-user", 0, OPT_TEXT, "USD", OPT_BUDGET_USER,
     "refuse them once the user's ledger reached USD"},
    {"user-ledger-fd", 0, OPT_TEXT, "N", OPT_USER_LEDGER_FD,
     "add each cost to the user's day ledger open on fd N too"},
    {"no-sandbox", 0, OPT_FLAG, NULL, OPT_NO_SANDBOX, "do not lock the process down with seccomp"},
    {NULL, 0, 0, NULL, 0, NULL},
};

/* A timeout of aibox-proxy: 1 ms to a day, as every tool reads a duration. */
static int parse_duration(const char *s, const char *opt)
{
	struct buf why = BUF_INIT;
	int64_t ms;

	if (duration_arg(opt, s, 1, 24 * 3600 * 1000, &ms, &why) < 0)
		die("%s", why.buf);
	buf_release(&why);
	return (int)ms;
}

static int fd_arg(const char *s, const char *opt, int min)
{
	int fd;

	if (parse_fd(s, &fd) < 0 || fd < min)
		die("invalid %s '%s'", opt, s);
	if (fcntl(fd, F_GETFD) < 0)
		die_errno("%s %d", opt, fd);
	fd_set_cloexec(fd, 1);
	return fd;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			warning("cannot raise the open file limit: %s", strerror(errno));
	}
}

/* Listen on HOST:PORT or unix:PATH; *shown is what the ready line names. */
static int open_listener(const char *spec, struct buf *shown)
{
	int fd, one = 1;

	if (!strncmp(spec, "unix:", 5)) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		const char *path = spec + 5;

		if (!*path || strlen(path) >= sizeof(sun.sun_path))
			die("invalid --listen '%s'", spec);
		memcpy(sun.sun_path, path, strlen(path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die_errno("socket");
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
			die_errno("cannot listen on '%s'", path);
		buf_addstr(shown, spec);
	} else {
		char host[256];
		int port;
		struct buf why = BUF_INIT;
		struct sockaddr_storage ss;
		socklen_t len;
		size_t n;

		memset(&ss, 0, sizeof(ss));
		n = strlen(spec);
		if (n > 2 && !strcmp(spec + n - 2, ":0")) {
			/* Port 0: any free port, named in the ready line. */
			if (http_split_authority(spec, n - 2, 1, host, sizeof(host), &port, &why))
				die("invalid --listen '%s': %s", spec, why.buf);
			port = 0;
		} else if (http_split_authority(spec, n, 0, host, sizeof(host), &port, &why)) {
			die("invalid --listen '%s': %s", spec, why.buf);
		}
		if (!strcmp(host, "localhost"))
			memcpy(host, "127.0.0.1", 10);
		if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
			((struct sockaddr_in *)&ss)->sin_family = AF_INET;
			((struct sockaddr_in *)&ss)->sin_port = htons(port);
			len = sizeof(struct sockaddr_in);
		} else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) ==
		           1) {
			((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
			len = sizeof(struct sockaddr_in6);
		} else {
			die("invalid --listen '%s': not an IP address", spec);
		}
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die_errno("socket");
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&ss, len) < 0)
			die_errno("cannot listen on '%s'", spec);
		len = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &len);
		if (ss.ss_family == AF_INET6)
			buf_addf(shown, "[%s]:%d", host,
			         ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
		else
			buf_addf(shown, "%s:%d", host,
			         ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	if (listen(fd, 4096) < 0)
		die_errno("listen");
	return fd;
}

static void parse_upstream(struct proxy_config *cfg)
{
	const char *u = getenv("AIBOX_API_UPSTREAM");
	const char *auth, *end;

	if (!u || !*u)
		u = "https://api.anthropic.com";
	if (strncmp(u, "https://", 8))
		die("AIBOX_API_UPSTREAM '%s': not an https:// URL", u);
	auth = u + 8;
	end = auth + strlen(auth);
	if (end > auth && end[-1] == '/')
		end--;
	if (memchr(auth, '/', end - auth) || memchr(auth, '@', end - auth) ||
	    http_split_authority(auth, end - auth, 443, cfg->api_host, sizeof(cfg->api_host),
	                         &cfg->api_port, NULL))
		die("AIBOX_API_UPSTREAM '%s': not https://HOST[:PORT]", u);
}

/* A key is far shorter; a longer one is refused, never cut. */
#define KEY_MAX 4096

/*
 * The key from $key_env (taken out of our environment, its bytes wiped:
 * /proc/PID/environ shows the initial block) or from fd key_fd (to EOF, then
 * closed; one trailing newline dropped).  docs/proxy.md, "Key forwarding".
 */
static void read_key(struct proxy_config *cfg, const char *key_env, int key_fd)
{
	struct buf key = BUF_INIT;
	const char *from = key_env;
	struct buf fdname = BUF_INIT;
	ssize_t n;

	if (key_env) {
		if (secret_take_env(key_env, &key) <= 0 || !key.len)
			die("the variable '%s' is not set", key_env);
	} else {
		buf_addf(&fdname, "fd %d", key_fd);
		from = fdname.buf;
		n = secret_read_fd(key_fd, &key, KEY_MAX + 1);
		if (n < 0 && n != -EFBIG)
			die_err((int)n, "cannot read the key from %s", from);
		if (key.len && key.buf[key.len - 1] == '\n')
			buf_setlen(&key, key.len - 1);
		if (n == -EFBIG || key.len > KEY_MAX)
			die("the key on %s is longer than %d bytes", from, KEY_MAX);
		if (!key.len)
			die("no key on %s", from);
	}
	for (size_t i = 0; i < key.len; i++)
		if ((unsigned char)key.buf[i] <= 0x20 || (unsigned char)key.buf[i] >= 0x7f)
			die("%s%s%s holds characters a key cannot have",
			    key_env ? "the variable '" : "the key on ", from, key_env ? "'" : "");
	cfg->api_key = xstrdup(key.buf);
	buf_wipe_release(&key);
	buf_release(&fdname);
	parse_upstream(cfg);
}

/* What the options ask for beyond struct proxy_config. */
struct options {
	const char *listen_spec, *log_path, *key_env, *presets, *prices_path;
	const char *cache_dir, *cache_scope, *cache_key;
	uint64_t cache_max;
	struct strvec allow_entries, allow_files;
	int ready_fd, report_fd, key_fd, secrets_fd, ca_fd, no_sandbox;
	int64_t ca_valid_ms;
	long max_conns, api_pool;
};

static void log_max_option(struct proxy_config *cfg, const char *arg)
{
	long log_max;

	if (parse_long(arg, 0, 1L << 40, &log_max) < 0 ||
	    (log_max && log_max < 4 * LOG_CAP_RESERVE))
		die("invalid --log-max '%s' (0, or %d to 2^40 bytes)", arg, 4 * LOG_CAP_RESERVE);
	cfg->log_max = log_max;
}

static void budget_option(uint64_t *cap, const char *arg, const char *opt)
{
	if (usage_parse_usd(arg, cap) < 0)
		die("invalid %s '%s' (USD, more than 0, at most %d)", opt, arg, USAGE_CAP_MAX_USD);
}

/* One option; the ones that take an fd or a time are checked as they come. */
static void one_option(int opt, const char *arg, struct proxy_config *cfg,
                       struct proxy_report *report, struct options *o)
{
	long n;

	switch (opt) {
	case OPT_LISTEN:
		o->listen_spec = arg;
		break;
	case OPT_LISTEN_FD:
		cfg->listen_fd = fd_arg(arg, "--listen-fd", 0);
		break;
	case OPT_ALLOW:
		strvec_push(&o->allow_entries, arg);
		break;
	case OPT_ALLOW_FILE:
		strvec_push(&o->allow_files, arg);
		break;
	case OPT_LOG:
		o->log_path = arg;
		break;
	case OPT_LOG_FD:
		cfg->log_fd = fd_arg(arg, "--log-fd", 1);
		break;
	case OPT_LOG_MAX:
		log_max_option(cfg, arg);
		break;
	case OPT_REPORT_FD:
		o->report_fd = fd_arg(arg, "--report-fd", 1);
		break;
	case OPT_KEY_ENV:
		o->key_env = arg;
		break;
	case OPT_KEY_FD:
		o->key_fd = fd_arg(arg, "--key-fd", 0);
		break;
	case OPT_READY_FD:
		o->ready_fd = fd_arg(arg, "--ready-fd", 1);
		break;
	case OPT_PRESETS:
		o->presets = arg;
		break;
	case OPT_HEADER_TIMEOUT:
		cfg->header_timeout_ms = parse_duration(arg, "header-timeout");
		break;
	case OPT_IDLE_TIMEOUT:
		cfg->idle_timeout_ms = parse_duration(arg, "idle-timeout");
		break;
	case OPT_CONNECT_TIMEOUT:
		cfg->connect_timeout_ms = parse_duration(arg, "connect-timeout");
		break;
	case OPT_MAX_CONNS:
		if (parse_long(arg, 1, 1000000, &o->max_conns) < 0)
			die("invalid --max-conns '%s'", arg);
		break;
	case OPT_OWN_FETCH_MAX:
		if (parse_long(arg, 0, PROXY_OWN_FETCH_CEILING, &n) < 0)
			die("invalid --own-fetch-max '%s' (0 to %d)", arg, PROXY_OWN_FETCH_CEILING);
		cfg->own_fetch_max = (int)n;
		break;
	case OPT_API_POOL:
		if (parse_long(arg, 0, PROXY_API_POOL_MAX, &o->api_pool) < 0)
			die("invalid --api-pool '%s' (0 to %d)", arg, PROXY_API_POOL_MAX);
		break;
	case OPT_API_POOL_IDLE:
		cfg->api_pool_idle_ms = parse_duration(arg, "api-pool-idle");
		break;
	case OPT_DRAIN_TIMEOUT:
		cfg->drain_ms = parse_duration(arg, "drain-timeout");
		break;
	case OPT_FILL_WAIT:
		cfg->fill_wait_ms = parse_duration(arg, "fill-wait");
		break;
	case OPT_DRAIN_MAX:
		if (parse_size(arg, 1, UINT64_MAX, &cfg->drain_max) < 0)
			die("invalid --drain-max '%s'", arg);
		break;
	case OPT_BROKER_FD:
		cfg->broker_fd = fd_arg(arg, "--broker-fd", 0);
		break;
	case OPT_SECRETS_FD:
		o->secrets_fd = fd_arg(arg, "--secrets-fd", 0);
		break;
	case OPT_CA_FD:
		o->ca_fd = fd_arg(arg, "--ca-fd", 1);
		break;
	case OPT_CA_VALID: {
		struct buf why = BUF_INIT;

		if (duration_arg("ca-valid", arg, 1000, 30LL * 24 * 3600 * 1000, &o->ca_valid_ms,
		                 &why) < 0)
			die("%s", why.buf);
		buf_release(&why);
		break;
	}
	case OPT_CACHE_DIR:
		o->cache_dir = arg;
		break;
	case OPT_CACHE_KEY:
		o->cache_key = arg;
		break;
	case OPT_CACHE_MAX:
		if (parse_size(arg, DEP_CACHE_MIN_MAX_MIB << 20, DEP_CACHE_MAX_MAX_MIB << 20,
		               &o->cache_max) < 0)
			die("invalid --cache-max '%s' (16M to 64T)", arg);
		break;
	case OPT_CACHE_SCOPE:
		if (!arg[0] || !dep_cache_scope_ok(arg))
			die("invalid --cache-scope '%s' (letters, digits and ._:/-)", arg);
		o->cache_scope = arg;
		break;
	case OPT_PRICES:
		o->prices_path = arg;
		break;
	case OPT_BUDGET_TASK:
		budget_option(&report->usage.cap_task, arg, "--budget-task");
		break;
	case OPT_BUDGET_DAY:
		budget_option(&report->usage.cap_day, arg, "--budget-day");
		break;
	case OPT_LEDGER_FD:
		cfg->ledger_fd = fd_arg(arg, "--ledger-fd", 0);
		break;
	case OPT_BUDGET_USER:
		budget_option(&report->usage.cap_user, arg, "--budget-user");
		break;
	case OPT_USER_LEDGER_FD:
		cfg->user_ledger_fd = fd_arg(arg, "--user-ledger-fd", 0);
		break;
	case OPT_NO_SANDBOX:
		o->no_sandbox = 1;
		break;
	case OPT_HELP:
		fputs(usage, stdout);
		exit(0);
	default:
		BUG("option %d has no case", opt);
	}
}

static void parse_options(int argc, char **argv, struct proxy_config *cfg,
                          struct proxy_report *report, struct options *o)
{
	struct buf why = BUF_INIT;
	const char *v;
	int opt;

	cfg->header_timeout_ms = 30000;
	cfg->idle_timeout_ms = 600000;
	cfg->connect_timeout_ms = 30000;
	cfg->api_pool_idle_ms = 20000;
	cfg->drain_ms = PROXY_DRAIN_MS;
	cfg->drain_max = PROXY_DRAIN_MAX;
	cfg->fill_wait_ms = PROXY_FILL_WAIT_MS;
	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
		if (opt == OPT_BAD)
			error("%s", why.buf);
		else if (opt == OPT_WORD)
			error("unexpected argument '%s'", v);
		if (opt == OPT_BAD || opt == OPT_WORD)
			usage_die(usage);
		one_option(opt, v, cfg, report, o);
	}
	if (optind < argc) {
		error("unexpected argument '%s'", argv[optind]);
		usage_die(usage);
	}
	buf_release(&why);
	if (o->listen_spec && cfg->listen_fd >= 0)
		die("--listen and --listen-fd cannot be used together");
	if (o->log_path && cfg->log_fd >= 0)
		die("--log and --log-fd cannot be used together");
	cfg->max_conns = (int)o->max_conns;
	cfg->api_pool = (int)o->api_pool;
	cfg->report = report;

	if (o->key_env && o->key_fd >= 0)
		die("--key-env and --key-fd cannot be used together");
	if ((o->ca_fd >= 0 || o->ca_valid_ms) && o->secrets_fd < 0)
		die("--ca-fd and --ca-valid need --secrets-fd");
	if ((o->cache_dir || o->cache_max || o->cache_scope) && o->secrets_fd < 0)
		die("--cache-dir, --cache-max and --cache-scope need --secrets-fd");
	if ((o->cache_max || o->cache_scope || o->cache_key) && !o->cache_dir)
		die("--cache-max, --cache-scope and --cache-key need --cache-dir");
	if (report->usage.cap_day && cfg->ledger_fd < 0)
		die("--budget-day needs --ledger-fd");
	if (report->usage.cap_user && cfg->user_ledger_fd < 0)
		die("--budget-user needs --user-ledger-fd");
}

/* Spend is counted wherever the key is used (docs/budget.md). */
static void setup_spend(struct proxy_config *cfg, struct proxy_report *report,
                        struct usage_prices *prices, const char *prices_path)
{
	struct buf err = BUF_INIT;
	uint64_t day;
	int ret;

	/* A subscription's bearer token is not charged by the token: nothing to count. */
	if (!cfg->api_key || cfg->api_bearer) {
		if (report->usage.cap_task || report->usage.cap_day || report->usage.cap_user)
			die("--budget-task, --budget-day and --budget-user need key forwarding "
			    "with a key "
			    "(--key-env or --key-fd)");
		return;
	}
	if ((prices_path ? usage_prices_load(prices_path, prices, &err)
	                 : usage_prices_load_in_use(prices, &err)) < 0)
		die("%s", err.buf);
	cfg->prices = prices;
	report->usage.present = 1;
	if (cfg->ledger_fd >= 0 && (ret = usage_ledger_add(cfg->ledger_fd, 0, &day)) < 0)
		die_err(ret, "cannot read the ledger on --ledger-fd %d", cfg->ledger_fd);
	if (cfg->ledger_fd >= 0)
		report->usage.day_nano = day;
	if (cfg->user_ledger_fd >= 0 && cfg->ledger_fd >= 0) {
		struct stat a, b;

		/* one file locked twice through two opens would wait on itself */
		if (fstat(cfg->ledger_fd, &a) < 0 || fstat(cfg->user_ledger_fd, &b) < 0 ||
		    (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
			die("--ledger-fd and --user-ledger-fd must be two different files");
	}
	if (cfg->user_ledger_fd >= 0 && (ret = usage_ledger_add(cfg->user_ledger_fd, 0, &day)) < 0)
		die_err(ret, "cannot read the user's ledger on --user-ledger-fd %d",
		        cfg->user_ledger_fd);
	if (cfg->user_ledger_fd >= 0)
		report->usage.user_nano = day;
	buf_release(&err);
}

static void setup_allow(struct allow_list *allow, const struct options *o)
{
	const char *presets = o->presets ? o->presets : presets_dir();
	struct buf err = BUF_INIT;

	for (size_t i = 0; i < o->allow_entries.nr; i++)
		if (allow_add(allow, o->allow_entries.v[i], presets, &err) < 0)
			die("%s", err.buf);
	for (size_t i = 0; i < o->allow_files.nr; i++)
		if (allow_add_file(allow, o->allow_files.v[i], presets, &err) < 0)
			die("%s", err.buf);
	buf_release(&err);
}

/* The resolver every tool uses (common/net/resolve.h). */
static struct resolver *setup_resolver(void)
{
	struct buf err = BUF_INIT;
	struct resolver *r = resolver_new_default(4, &err);

	if (!r)
		die("%s", err.buf);
	buf_release(&err);
	return r;
}

/* TLS to the API upstream (AIBOX_API_CA: another CA file). */
static SSL_CTX *setup_tls(void)
{
	const char *ca = getenv("AIBOX_API_CA");
	struct buf err = BUF_INIT;
	SSL_CTX *tls;
	SSL *warm;

	tls = tls_client_ctx(ca && *ca ? ca : NULL, &err);
	if (!tls)
		die("%s", err.buf);
	/* Load whatever OpenSSL loads lazily now, before the lockdown. */
	warm = SSL_new(tls);
	SSL_free(warm);
	buf_release(&err);
	return tls;
}

/* Offer http/1.1 and nothing else toward the VM (docs/proxy.md). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

/*
 * The secrets and rules from fd (to EOF), the task CA for the hosts they
 * name, and both TLS contexts of interception; the CA's certificate to
 * ca_fd when given.  Before the lockdown: the trust store is read here.
 */
static void setup_secrets(struct proxy_config *cfg, struct proxy_secrets *ps, struct task_ca *ca,
                          const struct options *o)
{
	struct buf text = BUF_INIT, err = BUF_INIT, pem = BUF_INIT;
	ssize_t n = secret_read_fd(o->secrets_fd, &text, PROXY_SECRETS_MAX + 1);
	SSL *warm;
	int ret;

	if (n == -EFBIG)
		die("the secrets on --secrets-fd %d are over %d bytes", o->secrets_fd,
		    PROXY_SECRETS_MAX);
	if (n < 0)
		die_err((int)n, "cannot read the secrets from --secrets-fd %d", o->secrets_fd);
	ret = proxy_secrets_parse(text.buf, text.len, ps, &err);
	buf_wipe_release(&text);
	if (ret < 0)
		die("%s", err.buf);
	/* Its values are looked for in the API's answers too (the bearer token's echo). */
	cfg->secrets = ps;
	if (proxy_secrets_api(ps)) {
		if (cfg->api_key)
			die("--key-env or --key-fd, and a bearer token for the API on --secrets-fd "
			    "%d: one of them",
			    o->secrets_fd);
		cfg->api_key = xstrdup(proxy_secrets_api(ps)->value);
		cfg->api_bearer = 1;
		parse_upstream(cfg);
	}
	if (!ps->hosts.nr)
		return;
	if (task_ca_make(ca, ps->hosts.v, ps->hosts.nr,
	                 (long)((o->ca_valid_ms ? o->ca_valid_ms : 7LL * 24 * 3600 * 1000) / 1000),
	                 &err) < 0)
		die("%s", err.buf);
	if (o->ca_fd >= 0) {
		task_ca_pem(ca, &pem);
		if (write_all(o->ca_fd, pem.buf, pem.len) < 0)
			die_errno("cannot write the CA certificate to --ca-fd %d", o->ca_fd);
		close(o->ca_fd);
	}
	cfg->itls = tls_client_ctx(NULL, &err);
	if (!cfg->itls)
		die("%s", err.buf);
	cfg->isrv = SSL_CTX_new(TLS_server_method());
	if (!cfg->isrv || !SSL_CTX_set_min_proto_version(cfg->isrv, TLS1_2_VERSION))
		die("cannot make a TLS server context");
	SSL_CTX_set_alpn_select_cb(cfg->isrv, alpn_select, NULL);
	SSL_CTX_set_mode(cfg->isrv, SSL_MODE_ENABLE_PARTIAL_WRITE |
	                                SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                                SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(cfg->isrv, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(cfg->isrv, 0);
	warm = SSL_new(cfg->itls);
	SSL_free(warm);
	warm = SSL_new(cfg->isrv);
	SSL_free(warm);
	cfg->ca = ca;
	buf_release(&pem);
	buf_release(&err);
}

/* The listening socket (its name for the ready line into shown), and the broker's socket. */
static void setup_sockets(struct proxy_config *cfg, const struct options *o, struct buf *shown)
{
	if (cfg->listen_fd >= 0) {
		int acc = 0;
		socklen_t len = sizeof(acc);

		if (getsockopt(cfg->listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc)
			die("fd %d is not a listening socket", cfg->listen_fd);
		buf_addf(shown, "fd:%d", cfg->listen_fd);
	} else {
		cfg->listen_fd =
		    open_listener(o->listen_spec ? o->listen_spec : "127.0.0.1:3128", shown);
	}

	if (cfg->broker_fd >= 0) {
		int type = 0;
		socklen_t len = sizeof(type);

		if (getsockopt(cfg->broker_fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
		    type != SOCK_SEQPACKET)
			die("--broker-fd %d is not a SOCK_SEQPACKET socket", cfg->broker_fd);
	}
}

static void say_ready(int ready_fd, const struct buf *shown)
{
	struct buf line = BUF_INIT;

	buf_addf(&line, "ready %s\n", shown->buf);
	if (write_all(ready_fd, line.buf, line.len) < 0)
		warning("cannot write to the ready fd: %s", strerror(errno));
	close(ready_fd);
	buf_release(&line);
}

static void write_record(int report_fd, const struct proxy_report *report)
{
	struct buf rec = BUF_INIT;

	proxy_report_json(report, &rec);
	if (write_all(report_fd, rec.buf, rec.len) < 0)
		warning("cannot write the record to fd %d: %s", report_fd, strerror(errno));
	close(report_fd);
	buf_release(&rec);
}

int main(int argc, char **argv)
{
	struct proxy_config cfg = {.listen_fd = -1,
	                           .log_fd = -1,
	                           .signal_fd = -1,
	                           .broker_fd = -1,
	                           .ledger_fd = -1,
	                           .user_ledger_fd = -1,
	                           .log_max = LOG_CAP_BYTES};
	struct options o = {.allow_entries = STRVEC_INIT,
	                    .allow_files = STRVEC_INIT,
	                    .ready_fd = -1,
	                    .report_fd = -1,
	                    .key_fd = -1,
	                    .secrets_fd = -1,
	                    .ca_fd = -1,
	                    .max_conns = 10000,
	                    .api_pool = 4};
	struct usage_prices prices = USAGE_PRICES_INIT;
	struct proxy_report report = PROXY_REPORT_INIT;
	struct allow_list allow = ALLOW_LIST_INIT;
	struct proxy_secrets secrets = PROXY_SECRETS_INIT;
	struct task_ca ca = {0};
	struct dep_cache cache = {0};
	struct buf shown = BUF_INIT;
	sigset_t mask;
	int ret;

	tool_init(argc, argv);
	/* Blocked before any thread starts, so that only the signalfd sees them. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		die_errno("sigprocmask");
	parse_options(argc, argv, &cfg, &report, &o);
	/* The key first, so it leaves the environment as early as possible. */
	if (o.key_env || o.key_fd >= 0)
		read_key(&cfg, o.key_env, o.key_fd);
	if (o.secrets_fd >= 0)
		setup_secrets(&cfg, &secrets, &ca, &o);
	if (o.cache_dir) {
		struct buf why = BUF_INIT;

		if (dep_cache_open(&cache, o.cache_dir,
		                   o.cache_max ? o.cache_max : DEP_CACHE_DEFAULT_MAX, o.cache_key,
		                   &why) < 0)
			die("%s", why.buf);
		/* A walk of the store now and then, not after every fill
		 * (common/proxy/proxy_cache.c). */
		cache.trim_slack = cache.max_bytes / 32;
		cfg.cache = &cache;
		cfg.cache_scope = o.cache_scope;
	}
	setup_spend(&cfg, &report, &prices, o.prices_path);

	raise_nofile();
	setup_allow(&allow, &o);
	cfg.allow = &allow;
	cfg.resolver = setup_resolver();
	if (cfg.api_key)
		cfg.tls = setup_tls();
	if (o.log_path) {
		cfg.log_fd = open(o.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (cfg.log_fd < 0)
			die_errno("cannot open '%s'", o.log_path);
	}
	setup_sockets(&cfg, &o, &shown);
	cfg.signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (cfg.signal_fd < 0)
		die_errno("signalfd");

	/* The cache's files are made and renamed as the task runs (docs/cache.md). */
	ret = sandbox_lockdown(o.no_sandbox ? SANDBOX_NONE : SANDBOX_SECCOMP,
	                       cfg.cache ? SANDBOX_KEEP_FILES : 0);
	if (ret < 0)
		die_err(ret, "cannot lock down");
	if (o.ready_fd >= 0)
		say_ready(o.ready_fd, &shown);

	ret = proxy_run(&cfg);
	if (ret < 0)
		die_err(ret, "the proxy failed");
	if (o.report_fd >= 0)
		write_record(o.report_fd, &report);
	proxy_report_release(&report);
	usage_prices_release(&prices);
	resolver_free(cfg.resolver);
	allow_clear(&allow);
	strvec_clear(&o.allow_entries);
	strvec_clear(&o.allow_files);
	buf_release(&shown);
	if (cfg.tls)
		SSL_CTX_free(cfg.tls);
	if (cfg.itls)
		SSL_CTX_free(cfg.itls);
	if (cfg.isrv)
		SSL_CTX_free(cfg.isrv);
	task_ca_release(&ca);
	if (cfg.cache)
		dep_cache_close(&cache);
	proxy_secrets_release(&secrets);
	if (cfg.api_key) {
		OPENSSL_cleanse((char *)cfg.api_key, strlen(cfg.api_key));
		free((char *)cfg.api_key);
	}
	return 0;
}
