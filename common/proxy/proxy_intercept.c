/*
 * Interception (docs/proxy.md, "Secrets and interception"): a CONNECT to a
 * host that a secret or a rule names is answered here, its TLS ended with
 * a certificate of the task CA, and each request inside it goes through
 * the rules and the swap (common/proxy/secret_swap.h) and is then forwarded
 * like any other (common/proxy/proxy_forward.c) over TLS of our own to the host.
 * The answer comes back chunked, with each value echoed in it replaced by
 * its placeholder.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/allow.h"
#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_secrets.h"
#include "proxy/secret_swap.h"
#include "base/strvec.h"
#include "net/task_ca.h"
#include "net/tls.h"
#include "proxy/ws_scrub.h"
#include "base/banned.h"

int px_intercepts(const struct conn *c)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	return ps && allow_match(&ps->intercept, c->host, c->port) != NULL;
}

void px_intercept_start(struct conn *c)
{
	struct proxy *px = c->px;

	snprintf(c->ihost, sizeof(c->ihost), "%s", c->host);
	c->iport = c->port;
	px_spill_add(&c->to_client, HTTP_TUNNEL_HEAD, sizeof(HTTP_TUNNEL_HEAD) - 1);
	c->state = ST_CTLS;
	c->deadline_ms = px->now_ms + px->cfg->header_timeout_ms;
}

/* The certificate for host, issued once and kept among the last PX_LEAVES. */
static X509 *leaf_for(struct proxy *px, const char *host, struct buf *err)
{
	X509 *x;
	int i;

	for (i = 0; i < PX_LEAVES; i++)
		if (px->leaves[i].cert && !strcmp(px->leaves[i].host, host))
			return px->leaves[i].cert;
	x = task_ca_issue(px->cfg->ca, host, err);
	if (!x)
		return NULL;
	i = px->leaf_next;
	px->leaf_next = (i + 1) % PX_LEAVES;
	if (px->leaves[i].cert)
		X509_free(px->leaves[i].cert);
	snprintf(px->leaves[i].host, sizeof(px->leaves[i].host), "%s", host);
	px->leaves[i].cert = x;
	return x;
}

static void ctls_failed(struct conn *c, const char *why)
{
	px_log_line(c, "failed", why);
	px_conn_kill(c);
}

void px_ctls_step(struct conn *c)
{
	struct proxy *px = c->px;
	struct buf err = BUF_INIT;
	int r, f;

	if (!c->cssl) {
		f = px_flush_spill(c, &c->to_client, 1);
		if (f < 0) {
			ctls_failed(c, "client went away");
			return;
		}
		if (!f)
			return;
		if (c->in_len > c->in_off) {
			/* A client waits for the 200 before its TLS hello. */
			ctls_failed(c, "bytes sent before the tunnel was established");
			return;
		}
		c->cssl = SSL_new(px->cfg->isrv);
		if (!c->cssl || !SSL_set_fd(c->cssl, c->cfd) ||
		    !SSL_use_certificate(c->cssl, leaf_for(px, c->ihost, &err)) ||
		    !SSL_use_PrivateKey(c->cssl, px->cfg->ca->leaf_key)) {
			ctls_failed(c, "cannot start TLS with the client");
			buf_release(&err);
			return;
		}
		SSL_set_accept_state(c->cssl);
	}
	ERR_clear_error();
	r = SSL_do_handshake(c->cssl);
	c->cssl_rw = c->cssl_ww = 0;
	if (r == 1) {
		/* The tunnel's own line: its requests get one each. */
		px_log_line(c, "allowed", "intercepted");
		px_reset_request(c);
		c->intercept = 1;
		px_enter_head(c);
		return;
	}
	switch (SSL_get_error(c->cssl, r)) {
	case SSL_ERROR_WANT_READ:
		c->cssl_ww = 1;
		return;
	case SSL_ERROR_WANT_WRITE:
		c->cssl_rw = 1;
		return;
	default:
		buf_addstr(&err, "TLS with the client failed: ");
		tls_error(&err);
		ERR_clear_error();
		ctls_failed(c, err.buf);
		buf_release(&err);
	}
}

