/*
 * Reading git bundles without git: the header, and optionally the pack.
 *
 * A bundle is a header of text lines, a blank line, then a pack:
 *
 *	# v2 git bundle                      or "# v3 git bundle"
 *	@object-format=sha1                  v3 only: capabilities, "@key[=value]"
 *	-<oid> [comment]                     prerequisites: commits the receiver must have
 *	<oid> <refname>                      refs the bundle carries
 *	                                     a blank line
 *	PACK...                              the pack
 *
 * Everything here is untrusted input.  The parser works on a buffer with hard
 * caps (header size, line length, counts), refuses rather than truncates,
 * never trusts a size it reads, and explains every refusal in one short
 * lowercase sentence (h->err, res->err) fit to follow "aibox-bundle-check: FILE: ".
 *
 * Return convention: 0 accepted, BUNDLE_REFUSED (> 0) with a reason, or a
 * negative errno for an I/O error (the input could not be read at all).
 */
#ifndef AIBOX_BUNDLE_READ_H
#define AIBOX_BUNDLE_READ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/oid.h"

#define BUNDLE_REFUSED 1

/* Hard caps on what a header may hold.  A header beyond them is refused. */
#define BUNDLE_HEADER_MAX  (1024 * 1024) /* bytes, up to and including the blank line */
#define BUNDLE_LINE_MAX    4096          /* bytes in one line, without its '\n' */
#define BUNDLE_REFS_MAX    10000
#define BUNDLE_PREREQS_MAX 10000
#define BUNDLE_CAPS_MAX    16

enum bundle_oid_format { BUNDLE_SHA1 = 0, BUNDLE_SHA256 = 1 };

struct bundle_ref {
	char oid[OID_HEX_MAX + 1]; /* lowercase hex */
	char *name;                /* full refname ("refs/heads/x" or "HEAD") */
};

struct bundle_prereq {
	char oid[OID_HEX_MAX + 1];
	char *comment; /* "" when none */
};

struct bundle_header {
	int version; /* 2 or 3; 0 until the signature was read */
	enum bundle_oid_format oid_format;
	struct bundle_ref *refs;
	size_t nr_refs, alloc_refs;
	struct bundle_prereq *prereqs;
	size_t nr_prereqs, alloc_prereqs;
	size_t pack_offset; /* where the pack starts, once the header is accepted */
	struct buf err;     /* why it was refused */
};

#define BUNDLE_HEADER_INIT                                                                         \
	{                                                                                          \
		.err = BUF_INIT                                                                    \
	}

/* Free what h holds, err too, and return it to BUNDLE_HEADER_INIT. */
void bundle_header_clear(struct bundle_header *h);

/* "sha1" or "sha256". */
const char *bundle_oid_format_name(enum bundle_oid_format f);

/*
 * Parse the header at the start of data[0..len).  len may extend past the
 * header (into the pack); only what is needed is looked at.  Returns 0 with
 * refs, prerequisites and pack_offset filled in, or BUNDLE_REFUSED with
 * the reason in h->err.  Never reads past data + len.
 */
int bundle_header_parse(struct bundle_header *h, const char *data, size_t len);

/*
 * Read and parse the header from fd (at its current offset), reading no more
 * than BUNDLE_HEADER_MAX bytes (plus one block), and never the pack beyond
 * that: the time this takes does not depend on the pack's size.  Returns as
 * bundle_header_parse(), or -errno if fd cannot be read.  On return pack_offset
 * is relative to where fd was.
 */
int bundle_header_read_fd(struct bundle_header *h, int fd);

/*
 * Check an accepted header against what a caller expects (what
 * aibox-bundle-check's --ref and --base do, and what a task does with
 * changes.bundle): the bundle's refs must be exactly the full refnames
 * refs[0..nr_refs) (nr_refs 0: any refs), and each prerequisite one of
 * bases[0..nr_bases) (hex, either case; nr_bases 0: no prerequisite at all).
 * Returns 0 or BUNDLE_REFUSED with the reason in h->err.
 */
int bundle_header_expect(struct bundle_header *h, const char *const *refs, size_t nr_refs,
                         const char *const *bases, size_t nr_bases);

/*
 * The full refname for a name given by a user: "HEAD" and names under
 * "refs/" as they are, anything else as a branch, "refs/heads/<name>".
 * Appended to out; check it with bundle_refname_ok().
 */
struct buf;
void bundle_full_refname(struct buf *out, const char *name);

