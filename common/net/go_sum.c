/*
 * Go's checksums: see go_sum.h and docs/cache.md ("go").
 */
#include <errno.h>
#include <stdint.h>
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

/* A zip's h1 worked out a step at a time (go_sum.h). */
struct go_zip_check {
	int fd;
	uint64_t off, cd_off; /* the zip's offset in fd; its directory's, in the zip */
	unsigned char *cd;
	struct zent *z;  /* sorted by name */
	size_t nr, i;    /* the entries; the one under way */
	EVP_MD_CTX *all; /* over the lines "HEX  NAME\n" */
	/* The entry under way. */
	int zinit, zr, out_full;
	EVP_MD_CTX *ctx; /* the entry's digest: NULL before it starts */
	z_stream zs;
	uLong crc;
	uint64_t data, left, got;
	unsigned char in[65536], out[65536];
};

/* The entry under way let go (ended or refused). */
static void zent_end(struct go_zip_check *k)
{
	if (k->zinit)
		inflateEnd(&k->zs);
	EVP_MD_CTX_free(k->ctx);
	k->ctx = NULL;
	k->zinit = k->out_full = 0;
}

/* Start entry k->i: its local header read, its data found.  0 or -errno/-EINVAL with why. */
static int zent_start(struct go_zip_check *k, struct buf *why)
{
	const struct zent *z = &k->z[k->i];
	unsigned char lh[30];
	int ret = 0;

	if ((uint64_t)z->local + 30 > k->cd_off ||
	    (ret = pread_all(k->fd, lh, sizeof(lh), k->off + z->local)) < 0 ||
	    le32(lh) != 0x04034b50)
		return ret < 0 ? buf_refuse(why, ret, "a zip that cannot be read back")
		               : buf_refuse(why, -EINVAL, "a zip entry without its local header");
	k->data = (uint64_t)z->local + 30 + le16(lh + 26) + le16(lh + 28);
	if (k->data + z->csize > k->cd_off)
		return buf_refuse(why, -EINVAL, "a zip entry past the directory");
	k->ctx = EVP_MD_CTX_new();
	if (!k->ctx || !EVP_DigestInit_ex(k->ctx, EVP_sha256(), NULL))
		die_oom();
	memset(&k->zs, 0, sizeof(k->zs));
	if (z->method == 8) {
		if (inflateInit2(&k->zs, -15) != Z_OK)
			die_oom();
		k->zinit = 1;
	}
	k->zr = Z_OK;
	k->crc = crc32(0, NULL, 0);
	k->left = z->csize;
	k->got = 0;
	return 0;
}

/* n bytes of entry content: into its digest and CRC, never past what the directory says. */
static int zent_content(struct go_zip_check *k, const unsigned char *p, size_t n, struct buf *why)
{
	k->got += n;
	if (k->got > k->z[k->i].usize)
		return buf_refuse(why, -EINVAL, "a zip entry bigger than it says");
	EVP_DigestUpdate(k->ctx, p, n);
	k->crc = crc32(k->crc, p, (uInt)n);
	return 0;
}

/* The next piece of the entry's stored bytes, at most sizeof(k->in): its length. */
static int zent_read(struct go_zip_check *k, size_t *n, struct buf *why)
{
	const struct zent *z = &k->z[k->i];
	int ret;

	*n = k->left < sizeof(k->in) ? (size_t)k->left : sizeof(k->in);
	if ((ret = pread_all(k->fd, k->in, *n, k->off + k->data + (z->csize - k->left))) < 0)
		return buf_refuse(why, ret, "a zip that cannot be read back");
	k->left -= *n;
	return 0;
}

/*
 * Work on the entry under way: 1 when it ended (its line is in k->all), 0
 * when *budget (bytes read and inflated) ran out first, or -EINVAL with why.
 */
static int zent_work(struct go_zip_check *k, uint64_t *budget, struct buf *why)
{
	const struct zent *z = &k->z[k->i];
	unsigned char md[32];
	char hex[65];
	size_t n, m;

	while (*budget) {
		if (!k->zinit) {
			if (!k->left)
				break;
			if (zent_read(k, &n, why) < 0 || zent_content(k, k->in, n, why) < 0)
				return -EINVAL;
			*budget -= n < *budget ? n : *budget;
			continue;
		}
		if (k->zr == Z_STREAM_END)
			break;
		if (!k->zs.avail_in && !k->out_full) {
			/* inflate wants more input: a stream with none left is cut short. */
			if (!k->left)
				return buf_refuse(why, -EINVAL, "a zip entry cut short");
			if (zent_read(k, &n, why) < 0)
				return -EINVAL;
			k->zs.next_in = k->in;
			k->zs.avail_in = (uInt)n;
			*budget -= n < *budget ? n : *budget;
		}
		k->zs.next_out = k->out;
		k->zs.avail_out = sizeof(k->out);
		k->zr = inflate(&k->zs, Z_NO_FLUSH);
		if (k->zr != Z_OK && k->zr != Z_STREAM_END && k->zr != Z_BUF_ERROR)
			return buf_refuse(why, -EINVAL, "a zip entry that does not inflate");
		m = sizeof(k->out) - k->zs.avail_out;
		k->out_full = !k->zs.avail_out;
		/* Never more than the directory said: a bomb stops here. */
		if (zent_content(k, k->out, m, why) < 0)
			return -EINVAL;
		*budget -= m < *budget ? m : *budget;
	}
	if (!*budget && (k->zinit ? k->zr != Z_STREAM_END : k->left != 0))
		return 0;
	if (k->got != z->usize || k->crc != z->crc)
		return buf_refuse(why, -EINVAL, "a zip entry whose size or CRC-32 is not its own");
	EVP_DigestFinal_ex(k->ctx, md, NULL);
	hex_encode(hex, md, 32);
	EVP_DigestUpdate(k->all, hex, 64);
	EVP_DigestUpdate(k->all, "  ", 2);
	EVP_DigestUpdate(k->all, z->name, z->nlen);
	EVP_DigestUpdate(k->all, "\n", 1);
	return 1;
}