/*
 * Whether every rule on c's host lets the request through: 1; else 0 with
 * why.  Several rules may match one host (a wildcard's and a name's, a
 * preset's cache mark beside the config's own): each holds, so a rule that
 * lists no methods or paths never widens one that does (docs/config.md).
 */
static int rules_allow(struct conn *c, const char *method, const char *target, struct buf *why)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	for (size_t i = 0; i < ps->nr_rules; i++)
		if (allow_match(&ps->rule_hosts[i], c->host, c->port) &&
		    !swap_rule_allows(&ps->rules[i], method, target, why))
			return 0;
	return 1;
}

#define FORM_METHOD_WHY                                                                            \
	"a method override parameter (_method) on a host whose rule lists the methods"

/* Whether a rule on c's host and port lists methods (what 0) or paths (what 1). */
static int rule_lists(const struct conn *c, int what)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	for (size_t i = 0; i < ps->nr_rules; i++)
		if ((what ? ps->rules[i].paths.nr : ps->rules[i].methods.nr) &&
		    allow_match(&ps->rule_hosts[i], c->host, c->port))
			return 1;
	return 0;
}

/* Whether h has a header named one of names[0..n). */
static int has_header(const struct http_head *h, const char *const *names, size_t n)
{
	for (int i = 0; i < h->nhdr; i++)
		for (size_t k = 0; k < n; k++)
			if (http_name_is(&h->hdr[i], names[k]))
				return 1;
	return 0;
}

/*
 * Headers that ask for another method (Rails' Rack::MethodOverride, Google's
 * APIs and others take a POST with X-HTTP-Method-Override: DELETE as a
 * DELETE), and headers that stand for another path: IIS's URL Rewrite and
 * Symfony read X-Original-URL and X-Rewrite-URL as the path, Spring puts
 * X-Forwarded-Prefix before it, and the rest are what nginx, Envoy and
 * Traefik hand an app as the path a client asked for.
 */
static const char *const method_headers[] = {"x-http-method-override", "x-http-method",
                                             "x-method-override"};
static const char *const path_headers[] = {
    "x-original-url",   "x-rewrite-url",      "x-original-uri",       "x-forwarded-uri",
    "x-forwarded-path", "x-forwarded-prefix", "x-envoy-original-path"};

/* The kinds of form (1 << SWAP_FORM_...) h's body may be read as; 0 but for a POST. */
static unsigned form_kinds(const struct http_head *h)
{
	unsigned kinds = 0;

	if (h->method_len != 4 || memcmp(h->method, "POST", 4))
		return 0;
	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], "content-type"))
			kinds |= 1u << swap_form_kind(h->hdr[i].value, h->hdr[i].value_len);
	if (!http_header(h, "content-type", NULL))
		kinds |= 1u << swap_form_kind(NULL, 0);
	return kinds & ~(1u << SWAP_FORM_NONE);
}

/*
 * Express's body-parser inflates gzip, deflate and br before a form or JSON
 * parser reads it, so a _method in an encoded body is one the form scan
 * cannot see; and an answer's echo of a value is not seen in one either.
 */
int px_head_encoded(const struct http_head *h)
{
	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], "content-encoding") &&
		    !(h->hdr[i].value_len == 8 && !strncasecmp(h->hdr[i].value, "identity", 8)))
			return 1;
	return 0;
}

/*
 * Whether a Content-Type of h names a charset (a "charset=" anywhere in it,
 * its value quoted or not) in which "_method" may not be its ASCII bytes:
 * any but utf-8, us-ascii and iso-8859-1.  Express's body-parser decodes a
 * JSON body of any "utf-*" charset (UTF-16, UTF-32, UTF-7) before it reads it.
 */
