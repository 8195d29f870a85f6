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
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker_req.h"
#include "broker_spawn.h"
#include "buf.h"
#include "err.h"
#include "gitproto.h"
#include "num.h"
#include "sandbox.h"
#include "secret.h"
#include "task_settings.h"
#include "banned.h"

static const char usage_text[] =
	"usage: aibox-broker --remote URL [--token-env NAME] [--fetch] [--push PATTERN]...\n"
	"                    [--token-fd N]\n"
	"                    [--auth basic|bearer] [--auth-user NAME] [--remote ...]...\n"
	"                    (--listen HOST:PORT | --listen-fd N | --conn-fd N | --handoff-fd N)\n"
	"                    [--log FILE | --log-fd N] [--ready-fd N] [--ca FILE] [--no-sandbox]\n"
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
	"  --no-sandbox        do not lock the process down (seccomp)\n";

/* Caps on what a client or the remote may send. */
/*
 * An upload-pack request body, or a gzip request body once inflated, is
 * held whole: git-http-backend's own default cap (http.maxRequestBuffer).
 * docs/broker.md, "Memory", adds up what a broker may cost.
 */
#define BODY_MAX (10u << 20)
#define DRAIN_MAX (4ull << 30)	    /* body read and dropped before a refusal */
#define HANDOFF_MAX (BREQ_HEAD_MAX + 256)
#define IO_TIMEOUT_S 300
#define CHILDREN_MAX 32

enum auth_kind { AUTH_BASIC, AUTH_BEARER };

struct remote {
	char *url;
	char *host; /* as in the URL, without brackets */
	char *port;
	char *path; /* "/owner/repo.git", no trailing '/', may be "" */
	char *hostport; /* for the Host header */
	const char *token_env;
	char *token;
	enum auth_kind auth;
	const char *auth_user;
	char *auth_header; /* "Authorization: ...\r\n" */
	int fetch;
	const char **push;
	size_t npush, push_alloc;
	struct addrinfo *addrs;
	/*
	 * The forms of the token a remote could reflect (docs/broker.md,
	 * "What the client sees"): replaced in whatever goes back to the client.
	 */
	struct buf *secrets;
	size_t nsecrets, secrets_alloc, secret_max;
};

static struct remote *remotes;
static size_t nremotes, remotes_alloc;
static SSL_CTX *ssl_ctx;
static int log_fd = 2;

/* ---- logging: one line per operation, never a token ---- */

/* Append s with control bytes, quotes, backslashes and (unless quoted) spaces as \xNN. */
static void log_add_clean(struct buf *b, const char *s, size_t n, int quoted)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || (c == ' ' && !quoted) || c >= 0x7f || c == '\\' || c == '"')
			buf_addf(b, "\\x%02x", c);
		else
			buf_addch(b, c);
	}
}

__attribute__((format(printf, 1, 2))) static void log_line(const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	char ts[32];
	struct tm tm;
	time_t now = time(NULL);
	va_list ap;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_addf(&b, "%s [%d] ", ts, (int)getpid());
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	buf_addch(&b, '\n');
	(void)write_all(log_fd, b.buf, b.len);
	buf_release(&b);
}

/* ---- connections: a socket, maybe under TLS, with a read buffer ---- */

struct conn {
	int fd;
	SSL *ssl;
	struct breq_src src; /* reads through conn_raw_read() */
};

static ssize_t conn_raw_read(void *ctx, void *dst, size_t n)
{
	struct conn *c = ctx;

	if (c->ssl) {
		int r = SSL_read(c->ssl, dst, n > INT32_MAX ? INT32_MAX : (int)n);

		if (r > 0)
			return r;
		switch (SSL_get_error(c->ssl, r)) {
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		case SSL_ERROR_SYSCALL:
			return errno ? -errno : 0;
		default:
			return -EPROTO;
		}
	}
	for (;;) {
		ssize_t r = read(c->fd, dst, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

/* c reads from fd (-1: not yet connected); c must stay where it is while in use. */
static void conn_init(struct conn *c, int fd)
{
	c->fd = fd;
	c->ssl = NULL;
	c->src = (struct breq_src)BREQ_SRC_INIT(conn_raw_read, c);
}

static int conn_write(struct conn *c, const void *data, size_t n)
{
	const char *p = data;

	if (!c->ssl)
		return write_all(c->fd, data, n);
	while (n) {
		int k = n > 1 << 20 ? 1 << 20 : (int)n;
		int r = SSL_write(c->ssl, p, k);

		if (r <= 0)
			return SSL_get_error(c->ssl, r) == SSL_ERROR_SYSCALL && errno ? -errno
										      : -EPROTO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	breq_src_release(&c->src);
}

static void set_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT_S, 0 };

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- answers of our own ---- */

static const char *reason_phrase(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Payload Too Large";
	case 415:
		return "Unsupported Media Type";
	case 502:
		return "Bad Gateway";
	default:
		return "Error";
	}
}

static void send_answer(struct conn *c, int status, const char *ctype, const struct buf *body)
{
	struct buf b = BUF_INIT;

	buf_addf(&b,
		 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "Cache-Control: no-cache\r\nConnection: close\r\n\r\n",
		 status, reason_phrase(status), ctype, body->len);
	buf_add(&b, body->buf, body->len);
	(void)conn_write(c, b.buf, b.len);
	buf_release(&b);
}

__attribute__((format(printf, 3, 4))) static void send_text(struct conn *c, int status,
							    const char *fmt, ...)
{
	struct buf body = BUF_INIT;
	va_list ap;

	buf_addstr(&body, "aibox-broker: ");
	va_start(ap, fmt);
	buf_vaddf(&body, fmt, ap);
	va_end(ap);
	buf_addch(&body, '\n');
	send_answer(c, status, "text/plain; charset=utf-8", &body);
	buf_release(&body);
}

/*
 * A refusal git prints as "fatal: remote error: <msg>": an ERR pkt-line
 * where the client expects the service's answer.
 */
static void send_git_error(struct conn *c, const char *service, int advertisement,
			   const char *msg)
{
	struct buf body = BUF_INIT;
	char ctype[64];

	if (advertisement) {
		pkt_addf(&body, "# service=%s\n", service);
		pkt_flush(&body);
	}
	pkt_addf(&body, "ERR aibox-broker: %s", msg);
	snprintf(ctype, sizeof(ctype), "application/x-%s-%s", service,
		 advertisement ? "advertisement" : "result");
	send_answer(c, 200, ctype, &body);
	buf_release(&body);
}

/* ---- the remote side ---- */

/* The TLS connection to the remote, certificate and host name checked.  0 or -errno. */
static int upstream_connect(const struct remote *rm, struct conn *up, struct buf *why)
{
	struct addrinfo *ai;
	int fd = -1, err = -ECONNREFUSED;
	struct in6_addr a6;
	struct in_addr a4;
	int is_ip;

	for (ai = rm->addrs; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		set_timeouts(fd);
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		buf_addf(why, "cannot connect to %s: %s", rm->hostport, strerror(-err));
		return err;
	}
	up->fd = fd;
	up->ssl = SSL_new(ssl_ctx);
	if (!up->ssl) {
		buf_addstr(why, "cannot start TLS");
		return -ENOMEM;
	}
	SSL_set_fd(up->ssl, fd);
	is_ip = inet_pton(AF_INET, rm->host, &a4) == 1 || inet_pton(AF_INET6, rm->host, &a6) == 1;
	if (is_ip) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(up->ssl), rm->host);
	} else {
		SSL_set_tlsext_host_name(up->ssl, rm->host);
		SSL_set1_host(up->ssl, rm->host);
	}
	SSL_set_verify(up->ssl, SSL_VERIFY_PEER, NULL);
	if (SSL_connect(up->ssl) != 1) {
		long v = SSL_get_verify_result(up->ssl);

		if (v != X509_V_OK)
			buf_addf(why, "TLS with %s failed: %s", rm->hostport,
				 X509_verify_cert_error_string(v));
		else
			buf_addf(why, "TLS with %s failed", rm->hostport);
		ERR_clear_error();
		return -EPROTO;
	}
	return 0;
}

