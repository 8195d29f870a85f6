#include "base/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/banned.h"

char buf_slopbuf[1];

void buf_init(struct buf *b, size_t hint)
{
	b->buf = buf_slopbuf;
	b->len = 0;
	b->alloc = 0;
	if (hint)
		buf_grow(b, hint);
}

void buf_release(struct buf *b)
{
	if (b->alloc)
		free(b->buf);
	buf_init(b, 0);
}

void buf_wipe_release(struct buf *b)
{
	if (b->alloc)
		explicit_bzero(b->buf, b->alloc);
	buf_release(b);
}

void buf_wipe_setlen(struct buf *b, size_t n)
{
	if (n < b->len)
		explicit_bzero(b->buf + n, b->len - n);
	buf_setlen(b, n);
}

void buf_reset(struct buf *b)
{
	buf_setlen(b, 0);
}

void buf_grow(struct buf *b, size_t extra)
{
	size_t want;

	if (extra > SIZE_MAX / 2 - b->len)
		BUG("buffer size overflow");
	want = b->len + extra + 1;
	if (want <= b->alloc)
		return;
	if (!b->alloc)
		b->buf = NULL;
	ALLOC_GROW(b->buf, want, b->alloc);
	if (b->len == 0)
		b->buf[0] = '\0';
}

void buf_setlen(struct buf *b, size_t n)
{
	if (!b->alloc) {
		/* Only 0 fits in the slop buffer, and it is already terminated. */
		if (n)
			BUG("buf_setlen beyond allocation");
		return;
	}
	if (n >= b->alloc)
		BUG("buf_setlen beyond allocation");
	b->len = n;
	b->buf[n] = '\0';
}

void buf_add(struct buf *b, const void *data, size_t n)
{
	if (!n)
		return;
	buf_grow(b, n);
	memcpy(b->buf + b->len, data, n);
	buf_setlen(b, b->len + n);
}

void buf_addstr(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

int buf_refuse(struct buf *err, int ret, const char *why)
{
	if (err)
		buf_addstr(err, why);
	return ret;
}

void buf_addch(struct buf *b, int c)
{
	char ch = (char)c;

	buf_add(b, &ch, 1);
}

void buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	buf_grow(b, 64);
	va_copy(cp, ap);
	n = vsnprintf(b->buf + b->len, b->alloc - b->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		BUG("vsnprintf failed");
	if ((size_t)n >= b->alloc - b->len) {
		buf_grow(b, (size_t)n);
		n = vsnprintf(b->buf + b->len, b->alloc - b->len, fmt, ap);
	}
	buf_setlen(b, b->len + (size_t)n);
}

void buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(b, fmt, ap);
	va_end(ap);
}

void buf_consume(struct buf *b, size_t n)
{
	if (n > b->len)
		n = b->len;
	if (!n)
		return;
	memmove(b->buf, b->buf + n, b->len - n);
	buf_setlen(b, b->len - n);
}

void buf_rtrim(struct buf *b)
{
	size_t n = b->len;

	while (n && strchr(" \t\r\n", b->buf[n - 1]))
		n--;
	if (b->alloc)
		buf_setlen(b, n);
}

char *buf_detach(struct buf *b, size_t *len)
{
	char *p;

	if (!b->alloc)
		buf_grow(b, 0);
	p = b->buf;
	if (len)
		*len = b->len;
	buf_init(b, 0);
	return p;
}

/* buf_read_fd(), with a deadline when timeout_ms >= 0. */
static ssize_t read_fd(struct buf *b, int fd, size_t max, int timeout_ms)
{
	size_t start = b->len;
	int64_t until = timeout_ms >= 0 ? clock_ms() + timeout_ms : 0;

	for (;;) {
		size_t room;
		ssize_t n;

		if (timeout_ms >= 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			int64_t left = until - clock_ms();
			int r;

			r = left > 0 ? poll(&pfd, 1, (int)left) : 0;
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return -errno;
			if (!r)
				return -ETIMEDOUT;
		}
		buf_grow(b, 8192);
		room = b->alloc - b->len - 1;
		if (b->len - start + room > max + 1)
			room = max + 1 - (b->len - start);
		n = read(fd, b->buf + b->len, room);
		if (n < 0) {
			if (errno == EINTR || (timeout_ms >= 0 && errno == EAGAIN))
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		buf_setlen(b, b->len + (size_t)n);
		if (b->len - start > max) {
			buf_setlen(b, start + max);
			return -EFBIG;
		}
	}
	return (ssize_t)(b->len - start);
}

ssize_t buf_read_fd(struct buf *b, int fd, size_t max)
{
	return read_fd(b, fd, max, -1);
}

ssize_t buf_read_fd_within(struct buf *b, int fd, size_t max, int timeout_ms)
{
	return read_fd(b, fd, max, timeout_ms < 0 ? 0 : timeout_ms);
}

ssize_t buf_read_file(struct buf *b, const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t ret;

	if (fd < 0)
		return -errno;
	ret = buf_read_fd(b, fd, max);
	close(fd);
	return ret;
}

int write_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int buf_write_file(const struct buf *b, const char *path, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode);
	int ret;

	if (fd < 0)
		return -errno;
	ret = write_all(fd, b->buf, b->len);
	if (close(fd) < 0 && !ret)
		ret = -errno;
	return ret;
}
