/*
 * The dependency cache's rules: see dep_rules.h and docs/cache.md.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "net/dep_cache.h"
#include "net/http.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

/*
 * An Accept-Encoding value (n bytes) that takes identity: no item
 * "identity;q=0" or "*;q=0" (any case, spaces around, q=0, 0., 0.0 ...).
 */
static int takes_identity(const char *v, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t s = i, e, q;

		while (i < n && v[i] != ',')
			i++;
		e = i++;
		while (s < e && (v[s] == ' ' || v[s] == '\t'))
			s++;
		q = s;
		while (q < e && v[q] != ';' && v[q] != ' ' && v[q] != '\t')
			q++;
		if (!((q - s == 8 && !strncasecmp(v + s, "identity", 8)) ||
		      (q - s == 1 && v[s] == '*')))
			continue;
		while (q < e && (v[q] == ' ' || v[q] == '\t' || v[q] == ';'))
			q++;
		if (e - q >= 2 && (v[q] == 'q' || v[q] == 'Q') && v[q + 1] == '=') {
			int zero = 1;

			q += 2;
			if (q < e && v[q] == '1')
				zero = 0;
			for (; q < e && v[q] != ' ' && v[q] != '\t'; q++)
				if (v[q] != '0' && v[q] != '.')
					zero = 0;
			if (zero)
				return 0;
		}
	}
	return 1;
}

int dep_request_cacheable(const struct http_head *h, struct buf *why)
{
	static const char *const bypass[] = {
	    "range",         "if-range",          "if-match",
	    "if-none-match", "if-modified-since", "if-unmodified-since",
	};
	const struct http_header *ae;
	int n = 0;

	if (h->method_len != 3 || memcmp(h->method, "GET", 3))
		return buf_refuse(why, 0, "not a GET");
	for (size_t i = 0; i < ARRAY_SIZE(bypass); i++)
		if (http_header(h, bypass[i], NULL)) {
			if (why)
				buf_addf(why, "a %s header", bypass[i]);
			return 0;
		}
	ae = http_header(h, "accept-encoding", &n);
	/* The proxy asks upstream for identity and answers so: any list that takes it will do. */
	if (ae && (n > 1 || !takes_identity(ae->value, ae->value_len)))
		return buf_refuse(why, 0, "an Accept-Encoding that refuses identity");
	if (h->content_length > 0 || h->chunked || http_header(h, "transfer-encoding", NULL))
		return buf_refuse(why, 0, "a body");
	return 1;
}

/* A path the cache takes: "/" and printable ASCII, no query, escapes or dot segments. */
static int path_ok(const char *p, size_t n, struct buf *why)
{
	if (!n || p[0] != '/')
		return buf_refuse(why, -EINVAL, "not an absolute path");
	for (size_t i = 0; i < n; i++) {
		if (p[i] <= ' ' || p[i] > '~')
			return buf_refuse(why, -EINVAL, "a byte outside printable ASCII");
		if (strchr("?#%\\", p[i]))
			return buf_refuse(why, -EINVAL, "a query, fragment or escape");
		if (p[i] == '/' && i + 1 < n && p[i + 1] == '/')
			return buf_refuse(why, -EINVAL, "an empty segment");
		if (p[i] == '/' && i + 1 < n && p[i + 1] == '.' &&
		    (i + 2 == n || p[i + 2] == '/' ||
		     (p[i + 2] == '.' && (i + 3 == n || p[i + 3] == '/'))))
			return buf_refuse(why, -EINVAL, "a dot segment");
	}
	return 0;
}

int dep_key(const char *host, int port, const char *target, size_t tl, struct buf *key,
            struct buf *why)
{
	int ret = path_ok(target, tl, why);

	if (ret < 0)
		return ret;
	buf_reset(key);
	buf_addstr(key, "https://");
	for (const char *h = host; *h; h++)
		buf_addch(key, *h >= 'A' && *h <= 'Z' ? *h - 'A' + 'a' : *h);
	if (port != 443)
		buf_addf(key, ":%d", port);
	buf_add(key, target, tl);
	if (!dep_cache_key_ok(key->buf))
		return buf_refuse(why, -EINVAL, "longer than the cache's key cap");
	return 0;
}

