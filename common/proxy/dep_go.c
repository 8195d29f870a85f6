/*
 * Go modules in the dependency cache: see dep_go.h and docs/cache.md ("go").
 */
#include <errno.h>
#include <openssl/evp.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/go_sum.h"
#include "proxy/dep_go.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

int dep_go_unescape(const char *s, size_t n, int vers, struct buf *out, struct buf *why)
{
	buf_reset(out);
	if (!n)
		return buf_refuse(why, -EINVAL, "an empty module path or version");
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (ch == '!') {
			if (i + 1 == n || s[i + 1] < 'a' || s[i + 1] > 'z')
				return buf_refuse(why, -EINVAL,
				                  "a '!' not before a lower case letter");
			buf_addch(out, (char)(s[++i] - 'a' + 'A'));
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		           strchr(vers ? ".+-" : "._~/-", ch)) {
			buf_addch(out, ch);
		} else {
			return buf_refuse(why, -EINVAL, "a byte Go's case-encoding never gives");
		}
	}
	if (out->len > (vers ? DEP_GO_VERS_MAX : DEP_GO_PATH_MAX))
		return buf_refuse(why, -EINVAL, "a module path or version too long");
	return 0;
}

/* The id "go:MOD@VER" (or ".../go.mod") of escaped mod and vers into id: 0 or -EINVAL. */
static int go_id(const char *mod, size_t ml, const char *vers, size_t vl, int zip, struct buf *id)
{
	struct buf m = BUF_INIT, v = BUF_INIT;
	int ret = dep_go_unescape(mod, ml, 0, &m, NULL);

	if (!ret)
		ret = dep_go_unescape(vers, vl, 1, &v, NULL);
	if (!ret) {
		buf_reset(id);
		buf_addf(id, "go:%s@%s%s", m.buf, v.buf, zip ? "" : "/go.mod");
	}
	buf_release(&m);
	buf_release(&v);
	return ret;
}

/* The last "/@v/" (or "/lookup/") of target, or NULL. */
static const char *last_of(const char *t, size_t tl, const char *what)
{
	size_t wl = strlen(what);
	const char *found = NULL;

	for (const char *p = t; (size_t)(t + tl - p) >= wl;) {
		const char *q = memmem(p, (size_t)(t + tl - p), what, wl);

		if (!q)
			break;
		found = q;
		p = q + 1;
	}
	return found;
}

int dep_go_download(const struct dep_digests *d, const char *target, size_t tl,
                    const struct dep_digest **dig, int *zip)
{
	const char *at = last_of(target, tl, "/@v/"), *v, *end = target + tl;
	struct buf id = BUF_INIT;
	int segs = 0;

	*dig = NULL;
	*zip = 0;
	if (!at || tl < 4)
		return 0;
	v = at + 4;
	if (end - v > 4 && !memcmp(end - 4, ".zip", 4))
		*zip = 1;
	else if (!(end - v > 4 && !memcmp(end - 4, ".mod", 4)))
		return 0;
	if (memchr(v, '/', (size_t)(end - v)))
		return 0;
	/* The module path: a tail before "/@v/" this task learnt (GOPROXY may have a prefix). */
	for (const char *m = at - 1; m >= target && segs < DEP_GO_SEGS_MAX && !*dig; m--) {
		if (m[0] != '/')
			continue;
		segs++;
		if (!go_id(m + 1, (size_t)(at - m - 1), v, (size_t)(end - 4 - v), *zip, &id))
			*dig = dep_digests_find(d, id.buf);
	}
	buf_release(&id);
	if (*dig && strcmp((*dig)->algo, "h1"))
		*dig = NULL;
	return 1;
}

/* The escaped MOD and VER of a lookup target: 0, or -1 when it is none. */
static int lookup_split(const char *t, size_t tl, const char **mod, size_t *ml, const char **vers,
                        size_t *vl)
{
	const char *l = last_of(t, tl, "/lookup/"), *at;

	if (!l)
		return -1;
	*mod = l + 8;
	at = memchr(*mod, '@', (size_t)(t + tl - *mod));
	if (!at)
		return -1;
	*ml = (size_t)(at - *mod);
	*vers = at + 1;
	*vl = (size_t)(t + tl - *vers);
	return 0;
}

int dep_go_is_lookup(const char *target, size_t tl)
{
	const char *m, *v;
	size_t ml, vl;
	struct buf id = BUF_INIT;
	int ok = !lookup_split(target, tl, &m, &ml, &v, &vl) && !go_id(m, ml, v, vl, 1, &id);

	buf_release(&id);
	return ok;
}

