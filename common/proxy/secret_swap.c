/* The swap of secrets and the rules on an intercepted request (secret_swap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/base64.h"
#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "base/log_escape.h"
#include "base/scrub.h"
#include "proxy/secret_swap.h"
#include "base/strvec.h"
#include "base/banned.h"

/* Append s (len bytes) to out with every placeholder of the allowed secrets swapped. */
static int swap_in(const struct swap_secret *sec, size_t n, const char *s, size_t len, int query,
                   struct buf *out, unsigned *used)
{
	int swapped = 0;

	while (len) {
		size_t best = len, which = n;

		for (size_t i = 0; i < n; i++) {
			const char *p =
			    memmem(s, len, sec[i].placeholder, strlen(sec[i].placeholder));

			if (p && (size_t)(p - s) < best) {
				best = (size_t)(p - s);
				which = i;
			}
		}
		buf_add(out, s, best);
		if (which == n)
			break;
		if (query) {
			for (const char *v = sec[which].value; *v; v++)
				if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz012"
				           "3456789-._~",
				           *v))
					buf_add(out, v, 1);
				else
					buf_addf(out, "%%%02X", (unsigned char)*v);
		} else {
			buf_addstr(out, sec[which].value);
		}
		*used |= 1u << which;
		swapped++;
		s += best + strlen(sec[which].placeholder);
		len -= best + strlen(sec[which].placeholder);
	}
	return swapped;
}

/* The Basic credential of an Authorization value, decoded into out: 1, else 0. */
static int basic_decode(const char *v, size_t len, size_t *tok, struct buf *out)
{
	size_t skip = strspn(v, " \t");
	unsigned char dec[4096];
	int n;

	if (len < skip + 6 || strncasecmp(v + skip, "basic ", 6))
		return 0;
	skip += 6;
	skip += strspn(v + skip, " ");
	if (len - skip > (sizeof(dec) / 3) * 4 || (len - skip) % 4 || len == skip)
		return 0;
	n = EVP_DecodeBlock(dec, (const unsigned char *)v + skip, (int)(len - skip));
	if (n < 0)
		return 0;
	while (n > 0 && v[len - 1] == '=' && len-- && n--)
		;
	buf_add(out, dec, (size_t)n);
	*tok = skip;
	return 1;
}

static int has_placeholder(const struct swap_secret *s, const char *p, size_t len)
{
	return memmem(p, len, s->placeholder, strlen(s->placeholder)) != NULL;
}

/* Whether head (len bytes) holds s's placeholder: as it is, or in a header's Basic credential. */
static int head_holds(const struct swap_secret *s, const char *head, size_t len)
{
	struct buf dec = BUF_INIT;
	const char *end = head + len, *eol, *q;
	int found = has_placeholder(s, head, len);
	size_t tok;

	for (const char *l = head; !found && l < end; l = eol + 2) {
		if (!(eol = memmem(l, (size_t)(end - l), "\r\n", 2)))
			break;
		buf_reset(&dec);
		q = memchr(l, ':', (size_t)(eol - l));
		if (q && basic_decode(q + 1, (size_t)(eol - q - 1), &tok, &dec))
			found = has_placeholder(s, dec.buf, dec.len);
	}
	buf_wipe_release(&dec);
	return found;
}

int swap_head_placeholder(const struct swap_secret *secrets, size_t n, const char *head, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (head_holds(&secrets[i], head, len))
			return (int)i;
	return -1;
}

int swap_request_head(const struct swap_secret *secrets, size_t n, const char *host, int port,
                      struct buf *head, struct strvec *used, struct buf *err)
{
	struct buf out = BUF_INIT, dec = BUF_INIT, sw = BUF_INIT;
	const char *p = head->buf, *end = head->buf + head->len, *eol, *sp1, *q;
	unsigned mask = 0;
	int swapped = 0;
	size_t tok;