/*
 * Whether the len bytes at name are "HEAD" or a ref name under "refs/" that
 * refname_ok() (common/git/gitproto.h, the one ref name rule) accepts.  Returns
 * 1 or 0.
 */
int bundle_refname_ok(const char *name, size_t len);

/*
 * Parse an object id given in hex (either case) of exactly 40 (sha1) or 64
 * (sha256) digits into lowercase hex in out[OID_HEX_MAX + 1].  Returns the
 * number of digits, or 0 if s is not one.
 */
size_t bundle_oid_parse(const char *s, size_t len, char *out);

/* Result of a pack verification. */
struct bundle_pack_result {
	uint32_t version;  /* pack version (2 or 3), 0 if not read */
	uint32_t objects;  /* the object count the pack claims */
	uint32_t indexed;  /* objects read and resolved */
	char checksum[41]; /* the pack's trailing SHA-1, hex, once verified */
	struct buf err;    /* why it was refused, or why it could not be read */
};

#define BUNDLE_PACK_RESULT_INIT                                                                    \
	{                                                                                          \
		.err = BUF_INIT                                                                    \
	}

/* Free what res holds (its err). */
void bundle_pack_result_clear(struct bundle_pack_result *res);

/*
 * What a pack may make the check inflate (docs/bundles.md, "Limits"): the
 * walk refuses a pack beyond either before any delta is made.  The defaults
 * keep the check of any pack within 64 MiB of memory (docs/performance.md).
 */
#define BUNDLE_MAX_OBJECT_DEFAULT   (16ULL << 20)  /* one object inflated */
#define BUNDLE_MAX_INFLATED_DEFAULT (256ULL << 20) /* every object, and every delta's result */

struct bundle_pack_opts {
	const char *repo_dir;    /* a thin pack's bases come from here; NULL: none */
	uint64_t max_bytes;      /* the pack itself, as stored */
	uint64_t max_object;     /* one object inflated, and a delta's base and result */
	uint64_t max_inflated;   /* the sum of every object inflated and every delta's result */
	const char *const *tips; /* ids (hex) the pack must hold, e.g. its refs' tips */
	size_t nr_tips;
	/* NULL, or the full refname of each tip: a branch's must be a commit */
	const char *const *tip_refs;
};

#define BUNDLE_PACK_OPTS_INIT                                                                      \
	{                                                                                          \
		.max_bytes = UINT64_MAX, .max_object = BUNDLE_MAX_OBJECT_DEFAULT,                  \
		.max_inflated = BUNDLE_MAX_INFLATED_DEFAULT                                        \
	}

/*
 * Verify the pack read from fd until EOF (fd positioned at the pack's first
 * byte): signature "PACK", version 2 or 3, the object count against what
 * follows, that every object inflates to its stated size within
 * o->max_object and all of them (with each delta's result size, from the
 * delta's own header) within o->max_inflated, every delta resolves (bases
 * from the pack, or from the repository at o->repo_dir for a thin pack), the
 * trailing SHA-1 checksum, that each of o->tips is an object of the pack,
 * and, with o->tip_refs, that each tip whose ref is a branch (HEAD, or under
 * refs/heads/) is a commit: git fetches nothing else into a branch, not even
 * a tag of a commit ("trying to write non-commit object").
 * At most o->max_bytes are read (more is refused).  A regular file is read in
 * windows of 1 MiB, never mapped or read whole: the memory this takes does
 * not grow with the pack, only with its largest object (the delta
 * resolution holds a delta's base, data and result, and at most 16 MiB of
 * other bases) and the object count (about 60 bytes an object).
 *
 * Deltas are resolved here, base first, as git index-pack does; each object
 * is hashed and checked as git fsck --strict checks it (common/git/bundle_fsck.h)
 * as it is made.  Nothing is written.  res starts as BUNDLE_PACK_RESULT_INIT
 * (or as a previous call left it) and is emptied first.  Returns 0 verified,
 * BUNDLE_REFUSED with the reason in res->err (a limit is named in it), or
 * -errno when fd could not be read (-EIO: it changed while it was read) or
 * repo_dir could not be opened (-ENOENT).
 */
int bundle_pack_verify_fd(int fd, const struct bundle_pack_opts *o, struct bundle_pack_result *res);

/* The same for a pack in memory (the fuzzer's entry point); o->max_bytes is not used. */
int bundle_pack_verify_buf(const void *data, size_t len, const struct bundle_pack_opts *o,
                           struct bundle_pack_result *res);

#endif
