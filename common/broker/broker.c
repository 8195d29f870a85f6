/* aibox-broker's request handling: see broker.h. */
#include "broker/broker.h"
#include "base/scrub.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "net/broker_req.h"
#include "base/base64.h"
#include "base/clock.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "base/hex.h"
#include "base/log_cap.h"
#include "net/hconn.h"
#include "net/http.h"
#include "base/log_escape.h"
#include "net/tls.h"
#include "base/banned.h"

/*
 * An upload-pack request body, or a gzip request body once inflated, is
 * held whole: git-http-backend's own default cap (http.maxRequestBuffer).
 * docs/broker.md, "Memory", adds up what a broker may cost.
 */
#define BODY_MAX  (10u << 20)
#define DRAIN_MAX (4ull << 30) /* body read and dropped before a refusal */
/* The most of a receive-pack advertisement read before its first ref line. */
#define ADVERT_HEAD_MAX (1u << 20)
#define IO_TIMEOUT_S    300

/* ---- logging: one line per operation, never a token ---- */

/*
 * The most bytes of a client's field the log takes (the rest cut, "..."
 * appended): a method, a path or target, a ref, a reason.
 */
#define LOG_METHOD_MAX 16
#define LOG_FIELD_MAX  256
#define LOG_WHY_MAX    4096

/* The line "<UTC time> [<pid>] <text>\n" into b. */
static void log_format(struct buf *b, const char *fmt, va_list ap)
{
	char ts[32];
	struct tm tm;
	time_t now = time(NULL);

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_addf(b, "%s [%d] ", ts, (int)getpid());
	buf_vaddf(b, fmt, ap);
	buf_addch(b, '\n');
}

/* A line written whatever the cap (the notes about it, and "stop"). */
__attribute__((format(printf, 2, 3))) static void log_uncapped(const struct broker *br,
                                                               const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	log_format(&b, fmt, ap);
	va_end(ap);
	(void)write_all(br->log_fd, b.buf, b.len);
	buf_release(&b);
}

void broker_log(const struct broker *br, const char *fmt, ...)
{
	struct broker_log_count *lc = br->log_count;
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	log_format(&b, fmt, ap);
	va_end(ap);
	/* Once a line is left out, used is past the cap: every later line is too. */
	if (lc && __atomic_add_fetch(&lc->used, (int64_t)b.len, __ATOMIC_RELAXED) >
	              LOG_CAP_BYTES - LOG_CAP_RESERVE) {
		if (!__atomic_fetch_add(&lc->left_out, 1, __ATOMIC_RELAXED))
			log_uncapped(br,
			             "note why=\"the log reached its cap of %lld bytes: the lines "
			             "after this one are left out, and counted before the stop "
			             "line\"",
			             LOG_CAP_BYTES);
	} else {
		(void)write_all(br->log_fd, b.buf, b.len);
	}
	buf_release(&b);
}

void broker_log_stop(const struct broker *br)
{
	int64_t n = br->log_count ? __atomic_load_n(&br->log_count->left_out, __ATOMIC_RELAXED) : 0;

	if (n)
		log_uncapped(
		    br, "note why=\"%lld lines left out: the log reached its cap of %lld bytes\"",
		    (long long)n, LOG_CAP_BYTES);
	log_uncapped(br, "stop");
}