	if (n > 32)
		BUG("more than 32 secrets");
	if (head->len > SWAP_MAX_HEAD || !(eol = memmem(p, head->len, "\r\n", 2)) ||
	    !(sp1 = memchr(p, ' ', (size_t)(eol - p))))
		return buf_refuse(err, -EINVAL, "not a request head");
	/* A placeholder toward a host its secret does not name: refused whole. */
	for (size_t i = 0; i < n; i++)
		if (!allow_match(&secrets[i].hosts, host, port) &&
		    head_holds(&secrets[i], head->buf, head->len)) {
			buf_addf(err, "%s to %s:%d", secrets[i].name, host, port);
			return -EPERM;
		}
	/* The request line: the query only. */
	eol = memmem(p, head->len, "\r\n", 2);
	{
		const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
		const char *qm = sp2 ? memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1)) : NULL;

		if (!sp2)
			return buf_refuse(err, -EINVAL, "not a request head");
		if (qm) {
			buf_add(&out, p, (size_t)(qm - p));
			swapped += swap_in(secrets, n, qm, (size_t)(sp2 - qm), 1, &out, &mask);
			buf_add(&out, sp2, (size_t)(eol + 2 - sp2));
		} else {
			buf_add(&out, p, (size_t)(eol + 2 - p));
		}
	}
	for (p = eol + 2; p < end; p = eol + 2) {
		if (!(eol = memmem(p, (size_t)(end - p), "\r\n", 2))) {
			/* each may hold a value swapped in an earlier line */
			buf_wipe_release(&out);
			buf_wipe_release(&dec);
			buf_wipe_release(&sw);
			return buf_refuse(err, -EINVAL, "a header line without CRLF");
		}
		q = memchr(p, ':', (size_t)(eol - p));
		buf_reset(&dec);
		if (q && basic_decode(q + 1, (size_t)(eol - q - 1), &tok, &dec)) {
			int k;

			buf_reset(&sw);
			k = swap_in(secrets, n, dec.buf, dec.len, 0, &sw, &mask);
			if (k) {
				size_t at = out.len;

				swapped += k;
				buf_add(&out, p, (size_t)(q + 1 + tok - p));
				buf_grow(&out, sw.len * 2 + 8);
				at = out.len;
				out.len += (size_t)EVP_EncodeBlock((unsigned char *)out.buf + at,
				                                   (const unsigned char *)sw.buf,
				                                   (int)sw.len);
				out.buf[out.len] = '\0';
				buf_addstr(&out, "\r\n");
				continue;
			}
		}
		if (q) {
			buf_add(&out, p, (size_t)(q + 1 - p));
			swapped +=
			    swap_in(secrets, n, q + 1, (size_t)(eol - q - 1), 0, &out, &mask);
			buf_addstr(&out, "\r\n");
		} else {
			buf_add(&out, p, (size_t)(eol + 2 - p));
		}
	}
	for (size_t i = 0; i < n; i++)
		if (mask & (1u << i))
			strvec_push(used, secrets[i].name);
	if (swapped) {
		buf_wipe_release(head);
		*head = out;
	} else {
		buf_release(&out);
	}
	buf_wipe_release(&dec);
	buf_wipe_release(&sw);
	return swapped;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int swap_normalize_path(const char *target, struct buf *out)
{
	struct buf dec = BUF_INIT;
	size_t len = strcspn(target, "?");
	const char *s;

	/*
	 * Not "//" first: new URL("//ok/admin", base), as Node's documentation
	 * reads a request's url, is host "ok", path "/admin".
	 */
	if (target[0] != '/' || target[1] == '/')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)target[i];

		if (c == '%') {
			if (i + 2 >= len || hexval(target[i + 1]) < 0 || hexval(target[i + 2]) < 0)
				goto bad;
			c = (unsigned char)(hexval(target[i + 1]) * 16 + hexval(target[i + 2]));
			i += 2;
			/*
			 * An encoded '?' or '#': a server that decodes the path
			 * before it looks for the query or the fragment reads
			 * another path ("/admin%3F/x/../ok/x" is "/admin" there).
			 */
			if (c == '?' || c == '#')
				goto bad;
		} else if (c == '#') {
			goto bad; /* not origin form; Go's net/http reads it as part of the path */
		}
		if (c < 0x20 || c == 0x7f || c == '\\')
			goto bad;
		buf_add(&dec, &c, 1);
	}
	/* An escape once decoded: a server that decodes twice reads "%252e%252e" as "..". */
	for (size_t i = 0; i + 2 < dec.len; i++)
		if (dec.buf[i] == '%' && hexval(dec.buf[i + 1]) >= 0 && hexval(dec.buf[i + 2]) >= 0)
			goto bad;
	/*
	 * "//" folded; a dot segment, in any spelling, refused rather than
	 * resolved: servers do not agree on what it means.  One that routes on
	 * the raw path (Express's router) reads "/admin/../ok/x" under "/admin/"
	 * where a resolver reads "/ok/x"; RFC 3986 and the WHATWG parser pop an
	 * empty segment where a fold pops the one before it; "%2F" is no
	 * separator to some, one to others.  Clients resolve dots before they
	 * send a request: a path that still has one was made to be read two ways.
	 * So is a dot segment with a path parameter (".;x", "..;"), which Tomcat,
	 * Jetty and Spring drop before they resolve.
	 */
	for (s = dec.buf; *s;) {
		size_t seg;

		s += strspn(s, "/");
		seg = strcspn(s, "/");
		if ((seg == 1 && s[0] == '.') || (seg == 2 && s[0] == '.' && s[1] == '.'))
			goto bad;
		if (seg >= 2 && s[0] == '.' &&
		    (s[1] == ';' || (s[1] == '.' && seg > 2 && s[2] == ';')))
			goto bad;
		if (seg) {
			buf_addch(out, '/');
			buf_add(out, s, seg);
		}
		s += seg;
	}
	if (!out->len || (dec.len > 1 && dec.buf[dec.len - 1] == '/'))
		buf_addch(out, '/');
	out->buf[out->len] = '\0';
	buf_release(&dec);
	return 0;
