/*
 * aibox-proxy: a task's only way out, with the API key kept on the host.
 * See docs/proxy.md and docs/man/aibox-proxy.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
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

#include "allow.h"
#include "buf.h"
#include "err.h"
#include "http.h"
#include "num.h"
#include "paths.h"
#include "proxy.h"
#include "proxy_report.h"
#include "resolve.h"
#include "sandbox.h"
#include "secret.h"
#include "spawn.h"
#include "task_settings.h"
#include "tls.h"
#include "usage.h"
#include <openssl/crypto.h>
#include "banned.h"

static const char usage[] =
	"usage: aibox-proxy [--listen HOST:PORT | --listen unix:PATH | --listen-fd N]\n"
	"                   [--allow ENTRY]... [--allow-file FILE] [--log FILE | --log-fd N]\n"
	"                   [--log-max BYTES] [--report-fd N]\n"
	"                   [--key-env NAME | --key-fd N] [--ready-fd N] [--presets DIR]\n"
	"                   [--header-timeout T] [--idle-timeout T] [--connect-timeout T]\n"
	"                   [--max-conns N] [--api-pool N] [--api-pool-idle T]\n"
	"                   [--broker-fd N] [--prices FILE] [--budget-task USD]\n"
	"                   [--budget-day USD --ledger-fd N] [--no-sandbox]\n"
	"\n"
	"  --listen ADDR        listen on HOST:PORT (an IP address or localhost; default\n"
	"                       127.0.0.1:3128) or on the unix socket unix:PATH\n"
	"  --listen-fd N        accept on the listening socket N instead\n"
	"  --allow ENTRY        allow host, host:port, *.domain, an IP literal or preset:NAME\n"
	"  --allow-file FILE    allow the entries in FILE, one a line\n"
	"  --log FILE           append one line per request or tunnel to FILE\n"
	"  --log-fd N           write those lines to fd N\n"
	"  --log-max BYTES      write at most BYTES of log lines, then count them\n"
	"                       (default 16 MiB; 0: no cap)\n"
	"  --report-fd N        when told to stop, write the record (what the VM\n"
	"                       reached, counted; one JSON object) to fd N\n"
	"  --key-env NAME       forward 127.0.0.1:3129 to the API with the key in $NAME\n"
	"  --key-fd N           the same with the key read from fd N (to its EOF)\n"
	"  --ready-fd N         write \"ready ADDR\" to fd N once listening, then close it\n"
	"  --presets DIR        read preset:NAME from DIR/NAME (default: aibox's data)\n"
	"  --header-timeout T   time for a request head to arrive (default 30s)\n"
	"  --idle-timeout T     time a tunnel or connection may sit idle (default 600s)\n"
	"  --connect-timeout T  time to resolve, connect and shake hands (default 30s)\n"
	"  --max-conns N        connections at once (default 10000)\n"
	"  --api-pool N         keep up to N idle TLS connections to the API upstream\n"
	"                       for the next request (default 4; 0: one per request)\n"
	"  --api-pool-idle T    close an idle pooled connection after T (default 20s)\n"
	"  --broker-fd N        hand requests for git.aibox.internal to aibox-broker over\n"
	"                       the unix SOCK_SEQPACKET socket N (its --handoff-fd)\n"
	"  --prices FILE        count key forwarding's spend with this price table\n"
	"                       (default: aibox's data, share/prices)\n"
	"  --budget-task USD    refuse paid API requests once this task spent USD\n"
	"  --budget-day USD     refuse them once the day's ledger reached USD\n"
	"  --ledger-fd N        add each cost to the day's ledger open on fd N\n"
	"  --no-sandbox         do not lock the process down with seccomp\n"
	"\n"
	"T is a number of seconds, or a number followed by ms or s.\n";

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
	OPT_API_POOL,
	OPT_API_POOL_IDLE,
	OPT_BROKER_FD,
	OPT_PRICES,
	OPT_BUDGET_TASK,
	OPT_BUDGET_DAY,
	OPT_LEDGER_FD,
	OPT_NO_SANDBOX,
	OPT_HELP,
};

static const struct option options[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "listen-fd", required_argument, NULL, OPT_LISTEN_FD },
	{ "allow", required_argument, NULL, OPT_ALLOW },
	{ "allow-file", required_argument, NULL, OPT_ALLOW_FILE },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "log-fd", required_argument, NULL, OPT_LOG_FD },
	{ "log-max", required_argument, NULL, OPT_LOG_MAX },
	{ "report-fd", required_argument, NULL, OPT_REPORT_FD },
	{ "key-env", required_argument, NULL, OPT_KEY_ENV },
	{ "key-fd", required_argument, NULL, OPT_KEY_FD },
	{ "ready-fd", required_argument, NULL, OPT_READY_FD },
	{ "presets", required_argument, NULL, OPT_PRESETS },
	{ "header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "max-conns", required_argument, NULL, OPT_MAX_CONNS },
	{ "api-pool", required_argument, NULL, OPT_API_POOL },
	{ "api-pool-idle", required_argument, NULL, OPT_API_POOL_IDLE },
	{ "broker-fd", required_argument, NULL, OPT_BROKER_FD },
	{ "prices", required_argument, NULL, OPT_PRICES },
	{ "budget-task", required_argument, NULL, OPT_BUDGET_TASK },
	{ "budget-day", required_argument, NULL, OPT_BUDGET_DAY },
	{ "ledger-fd", required_argument, NULL, OPT_LEDGER_FD },
	{ "no-sandbox", no_argument, NULL, OPT_NO_SANDBOX },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static int parse_duration(const char *s, const char *opt)
{
	char num[32];
	size_t n = strlen(s);
	long v, mult = 1000;

	if (n > 2 && !strcmp(s + n - 2, "ms")) {
		n -= 2;
		mult = 1;
	} else if (n > 1 && s[n - 1] == 's') {
		n -= 1;
	}
	if (!n || n >= sizeof(num))
		die("invalid %s '%s'", opt, s);
	memcpy(num, s, n);
	num[n] = '\0';
	if (parse_long(num, 1, 86400L * 1000 / mult, &v) < 0)
		die("invalid %s '%s'", opt, s);
	return (int)(v * mult);
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
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
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
		const char *why;
		struct sockaddr_storage ss;
		socklen_t len;
		size_t n;

		memset(&ss, 0, sizeof(ss));
		n = strlen(spec);
		if (n > 2 && !strcmp(spec + n - 2, ":0")) {
			/* Port 0: any free port, named in the ready line. */
			if (http_split_authority(spec, n - 2, 1, host, sizeof(host), &port, &why))
				die("invalid --listen '%s': %s", spec, why);
			port = 0;
		} else if (http_split_authority(spec, n, 0, host, sizeof(host), &port, &why)) {
			die("invalid --listen '%s': %s", spec, why);
		}
		if (!strcmp(host, "localhost"))
			memcpy(host, "127.0.0.1", 10);
		if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
			((struct sockaddr_in *)&ss)->sin_family = AF_INET;
			((struct sockaddr_in *)&ss)->sin_port = htons(port);
			len = sizeof(struct sockaddr_in);
		} else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
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
			buf_addf(shown, "[%s]:%d", host, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
		else
			buf_addf(shown, "%s:%d", host, ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	if (listen(fd, 4096) < 0)
		die_errno("listen");
	return fd;
}

static void parse_upstream(struct proxy_config *cfg)
{
	const char *u = getenv("AIBOX_API_UPSTREAM");
	const char *auth, *end, *why;

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
				 &cfg->api_port, &why))
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
			die("%s%s%s holds characters a key cannot have", key_env ? "the variable '" : "the key on ",
			    from, key_env ? "'" : "");
	cfg->api_key = xstrdup(key.buf);
	buf_wipe_release(&key);
	buf_release(&fdname);
	parse_upstream(cfg);
}