/* Request headers the client may send on to the remote; all others are dropped. */
static const char *const pass_request[] = {
	"Accept", "Accept-Language", "Content-Type", "Git-Protocol", "User-Agent", "Pragma",
};

/* Response headers the remote may send back; all others are dropped. */
static const char *const pass_response[] = {
	"Content-Type", "Content-Encoding", "Cache-Control", "Expires", "Pragma", "Last-Modified",
};

static int in_list(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(name, list[i]))
			return 1;
	return 0;
}

struct request {
	struct breq_msg m;
	const char *method;
	struct remote *rm;
	size_t idx;
	const char *rest;	 /* after /<n>/: "info/refs?service=...", "git-upload-pack", ... */
	const char *service; /* git-upload-pack or git-receive-pack */
	int advert;		 /* info/refs */
	int gzip;
	int http10;
	int want_continue;
};

struct fwd_result {
	int status;
	unsigned long long up_bytes, down_bytes;
	struct buf why;
};

static int send_chunk(struct conn *c, const void *data, size_t n)
{
	char hdr[24];
	int r;

	if (!n)
		return 0;
	snprintf(hdr, sizeof(hdr), "%zx\r\n", n);
	r = conn_write(c, hdr, strlen(hdr));
	if (!r)
		r = conn_write(c, data, n);
	if (!r)
		r = conn_write(c, "\r\n", 2);
	return r;
}

/* Replace every form of rm's token in p[0..n) with '*', byte for byte. */
static void scrub_span(const struct remote *rm, char *p, size_t n)
{
	for (size_t i = 0; i < rm->nsecrets; i++) {
		const struct buf *sec = &rm->secrets[i];
		char *q = p, *m;
		size_t left = n;

		while ((m = memmem(q, left, sec->buf, sec->len))) {
			memset(m, '*', sec->len);
			left -= (size_t)(m - q) + sec->len;
			q = m + sec->len;
		}
	}
}

/*
 * An answer's body on its way to the client: the last secret_max - 1 bytes
 * are held back until more comes, so a token split between two reads is
 * found too.  Lengths do not change (Content-Length and pkt-lines stay
 * right).
 */
struct scrub {
	const struct remote *rm;
	struct buf hold;
};

/* Pass n bytes on through sc (last: all of what is held).  0 or -errno. */
static int relay(struct conn *client, int chunked, struct scrub *sc, const char *data, size_t n,
		 int last)
{
	size_t keep = last || !sc->rm->secret_max ? 0 : sc->rm->secret_max - 1;
	size_t ready;
	int r;

	buf_add(&sc->hold, data, n);
	scrub_span(sc->rm, sc->hold.buf, sc->hold.len);
	if (sc->hold.len <= keep)
		return 0;
	ready = sc->hold.len - keep;
	r = chunked ? send_chunk(client, sc->hold.buf, ready)
		    : conn_write(client, sc->hold.buf, ready);
	buf_consume(&sc->hold, ready);
	return r;
}

/*
 * Read the start of a receive-pack advertisement into `out`, up to its
 * first ref line (the one whose capabilities follow a NUL; git sends it
 * after "# service=...", a flush and maybe "version 1"), and drop
 * "push-options" from those capabilities, so git does not offer to send
 * any (they are refused: serve_push()).  *removed is how many bytes
 * shorter the body got.  0, or -EBADMSG for what is not pkt-lines, or a
 * read error.
 */
static int advert_drop_push_options(struct breq_body *rb, struct buf *out, size_t *removed)
{
	size_t pos = 0;
	int pkts = 0;

	while (pkts < 4) {
		enum pkt_kind kind;
		const char *p, *nul, *caps, *end;
		size_t n;
		struct buf line = BUF_INIT, rest = BUF_INIT;
		int r = pkt_parse(out->buf + pos, out->len - pos, &kind, &p, &n);

		if (r < 0)
			return r;
		if (r == 0) {
			ssize_t k;

			buf_grow(out, 65536);
			k = breq_body_read(rb, out->buf + out->len, 65536);
			if (k <= 0)
				return (int)k;
			buf_setlen(out, out->len + (size_t)k);
			continue;
		}
		pkts++;
		nul = kind == PKT_DATA ? memchr(p, '\0', n) : NULL;
		if (!nul) {
			pos += (size_t)r;
			continue;
		}
		buf_add(&line, p, (size_t)(nul + 1 - p));
		end = p + n;
		if (end > nul + 1 && end[-1] == '\n')
			end--;
		for (caps = nul + 1; caps < end;) {
			const char *sp = memchr(caps, ' ', (size_t)(end - caps));
			size_t k = sp ? (size_t)(sp - caps) : (size_t)(end - caps);

			if (k && !(k == 12 && !memcmp(caps, "push-options", 12))) {
				if (line.len > (size_t)(nul + 1 - p))
					buf_addch(&line, ' ');
				buf_add(&line, caps, k);
			}
			caps += k + 1;
		}
		buf_add(&line, end, (size_t)(p + n - end));
		*removed = n - line.len;
		buf_add(&rest, out->buf + pos + (size_t)r, out->len - pos - (size_t)r);
		buf_setlen(out, pos);
		pkt_add(out, line.buf, line.len);
		buf_add(out, rest.buf, rest.len);
		buf_release(&line);
		buf_release(&rest);
		return 0;
	}
	return 0;
}

/*
 * Send the request to the remote with our credentials: `pre` first, then
 * the rest of the client's body from `rest` (NULL: none).  `length` is the
 * whole body's length, or -1 to send it chunked.  Then relay the answer.
 * Returns 0 when an answer reached the client, or -1 with res->why set
 * (nothing sent to the client yet when res->status is 0).
 */