bad:
	buf_release(&dec);
	return -EINVAL;
}

enum swap_form swap_form_kind(const char *ctype, size_t len)
{
	size_t n;

	if (!ctype)
		return SWAP_FORM_URLENCODED;
	while (len && (*ctype == ' ' || *ctype == '\t'))
		ctype++, len--;
	/* Rack splits the type off at ',' as at ';', and reads an empty one as none. */
	for (n = 0; n < len && !strchr(";, \t", ctype[n]); n++)
		;
	if (!n || (n == 33 && !strncasecmp(ctype, "application/x-www-form-urlencoded", 33)))
		return SWAP_FORM_URLENCODED;
	if (n > 10 && !strncasecmp(ctype, "multipart/", 10))
		return SWAP_FORM_MULTIPART;
	/* Laravel's isJson(): "/json" or "+json" anywhere in the header's value */
	for (size_t i = 0; i + 5 <= len; i++)
		if ((ctype[i] == '/' || ctype[i] == '+') && !strncasecmp(ctype + i + 1, "json", 4))
			return SWAP_FORM_JSON;
	return SWAP_FORM_NONE;
}

/* Where a urlencoded scan is: leading spaces, after _ . or [ ("method" k matched), ... */
enum { U_LEAD, U_PRE, U_DEAD, U_VALUE };
/* ... and a multipart one: line is 0-19 of CD matched in a line, or M_IN once it was. */
#define CD   "content-disposition:"
#define CID  "content-id:"
#define M_IN 20 /* in a line after "content-disposition:" or "content-id:" */

static const char method_word[] = "method";

