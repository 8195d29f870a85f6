#include "net/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/hex.h"
#include "base/banned.h"

/* RFC 9110 tchar */
static int is_tchar(unsigned char c)
{
	if (isalnum(c))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int http_name_is(const struct http_header *hd, const char *lower)
{
	size_t n = strlen(lower);

	return hd->name_len == n && !strncasecmp(hd->name, lower, n);
}

const struct http_header *http_header(const struct http_head *h, const char *lower, int *count)
{
	const struct http_header *first = NULL;
	int n = 0;

	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], lower)) {
			if (!first)
				first = &h->hdr[i];
			n++;
		}
	if (count)
		*count = n;
	return first;
}

/*
 * Find the end of the line starting at p (the CR of its CRLF), checking that
 * no bare CR or LF comes before it.  Returns the line length, -2 when the
 * line is not complete yet, -1 on a bare CR/LF.
 */
static long line_end(const char *p, size_t n, size_t max)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n')
			return -1;
		if (p[i] == '\r') {
			if (i + 1 == n)
				return i + 1 > max ? -3 : -2;
			if (p[i + 1] != '\n')
				return -1;
			return (long)i;
		}
		if (i >= max)
			return -3;
	}
	return n > max ? -3 : -2;
}

static int value_ok(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 1;
}

static int list_has(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token), i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && !strncasecmp(v + s, token, tl))
			return 1;
	}
	return 0;
}

/* What parse_fields() has seen of the headers that say how to read the message. */
struct seen {
	int cl, te, keep_alive;
};

/*
 * Fill h from one header that has a meaning for the framing or the connection.
 * 0, or -EBADMSG with the reason appended to err.
 */
static int field_meaning(struct http_head *h, const struct http_header *hd, struct seen *seen,
                         struct buf *err)
{
	const char *v = hd->value;

	if (http_name_is(hd, "content-length")) {
		uint64_t cl = 0;

		if (seen->cl++)
			return buf_refuse(err, -EBADMSG, "duplicate Content-Length");
		if (!hd->value_len || hd->value_len > 15)
			return buf_refuse(err, -EBADMSG, "invalid Content-Length");
		for (size_t i = 0; i < hd->value_len; i++) {
			if (!isdigit((unsigned char)v[i]))
				return buf_refuse(err, -EBADMSG, "invalid Content-Length");
			cl = cl * 10 + (v[i] - '0');
		}
		h->content_length = (int64_t)cl;
	} else if (http_name_is(hd, "transfer-encoding")) {
		if (seen->te++)
			return buf_refuse(err, -EBADMSG, "duplicate Transfer-Encoding");
		if (hd->value_len != 7 || strncasecmp(v, "chunked", 7))
			return buf_refuse(err, -EBADMSG, "unsupported Transfer-Encoding");
		h->chunked = 1;
	} else if (http_name_is(hd, "host")) {
		if (h->host)
			return buf_refuse(err, -EBADMSG, "duplicate Host");
		h->host = v;
		h->host_len = hd->value_len;
	} else if (http_name_is(hd, "connection") || http_name_is(hd, "proxy-connection")) {
		if (list_has(v, hd->value_len, "close"))
			h->conn_close = 1;
		if (list_has(v, hd->value_len, "keep-alive"))
			seen->keep_alive = 1;
	} else if (http_name_is(hd, "expect")) {
		if (hd->value_len == 12 && !strncasecmp(v, "100-continue", 12))
			h->expect_continue = 1;
	}
	return 0;
}

/* Parse the header lines and the empty line after the start line. */
static int parse_fields(const char *buf, size_t len, size_t pos, int request, struct http_head *h,
                        struct buf *err)
{
	struct seen seen = {0, 0, 0};