int dep_key_from_url(const char *base, const char *url, struct buf *key, struct buf *why)
{
	char host[256];
	const char *auth, *slash, *colon, *first, *frag = strchr(url, '#');
	size_t ul = frag ? (size_t)(frag - url) : strlen(url);
	struct buf path = BUF_INIT;
	int port, ret;

	if (ul >= 8 && !strncasecmp(url, "https://", 8)) {
		auth = url + 8;
		slash = memchr(auth, '/', ul - 8);
		if (!slash)
			return buf_refuse(why, -EINVAL, "a URL without a path");
		if (http_split_authority(auth, (size_t)(slash - auth), 443, host, sizeof(host),
		                         &port, NULL) < 0)
			return buf_refuse(why, -EINVAL, "a URL whose host is not a host");
		return dep_key(host, port, slash, ul - (size_t)(slash - url), key, why);
	}
	colon = memchr(url, ':', ul);
	first = memchr(url, '/', ul);
	if (colon && (!first || colon < first))
		return buf_refuse(why, -EINVAL, "not an https URL");
	/* Relative: against base's path ("https://h/a/b/" + "../c" is "https://h/a/c"). */
	slash = strchr(base + 8, '/');
	if (strncmp(base, "https://", 8) || !slash)
		BUG("dep_key_from_url: base '%s' is not a key", base);
	if (url[0] == '/') {
		buf_add(&path, url, ul);
	} else {
		const char *last = strrchr(slash, '/');

		buf_add(&path, slash, (size_t)(last - slash) + 1);
		for (const char *u = url; u < url + ul;) {
			const char *e = memchr(u, '/', (size_t)(url + ul - u));
			size_t n = e ? (size_t)(e - u) : (size_t)(url + ul - u);

			if (n == 2 && !memcmp(u, "..", 2)) {
				if (path.len > 1) {
					buf_setlen(&path, path.len - 1);
					buf_setlen(&path,
					           (size_t)(strrchr(path.buf, '/') - path.buf) + 1);
				}
			} else if (!(n == 1 && u[0] == '.')) {
				buf_add(&path, u, n);
				if (e)
					buf_addch(&path, '/');
			}
			u += n + (e ? 1 : 0);
		}
	}
	buf_reset(key);
	buf_add(key, base, (size_t)(slash - base));
	ret = path_ok(path.buf, path.len, why);
	if (!ret) {
		buf_add(key, path.buf, path.len);
		if (!dep_cache_key_ok(key->buf))
			ret = buf_refuse(why, -EINVAL, "longer than the cache's key cap");
	}
	buf_release(&path);
	return ret;
}

void dep_unescape_one(const char *target, size_t tl, char c, struct buf *out)
{
	buf_reset(out);
	for (size_t i = 0; i < tl; i++) {
		if (target[i] == '%' && tl - i >= 3 && hex_digit(target[i + 1]) >= 0 &&
		    hex_digit(target[i + 2]) >= 0 &&
		    (hex_digit(target[i + 1]) << 4 | hex_digit(target[i + 2])) ==
		        (unsigned char)c) {
			buf_addch(out, c);
			i += 2;
		} else {
			buf_addch(out, target[i]);
		}
	}
}

/* The sha512 of an SRI string ("sha1-... sha512-..."): 1 with md, else 0. */
static int sri_sha512(const char *s, unsigned char md[64])
{
	unsigned char dec[100];

	for (const char *p = s; p && *p;) {
		size_t n;

		while (*p == ' ')
			p++;
		n = strcspn(p, " ");
		if (n == 7 + 88 && !strncmp(p, "sha512-", 7) && p[n - 1] == '=' &&
		    p[n - 2] == '=') {
			if (EVP_DecodeBlock(dec, (const unsigned char *)p + 7, 88) == 66) {
				memcpy(md, dec, 64);
				return 1;
			}
		}
		p += n;
	}
	return 0;
}

int dep_npm_document(struct dep_digests *d, const char *base, const char *doc, size_t len,
                     struct buf *why)
{
	json_error_t jerr;
	json_t *root, *versions, *v;
	const char *name;
	struct buf key = BUF_INIT;
	int learnt = 0;