static int forward(struct conn *client, struct request *rq, const struct buf *pre,
		   struct breq_body *rest, long long length, struct fwd_result *res)
{
	struct remote *rm = rq->rm;
	struct conn up;
	struct breq_msg resp = BREQ_MSG_INIT;
	struct buf head = BUF_INIT, ahead = BUF_INIT;
	struct scrub sc = { rm, BUF_INIT };
	struct breq_body rb;
	char *data = xmalloc(65536);
	int ret = -1, r, chunked_out;
	long status = 0;
	long long out_len;
	const char *ce;

	conn_init(&up, -1);
	if (upstream_connect(rm, &up, &res->why) < 0)
		goto out;
	buf_addf(&head, "%s %s/%s HTTP/1.1\r\nHost: %s\r\n", rq->method, rm->path, rq->rest,
		 rm->hostport);
	buf_addstr(&head, rm->auth_header);
	for (size_t i = 0; i < rq->m.nh; i++)
		if (in_list(rq->m.h[i].name, pass_request, ARRAY_SIZE(pass_request)))
			buf_addf(&head, "%s: %s\r\n", rq->m.h[i].name, rq->m.h[i].value);
	if (!strcmp(rq->method, "POST")) {
		if (length >= 0)
			buf_addf(&head, "Content-Length: %lld\r\n", length);
		else
			buf_addstr(&head, "Transfer-Encoding: chunked\r\n");
	}
	buf_addstr(&head, "Connection: close\r\n\r\n");
	r = conn_write(&up, head.buf, head.len);
	if (r < 0) {
		buf_addf(&res->why, "cannot send to %s: %s", rm->hostport, strerror(-r));
		goto out;
	}
	if (!strcmp(rq->method, "POST")) {
		if (length >= 0)
			r = conn_write(&up, pre->buf, pre->len);
		else
			r = send_chunk(&up, pre->buf, pre->len);
		res->up_bytes += pre->len;
		while (!r && rest) {
			ssize_t n = breq_body_read(rest, data, 65536);

			if (n < 0) {
				buf_addf(&res->why, "reading the request: %s", strerror((int)-n));
				goto out;
			}
			if (n == 0)
				break;
			res->up_bytes += (unsigned long long)n;
			r = length >= 0 ? conn_write(&up, data, (size_t)n)
					: send_chunk(&up, data, (size_t)n);
		}
		if (!r && length < 0)
			r = conn_write(&up, "0\r\n\r\n", 5);
		if (r < 0) {
			buf_addf(&res->why, "cannot send to %s: %s", rm->hostport, strerror(-r));
			goto out;
		}
	}

	/* The answer: skip interim 1xx heads. */
	for (;;) {
		const char *sp;

		breq_msg_release(&resp);
		r = breq_read_head(&up.src, &resp);
		if (r < 0) {
			buf_addf(&res->why, "bad answer from %s: %s", rm->hostport, strerror(-r));
			goto out;
		}
		if (strncmp(resp.line, "HTTP/1.", 7) || !(sp = strchr(resp.line, ' ')) ||
		    strlen(sp + 1) < 3 || !isdigit((unsigned char)sp[1]) ||
		    !isdigit((unsigned char)sp[2]) || !isdigit((unsigned char)sp[3]) ||
		    (sp[4] && sp[4] != ' ')) {
			buf_addf(&res->why, "bad status line from %s", rm->hostport);
			goto out;
		}
		status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
		if (status >= 200)
			break;
		if (status == 101) {
			buf_addf(&res->why, "%s tried to switch protocols", rm->hostport);
			goto out;
		}
	}
	if (status == 401 || status == 407 || (status >= 300 && status < 400)) {
		/* Credentials or redirects are ours to handle, not the VM's. */
		buf_addf(&res->why, "%s answered %ld%s", rm->hostport, status,
			 status == 401 ? " (the token was not accepted)" : "");
		res->status = 502;
		send_text(client, 502, "the remote answered %ld", status);
		ret = 0;
		goto out;
	}
	res->status = (int)status;
	ce = breq_get(&resp, "Content-Encoding");
	if (ce && strcasecmp(ce, "identity")) {
		/* Not asked for (no Accept-Encoding goes upstream), and not checkable. */
		buf_addf(&res->why, "%s sent a compressed answer", rm->hostport);
		res->status = 502;
		send_text(client, 502, "the remote sent a compressed answer");
		goto out;
	}
	breq_body_init(&rb, &up.src, &resp, 1);
	out_len = !resp.chunked && resp.length >= 0 ? resp.length : -1;
	if (status == 200 && rq->advert && !strcmp(rq->service, "git-receive-pack")) {
		size_t removed = 0;

		r = advert_drop_push_options(&rb, &ahead, &removed);
		if (r < 0) {
			buf_addf(&res->why, "bad receive-pack advertisement from %s: %s",
				 rm->hostport, strerror(-r));
			res->status = 502;
			send_text(client, 502, "the remote sent a bad receive-pack advertisement");
			goto out;
		}
		res->down_bytes += ahead.len + removed;
		if (out_len >= 0)
			out_len -= (long long)removed;
	}
	buf_reset(&head);
	buf_addf(&head, "HTTP/1.1 %ld %s\r\n", status, reason_phrase((int)status));
	for (size_t i = 0; i < resp.nh; i++)
		if (in_list(resp.h[i].name, pass_response, ARRAY_SIZE(pass_response)))
			buf_addf(&head, "%s: %s\r\n", resp.h[i].name, resp.h[i].value);
	scrub_span(rm, head.buf, head.len);
	chunked_out = 0;
	if (out_len >= 0)
		buf_addf(&head, "Content-Length: %lld\r\n", out_len);
	else if (!rq->http10) {
		buf_addstr(&head, "Transfer-Encoding: chunked\r\n");
		chunked_out = 1;
	}
	buf_addstr(&head, "Connection: close\r\n\r\n");
	ret = 0;
	if (conn_write(client, head.buf, head.len) < 0) {
		buf_addstr(&res->why, "the client went away");
		goto out;
	}
	r = relay(client, chunked_out, &sc, ahead.buf, ahead.len, 0);
	while (!r) {
		ssize_t n = breq_body_read(&rb, data, 65536);

		if (n < 0) {
			buf_addf(&res->why, "reading the answer: %s", strerror((int)-n));
			goto out;
		}
		res->down_bytes += (unsigned long long)n;
		r = relay(client, chunked_out, &sc, data, (size_t)n, n == 0);
		if (n == 0)
			break;
	}
	if (r < 0) {
		buf_addstr(&res->why, "the client went away");
		goto out;
	}
	if (chunked_out)
		(void)conn_write(client, "0\r\n\r\n", 5);
out:
	free(data);
	buf_release(&head);
	buf_release(&ahead);
	buf_release(&sc.hold);
	breq_msg_release(&resp);
	conn_close(&up);
	return ret;
}

/* ---- push policy ---- */

static void allowed_list(const struct remote *rm, struct buf *out)
{
	for (size_t i = 0; i < rm->npush; i++)
		buf_addf(out, "%s%s", i ? ", " : "", rm->push[i]);
}