static int body_charset_other(const struct http_head *h)
{
	static const char *const ascii[] = {"utf-8",      "utf8",   "us-ascii", "ascii",
	                                    "iso-8859-1", "latin1", NULL};

	for (int i = 0; i < h->nhdr; i++) {
		const char *v = h->hdr[i].value;
		size_t n = h->hdr[i].value_len;

		if (!http_name_is(&h->hdr[i], "content-type"))
			continue;
		for (size_t at = 0; at + 7 <= n; at++) {
			size_t j = at + 7, k;
			int ok = 0;

			if (strncasecmp(v + at, "charset", 7))
				continue;
			while (j < n && (v[j] == ' ' || v[j] == '\t'))
				j++;
			if (j == n || v[j] != '=')
				continue;
			for (j++; j < n && (v[j] == ' ' || v[j] == '\t' || v[j] == '"'); j++)
				;
			for (k = j; k < n && !strchr("\";, \t", v[k]); k++)
				;
			for (const char *const *a = ascii; *a && !ok; a++)
				ok = strlen(*a) == k - j && !strncasecmp(v + j, *a, k - j);
			if (!ok)
				return 1;
		}
	}
	return 0;
}

int px_form_wait(struct conn *c, const struct http_head *h)
{
	if (!c->px->cfg->secrets || h->chunked || h->content_length <= 0 ||
	    (uint64_t)h->content_length > HTTP_MAX_HEAD - h->head_len ||
	    c->in_len - c->in_off >= h->head_len + (uint64_t)h->content_length || !form_kinds(h))
		return 0;
	if (h->expect_continue && !c->continued) {
		px_spill_add(&c->to_client, HTTP_CONTINUE_HEAD, sizeof(HTTP_CONTINUE_HEAD) - 1);
		c->continued = 1;
	}
	return 1;
}

/*
 * Whether the POST form h's body (when it is all here: c->in + c->in_off)
 * names a method: 1 or 0.  One that is not all here (chunked, or larger
 * than px_form_wait() waits for) is read as it is forwarded: c->form_on.
 */
static int form_method(struct conn *c, const struct http_head *h)
{
	unsigned kinds = form_kinds(h);

	if (!kinds || (!h->chunked && h->content_length <= 0))
		return 0;
	swap_form_scan_init(&c->form, kinds);
	if (h->chunked || c->in_len - c->in_off < (uint64_t)h->content_length) {
		c->form_on = 1;
		return 0;
	}
	swap_form_scan_feed(&c->form, c->in + c->in_off, (size_t)h->content_length);
	return swap_form_scan_end(&c->form);
}

void px_form_content(void *ctx, const char *p, size_t n)
{
	struct conn *c = ctx;

	swap_form_scan_feed(&c->form, p, n);
}

int px_form_cut(struct conn *c)
{
	if (!c->form_on || !(c->form.found || (c->reqb.done && swap_form_scan_end(&c->form))))
		return 0;
	/* What the host got is a body cut short: a form parser reads none of it. */
	if (c->resp_head_done)
		px_abort_forward(c, FORM_METHOD_WHY);
	else
		px_respond(c, 403, "refused", FORM_METHOD_WHY);
	return 1;
}

int px_rules_check(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	struct buf why = BUF_INIT;
	char *method, *target;
	const char *q;
	int ok = 1, methods;

	if (!c->px->cfg->secrets)
		return 1;
	method = xmalloc(h->method_len + 1);
	memcpy(method, h->method, h->method_len);
	method[h->method_len] = '\0';
	target = xmalloc(tl + 1);
	memcpy(target, t, tl);
	target[tl] = '\0';
	q = memchr(t, '?', tl);
	methods = rule_lists(c, 0);
	if (methods && has_header(h, method_headers, ARRAY_SIZE(method_headers))) {
		px_refuse(c, "a method override header on a host whose rule lists the methods");
		ok = 0;
	} else if (methods && form_kinds(h) && px_head_encoded(h)) {
		px_refuse(c, "a compressed form body on a host whose rule lists the methods");
		ok = 0;
	} else if (methods && form_kinds(h) && body_charset_other(h)) {
		px_refuse(c, "a form body in a charset other than ASCII's on a host whose rule "
		             "lists the methods");
		ok = 0;
	} else if (methods && ((q && swap_method_param(q + 1, (size_t)(t + tl - (q + 1)))) ||
	                       form_method(c, h))) {
		px_refuse(c, FORM_METHOD_WHY);
		ok = 0;
	} else if (rule_lists(c, 1) && has_header(h, path_headers, ARRAY_SIZE(path_headers))) {
		px_refuse(c,
		          "a header that rewrites the path on a host whose rule lists the paths");
		ok = 0;
	} else if (!rules_allow(c, method, target, &why)) {
		px_refuse(c, why.buf);
		ok = 0;
	}
	buf_release(&why);
	free(method);
	free(target);
	return ok;
}

