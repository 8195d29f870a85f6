#include "prepared.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/hex.h"
#include "sha1.h"
#include "base/banned.h"

#define IDX_HEAD   (8 + 256 * 4) /* magic, version, fan-out */
#define PACK_HEAD  12
#define PACK_TRAIL SHA1_LEN

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static int pread_all(int fd, void *data, size_t n, uint64_t off)
{
	unsigned char *p = data;

	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EINVAL;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* The index's tables: names, CRCs, offsets, large offsets, then the two checksums. */
static int check_idx(const unsigned char *idx, size_t len, const struct prepared *p,
                     struct buf *err)
{
	static const unsigned char magic[8] = {0xff, 't', 'O', 'c', 0, 0, 0, 2};
	const unsigned char *names, *offs, *large;
	uint64_t n, nlarge, want, pack_end = p->pack_len - PACK_TRAIL;
	unsigned char sum[SHA1_LEN];
	struct sha1 c;
	uint32_t prev = 0;

	if (len < IDX_HEAD + 2 * SHA1_LEN || memcmp(idx, magic, sizeof(magic)))
		return buf_refuse(err, -EINVAL, "start.idx is not a version 2 pack index");
	for (int i = 0; i < 256; i++) {
		uint32_t f = be32(idx + 8 + 4 * i);

		if (f < prev)
			return buf_refuse(err, -EINVAL, "start.idx: its fan-out table goes down");
		prev = f;
	}
	n = prev;
	if (n != p->objects)
		return buf_refuse(err, -EINVAL,
		                  "start.idx counts another number of objects than the pack");
	want = IDX_HEAD + n * (SHA1_LEN + 4 + 4) + 2 * SHA1_LEN;
	if (len < want || (len - want) % 8)
		return buf_refuse(err, -EINVAL, "start.idx has the wrong size for its objects");
	nlarge = (len - want) / 8;
	names = idx + IDX_HEAD;
	offs = names + n * (SHA1_LEN + 4);
	large = offs + n * 4;
	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *name = names + i * SHA1_LEN;
		uint32_t below = name[0] ? be32(idx + 8 + 4 * (name[0] - 1)) : 0;
		uint32_t o = be32(offs + i * 4);
		uint64_t at = o;

		if (i >= be32(idx + 8 + 4 * name[0]) || i < below)
			return buf_refuse(err, -EINVAL,
			                  "start.idx: an object name is outside its fan-out range");
		if (i && memcmp(name - SHA1_LEN, name, SHA1_LEN) >= 0)
			return buf_refuse(err, -EINVAL,
			                  "start.idx: its object names are not sorted");
		if (o & 0x80000000U) {
			if ((o & 0x7fffffffU) >= nlarge)
				return buf_refuse(err, -EINVAL,
				                  "start.idx: a large offset is missing");
			at = be64(large + (uint64_t)(o & 0x7fffffffU) * 8);
		}
		if (at < PACK_HEAD || at >= pack_end)
			return buf_refuse(err, -EINVAL, "start.idx: an offset is outside the pack");
	}
	if (memcmp(idx + len - 2 * SHA1_LEN, p->pack_sum, SHA1_LEN))
		return buf_refuse(err, -EINVAL,
		                  "start.idx belongs to another pack than start.bundle's");
	sha1_init(&c);
	sha1_update(&c, idx, len - SHA1_LEN);
	sha1_final(&c, sum);
	if (memcmp(sum, idx + len - SHA1_LEN, SHA1_LEN))
		return buf_refuse(err, -EINVAL,
		                  "start.idx: its checksum does not match its content");
	return 0;
}

int prepared_check(int bundle_fd, const char *start, const char *branch, const unsigned char *idx,
                   size_t idx_len, struct prepared *p, struct buf *err)
{
	static const unsigned char pack_magic[8] = {'P', 'A', 'C', 'K', 0, 0, 0, 2};
	struct buf head = BUF_INIT, got = BUF_INIT;
	unsigned char pack[PACK_HEAD];
	struct stat st;
	int ret;

	memset(p, 0, sizeof(*p));
	buf_addf(&head, "# v2 git bundle\n%s HEAD\n%s refs/heads/%s\n\n", start, start, branch);
	buf_grow(&got, head.len);
	if (fstat(bundle_fd, &st) < 0) {
		ret = -errno;
		buf_addf(err, "cannot read start.bundle: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size < head.len + PACK_HEAD + PACK_TRAIL ||
	    pread_all(bundle_fd, got.buf, head.len, 0) < 0 || memcmp(got.buf, head.buf, head.len)) {
		ret = buf_refuse(
		    err, -EINVAL,
		    "start.bundle is not the bundle aibox-task writes for the start commit");
		goto out;
	}
	p->pack_off = head.len;
	p->pack_len = (uint64_t)st.st_size - head.len;
	if ((ret = pread_all(bundle_fd, pack, sizeof(pack), p->pack_off)) < 0 ||
	    (ret = pread_all(bundle_fd, p->pack_sum, SHA1_LEN, (uint64_t)st.st_size - SHA1_LEN)) <
	        0) {
		buf_addf(err, "cannot read start.bundle: %s", strerror(-ret));
		goto out;
	}
	if (memcmp(pack, pack_magic, sizeof(pack_magic))) {
		ret = buf_refuse(err, -EINVAL, "start.bundle does not hold a version 2 pack");
		goto out;
	}
	p->objects = be32(pack + 8);
	hex_encode(p->pack_hex, p->pack_sum, SHA1_LEN);
	ret = check_idx(idx, idx_len, p, err);
out:
	buf_release(&head);
	buf_release(&got);
	return ret;
}
