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
 * Learn the packages' SHA256 from a Packages index (len bytes, plain or
 * gzip: sniffed by its first bytes) fetched from base (its key, which
 * dep_deb_in_dists() takes).  Each paragraph with one Filename (relative,
 * of [A-Za-z0-9._+~/-], no empty, "." or ".." segment, ending ".deb" or
 * ".udeb") and one SHA256 of 64 hex digits teaches
 * "ROOT/FILENAME", ROOT being base up to its "dists/"; other paragraphs are
 * skipped.  A Filename two paragraphs (or two indexes) give different
 * digests is forgotten.  Nothing is learnt from an index that is cut short,
 * not gzip nor text (xz, bzip2, zstd), or over DEP_DEB_INDEX_MAX inflated:
 * -EINVAL with why.  Otherwise the count learnt.
 */
int dep_deb_index(struct dep_digests *d, const char *base, const char *bytes, size_t len,
                  struct buf *why);

#endif