int px_plain_placeholder(struct conn *c, const struct http_head *h)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	struct buf why = BUF_INIT;
	int i;

	if (!ps || (i = swap_head_placeholder(ps->secrets, ps->nr, c->in + c->in_off - h->head_len,
	                                      h->head_len)) < 0)
		return 0;
	/* Never swapped in the clear; refused and named as toward any other host. */
	snprintf(c->used, sizeof(c->used), "%s", ps->secrets[i].name);
	c->used_refused = 1;
	buf_addf(&why, "%s to %s:%d over plain http://", ps->secrets[i].name, c->host, c->port);
	px_refuse(c, why.buf);
	buf_release(&why);
	return 1;
}

void px_intercept_request(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	struct buf head = BUF_INIT, why = BUF_INIT, path = BUF_INIT;
	struct strvec used = STRVEC_INIT;
	struct http_head h2;
	const char *q;
	int r;

	snprintf(c->host, sizeof(c->host), "%s", c->ihost);
	c->port = c->iport;
	/* The log has the path without its query: a query may hold a secret. */
	q = memchr(t, '?', tl);
	px_set_what(c, h->method, h->method_len, t, q ? (size_t)(q - t) : tl);
	c->entry = allow_match(c->px->cfg->allow, c->host, c->port);
	if (!c->entry) {
		px_refuse(c, "not on the allow list");
		goto out;
	}
	if (!tl || t[0] != '/') {
		px_refuse(c, "an intercepted request needs an origin-form target");
		goto out;
	}
	/* As over plain http://: Go's net/http reads a '#' as part of the path. */
	if (memchr(t, '#', tl)) {
		px_refuse(c, "fragment in the request target");
		goto out;
	}
	/*
	 * A host whose front end tunnels from the upgrade request on would take
	 * its body as raw bytes no rule read (docs/proxy.md, "WebSocket on an
	 * intercepted host").
	 */
	if (px_wants_websocket(c, h) && (h->chunked || h->content_length > 0)) {
		px_respond(c, 400, "refused", "a WebSocket upgrade request with a body");
		goto out;
	}
	if (!px_rules_check(c, h, t, tl))
		goto out;
	buf_add(&head, c->in + c->in_off - h->head_len, h->head_len);
	r = swap_request_head(ps->secrets, ps->nr, c->host, c->port, &head, &used, &why);
	if (r == -EPERM && strstr(why.buf, " to ")) {
		/* "NAME to HOST": the secret is named in the record and the log line. */
		snprintf(c->used, sizeof(c->used), "%.*s", (int)(strstr(why.buf, " to ") - why.buf),
		         why.buf);
		c->used_refused = 1;
	}
	if (r < 0) {
		px_refuse(c, why.len ? why.buf : "a request head the swap refuses");
		goto out;
	}
	for (size_t i = 0; i < used.nr; i++)
		snprintf(c->used + strlen(c->used), sizeof(c->used) - strlen(c->used), "%s%s",
		         i ? "," : "", used.v[i]);
	if (http_parse_request(head.buf, head.len, &h2, &why) <= 0) {
		px_refuse(c, "the request head is too large once swapped");
		goto out;
	}
	if (px_cache_request(c, h, t, tl))
		goto out;
	/* Our head to the host, with the values, is built here and wiped after. */
	px_start_forward(c, &h2, h2.target, h2.target_len);
	c->sent -= h2.head_len;
	c->sent += h->head_len;
out:
	OPENSSL_cleanse(head.buf, head.len);
	buf_release(&head);
	buf_release(&why);
	buf_release(&path);
	strvec_clear(&used);
}