int main(int argc, char **argv)
{
	struct proxy_config cfg = { .listen_fd = -1, .log_fd = -1, .signal_fd = -1,
				    .broker_fd = -1, .ledger_fd = -1, .log_max = PROXY_LOG_MAX };
	struct usage_prices prices = USAGE_PRICES_INIT;
	const char *prices_path = NULL;
	struct proxy_report report = PROXY_REPORT_INIT;
	struct allow_list allow = ALLOW_LIST_INIT;
	struct buf err = BUF_INIT, shown = BUF_INIT;
	const char *listen_spec = NULL, *log_path = NULL, *key_env = NULL, *presets = NULL;
	const char *hosts_file;
	struct strvec allow_entries = STRVEC_INIT, allow_files = STRVEC_INIT;
	int ready_fd = -1, report_fd = -1, key_fd = -1, no_sandbox = 0, opt, ret;
	long max_conns = 10000, api_pool = 4, log_max;
	sigset_t mask;

	tool_init(argc, argv);
	/* Blocked before any thread starts, so that only the signalfd sees them. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		die_errno("sigprocmask");
	cfg.header_timeout_ms = 30000;
	cfg.idle_timeout_ms = 600000;
	cfg.connect_timeout_ms = 30000;
	cfg.api_pool_idle_ms = 20000;
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (opt) {
		case OPT_LISTEN:
			listen_spec = optarg;
			break;
		case OPT_LISTEN_FD:
			cfg.listen_fd = fd_arg(optarg, "--listen-fd", 0);
			break;
		case OPT_ALLOW:
			strvec_push(&allow_entries, optarg);
			break;
		case OPT_ALLOW_FILE:
			strvec_push(&allow_files, optarg);
			break;
		case OPT_LOG:
			log_path = optarg;
			break;
		case OPT_LOG_FD:
			cfg.log_fd = fd_arg(optarg, "--log-fd", 1);
			break;
		case OPT_LOG_MAX:
			if (parse_long(optarg, 0, 1L << 40, &log_max) < 0 ||
			    (log_max && log_max < 4 * PROXY_LOG_RESERVE))
				die("invalid --log-max '%s' (0, or %d to 2^40 bytes)", optarg,
				    4 * PROXY_LOG_RESERVE);
			cfg.log_max = log_max;
			break;
		case OPT_REPORT_FD:
			report_fd = fd_arg(optarg, "--report-fd", 1);
			break;
		case OPT_KEY_ENV:
			key_env = optarg;
			break;
		case OPT_KEY_FD:
			key_fd = fd_arg(optarg, "--key-fd", 0);
			break;
		case OPT_READY_FD:
			ready_fd = fd_arg(optarg, "--ready-fd", 1);
			break;
		case OPT_PRESETS:
			presets = optarg;
			break;
		case OPT_HEADER_TIMEOUT:
			cfg.header_timeout_ms = parse_duration(optarg, "--header-timeout");
			break;
		case OPT_IDLE_TIMEOUT:
			cfg.idle_timeout_ms = parse_duration(optarg, "--idle-timeout");
			break;
		case OPT_CONNECT_TIMEOUT:
			cfg.connect_timeout_ms = parse_duration(optarg, "--connect-timeout");
			break;
		case OPT_MAX_CONNS:
			if (parse_long(optarg, 1, 1000000, &max_conns) < 0)
				die("invalid --max-conns '%s'", optarg);
			break;
		case OPT_API_POOL:
			if (parse_long(optarg, 0, PROXY_API_POOL_MAX, &api_pool) < 0)
				die("invalid --api-pool '%s' (0 to %d)", optarg, PROXY_API_POOL_MAX);
			break;
		case OPT_API_POOL_IDLE:
			cfg.api_pool_idle_ms = parse_duration(optarg, "--api-pool-idle");
			break;
		case OPT_BROKER_FD:
			cfg.broker_fd = fd_arg(optarg, "--broker-fd", 0);
			break;
		case OPT_PRICES:
			prices_path = optarg;
			break;
		case OPT_BUDGET_TASK:
			if (usage_parse_usd(optarg, &report.usage.cap_task) < 0)
				die("invalid --budget-task '%s' (USD, more than 0, at most %d)", optarg,
				    USAGE_CAP_MAX_USD);
			break;
		case OPT_BUDGET_DAY:
			if (usage_parse_usd(optarg, &report.usage.cap_day) < 0)
				die("invalid --budget-day '%s' (USD, more than 0, at most %d)", optarg,
				    USAGE_CAP_MAX_USD);
			break;
		case OPT_LEDGER_FD:
			cfg.ledger_fd = fd_arg(optarg, "--ledger-fd", 0);
			break;
		case OPT_NO_SANDBOX:
			no_sandbox = 1;
			break;
		case 'h':
		case OPT_HELP:
			fputs(usage, stdout);
			return 0;
		default:
			usage_die(usage);
		}
	}
	if (optind < argc)
		usage_die(usage);
	if (listen_spec && cfg.listen_fd >= 0)
		die("--listen and --listen-fd cannot be used together");
	if (log_path && cfg.log_fd >= 0)
		die("--log and --log-fd cannot be used together");
	cfg.max_conns = (int)max_conns;
	cfg.api_pool = (int)api_pool;
	cfg.report = &report;

	if (key_env && key_fd >= 0)
		die("--key-env and --key-fd cannot be used together");
	if (report.usage.cap_day && cfg.ledger_fd < 0)
		die("--budget-day needs --ledger-fd");
	/* The key first, so it leaves the environment as early as possible. */
	if (key_env || key_fd >= 0)
		read_key(&cfg, key_env, key_fd);
	/* Spend is counted wherever the key is used (docs/budget.md). */
	if (cfg.api_key) {
		uint64_t day;

		if (usage_prices_load(prices_path ? prices_path : prices_file(), &prices, &err) < 0)
			die("the price table %s", err.buf);
		cfg.prices = &prices;
		report.usage.present = 1;
		if (cfg.ledger_fd >= 0 && (ret = usage_ledger_add(cfg.ledger_fd, 0, &day)) < 0)
			die_err(ret, "cannot read the ledger on --ledger-fd %d", cfg.ledger_fd);
		if (cfg.ledger_fd >= 0)
			report.usage.day_nano = day;
	} else if (report.usage.cap_task || report.usage.cap_day) {
		die("--budget-task and --budget-day need key forwarding (--key-env or --key-fd)");
	}


	raise_nofile();
	if (!presets)
		presets = presets_dir();
	for (size_t i = 0; i < allow_entries.nr; i++)
		if (allow_add(&allow, allow_entries.v[i], presets, &err) < 0)
			die("%s", err.buf);
	for (size_t i = 0; i < allow_files.nr; i++)
		if (allow_add_file(&allow, allow_files.v[i], presets, &err) < 0)
			die("%s", err.buf);
	cfg.allow = &allow;

	hosts_file = getenv("AIBOX_PROXY_HOSTS");
	if (hosts_file && !*hosts_file)
		hosts_file = NULL;
	cfg.resolver = resolver_new(hosts_file, !hosts_file, 4, &err);
	if (!cfg.resolver)
		die("%s", err.buf);
	if (!hosts_file) {
		/* Let glibc read nsswitch.conf and resolv.conf while it still can. */
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;

		if (getaddrinfo("localhost", NULL, &hints, &ai) == 0)
			freeaddrinfo(ai);
	}

	if (cfg.api_key) {
		const char *ca = getenv("AIBOX_API_CA");
		SSL *warm;

		cfg.tls = tls_client_ctx(ca && *ca ? ca : NULL, &err);
		if (!cfg.tls)
			die("%s", err.buf);
		/* Load whatever OpenSSL loads lazily now, before the lockdown. */
		warm = SSL_new(cfg.tls);
		SSL_free(warm);
	}

	if (log_path) {
		cfg.log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (cfg.log_fd < 0)
			die_errno("cannot open '%s'", log_path);
	}

	if (cfg.listen_fd >= 0) {
		int acc = 0;
		socklen_t len = sizeof(acc);

		if (getsockopt(cfg.listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc)
			die("fd %d is not a listening socket", cfg.listen_fd);
		buf_addf(&shown, "fd:%d", cfg.listen_fd);
	} else {
		cfg.listen_fd = open_listener(listen_spec ? listen_spec : "127.0.0.1:3128", &shown);
	}

	if (cfg.broker_fd >= 0) {
		int type = 0;
		socklen_t len = sizeof(type);

		if (getsockopt(cfg.broker_fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
		    type != SOCK_SEQPACKET)
			die("--broker-fd %d is not a SOCK_SEQPACKET socket", cfg.broker_fd);
	}

	cfg.signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (cfg.signal_fd < 0)
		die_errno("signalfd");

	ret = sandbox_lockdown(no_sandbox ? SANDBOX_NONE : SANDBOX_SECCOMP, 0);
	if (ret < 0)
		die_err(ret, "cannot lock down");

	if (ready_fd >= 0) {
		struct buf line = BUF_INIT;

		buf_addf(&line, "ready %s\n", shown.buf);
		if (write_all(ready_fd, line.buf, line.len) < 0)
			warning("cannot write to the ready fd: %s", strerror(errno));
		close(ready_fd);
		buf_release(&line);
	}

	ret = proxy_run(&cfg);
	if (ret < 0)
		die_err(ret, "the proxy failed");
	if (report_fd >= 0) {
		struct buf rec = BUF_INIT;

		proxy_report_json(&report, &rec);
		if (write_all(report_fd, rec.buf, rec.len) < 0)
			warning("cannot write the record to fd %d: %s", report_fd, strerror(errno));
		close(report_fd);
		buf_release(&rec);
	}
	proxy_report_release(&report);
	usage_prices_release(&prices);
	resolver_free(cfg.resolver);
	allow_clear(&allow);
	strvec_clear(&allow_entries);
	strvec_clear(&allow_files);
	buf_release(&err);
	buf_release(&shown);
	if (cfg.tls)
		SSL_CTX_free(cfg.tls);
	if (cfg.api_key) {
		OPENSSL_cleanse((char *)cfg.api_key, strlen(cfg.api_key));
		free((char *)cfg.api_key);
	}
	return 0;
}