void swap_form_scan_init(struct swap_form_scan *f, unsigned kinds)
{
	memset(f, 0, sizeof(*f));
	f->kinds = kinds;
	f->name = U_LEAD;
}

/* One byte of a urlencoded name, decoded. */
static void u_name_char(struct swap_form_scan *f, int d)
{
	if (f->name == U_LEAD && (d == ' ' || d == ']'))
		return;
	if (f->name == U_LEAD) {
		f->name = d == '_' || d == '.' || d == '[' ? U_PRE : U_DEAD;
		f->k = 0;
	} else if (f->name == U_PRE && !f->k && (d == '_' || d == '[' || d == ']')) {
		/* Rack 2 drops the brackets before and after a name: "[_method]" is "_method" */
	} else if (f->name == U_PRE && f->k < 6 && (d | 0x20) == method_word[f->k]) {
		f->k++;
	} else if (f->name == U_PRE && f->k == 6 && d == ']') {
		/* "_method]" too */
	} else if (f->name == U_PRE && f->k == 6 && d == '[') {
		/* qs (Express) reads "_method[]=x" as ["x"]; method-override takes its first */
		f->found = 1;
		f->name = U_DEAD;
	} else if (f->name == U_PRE && f->k == 6 && !d) {
		f->found = 1; /* PHP reads a name up to a NUL: "_method%00x" is "_method" */
		f->name = U_DEAD;
	} else if (f->name == U_PRE) {
		f->name = U_DEAD;
	}
}

static void u_name_end(struct swap_form_scan *f, int next)
{
	if (f->name == U_PRE && f->k == 6)
		f->found = 1;
	f->name = next;
}

/* One byte of a urlencoded body as it came. */
static void u_byte(struct swap_form_scan *f, int x)
{
	if (f->name == U_VALUE) {
		if (x == '&' || x == ';')
			f->name = U_LEAD;
		return;
	}
	if (f->pct == 1 && hexval((char)x) >= 0) {
		f->pct = 2;
		f->hexc = x;
		return;
	}
	if (f->pct == 2 && hexval((char)x) >= 0) {
		f->pct = 0;
		u_name_char(f, hexval((char)f->hexc) * 16 + hexval((char)x));
		return;
	}
	if (f->pct) { /* not an escape: its bytes as they are */
		u_name_char(f, '%');
		if (f->pct == 2)
			u_name_char(f, f->hexc);
		f->pct = 0;
	}
	if (x == '&' || x == ';')
		u_name_end(f, U_LEAD);
	else if (x == '=')
		u_name_end(f, U_VALUE);
	else if (x == '%')
		f->pct = 1;
	else
		u_name_char(f, x == '+' ? ' ' : x);
}

/*
 * Whether the bytes before a "method" in a Content-Disposition or
 * Content-ID line (pre: the last four, the nearest lowest, lowercase) make
 * it a name of its own that reads as "_method": '_', '.' or '[', or "%5f",
 * right after a quote, '=', a space or ':' (name="_method", name=_method,
 * name*=utf-8''%5Fmethod, Content-ID:_method), not "payment_method".
 */
static int m_named(unsigned pre)
{
	unsigned b1 = pre & 0xff, b2 = pre >> 8 & 0xff;

	if ((pre & 0xffffff) == ('%' << 16 | '5' << 8 | 'f'))
		return strchr("\"'= :", (int)(pre >> 24 & 0xff)) && pre >> 24;
	return b1 && strchr("_.[", (int)b1) && b2 && strchr("\"'= :", (int)b2);
}

