/*
 * test-tls-load: a native TLS service and load client for bench/proxy
 * (docs/performance.md, "Interception against the tunnel"), so that
 * neither end, but the proxy, sets the figures.
 *
 *   test-tls-load serve CERT KEY PORT_FILE
 *	An HTTPS service on 127.0.0.1 (port chosen by the kernel, written to
 *	PORT_FILE once it listens), a thread for each connection,
 *	keep-alive: "GET /big?n=N" is answered with N
 *	bytes of 'x' (Content-Length), any other request with "ok\n".
 *	It resumes TLS sessions (tickets) as the real services do; the
 *	client below never offers one, the proxy's own TLS to it may.
 *	Runs until killed.
 *
 *   test-tls-load rate PROXY_PORT HOST PORT CA SECONDS PARALLEL [request]
 *	New connections through the proxy at 127.0.0.1:PROXY_PORT for
 *	SECONDS, PARALLEL at a time: CONNECT HOST:PORT, a full TLS
 *	handshake verified against CA for HOST, with "request" one GET
 *	answered, close_notify, close.  Prints "N connections in S s: R per
 *	second".
 *
 *   test-tls-load get PROXY_PORT HOST PORT CA BYTES
 *	One connection, "GET /big?n=BYTES" (the answer by Content-Length or
 *	chunked), three times; prints the best time, "BYTES bytes in S s".
 *
 * Exits 1 with a message on any failure (a refused CONNECT, a handshake,
 * an answer that is not 200 or not BYTES long).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "net/tls.h"
#include "base/banned.h"

#define IO_SIZE (64 * 1024)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die_tls(const char *what)
{
	struct buf e = BUF_INIT;

	tls_error(&e);
	die("%s: %s", what, e.buf);
}

/* ---- the service ---- */

static SSL_CTX *srv_ctx;
static int srv_fd;

/* Read a request head into b (cap HTTP_MAX_HEAD).  Its length, or 0 at the end. */
static size_t read_head(SSL *ssl, char *b, size_t *have)
{
	for (;;) {
		char *end = *have ? memmem(b, *have, "\r\n\r\n", 4) : NULL;
		int n;

		if (end)
			return (size_t)(end - b) + 4;
		if (*have == HTTP_MAX_HEAD)
			return 0;
		n = SSL_read(ssl, b + *have, (int)(HTTP_MAX_HEAD - *have));
		if (n <= 0)
			return 0;
		*have += (size_t)n;
	}
}

static int write_all_ssl(SSL *ssl, const char *p, size_t n)
{
	while (n) {
		int w = SSL_write(ssl, p, n > IO_SIZE ? IO_SIZE : (int)n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void serve_one(int fd, char *b, const char *xs)
{
	SSL *ssl = SSL_new(srv_ctx);
	size_t have = 0, hl;

	if (!ssl || !SSL_set_fd(ssl, fd) || SSL_accept(ssl) != 1)
		goto out;
	while ((hl = read_head(ssl, b, &have))) {
		char head[128];
		unsigned long long n = 3;
		int close_after = strcasestr(b, "\r\nconnection: close") &&
		                  (size_t)(strcasestr(b, "\r\nconnection: close") - b) < hl;

		if (!strncmp(b, "GET /big?n=", 11))
			n = strtoull(b + 11, NULL, 10);
		snprintf(head, sizeof(head),
		         "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: %s\r\n\r\n", n,
		         close_after ? "close" : "keep-alive");
		if (write_all_ssl(ssl, head, strlen(head)) < 0)
			goto out;
		if (!strncmp(b, "GET /big?n=", 11)) {
			while (n) {
				size_t k = n > IO_SIZE ? IO_SIZE : (size_t)n;

				if (write_all_ssl(ssl, xs, k) < 0)
					goto out;
				n -= k;
			}
		} else if (write_all_ssl(ssl, "ok\n", 3) < 0) {
			goto out;
		}
		memmove(b, b + hl, have - hl);
		have -= hl;
		if (close_after)
			break;
	}
	SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	close(fd);
	ERR_clear_error();
}

/* One connection, on a thread of its own. */
static void *serve_thread(void *arg)
{
	int fd = (int)(intptr_t)arg, one = 1;
	char *b = xcalloc(1, HTTP_MAX_HEAD + 1), *xs = xmalloc(IO_SIZE);

	memset(xs, 'x', IO_SIZE);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	serve_one(fd, b, xs);
	free(b);
	free(xs);
	return NULL;
}

static int cmd_serve(char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	pthread_attr_t attr;
	pthread_t t;
	FILE *f;

	srv_ctx = SSL_CTX_new(TLS_server_method());
	if (!srv_ctx || SSL_CTX_use_certificate_chain_file(srv_ctx, argv[0]) != 1 ||
	    SSL_CTX_use_PrivateKey_file(srv_ctx, argv[1], SSL_FILETYPE_PEM) != 1)
		die_tls("cannot load the certificate and key");
	srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(srv_fd, 4096) < 0 || getsockname(srv_fd, (struct sockaddr *)&sa, &len) < 0)
		die_errno("cannot listen");
	f = fopen(argv[2], "w");
	if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f))
		die_errno("cannot write '%s'", argv[2]);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		int fd = accept4(srv_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			continue;
		if (pthread_create(&t, &attr, serve_thread, (void *)(intptr_t)fd))
			close(fd);
	}
}