	if (len > DEP_META_MAX)
		return buf_refuse(why, -EINVAL, "a package document over the cap");
	root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return buf_refuse(why, -EINVAL, "a package document that is not JSON");
	versions = json_object_get(root, "versions");
	json_object_foreach(versions, name, v)
	{
		json_t *dist = json_object_get(v, "dist");
		const char *tarball = json_string_value(json_object_get(dist, "tarball"));
		const char *sri = json_string_value(json_object_get(dist, "integrity"));
		unsigned char md[64];

		if (!tarball || !sri || !sri_sha512(sri, md) ||
		    dep_key_from_url(base, tarball, &key, NULL) < 0)
			continue;
		learnt += dep_digests_learn(d, key.buf, "sha512", md, 64);
	}
	json_decref(root);
	buf_release(&key);
	return learnt;
}

int dep_pypi_index(struct dep_digests *d, const char *base, const char *html, size_t len,
                   struct buf *why)
{
	struct buf url = BUF_INIT, key = BUF_INIT;
	const char *p = html, *end = html + len;
	int learnt = 0;

	if (len > DEP_META_MAX)
		return buf_refuse(why, -EINVAL, "an index page over the cap");
	while ((p = memmem(p, (size_t)(end - p), "href=\"", 6))) {
		const char *q = memchr(p + 6, '"', (size_t)(end - p - 6)), *h;
		unsigned char md[32];

		if (!q)
			break;
		buf_reset(&url);
		/* The one entity a link's URL carries in a simple index. */
		for (const char *s = p + 6; s < q; s++) {
			buf_addch(&url, *s);
			if (*s == '&' && q - s >= 5 && !memcmp(s, "&amp;", 5))
				s += 4;
		}
		p = q + 1;
		h = strstr(url.buf, "#sha256=");
		if (!h || strlen(h + 8) != 64 || hex_decode(md, h + 8, 32))
			continue;
		if (memchr(url.buf, '\0', url.len) ||
		    dep_key_from_url(base, url.buf, &key, NULL) < 0)
			continue;
		learnt += dep_digests_learn(d, key.buf, "sha256", md, 32);
	}
	buf_release(&url);
	buf_release(&key);
	return learnt;
}

/* n bytes of p, each in set or alphanumeric ASCII, 1 to max of them. */
static int word_ok(const char *p, size_t n, size_t max, const char *set)
{
	if (!n || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
		      (p[i] >= '0' && p[i] <= '9') || strchr(set, p[i])))
			return 0;
	return 1;
}

#define CRATE_NAME_MAX 64
#define CRATE_VERS_MAX 128

/* "crate:NAME@VERSION" into id, NAME lowercased; -EINVAL unless both are words. */
static int crate_id(const char *name, size_t nl, const char *vers, size_t vl, struct buf *id,
                    struct buf *why)
{
	/* A version starts with a digit: an index path such as /do/wn/download is no download. */
	if (!word_ok(name, nl, CRATE_NAME_MAX, "-_") || !word_ok(vers, vl, CRATE_VERS_MAX, ".+-") ||
	    vers[0] < '0' || vers[0] > '9')
		return buf_refuse(why, -EINVAL, "not a crate name and version");
	buf_reset(id);
	buf_addstr(id, "crate:");
	for (size_t i = 0; i < nl; i++)
		buf_addch(id, name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
	buf_addch(id, '@');
	buf_add(id, vers, vl);
	return 0;
}

/* The length of an npm name or scope at s (up to end, before a '/'), 0 when it is none. */
static size_t npm_name(const char *s, const char *end)
{
	size_t n = 0;

	while (s + n < end && s[n] != '/') {
		char ch = s[n];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("._~-", ch)) ||
		    ++n > 214)
			return 0;
	}
	return n && s[0] != '.' && s[0] != '_' ? n : 0;
}

int dep_npm_doc_path(const char *t, size_t tl, struct buf *doc)
{
	const char *end = t + tl, *p = t + 1, *scope = NULL, *name, *v;
	size_t sl = 0, nl;

	if (tl < 2 || t[0] != '/')
		return -EINVAL;
	if (*p == '@') {
		scope = p + 1;
		sl = npm_name(scope, end);
		if (!sl || scope + sl == end)
			return -EINVAL;
		p = scope + sl + 1;
	}
	name = p;
	nl = npm_name(name, end);
	/* Then "/-/NAME-" and VERSION ".tgz", nothing else. */
	p = name + nl;
	if (!nl || end - p < 3 || memcmp(p, "/-/", 3))
		return -EINVAL;
	p += 3;
	if ((size_t)(end - p) < nl + 1 || memcmp(p, name, nl) || p[nl] != '-')
		return -EINVAL;
	v = p + nl + 1;
	if (end - v < 5 || memcmp(end - 4, ".tgz", 4) || end - 4 - v > 128 || *v < '0' || *v > '9')
		return -EINVAL;
	for (const char *q = v; q < end - 4; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		      (*q >= '0' && *q <= '9') || *q == '.' || *q == '+' || *q == '-'))
			return -EINVAL;
	buf_reset(doc);
	if (scope)
		buf_addf(doc, "/@%.*s%%2f%.*s", (int)sl, scope, (int)nl, name);
	else
		buf_addf(doc, "/%.*s", (int)nl, name);
	return 0;
}

