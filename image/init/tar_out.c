#include "tar_out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ustar.h"
#include "base/banned.h"

/* Put v in octal into the width-byte field f: width-1 digits and a NUL. */
static int put_octal(unsigned char *f, size_t width, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%0*llo", (int)(width - 1), (unsigned long long)v);

	if (n < 0 || (size_t)n != width - 1)
		return -EOVERFLOW;
	memcpy(f, tmp, width);
	return 0;
}

static int write_header(int fd, const char *name, uint64_t size)
{
	unsigned char h[USTAR_BLOCK];
	size_t namelen = strlen(name);
	int err;

	if (!namelen || namelen >= USTAR_NAME_LEN)
		return -ENAMETOOLONG;
	memset(h, 0, sizeof(h));
	memcpy(h + USTAR_NAME_OFF, name, namelen);
	if ((err = put_octal(h + USTAR_MODE_OFF, USTAR_MODE_LEN, 0644)) < 0 ||
	    (err = put_octal(h + USTAR_UID_OFF, USTAR_UID_LEN, 0)) < 0 ||
	    (err = put_octal(h + USTAR_GID_OFF, USTAR_GID_LEN, 0)) < 0 ||
	    (err = put_octal(h + USTAR_SIZE_OFF, USTAR_SIZE_LEN, size)) < 0 ||
	    (err = put_octal(h + USTAR_MTIME_OFF, USTAR_MTIME_LEN, (uint64_t)time(NULL))) < 0)
		return err;
	h[USTAR_TYPE_OFF] = USTAR_TYPE_REG;
	memcpy(h + USTAR_MAGIC_OFF, USTAR_MAGIC, USTAR_MAGIC_LEN);
	memcpy(h + USTAR_UNAME_OFF, "root", 4);
	memcpy(h + USTAR_GNAME_OFF, "root", 4);
	/* The checksum: six octal digits, a NUL and a space. */
	if ((err = put_octal(h + USTAR_CHKSUM_OFF, USTAR_CHKSUM_LEN - 1, ustar_checksum(h))) < 0)
		return err;
	h[USTAR_CHKSUM_OFF + USTAR_CHKSUM_LEN - 1] = ' ';
	return write_all(fd, h, sizeof(h));
}

static int write_padding(int fd, uint64_t size)
{
	static const char zero[USTAR_BLOCK];
	size_t pad = (size_t)((USTAR_BLOCK - size % USTAR_BLOCK) % USTAR_BLOCK);

	return pad ? write_all(fd, zero, pad) : 0;
}

int tar_out_buf(int fd, const char *name, const void *data, size_t len)
{
	int err = write_header(fd, name, len);

	if (!err && len)
		err = write_all(fd, data, len);
	if (!err)
		err = write_padding(fd, len);
	return err;
}

int tar_out_file(int fd, const char *name, int src, uint64_t max)
{
	char chunk[65536];
	struct stat st;
	uint64_t left;
	int err;

	if (fstat(src, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	if ((err = write_header(fd, name, (uint64_t)st.st_size)) < 0)
		return err;
	left = (uint64_t)st.st_size;
	for (off_t off = 0; left;) {
		size_t want = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
		ssize_t n = pread(src, chunk, want, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		if ((err = write_all(fd, chunk, (size_t)n)) < 0)
			return err;
		off += n;
		left -= (uint64_t)n;
	}
	return write_padding(fd, (uint64_t)st.st_size);
}

int tar_out_end(int fd)
{
	static const char zero[2 * USTAR_BLOCK];

	return write_all(fd, zero, sizeof(zero));
}
