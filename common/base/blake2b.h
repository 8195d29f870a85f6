/*
 * BLAKE2b (RFC 7693), unkeyed, with the digest length a parameter: what
 * PyPI's file paths are named by (BLAKE2b-256; docs/cache.md, "PyPI").
 * OpenSSL 3.0 computes only the 64-byte BLAKE2b-512 unkeyed (its size
 * parameter is honoured from 3.2), and a BLAKE2b with a shorter digest is a
 * different function, not a prefix, so the tree has its own.
 *
 * Pure functions over bytes, no allocation.  The digest of the same bytes is
 * the same however they are cut into update calls; for outlen 64 it is
 * OpenSSL's BLAKE2B-512, for 32 Python's hashlib.blake2b(digest_size=32).
 * Not constant-time in the length only (it reads no secret: there is no key).
 */
#ifndef AIBOX_BLAKE2B_H
#define AIBOX_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

#define BLAKE2B_OUT_MAX 64
#define BLAKE2B_BLOCK   128

struct blake2b {
	uint64_t h[8];
	uint64_t t[2]; /* bytes compressed so far, 128 bits */
	unsigned char b[BLAKE2B_BLOCK];
	size_t c; /* bytes in b */
	size_t outlen;
};

/* Start a digest of outlen bytes (1 to 64; anything else is a BUG()). */
void blake2b_init(struct blake2b *s, size_t outlen);

/* Add n bytes at p (n may be 0, p then NULL). */
void blake2b_update(struct blake2b *s, const void *p, size_t n);

/* Write the outlen bytes of the digest into out; s must be started again to be used. */
void blake2b_final(struct blake2b *s, unsigned char *out);

/* The outlen-byte digest of the n bytes at in, at once. */
void blake2b(unsigned char *out, size_t outlen, const void *in, size_t n);

#endif