/* Why the command may not go through, or NULL. */
static const char *push_refusal(const struct remote *rm, const struct push_cmd *c)
{
	const char *branch;

	if (!refname_ok(c->ref))
		return "not a valid ref name";
	if (!strncmp(c->ref, "refs/tags/", 10))
		return "tags may not be pushed";
	if (strncmp(c->ref, "refs/heads/", 11))
		return "only branches may be pushed";
	if (oid_is_null(c->new_oid))
		return "deleting branches is not allowed";
	branch = c->ref + 11;
	for (size_t i = 0; i < rm->npush; i++)
		if (branch_pattern_match(rm->push[i], branch))
			return NULL;
	return "this branch may not be pushed";
}

/*
 * Tell a refused push why, as receive-pack would: "unpack ok" and "ng <ref>
 * <reason>" for every ref (report-status), inside side-band 1 if the client
 * asked for side-band, with the same text on band 2 so it also shows as
 * "remote: ..."; or an ERR pkt-line for a client that asked for neither.
 * `all` is a reason for the whole push; else why[i] for each ref refused.
 */
static void send_push_refusal(struct conn *client, const struct remote *rm,
			      const struct push_commands *pc, const char **why, const char *all)
{
	struct buf report = BUF_INIT, body = BUF_INIT, progress = BUF_INIT, allowed = BUF_INIT;
	int sb64 = caps_have(pc->caps, "side-band-64k");
	int sb = sb64 || caps_have(pc->caps, "side-band");
	int rs = caps_have(pc->caps, "report-status") || caps_have(pc->caps, "report-status-v2");

	allowed_list(rm, &allowed);
	pkt_addf(&report, "unpack ok\n");
	if (all)
		buf_addf(&progress, "aibox-broker: refusing this push: %s\n", all);
	for (size_t i = 0; i < pc->nr; i++) {
		const char *w = why[i] ? why[i] : "not pushed: another ref of this push was refused";

		if (all)
			pkt_addf(&report, "ng %s %s\n", pc->cmds[i].ref, all);
		else
			pkt_addf(&report, "ng %s %s (allowed: branches %s)\n", pc->cmds[i].ref, w,
				 allowed.buf);
		if (why[i] && !all)
			buf_addf(&progress,
				 "aibox-broker: refusing %s: %s; this remote allows pushing "
				 "branches %s\n",
				 pc->cmds[i].ref, why[i], allowed.buf);
	}
	pkt_flush(&report);
	if (!rs) {
		struct buf msg = BUF_INIT;

		buf_addstr(&msg, progress.buf);
		buf_rtrim(&msg);
		pkt_addf(&body, "ERR %s", msg.buf);
		buf_release(&msg);
	} else if (sb) {
		pkt_add_sideband(&body, 2, progress.buf, progress.len, sb64 ? PKT_MAX : 1000);
		pkt_add_sideband(&body, 1, report.buf, report.len, sb64 ? PKT_MAX : 1000);
		pkt_flush(&body);
	} else {
		buf_add(&body, report.buf, report.len);
	}
	send_answer(client, 200, "application/x-git-receive-pack-result", &body);
	buf_release(&report);
	buf_release(&body);
	buf_release(&progress);
	buf_release(&allowed);
}

/* ---- one request ---- */

static const char *op_name(const struct request *rq)
{
	return !strcmp(rq->service, "git-upload-pack") ? "fetch" : "push";
}

/* Log one operation; `refs` may be NULL. */
static void log_op(const struct request *rq, const char *result, const char *refs,
		   const struct fwd_result *res)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "remote=%zu url=%s op=%s request=", rq->idx, rq->rm->url, op_name(rq));
	log_add_clean(&b, rq->method, strlen(rq->method), 0);
	buf_addf(&b, " %s", rq->advert ? "info/refs" : rq->service);
	if (refs)
		buf_addf(&b, " refs=%s", refs);
	buf_addf(&b, " result=%s", result);
	if (res->status)
		buf_addf(&b, " status=%d", res->status);
	buf_addf(&b, " bytes_up=%llu bytes_down=%llu", res->up_bytes, res->down_bytes);
	if (res->why.len) {
		buf_addstr(&b, " why=\"");
		log_add_clean(&b, res->why.buf, res->why.len, 1);
		buf_addch(&b, '"');
	}
	log_line("%s", b.buf);
	buf_release(&b);
}

/*
 * Read and drop the rest of a request body before refusing it, at most
 * DRAIN_MAX bytes, as a remote that refuses a push does: git's remote-curl
 * sends a pack the answer came too early for as a new request (which would
 * then be refused as malformed) instead of reading the refusal.
 */
static void drain_body(struct breq_body *b)
{
	char *sink;
	unsigned long long total = 0;

	if (!b || b->done)
		return;
	sink = xmalloc(65536);
	while (total < DRAIN_MAX) {
		ssize_t n = breq_body_read(b, sink, 65536);

		if (n <= 0)
			break;
		total += (unsigned long long)n;
	}
	free(sink);
}

static void serve_push(struct conn *client, struct request *rq, struct breq_body *body,
		       struct fwd_result *res)
{
	struct push_commands pc = PUSH_COMMANDS_INIT;
	struct buf pre = BUF_INIT, refs = BUF_INIT;
	const char **why = NULL, *all = NULL;
	long long length = -1;
	int r, refused = 0;