	h->nhdr = 0;
	h->content_length = -1;
	h->chunked = 0;
	h->conn_close = 0;
	h->expect_continue = 0;
	h->host = NULL;
	h->host_len = 0;
	for (;;) {
		long n;
		const char *line = buf + pos, *colon, *v, *ve;
		struct http_header *hd;

		if (pos >= HTTP_MAX_HEAD)
			return buf_refuse(err, -EMSGSIZE, "request head too large");
		n = line_end(line, len - pos, HTTP_MAX_LINE);
		if (n == -2)
			return 0;
		if (n == -3)
			return buf_refuse(err, -EMSGSIZE, "header line too long");
		if (n == -1)
			return buf_refuse(err, -EBADMSG, "bare CR or LF in the head");
		if (n == 0) {
			pos += 2;
			break;
		}
		if (pos + n + 2 > HTTP_MAX_HEAD)
			return buf_refuse(err, -EMSGSIZE, "request head too large");
		if (line[0] == ' ' || line[0] == '\t')
			return buf_refuse(err, -EBADMSG, "obs-fold (folded header line)");
		colon = memchr(line, ':', n);
		if (!colon || colon == line)
			return buf_refuse(err, -EBADMSG, "header line without a name");
		for (const char *q = line; q < colon; q++)
			if (!is_tchar((unsigned char)*q))
				return buf_refuse(err, -EBADMSG, "invalid header name");
		/*
		 * Some servers read "Transfer_Encoding" as Transfer-Encoding (CGI
		 * spells both HTTP_TRANSFER_ENCODING): a request would then be framed
		 * one way here and another way upstream.
		 */
		if (request && memchr(line, '_', colon - line))
			return buf_refuse(err, -EBADMSG, "underscore in a header name");
		if (h->nhdr >= HTTP_MAX_HEADERS)
			return buf_refuse(err, -EMSGSIZE, "too many header lines");
		v = colon + 1;
		ve = line + n;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (!value_ok(v, ve - v))
			return buf_refuse(err, -EBADMSG, "control character in a header value");
		hd = &h->hdr[h->nhdr++];
		hd->name = line;
		hd->name_len = colon - line;
		hd->value = v;
		hd->value_len = ve - v;

		if (field_meaning(h, hd, &seen, err) < 0)
			return -EBADMSG;
		pos += n + 2;
	}
	if (seen.cl && seen.te)
		return buf_refuse(err, -EBADMSG, "both Content-Length and Transfer-Encoding");
	if (h->minor == 0 && !seen.keep_alive)
		h->conn_close = 1;
	h->head_len = pos;
	return (int)pos;
}

