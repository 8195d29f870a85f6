/*
 * Go's checksums: see go_sum.h and docs/cache.md ("go").
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "net/go_sum.h"
#include "base/banned.h"

/*
 * The standard base64 of n bytes at s (a multiple of 4, '=' only at the end)
 * into out (at most max bytes): the length, or -1.
 */
static int b64_decode(const char *s, size_t n, unsigned char *out, size_t max)
{
	unsigned char tmp[128];
	int len, pad = 0;

	if (!n || n % 4 || n / 4 * 3 > sizeof(tmp))
		return -1;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '=' && i + 2 >= n && (i + 1 == n || s[i + 1] == '='))
			pad++;
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		           (c >= '0' && c <= '9') || c == '+' || c == '/'))
			return -1;
	}
	len = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
	if (len < 0 || (size_t)(len - pad) > max)
		return -1;
	memcpy(out, tmp, (size_t)(len - pad));
	return len - pad;
}

/* A key or signer name: 1 to GO_VKEY_NAME_MAX printable ASCII bytes, no space, no '+'. */
static int name_ok(const char *s, size_t n)
{
	if (!n || n > GO_VKEY_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '+')
			return 0;
	return 1;
}

static uint32_t key_hash(const char *name, size_t n, const unsigned char pub[32])
{
	unsigned char md[32], alg = 1;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die_oom();
	EVP_DigestUpdate(ctx, name, n);
	EVP_DigestUpdate(ctx, "\n", 1);
	EVP_DigestUpdate(ctx, &alg, 1);
	EVP_DigestUpdate(ctx, pub, 32);
	EVP_DigestFinal_ex(ctx, md, NULL);
	EVP_MD_CTX_free(ctx);
	return (uint32_t)md[0] << 24 | (uint32_t)md[1] << 16 | (uint32_t)md[2] << 8 | md[3];
}

int go_vkey_parse(const char *s, struct go_vkey *k, struct buf *why)
{
	const char *p1 = strchr(s, '+'), *p2 = p1 ? strchr(p1 + 1, '+') : NULL;
	unsigned char key[33];
	uint32_t hash = 0;

	if (!p1 || !p2 || !name_ok(s, (size_t)(p1 - s)) || p2 - p1 != 9)
		return buf_refuse(why, -EINVAL, "not a verifier key NAME+HASH+KEY");
	for (const char *h = p1 + 1; h < p2; h++) {
		if (hex_digit(*h) < 0)
			return buf_refuse(why, -EINVAL, "a verifier key whose hash is not hex");
		hash = hash << 4 | (uint32_t)hex_digit(*h);
	}
	if (b64_decode(p2 + 1, strlen(p2 + 1), key, sizeof(key)) != 33 || key[0] != 1)
		return buf_refuse(why, -EINVAL, "a verifier key that is not an Ed25519 key");
	if (key_hash(s, (size_t)(p1 - s), key + 1) != hash)
		return buf_refuse(why, -EINVAL, "a verifier key whose hash does not match it");
	memcpy(k->name, s, (size_t)(p1 - s));
	k->name[p1 - s] = '\0';
	k->hash = hash;
	memcpy(k->pub, key + 1, 32);
	return 0;
}

static int ed25519_ok(const unsigned char pub[32], const unsigned char sig[64], const char *msg,
                      size_t len)
{
	EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = pk && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1 &&
	         EVP_DigestVerify(ctx, sig, 64, (const unsigned char *)msg, len) == 1;

	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pk);
	return ok;
}