	if (rq->gzip) {
		unsigned long long in = 0;

		r = breq_inflate(body, &pre, BODY_MAX, &in);
		res->up_bytes = 0;
		if (r < 0) {
			buf_addf(&res->why, "gzip body: %s", strerror(-r));
			res->status = r == -EFBIG ? 413 : 400;
			send_text(client, res->status, "cannot read the gzip request body: %s",
				  strerror(-r));
			log_op(rq, "refused", NULL, res);
			goto out;
		}
		r = push_commands_parse(&pc, pre.buf, pre.len);
		length = (long long)pre.len;
		body = NULL;
	} else {
		char *data = xmalloc(65536);

		for (;;) {
			ssize_t n;

			r = push_commands_parse(&pc, pre.buf, pre.len);
			if (r != -EAGAIN)
				break;
			push_commands_release(&pc);
			n = breq_body_read(body, data, 65536);
			if (n <= 0) {
				r = n == 0 ? -EAGAIN : (int)n;
				break;
			}
			buf_add(&pre, data, (size_t)n);
		}
		free(data);
		if (!rq->m.chunked)
			length = rq->m.length;
	}
	if (r == -ENODATA && pre.len == 4) {
		/*
		 * Only a flush: git's probe before a large chunked push (remote-curl's
		 * probe_rpc), which updates nothing.  Forward it if nothing follows.
		 */
		char extra;
		ssize_t n = body ? breq_body_read(body, &extra, 1) : 0;

		if (n == 0) {
			if (forward(client, rq, &pre, NULL, 4, res) < 0 && !res->status) {
				res->status = 502;
				send_text(client, 502, "%s", res->why.buf);
			}
			log_op(rq, res->why.len ? "failed" : "allowed", "(probe)", res);
			goto out;
		}
	}
	if (r < 0) {
		const char *what = r == -EAGAIN	   ? "the command list ends without a flush"
				   : r == -EFBIG   ? "the command list is too long"
				   : r == -ENODATA ? "the command list is empty"
				   : r == -EBADMSG ? "the command list is malformed"
						   : strerror(-r);

		buf_addf(&res->why, "%s", what);
		res->status = r == -EFBIG ? 413 : 400;
		send_text(client, res->status, "push refused: %s", what);
		log_op(rq, "refused", NULL, res);
		goto out;
	}
	why = xcalloc(pc.nr, sizeof(*why));
	for (size_t i = 0; i < pc.nr; i++) {
		why[i] = push_refusal(rq->rm, &pc.cmds[i]);
		refused |= why[i] != NULL;
		if (i)
			buf_addch(&refs, ',');
		log_add_clean(&refs, pc.cmds[i].ref, strlen(pc.cmds[i].ref), 0);
		buf_addf(&refs, "%s", oid_is_null(pc.cmds[i].new_oid)   ? "(delete)"
				      : oid_is_null(pc.cmds[i].old_oid) ? "(create)"
									: "");
		if (why[i]) {
			buf_addf(&res->why, "%s%s: %s", res->why.len ? "; " : "", pc.cmds[i].ref,
				 why[i]);
		}
	}
	if (caps_have(pc.caps, "push-options")) {
		/*
		 * Push options steer the remote beyond the ref updates (GitLab's
		 * merge_request.* and ci.variable=, for one): none pass.
		 */
		all = "push options (git push -o) are not allowed";
		buf_reset(&res->why);
		buf_addstr(&res->why, all);
		refused = 1;
	}
	if (refused) {
		drain_body(body);
		send_push_refusal(client, rq->rm, &pc, why, all);
		res->status = 200;
		log_op(rq, "refused", refs.buf, res);
		goto out;
	}
	if (forward(client, rq, &pre, body, length, res) < 0 && !res->status) {
		res->status = 502;
		send_text(client, 502, "%s", res->why.buf);
	}
	log_op(rq, res->why.len ? "failed" : "allowed", refs.buf, res);
out:
	free(why);
	push_commands_release(&pc);
	buf_release(&pre);
	buf_release(&refs);
}

/*
 * A fetch request (wants, haves, v2 commands) is small: it is read whole,
 * at most BODY_MAX bytes (inflated), and must be well-formed
 * pkt-lines before anything goes to the remote.
 */
static void serve_fetch_post(struct conn *client, struct request *rq, struct breq_body *body,
			     struct fwd_result *res)
{
	struct buf pre = BUF_INIT;
	const char *what = NULL;
	int r = 0;

	if (rq->gzip) {
		unsigned long long in = 0;

		r = breq_inflate(body, &pre, BODY_MAX, &in);
	} else {
		char *data = xmalloc(65536);

		for (;;) {
			ssize_t n = breq_body_read(body, data, 65536);

			if (n <= 0) {
				r = (int)n;
				break;
			}
			if (pre.len + (size_t)n > BODY_MAX) {
				r = -EFBIG;
				break;
			}
			buf_add(&pre, data, (size_t)n);
		}
		free(data);
	}
	if (r < 0)
		what = rq->gzip ? "cannot read the gzip request body" : "cannot read the request body";
	else if (!pkt_stream_ok(pre.buf, pre.len))
		what = "the request is not well-formed pkt-lines";
	if (what) {
		if (r < 0)
			buf_addf(&res->why, "%s: %s", what, strerror(-r));
		else
			buf_addstr(&res->why, what);
		res->status = r == -EFBIG ? 413 : 400;
		send_text(client, res->status, "%s", res->why.buf);
		log_op(rq, "refused", NULL, res);
		goto out;
	}
	if (forward(client, rq, &pre, NULL, (long long)pre.len, res) < 0 && !res->status) {
		res->status = 502;
		send_text(client, 502, "%s", res->why.buf);
	}
	log_op(rq, res->why.len ? "failed" : "allowed", NULL, res);
out:
	buf_release(&pre);
}

/*
 * Before closing, let the client finish sending (Apache's lingering close):
 * a refusal is answered before the request body (a push's pack) has been
 * read, and closing a socket with unread data resets the connection, which
 * can destroy the answer before the client reads it.  Bounded: 64 MiB or 5 s
 * without data.
 */
static void linger_close(struct conn *c)
{
	struct timeval tv = { 5, 0 };
	char *sink;
	size_t total = 0;

	if (c->fd < 0 || shutdown(c->fd, SHUT_WR) < 0)
		return;
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sink = xmalloc(65536);
	while (total < (64u << 20)) {
		ssize_t n = read(c->fd, sink, 65536);

		if (n <= 0)
			break;
		total += (size_t)n;
	}
	free(sink);
}

/*
 * Serve the one request on `fd`.  `prefix` holds bytes already read from it
 * (by a proxy), `want_idx` the remote the hand-off named, or -1.
 */