static int parse_version(const char *p, size_t n, struct http_head *h)
{
	if (n != 8 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1'))
		return -1;
	h->minor = p[7] - '0';
	return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_head *h, struct buf *err)
{
	long n = line_end(buf, len, HTTP_MAX_LINE);
	const char *sp1, *sp2, *end;

	h->method = h->target = NULL;
	h->method_len = h->target_len = 0;
	if (n == -2)
		return 0;
	if (n == -3)
		return buf_refuse(err, -EMSGSIZE, "request line too long");
	if (n == -1)
		return buf_refuse(err, -EBADMSG, "bare CR or LF in the request line");
	end = buf + n;
	sp1 = memchr(buf, ' ', n);
	if (!sp1 || sp1 == buf)
		return buf_refuse(err, -EBADMSG, "malformed request line");
	for (const char *q = buf; q < sp1; q++)
		if (!is_tchar((unsigned char)*q))
			return buf_refuse(err, -EBADMSG, "malformed request line");
	sp2 = memchr(sp1 + 1, ' ', end - sp1 - 1);
	if (!sp2 || sp2 == sp1 + 1)
		return buf_refuse(err, -EBADMSG, "malformed request line");
	/* Set before the target is checked: a refusal's log names what was asked for. */
	h->method = buf;
	h->method_len = sp1 - buf;
	h->target = sp1 + 1;
	h->target_len = sp2 - sp1 - 1;
	for (const char *q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return buf_refuse(err, -EBADMSG, "invalid character in the request target");
	if (parse_version(sp2 + 1, end - sp2 - 1, h))
		return buf_refuse(err, -EBADMSG, "unsupported HTTP version");
	h->status = 0;
	return parse_fields(buf, len, n + 2, 1, h, err);
}

int http_parse_response(const char *buf, size_t len, struct http_head *h, struct buf *err)
{
	long n = line_end(buf, len, HTTP_MAX_LINE);
	const char *p = buf;

	if (n == -2)
		return 0;
	if (n == -3)
		return buf_refuse(err, -EMSGSIZE, "status line too long");
	if (n < 0)
		return buf_refuse(err, -EBADMSG, "bare CR or LF in the status line");
	if (n < 12 || parse_version(p, 8, h) || p[8] != ' ' || !isdigit((unsigned char)p[9]) ||
	    !isdigit((unsigned char)p[10]) || !isdigit((unsigned char)p[11]) ||
	    (n > 12 && p[12] != ' ') || !value_ok(p, n))
		return buf_refuse(err, -EBADMSG, "malformed status line");
	h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (h->status < 100)
		return buf_refuse(err, -EBADMSG, "malformed status line");
	h->method = NULL;
	h->method_len = 0;
	h->target = n > 13 ? p + 13 : p + n;
	h->target_len = n > 13 ? (size_t)n - 13 : 0;
	return parse_fields(buf, len, n + 2, 0, h, err);
}

static int host_ok(const char *h)
{
	size_t n = strlen(h), label = 0;

	if (!n || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];

		if (c == '.') {
			if (!label || h[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!(isalnum(c) || c == '-' || c == '_'))
			return 0;
		if (!label && c == '-')
			return 0;
		if (++label > 63)
			return 0;
	}
	return label > 0;
}

/* A name whose last label is numeric would be read as an address by some resolvers. */
static int looks_numeric(const char *h)
{
	const char *last = strrchr(h, '.');

	last = last ? last + 1 : h;
	if (!strncasecmp(last, "0x", 2))
		return 1;
	for (; *last; last++)
		if (!isdigit((unsigned char)*last))
			return 0;
	return 1;
}

int http_split_authority(const char *s, size_t n, int default_port, char *host, size_t hostsz,
                         int *port, struct buf *err)
{
	const char *hs, *he, *ps = NULL;
	struct in6_addr a6;
	struct in_addr a4;
	size_t hl;

	if (!n)
		return buf_refuse(err, -EINVAL, "invalid host");
	if (s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (!rb)
			return buf_refuse(err, -EINVAL, "invalid host");
		hs = s + 1;
		he = rb;
		if (rb + 1 < s + n) {
			if (rb[1] != ':')
				return buf_refuse(err, -EINVAL, "invalid host");
			ps = rb + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);

		hs = s;
		he = colon ? colon : s + n;
		if (colon) {
			if (memchr(colon + 1, ':', s + n - colon - 1))
				return buf_refuse(err, -EINVAL, "invalid host");
			ps = colon + 1;
		}
	}
	hl = he - hs;
	if (!hl || hl >= hostsz)
		return buf_refuse(err, -EINVAL, "invalid host");
	for (size_t i = 0; i < hl; i++)
		host[i] = (char)tolower((unsigned char)hs[i]);
	host[hl] = '\0';
	if (s[0] == '[') {
		if (inet_pton(AF_INET6, host, &a6) != 1)
			return buf_refuse(err, -EINVAL, "invalid host");
	} else {
		if (hl > 1 && host[hl - 1] == '.')
			host[--hl] = '\0';
		if (inet_pton(AF_INET, host, &a4) != 1 && (!host_ok(host) || looks_numeric(host)))
			return buf_refuse(err, -EINVAL, "invalid host");
	}
	if (ps) {
		long p = 0;
		size_t pl = s + n - ps;

		if (!pl || pl > 5)
			return buf_refuse(err, -EINVAL, "invalid port");
		for (size_t i = 0; i < pl; i++) {
			if (!isdigit((unsigned char)ps[i]))
				return buf_refuse(err, -EINVAL, "invalid port");
			p = p * 10 + (ps[i] - '0');
		}
		if (p < 1 || p > 65535)
			return buf_refuse(err, -EINVAL, "invalid port");
		*port = (int)p;
	} else {
		if (!default_port)
			return buf_refuse(err, -EINVAL, "port missing");
		*port = default_port;
	}
	return 0;
}

int http_api_path_ok(const char *p, size_t n, struct buf *err)
{
	size_t pathlen = n, seg;
	const char *q = memchr(p, '?', n);

	if (q)
		pathlen = q - p;
	if (!pathlen || p[0] != '/')
		return buf_refuse(err, -EINVAL, "path not allowed for key forwarding");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '#')
			return buf_refuse(err, -EINVAL, "invalid character in the path");
		/*
		 * Path parameters ("/v1/..;/x"): servers that strip them would see
		 * another path than the one checked here.
		 */
		if (i < pathlen && c == ';')
			return buf_refuse(err, -EINVAL, "path parameter (;) in the path");
		/* The path is RFC 3986 pchars and slashes, nothing else. */
		if (i < pathlen && c != '%' && c != '/' && !isalnum(c) &&
		    !strchr("-._~!$&'()*+,=:@", c))
			return buf_refuse(err, -EINVAL, "invalid character in the path");
		if (c == '%') {
			int hi, lo, d;

			if (i + 2 >= n || (hi = hex_digit(p[i + 1])) < 0 ||
			    (lo = hex_digit(p[i + 2])) < 0)
				return buf_refuse(err, -EINVAL, "malformed escape in the path");
			d = hi * 16 + lo;
			if (i < pathlen && d == ';')
				return buf_refuse(err, -EINVAL, "path parameter (;) in the path");
			if (i < pathlen && (d == '/' || d == '\\' || d == '.' || d == '%' ||
			                    d < 0x20 || d >= 0x7f))
				return buf_refuse(
				    err, -EINVAL,
				    "encoded slash, backslash, dot or control in the path");
		}
	}
	/* Dot segments and empty segments, in the path part. */
	seg = 1;
	for (size_t i = 1; i <= pathlen; i++) {
		if (i == pathlen || p[i] == '/') {
			size_t sl = i - seg;

			if ((sl == 0 && i != pathlen) || (sl == 1 && p[seg] == '.') ||
			    (sl == 2 && p[seg] == '.' && p[seg + 1] == '.'))
				return buf_refuse(err, -EINVAL, "dot or empty segment in the path");
			seg = i + 1;
		}
	}
	if (pathlen == 10 && !memcmp(p, "/api/hello", 10))
		return 0;
	if (pathlen > 4 && !memcmp(p, "/v1/", 4))
		return 0;
	return buf_refuse(err, -EINVAL, "path not under /v1/ or /api/hello");
}

void http_body_init(struct http_body *b, enum http_body_kind kind, uint64_t length)
{
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->left = length;
	if (kind == BODY_NONE || (kind == BODY_LENGTH && !length))
		b->done = 1;
}

enum {
	CK_SIZE,
	CK_EXT,
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER,      /* at the start of a trailer line */
	CK_TRAILER_NAME, /* inside a trailer field's name */
	CK_TRAILER_LINE, /* inside a trailer field's value */
	CK_TRAILER_LF,
	CK_END_LF,
};

#define CK_MAX_LINE 4096

/*
 * One byte of a line's text (a chunk extension, a trailer's value): its CR
 * moves on to state `cr`; an LF, a control byte or a line past CK_MAX_LINE
 * is refused.  0 or -1.
 */
static int text_byte(struct http_body *b, unsigned char c, int cr)
{
	if (c == '\r')
		b->state = cr;
	else if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f || ++b->line > CK_MAX_LINE)
		return -1;
	return 0;
}

