/*
 * The dependency cache's Debian rules: see dep_debian.h and docs/cache.md.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "net/dep_cache.h"
#include "proxy/dep_debian.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

/* 1 when the n bytes at s end with the string suffix. */
static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

enum dep_deb_path dep_deb_path(const char *target, size_t tl, struct dep_digest *d)
{
	static const struct {
		const char *seg, *algo;
		size_t len;
	} by_hash[] = {{"/by-hash/SHA256/", "sha256", 32}, {"/by-hash/SHA512/", "sha512", 64}};
	const char *dists = memmem(target, tl, "/dists/", 7);

	for (size_t i = 0; i < ARRAY_SIZE(by_hash); i++) {
		size_t sl = strlen(by_hash[i].seg), hl = 2 * by_hash[i].len;

		if (tl < sl + hl || memcmp(target + tl - hl - sl, by_hash[i].seg, sl))
			continue;
		if (hex_decode(d->md, target + tl - hl, by_hash[i].len) < 0)
			return DEP_DEB_OTHER;
		d->key = NULL;
		d->algo = by_hash[i].algo;
		d->len = by_hash[i].len;
		return DEP_DEB_BY_HASH;
	}
	if (dists && (ends_with(target, tl, "/Packages") || ends_with(target, tl, "/Packages.gz")))
		return DEP_DEB_INDEX;
	if (ends_with(target, tl, ".deb") || ends_with(target, tl, ".udeb"))
		return DEP_DEB_PACKAGE;
	return DEP_DEB_OTHER;
}

/* Where key's path has its first "/dists/", or NULL. */
static const char *dists_of(const char *key)
{
	const char *path = strncmp(key, "https://", 8) ? NULL : strchr(key + 8, '/');

	return path ? strstr(path, "/dists/") : NULL;
}

int dep_deb_in_dists(const char *key)
{
	return dists_of(key) != NULL;
}

/* The fields of a paragraph the reader wants. */
enum field { F_OTHER, F_FILENAME, F_SHA256 };

/* How the index's bytes are read: not known until its first bytes came. */
enum form { FORM_SNIFF, FORM_TEXT, FORM_GZIP };

/* The magic numbers' longest: xz's six bytes. */
#define SNIFF_LEN 6

/* An index read line by line as it comes, the lines bounded, into a table of its own. */
struct dep_deb_reader {
	struct dep_digests tmp;
	char *root; /* base up to and with the '/' before "dists/" */
	size_t root_len;
	enum form form;
	unsigned char head[SNIFF_LEN]; /* the first bytes, while the form is sniffed */
	size_t nhead;
	z_stream z;
	int z_end;         /* the gzip stream ended */
	char *out;         /* inflated bytes, INFLATE_CHUNK */
	uint64_t in, text; /* bytes fed, bytes of text read (inflated, for gzip) */
	int refused;       /* -EINVAL once refused: nothing more is read */
	char line[DEP_DEB_LINE_MAX];
	size_t ll;
	int overlong; /* the line went past DEP_DEB_LINE_MAX: only its start is kept */
	enum field last;
	/* The paragraph so far. */
	char file[DEP_DEB_FILENAME_MAX + 1];
	unsigned char md[32];
	int nfile, nsum, bad;
	struct buf key;
};

#define INFLATE_CHUNK (64u << 10)

/* A Filename the cache takes (see dep_debian.h). */
static int filename_ok(const char *f, size_t n)
{
	if (!n || n > DEP_DEB_FILENAME_MAX || f[0] == '/' ||
	    !(ends_with(f, n, ".deb") || ends_with(f, n, ".udeb")))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = f[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("._+~/-", ch)) ||
		    !ch)
			return 0;
		/* A segment starts here: neither empty, "." nor "..". */
		if (i == 0 || f[i - 1] == '/') {
			size_t e = i;

			while (e < n && f[e] != '/')
				e++;
			if (e == i || (e - i == 1 && f[i] == '.') ||
			    (e - i == 2 && f[i] == '.' && f[i + 1] == '.'))
				return 0;
		}
	}
	return 1;
}

static void end_paragraph(struct dep_deb_reader *r)
{
	if (r->nfile == 1 && r->nsum == 1 && !r->bad) {
		buf_reset(&r->key);
		buf_add(&r->key, r->root, r->root_len);
		buf_addstr(&r->key, r->file);
		if (dep_cache_key_ok(r->key.buf))
			dep_digests_learn(&r->tmp, r->key.buf, "sha256", r->md, 32);
	}
	r->nfile = r->nsum = r->bad = 0;
	r->last = F_OTHER;
}

