/*
 * libFuzzer target for the dependency cache's rules (common/proxy/dep_rules.h,
 * dep_debian.h, dep_go.h, dep_pypi.h): what a VM's request path and an
 * upstream's metadata are to the cache.  On every input:
 *   - to its first NUL, as a request's target: its key (dep_key()), and what
 *     each ecosystem's rules make of the path; as a URL found in metadata
 *     (dep_key_from_url());
 *   - as metadata fetched from upstream: an npm package document, a PyPI
 *     index page, a crates index file, a checksum database's answer and a
 *     Debian Packages index, read whole and (the index) as it comes in
 *     pieces cut where the first byte says.
 * Besides not crashing: a key is "https://HOST/" and a path of printable
 * ASCII with no escape, query, fragment, "//", "." or ".." segment (the
 * key's contract, dep_key()); a tarball's document path is only made for a
 * tarball's path; every digest learnt is under a key of that form (or a
 * crate's id) with a digest of its algorithm's length; and a Debian index
 * teaches the same, with the same verdict, wherever it was cut.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "net/go_sum.h"
#include "proxy/dep_debian.h"
#include "proxy/dep_go.h"
#include "proxy/dep_pypi.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HOST "https://registry.example.org"

/* key holds a cache key's form: "https://", a host, then a clean path. */
static void check_key(const char *key, size_t len)
{
	const char *path;

	if (len < 9 || memcmp(key, "https://", 8))
		__builtin_trap();
	path = memchr(key + 8, '/', len - 8);
	if (!path)
		__builtin_trap();
	for (size_t i = 0; i < len; i++)
		if (key[i] <= 0x20 || key[i] >= 0x7f || key[i] == '%' || key[i] == '?' ||
		    key[i] == '#')
			__builtin_trap();
	if (memmem(path, len - (size_t)(path - key), "//", 2))
		__builtin_trap();
	for (const char *s = path; s < key + len;) {
		const char *e = memchr(s + 1, '/', (size_t)(key + len - s - 1));
		size_t n;

		if (!e)
			e = key + len;
		n = (size_t)(e - s - 1);
		if ((n == 1 && s[1] == '.') || (n == 2 && s[1] == '.' && s[2] == '.'))
			__builtin_trap();
		s = e;
	}
}

static void check_digests(const struct dep_digests *d)
{
	if (d->nr > DEP_DIGESTS_MAX || d->bytes > DEP_DIGESTS_BYTES)
		__builtin_trap();
	for (size_t i = 0; i < d->nr; i++) {
		const struct dep_digest *g = &d->v[i];

		if (!g->key || !g->len) /* forgotten: empty for good */
			continue;
		if (strncmp(g->key, "crate:", 6))
			check_key(g->key, strlen(g->key));
		if (g->len > sizeof(g->md) || (!strcmp(g->algo, "sha512") && g->len != 64) ||
		    (!strcmp(g->algo, "sha256") && g->len != 32) ||
		    (!strcmp(g->algo, "h1") && g->len != 32))
			__builtin_trap();
		if (dep_digests_find(d, g->key) != g)
			__builtin_trap();
	}
}