int px_echo_unreadable(const struct conn *c, const struct http_head *h)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	return ps && ps->nr && px_head_encoded(h);
}

void px_intercept_head(struct conn *c, struct buf *b)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	struct swap_echo e;
	struct buf out = BUF_INIT;

	if (!ps->nr)
		return;
	swap_echo_init(&e, ps->secrets, ps->nr);
	swap_echo_feed(&e, b->buf, b->len, &out);
	swap_echo_end(&e, &out);
	swap_echo_release(&e);
	OPENSSL_cleanse(b->buf, b->len);
	buf_reset(b);
	buf_add(b, out.buf, out.len);
	OPENSSL_cleanse(out.buf, out.len);
	buf_release(&out);
}

static void add_chunk(struct conn *c, const char *p, size_t n)
{
	char size[24];

	if (!n)
		return;
	snprintf(size, sizeof(size), "%zx\r\n", n);
	px_spill_add(&c->to_client, size, strlen(size));
	px_spill_add(&c->to_client, p, n);
	px_spill_add(&c->to_client, "\r\n", 2);
}

void px_intercept_body(struct conn *c, const char *p, size_t n, int done)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	/* What goes to the client, every value already replaced: not wiped. */
	struct buf *out = &c->px->echo_out;

	if (!c->echo) {
		c->echo = xcalloc(1, sizeof(*c->echo));
		swap_echo_init(c->echo, ps->secrets, ps->nr);
	}
	buf_reset(out);
	swap_echo_feed(c->echo, p, n, out);
	if (done)
		swap_echo_end(c->echo, out);
	add_chunk(c, out->buf, out->len);
	if (done) {
		px_spill_add(&c->to_client, "0\r\n\r\n", 5);
		c->rechunk = 2;
		swap_echo_release(c->echo);
		free(c->echo);
		c->echo = NULL;
	}
}

void px_intercept_free(struct conn *c)
{
	px_drop_kept(c);
	if (c->ws) {
		ws_scrub_release(c->ws);
		free(c->ws);
		c->ws = NULL;
	}
	free(c->ws_vm);
	c->ws_vm = NULL;
	if (c->echo) {
		swap_echo_release(c->echo);
		free(c->echo);
		c->echo = NULL;
	}
	if (c->cssl) {
		SSL_free(c->cssl);
		c->cssl = NULL;
	}
}

/* ---- what is reused toward the intercepted hosts (docs/proxy.md, "What is reused") ---- */

static void sess_key(const struct conn *c, char *key, size_t n)
{
	snprintf(key, n, "%s:%d", c->host, c->port);
}

/* The entry for key, or NULL; with make, a free or the least recently used one, emptied. */
static int sess_find(struct proxy *px, const char *key, int make)
{
	int lru = -1;

	for (int i = 0; i < PX_SESS_HOSTS; i++) {
		if (px->sess[i].n && !strcmp(px->sess[i].key, key))
			return i;
		if (lru < 0 || (px->sess[lru].n &&
		                (!px->sess[i].n || px->sess[i].used_ms < px->sess[lru].used_ms)))
			lru = i;
	}
	if (!make)
		return -1;
	while (px->sess[lru].n)
		SSL_SESSION_free(px->sess[lru].s[--px->sess[lru].n]);
	snprintf(px->sess[lru].key, sizeof(px->sess[lru].key), "%s", key);
	return lru;
}

/*
 * OpenSSL's new-session callback on cfg->itls.  A copy is kept: OpenSSL
 * marks the connection's own session not resumable when it is freed
 * without close_notify, as every connection to a host here is.
 */
