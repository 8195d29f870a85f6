/*
 * Go's checksums (docs/cache.md, "go"): a checksum database's verifier key
 * and signed note, and the h1: hash ("dirhash" Hash1) of a module's .mod file
 * and of its zip.  Pure functions over bytes, or over a file read with
 * pread(); everything they read came from an upstream or the VM: hostile,
 * parsed with caps, refused rather than guessed.
 */
#ifndef AIBOX_GO_SUM_H
#define AIBOX_GO_SUM_H

#include <stddef.h>
#include <stdint.h>

struct buf;

/* sum.golang.org's verifier key, in Go's form NAME+HASH+KEY (as the go command knows it). */
#define GO_SUMDB_KEY "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"

/* The longest name a key may have. */
#define GO_VKEY_NAME_MAX 127

/* A checksum database's Ed25519 verifier key. */
struct go_vkey {
	char name[GO_VKEY_NAME_MAX + 1];
	uint32_t hash;
	unsigned char pub[32];
};

/*
 * Parse s, a verifier key "NAME+HASH+KEY" (HASH 8 hex digits, KEY the
 * standard base64 of the byte 1 and the 32-byte Ed25519 public key), into k.
 * HASH must be the first 4 bytes of SHA-256(NAME "\n" 0x01 PUB).  0, or
 * -EINVAL with the reason in why.
 */
int go_vkey_parse(const char *s, struct go_vkey *k, struct buf *why);

/*
 * Check the signed note msg (len bytes: its text, a blank line, then lines
 * "\xe2\x80\x94 NAME BASE64(HASH4 SIG64)"): 0 when one signature line names one of the nr
 * keys (name and hash) and its Ed25519 signature of the text (up to and with
 * the newline before the blank line) verifies, and every line is well
 * formed; *text_len is then the text's length.  -EINVAL with why otherwise
 * (a note signed by no key given, or by a given key with a wrong signature).
 */
int go_note_verify(const char *msg, size_t len, const struct go_vkey *keys, size_t nr,
                   size_t *text_len, struct buf *why);

/* h1 of a .mod file whose content has the SHA-256 sum: Hash1 of the one file "go.mod". */
void go_h1_mod(const unsigned char sum[32], unsigned char h1[32]);

/* Bounds of a module zip whose h1 is computed (Go's own are 500 MiB). */
#define GO_ZIP_FILES_MAX 65535
#define GO_ZIP_NAME_MAX  4096
#define GO_ZIP_UNZIP_MAX (500ull << 20)
#define GO_ZIP_CDIR_MAX  (16u << 20)

/*
 * The h1 of the module zip of size bytes at offset off of fd (read with
 * pread): SHA-256 over the lines "HEX  NAME\n", one a file, sorted by name,
 * HEX the SHA-256 of the file's inflated content.  Only stored and deflated
 * entries; no zip64, encryption or multi-disk; at most GO_ZIP_FILES_MAX
 * entries, GO_ZIP_UNZIP_MAX bytes inflated in all (each entry no more than
 * its directory says, and its CRC-32 right).  A name that is empty, over
 * GO_ZIP_NAME_MAX, absolute, has a backslash, a byte below ' ', or a "." or
 * ".." segment, or is given twice, is refused.  0 with h1, or -EINVAL (the
 * zip), -EFBIG (over a bound) or -errno (the file) with why.
 */
int go_zip_h1(int fd, uint64_t off, uint64_t size, unsigned char h1[32], struct buf *why);

/*
 * go_zip_h1() a step at a time, so that an event loop can do other work
 * between steps.  go_zip_check_begin() reads and checks the zip's end record
 * and directory (bounded: GO_ZIP_CDIR_MAX) and gives *out, or refuses as
 * go_zip_h1() does (*out NULL).  Each go_zip_check_step() reads and inflates
 * about budget bytes (at least one; input and output both count, so a step
 * costs about the same whatever the ratio), and returns 1 while there is
 * more to do, 0 with h1 once the zip is all read, or a refusal with why as
 * go_zip_h1().  fd must stay open and unchanged until go_zip_check_free().
 */
struct go_zip_check;
int go_zip_check_begin(int fd, uint64_t off, uint64_t size, struct go_zip_check **out,
                       struct buf *why);
int go_zip_check_step(struct go_zip_check *k, uint64_t budget, unsigned char h1[32],
                      struct buf *why);
void go_zip_check_free(struct go_zip_check *k);

/* The longest GOPROXY path prefix taken, and its most segments. */
#define GO_PREFIX_MAX      256
#define GO_PREFIX_SEGS_MAX 16

/*
 * Check s, the path a GOPROXY is served under (a rule's prefix:
 * docs/cache.md, "go"), like "/artifactory/api/go/go-remote": '/' then
 * 1 to GO_PREFIX_SEGS_MAX segments joined by '/', each of [A-Za-z0-9._~-]
 * and neither "." nor "..", no '/' at the end, at most GO_PREFIX_MAX bytes
 * (so no escape, query or empty segment: it is compared with a request's
 * path byte for byte).  0, or -EINVAL with the reason in why.
 */
int go_prefix_check(const char *s, struct buf *why);

#endif