/* ---- the client ---- */

struct target {
	int pport, port;
	const char *host;
	SSL_CTX *ctx;
	double until;
	int request;
	long count;
};

/* CONNECT through the proxy and a verified TLS handshake: the SSL, its fd inside. */
static SSL *open_tls(const struct target *t)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)t->pport),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char req[600], got[512];
	size_t have = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	SSL *ssl;

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die_errno("cannot connect to the proxy");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(req, sizeof(req), "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", t->host,
	         t->port, t->host, t->port);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		die_errno("cannot write the CONNECT");
	/*
	 * The proxy sends its 200 and waits for our hello: nothing follows the
	 * head, so it is read in as few reads as it came in (not a byte a read,
	 * which cost this client more than the proxy's part).
	 */
	while (have < sizeof(got) - 1 && !memmem(got, have, "\r\n\r\n", 4)) {
		ssize_t n = read(fd, got + have, sizeof(got) - 1 - have);

		if (n <= 0)
			die("the proxy closed the CONNECT");
		have += (size_t)n;
	}
	got[have] = '\0';
	if (!memmem(got, have, "\r\n\r\n", 4) ||
	    (size_t)((char *)memmem(got, have, "\r\n\r\n", 4) - got) + 4 != have)
		die("bytes after the CONNECT's answer, before the TLS hello");
	if (strncmp(got, "HTTP/1.1 200", 12))
		die("the CONNECT was answered: %.*s", (int)strcspn(got, "\r"), got);
	ssl = tls_client_new(t->ctx, fd, t->host);
	if (!ssl)
		die_tls("cannot start TLS");
	if (SSL_connect(ssl) != 1) {
		long v = SSL_get_verify_result(ssl);

		if (v != X509_V_OK)
			die("TLS through the proxy: %s", X509_verify_cert_error_string(v));
		die_tls("TLS through the proxy");
	}
	return ssl;
}

static void close_tls(SSL *ssl)
{
	int fd = SSL_get_fd(ssl);

	SSL_shutdown(ssl);
	SSL_free(ssl);
	close(fd);
}

/* Send GET path, read the whole answer (200 required) through b (2 * IO_SIZE): its body's length.
 */
static uint64_t get(SSL *ssl, const char *host, const char *path, char *b)
{
	char req[600];
	struct http_head h;
	struct http_body body;
	struct buf err = BUF_INIT;
	size_t have = 0, off;
	uint64_t got = 0;
	char *o = b + IO_SIZE; /* the payload, decoded */
	int r;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host);
	if (write_all_ssl(ssl, req, strlen(req)) < 0)
		die_tls("cannot send the request");
	for (;;) {
		int n = SSL_read(ssl, b + have, IO_SIZE - (int)have);

		if (n <= 0)
			die_tls("the answer's head was cut");
		have += (size_t)n;
		r = http_parse_response(b, have, &h, &err);
		if (r < 0)
			die("a bad answer: %s", err.buf);
		if (r > 0)
			break;
	}
	if (h.status != 200)
		die("GET %s: %d", path, h.status);
	if (h.chunked)
		http_body_init(&body, BODY_CHUNKED, 0);
	else
		http_body_init(&body, BODY_LENGTH, (uint64_t)h.content_length);
	off = (size_t)r;
	for (;;) {
		size_t dl = 0;
		long k = http_body_decode(&body, b + off, have - off, o, &dl, &err);

		if (k < 0)
			die("a bad answer: %s", err.buf);
		got += dl;
		if (body.done)
			return got;
		have = 0;
		off = 0;
		r = SSL_read(ssl, b, IO_SIZE);
		if (r <= 0)
			die_tls("the answer was cut");
		have = (size_t)r;
	}
}

