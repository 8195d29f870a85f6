/*
 * The dependency cache's Debian rules (docs/cache.md, "debian"): which paths
 * of an apt repository are indexes, by-hash files or packages, and the
 * packages' SHA256 learnt from a Packages index the proxy itself fetched.
 * Pure functions over bytes, like common/proxy/dep_rules.h; everything read
 * here came from upstream or the VM: hostile, parsed with caps.
 */
#ifndef AIBOX_DEP_DEBIAN_H
#define AIBOX_DEP_DEBIAN_H

#include <stddef.h>

struct buf;
struct dep_digest;
struct dep_deb_reader;
struct dep_digests;

/* The most bytes of one index once inflated; more and nothing of it is learnt. */
#define DEP_DEB_INDEX_MAX (256u << 20)
/* The longest line of an index that is read (a longer Filename or SHA256 is refused). */
#define DEP_DEB_LINE_MAX 4096
/* The longest Filename taken. */
#define DEP_DEB_FILENAME_MAX 1024

/* What a path on a debian host is. */
enum dep_deb_path {
	DEP_DEB_OTHER,   /* Release, InRelease, Packages.xz, ...: forwarded, never read */
	DEP_DEB_PACKAGE, /* ".deb" or ".udeb": looked up by its URL */
	DEP_DEB_INDEX,   /* ".../dists/.../Packages" or "Packages.gz": read, never stored */
	DEP_DEB_BY_HASH, /* ".../by-hash/SHA256/HEX" (or SHA512): checked against HEX */
};

/*
 * What target (tl bytes of an origin-form path that dep_key() took) names.
 * For DEP_DEB_BY_HASH, *d gets the URL's digest (algo, md, len; key NULL).
 */
enum dep_deb_path dep_deb_path(const char *target, size_t tl, struct dep_digest *d);

/*
 * 1 when key (a store key's URL, "https://HOST/PATH") has a "/dists/"
 * segment: an index fetched from there names its packages relative to the
 * URL before it.  0 otherwise.
 */
int dep_deb_in_dists(const char *key);

/*
 * An index read as its bytes come (the proxy reads one while it forwards it,
 * so no index is held whole and no one step reads all of it), fetched from
 * base (its key, which dep_deb_in_dists() takes; copied).  NULL with why when
 * base has no "dists/" segment.
 */
struct dep_deb_reader *dep_deb_reader_new(const char *base, struct buf *why);

/*
 * n more bytes of the index: plain or gzip, sniffed by its first bytes, and
 * read as they come.  0, or -EINVAL with why once the index is refused (not
 * gzip nor text: xz, bzip2, zstd; bad gzip; bytes after the gzip stream's
 * end; over DEP_DEB_INDEX_MAX inflated): it then reads nothing more and
 * teaches nothing.
 */
int dep_deb_reader_feed(struct dep_deb_reader *r, const char *p, size_t n, struct buf *why);

/* The bytes r holds now (its table of what the index taught so far, its buffers). */
size_t dep_deb_reader_size(const struct dep_deb_reader *r);

/*
 * The index is whole: learn what it taught into d.  Each paragraph with one
 * Filename (relative, of [A-Za-z0-9._+~/-], no empty, "." or ".." segment,
 * ending ".deb" or ".udeb") and one SHA256 of 64 hex digits teaches
 * "ROOT/FILENAME", ROOT being base up to its "dists/"; other paragraphs are
 * skipped.  A Filename two paragraphs (or two indexes) give different
 * digests is forgotten.  Nothing is learnt from an index refused or cut short
 * (a gzip stream that did not end): -EINVAL with why.  Otherwise the count
 * learnt.  A reader ends once.
 */
int dep_deb_reader_end(struct dep_deb_reader *r, struct dep_digests *d, struct buf *why);

/* Free r (NULL is fine). */
void dep_deb_reader_free(struct dep_deb_reader *r);

/* dep_deb_reader_*() over an index's len bytes, all at once: the count learnt or -EINVAL. */
int dep_deb_index(struct dep_digests *d, const char *base, const char *bytes, size_t len,
                  struct buf *why);

#endif