/* Time-outs on fd: reads recv_ms (0: IO_TIMEOUT_S), writes IO_TIMEOUT_S. */
static void set_timeouts(int fd, int64_t recv_ms)
{
	struct timeval tv = {IO_TIMEOUT_S, 0};
	struct timeval rtv = {(time_t)(recv_ms / 1000), (suseconds_t)(recv_ms % 1000 * 1000)};

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, recv_ms > 0 ? &rtv : &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* hconn's wait hook on the client: mark in the shared slot since when we wait on it. */
static void client_wait(void *ctx, int waiting)
{
	struct broker_slot *slot = ctx;

	__atomic_store_n(&slot->client_wait_ms, waiting ? clock_ms() : 0, __ATOMIC_RELAXED);
}

/* ---- answers of our own ---- */

/* The status of a refusal for a read that failed with r: past a cap, stalled, or malformed. */
static int refusal_status(int r)
{
	return r == -EFBIG ? 413 : r == -ETIMEDOUT ? 408 : 400;
}

static void send_answer(struct hconn *c, int status, const char *ctype, const struct buf *body)
{
	struct buf b = BUF_INIT;

	buf_addf(&b,
	         "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	         "Cache-Control: no-cache\r\nConnection: close\r\n\r\n",
	         status, http_reason(status), ctype, body->len);
	buf_add(&b, body->buf, body->len);
	(void)hconn_write(c, b.buf, b.len);
	buf_release(&b);
}

__attribute__((format(printf, 3, 4))) static void send_text(struct hconn *c, int status,
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
static void send_git_error(struct hconn *c, const char *service, int advertisement, const char *msg)
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

/* Request headers the client may send on to the remote; all others are dropped. */
static const char *const pass_request[] = {
    "Accept", "Accept-Language", "Content-Type", "Git-Protocol", "User-Agent", "Pragma",
};

/* Response headers the remote may send back; all others are dropped. */
static const char *const pass_response[] = {
    "Content-Type", "Content-Encoding", "Cache-Control", "Expires", "Pragma", "Last-Modified",
};

/* Is the header hd named in list? */
static int in_list(const struct http_header *hd, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(list[i]) == hd->name_len &&
		    !strncasecmp(hd->name, list[i], hd->name_len))
			return 1;
	return 0;
}

/* The request being served, and where its parts are. */
struct request {
	const struct broker *br;
	struct hconn_head m;
	char *method, *target; /* copies of the request line's, NUL-terminated */
	const struct broker_remote *rm;
	size_t idx;
	const char *rest;    /* after /<n>/: "info/refs?service=...", "git-upload-pack", ... */
	const char *service; /* git-upload-pack or git-receive-pack */
	int advert;          /* info/refs */
	int gzip;
	int http10;
	int want_continue;
};

struct fwd_result {
	int status;
	unsigned long long up_bytes, down_bytes;
	struct buf why;
	int reached;      /* the request went to the remote, which may have acted on it */
	int client_broke; /* the client's body broke off while it was being forwarded */
	struct buf check; /* a push's check of the remote's refs, escaped: check_push() */
};

static int send_chunk(struct hconn *c, const void *data, size_t n)
{
	char hdr[24];
	int r;

	if (!n)
		return 0;
	snprintf(hdr, sizeof(hdr), "%zx\r\n", n);
	r = hconn_write(c, hdr, strlen(hdr));
	if (!r)
		r = hconn_write(c, data, n);
	if (!r)
		r = hconn_write(c, "\r\n", 2);
	return r;
}

/*
 * An answer's body on its way to the client, through the token scrub
 * (common/base/scrub.h scrub_stream_feed(): held back only from where a
 * spelling of a form may go on; the matcher resumes, so each read costs its
 * own bytes, not what is held).
 */
struct scrub {
	const struct broker_remote *rm;
	struct scrub_stream st;
	struct buf out;
};

/* Pass n bytes on through sc (last: all of what is held).  0 or -errno. */
static int relay(struct hconn *client, int chunked, struct scrub *sc, const char *data, size_t n,
                 int last)
{
	buf_reset(&sc->out);
	scrub_stream_feed(&sc->st, sc->rm->secrets, sc->rm->nsecrets, data, n, last, &sc->out);
	if (!sc->out.len)
		return 0;
	return chunked ? send_chunk(client, sc->out.buf, sc->out.len)
	               : hconn_write(client, sc->out.buf, sc->out.len);
}

/*
 * The TLS connection to the remote, certificate and host name checked, each
 * read and write of its socket bounded by io_ms (0: IO_TIMEOUT_S).  0 or
 * -errno.
 */
static int upstream_connect(const struct request *rq, struct hconn *up, int64_t io_ms,
                            struct buf *err)
{
	const struct broker_remote *rm = rq->rm;
	int fd = -1, e = -ECONNREFUSED;

	for (int i = 0; i < rm->addrs.n; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&rm->addrs.addr[i];

		fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			e = -errno;
			continue;
		}
		set_timeouts(fd, io_ms);
		if (io_ms > 0) {
			struct timeval tv = {(time_t)(io_ms / 1000),
			                     (suseconds_t)(io_ms % 1000 * 1000)};

			(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		}
		if (!connect(fd, sa, rm->addrs.len[i]))
			break;
		e = -errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		buf_addf(err, "cannot connect to %s: %s", rm->hostport, strerror(-e));
		return e;
	}
	up->fd = fd;
	up->ssl = tls_client_new(rq->br->ssl_ctx, fd, rm->host);
	if (!up->ssl) {
		buf_addstr(err, "cannot start TLS: ");
		tls_error(err);
		return -ENOMEM;
	}
	if (SSL_connect(up->ssl) != 1) {
		long v = SSL_get_verify_result(up->ssl);

		if (v != X509_V_OK)
			buf_addf(err, "TLS with %s failed: %s", rm->hostport,
			         X509_verify_cert_error_string(v));
		else
			buf_addf(err, "TLS with %s failed", rm->hostport);
		ERR_clear_error();
		return -EPROTO;
	}
	return 0;
}

/*
 * Read the start of a receive-pack advertisement into `out`, up to its
 * first ref line, found where git's client finds it (advert_find_caps()),
 * and drop "push-options" in every spelling git reads (caps_drop()) from
 * that line's capabilities, so git does not offer to send any (they are
 * refused: check_commands()).  *removed is how many bytes shorter the body
 * got.  0, or -EBADMSG for what git would not read as an advertisement,
 * -EFBIG when no ref line comes within ADVERT_HEAD_MAX, or a read error.
 */
static int advert_drop_push_options(struct hconn_body *rb, struct buf *out, size_t *removed)
{
	size_t at = 0, n = 0;
	int r;

	while (!(r = advert_find_caps(out->buf, out->len, "git-receive-pack", &at, &n))) {
		ssize_t k;

		if (out->len >= ADVERT_HEAD_MAX)
			return -EFBIG;
		buf_grow(out, 65536);
		k = hconn_body_read(rb, out->buf + out->len, 65536);
		if (k < 0)
			return (int)k;
		if (k == 0)
			return -EBADMSG;
		buf_setlen(out, out->len + (size_t)k);
	}
	if (r < 0)
		return r;
	if (r == 1) {
		struct buf line = BUF_INIT;

		advert_caps_rewrite(out->buf + at + 4, n - 4, "push-options", &line);
		if (line.len > n)
			BUG("the advertisement's rewritten line grew");
		*removed = n - line.len;
		memcpy(out->buf + at, line.buf, line.len);
		memmove(out->buf + at + line.len, out->buf + at + n, out->len - at - n);
		buf_setlen(out, out->len - *removed);
		buf_release(&line);
	}
	return 0;
}

/* The request head for the remote: its path, our credentials, the client's headers that pass. */
static void upstream_head(const struct request *rq, long long length, struct buf *head)
{
	const struct broker_remote *rm = rq->rm;
	const struct http_head *h = &rq->m.h;

	buf_addf(head, "%s %s/%s HTTP/1.1\r\nHost: %s\r\n", rq->method, rm->path, rq->rest,
	         rm->hostport);
	buf_addstr(head, rm->auth_header);
	for (int i = 0; i < h->nhdr; i++)
		if (in_list(&h->hdr[i], pass_request, ARRAY_SIZE(pass_request)))
			buf_addf(head, "%.*s: %.*s\r\n", (int)h->hdr[i].name_len, h->hdr[i].name,
			         (int)h->hdr[i].value_len, h->hdr[i].value);
	if (!strcmp(rq->method, "POST")) {
		if (length >= 0)
			buf_addf(head, "Content-Length: %lld\r\n", length);
		else
			buf_addstr(head, "Transfer-Encoding: chunked\r\n");
	}
	buf_addstr(head, "Connection: close\r\n\r\n");
}

/*
 * Send the request to the remote: the head, then for a POST `pre` and the
 * rest of the client's body from `rest` (NULL: none), with Content-Length
 * `length`, or chunked when it is -1.  0, or -1 with res->why.
 */
static int send_upstream(struct hconn *up, const struct request *rq, const struct buf *pre,
                         struct hconn_body *rest, long long length, struct fwd_result *res)
{
	struct buf head = BUF_INIT;
	char *data = NULL;
	int r;

	upstream_head(rq, length, &head);
	r = hconn_write(up, head.buf, head.len);
	buf_release(&head);
	res->reached = 1;
	if (r < 0 || strcmp(rq->method, "POST"))
		goto out;
	r = length >= 0 ? hconn_write(up, pre->buf, pre->len) : send_chunk(up, pre->buf, pre->len);
	res->up_bytes += pre->len;
	data = xmalloc(65536);
	while (!r && rest) {
		ssize_t n = hconn_body_read(rest, data, 65536);

		if (n < 0) {
			buf_addf(&res->why, "reading the request: %s", strerror((int)-n));
			res->client_broke = 1;
			free(data);
			return -1;
		}
		if (n == 0)
			break;
		res->up_bytes += (unsigned long long)n;
		r = length >= 0 ? hconn_write(up, data, (size_t)n)
		                : send_chunk(up, data, (size_t)n);
	}
	if (!r && length < 0)
		r = hconn_write(up, "0\r\n\r\n", 5);
out:
	free(data);
	if (r < 0) {
		buf_addf(&res->why, "cannot send to %s: %s", rq->rm->hostport, strerror(-r));
		return -1;
	}
	return 0;
}

/* The remote's answer head, interim 1xx heads skipped.  0, or -1 with res->why. */
static int read_answer_head(struct hconn *up, const struct request *rq, struct hconn_head *resp,
                            struct fwd_result *res)
{
	for (;;) {
		int r = hconn_read_head(up, 0, resp);

		if (r < 0) {
			buf_addf(&res->why, "bad answer from %s: %s", rq->rm->hostport,
			         strerror(-r));
			return -1;
		}
		if (resp->h.status >= 200)
			return 0;
		if (resp->h.status == 101) {
			buf_addf(&res->why, "%s tried to switch protocols", rq->rm->hostport);
			return -1;
		}
	}
}

/*
 * Pass the remote's answer on: its status, the headers that pass, and the
 * body (ahead: what was already read of it, changed), scrubbed of the
 * token.  out_len is the body's length, or -1.  0, with res->why when the
 * answer broke off.
 */
static int relay_answer(struct hconn *client, const struct request *rq,
                        const struct http_head *resp, struct hconn_body *rb,
                        const struct buf *ahead, long long out_len, struct fwd_result *res)
{
	struct buf head = BUF_INIT;
	struct scrub sc = {rq->rm, SCRUB_STREAM_INIT, BUF_INIT};
	char *data = xmalloc(65536);
	int r, chunked_out = 0;

	buf_addf(&head, "HTTP/1.1 %d %s\r\n", resp->status, http_reason(resp->status));
	for (int i = 0; i < resp->nhdr; i++)
		if (in_list(&resp->hdr[i], pass_response, ARRAY_SIZE(pass_response)))
			buf_addf(&head, "%.*s: %.*s\r\n", (int)resp->hdr[i].name_len,
			         resp->hdr[i].name, (int)resp->hdr[i].value_len,
			         resp->hdr[i].value);
	scrub_span(rq->rm->secrets, rq->rm->nsecrets, head.buf, head.buf, head.len, head.len);
	if (out_len >= 0) {
		buf_addf(&head, "Content-Length: %lld\r\n", out_len);
	} else if (!rq->http10) {
		buf_addstr(&head, "Transfer-Encoding: chunked\r\n");
		chunked_out = 1;
	}
	buf_addstr(&head, "Connection: close\r\n\r\n");
	r = hconn_write(client, head.buf, head.len);
	if (!r)
		r = relay(client, chunked_out, &sc, ahead->buf, ahead->len, 0);
	while (!r) {
		ssize_t n = hconn_body_read(rb, data, 65536);

		if (n < 0) {
			buf_addf(&res->why, "reading the answer: %s", strerror((int)-n));
			goto out;
		}
		res->down_bytes += (unsigned long long)n;
		r = relay(client, chunked_out, &sc, data, (size_t)n, n == 0);
		if (n == 0)
			break;
	}
	if (r < 0)
		buf_addstr(&res->why, "the client went away");
	else if (chunked_out)
		(void)hconn_write(client, "0\r\n\r\n", 5);
out:
	free(data);
	buf_release(&head);
	scrub_stream_release(&sc.st);
	buf_release(&sc.out);
	return 0;
}

/*
 * Whether the answer may be compressed: a Content-Encoding header that is
 * not "identity", any of them (the client decodes every one it is given).
 */
static int answer_encoded(const struct http_head *resp)
{
	for (int i = 0; i < resp->nhdr; i++) {
		const struct http_header *hd = &resp->hdr[i];

		if (http_name_is(hd, "content-encoding") &&
		    !(hd->value_len == 8 && !strncasecmp(hd->value, "identity", 8)))
			return 1;
	}
	return 0;
}

/*
 * An answer the client may not have: credentials or redirects are ours to
 * handle, not the VM's, and a compressed answer cannot be checked (no
 * Accept-Encoding goes upstream).  1 when refused (the client told, res
 * filled), else 0.
 */
static int answer_refused(struct hconn *client, const struct request *rq,
                          const struct http_head *resp, struct fwd_result *res)
{
	int status = resp->status;

	if (status == 401 || status == 407 || (status >= 300 && status < 400)) {
		/* git-http-backend answers so before it reads the body: nothing was taken. */
		res->reached = 0;
		buf_addf(&res->why, "%s answered %d%s", rq->rm->hostport, status,
		         status == 401 ? " (the token was not accepted)" : "");
		res->status = 502;
		send_text(client, 502, "the remote answered %d", status);
		return 1;
	}
	if (answer_encoded(resp)) {
		buf_addf(&res->why, "%s sent a compressed answer", rq->rm->hostport);
		res->status = 502;
		send_text(client, 502, "the remote sent a compressed answer");
		return 1;
	}
	return 0;
}

/* ---- a push that did not finish (docs/broker.md, "Log") ---- */

/*
 * What the check may cost: its time from the start of the connection, the
 * bytes of the remote's answer, and the checks of one broker's life (counted
 * across its children in br->ref_checks).
 */
#define CHECK_MS   10000
#define CHECK_MAX  (16u << 20)
#define CHECKS_MAX 32

/* A connection to the remote for the check, and its deadline (clock_ms()). */
struct check_conn {
	struct hconn *up;
	int64_t deadline;
};

/* hconn's wait hook on the check's connection: no read or write waits past the deadline. */
static void check_wait(void *ctx, int waiting)
{
	const struct check_conn *ck = ctx;
	int64_t left = ck->deadline - clock_ms();
	struct timeval tv;

	if (!waiting || ck->up->fd < 0)
		return;
	if (left < 1)
		left = 1;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
	(void)setsockopt(ck->up->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(ck->up->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * After the client's body broke off: end what goes to the remote (TLS's
 * close_notify, then the socket's sending side) and wait until the remote is
 * done with the request: its answer read and dropped, up to its end,
 * CHECK_MAX bytes or CHECK_MS.  So the check of its refs (check_push())
 * comes after whatever the remote made of the body.
 */
static void upstream_finish(struct hconn *up)
{
	struct check_conn ck = {up, clock_ms() + CHECK_MS};
	struct hconn_head resp = HCONN_HEAD_INIT;
	struct hconn_body rb;
	unsigned long long total = 0;
	char *data;

	/* close_notify too waits at most until the deadline, on a remote that reads nothing. */
	check_wait(&ck, 1);
	if (up->ssl)
		(void)SSL_shutdown(up->ssl);
	(void)shutdown(up->fd, SHUT_WR);
	up->wait = check_wait;
	up->wait_ctx = &ck;
	while (!hconn_read_head(up, 0, &resp) && resp.h.status < 200) {
		hconn_head_release(&resp);
		resp = (struct hconn_head)HCONN_HEAD_INIT;
	}
	if (resp.h.status >= 200) {
		hconn_body_init(&rb, up, &resp.h, 0);
		data = xmalloc(65536);
		while (total < CHECK_MAX && clock_ms() < ck.deadline) {
			ssize_t n = hconn_body_read(&rb, data, 65536);

			if (n <= 0)
				break;
			total += (unsigned long long)n;
		}
		free(data);
	}
	up->wait = NULL;
	hconn_head_release(&resp);
}

/*
 * Send the request to the remote with our credentials: `pre` first, then
 * the rest of the client's body from `rest` (NULL: none).  `length` is the
 * whole body's length, or -1 to send it chunked.  Then relay the answer.
 * Returns 0 when an answer reached the client, or -1 with res->why set
 * (nothing sent to the client yet when res->status is 0).
 */
static int forward(struct hconn *client, const struct request *rq, const struct buf *pre,
                   struct hconn_body *rest, long long length, struct fwd_result *res)
{
	struct hconn up;
	struct hconn_head resp = HCONN_HEAD_INIT;
	struct buf ahead = BUF_INIT;
	struct hconn_body rb;
	int ret = -1;
	long long out_len;

	hconn_init(&up, -1);
	if (upstream_connect(rq, &up, 0, &res->why) < 0 ||
	    send_upstream(&up, rq, pre, rest, length, res) < 0 ||
	    read_answer_head(&up, rq, &resp, res) < 0)
		goto out;
	if (answer_refused(client, rq, &resp.h, res)) {
		ret = 0;
		goto out;
	}
	res->status = resp.h.status;
	hconn_body_init(&rb, &up, &resp.h, 0);
	out_len = !resp.h.chunked && resp.h.content_length >= 0 ? resp.h.content_length : -1;
	if (resp.h.status == 200 && rq->advert && !strcmp(rq->service, "git-receive-pack")) {
		size_t removed = 0;
		int r = advert_drop_push_options(&rb, &ahead, &removed);

		if (r < 0) {
			buf_addf(&res->why, "bad receive-pack advertisement from %s: %s",
			         rq->rm->hostport, strerror(-r));
			res->status = 502;
			send_text(client, 502, "the remote sent a bad receive-pack advertisement");
			goto out;
		}
		res->down_bytes += ahead.len + removed;
		if (out_len >= 0)
			out_len -= (long long)removed;
	}
	ret = relay_answer(client, rq, &resp.h, &rb, &ahead, out_len, res);
out:
	if (res->client_broke && up.fd >= 0)
		upstream_finish(&up);
	buf_release(&ahead);
	hconn_head_release(&resp);
	hconn_close(&up);
	return ret;
}

/* ---- push policy ---- */

static void allowed_list(const struct broker_remote *rm, struct buf *out)
{
	for (size_t i = 0; i < rm->npush; i++)
		buf_addf(out, "%s%s", i ? ", " : "", rm->push[i]);
}

/* Why the command may not go through, or NULL. */
static const char *push_refusal(const struct broker_remote *rm, const struct push_cmd *c)
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
static void send_push_refusal(struct hconn *client, const struct broker_remote *rm,
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
		const char *w =
		    why[i] ? why[i] : "not pushed: another ref of this push was refused";

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

/* Log one operation; `refs` may be NULL; res->check, when set, as check="...". */
static void log_op(const struct request *rq, const char *result, const char *refs,
                   const struct fwd_result *res)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "remote=%zu url=%s op=%s request=", rq->idx, rq->rm->url, op_name(rq));
	log_escape(&b, rq->method, strlen(rq->method), LOG_METHOD_MAX, 0);
	buf_addf(&b, " %s", rq->advert ? "info/refs" : rq->service);
	if (refs)
		buf_addf(&b, " refs=%s", refs);
	buf_addf(&b, " result=%s", result);
	if (res->status)
		buf_addf(&b, " status=%d", res->status);
	buf_addf(&b, " bytes_up=%llu bytes_down=%llu", res->up_bytes, res->down_bytes);
	if (res->why.len) {
		buf_addstr(&b, " why=\"");
		log_escape(&b, res->why.buf, res->why.len, LOG_WHY_MAX, LOG_ESCAPE_KEEP_SPACE);
		buf_addch(&b, '"');
	}
	if (res->check.len)
		buf_addf(&b, " check=\"%s\"", res->check.buf);
	broker_log(rq->br, "%s", b.buf);
	buf_release(&b);
}

/*
 * Read and drop the rest of a request body before refusing it, at most
 * DRAIN_MAX bytes, as a remote that refuses a push does: git's remote-curl
 * sends a pack the answer came too early for as a new request (which would
 * then be refused as malformed) instead of reading the refusal.
 */
static void drain_body(struct hconn_body *b)
{
	char *sink;
	unsigned long long total = 0;

	if (!b || b->b.done)
		return;
	sink = xmalloc(65536);
	while (total < DRAIN_MAX) {
		ssize_t n = hconn_body_read(b, sink, 65536);

		if (n <= 0)
			break;
		total += (unsigned long long)n;
	}
	free(sink);
}

/*
 * Whether pre, from *pos on, holds what push_commands_parse() can decide on:
 * the command list's flush, a frame it refuses, or PUSH_COMMANDS_MAX bytes.
 * *pos moves over the whole data pkt-lines before that, so each byte is
 * looked at once however the list comes in pieces.
 */
static int command_list_ready(const struct buf *pre, size_t *pos)
{
	for (;;) {
		enum pkt_kind kind;
		const char *p;
		size_t n;
		int r;

		if (*pos >= PUSH_COMMANDS_MAX)
			return 1;
		r = pkt_parse(pre->buf + *pos, pre->len - *pos, &kind, &p, &n);
		if (r == 0)
			return pre->len >= PUSH_COMMANDS_MAX;
		if (r < 0 || kind != PKT_DATA)
			return 1;
		*pos += (size_t)r;
	}
}

/*
 * Read a plain (not gzip) push body up to the end of its command list into
 * pre, parsed into pc.  Returns push_commands_parse()'s result (-EAGAIN: the
 * body ended before the flush), or a read error.  The list is parsed once it
 * is all there (command_list_ready()), not again for each read: a list that
 * comes in small pieces would take time quadratic in its size.
 */
static int read_command_list(struct hconn_body *body, struct push_commands *pc, struct buf *pre)
{
	char *data = xmalloc(65536);
	size_t pos = 0;
	int r;

	for (;;) {
		ssize_t n;

		if (command_list_ready(pre, &pos)) {
			r = push_commands_parse(pc, pre->buf, pre->len);
			if (r != -EAGAIN)
				break;
			push_commands_release(pc);
		}
		n = hconn_body_read(body, data, 65536);
		if (n <= 0) {
			/* What came may already be refused for itself (a malformed command). */
			r = push_commands_parse(pc, pre->buf, pre->len);
			if (r == -EAGAIN && n < 0)
				r = (int)n;
			break;
		}
		buf_add(pre, data, (size_t)n);
	}
	free(data);
	return r;
}

/* ---- the check of a push that did not finish (docs/broker.md, "Log") ---- */

/* qsort_r()'s order of command indexes, by ref, for the commands in ctx. */
static int cmd_cmp(const void *a, const void *b, void *ctx)
{
	const struct push_commands *pc = ctx;

	return strcmp(pc->cmds[*(const size_t *)a].ref, pc->cmds[*(const size_t *)b].ref);
}

/* Set got[i] to oid for every command of pc (order[]: their indexes sorted by ref) on ref name. */
static void check_note(const struct push_commands *pc, const size_t *order,
                       char (*got)[OID_HEX_MAX + 1], const char *name, const char *oid)
{
	size_t lo = 0, hi = pc->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(pc->cmds[order[mid]].ref, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < pc->nr && !strcmp(pc->cmds[order[lo]].ref, name); lo++)
		memcpy(got[order[lo]], oid, strlen(oid) + 1);
}

/*
 * Read the remote's receive-pack advertisement from rb, and for each command
 * of pc, the id the remote gives its ref into got[i] (left "" for a ref it
 * does not list).  At most CHECK_MAX bytes, until ck's deadline.  0 once the
 * ref list's flush came, or -1 with why.
 */
static int check_read_refs(struct check_conn *ck, struct hconn_body *rb,
                           const struct push_commands *pc, char (*got)[OID_HEX_MAX + 1],
                           struct buf *why)
{
	struct buf in = BUF_INIT, name = BUF_INIT;
	char *data = xmalloc(65536), oid[OID_HEX_MAX + 1];
	size_t off = 0, *order = xcalloc(pc->nr, sizeof(*order));
	unsigned long long total = 0;
	int flushes = 0, ret = -1;

	for (size_t i = 0; i < pc->nr; i++)
		order[i] = i;
	qsort_r(order, pc->nr, sizeof(*order), cmd_cmp, (void *)pc);
	for (;;) {
		enum pkt_kind kind;
		const char *p = NULL, *nm;
		size_t n = 0, nlen;
		int r = pkt_parse(in.buf + off, in.len - off, &kind, &p, &n);
		ssize_t k;

		if (r > 0) {
			off += (size_t)r;
			if (kind == PKT_FLUSH && ++flushes == 2) {
				ret = 0;
				break;
			}
			/* The "# service=" line before the first flush, and "version 1". */
			if (kind == PKT_FLUSH || !flushes || (n >= 8 && !memcmp(p, "version ", 8)))
				continue;
			if (kind != PKT_DATA || advert_ref_parse(p, n, oid, &nm, &nlen) < 0) {
				buf_addstr(why, "its answer is not a receive-pack advertisement");
				break;
			}
			buf_reset(&name);
			buf_add(&name, nm, nlen);
			check_note(pc, order, got, name.buf, oid);
			continue;
		}
		if (r < 0) {
			buf_addstr(why, "its answer is not a receive-pack advertisement");
			break;
		}
		if (total >= CHECK_MAX) {
			buf_addf(why, "its answer is longer than %u bytes", CHECK_MAX);
			break;
		}
		if (clock_ms() >= ck->deadline) {
			buf_addf(why, "it did not answer within %d s", CHECK_MS / 1000);
			break;
		}
		memmove(in.buf, in.buf + off, in.len - off);
		buf_setlen(&in, in.len - off);
		off = 0;
		k = hconn_body_read(rb, data, 65536);
		if (k <= 0) {
			buf_addf(why, "reading its answer: %s",
			         k == -ETIMEDOUT || k == -EAGAIN ? "timed out"
			                                         : strerror(k ? (int)-k : ENODATA));
			break;
		}
		total += (unsigned long long)k;
		buf_add(&in, data, (size_t)k);
	}
	free(order);
	free(data);
	buf_release(&in);
	buf_release(&name);
	return ret;
}

/*
 * Ask the remote for its refs (GET info/refs?service=git-receive-pack, with
 * the token, bounded by check_read_refs()), into got[] as there.  0, or -1
 * with why.
 */
static int check_fetch_refs(const struct request *rq, const struct push_commands *pc,
                            char (*got)[OID_HEX_MAX + 1], struct buf *why)
{
	const struct broker_remote *rm = rq->rm;
	struct hconn up;
	struct check_conn ck = {&up, clock_ms() + CHECK_MS};
	struct hconn_head resp = HCONN_HEAD_INIT;
	struct hconn_body rb;
	struct buf head = BUF_INIT;
	struct fwd_result res = {0};
	int ret = -1;

	hconn_init(&up, -1);
	up.wait = check_wait;
	up.wait_ctx = &ck;
	if (upstream_connect(rq, &up, CHECK_MS, why) < 0)
		goto out;
	buf_addf(&head,
	         "GET %s/info/refs?service=git-receive-pack HTTP/1.1\r\nHost: %s\r\n%s"
	         "User-Agent: git/aibox-broker\r\nConnection: close\r\n\r\n",
	         rm->path, rm->hostport, rm->auth_header);
	if (hconn_write(&up, head.buf, head.len) < 0) {
		buf_addf(why, "cannot send to %s", rm->hostport);
		goto out;
	}
	if (read_answer_head(&up, rq, &resp, &res) < 0) {
		buf_add(why, res.why.buf, res.why.len);
		goto out;
	}
	if (resp.h.status != 200 || answer_encoded(&resp.h)) {
		buf_addf(why, "%s answered %d%s", rm->hostport, resp.h.status,
		         resp.h.status == 200 ? " compressed" : "");
		goto out;
	}
	hconn_body_init(&rb, &up, &resp.h, 0);
	ret = check_read_refs(&ck, &rb, pc, got, why);
out:
	buf_release(&res.why);
	buf_release(&head);
	hconn_head_release(&resp);
	hconn_close(&up);
	return ret;
}

/*
 * After a push (pc) that went to the remote and did not finish: whether each
 * ref now holds its new id at the remote ("landed"), its old one ("not
 * landed"), or something else or nothing can be told ("unknown"), into
 * res->check (escaped for the log).  Returns the push's result for the log:
 * "landed" when every ref landed, "failed" when none did, else "unknown".
 */
static const char *check_push(const struct request *rq, const struct push_commands *pc,
                              struct fwd_result *res)
{
	char(*got)[OID_HEX_MAX + 1] = xcalloc(pc->nr, sizeof(*got));
	struct buf why = BUF_INIT;
	size_t landed = 0, not_landed = 0;
	int r = -1;

	if (rq->br->ref_checks &&
	    __atomic_add_fetch(rq->br->ref_checks, 1, __ATOMIC_RELAXED) > CHECKS_MAX)
		buf_addf(&why, "the broker made its %d checks", CHECKS_MAX);
	else
		r = check_fetch_refs(rq, pc, got, &why);
	for (size_t i = 0; i < pc->nr; i++) {
		const struct push_cmd *c = &pc->cmds[i];
		const char *have = got[i][0] ? got[i] : "";

		if (i)
			buf_addstr(&res->check, "; ");
		log_escape(&res->check, c->ref, strlen(c->ref), LOG_FIELD_MAX, 0);
		if (r < 0) {
			buf_addstr(&res->check, " unknown (cannot check: ");
			log_escape(&res->check, why.buf, why.len, LOG_FIELD_MAX,
			           LOG_ESCAPE_KEEP_SPACE);
			buf_addch(&res->check, ')');
		} else if (!strcmp(have, c->new_oid)) {
			buf_addstr(&res->check, " landed");
			landed++;
		} else if (!strcmp(have, c->old_oid) || (!*have && oid_is_null(c->old_oid))) {
			buf_addstr(&res->check, " not landed");
			not_landed++;
		} else {
			buf_addf(&res->check, " unknown (the remote has %s)",
			         *have ? have : "no such ref");
		}
	}
	free(got);
	buf_release(&why);
	return landed == pc->nr ? "landed" : not_landed == pc->nr ? "failed" : "unknown";
}

/*
 * Forward pre, and the rest of body when it is not NULL; log as allowed or
 * failed.  A push (pc, NULL for others) whose exchange did not finish after
 * it went to the remote is logged as its check of the remote's refs says
 * (check_push()).
 */
static void forward_logged(struct hconn *client, const struct request *rq, const struct buf *pre,
                           struct hconn_body *body, long long length, const char *refs,
                           const struct push_commands *pc, struct fwd_result *res)
{
	const char *result = "allowed";

	if (forward(client, rq, pre, body, length, res) < 0 && !res->status) {
		res->status = 502;
		send_text(client, 502, "%s", res->why.buf);
	}
	if (res->why.len)
		result = pc && pc->nr && res->reached ? check_push(rq, pc, res) : "failed";
	log_op(rq, result, refs, res);
}

/* Refuse a command list that push_commands_parse() (or reading it) refused with r. */
static void refuse_command_list(struct hconn *client, const struct request *rq, int r,
                                struct fwd_result *res)
{
	const char *what = r == -EAGAIN      ? "the command list ends without a flush"
	                   : r == -EFBIG     ? "the command list is too long"
	                   : r == -ENODATA   ? "the command list is empty"
	                   : r == -EBADMSG   ? "the command list is malformed"
	                   : r == -ETIMEDOUT ? "the request body stalled"
	                                     : strerror(-r);

	buf_addf(&res->why, "%s", what);
	res->status = refusal_status(r);
	send_text(client, res->status, "push refused: %s", what);
	log_op(rq, "refused", NULL, res);
}

/*
 * Check every command of pc against the remote's policy: why[i] the reason
 * ref i is refused (NULL: allowed), the refs listed into `refs` for the log,
 * the reasons into res->why.  Returns the reason the whole push is refused
 * (push options, a capability list git would not send), or NULL; *refused
 * is set when anything is.
 */
static const char *check_commands(const struct request *rq, const struct push_commands *pc,
                                  const char **why, struct buf *refs, int *refused,
                                  struct fwd_result *res)
{
	const char *all;

	*refused = 0;
	for (size_t i = 0; i < pc->nr; i++) {
		const struct push_cmd *c = &pc->cmds[i];

		why[i] = push_refusal(rq->rm, c);
		*refused |= why[i] != NULL;
		if (i)
			buf_addch(refs, ',');
		log_escape(refs, c->ref, strlen(c->ref), LOG_FIELD_MAX, 0);
		buf_addstr(refs, oid_is_null(c->new_oid)   ? "(delete)"
		                 : oid_is_null(c->old_oid) ? "(create)"
		                                           : "");
		if (why[i])
			buf_addf(&res->why, "%s%s: %s", res->why.len ? "; " : "", c->ref, why[i]);
	}
	/*
	 * Push options steer the remote beyond the ref updates (GitLab's
	 * merge_request.* and ci.variable=, for one): none pass, in any
	 * spelling receive-pack reads (caps_have()).  A capability list with a
	 * byte git never writes there (a TAB, a control byte, UTF-8) is refused
	 * too: another server may split it where git does not.
	 */
	if (caps_have(pc->caps, "push-options"))
		all = "push options (git push -o) are not allowed";
	else if (!caps_printable(pc->caps))
		all = "the capability list holds a byte git does not send there";
	else
		return NULL;
	*refused = 1;
	buf_reset(&res->why);
	buf_addstr(&res->why, all);
	return all;
}

/*
 * Only a flush: git's probe before a large chunked push (remote-curl's
 * probe_rpc), which updates nothing.  1 when nothing follows it in body.
 */
static int is_probe(struct hconn_body *body, const struct buf *pre)
{
	char extra;

	if (pre->len != 4)
		return 0;
	return !body || hconn_body_read(body, &extra, 1) == 0;
}

static void serve_push(struct hconn *client, const struct request *rq, struct hconn_body *body,
                       struct fwd_result *res)
{
	struct push_commands pc = PUSH_COMMANDS_INIT;
	struct buf pre = BUF_INIT, refs = BUF_INIT;
	const char **why = NULL, *all;
	long long length = -1;
	int r, refused;

	if (rq->gzip) {
		unsigned long long in = 0;

		r = hconn_body_inflate(body, &pre, BODY_MAX, &in);
		res->up_bytes = 0;
		if (r < 0) {
			buf_addf(&res->why, "gzip body: %s", strerror(-r));
			res->status = refusal_status(r);
			send_text(client, res->status, "cannot read the gzip request body: %s",
			          strerror(-r));
			log_op(rq, "refused", NULL, res);
			goto out;
		}
		r = push_commands_parse(&pc, pre.buf, pre.len);
		length = (long long)pre.len;
		body = NULL;
	} else {
		r = read_command_list(body, &pc, &pre);
		if (!rq->m.h.chunked)
			length = rq->m.h.content_length;
	}
	if (r == -ENODATA && is_probe(body, &pre)) {
		forward_logged(client, rq, &pre, NULL, 4, "(probe)", NULL, res);
		goto out;
	}
	if (r < 0) {
		refuse_command_list(client, rq, r, res);
		goto out;
	}
	why = xcalloc(pc.nr, sizeof(*why));
	all = check_commands(rq, &pc, why, &refs, &refused, res);
	if (refused) {
		drain_body(body);
		send_push_refusal(client, rq->rm, &pc, why, all);
		res->status = 200;
		log_op(rq, "refused", refs.buf, res);
		goto out;
	}
	forward_logged(client, rq, &pre, body, length, refs.buf, &pc, res);
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
static void serve_fetch_post(struct hconn *client, const struct request *rq,
                             struct hconn_body *body, struct fwd_result *res)
{
	struct buf pre = BUF_INIT;
	const char *what = NULL;
	int r = 0;

	if (rq->gzip) {
		unsigned long long in = 0;

		r = hconn_body_inflate(body, &pre, BODY_MAX, &in);
	} else {
		char *data = xmalloc(65536);

		for (;;) {
			ssize_t n = hconn_body_read(body, data, 65536);

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
		what =
		    rq->gzip ? "cannot read the gzip request body" : "cannot read the request body";
	else if (!pkt_stream_ok(pre.buf, pre.len))
		what = "the request is not well-formed pkt-lines";
	if (what) {
		if (r < 0)
			buf_addf(&res->why, "%s: %s", what, strerror(-r));
		else
			buf_addstr(&res->why, what);
		res->status = refusal_status(r);
		send_text(client, res->status, "%s", res->why.buf);
		log_op(rq, "refused", NULL, res);
		goto out;
	}
	forward_logged(client, rq, &pre, NULL, (long long)pre.len, NULL, NULL, res);
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
static void linger_close(struct hconn *c)
{
	struct timeval tv = {5, 0};
	char *sink;
	size_t total = 0;

	if (c->fd < 0 || shutdown(c->fd, SHUT_WR) < 0)
		return;
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sink = xmalloc(65536);
	if (c->wait)
		c->wait(c->wait_ctx, 1);
	while (total < (64u << 20)) {
		ssize_t n = read(c->fd, sink, 65536);

		if (n <= 0)
			break;
		total += (size_t)n;
	}
	if (c->wait)
		c->wait(c->wait_ctx, 0);
	free(sink);
}

/* Log a refusal of a request not yet tied to a remote's operation, with s escaped. */
static void log_refused(const struct request *rq, const char *why, const char *what, const char *s)
{
	struct buf t = BUF_INIT;

	log_escape(&t, s, strlen(s), LOG_FIELD_MAX, 0);
	if (rq->rm)
		broker_log(rq->br, "remote=%zu result=refused why=\"%s\" %s=\"%s\"", rq->idx, why,
		           what, t.buf);
	else
		broker_log(rq->br, "result=refused why=\"%s\" %s=\"%s\"", why, what, t.buf);
	buf_release(&t);
}

/*
 * Read the request head and find its remote and service.  0, or -1 when
 * the request was refused (answered and logged).
 */
static int read_request(struct hconn *client, struct request *rq, long want_idx)
{
	int r = hconn_read_head(client, 1, &rq->m);

	if (r < 0) {
		if (r != -ENODATA)
			send_text(client, refusal_status(r), "bad request");
		broker_log(rq->br, "result=refused why=\"bad request head: %s\"", strerror(-r));
		return -1;
	}
	rq->http10 = rq->m.h.minor == 0;
	rq->method = xstrndup(rq->m.h.method, rq->m.h.method_len);
	rq->target = xstrndup(rq->m.h.target, rq->m.h.target_len);
	if (breq_parse_target(rq->target, &rq->idx, &rq->rest) < 0 || rq->idx >= rq->br->nremotes ||
	    (want_idx >= 0 && (size_t)want_idx != rq->idx)) {
		send_text(client, 404, "no such remote");
		log_refused(rq, "no such remote", "target", rq->target);
		return -1;
	}
	rq->rm = &rq->br->remotes[rq->idx];
	if (!strcmp(rq->rest, "info/refs?service=git-upload-pack")) {
		rq->service = "git-upload-pack";
		rq->advert = 1;
	} else if (!strcmp(rq->rest, "info/refs?service=git-receive-pack")) {
		rq->service = "git-receive-pack";
		rq->advert = 1;
	} else if (!strcmp(rq->rest, "git-upload-pack") || !strcmp(rq->rest, "git-receive-pack")) {
		rq->service = rq->rest;
	} else {
		send_text(client, 404, "only git's smart HTTP requests are served");
		log_refused(rq, "not a smart HTTP request", "path", rq->rest);
		return -1;
	}
	return 0;
}

/* Refuse rq with status and why, answered as text.  Returns -1. */
static int refuse(struct hconn *client, const struct request *rq, int status, const char *why,
                  const char *answer, struct fwd_result *res)
{
	res->status = status;
	buf_addstr(&res->why, why);
	send_text(client, status, "%s", answer);
	log_op(rq, "refused", NULL, res);
	return -1;
}

/*
 * The method and the body's framing and encoding the service allows.  0, or
 * -1 when refused (answered and logged).
 */
static int check_request(struct hconn *client, struct request *rq, struct fwd_result *res)
{
	const struct http_head *h = &rq->m.h;
	const struct http_header *ce;
	int nce;

	if (strcmp(rq->method, rq->advert ? "GET" : "POST")) {
		struct buf answer = BUF_INIT;

		buf_addf(&answer, "%s needs %s", rq->rest, rq->advert ? "GET" : "POST");
		refuse(client, rq, 405, "wrong method", answer.buf, res);
		buf_release(&answer);
		return -1;
	}
	if (rq->advert && (h->chunked || h->content_length > 0))
		return refuse(client, rq, 400, "GET with a body", "GET with a body", res);
	if (!rq->advert && !h->chunked && h->content_length < 0)
		return refuse(client, rq, 400, "POST without Content-Length or chunked",
		              "POST needs Content-Length or chunked", res);
	ce = http_header(h, "content-encoding", &nce);
	if (ce) {
		if (nce > 1 || !((ce->value_len == 4 && !strncasecmp(ce->value, "gzip", 4)) ||
		                 (ce->value_len == 6 && !strncasecmp(ce->value, "x-gzip", 6))))
			return refuse(client, rq, 415, "unsupported Content-Encoding",
			              "only gzip request bodies are understood", res);
		rq->gzip = 1;
	}
	return 0;
}

/*
 * The remote's policy on the service.  A refused POST's body is read and
 * dropped first, unless the client waits for "100 Continue" and so has not
 * sent it.  0, or -1 when refused (answered and logged).
 */
static int check_policy(struct hconn *client, const struct request *rq, struct hconn_body *body,
                        struct fwd_result *res)
{
	int fetch = !strcmp(rq->service, "git-upload-pack");

	if (fetch ? rq->rm->fetch : rq->rm->npush > 0)
		return 0;
	if (!rq->want_continue)
		drain_body(body);
	buf_addstr(&res->why, fetch ? "fetch is not allowed" : "push is not allowed");
	res->status = 200;
	send_git_error(client, rq->service, rq->advert,
	               fetch ? "fetching from this remote is not allowed"
	                     : "pushing to this remote is not allowed");
	log_op(rq, "refused", NULL, res);
	return -1;
}

void broker_serve(const struct broker *br, int fd, const char *prefix, size_t prefix_len,
                  long want_idx)
{
	struct hconn client;
	struct request rq;
	struct fwd_result res;
	struct hconn_body body;
	int fl;

	memset(&rq, 0, sizeof(rq));
	rq.br = br;
	rq.m = (struct hconn_head)HCONN_HEAD_INIT;
	memset(&res, 0, sizeof(res));
	hconn_init(&client, fd);
	/*
	 * The proxy accepts with SOCK_NONBLOCK and hands its socket over as it
	 * is: every read and write here blocks, bounded by the timeouts.
	 */
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	set_timeouts(fd, br->client_timeout_ms);
	if (br->slot) {
		client.wait = client_wait;
		client.wait_ctx = br->slot;
	}
	buf_add(&client.in, prefix, prefix_len);

	if (read_request(&client, &rq, want_idx) < 0 || check_request(&client, &rq, &res) < 0)
		goto out;
	hconn_body_init(&body, &client, &rq.m.h, 1);
	rq.want_continue = rq.m.h.expect_continue && !rq.http10;
	if (check_policy(&client, &rq, &body, &res) < 0)
		goto out;
	if (rq.want_continue)
		(void)hconn_write(&client, HTTP_CONTINUE_HEAD, sizeof(HTTP_CONTINUE_HEAD) - 1);
	if (rq.advert) {
		struct buf none = BUF_INIT;

		forward_logged(&client, &rq, &none, NULL, 0, NULL, NULL, &res);
	} else if (!strcmp(rq.service, "git-receive-pack")) {
		serve_push(&client, &rq, &body, &res);
	} else {
		serve_fetch_post(&client, &rq, &body, &res);
	}
out:
	linger_close(&client);
	free(rq.method);
	free(rq.target);
	buf_release(&res.why);
	buf_release(&res.check);
	hconn_head_release(&rq.m);
	hconn_close(&client);
}

/* ---- credentials ---- */

/*
 * Remember s[0..n) as a secret for the token scrub (common/base/scrub.h),
 * which finds it in any spelling scrub_find() reads.
 */
static void add_secret(struct broker_remote *rm, const char *s, size_t n)
{
	struct buf b = BUF_INIT;

	if (!n)
		return;
	buf_add(&b, s, n);
	ALLOC_GROW(rm->secrets, rm->nsecrets + 1, rm->secrets_alloc);
	rm->secrets[rm->nsecrets++] = b;
}

void broker_remote_credentials(struct broker_remote *rm)
{
	struct buf cred = BUF_INIT, hdr = BUF_INIT;

	if (!rm->token) {
		/* A public remote: nothing to add. */
		rm->auth_header = xstrdup("");
		return;
	}
	if (rm->auth == BROKER_AUTH_BASIC) {
		struct buf plain = BUF_INIT;
		size_t n;

		buf_addf(&plain, "%s:%s", rm->auth_user ? rm->auth_user : "x-access-token",
		         rm->token);
		buf_grow(&cred, 4 * ((plain.len + 2) / 3) + 1);
		n = (size_t)EVP_EncodeBlock((unsigned char *)cred.buf,
		                            (const unsigned char *)plain.buf, (int)plain.len);
		buf_setlen(&cred, n);
		buf_wipe_release(&plain);
		buf_addf(&hdr, "Authorization: Basic %s\r\n", cred.buf);
	} else {
		buf_addf(&hdr, "Authorization: Bearer %s\r\n", rm->token);
	}
	rm->auth_header = buf_detach(&hdr, NULL);
	add_secret(rm, rm->token, strlen(rm->token));
	if (cred.len)
		add_secret(rm, cred.buf, cred.len);
	/* The token inside a longer base64 string, at each byte offset, in either alphabet. */
	for (int r = 0; r < 3; r++) {
		char *core = base64_core(rm->token, strlen(rm->token), r);

		if (!core)
			continue;
		add_secret(rm, core, strlen(core));
		if (base64_url(core))
			add_secret(rm, core, strlen(core));
		OPENSSL_cleanse(core, strlen(core));
		free(core);
	}
	buf_wipe_release(&cred);
}
