/*
 * libFuzzer target for what the proxy does to an intercepted request and its
 * answer (common/proxy/secret_swap.c), on every input:
 *   - as a request head: swap_request_head() toward the host the first
 *     secret names, and toward a host no secret names; swap_head_placeholder();
 *   - to its first NUL, as a target: swap_normalize_path() and
 *     swap_rule_allows() under a rule of methods and paths; swap_method_param()
 *     of it as a query;
 *   - as a request body, read as each kind of form: fed whole and fed in
 *     pieces cut where the first byte says;
 *   - as an answer: swap_echo_*() fed whole and fed in pieces.
 * Besides not crashing: toward a host no secret names nothing is swapped;
 * a value never enters a head toward a host its secret does not name, unless
 * it was there already; a path a rule reads is rooted, holds no "//", no "."
 * or ".." segment, no '?' or '#' and no control byte; a form's verdict and an
 * answer's bytes do not depend on where the stream was cut; and no value is
 * left in an answer as it is (nor a third, of bytes escapes change, in one
 * mix of spellings).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "config/config.h"
#include "proxy/secret_swap.h"
#include "base/strvec.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PH1 "aibox-secret-0123456789abcdef0123456789abcdef"
#define PH2 "aibox-secret-fedcba9876543210fedcba9876543210"
#define PH3 "aibox-secret-00112233445566778899aabbccddeeff"
#define V1  "V4lu3-0ne-s3cret"
#define V2  "tw0-S3cret/valu3"
/* Only in answers: every byte that an escape or form encoding changes. */
#define V3 "a&b+c d%e\\f\"g/h<i>j'k"

static struct swap_secret secrets[3];
static struct config_rule rule;

static void setup(void)
{
	struct buf why = BUF_INIT;

	if (secrets[0].name)
		return;
	secrets[0] = (struct swap_secret){"ONE", PH1, V1, ALLOW_LIST_INIT, 0};
	secrets[1] = (struct swap_secret){"TWO", PH2, V2, ALLOW_LIST_INIT, 0};
	secrets[2] = (struct swap_secret){"THREE", PH3, V3, ALLOW_LIST_INIT, 0};
	if (allow_add(&secrets[0].hosts, "api.example.com", NULL, &why) < 0 ||
	    allow_add(&secrets[1].hosts, "b.example.net", NULL, &why) < 0)
		__builtin_trap();
	buf_release(&why);
	strvec_init(&rule.methods);
	strvec_init(&rule.paths);
	strvec_pushl(&rule.methods, "GET", "POST", NULL);
	strvec_pushl(&rule.paths, "/repos/*/issues", "/v1/*", NULL);
}

static int has(const char *p, size_t n, const char *s)
{
	return memmem(p, n, s, strlen(s)) != NULL;
}

static void head(const char *p, size_t n, const char *host, int port)
{
	struct buf h = BUF_INIT, why = BUF_INIT;
	struct strvec used = STRVEC_INIT;
	int ret;

	buf_add(&h, p, n);
	ret = swap_request_head(secrets, 2, host, port, &h, &used, &why);
	if (ret < 0 && !why.len)
		__builtin_trap();
	if (ret >= 0) {
		/* a value goes only where its secret names the host */
		if (strcmp(host, "api.example.com") && has(h.buf, h.len, V1) && !has(p, n, V1))
			__builtin_trap();
		if (has(h.buf, h.len, V2) && !has(p, n, V2))
			__builtin_trap();
		if (!strcmp(host, "other.example.org") && ret != 0)
			__builtin_trap();
		if ((size_t)ret < used.nr)
			__builtin_trap();
	}
	strvec_clear(&used);
	buf_release(&h);
	buf_release(&why);
}

static void path(const char *target)
{
	struct buf out = BUF_INIT, why = BUF_INIT;

	if (swap_normalize_path(target, &out) == 0) {
		if (out.len == 0 || out.buf[0] != '/' || has(out.buf, out.len, "//") ||
		    memchr(out.buf, '?', out.len) || memchr(out.buf, '#', out.len))
			__builtin_trap();
		for (size_t i = 0; i < out.len; i++)
			if ((unsigned char)out.buf[i] < 0x20 || out.buf[i] == 0x7f)
				__builtin_trap();
		for (size_t i = 0; i < out.len;) {
			size_t j = i + 1, k = j;

			while (k < out.len && out.buf[k] != '/')
				k++;
			if ((k - j == 1 && out.buf[j] == '.') ||
			    (k - j == 2 && out.buf[j] == '.' && out.buf[j + 1] == '.'))
				__builtin_trap();
			i = k;
		}
	}
	if (!swap_rule_allows(&rule, "GET", target, &why) && !why.len)
		__builtin_trap();
	buf_reset(&why);
	(void)swap_rule_allows(&rule, target, "/v1/messages", &why);
	(void)swap_method_param(target, strlen(target));
	buf_release(&out);
	buf_release(&why);
}

/* The verdict on p[0..n) read as kinds, fed whole (cut 0) or in pieces. */
static int form(const char *p, size_t n, unsigned kinds, unsigned cut)
{
	struct swap_form_scan f;

	swap_form_scan_init(&f, kinds);
	for (size_t off = 0; off < n;) {
		size_t piece = cut ? (off * 31 + cut) % 13 + 1 : n;

		if (piece > n - off)
			piece = n - off;
		swap_form_scan_feed(&f, p + off, piece);
		off += piece;
	}
	return swap_form_scan_end(&f);
}

static void echo(const char *p, size_t n, size_t chunk, struct buf *out)
{
	struct swap_echo e;

	swap_echo_init(&e, secrets, 3);
	for (size_t off = 0; off < n; off += chunk)
		swap_echo_feed(&e, p + off, n - off < chunk ? n - off : chunk, out);
	swap_echo_end(&e, out);
	swap_echo_release(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct buf target = BUF_INIT, a = BUF_INIT, b = BUF_INIT;
	unsigned cut, all;

	setup();
	if (size < 1 || size > SWAP_MAX_HEAD + 16)
		return 0;
	cut = data[0];
	p++;
	size--;

	head(p, size, "api.example.com", 443);
	head(p, size, "other.example.org", 443);
	if (swap_head_placeholder(secrets, 2, p, size) < -1)
		__builtin_trap();

	buf_add(&target, p, strnlen(p, size));
	path(target.buf);

	for (unsigned k = SWAP_FORM_URLENCODED; k <= SWAP_FORM_JSON; k++) {
		unsigned kinds = 1u << k;

		if (form(p, size, kinds, 0) != form(p, size, kinds, cut + 1))
			__builtin_trap();
		if (swap_form_kind(p, size) > SWAP_FORM_JSON)
			__builtin_trap();
	}
	all = 1u << SWAP_FORM_URLENCODED | 1u << SWAP_FORM_MULTIPART | 1u << SWAP_FORM_JSON;
	if (form(p, size, all, 0) != form(p, size, all, cut + 1))
		__builtin_trap();

	echo(p, size, size ? size : 1, &a);
	echo(p, size, cut % 17 + 1, &b);
	if (a.len != b.len || memcmp(a.buf, b.buf, a.len) || has(a.buf, a.len, V1) ||
	    has(a.buf, a.len, V2) || has(a.buf, a.len, V3) ||
	    has(a.buf, a.len, "a&amp;b&#43;c+d%25e\\\\f\\u0022g\\/h&lt;i&gt;j&#39;k"))
		__builtin_trap();

	buf_release(&target);
	buf_release(&a);
	buf_release(&b);
	return 0;
}
