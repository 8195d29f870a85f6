/*
 * The dependency cache's rules (docs/cache.md): which request may be answered
 * from the cache, under which key, and the digests an artifact must match,
 * learnt from the metadata the proxy itself fetched from upstream.  Pure
 * functions over bytes; the store is common/net/dep_cache.h.
 *
 * Everything here reads what the VM sent or what an upstream answered:
 * hostile input, parsed with caps, refused rather than guessed.
 */
#ifndef AIBOX_DEP_RULES_H
#define AIBOX_DEP_RULES_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct http_head;

/* The most digests one task's table holds; more are not learnt. */
#define DEP_DIGESTS_MAX 200000
/* The most bytes of keys one task's table holds; more are not learnt. */
#define DEP_DIGESTS_BYTES (64u << 20)
/* The largest package document or index page read for digests. */
#define DEP_META_MAX (64u << 20)

/*
 * 1 when the request h may be answered from the cache: GET, no Range or
 * If-Range, no conditional header (If-Match, If-None-Match,
 * If-Modified-Since, If-Unmodified-Since), one Accept-Encoding at most,
 * taking identity (not "identity;q=0" or "*;q=0"),
 * no body.  0 with the reason in why otherwise (the request bypasses the
 * cache).
 */
int dep_request_cacheable(const struct http_head *h, struct buf *why);

/*
 * The cache key of a request for target (origin-form, tl bytes) on host:port:
 * "https://HOST[:PORT]/PATH", the host lowercased, :443 left out.  0, or
 * -EINVAL with the reason in why when the target is not one the cache takes
 * (a query or fragment, a '%', "//", a "." or ".." segment, a byte outside
 * printable ASCII, longer than the store's key cap).
 */
int dep_key(const char *host, int port, const char *target, size_t tl, struct buf *key,
            struct buf *why);

/*
 * The same key from an absolute https URL found in metadata (an npm document's
 * dist.tarball, a link of a PyPI index), resolved against base (the key of the
 * page it was found in) when it is relative.  0 or -EINVAL with why.
 */
int dep_key_from_url(const char *base, const char *url, struct buf *key, struct buf *why);

/*
 * target (tl bytes) into out with each percent escape of the byte c ("%21"
 * for '!', "%7e" or "%7E" for '~') as c itself, for dep_key() and the rest:
 * RFC 3986 makes the two spellings one, and some clients always escape c (the
 * go command its '!', apt a version's '~').  Any other escape is left as it
 * is, for dep_key() to refuse.
 */
void dep_unescape_one(const char *target, size_t tl, char c, struct buf *out);

/* One digest an artifact must match: algo is OpenSSL's name. */
struct dep_digest {
	char *key;
	const char *algo; /* "sha512", "sha256", or "h1" (dep_go.h) */
	unsigned char md[64];
	size_t len;
};

/*
 * The digests learnt in one task: what its proxy fetched itself.  A hash
 * table (common/proxy/dep_digests.c): a lookup or a learn costs the same
 * with 10 entries or 200,000.
 */
struct dep_digests {
	struct dep_digest *v;
	size_t nr, alloc;
	size_t *slot;            /* open addressing: 1 + an index into v, 0 for none */
	size_t nslot;            /* a power of 2, at least twice nr */
	size_t bytes;            /* the keys' bytes, at most DEP_DIGESTS_BYTES */
	unsigned long long seed; /* the hash's, random per table */
};
#define DEP_DIGESTS_INIT                                                                           \
	{                                                                                          \
		0                                                                                  \
	}

/*
 * The hash of a table's string key, seeded: keys that come from upstream or
 * the VM cannot be aimed at one slot when the seed is dep_key_seed()'s, random
 * per table (salt, the table's address, only when the kernel gives no random).
 */
uint64_t dep_key_hash(unsigned long long seed, const char *key);
unsigned long long dep_key_seed(const void *salt);

void dep_digests_clear(struct dep_digests *d);

/* The digest learnt for key, or NULL (the artifact is then not cached). */
const struct dep_digest *dep_digests_find(const struct dep_digests *d, const char *key);

/*
 * Learn key's digest (algo a static string such as "sha512", "sha256" or "h1";
 * len bytes of md).  A key
 * learnt before with another algo or other bytes is forgotten for good: its
 * entry stays, empty, so no lookup finds it and no later learn brings it
 * back.  The same digest again changes nothing.  Past DEP_DIGESTS_MAX
 * entries or DEP_DIGESTS_BYTES of keys nothing new is learnt (those
 * artifacts are then not cached).  1 when learnt, else 0.
 */
