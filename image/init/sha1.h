/*
 * SHA-1, for the checks of the host's prepared clone (image/init/prepared.h).
 *
 * The host side uses OpenSSL; the init has its own because a library it
 * links must be in the root disk, and a new one there means rebuilding the
 * root disk of every image (docs/image.md).  Plain SHA-1, as git's pack
 * index checksum is: no collision detection (the input is the host's own).
 */
#ifndef AIBOX_INIT_SHA1_H
#define AIBOX_INIT_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_LEN 20

struct sha1 {
	uint32_t h[5];
	uint64_t len; /* bytes so far */
	unsigned char block[64];
	size_t used;
};

void sha1_init(struct sha1 *c);
void sha1_update(struct sha1 *c, const void *data, size_t n);
void sha1_final(struct sha1 *c, unsigned char out[SHA1_LEN]);

#endif