static void serve_conn(int fd, const char *prefix, size_t prefix_len, long want_idx)
{
	struct conn client;
	struct request rq;
	struct fwd_result res;
	struct breq_body body;
	const char *sp1, *sp2, *ce;
	char *target = NULL;
	int r;

	memset(&rq, 0, sizeof(rq));
	rq.m = (struct breq_msg)BREQ_MSG_INIT;
	memset(&res, 0, sizeof(res));
	conn_init(&client, fd);
	/*
	 * The proxy accepts with SOCK_NONBLOCK and hands its socket over as it
	 * is: every read and write here blocks, bounded by the timeouts.
	 */
	{
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0 && (fl & O_NONBLOCK))
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	set_timeouts(fd);
	buf_add(&client.src.in, prefix, prefix_len);

	r = breq_read_head(&client.src, &rq.m);
	if (r < 0) {
		if (r != -ENODATA)
			send_text(&client, r == -EFBIG ? 413 : 400, "bad request");
		log_line("result=refused why=\"bad request head: %s\"", strerror(-r));
		goto out;
	}
	sp1 = strchr(rq.m.line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strchr(sp2 + 1, ' ') ||
	    (strcmp(sp2 + 1, "HTTP/1.1") && strcmp(sp2 + 1, "HTTP/1.0"))) {
		send_text(&client, 400, "bad request line");
		log_line("result=refused why=\"bad request line\"");
		goto out;
	}
	rq.http10 = !strcmp(sp2 + 1, "HTTP/1.0");
	target = xstrndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));
	rq.m.line[sp1 - rq.m.line] = '\0';
	rq.method = rq.m.line;
	if (breq_parse_target(target, &rq.idx, &rq.rest) < 0 || rq.idx >= nremotes ||
	    (want_idx >= 0 && (size_t)want_idx != rq.idx)) {
		struct buf t = BUF_INIT;

		log_add_clean(&t, target, strlen(target), 1);
		send_text(&client, 404, "no such remote");
		log_line("result=refused why=\"no such remote\" target=\"%s\"", t.buf);
		buf_release(&t);
		goto out;
	}
	rq.rm = &remotes[rq.idx];
	if (!strcmp(rq.rest, "info/refs?service=git-upload-pack")) {
		rq.service = "git-upload-pack";
		rq.advert = 1;
	} else if (!strcmp(rq.rest, "info/refs?service=git-receive-pack")) {
		rq.service = "git-receive-pack";
		rq.advert = 1;
	} else if (!strcmp(rq.rest, "git-upload-pack") || !strcmp(rq.rest, "git-receive-pack")) {
		rq.service = rq.rest;
	} else {
		struct buf t = BUF_INIT;

		log_add_clean(&t, rq.rest, strlen(rq.rest), 1);
		send_text(&client, 404, "only git's smart HTTP requests are served");
		log_line("remote=%zu result=refused why=\"not a smart HTTP request\" path=\"%s\"",
			 rq.idx, t.buf);
		buf_release(&t);
		goto out;
	}
	if (strcmp(rq.method, rq.advert ? "GET" : "POST")) {
		res.status = 405;
		buf_addstr(&res.why, "wrong method");
		send_text(&client, 405, "%s needs %s", rq.rest, rq.advert ? "GET" : "POST");
		log_op(&rq, "refused", NULL, &res);
		goto out;
	}
	if (rq.advert && (rq.m.chunked || rq.m.length > 0)) {
		res.status = 400;
		buf_addstr(&res.why, "GET with a body");
		send_text(&client, 400, "GET with a body");
		log_op(&rq, "refused", NULL, &res);
		goto out;
	}
	if (!rq.advert && !rq.m.chunked && rq.m.length < 0) {
		res.status = 400;
		buf_addstr(&res.why, "POST without Content-Length or chunked");
		send_text(&client, 400, "POST needs Content-Length or chunked");
		log_op(&rq, "refused", NULL, &res);
		goto out;
	}
	ce = breq_get(&rq.m, "Content-Encoding");
	if (ce) {
		if (breq_count(&rq.m, "Content-Encoding") > 1 ||
		    (strcasecmp(ce, "gzip") && strcasecmp(ce, "x-gzip"))) {
			res.status = 415;
			buf_addstr(&res.why, "unsupported Content-Encoding");
			send_text(&client, 415, "only gzip request bodies are understood");
			log_op(&rq, "refused", NULL, &res);
			goto out;
		}
		rq.gzip = 1;
	}

	breq_body_init(&body, &client.src, &rq.m, 0);
	{
		const char *expect = breq_get(&rq.m, "Expect");

		rq.want_continue = expect && !strcasecmp(expect, "100-continue") && !rq.http10;
	}

	/*
	 * Policy.  A refused POST's body is read and dropped first, unless the
	 * client waits for "100 Continue" and so has not sent it.
	 */
	if (!strcmp(rq.service, "git-upload-pack") && !rq.rm->fetch) {
		if (!rq.want_continue)
			drain_body(&body);
		buf_addstr(&res.why, "fetch is not allowed");
		res.status = 200;
		send_git_error(&client, rq.service, rq.advert,
			       "fetching from this remote is not allowed");
		log_op(&rq, "refused", NULL, &res);
		goto out;
	}
	if (!strcmp(rq.service, "git-receive-pack") && !rq.rm->npush) {
		if (!rq.want_continue)
			drain_body(&body);
		buf_addstr(&res.why, "push is not allowed");
		res.status = 200;
		send_git_error(&client, rq.service, rq.advert,
			       "pushing to this remote is not allowed");
		log_op(&rq, "refused", NULL, &res);
		goto out;
	}

	if (rq.want_continue)
		(void)conn_write(&client, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	if (rq.advert) {
		struct buf none = BUF_INIT;

		if (forward(&client, &rq, &none, NULL, 0, &res) < 0 && !res.status) {
			res.status = 502;
			send_text(&client, 502, "%s", res.why.buf);
		}
		log_op(&rq, res.why.len ? "failed" : "allowed", NULL, &res);
	} else if (!strcmp(rq.service, "git-receive-pack")) {
		serve_push(&client, &rq, &body, &res);
	} else {
		serve_fetch_post(&client, &rq, &body, &res);
	}
out:
	linger_close(&client);
	free(target);
	buf_release(&res.why);
	breq_msg_release(&rq.m);
	conn_close(&client);
}

/* ---- setup ---- */

static struct remote *cur_remote(const char *opt)
{
	if (!nremotes)
		die("%s must follow a --remote", opt);
	return &remotes[nremotes - 1];
}

static void parse_url(struct remote *rm)
{
	const char *p = rm->url, *auth_end, *host_end;
	char *authority;

	if (strncmp(p, "https://", 8))
		die("remote '%s' is not an https URL", rm->url);
	p += 8;
	auth_end = p + strcspn(p, "/?#");
	if (*auth_end == '?' || *auth_end == '#' || strpbrk(p, "?#"))
		die("remote '%s' has a query or fragment", rm->url);
	authority = xstrndup(p, (size_t)(auth_end - p));
	if (strchr(authority, '@'))
		die("remote '%s' has credentials in it; use --token-env", rm->url);
	if (authority[0] == '[') {
		host_end = strchr(authority, ']');
		if (!host_end)
			die("remote '%s' has a bad host", rm->url);
		rm->host = xstrndup(authority + 1, (size_t)(host_end - authority - 1));
		host_end++;
	} else {
		host_end = authority + strcspn(authority, ":");
		rm->host = xstrndup(authority, (size_t)(host_end - authority));
	}
	if (*host_end == ':') {
		long port;

		if (parse_long(host_end + 1, 1, 65535, &port) < 0)
			die("remote '%s' has a bad port", rm->url);
		rm->port = xstrdup(host_end + 1);
	} else if (*host_end) {
		die("remote '%s' has a bad host", rm->url);
	} else {
		rm->port = xstrdup("443");
	}
	if (!*rm->host)
		die("remote '%s' has no host", rm->url);
	for (const char *h = rm->host; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr(".-:_", *h))
			die("remote '%s' has a bad host", rm->url);
	rm->hostport = authority;
	{
		size_t n = strlen(auth_end);

		while (n && auth_end[n - 1] == '/')
			n--;
		rm->path = xstrndup(auth_end, n);
		for (const char *q = rm->path; *q; q++)
			if ((unsigned char)*q <= ' ' || (unsigned char)*q >= 0x7f)
				die("remote '%s' has a bad path", rm->url);
	}
}

/* Remember s[0..n) as a secret, and its URL-encoded forms (%XX and %xx). */
static void add_secret(struct remote *rm, const char *s, size_t n)
{
	for (int form = 0; form < 3; form++) {
		struct buf b = BUF_INIT;

		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)s[i];

			if (!form || isalnum(c) || strchr("-._~", c))
				buf_addch(&b, c);
			else
				buf_addf(&b, form == 1 ? "%%%02X" : "%%%02x", c);
		}
		if (form && rm->nsecrets && b.len == rm->secrets[rm->nsecrets - 1].len &&
		    !memcmp(b.buf, rm->secrets[rm->nsecrets - 1].buf, b.len)) {
			buf_release(&b);
			continue;
		}
		ALLOC_GROW(rm->secrets, rm->nsecrets + 1, rm->secrets_alloc);
		rm->secrets[rm->nsecrets++] = b;
		if (b.len > rm->secret_max)
			rm->secret_max = b.len;
	}
}