int go_note_verify(const char *msg, size_t len, const struct go_vkey *keys, size_t nr,
                   size_t *text_len, struct buf *why)
{
	static const char dash[] = "\xe2\x80\x94 ";
	const char *split = NULL, *p, *end = msg + len;
	int good = 0;

	for (size_t i = 0; i + 1 < len; i++) {
		if (msg[i] == '\n' && msg[i + 1] == '\n')
			split = msg + i;
		if ((unsigned char)msg[i] < ' ' && msg[i] != '\n')
			return buf_refuse(why, -EINVAL, "a note with a control byte");
	}
	if (!split || msg[len - 1] != '\n')
		return buf_refuse(why, -EINVAL, "a note with no signature block");
	for (p = split + 2; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *sp;
		unsigned char sig[68];
		uint32_t hash;
		int n;

		if (end - p < 4 || memcmp(p, dash, 4))
			return buf_refuse(why, -EINVAL, "a note signature line without its dash");
		p += 4;
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (!sp || !name_ok(p, (size_t)(sp - p)))
			return buf_refuse(why, -EINVAL, "a note signature line without a name");
		n = b64_decode(sp + 1, (size_t)(nl - sp - 1), sig, sizeof(sig));
		if (n < 5)
			return buf_refuse(why, -EINVAL, "a note signature that is not base64");
		hash = (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 | (uint32_t)sig[2] << 8 |
		       sig[3];
		for (size_t k = 0; k < nr; k++) {
			if (keys[k].hash != hash || strlen(keys[k].name) != (size_t)(sp - p) ||
			    memcmp(keys[k].name, p, (size_t)(sp - p)))
				continue;
			/* A signature by a key we know that does not verify: the note is forged. */
			if (n != 68 ||
			    !ed25519_ok(keys[k].pub, sig + 4, msg, (size_t)(split - msg) + 1))
				return buf_refuse(why, -EINVAL,
				                  "a note whose signature does not verify");
			good = 1;
		}
		p = nl + 1;
	}
	if (!good)
		return buf_refuse(why, -EINVAL, "a note signed by no known key");
	*text_len = (size_t)(split - msg) + 1;
	return 0;
}

void go_h1_mod(const unsigned char sum[32], unsigned char h1[32])
{
	char line[64 + 10];

	hex_encode(line, sum, 32);
	memcpy(line + 64, "  go.mod\n", 9);
	EVP_Digest(line, 64 + 9, h1, NULL, EVP_sha256(), NULL);
}

/* A zip's central directory entry, as far as the h1 needs it. */
struct zent {
	const char *name;
	size_t nlen;
	uint32_t crc, csize, usize, local;
	unsigned method;
};

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int zent_cmp(const void *a, const void *b)
{
	const struct zent *x = a, *y = b;
	size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
	int r = memcmp(x->name, y->name, n);

	return r ? r : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

/* A name Go's module zips can hold and no one can read two ways. */
static int zname_ok(const char *s, size_t n)
{
	if (!n || n > GO_ZIP_NAME_MAX || s[0] == '/')
		return 0;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < ' ' || s[i] == '\\' || s[i] == 0x7f)
			return 0;
		if ((i == 0 || s[i - 1] == '/') && s[i] == '.' &&
		    (i + 1 == n || s[i + 1] == '/' ||
		     (s[i + 1] == '.' && (i + 2 == n || s[i + 2] == '/'))))
			return 0;
	}
	return 1;
}