static void end_line(struct dep_deb_reader *r)
{
	const char *l = r->line, *colon, *v, *e;
	size_t n = r->ll;
	enum field f = F_OTHER;

	r->ll = 0;
	if (!n && !r->overlong) {
		end_paragraph(r);
		return;
	}
	if (l[0] == ' ' || l[0] == '\t') {
		/* A continuation: of a field the reader takes, it is not one value any more. */
		if (r->last != F_OTHER)
			r->bad = 1;
		r->overlong = 0;
		return;
	}
	colon = memchr(l, ':', n);
	if (colon && colon - l == 8 && !strncasecmp(l, "Filename", 8))
		f = F_FILENAME;
	else if (colon && colon - l == 6 && !strncasecmp(l, "SHA256", 6))
		f = F_SHA256;
	r->last = f;
	if (f == F_OTHER) {
		r->overlong = 0;
		return;
	}
	if (r->overlong)
		r->bad = 1;
	r->overlong = 0;
	for (v = colon + 1; v < l + n && (*v == ' ' || *v == '\t'); v++)
		;
	for (e = l + n; e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	if (f == F_FILENAME) {
		if (r->nfile++ || !filename_ok(v, (size_t)(e - v))) {
			r->bad = 1;
			return;
		}
		memcpy(r->file, v, (size_t)(e - v));
		r->file[e - v] = '\0';
	} else if (r->nsum++ || e - v != 64 || hex_decode(r->md, v, 32) < 0) {
		r->bad = 1;
	}
}

static void feed(struct dep_deb_reader *r, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n, room = sizeof(r->line) - r->ll;

		if (k > room)
			r->overlong = 1;
		memcpy(r->line + r->ll, p, k < room ? k : room);
		r->ll += k < room ? k : room;
		if (!nl)
			return;
		end_line(r);
		p += k + 1;
		n -= k + 1;
	}
}

/* Refuse the index for good: nothing of it is learnt. */
static int refuse(struct dep_deb_reader *r, struct buf *why, const char *what)
{
	r->refused = buf_refuse(why, -EINVAL, what);
	return r->refused;
}

/* n more bytes of text, under the cap. */
static int add_text(struct dep_deb_reader *r, const char *p, size_t n, struct buf *why)
{
	r->text += n;
	if (r->text > DEP_DEB_INDEX_MAX)
		return refuse(r, why,
		              r->form == FORM_GZIP ? "an index over the cap once inflated"
		                                   : "an index over the cap");
	feed(r, p, n);
	return 0;
}

