/* A buffered, blocking HTTP/1.1 connection: see hconn.h. */
#include "net/hconn.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/err.h"
#include "base/banned.h"

#define FILL_SIZE 65536

void hconn_init(struct hconn *c, int fd)
{
	c->fd = fd;
	c->ssl = NULL;
	c->read = NULL;
	c->read_ctx = NULL;
	c->wait = NULL;
	c->wait_ctx = NULL;
	buf_init(&c->in, 0);
	c->off = 0;
	c->eof = 0;
}

void hconn_close(struct hconn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_release(&c->in);
	c->off = 0;
}

static ssize_t socket_read(struct hconn *c, void *dst, size_t n);

/*
 * Up to n bytes from the socket: > 0, 0 at the end, or -errno; -ETIMEDOUT
 * when the socket's receive time-out passed without a byte.
 */
static ssize_t raw_read(struct hconn *c, void *dst, size_t n)
{
	ssize_t r;

	if (c->wait)
		c->wait(c->wait_ctx, 1);
	r = socket_read(c, dst, n);
	if (c->wait)
		c->wait(c->wait_ctx, 0);
	return r == -EAGAIN || r == -EWOULDBLOCK ? -ETIMEDOUT : r;
}

static ssize_t socket_read(struct hconn *c, void *dst, size_t n)
{
	if (c->read)
		return c->read(c->read_ctx, dst, n);
	if (c->fd < 0)
		return 0;
	if (c->ssl) {
		int r = SSL_read(c->ssl, dst, n > INT32_MAX ? INT32_MAX : (int)n);

		if (r > 0)
			return r;
		switch (SSL_get_error(c->ssl, r)) {
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		case SSL_ERROR_SYSCALL:
			return errno ? -errno : 0;
		default:
			return -EPROTO;
		}
	}
	for (;;) {
		ssize_t r = read(c->fd, dst, n);

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

/* More bytes after the ones not taken yet.  > 0, 0 at the end, or -errno. */
static ssize_t fill(struct hconn *c)
{
	ssize_t r;

	if (c->eof)
		return 0;
	if (c->off) {
		buf_consume(&c->in, c->off);
		c->off = 0;
	}
	buf_grow(&c->in, FILL_SIZE);
	r = raw_read(c, c->in.buf + c->in.len, FILL_SIZE);
	if (r > 0)
		buf_setlen(&c->in, c->in.len + (size_t)r);
	else if (r == 0)
		c->eof = 1;
	return r;
}

static int socket_write(struct hconn *c, const void *data, size_t n);

int hconn_write(struct hconn *c, const void *data, size_t n)
{
	int r;

	if (c->wait)
		c->wait(c->wait_ctx, 1);
	r = socket_write(c, data, n);
	if (c->wait)
		c->wait(c->wait_ctx, 0);
	return r == -EAGAIN || r == -EWOULDBLOCK ? -ETIMEDOUT : r;
}

static int socket_write(struct hconn *c, const void *data, size_t n)
{
	const char *p = data;

	if (!c->ssl)
		return write_all(c->fd, data, n);
	while (n) {
		int k = n > 1 << 20 ? 1 << 20 : (int)n;
		int r = SSL_write(c->ssl, p, k);

		if (r <= 0)
			return SSL_get_error(c->ssl, r) == SSL_ERROR_SYSCALL && errno ? -errno
			                                                              : -EPROTO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void hconn_head_release(struct hconn_head *m)
{
	buf_release(&m->raw);
}

static int parse(int request, const char *p, size_t n, struct http_head *h)
{
	return request ? http_parse_request(p, n, h, NULL) : http_parse_response(p, n, h, NULL);
}

int hconn_read_head(struct hconn *c, int request, struct hconn_head *m)
{
	for (;;) {
		size_t avail = c->in.len - c->off;
		ssize_t r;

		if (avail) {
			int k = parse(request, c->in.buf + c->off, avail, &m->h);

			if (k > 0) {
				buf_reset(&m->raw);
				buf_add(&m->raw, c->in.buf + c->off, (size_t)k);
				c->off += (size_t)k;
				/* The same bytes again, so that m->h points into m->raw. */
				return parse(request, m->raw.buf, m->raw.len, &m->h) == k
				           ? 0
				           : -EBADMSG;
			}
			if (k < 0)
				return k == -EMSGSIZE ? -EFBIG : -EBADMSG;
			if (avail >= HTTP_MAX_HEAD)
				return -EFBIG;
		}
		r = fill(c);
		if (r == 0)
			return -ENODATA;
		if (r < 0)
			return (int)r;
	}
}

void hconn_body_init(struct hconn_body *b, struct hconn *c, const struct http_head *h, int request)
{
	b->c = c;
	if (h->chunked)
		http_body_init(&b->b, BODY_CHUNKED, 0);
	else if (h->content_length >= 0)
		http_body_init(&b->b, BODY_LENGTH, (uint64_t)h->content_length);
	else
		http_body_init(&b->b, request ? BODY_NONE : BODY_CLOSE, 0);
}

ssize_t hconn_body_read(struct hconn_body *b, void *dst, size_t n)
{
	struct hconn *c = b->c;

	while (!b->b.done && n) {
		size_t avail = c->in.len - c->off, got = 0;
		long k;

		if (!avail) {
			ssize_t r = fill(c);

			if (r < 0)
				return r;
			if (r == 0) {
				if (b->b.kind != BODY_CLOSE)
					return -EBADMSG; /* ended early */
				b->b.done = 1;
				return 0;
			}
			continue;
		}
		k = http_body_decode(&b->b, c->in.buf + c->off, avail < n ? avail : n, dst, &got,
		                     NULL);
		if (k < 0)
			return -EBADMSG;
		c->off += (size_t)k;
		if (got)
			return (ssize_t)got;
	}
	return 0;
}

/* Inflate n bytes at in into out, at most max bytes in all.  0 or -errno. */
static int inflate_some(z_stream *zs, int *zr, const char *in, size_t n, struct buf *out,
                        size_t max)
{
	zs->next_in = (unsigned char *)in;
	zs->avail_in = (unsigned)n;
	while (zs->avail_in && *zr != Z_STREAM_END) {
		size_t room = FILL_SIZE;

		if (out->len >= max)
			return -EFBIG;
		if (room > max - out->len + 1)
			room = max - out->len + 1;
		buf_grow(out, room);
		zs->next_out = (unsigned char *)out->buf + out->len;
		zs->avail_out = (unsigned)room;
		*zr = inflate(zs, Z_NO_FLUSH);
		if (*zr != Z_OK && *zr != Z_STREAM_END && *zr != Z_BUF_ERROR)
			return -EBADMSG;
		buf_setlen(out, out->len + (room - zs->avail_out));
		if (out->len > max)
			return -EFBIG;
	}
	/* Nothing may follow the gzip stream. */
	return *zr == Z_STREAM_END && zs->avail_in ? -EBADMSG : 0;
}

int hconn_body_inflate(struct hconn_body *b, struct buf *out, size_t max,
                       unsigned long long *in_bytes)
{
	z_stream zs;
	char *in = xmalloc(FILL_SIZE);
	int r = 0, zr = Z_OK;
	char extra;
	ssize_t n;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
		free(in);
		return -ENOMEM;
	}
	while (zr != Z_STREAM_END) {
		n = hconn_body_read(b, in, FILL_SIZE);
		if (n <= 0) {
			r = n < 0 ? (int)n : -EBADMSG;
			goto out;
		}
		*in_bytes += (unsigned long long)n;
		r = inflate_some(&zs, &zr, in, (size_t)n, out, max);
		if (r < 0)
			goto out;
	}
	/* Nothing may follow the gzip stream in the body either. */
	n = hconn_body_read(b, &extra, 1);
	if (n != 0)
		r = n < 0 ? (int)n : -EBADMSG;
out:
	inflateEnd(&zs);
	free(in);
	return r;
}