int dep_digests_learn(struct dep_digests *d, const char *key, const char *algo,
                      const unsigned char *md, size_t len);

/*
 * The package document of an npm tarball's path (tl bytes of an
 * origin-form target that dep_key() took), for the proxy's own fetch
 * (docs/cache.md, "Installs from a lock file"): "/NAME/-/NAME-VERSION.tgz"
 * gives "/NAME", "/@SCOPE/NAME/-/NAME-VERSION.tgz" gives "/@SCOPE%2fNAME".
 * NAME and SCOPE are 1 to 214 of [A-Za-z0-9._~-] not starting with '.' or
 * '_', VERSION 1 to 128 of [A-Za-z0-9.+-] starting with a digit.  0 with the
 * path in doc, or -EINVAL when the target is not exactly one of the two.
 */
int dep_npm_doc_path(const char *target, size_t tl, struct buf *doc);

/*
 * Whether a path (tl bytes of an origin-form target that dep_key() took)
 * has an artifact's shape, the only paths a digest learnt from metadata is
 * looked up for (docs/cache.md, step 2): metadata naming a mutable URL (a
 * package document, an index page) with the digest of its bytes today must
 * not get that URL stored and served to a later task.
 *
 * npm: a last segment ending ".tgz" after a "/-/" segment (the registry's
 * "/NAME/-/NAME-VERSION.tgz", a mirror's ".../NAME/-/NAME-VERSION.tgz"); a
 * package document ("/NAME", "/@SCOPE/NAME") never has one.
 * PyPI: a last segment that is a distribution's file name: one ending
 * .whl, .tar.gz, .zip, .tar.bz2, .tar.xz, .tgz, .tbz, .tar or .egg
 * (an index page's path ends '/', a project's page ends in its name).
 */
int dep_npm_tarball(const char *target, size_t tl);
int dep_pypi_dist(const char *target, size_t tl);

/*
 * Learn the tarballs' digests from an npm package document (JSON) fetched
 * from base: each versions.*.dist with a tarball URL and an integrity of
 * sha512 (the strongest named, when several are).  A tarball learnt before
 * with another digest is forgotten (neither is trusted).  Returns the count
 * learnt, or -EINVAL with why when the document is not JSON.
 */
int dep_npm_document(struct dep_digests *d, const char *base, const char *doc, size_t len,
                     struct buf *why);

/*
 * Learn the files' digests from a PyPI simple index page (HTML) fetched from
 * base: each href whose fragment is #sha256=HEX (64 hex digits).  The count
 * learnt, or -EINVAL with why.
 */
int dep_pypi_index(struct dep_digests *d, const char *base, const char *html, size_t len,
                   struct buf *why);

/*
 * crates (docs/cache.md, "crates"): a sparse index file and the crate files
 * it names live on different hosts (index.crates.io, static.crates.io), and
 * an index line names no URL.  So a crate's digest is learnt, and looked up,
 * under its id "crate:NAME@VERSION" (NAME lowercased), on any host whose rule
 * says cache: crates.
 */

/*
 * The id of a crate download path (tl bytes of an origin-form target that
 * dep_key() took): ".../NAME/VERSION/download" (cargo's form when the
 * registry's dl has no markers) or ".../NAME/NAME-VERSION.crate".  NAME is
 * 1 to 64 of [A-Za-z0-9_-], VERSION 1 to 128 of [A-Za-z0-9.+-] starting with
 * a digit (so the index file of a crate named "download" is none).  0 with the
 * id, or -EINVAL with why when the path is not a download.
 */
int dep_crate_download(const char *target, size_t tl, struct buf *id, struct buf *why);

/*
 * Learn the crate files' sha256 from a sparse index file (JSON lines, one a
 * version: name, vers, cksum) fetched from base (its key; the file's name is
 * the last segment).  A line whose name is not the file's (in any case), or
 * with no 64-hex cksum, is skipped; a version two lines (or two index hosts)
 * give different digests for is forgotten.  The count learnt, or -EINVAL
 * with why.
 */
int dep_crates_index(struct dep_digests *d, const char *base, const char *text, size_t len,
                     struct buf *why);

#endif
