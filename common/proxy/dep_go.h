/*
 * The dependency cache's rules for Go modules (docs/cache.md, "go"): a
 * checksum database's /lookup answer teaches the h1: of a module version's
 * zip and .mod, when its note verifies; a GOPROXY download names the module
 * version it is.  Pure functions over bytes, like dep_rules.h, whose digest
 * table they fill: a module's digests are learnt, and looked up, under the
 * ids "go:MOD@VER" (the zip) and "go:MOD@VER/go.mod", MOD and VER decoded
 * (Go's "!x" for an upper case letter), algo "h1".
 */
#ifndef AIBOX_DEP_GO_H
#define AIBOX_DEP_GO_H

#include <stddef.h>

struct buf;
struct dep_digest;
struct dep_digests;
struct go_vkey;

/* The longest module path and version taken, decoded. */
#define DEP_GO_PATH_MAX 512
#define DEP_GO_VERS_MAX 128
#define DEP_GO_SEGS_MAX 32

/*
 * Decode Go's case-encoding of a module path (vers 0: [a-z0-9._~/-] and
 * "!x" for X) or a version (vers 1: [a-z0-9.+-] and "!x") of n bytes at s
 * into out.  0, or -EINVAL with why (an upper case letter, a '!' not before
 * a lower case letter, another byte, empty or too long).
 */
int dep_go_unescape(const char *s, size_t n, int vers, struct buf *out, struct buf *why);

/*
 * A GOPROXY download (tl bytes of an origin-form target that dep_key()
 * took): ".../ESCMOD/@v/ESCVER.zip" or ".mod", under any prefix.  Returns 0
 * when the target is not one; else 1, with *dig the digest this task learnt
 * for it (NULL when none) and *zip 1 for a zip.  The module path is the
 * shortest of the target's tails before "/@v/" whose digest was learnt, of
 * at most DEP_GO_SEGS_MAX segments (a bound on the lookups one request costs).
 */
int dep_go_download(const struct dep_digests *d, const char *target, size_t tl,
                    const struct dep_digest **dig, int *zip);

/*
 * The checksum database lookup of a GOPROXY download with no prefix (tl
 * bytes of a target that dep_key() took, '!' unescaped):
 * "/ESCMOD/@v/ESCVER.zip" or ".mod" gives "/lookup/ESCMOD@ESCVER" when own_db
 * (the host serves its own database), else
 * "/sumdb/sum.golang.org/lookup/ESCMOD@ESCVER" (a GOPROXY that proxies
 * sum.golang.org, as proxy.golang.org does).  ESCMOD and ESCVER must decode
 * (dep_go_unescape()).  0 with the path in out, or -EINVAL.
 */
int dep_go_lookup_path(const char *target, size_t tl, int own_db, struct buf *out);

/* 1 when target (tl bytes) is a checksum database lookup ".../lookup/ESCMOD@ESCVER", else 0. */
int dep_go_is_lookup(const char *target, size_t tl);

/*
 * Learn from a checksum database's answer to ".../lookup/ESCMOD@ESCVER" (the
 * path of base, its key): "ID\n", the record's lines, a blank line, and the
 * database's signed tree note.  The note must verify with one of the nr keys
 * (go_note_verify()); then each line "MOD VER h1:B64" or "MOD VER/go.mod
 * h1:B64" whose MOD and VER are the lookup's own teaches that digest.  The
 * count learnt, or -EINVAL with why (nothing is learnt).
 */
int dep_go_lookup(struct dep_digests *d, const char *base, const char *body, size_t len,
                  const struct go_vkey *keys, size_t nr, struct buf *why);

#endif
