#include "sha1.h"

#include <string.h>

#include "base/banned.h"

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void block(struct sha1 *c, const unsigned char *p)
{
	uint32_t w[80], a = c->h[0], b = c->h[1], d = c->h[3], e = c->h[4], cc = c->h[2];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20) {
			f = (b & cc) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ cc ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & cc) | (b & d) | (cc & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ cc ^ d;
			k = 0xca62c1d6;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = cc;
		cc = rol(b, 30);
		b = a;
		a = t;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
}

void sha1_init(struct sha1 *c)
{
	static const uint32_t iv[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};

	memcpy(c->h, iv, sizeof(iv));
	c->len = 0;
	c->used = 0;
}

void sha1_update(struct sha1 *c, const void *data, size_t n)
{
	const unsigned char *p = data;

	c->len += n;
	if (c->used) {
		size_t take = 64 - c->used < n ? 64 - c->used : n;

		memcpy(c->block + c->used, p, take);
		c->used += take;
		p += take;
		n -= take;
		if (c->used < 64)
			return;
		block(c, c->block);
		c->used = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		block(c, p);
	memcpy(c->block, p, n);
	c->used = n;
}

void sha1_final(struct sha1 *c, unsigned char out[SHA1_LEN])
{
	uint64_t bits = c->len * 8;
	unsigned char pad[72] = {0x80};
	size_t padlen = c->used < 56 ? 56 - c->used : 120 - c->used;

	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_update(c, pad, padlen + 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
}
