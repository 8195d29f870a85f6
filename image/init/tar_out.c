#include "tar_out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "banned.h"

#define BLOCK 512

/* Put v in octal into the width-byte field f: width-1 digits and a NUL. */
static int put_octal(char *f, size_t width, uint64_t v)
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
	char h[BLOCK];
	size_t namelen = strlen(name);
	unsigned sum = 0;
	int err;

	if (!namelen || namelen >= 100)
		return -ENAMETOOLONG;
	memset(h, 0, sizeof(h));
	memcpy(h, name, namelen);
	if ((err = put_octal(h + 100, 8, 0644)) < 0 || (err = put_octal(h + 108, 8, 0)) < 0 ||
	    (err = put_octal(h + 116, 8, 0)) < 0 || (err = put_octal(h + 124, 12, size)) < 0 ||
	    (err = put_octal(h + 136, 12, (uint64_t)time(NULL))) < 0)
		return err;
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	for (size_t i = 0; i < sizeof(h); i++)
		sum += (unsigned char)h[i];
	/* The checksum: six octal digits, a NUL and a space. */
	if ((err = put_octal(h + 148, 7, sum)) < 0)
		return err;
	h[155] = ' ';
	return write_all(fd, h, sizeof(h));
}

static int write_padding(int fd, uint64_t size)
{
	static const char zero[BLOCK];
	size_t pad = (size_t)((BLOCK - size % BLOCK) % BLOCK);

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
	static const char zero[2 * BLOCK];

	return write_all(fd, zero, sizeof(zero));
}
