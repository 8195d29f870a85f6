/* BLAKE2b (RFC 7693): see blake2b.h.  Written from the RFC's section 3 and appendix C. */
#include <string.h>

#include "base/blake2b.h"
#include "base/err.h"
#include "base/banned.h"

static const uint64_t iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const unsigned char sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static uint64_t rotr(uint64_t x, int n)
{
	return x >> n | x << (64 - n);
}

static uint64_t load64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#define G(a, b, c, d, x, y)                                                                        \
	do {                                                                                       \
		v[a] = v[a] + v[b] + (x);                                                          \
		v[d] = rotr(v[d] ^ v[a], 32);                                                      \
		v[c] = v[c] + v[d];                                                                \
		v[b] = rotr(v[b] ^ v[c], 24);                                                      \
		v[a] = v[a] + v[b] + (y);                                                          \
		v[d] = rotr(v[d] ^ v[a], 16);                                                      \
		v[c] = v[c] + v[d];                                                                \
		v[b] = rotr(v[b] ^ v[c], 63);                                                      \
	} while (0)

/* The compression function F over s->b; last: the final block. */
static void compress(struct blake2b *s, int last)
{
	uint64_t v[16], m[16];

	for (int i = 0; i < 8; i++) {
		v[i] = s->h[i];
		v[i + 8] = iv[i];
	}
	v[12] ^= s->t[0];
	v[13] ^= s->t[1];
	if (last)
		v[14] = ~v[14];
	for (int i = 0; i < 16; i++)
		m[i] = load64(s->b + 8 * i);
	for (int r = 0; r < 12; r++) {
		const unsigned char *z = sigma[r];

		G(0, 4, 8, 12, m[z[0]], m[z[1]]);
		G(1, 5, 9, 13, m[z[2]], m[z[3]]);
		G(2, 6, 10, 14, m[z[4]], m[z[5]]);
		G(3, 7, 11, 15, m[z[6]], m[z[7]]);
		G(0, 5, 10, 15, m[z[8]], m[z[9]]);
		G(1, 6, 11, 12, m[z[10]], m[z[11]]);
		G(2, 7, 8, 13, m[z[12]], m[z[13]]);
		G(3, 4, 9, 14, m[z[14]], m[z[15]]);
	}
	for (int i = 0; i < 8; i++)
		s->h[i] ^= v[i] ^ v[i + 8];
}

void blake2b_init(struct blake2b *s, size_t outlen)
{
	if (!outlen || outlen > BLAKE2B_OUT_MAX)
		BUG("blake2b_init: digest length %zu", outlen);
	memset(s, 0, sizeof(*s));
	memcpy(s->h, iv, sizeof(iv));
	/* Parameter block: digest length, key length 0, fanout 1, depth 1. */
	s->h[0] ^= 0x01010000ULL ^ outlen;
	s->outlen = outlen;
}

void blake2b_update(struct blake2b *s, const void *p, size_t n)
{
	const unsigned char *in = p;

	while (n) {
		size_t k;

		/* A full buffer is compressed only once more bytes follow: the last block is
		 * special. */
		if (s->c == BLAKE2B_BLOCK) {
			s->t[0] += BLAKE2B_BLOCK;
			if (s->t[0] < BLAKE2B_BLOCK)
				s->t[1]++;
			compress(s, 0);
			s->c = 0;
		}
		k = BLAKE2B_BLOCK - s->c;
		if (k > n)
			k = n;
		memcpy(s->b + s->c, in, k);
		s->c += k;
		in += k;
		n -= k;
	}
}

void blake2b_final(struct blake2b *s, unsigned char *out)
{
	s->t[0] += s->c;
	if (s->t[0] < s->c)
		s->t[1]++;
	memset(s->b + s->c, 0, BLAKE2B_BLOCK - s->c);
	compress(s, 1);
	for (size_t i = 0; i < s->outlen; i++)
		out[i] = (unsigned char)(s->h[i / 8] >> (8 * (i % 8)));
	memset(s, 0, sizeof(*s));
}

void blake2b(unsigned char *out, size_t outlen, const void *in, size_t n)
{
	struct blake2b s;

	blake2b_init(&s, outlen);
	blake2b_update(&s, in, n);
	blake2b_final(&s, out);
}