static int pread_all(int fd, void *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p = (char *)p + r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* The SHA-256 of entry z's content (its data at off of fd, before end): into md. */
static int zent_sum(int fd, uint64_t off, uint64_t end, const struct zent *z, unsigned char md[32],
                    struct buf *why)
{
	unsigned char in[65536], out[65536], lh[30];
	uint64_t data, left, got = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	z_stream zs;
	uLong crc = crc32(0, NULL, 0);
	int ret = 0, zinit = 0, zr = Z_OK;

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die_oom();
	memset(&zs, 0, sizeof(zs));
	if ((uint64_t)z->local + 30 > end ||
	    (ret = pread_all(fd, lh, sizeof(lh), off + z->local)) < 0 || le32(lh) != 0x04034b50) {
		ret = ret < 0 ? ret
		              : buf_refuse(why, -EINVAL, "a zip entry without its local header");
		goto out;
	}
	data = (uint64_t)z->local + 30 + le16(lh + 26) + le16(lh + 28);
	if (data + z->csize > end) {
		ret = buf_refuse(why, -EINVAL, "a zip entry past the directory");
		goto out;
	}
	if (z->method == 8) {
		if (inflateInit2(&zs, -15) != Z_OK)
			die_oom();
		zinit = 1;
	}
	for (left = z->csize; left || (zinit && zr != Z_STREAM_END);) {
		size_t n = left < sizeof(in) ? (size_t)left : sizeof(in);

		if (n && (ret = pread_all(fd, in, n, off + data + (z->csize - left))) < 0)
			goto out;
		left -= n;
		if (!zinit) {
			EVP_DigestUpdate(ctx, in, n);
			crc = crc32(crc, in, (uInt)n);
			got += n;
			continue;
		}
		zs.next_in = in;
		zs.avail_in = (uInt)n;
		do {
			size_t m;

			zs.next_out = out;
			zs.avail_out = sizeof(out);
			zr = inflate(&zs, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && left)) {
				ret = buf_refuse(why, -EINVAL, "a zip entry that does not inflate");
				goto out;
			}
			m = sizeof(out) - zs.avail_out;
			got += m;
			/* Never more than the directory said: a bomb stops here. */
			if (got > z->usize) {
				ret = buf_refuse(why, -EINVAL, "a zip entry bigger than it says");
				goto out;
			}
			EVP_DigestUpdate(ctx, out, m);
			crc = crc32(crc, out, (uInt)m);
		} while (zr != Z_STREAM_END && zs.avail_out == 0);
		if (zr != Z_STREAM_END && !left && zs.avail_in == 0 && zs.avail_out) {
			ret = buf_refuse(why, -EINVAL, "a zip entry cut short");
			goto out;
		}
	}
	if (got != z->usize || crc != z->crc) {
		ret = buf_refuse(why, -EINVAL, "a zip entry whose size or CRC-32 is not its own");
		goto out;
	}
	EVP_DigestFinal_ex(ctx, md, NULL);
out:
	if (zinit)
		inflateEnd(&zs);
	EVP_MD_CTX_free(ctx);
	return ret;
}

