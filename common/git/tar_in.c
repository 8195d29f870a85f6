#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "git/tar_in.h"
#include "base/ustar.h"
#include "base/banned.h"

void tar_in_init(struct tar_in *t, struct tar_in_file *files, size_t nfiles)
{
	memset(t, 0, sizeof(*t));
	buf_init(&t->err, 0);
	t->files = files;
	t->nfiles = nfiles;
	for (size_t i = 0; i < nfiles; i++) {
		files[i].seen = 0;
		files[i].complete = 0;
		files[i].size = 0;
	}
}

void tar_in_clear(struct tar_in *t)
{
	buf_release(&t->err);
}

int tar_in_ended(const struct tar_in *t)
{
	return t->zero_blocks >= 2;
}

__attribute__((format(printf, 3, 4))) static int refuse(struct tar_in *t, int err, const char *fmt,
                                                        ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&t->err, fmt, ap);
	va_end(ap);
	t->error = err;
	return err;
}

/* The name as the VM sent it, made safe to quote in a message. */
static void quote_name(const unsigned char *s, size_t n, char *out, size_t outsz)
{
	size_t o = 0;

	for (size_t i = 0; i < n && s[i]; i++) {
		if (o + 8 >= outsz) {
			snprintf(out + o, outsz - o, "...");
			return;
		}
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' && s[i] != '\\')
			out[o++] = (char)s[i];
		else
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", s[i]);
	}
	out[o] = '\0';
}

/*
 * A numeric field: optional leading spaces, at least one octal digit, then
 * only NULs and spaces to the end of the field.  No base-256, no sign.
 */
static int parse_octal(const unsigned char *f, size_t len, uint64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;
	int digits = 0;

	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > (UINT64_MAX >> 3))
			return -1;
		v = (v << 3) | (uint64_t)(f[i] - '0');
		digits++;
	}
	if (!digits)
		return -1;
	for (; i < len; i++)
		if (f[i] != '\0' && f[i] != ' ')
			return -1;
	*out = v;
	return 0;
}

static int is_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static const char *type_name(unsigned char type)
{
	switch (type) {
	case '1':
		return "a hard link";
	case '2':
		return "a symbolic link";
	case '3':
		return "a character device";
	case '4':
		return "a block device";
	case '5':
		return "a directory";
	case '6':
		return "a FIFO";
	case '7':
		return "a contiguous file";
	case 'x':
	case 'g':
		return "a pax extended header";
	case 'L':
	case 'K':
		return "a GNU long name";
	default:
		return "an unknown entry type";
	}
}