/* One byte of a multipart body. */
static void m_byte(struct swap_form_scan *f, int x)
{
	int lx = x >= 'A' && x <= 'Z' ? x | 0x20 : x;

	/* Rack 2 unescapes a quoted name ("\_m\ethod" is "_method"): no backslash is read */
	if (f->line == M_IN && x == '\\')
		return;
	if (x == '\n') {
		f->line = f->mk = f->cid = 0;
	} else if (f->line != M_IN) {
		/*
		 * Anywhere in a line: Rack's regex is not anchored, so a header
		 * "X-A: Content-Disposition: ...; name=_method" names the part.
		 * Rack also takes a Content-ID's value for the name of a part
		 * without one.  Neither word repeats its 'c', so a mismatch
		 * starts again at the byte.
		 */
		f->line = lx == CD[f->line] ? f->line + 1 : lx == 'c';
		f->cid = lx == CID[f->cid] ? f->cid + 1 : lx == 'c';
		if (f->cid == (int)sizeof(CID) - 1)
			f->line = M_IN;
		f->mk = 0;
	} else if (f->line == M_IN) {
		f->mk = lx == method_word[f->mk] ? f->mk + 1 : lx == 'm';
		if (f->mk == 1)
			f->pre = f->hist;
		if (f->mk == 6 && m_named(f->pre))
			f->found = 1;
		if (f->mk == 6)
			f->mk = 0;
	}
	f->hist = x == '\n' ? 0 : f->hist << 8 | (unsigned)lx;
}

/* Where a JSON scan is (js): outside a string, in one, after its '\\', or in a \\u's digits. */
enum { J_OUT, J_IN, J_ESC, J_U /* J_U + digits read */ };

/* One character of a JSON string, decoded: "_method" matched so far (jk), or -1. */
static void j_char(struct swap_form_scan *f, int d)
{
	static const char want[] = "_method";

	if (f->jk >= 0 && f->jk < 7 && (d >= 'A' && d <= 'Z' ? d | 0x20 : d) == want[f->jk])
		f->jk++;
	else
		f->jk = -1;
}

/* One byte of a JSON body. */
static void j_byte(struct swap_form_scan *f, int x)
{
	static const char escapes[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";

	switch (f->js) {
	case J_OUT:
		if (f->jkey && (x == ' ' || x == '\t' || x == '\r' || x == '\n'))
			return;
		if (f->jkey && x == ':')
			f->found = 1;
		f->jkey = 0;
		if (x == '"') {
			f->js = J_IN;
			f->jk = 0;
		}
		return;
	case J_IN:
		if (x == '"') {
			f->js = J_OUT;
			f->jkey = f->jk == 7;
		} else if (x == '\\') {
			f->js = J_ESC;
		} else {
			j_char(f, x);
		}
		return;
	case J_ESC:
		if (x == 'u') {
			f->js = J_U;
			f->ju = 0;
			return;
		}
		/* an escape JSON has not: a parser refuses the body; read it as the byte */
		j_char(f, x && strchr(escapes, x) ? decoded[strchr(escapes, x) - escapes] : x);
		f->js = J_IN;
		return;
	default: /* J_U + 0..3 digits read */
		if (hexval((char)x) < 0) {
			f->js = J_IN;
			j_char(f, -1);
			return;
		}
		f->ju = f->ju * 16 + hexval((char)x);
		if (++f->js == J_U + 4) {
			j_char(f, f->ju < 0x80 ? f->ju : -1);
			f->js = J_IN;
		}
	}
}

void swap_form_scan_feed(struct swap_form_scan *f, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (f->kinds & (1u << SWAP_FORM_URLENCODED))
			u_byte(f, (unsigned char)p[i]);
		if (f->kinds & (1u << SWAP_FORM_MULTIPART))
			m_byte(f, (unsigned char)p[i]);
		if (f->kinds & (1u << SWAP_FORM_JSON))
			j_byte(f, (unsigned char)p[i]);
	}
}

int swap_form_scan_end(struct swap_form_scan *f)
{
	if (f->kinds & (1u << SWAP_FORM_URLENCODED)) {
		if (f->pct) {
			u_name_char(f, '%');
			if (f->pct == 2)
				u_name_char(f, f->hexc);
			f->pct = 0;
		}
		u_name_end(f, U_LEAD);
	}
	return f->found;
}