static void target(const char *t, size_t tl)
{
	struct buf key = BUF_INIT, why = BUF_INIT, out = BUF_INIT;
	unsigned char md[DEP_PYPI_B2_LEN];
	struct dep_digest dg = {0};
	int is_tarball;

	buf_reset(&key);
	if (dep_key_from_url(HOST "/a/b/doc", t, &key, &why) == 0)
		check_key(key.buf, key.len);
	buf_reset(&key);
	(void)dep_go_unescape(t, tl, 0, &out, &why);
	buf_reset(&out);
	(void)dep_go_unescape(t, tl, 1, &out, &why);
	buf_reset(&out);
	/* the path's rules read only a target dep_key() took, as the proxy calls them */
	if (dep_key("Registry.Example.ORG", 443, t, tl, &key, &why) < 0) {
		if (!why.len)
			__builtin_trap();
		goto out;
	}
	check_key(key.buf, key.len);
	if (strncmp(key.buf, HOST "/", strlen(HOST) + 1))
		__builtin_trap();
	is_tarball = dep_npm_tarball(t, tl);
	if (dep_npm_doc_path(t, tl, &out) == 0 && !is_tarball)
		__builtin_trap();
	(void)dep_pypi_dist(t, tl);
	(void)dep_pypi_file(t, tl, md, &why);
	buf_reset(&out);
	(void)dep_crate_download(t, tl, &out, &why);
	if (dep_deb_path(t, tl, &dg) == DEP_DEB_BY_HASH && (dg.len == 0 || dg.len > sizeof(dg.md)))
		__builtin_trap();
	buf_reset(&out);
	(void)dep_go_lookup_path(t, tl, 0, &out);
	(void)dep_go_is_lookup(t, tl);
out:
	buf_release(&key);
	buf_release(&why);
	buf_release(&out);
}

static int same(const struct dep_digests *a, const struct dep_digests *b)
{
	size_t live = 0;

	for (size_t i = 0; i < a->nr; i++) {
		const struct dep_digest *g = &a->v[i], *h;

		if (!g->key || !g->len)
			continue;
		live++;
		h = dep_digests_find(b, g->key);
		if (!h || h->len != g->len || strcmp(h->algo, g->algo) ||
		    memcmp(h->md, g->md, g->len))
			return 0;
	}
	for (size_t i = 0; i < b->nr; i++)
		if (b->v[i].key && b->v[i].len)
			live--;
	return live == 0;
}

static void debian(const char *p, size_t n, unsigned cut)
{
	struct dep_digests whole = DEP_DIGESTS_INIT, pieces = DEP_DIGESTS_INIT;
	struct buf why = BUF_INIT;
	struct dep_deb_reader *r;
	int a, b = 0;

	a = dep_deb_index(&whole, HOST "/debian/dists/stable/main/binary-amd64/Packages", p, n,
	                  &why);
	r = dep_deb_reader_new(HOST "/debian/dists/stable/main/binary-amd64/Packages", &why);
	if (!r)
		__builtin_trap();
	for (size_t off = 0; off < n && b == 0;) {
		size_t piece = (off * 7 + cut) % 29 + 1;

		if (piece > n - off)
			piece = n - off;
		b = dep_deb_reader_feed(r, p + off, piece, &why);
		off += piece;
	}
	if (b == 0)
		b = dep_deb_reader_end(r, &pieces, &why);
	dep_deb_reader_free(r);
	if (a != b || !same(&whole, &pieces))
		__builtin_trap();
	check_digests(&whole);
	dep_digests_clear(&whole);
	dep_digests_clear(&pieces);
	buf_release(&why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct go_vkey vkey;
	static int have_vkey = -1;
	const char *p = (const char *)data;
	struct dep_digests d = DEP_DIGESTS_INIT;
	struct buf t = BUF_INIT, why = BUF_INIT;
	unsigned cut;

	if (have_vkey < 0)
		have_vkey = go_vkey_parse(GO_SUMDB_KEY, &vkey, &why) == 0;
	if (size < 1 || size > (1u << 20))
		return 0;
	cut = data[0];
	p++;
	size--;

	buf_add(&t, p, strnlen(p, size));
	target(t.buf, t.len);

	(void)dep_npm_document(&d, HOST "/pkg", p, size, &why);
	(void)dep_pypi_index(&d, HOST "/simple/pkg/", p, size, &why);
	(void)dep_crates_index(&d, HOST "/index/pk/g/pkg", p, size, &why);
	if (have_vkey)
		(void)dep_go_lookup(&d, HOST "/lookup/example.com/m@v1.0.0", p, size, &vkey, 1,
		                    &why);
	check_digests(&d);
	dep_digests_clear(&d);
	debian(p, size, cut);

	buf_release(&t);
	buf_release(&why);
	return 0;
}