/* n more bytes of a gzip index, inflated as they come. */
static int add_gzip(struct dep_deb_reader *r, const char *p, size_t n, struct buf *why)
{
	while (n) {
		unsigned take = n > 0xffffffffu ? 0xffffffffu : (unsigned)n;
		int zr;

		if (r->z_end)
			return refuse(r, why, "a gzip index with bytes after its end");
		r->z.next_in = (unsigned char *)p;
		r->z.avail_in = take;
		do {
			r->z.next_out = (unsigned char *)r->out;
			r->z.avail_out = INFLATE_CHUNK;
			zr = inflate(&r->z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
				return refuse(r, why, "a gzip index that is not gzip");
			if (add_text(r, r->out, INFLATE_CHUNK - r->z.avail_out, why) < 0)
				return r->refused;
			if (zr == Z_STREAM_END) {
				r->z_end = 1;
				if (r->z.avail_in)
					return refuse(r, why,
					              "a gzip index with bytes after its end");
			}
		} while (zr == Z_OK && (r->z.avail_in || !r->z.avail_out));
		if (r->z.avail_in)
			return refuse(r, why, "a gzip index that is not gzip");
		p += take;
		n -= take;
	}
	return 0;
}

/* The form the first bytes say; the bytes held so far read in it. */
static int sniffed(struct dep_deb_reader *r, struct buf *why)
{
	const unsigned char *u = r->head;
	size_t len = r->nhead;

	if ((len >= 6 && !memcmp(u,
	                         "\xfd"
	                         "7zXZ\0",
	                         6)) ||
	    (len >= 3 && !memcmp(u, "BZh", 3)) || (len >= 4 && !memcmp(u, "\x28\xb5\x2f\xfd", 4)))
		return refuse(r, why, "an xz, bzip2 or zstd index, which aibox cannot read");
	if (len >= 2 && u[0] == 0x1f && u[1] == 0x8b) {
		r->form = FORM_GZIP;
		if (inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK)
			die_oom();
		r->out = xmalloc(INFLATE_CHUNK);
		return add_gzip(r, (const char *)u, len, why);
	}
	r->form = FORM_TEXT;
	return add_text(r, (const char *)u, len, why);
}

struct dep_deb_reader *dep_deb_reader_new(const char *base, struct buf *why)
{
	const char *dists = dists_of(base);
	struct dep_deb_reader *r;

	if (!dists) {
		buf_refuse(why, -EINVAL, "an index outside a dists/ folder");
		return NULL;
	}
	r = xcalloc(1, sizeof(*r));
	buf_init(&r->key, 0);
	r->root_len = (size_t)(dists - base) + 1;
	r->root = xstrndup(base, r->root_len);
	return r;
}

int dep_deb_reader_feed(struct dep_deb_reader *r, const char *p, size_t n, struct buf *why)
{
	if (r->refused)
		return r->refused;
	r->in += n;
	if (r->form == FORM_SNIFF) {
		size_t k = SNIFF_LEN - r->nhead < n ? SNIFF_LEN - r->nhead : n;

		memcpy(r->head + r->nhead, p, k);
		r->nhead += k;
		p += k;
		n -= k;
		if (r->nhead < SNIFF_LEN)
			return 0;
		if (sniffed(r, why) < 0)
			return r->refused;
	}
	return r->form == FORM_GZIP ? add_gzip(r, p, n, why) : add_text(r, p, n, why);
}

size_t dep_deb_reader_size(const struct dep_deb_reader *r)
{
	return sizeof(*r) + r->root_len + (r->out ? INFLATE_CHUNK : 0) + r->tmp.bytes +
	       r->tmp.alloc * sizeof(*r->tmp.v) + r->tmp.nslot * sizeof(*r->tmp.slot) +
	       (r->form == FORM_GZIP ? (size_t)(1u << MAX_WBITS) + (7u << 10) : 0);
}

int dep_deb_reader_end(struct dep_deb_reader *r, struct dep_digests *d, struct buf *why)
{
	int ret = 0;

	if (r->refused)
		return r->refused;
	if (r->form == FORM_SNIFF && sniffed(r, why) < 0)
		return r->refused;
	if (r->form == FORM_GZIP && !r->z_end)
		return refuse(r, why, "a gzip index cut short");
	if (r->ll || r->overlong)
		end_line(r);
	end_paragraph(r);
	/*
	 * Whole: what it taught goes into d, and a Filename it forgot is
	 * forgotten there too (learning len 0 empties the key for good).  Into
	 * an empty d (a task's first index) that is the table itself, taken over.
	 */
	if (!d->nr) {
		struct dep_digests empty = *d;

		*d = r->tmp;
		r->tmp = empty;
		for (size_t i = 0; i < d->nr; i++)
			ret += d->v[i].len != 0;
	}
	for (size_t i = 0; i < r->tmp.nr; i++) {
		const struct dep_digest *g = &r->tmp.v[i];
		int learnt = dep_digests_learn(d, g->key, "sha256", g->md, g->len);

		ret += g->len ? learnt : 0;
	}
	/* Read once: a second end learns nothing more. */
	r->refused = -EINVAL;
	return ret;
}

void dep_deb_reader_free(struct dep_deb_reader *r)
{
	if (!r)
		return;
	if (r->form == FORM_GZIP)
		inflateEnd(&r->z);
	free(r->out);
	free(r->root);
	dep_digests_clear(&r->tmp);
	buf_release(&r->key);
	free(r);
}

int dep_deb_index(struct dep_digests *d, const char *base, const char *bytes, size_t len,
                  struct buf *why)
{
	struct dep_deb_reader *r = dep_deb_reader_new(base, why);
	int ret;

	if (!r)
		return -EINVAL;
	ret = dep_deb_reader_feed(r, bytes, len, why);
	if (!ret)
		ret = dep_deb_reader_end(r, d, why);
	dep_deb_reader_free(r);
	return ret;
}