int swap_method_param(const char *s, size_t len)
{
	struct swap_form_scan f;

	swap_form_scan_init(&f, 1u << SWAP_FORM_URLENCODED);
	swap_form_scan_feed(&f, s, len);
	return swap_form_scan_end(&f);
}

/* '*' matches any run of bytes, '/' included. */
static int glob(const char *pat, const char *s)
{
	const char *star = NULL, *back = NULL;

	while (*s) {
		if (*pat == '*') {
			star = pat++;
			back = s;
		} else if (*pat == *s) {
			pat++;
			s++;
		} else if (star) {
			pat = star + 1;
			s = ++back;
		} else {
			return 0;
		}
	}
	while (*pat == '*')
		pat++;
	return !*pat;
}

int swap_rule_allows(const struct config_rule *r, const char *method, const char *target,
                     struct buf *err)
{
	struct buf path = BUF_INIT;
	int ok = !r->methods.nr;

	for (size_t i = 0; !ok && i < r->methods.nr; i++)
		ok = !strcmp(r->methods.v[i], method);
	if (!ok) {
		buf_addf(err, "method %.32s is not allowed", method);
		return 0;
	}
	/* A rule without paths takes any: how a server would read it does not matter. */
	if (!r->paths.nr)
		return 1;
	if (swap_normalize_path(target, &path) < 0) {
		buf_addstr(err, "the path is not one the rules can read");
		buf_release(&path);
		return 0;
	}
	ok = 0;
	for (size_t i = 0; !ok && i < r->paths.nr; i++)
		ok = glob(r->paths.v[i], path.buf);
	if (!ok) {
		/* decoded, the VM's bytes: escaped as proxy.log escapes them */
		buf_addstr(err, "path ");
		log_escape(err, path.buf, path.len, 200, 0);
		buf_addstr(err, " is not allowed");
	}
	buf_release(&path);
	return ok;
}

/* A form to look for (wiped and freed with e), and the placeholder that replaces it or NULL. */
static void echo_add(struct swap_echo *e, char *form, const char *to)
{
	size_t n = strlen(form);

	e->forms = xrealloc(e->forms, (e->nforms + 1) * sizeof(*e->forms));
	e->to = xrealloc(e->to, (e->nforms + 1) * sizeof(*e->to));
	e->forms[e->nforms] = (struct buf)BUF_INIT;
	buf_add(&e->forms[e->nforms], form, n);
	e->to[e->nforms] = to;
	e->nforms++;
	if (SCRUB_SPELLING_MAX * n > e->span)
		e->span = SCRUB_SPELLING_MAX * n;
	OPENSSL_cleanse(form, n);
	free(form);
}

void swap_echo_init(struct swap_echo *e, const struct swap_secret *secrets, size_t n)
{
	memset(e, 0, sizeof(*e));
	e->held = (struct buf)BUF_INIT;
	e->m = (struct scrub_match)SCRUB_MATCH_INIT;
	e->found = (struct scrub_runs)SCRUB_RUNS_INIT;
	for (size_t i = 0; i < n; i++) {
		const char *v = secrets[i].value;

		echo_add(e, xstrdup(v), secrets[i].placeholder);
		for (int r = 0; r < 3; r++) {
			char *core = base64_core(v, strlen(v), r), *url;

			if (!core)
				continue;
			url = xstrdup(core);
			echo_add(e, core, NULL);
			if (base64_url(url)) {
				echo_add(e, url, NULL);
			} else {
				OPENSSL_cleanse(url,
				                strlen(url)); /* the core: derived from the value */
				free(url);
			}
		}
	}
}