static int header(struct tar_in *t)
{
	const unsigned char *h = t->block;
	char qname[160];
	uint64_t chk, sum = 0, size, num;
	size_t namelen;
	struct tar_in_file *f = NULL;

	if (is_zero(h, USTAR_BLOCK)) {
		t->zero_blocks++;
		return 0;
	}
	if (t->zero_blocks)
		return refuse(t, -EPROTO, "the results have a lone zero block inside the archive");
	if (t->after_last)
		return refuse(t, -EPROTO, "%s must come last",
		              t->cur ? t->cur->name : "the last file");

	sum = ustar_checksum(h);
	if (parse_octal(h + USTAR_CHKSUM_OFF, USTAR_CHKSUM_LEN, &chk) < 0 || chk != sum)
		return refuse(t, -EPROTO, "a results tar header has a bad checksum");
	if (memcmp(h + USTAR_MAGIC_OFF, USTAR_MAGIC, USTAR_MAGIC_LEN) &&
	    memcmp(h + USTAR_MAGIC_OFF, USTAR_MAGIC_GNU, USTAR_MAGIC_LEN))
		return refuse(t, -EPROTO, "a results tar header is not ustar");

	namelen = strnlen((const char *)h + USTAR_NAME_OFF, USTAR_NAME_LEN);
	quote_name(h + USTAR_NAME_OFF, namelen, qname, sizeof(qname));
	if (!namelen)
		return refuse(t, -EPROTO, "a results tar entry has an empty name");
	if (!is_zero(h + USTAR_NAME_OFF + namelen, USTAR_NAME_LEN - namelen))
		return refuse(t, -EPROTO, "the name of '%s' has bytes after its end", qname);
	if (!is_zero(h + USTAR_PREFIX_OFF, USTAR_PREFIX_LEN))
		return refuse(t, -EPROTO, "'%s' has a path prefix", qname);
	if (memchr(h + USTAR_NAME_OFF, '/', namelen))
		return refuse(t, -EPROTO, "the file name '%s' has a slash", qname);
	/* the name's own bytes: the quoted one may end in "..." where it is cut */
	if (memmem(h + USTAR_NAME_OFF, namelen, "..", 2))
		return refuse(t, -EPROTO, "the file name '%s' has '..'", qname);
	for (size_t i = 0; i < t->nfiles; i++)
		if (strlen(t->files[i].name) == namelen &&
		    !memcmp(t->files[i].name, h + USTAR_NAME_OFF, namelen))
			f = &t->files[i];
	if (h[USTAR_TYPE_OFF] != USTAR_TYPE_REG && h[USTAR_TYPE_OFF] != '\0')
		return refuse(t, -EPROTO, "'%s' is %s", qname, type_name(h[USTAR_TYPE_OFF]));
	if (!f)
		return refuse(t, -EPROTO, "unexpected file '%s'", qname);
	if (f->seen)
		return refuse(t, -EPROTO, "'%s' sent twice", f->name);
	if (parse_octal(h + USTAR_MODE_OFF, USTAR_MODE_LEN, &num) < 0 ||
	    parse_octal(h + USTAR_UID_OFF, USTAR_UID_LEN, &num) < 0 ||
	    parse_octal(h + USTAR_GID_OFF, USTAR_GID_LEN, &num) < 0 ||
	    parse_octal(h + USTAR_MTIME_OFF, USTAR_MTIME_LEN, &num) < 0)
		return refuse(t, -EPROTO, "the header of '%s' has a field that is not octal",
		              f->name);
	if (parse_octal(h + USTAR_SIZE_OFF, USTAR_SIZE_LEN, &size) < 0)
		return refuse(t, -EPROTO, "the size of '%s' is not an octal number", f->name);
	if (size > f->max)
		return refuse(t, -EFBIG, "'%s' over its size limit of %llu bytes", f->name,
		              (unsigned long long)f->max);

	f->seen = 1;
	f->size = size;
	t->cur = f;
	t->data_left = size;
	t->pad_left = (USTAR_BLOCK - size % USTAR_BLOCK) % USTAR_BLOCK;
	if (!size) {
		f->complete = 1;
		t->after_last = f->last;
	}
	return 0;
}

int tar_in_feed(struct tar_in *t, const void *data, size_t n)
{
	const unsigned char *p = data;
	int ret;

	if (t->error)
		return t->error;
	while (n) {
		if (tar_in_ended(t)) {
			if (!is_zero(p, n))
				return refuse(t, -EPROTO,
				              "the results have data after the end of the archive");
			t->trailer += n;
			if (t->trailer > TAR_IN_MAX_TRAILER)
				return refuse(t, -EPROTO,
				              "the results have too much padding after the end");
			return 0;
		}
		if (t->data_left) {
			size_t k = n < t->data_left ? n : (size_t)t->data_left;

			if ((ret = write_all(t->cur->fd, p, k)) < 0)
				return refuse(t, ret, "cannot write '%s': %s", t->cur->name,
				              strerror(-ret));
			t->data_left -= k;
			p += k;
			n -= k;
			if (!t->data_left) {
				t->cur->complete = 1;
				t->after_last = t->cur->last;
			}
			continue;
		}
		if (t->pad_left) {
			size_t k = n < t->pad_left ? n : (size_t)t->pad_left;

			t->pad_left -= k;
			p += k;
			n -= k;
			continue;
		}
		{
			size_t k = sizeof(t->block) - t->block_len;

			if (k > n)
				k = n;
			memcpy(t->block + t->block_len, p, k);
			t->block_len += k;
			p += k;
			n -= k;
			if (t->block_len < sizeof(t->block))
				continue;
			t->block_len = 0;
			if ((ret = header(t)) < 0)
				return ret;
		}
	}
	return 0;
}

int tar_in_finish(struct tar_in *t)
{
	if (t->error)
		return t->error;
	if (tar_in_ended(t))
		return 0;
	if (t->data_left || t->pad_left)
		return refuse(t, -EPROTO, "the results end in the middle of '%s'", t->cur->name);
	return refuse(t, -EPROTO, "the results end before the end of the archive");
}