static void setup_remote(struct remote *rm)
{
	struct addrinfo hints;
	struct buf cred = BUF_INIT;
	int r;

	parse_url(rm);
	if (!rm->fetch && !rm->npush)
		warning("remote '%s' allows neither fetch nor push", rm->url);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	r = getaddrinfo(rm->host, rm->port, &hints, &rm->addrs);
	if (r)
		die("cannot resolve '%s': %s", rm->host, gai_strerror(r));
	if (!rm->token_env) {
		/* A public remote: nothing to add. */
		rm->auth_header = xstrdup("");
	} else if (rm->auth == AUTH_BASIC) {
		struct buf plain = BUF_INIT;
		size_t n;

		buf_addf(&plain, "%s:%s", rm->auth_user ? rm->auth_user : "x-access-token",
			 rm->token);
		buf_grow(&cred, 4 * ((plain.len + 2) / 3) + 1);
		n = (size_t)EVP_EncodeBlock((unsigned char *)cred.buf,
					    (const unsigned char *)plain.buf, (int)plain.len);
		buf_setlen(&cred, n);
		explicit_bzero(plain.buf, plain.len);
		buf_release(&plain);
		rm->auth_header = xmalloc(cred.len + 32);
		snprintf(rm->auth_header, cred.len + 32, "Authorization: Basic %s\r\n", cred.buf);
	} else {
		rm->auth_header = xmalloc(strlen(rm->token) + 32);
		snprintf(rm->auth_header, strlen(rm->token) + 32, "Authorization: Bearer %s\r\n",
			 rm->token);
	}
	if (rm->token)
		add_secret(rm, rm->token, strlen(rm->token));
	if (cred.len)
		add_secret(rm, cred.buf, cred.len);
	explicit_bzero(cred.buf, cred.len);
	buf_release(&cred);
}

/*
 * Every token: from the NAME=value lines on token_fd when there is one (what
 * aibox task and aibox run send, broker_spawn.h), else from the environment,
 * taken out of it (its bytes wiped: /proc/PID/environ shows the initial
 * block).
 */
static void read_tokens(int token_fd)
{
	struct buf lines = BUF_INIT, v = BUF_INIT;

	if (token_fd >= 0) {
		ssize_t n = secret_read_fd(token_fd, &lines, SECRET_PIPE_MAX);

		if (n < 0)
			die_err((int)n, "cannot read the tokens from --token-fd");
	}
	for (size_t i = 0; i < nremotes; i++) {
		const char *name = remotes[i].token_env;
		int found = 0;

		if (!name)
			continue;
		for (size_t j = 0; j < i; j++)
			if (remotes[j].token_env && !strcmp(remotes[j].token_env, name)) {
				remotes[i].token = xstrdup(remotes[j].token);
				break;
			}
		if (remotes[i].token)
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
		for (size_t k = 0; k < v.len; k++)
			if ((unsigned char)v.buf[k] < 0x21 || (unsigned char)v.buf[k] >= 0x7f)
				die("the token in '%s' holds a space or control character", name);
		remotes[i].token = xstrdup(v.buf);
	}
	buf_wipe_release(&v);
	buf_wipe_release(&lines);
}

static void setup_tls(const char *ca)
{
	ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (!ssl_ctx)
		die("cannot set up TLS");
	SSL_CTX_set_min_proto_version(ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ssl_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(ssl_ctx, SSL_VERIFY_PEER, NULL);
	/* Loaded now, whole: the sandbox forbids opening files later. */
	if (!ca)
		ca = X509_get_default_cert_file();
	if (SSL_CTX_load_verify_locations(ssl_ctx, ca, NULL) != 1)
		die("cannot load the CA certificates in '%s'", ca);
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
		block = 0;
	}
}

/* Serve fd in a child; closes fd in the parent. */
static void spawn_server(int fd, int *close_in_child, const char *prefix, size_t plen,
			 long want_idx)
{
	pid_t pid;

	while (nchildren >= CHILDREN_MAX && !stop)
		reap(1);
	if (stop) {
		close(fd);
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_line("result=failed why=\"cannot fork: %s\"", strerror(errno));
		close(fd);
		return;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (*close_in_child >= 0)
			close(*close_in_child);
		serve_conn(fd, prefix, plen, want_idx);
		_exit(0);
	}
	nchildren++;
	close(fd);
}

/*
 * One hand-off message: data "aibox-broker/1 <remote|-> <n>\n" followed by
 * exactly n bytes already read from the connection, and the connection as
 * the one SCM_RIGHTS fd.  Returns 1 when served, 0 at EOF, -1 to go on.
 */
static int handoff_one(int hfd)
{
	char *data = xmalloc(HANDOFF_MAX + 1);
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { data, HANDOFF_MAX + 1 };
	struct msghdr msg;
	struct cmsghdr *c;
	int fds[4], nfds = 0, ret = -1, conn = -1;
	ssize_t n;
	char *nl, *sp1, *sp2;
	long idx = -1, plen;
	int none = -1;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	n = recvmsg(hfd, &msg, MSG_CMSG_CLOEXEC);
	if (n < 0) {
		if (errno != EINTR)
			log_line("handoff result=failed why=\"%s\"", strerror(errno));
		ret = errno == EINTR ? -1 : 0;
		goto out;
	}
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < k && nfds < 4; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	}
	if (n == 0 && !nfds) {
		ret = 0;
		goto out;
	}
	if (nfds != 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		log_line("handoff result=refused why=\"a message needs exactly one fd and at most "
			 "%d bytes\"",
			 HANDOFF_MAX);
		goto out;
	}
	conn = fds[0];
	nfds = 0;
	data[n] = '\0';
	nl = memchr(data, '\n', (size_t)n);
	if (!nl || strncmp(data, "aibox-broker/1 ", 15))
		goto bad;
	*nl = '\0';
	sp1 = data + 14;
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2)
		goto bad;
	*sp2 = '\0';
	if (strcmp(sp1 + 1, "-")) {
		size_t k;

		if (breq_remote_number(sp1 + 1, strlen(sp1 + 1), &k) < 0)
			goto bad;
		idx = (long)k;
	}
	if (parse_long(sp2 + 1, 0, BREQ_HEAD_MAX, &plen) < 0 ||
	    (size_t)plen != (size_t)n - (size_t)(nl + 1 - data))
		goto bad;
	{
		struct stat st;

		if (fstat(conn, &st) < 0 || !S_ISSOCK(st.st_mode))
			goto bad;
	}
	spawn_server(conn, &none, nl + 1, (size_t)plen, idx);
	conn = -1;
	ret = 1;
	goto out;
bad:
	log_line("handoff result=refused why=\"malformed hand-off header\"");
out:
	if (conn >= 0)
		close(conn);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	free(data);
	return ret;
}