/*
 * One byte of a chunk's size line (size, extensions, CRLF) or of the CRLF
 * after its data.  0, or -1 when the framing is broken.
 */
static int size_byte(struct http_body *b, unsigned char c)
{
	int d;

	switch (b->state) {
	case CK_SIZE:
		d = hex_digit(c);
		if (d >= 0) {
			if (++b->ndigits > 15)
				return -1;
			b->left = b->left * 16 + d;
		} else if (!b->ndigits) {
			return -1;
		} else if (c == ';') {
			b->state = CK_EXT;
			b->line = 0;
		} else if (c == '\r') {
			b->state = CK_SIZE_LF;
		} else {
			return -1;
		}
		return 0;
	case CK_EXT:
		return text_byte(b, c, CK_SIZE_LF);
	case CK_SIZE_LF:
		if (c != '\n')
			return -1;
		b->ndigits = 0;
		b->state = b->left ? CK_DATA : CK_TRAILER;
		return 0;
	case CK_DATA_CR:
		if (c != '\r')
			return -1;
		b->state = CK_DATA_LF;
		return 0;
	case CK_DATA_LF:
		if (c != '\n')
			return -1;
		b->state = CK_SIZE;
		b->left = 0;
		return 0;
	}
	return -1;
}

/* One byte of the trailer section after the last chunk.  0, or -1 when broken. */
static int trailer_byte(struct http_body *b, unsigned char c)
{
	switch (b->state) {
	case CK_TRAILER:
		if (c == '\r') {
			b->state = CK_END_LF;
		} else if (!is_tchar(c) || c == '_') {
			return -1;
		} else {
			b->state = CK_TRAILER_NAME;
			b->line = 1;
		}
		return 0;
	case CK_TRAILER_NAME:
		/* A trailer is a header field: a token, then the colon. */
		if (c == ':')
			b->state = CK_TRAILER_LINE;
		else if (!is_tchar(c) || c == '_' || ++b->line > CK_MAX_LINE)
			return -1;
		return 0;
	case CK_TRAILER_LINE:
		return text_byte(b, c, CK_TRAILER_LF);
	case CK_TRAILER_LF:
		if (c != '\n')
			return -1;
		b->state = CK_TRAILER;
		return 0;
	case CK_END_LF:
		if (c != '\n')
			return -1;
		b->done = 1;
		return 0;
	}
	return -1;
}