static void *rate_thread(void *arg)
{
	struct target *t = arg;
	char *b = xmalloc(2 * IO_SIZE);

	while (now_s() < t->until) {
		SSL *ssl = open_tls(t);

		if (t->request && get(ssl, t->host, "/ok", b) != 3)
			die("GET /ok: not the 3 bytes expected");
		close_tls(ssl);
		t->count++;
	}
	free(b);
	return NULL;
}

static SSL_CTX *client_ctx(const char *ca)
{
	struct buf err = BUF_INIT;
	SSL_CTX *ctx = tls_client_ctx(ca, &err);

	if (!ctx)
		die("%s", err.buf);
	/* Every connection a full handshake: no session is kept to resume. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	return ctx;
}

static int cmd_rate(int argc, char **argv)
{
	int par = atoi(argv[5]);
	double secs = atof(argv[4]), t0;
	struct target *t;
	pthread_t *th;
	long total = 0;

	if (par < 1 || par > 256 || secs <= 0)
		die("PARALLEL is 1 to 256, SECONDS above 0");
	t = xcalloc((size_t)par, sizeof(*t));
	th = xcalloc((size_t)par, sizeof(*th));
	t0 = now_s();
	for (int i = 0; i < par; i++) {
		t[i].pport = atoi(argv[0]);
		t[i].host = argv[1];
		t[i].port = atoi(argv[2]);
		t[i].ctx = client_ctx(argv[3]);
		t[i].until = t0 + secs;
		t[i].request = argc > 6 && !strcmp(argv[6], "request");
		if (pthread_create(&th[i], NULL, rate_thread, &t[i]))
			die("cannot start a thread");
	}
	for (int i = 0; i < par; i++) {
		pthread_join(th[i], NULL);
		total += t[i].count;
		SSL_CTX_free(t[i].ctx);
	}
	secs = now_s() - t0;
	printf("%ld connections in %.2f s: %.0f per second\n", total, secs, (double)total / secs);
	free(t);
	free(th);
	return 0;
}

static int cmd_get(char **argv)
{
	struct target t = {.pport = atoi(argv[0]), .host = argv[1], .port = atoi(argv[2])};
	uint64_t n = strtoull(argv[4], NULL, 10);
	char path[64], *b = xmalloc(2 * IO_SIZE);
	double best = 0;

	t.ctx = client_ctx(argv[3]);
	snprintf(path, sizeof(path), "/big?n=%llu", (unsigned long long)n);
	for (int i = 0; i < 3; i++) {
		SSL *ssl = open_tls(&t);
		double t0 = now_s(), dt;
		uint64_t got = get(ssl, t.host, path, b);

		dt = now_s() - t0;
		if (got != n)
			die("got %llu bytes of %llu", (unsigned long long)got,
			    (unsigned long long)n);
		close_tls(ssl);
		if (!i || dt < best)
			best = dt;
	}
	printf("%llu bytes in %.3f s\n", (unsigned long long)n, best);
	SSL_CTX_free(t.ctx);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc == 5 && !strcmp(argv[1], "serve"))
		return cmd_serve(argv + 2);
	if ((argc == 8 || argc == 9) && !strcmp(argv[1], "rate"))
		return cmd_rate(argc - 2, argv + 2);
	if (argc == 7 && !strcmp(argv[1], "get"))
		return cmd_get(argv + 2);
	die("usage: test-tls-load serve CERT KEY PORT_FILE | rate PROXY_PORT HOST PORT CA SECONDS "
	    "PARALLEL [request] | get PROXY_PORT HOST PORT CA BYTES");
}
