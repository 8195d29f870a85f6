/*
 * test-blake2b: common/base/blake2b.h for t/0040-blake2b.bats.
 *
 *   test-blake2b sum OUTLEN FILE...
 *	the OUTLEN-byte BLAKE2b of each FILE ("-" for stdin) in hex, one a
 *	line; each file is read whole and fed to blake2b_update() in pieces of
 *	pseudo-random sizes (0 to 300 bytes, then up to 64 KiB), so the digest
 *	does not hang on how the bytes were cut
 *   test-blake2b openssl COUNT
 *	for lengths 0 to COUNT-1 of pseudo-random bytes, and some of many KiB,
 *	compare the 64-byte digest with OpenSSL's BLAKE2B-512: "ok N" (inputs
 *	compared), or "differs at length L" and exit 1
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blake2b.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "base/banned.h"

static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* The digest of the n bytes at p, fed in pieces of pseudo-random sizes. */
static void sum_pieces(unsigned char *out, size_t outlen, const unsigned char *p, size_t n)
{
	struct blake2b s;
	size_t off = 0;

	blake2b_init(&s, outlen);
	while (off < n) {
		size_t k = (size_t)(rnd() % (off < 4096 ? 301 : 65537));

		if (k > n - off)
			k = n - off;
		blake2b_update(&s, p + off, k);
		off += k;
	}
	blake2b_final(&s, out);
}

static int cmd_sum(int argc, char **argv)
{
	size_t outlen = (size_t)atoi(argv[2]);

	if (!outlen || outlen > BLAKE2B_OUT_MAX)
		die("test-blake2b: OUTLEN is 1 to 64");
	for (int i = 3; i < argc; i++) {
		struct buf b = BUF_INIT, why = BUF_INIT;
		unsigned char md[BLAKE2B_OUT_MAX];
		char hex[2 * BLAKE2B_OUT_MAX + 1];
		FILE *f = strcmp(argv[i], "-") ? fopen(argv[i], "rb") : stdin;
		char chunk[65536];
		size_t n;

		if (!f)
			die_errno("cannot open '%s'", argv[i]);
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			buf_add(&b, chunk, n);
		if (f != stdin)
			fclose(f);
		sum_pieces(md, outlen, (const unsigned char *)b.buf, b.len);
		hex_encode(hex, md, outlen);
		puts(hex);
		buf_release(&b);
		buf_release(&why);
	}
	return 0;
}

static int cmd_openssl(int argc, char **argv)
{
	size_t count = (size_t)atoi(argv[2]), big = 1 << 20, done = 0;
	unsigned char *p = xmalloc(big);
	const EVP_MD *md = EVP_get_digestbyname("BLAKE2B-512");

	if (!md)
		die("test-blake2b: OpenSSL has no BLAKE2B-512");
	for (size_t i = 0; i < big; i++)
		p[i] = (unsigned char)rnd();
	for (size_t len = 0; len < count + 8; len++) {
		/* Then a few long ones, around block and piece boundaries. */
		size_t l = len < count ? len : (len - count + 1) * 131072 - 1 + (len & 1) * 2;
		unsigned char a[64], b[64];
		unsigned int bl = 0;

		if (l > big)
			l = big;
		sum_pieces(a, 64, p + (len % 7), l - (l && len % 7 ? len % 7 : 0));
		if (!EVP_Digest(p + (len % 7), l - (l && len % 7 ? len % 7 : 0), b, &bl, md,
		                NULL) ||
		    bl != 64)
			die("test-blake2b: OpenSSL's digest failed");
		if (memcmp(a, b, 64)) {
			printf("differs at length %zu\n", l);
			free(p);
			return 1;
		}
		done++;
	}
	printf("ok %zu\n", done);
	free(p);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "sum"))
		return cmd_sum(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "openssl"))
		return cmd_openssl(argc, argv);
	die("usage: test-blake2b sum OUTLEN FILE... | openssl COUNT");
}