/*
 * http_body_feed() and http_body_decode() in one: when out is not NULL, the
 * payload bytes among those taken are copied to out + *out_len.
 */
static long body_run(struct http_body *b, const char *p, size_t n, char *out, size_t *out_len,
                     struct buf *err)
{
	size_t i = 0;

	if (b->done || b->kind == BODY_NONE)
		return 0;
	if (b->kind == BODY_LENGTH) {
		if (n >= b->left) {
			n = b->left;
			b->done = 1;
		}
		b->left -= n;
	}
	if (b->kind != BODY_CHUNKED) {
		if (out) {
			memcpy(out + *out_len, p, n);
			*out_len += n;
		}
		if (b->content && n)
			b->content(b->content_ctx, p, n);
		return (long)n;
	}
	while (i < n && !b->done) {
		unsigned char c = (unsigned char)p[i];

		if (b->state == CK_DATA) {
			size_t take = n - i < b->left ? n - i : b->left;

			if (out) {
				memcpy(out + *out_len, p + i, take);
				*out_len += take;
			}
			if (b->content && take)
				b->content(b->content_ctx, p + i, take);
			i += take;
			b->left -= take;
			if (!b->left)
				b->state = CK_DATA_CR;
			continue;
		}
		if ((b->state >= CK_TRAILER ? trailer_byte(b, c) : size_byte(b, c)) < 0)
			return buf_refuse(err, -EBADMSG, "malformed chunked body");
		i++;
	}
	return (long)i;
}

long http_body_feed(struct http_body *b, const char *p, size_t n, struct buf *err)
{
	return body_run(b, p, n, NULL, NULL, err);
}

long http_body_decode(struct http_body *b, const char *p, size_t n, char *out, size_t *out_len,
                      struct buf *err)
{
	*out_len = 0;
	return body_run(b, p, n, out, out_len, err);
}

const char *http_reason(int status)
{
	static const struct {
		int status;
		const char *reason;
	} table[] = {
	    {100, "Continue"},
	    {200, "OK"},
	    {201, "Created"},
	    {204, "No Content"},
	    {301, "Moved Permanently"},
	    {302, "Found"},
	    {304, "Not Modified"},
	    {307, "Temporary Redirect"},
	    {308, "Permanent Redirect"},
	    {400, "Bad Request"},
	    {401, "Unauthorized"},
	    {403, "Forbidden"},
	    {404, "Not Found"},
	    {405, "Method Not Allowed"},
	    {407, "Proxy Authentication Required"},
	    {408, "Request Timeout"},
	    {411, "Length Required"},
	    {413, "Payload Too Large"},
	    {415, "Unsupported Media Type"},
	    {422, "Unprocessable Entity"},
	    {429, "Too Many Requests"},
	    {500, "Internal Server Error"},
	    {501, "Not Implemented"},
	    {502, "Bad Gateway"},
	    {503, "Service Unavailable"},
	    {504, "Gateway Timeout"},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].status == status)
			return table[i].reason;
	return "Error";
}