/* The last segment of target (tl bytes, starting with '/'), its length in *n. */
static const char *last_segment(const char *t, size_t tl, size_t *n)
{
	const char *s = t + tl;

	while (s > t && s[-1] != '/')
		s--;
	*n = (size_t)(t + tl - s);
	return s;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t sl = strlen(suffix);

	return n > sl && !memcmp(s + n - sl, suffix, sl);
}

int dep_npm_tarball(const char *t, size_t tl)
{
	size_t n;
	const char *last = last_segment(t, tl, &n);

	/* "/-/" somewhere before the file: last - 3 is the latest it can start. */
	return ends_with(last, n, ".tgz") && last - t >= 3 &&
	       memmem(t, (size_t)(last - t), "/-/", 3) != NULL;
}

int dep_pypi_dist(const char *t, size_t tl)
{
	static const char *const ext[] = {".whl", ".tar.gz", ".zip", ".tar.bz2", ".tar.xz",
	                                  ".tgz", ".tbz",    ".tar", ".egg"};
	size_t n;
	const char *last = last_segment(t, tl, &n);

	for (size_t i = 0; i < ARRAY_SIZE(ext); i++)
		if (ends_with(last, n, ext[i]))
			return 1;
	return 0;
}

int dep_crate_download(const char *target, size_t tl, struct buf *id, struct buf *why)
{
	const char *seg[3];
	size_t len[3];
	const char *end = target + tl;
	int nr = 0;

	/* The last three segments, last first (target starts with '/'). */
	for (; nr < 3 && end > target; nr++) {
		const char *s = end;

		while (s[-1] != '/')
			s--;
		seg[nr] = s;
		len[nr] = (size_t)(end - s);
		end = s - 1;
	}
	if (nr == 3 && len[0] == 8 && !memcmp(seg[0], "download", 8))
		return crate_id(seg[2], len[2], seg[1], len[1], id, why);
	/* NAME/NAME-VERSION.crate */
	if (nr >= 2 && len[0] > len[1] + 7 && !strncasecmp(seg[0], seg[1], len[1]) &&
	    seg[0][len[1]] == '-' && !memcmp(seg[0] + len[0] - 6, ".crate", 6))
		return crate_id(seg[1], len[1], seg[0] + len[1] + 1, len[0] - len[1] - 7, id, why);
	return buf_refuse(why, -EINVAL, "not a crate download");
}

int dep_crates_index(struct dep_digests *d, const char *base, const char *text, size_t len,
                     struct buf *why)
{
	const char *file = strrchr(base, '/') + 1, *p = text, *end = text + len;
	struct buf id = BUF_INIT;
	int learnt = 0;

	if (len > DEP_META_MAX)
		return buf_refuse(why, -EINVAL, "an index file over the cap");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
		const char *name, *vers, *ck;
		unsigned char md[32];
		json_t *line;

		line = json_loadb(p, (size_t)(e - p), JSON_REJECT_DUPLICATES, NULL);
		p = e + 1;
		if (!line)
			continue;
		name = json_string_value(json_object_get(line, "name"));
		vers = json_string_value(json_object_get(line, "vers"));
		ck = json_string_value(json_object_get(line, "cksum"));
		if (name && vers && ck && strlen(ck) == 64 && !strcasecmp(name, file) &&
		    !crate_id(name, json_string_length(json_object_get(line, "name")), vers,
		              json_string_length(json_object_get(line, "vers")), &id, NULL) &&
		    !hex_decode(md, ck, 32))
			learnt += dep_digests_learn(d, id.buf, "sha256", md, 32);
		json_decref(line);
	}
	buf_release(&id);
	return learnt;
}