int go_zip_check_begin(int fd, uint64_t off, uint64_t size, struct go_zip_check **out,
                       struct buf *why)
{
	unsigned char tail[65536 + 22];
	size_t tl = size < sizeof(tail) ? (size_t)size : sizeof(tail), nr, eocd;
	struct go_zip_check *k;
	uint64_t cd_off, cd_size, total = 0;
	const unsigned char *p;
	int ret;

	*out = NULL;
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
	k = xcalloc(1, sizeof(*k));
	k->fd = fd;
	k->off = off;
	k->cd_off = cd_off;
	k->nr = nr;
	k->cd = xmalloc(cd_size + 1);
	k->z = xcalloc(nr + 1, sizeof(*k->z));
	if ((ret = pread_all(fd, k->cd, cd_size, off + cd_off)) < 0) {
		ret = buf_refuse(why, ret, "a zip that cannot be read back");
		goto fail;
	}
	p = k->cd;
	for (size_t i = 0; i < nr; i++) {
		struct zent *z = &k->z[i];
		size_t n;

		if ((size_t)(k->cd + cd_size - p) < 46 || le32(p) != 0x02014b50) {
			ret = buf_refuse(why, -EINVAL, "a zip directory cut short");
			goto fail;
		}
		n = 46 + (size_t)le16(p + 28) + le16(p + 30) + le16(p + 32);
		if ((size_t)(k->cd + cd_size - p) < n) {
			ret = buf_refuse(why, -EINVAL, "a zip directory cut short");
			goto fail;
		}
		*z = (struct zent){(const char *)p + 46, le16(p + 28), le32(p + 16), le32(p + 20),
		                   le32(p + 24),         le32(p + 42), le16(p + 10)};
		if (le16(p + 8) & 1 || (z->method != 0 && z->method != 8) ||
		    (z->method == 0 && z->csize != z->usize)) {
			ret =
			    buf_refuse(why, -EINVAL, "a zip entry encrypted or in another method");
			goto fail;
		}
		if (!zname_ok(z->name, z->nlen)) {
			ret = buf_refuse(why, -EINVAL, "a zip entry with a name no module holds");
			goto fail;
		}
		total += z->usize;
		if (total > GO_ZIP_UNZIP_MAX) {
			ret = buf_refuse(why, -EFBIG, "a zip that inflates past the bound");
			goto fail;
		}
		p += n;
	}
	qsort(k->z, nr, sizeof(*k->z), zent_cmp);
	for (size_t i = 1; i < nr; i++)
		if (!zent_cmp(&k->z[i - 1], &k->z[i])) {
			ret = buf_refuse(why, -EINVAL, "a zip with one name twice");
			goto fail;
		}
	k->all = EVP_MD_CTX_new();
	if (!k->all || !EVP_DigestInit_ex(k->all, EVP_sha256(), NULL))
		die_oom();
	*out = k;
	return 0;
fail:
	go_zip_check_free(k);
	return ret;
}

int go_zip_check_step(struct go_zip_check *k, uint64_t budget, unsigned char h1[32],
                      struct buf *why)
{
	int r;

	if (!budget)
		budget = 1;
	while (k->i < k->nr) {
		if (!k->ctx && (r = zent_start(k, why)) < 0)
			return r;
		if ((r = zent_work(k, &budget, why)) < 0) {
			zent_end(k);
			return r;
		}
		if (!r)
			return 1;
		zent_end(k);
		k->i++;
		if (!budget && k->i < k->nr)
			return 1;
	}
	EVP_DigestFinal_ex(k->all, h1, NULL);
	return 0;
}

void go_zip_check_free(struct go_zip_check *k)
{
	if (!k)
		return;
	zent_end(k);
	EVP_MD_CTX_free(k->all);
	free(k->z);
	free(k->cd);
	free(k);
}

int go_zip_h1(int fd, uint64_t off, uint64_t size, unsigned char h1[32], struct buf *why)
{
	struct go_zip_check *k;
	int ret = go_zip_check_begin(fd, off, size, &k, why);

	while (!ret && (ret = go_zip_check_step(k, UINT64_MAX, h1, why)) == 1)
		;
	go_zip_check_free(k);
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