int go_zip_h1(int fd, uint64_t off, uint64_t size, unsigned char h1[32], struct buf *why)
{
	unsigned char tail[65536 + 22], *cd = NULL, md[32];
	size_t tl = size < sizeof(tail) ? (size_t)size : sizeof(tail), nr, eocd;
	struct zent *z = NULL;
	uint64_t cd_off, cd_size, total = 0;
	EVP_MD_CTX *ctx = NULL;
	const unsigned char *p;
	int ret;

	if (size < 22)
		return buf_refuse(why, -EINVAL, "a zip shorter than its end record");
	if ((ret = pread_all(fd, tail, tl, off + size - tl)) < 0)
		return buf_refuse(why, ret, "a zip that cannot be read back");
	/* The end record: the last one whose comment ends the file. */
	for (eocd = tl - 22;; eocd--) {
		if (le32(tail + eocd) == 0x06054b50 && eocd + 22 + le16(tail + eocd + 20) == tl)
			break;
		if (!eocd)
			return buf_refuse(why, -EINVAL, "a zip without its end record");
	}
	p = tail + eocd;
	nr = le16(p + 10);
	cd_size = le32(p + 12);
	cd_off = le32(p + 16);
	if (le16(p + 4) || le16(p + 6) || le16(p + 8) != nr || nr == 0xffff ||
	    cd_off == 0xffffffff || cd_size == 0xffffffff)
		return buf_refuse(why, -EINVAL, "a zip on several disks, or a zip64");
	if (nr > GO_ZIP_FILES_MAX || cd_size > GO_ZIP_CDIR_MAX)
		return buf_refuse(why, -EFBIG, "a zip with too many files");
	if (cd_off + cd_size > size - tl + eocd)
		return buf_refuse(why, -EINVAL, "a zip whose directory is not before its end");
	cd = xmalloc(cd_size + 1);
	z = xcalloc(nr + 1, sizeof(*z));
	if ((ret = pread_all(fd, cd, cd_size, off + cd_off)) < 0) {
		ret = buf_refuse(why, ret, "a zip that cannot be read back");
		goto out;
	}
	p = cd;
	for (size_t i = 0; i < nr; i++) {
		size_t n;

		if ((size_t)(cd + cd_size - p) < 46 || le32(p) != 0x02014b50) {
			ret = buf_refuse(why, -EINVAL, "a zip directory cut short");
			goto out;
		}
		n = 46 + (size_t)le16(p + 28) + le16(p + 30) + le16(p + 32);
		if ((size_t)(cd + cd_size - p) < n) {
			ret = buf_refuse(why, -EINVAL, "a zip directory cut short");
			goto out;
		}
		z[i] = (struct zent){(const char *)p + 46, le16(p + 28), le32(p + 16), le32(p + 20),
		                     le32(p + 24),         le32(p + 42), le16(p + 10)};
		if (le16(p + 8) & 1 || (z[i].method != 0 && z[i].method != 8) ||
		    (z[i].method == 0 && z[i].csize != z[i].usize)) {
			ret =
			    buf_refuse(why, -EINVAL, "a zip entry encrypted or in another method");
			goto out;
		}
		if (!zname_ok(z[i].name, z[i].nlen)) {
			ret = buf_refuse(why, -EINVAL, "a zip entry with a name no module holds");
			goto out;
		}
		total += z[i].usize;
		if (total > GO_ZIP_UNZIP_MAX) {
			ret = buf_refuse(why, -EFBIG, "a zip that inflates past the bound");
			goto out;
		}
		p += n;
	}
	qsort(z, nr, sizeof(*z), zent_cmp);
	for (size_t i = 1; i < nr; i++)
		if (!zent_cmp(&z[i - 1], &z[i])) {
			ret = buf_refuse(why, -EINVAL, "a zip with one name twice");
			goto out;
		}
	ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die_oom();
	for (size_t i = 0; i < nr; i++) {
		char hex[65];

		if ((ret = zent_sum(fd, off, cd_off, &z[i], md, why)) < 0)
			goto out;
		hex_encode(hex, md, 32);
		EVP_DigestUpdate(ctx, hex, 64);
		EVP_DigestUpdate(ctx, "  ", 2);
		EVP_DigestUpdate(ctx, z[i].name, z[i].nlen);
		EVP_DigestUpdate(ctx, "\n", 1);
	}
	EVP_DigestFinal_ex(ctx, h1, NULL);
	ret = 0;
out:
	EVP_MD_CTX_free(ctx);
	free(z);
	free(cd);
	return ret;
}

_Static_assert(GO_PREFIX_MAX == 256 && GO_PREFIX_SEGS_MAX == 16, "the reasons below say so");

int go_prefix_check(const char *s, struct buf *why)
{
	size_t len = strlen(s), segs = 0;

	if (len > GO_PREFIX_MAX)
		return buf_refuse(why, -EINVAL, "longer than 256 bytes");
	if (s[0] != '/')
		return buf_refuse(why, -EINVAL, "not starting with '/'");
	for (const char *p = s; *p == '/'; segs++) {
		size_t n = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                         "0123456789._~-");

		if (!n)
			return buf_refuse(why, -EINVAL,
			                  "an empty segment (a '/' at the end or '//')");
		if ((n == 1 && p[1] == '.') || (n == 2 && p[1] == '.' && p[2] == '.'))
			return buf_refuse(why, -EINVAL, "a '.' or '..' segment");
		p += 1 + n;
		if (*p && *p != '/')
			return buf_refuse(why, -EINVAL,
			                  "a byte other than [A-Za-z0-9._~-] in a segment");
	}
	if (segs > GO_PREFIX_SEGS_MAX)
		return buf_refuse(why, -EINVAL, "more than 16 segments");
	return 0;
}