int main(int argc, char **argv)
{
	enum { O_REMOTE = 256, O_TOKEN_ENV, O_FETCH, O_PUSH, O_AUTH, O_AUTH_USER, O_LISTEN,
	       O_LISTEN_FD, O_CONN_FD, O_HANDOFF_FD, O_LOG, O_LOG_FD, O_READY_FD, O_CA,
	       O_NO_SANDBOX, O_TOKEN_FD, O_HELP };
	static const struct option opts[] = {
		{ "remote", required_argument, NULL, O_REMOTE },
		{ "token-env", required_argument, NULL, O_TOKEN_ENV },
		{ "fetch", no_argument, NULL, O_FETCH },
		{ "push", required_argument, NULL, O_PUSH },
		{ "auth", required_argument, NULL, O_AUTH },
		{ "auth-user", required_argument, NULL, O_AUTH_USER },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "listen-fd", required_argument, NULL, O_LISTEN_FD },
		{ "conn-fd", required_argument, NULL, O_CONN_FD },
		{ "handoff-fd", required_argument, NULL, O_HANDOFF_FD },
		{ "log", required_argument, NULL, O_LOG },
		{ "log-fd", required_argument, NULL, O_LOG_FD },
		{ "ready-fd", required_argument, NULL, O_READY_FD },
		{ "ca", required_argument, NULL, O_CA },
		{ "no-sandbox", no_argument, NULL, O_NO_SANDBOX },
		{ "token-fd", required_argument, NULL, O_TOKEN_FD },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen_spec = NULL, *log_path = NULL, *ca = NULL;
	int listen_fd = -1, conn_fd = -1, handoff_fd = -1, ready_fd = -1, token_fd = -1, sandbox = 1;
	int nsources = 0, opt, r;
	struct buf addr = BUF_INIT;
	struct sigaction sa;

	tool_init(argc, argv);
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		struct remote *rm;
		int fd;

		switch (opt) {
		case O_REMOTE:
			ALLOC_GROW(remotes, nremotes + 1, remotes_alloc);
			memset(&remotes[nremotes], 0, sizeof(remotes[0]));
			remotes[nremotes++].url = xstrdup(optarg);
			break;
		case O_TOKEN_ENV:
			rm = cur_remote("--token-env");
			if (rm->token_env)
				die("remote '%s' has two --token-env", rm->url);
			if (!*optarg)
				die("--token-env wants a variable name");
			rm->token_env = optarg;
			break;
		case O_FETCH:
			cur_remote("--fetch")->fetch = 1;
			break;
		case O_PUSH:
			rm = cur_remote("--push");
			if (!branch_pattern_ok(optarg))
				die("--push '%s' is not a branch name or pattern", optarg);
			ALLOC_GROW(rm->push, rm->npush + 1, rm->push_alloc);
			rm->push[rm->npush++] = optarg;
			break;
		case O_AUTH:
			rm = cur_remote("--auth");
			if (!strcmp(optarg, "basic"))
				rm->auth = AUTH_BASIC;
			else if (!strcmp(optarg, "bearer"))
				rm->auth = AUTH_BEARER;
			else
				die("--auth wants basic or bearer, not '%s'", optarg);
			break;
		case O_AUTH_USER:
			rm = cur_remote("--auth-user");
			if (!*optarg || strchr(optarg, ':'))
				die("--auth-user '%s' is not a user name", optarg);
			rm->auth_user = optarg;
			break;
		case O_LISTEN:
			listen_spec = optarg;
			nsources++;
			break;
		case O_LISTEN_FD:
		case O_CONN_FD:
		case O_HANDOFF_FD:
		case O_LOG_FD:
		case O_READY_FD:
		case O_TOKEN_FD:
			if (parse_fd(optarg, &fd) < 0)
				die("'%s' is not an fd number", optarg);
			check_fd(fd, argv[optind - 2]);
			if (opt == O_LISTEN_FD)
				listen_fd = fd, nsources++;
			else if (opt == O_CONN_FD)
				conn_fd = fd, nsources++;
			else if (opt == O_HANDOFF_FD)
				handoff_fd = fd, nsources++;
			else if (opt == O_LOG_FD)
				log_fd = fd;
			else if (opt == O_TOKEN_FD)
				token_fd = fd;
			else
				ready_fd = fd;
			break;
		case O_LOG:
			log_path = optarg;
			break;
		case O_CA:
			ca = optarg;
			break;
		case O_NO_SANDBOX:
			sandbox = 0;
			break;
		case O_HELP:
			fputs(usage_text, stdout);
			return 0;
		default:
			usage_die(usage_text);
		}
	}
	if (optind != argc || !nremotes)
		usage_die(usage_text);
	if (nsources != 1)
		die("give exactly one of --listen, --listen-fd, --conn-fd and --handoff-fd");
	if (!ca)
		ca = getenv("AIBOX_BROKER_CA");
	if (ca && !*ca)
		ca = NULL;

	read_tokens(token_fd);
	for (size_t i = 0; i < nremotes; i++)
		setup_remote(&remotes[i]);
	setup_tls(ca);
	if (log_path) {
		log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (log_fd < 0)
			die_errno("cannot open '%s'", log_path);
	}
	if (listen_spec)
		listen_fd = listen_on(listen_spec, &addr);
	if (handoff_fd >= 0) {
		int type;
		socklen_t tl = sizeof(type);

		if (getsockopt(handoff_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
		    type != SOCK_SEQPACKET)
			die("--handoff-fd %d is not a unix SOCK_SEQPACKET socket", handoff_fd);
	}

	if (sandbox) {
		r = sandbox_lockdown(SANDBOX_SECCOMP, 0);
		if (r < 0)
			die_err(r, "cannot lock down");
	}
	for (size_t i = 0; i < nremotes; i++)
		log_line("start remote=%zu url=%s fetch=%s push=%zu", i, remotes[i].url,
			 remotes[i].fetch ? "yes" : "no", remotes[i].npush);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (ready_fd >= 0) {
		struct buf line = BUF_INIT;

		buf_addf(&line, "ready%s%s\n", addr.len ? " " : "", addr.buf);
		(void)write_all(ready_fd, line.buf, line.len);
		close(ready_fd);
		buf_release(&line);
	}

	if (conn_fd >= 0) {
		serve_conn(conn_fd, NULL, 0, -1);
		goto done;
	}
	while (!stop) {
		struct pollfd pfd = { listen_fd >= 0 ? listen_fd : handoff_fd, POLLIN, 0 };

		reap(0);
		r = poll(&pfd, 1, 1000);
		if (r <= 0)
			continue;
		if (listen_fd >= 0) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0)
				continue;
			spawn_server(fd, &listen_fd, NULL, 0, -1);
		} else if (handoff_one(handoff_fd) == 0) {
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
	log_line("stop");
done:
	/*
	 * Nothing is buffered (the log is written with write()); leave without
	 * atexit handlers, which under the sandbox can do nothing useful (a
	 * sanitizer build's leak check cannot read /proc and would fail).
	 */
	if (sandbox)
		_exit(0);
	return 0;
}