static int sess_new(SSL *ssl, SSL_SESSION *orig)
{
	struct conn *c = SSL_get_app_data(ssl);
	char key[sizeof(c->px->sess[0].key)];
	SSL_SESSION *s;
	int i;

	/* Only a connection whose chain and host passed (a failed one never gets here). */
	if (!c || !c->intercept || SSL_get_verify_result(ssl) != X509_V_OK ||
	    !SSL_SESSION_is_resumable(orig) || !(s = SSL_SESSION_dup(orig)))
		return 0;
	sess_key(c, key, sizeof(key));
	i = sess_find(c->px, key, 1);
	if (c->px->sess[i].n == PX_SESS_EACH) {
		SSL_SESSION_free(c->px->sess[i].s[0]);
		memmove(&c->px->sess[i].s[0], &c->px->sess[i].s[1],
		        (PX_SESS_EACH - 1) * sizeof(SSL_SESSION *));
		c->px->sess[i].n--;
	}
	c->px->sess[i].s[c->px->sess[i].n++] = s;
	c->px->sess[i].used_ms = c->px->now_ms;
	return 0;
}

void px_sess_setup(struct proxy *px)
{
	if (!px->cfg->itls)
		return;
	SSL_CTX_set_session_cache_mode(px->cfg->itls,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(px->cfg->itls, sess_new);
}

void px_sess_free(struct proxy *px)
{
	for (int i = 0; i < PX_SESS_HOSTS; i++)
		while (px->sess[i].n)
			SSL_SESSION_free(px->sess[i].s[--px->sess[i].n]);
}

void px_sess_offer(struct conn *c)
{
	struct proxy *px = c->px;
	char key[sizeof(px->sess[0].key)];
	time_t now = time(NULL);
	int i;

	SSL_set_app_data(c->ssl, c);
	sess_key(c, key, sizeof(key));
	i = sess_find(px, key, 0);
	while (i >= 0 && px->sess[i].n) {
		SSL_SESSION *s = px->sess[i].s[--px->sess[i].n];
		int ok = (time_t)(SSL_SESSION_get_time(s) + SSL_SESSION_get_timeout(s)) > now &&
		         SSL_SESSION_is_resumable(s) && SSL_set_session(c->ssl, s) == 1;

		SSL_SESSION_free(s);
		if (ok) {
			px->sess[i].used_ms = px->now_ms;
			return;
		}
	}
}

int px_sess_check(struct conn *c, struct buf *why)
{
	X509 *peer;
	unsigned char addr[16];
	int ok;

	if (!SSL_session_reused(c->ssl))
		return 0;
	peer = SSL_get0_peer_certificate(c->ssl);
	if (inet_pton(AF_INET, c->host, addr) == 1 || inet_pton(AF_INET6, c->host, addr) == 1)
		ok = peer && X509_check_ip_asc(peer, c->host, 0) == 1;
	else
		ok = peer && X509_check_host(peer, c->host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
		                             NULL) == 1;
	if (ok && SSL_get_verify_result(c->ssl) == X509_V_OK)
		return 0;
	buf_addstr(why, "TLS with the host failed: a resumed session not for this host");
	return -1;
}

void px_keep_upstream(struct conn *c)
{
	struct proxy *px = c->px;

	if (!c->intercept || c->websocket || c->status == 101 || c->hit || !px_upstream_reusable(c))
		return;
	px_drop_kept(c);
	if (epoll_ctl(px->epfd, EPOLL_CTL_DEL, c->ufd, NULL) < 0)
		return;
	c->kfd = c->ufd;
	c->kssl = c->ssl;
	c->ufd = -1;
	c->ssl = NULL;
	c->uev = 0;
}

int px_take_kept(struct conn *c)
{
	if (c->kfd < 0)
		return 0;
	if (!px_upstream_quiet(c->kfd, c->kssl) || px_add_fd(c->px, c->kfd, &c->hu, EPOLLOUT) < 0) {
		px_drop_kept(c);
		return 0;
	}
	c->ufd = c->kfd;
	c->ssl = c->kssl;
	c->uev = EPOLLOUT;
	c->kfd = -1;
	c->kssl = NULL;
	return 1;
}

void px_drop_kept(struct conn *c)
{
	if (c->kssl) {
		/* No close_notify: the host may be gone, and a write could block. */
		SSL_set_quiet_shutdown(c->kssl, 1);
		SSL_free(c->kssl);
		c->kssl = NULL;
	}
	if (c->kfd >= 0)
		close(c->kfd);
	c->kfd = -1;
}