static int run_order(const void *a, const void *b)
{
	const struct scrub_run *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * Pass held on to out (all of it at the end, else as far as may be), each
 * run of overlapping spellings replaced: by its secret's placeholder where
 * the run is one spelling of a value, whole; else by as many '*'.  The
 * bytes from where scrub_find() cuts are kept as they came (a run that
 * starts there is found once it came whole), and so is a run that crosses
 * the cut but may still be one value's: the output does not depend on how
 * the answer was cut into reads.  A run of overlapping ones longer than a
 * value's spelling can be is passed as '*' as far as it came, the rest of
 * it ('done' bytes of what is kept) as '*' when it comes.
 */
static void echo_pass(struct swap_echo *e, const char *in, size_t len, int more, struct buf *out)
{
	struct scrub_runs *runs = &e->found;
	const char *h = e->held.buf;
	size_t cut, upto, pos = e->done, keep_from;

	runs->nr = 0;
	cut = scrub_match_feed(&e->m, e->forms, e->nforms, in, len, !more, e->base, runs) - e->base;
	for (size_t i = 0; i < runs->nr; i++) {
		runs->v[i].start -= e->base;
		runs->v[i].end -= e->base;
	}
	upto = cut;
	if (runs->nr > 1)
		qsort(runs->v, runs->nr, sizeof(*runs->v), run_order);
	for (size_t i = 0, j; i < runs->nr; i = j) {
		size_t cs = runs->v[i].start, ce = runs->v[i].end;
		const char *to = NULL;

		for (j = i + 1; j < runs->nr && runs->v[j].start < ce; j++)
			if (runs->v[j].end > ce)
				ce = runs->v[j].end;
		if (cs >= upto)
			break;
		if (ce > upto && cs >= pos && ce - cs <= e->span) {
			upto = cs; /* may yet grow: waits whole */
			break;
		}
		if (ce > upto)
			upto = ce;
		if (ce <= pos)
			continue;
		if (cs >= pos) {
			buf_add(out, h + pos, cs - pos);
			pos = cs;
			for (size_t k = i; k < j && !to; k++)
				if (runs->v[k].start == cs && runs->v[k].end == ce)
					to = e->to[runs->v[k].form];
		}
		if (to) {
			buf_addstr(out, to);
		} else {
			buf_grow(out, ce - pos);
			memset(out->buf + out->len, '*', ce - pos);
			buf_setlen(out, out->len + ce - pos);
		}
		pos = ce;
	}
	if (upto > pos) {
		buf_add(out, h + pos, upto - pos);
		pos = upto;
	}
	keep_from = upto < cut ? upto : cut;
	e->done = pos - keep_from;
	memmove(e->held.buf, h + keep_from, e->held.len - keep_from);
	buf_wipe_setlen(&e->held, e->held.len - keep_from);
	e->base += keep_from;
}

void swap_echo_feed(struct swap_echo *e, const char *in, size_t len, struct buf *out)
{
	if (!e->nforms) {
		buf_add(out, in, len);
		return;
	}
	buf_add(&e->held, in, len);
	echo_pass(e, in, len, 1, out);
}

void swap_echo_end(struct swap_echo *e, struct buf *out)
{
	echo_pass(e, NULL, 0, 0, out);
	e->done = 0;
}

size_t swap_echo_mask(struct swap_echo *e, const char *orig, char *out, size_t len, int more)
{
	size_t cut;

	e->found.nr = 0;
	cut = scrub_find(e->forms, e->nforms, orig, len, &e->found);
	for (size_t i = 0; i < e->found.nr; i++)
		memset(out + e->found.v[i].start, '*', e->found.v[i].end - e->found.v[i].start);
	return more ? cut : len;
}

void swap_echo_release(struct swap_echo *e)
{
	buf_wipe_release(&e->held);
	for (size_t i = 0; i < e->nforms; i++)
		buf_wipe_release(&e->forms[i]);
	free(e->forms);
	free(e->to);
	scrub_match_release(&e->m);
	scrub_runs_release(&e->found);
	e->forms = NULL;
	e->to = NULL;
	e->nforms = 0;
}