int dep_go_lookup(struct dep_digests *d, const char *base, const char *body, size_t len,
                  const struct go_vkey *keys, size_t nr, struct buf *why)
{
	const char *path = strchr(base + 8, '/'), *m, *v, *p = body, *end = body + len, *rec;
	size_t ml, vl, text_len, idl = 0;
	struct buf mod = BUF_INIT, vers = BUF_INIT, id = BUF_INIT;
	int learnt = 0, ret = 0;

	if (!path || lookup_split(path, strlen(path), &m, &ml, &v, &vl) ||
	    dep_go_unescape(m, ml, 0, &mod, why) || dep_go_unescape(v, vl, 1, &vers, why)) {
		ret = buf_refuse(why, -EINVAL, "not a checksum database lookup");
		goto out;
	}
	if (len > DEP_META_MAX) {
		ret = buf_refuse(why, -EINVAL, "a lookup over the cap");
		goto out;
	}
	/* "ID\n" */
	while (idl < len && idl < 20 && body[idl] >= '0' && body[idl] <= '9')
		idl++;
	if (!idl || idl == len || body[idl] != '\n') {
		ret = buf_refuse(why, -EINVAL, "a lookup that does not start with its record's id");
		goto out;
	}
	rec = body + idl + 1;
	p = memmem(rec, (size_t)(end - rec), "\n\n", 2);
	if (!p) {
		ret = buf_refuse(why, -EINVAL, "a lookup without its signed note");
		goto out;
	}
	/* Nothing is learnt from an answer whose note does not verify. */
	if ((ret = go_note_verify(p + 2, (size_t)(end - p - 2), keys, nr, &text_len, why)) < 0)
		goto out;
	end = p + 1;
	for (p = rec; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *s1, *s2;
		unsigned char md[34];
		int zip;

		s1 = memchr(p, ' ', (size_t)(nl - p));
		s2 = s1 ? memchr(s1 + 1, ' ', (size_t)(nl - s1 - 1)) : NULL;
		if (!s2 || (size_t)(s1 - p) != mod.len || memcmp(p, mod.buf, mod.len) ||
		    nl - s2 != 1 + 3 + 44 || memcmp(s2 + 1, "h1:", 3)) {
			p = nl + 1;
			continue;
		}
		zip = (size_t)(s2 - s1 - 1) == vers.len;
		if (!(zip || ((size_t)(s2 - s1 - 1) == vers.len + 7 &&
		              !memcmp(s1 + 1 + vers.len, "/go.mod", 7))) ||
		    memcmp(s1 + 1, vers.buf, vers.len) ||
		    EVP_DecodeBlock(md, (const unsigned char *)s2 + 4, 44) != 33 || s2[47] != '=') {
			p = nl + 1;
			continue;
		}
		buf_reset(&id);
		buf_addf(&id, "go:%s@%s%s", mod.buf, vers.buf, zip ? "" : "/go.mod");
		learnt += dep_digests_learn(d, id.buf, "h1", md, 32);
		p = nl + 1;
	}
	ret = learnt;
out:
	buf_release(&mod);
	buf_release(&vers);
	buf_release(&id);
	return ret;
}

int dep_go_lookup_path(const char *t, size_t tl, int own_db, struct buf *out)
{
	const char *at = tl ? memmem(t, tl, "/@v/", 4) : NULL, *v, *end = t + tl;
	struct buf id = BUF_INIT;
	size_t vl;
	int ret;

	if (!at || t[0] != '/' || at == t)
		return -EINVAL;
	v = at + 4;
	if (end - v <= 4 || memchr(v, '/', (size_t)(end - v)) ||
	    (memcmp(end - 4, ".zip", 4) && memcmp(end - 4, ".mod", 4)))
		return -EINVAL;
	vl = (size_t)(end - 4 - v);
	/* Each of the module path's segments is a name: not empty, not starting with a dot. */
	for (const char *p = t; p < at; p++)
		if (p[0] == '/' && (p + 1 == at || p[1] == '/' || p[1] == '.'))
			return -EINVAL;
	ret = go_id(t + 1, (size_t)(at - t - 1), v, vl, 1, &id);
	buf_release(&id);
	if (ret)
		return -EINVAL;
	buf_reset(out);
	buf_addf(out, "%s%.*s@%.*s", own_db ? "/lookup/" : "/sumdb/sum.golang.org/lookup/",
	         (int)(at - t - 1), t + 1, (int)vl, v);
	return 0;
}
