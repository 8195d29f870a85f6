/* aibox-broker's HTTP reading: see broker_req.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "broker_req.h"
#include "err.h"
#include "num.h"
#include "banned.h"

#define FILL_SIZE 65536

void breq_src_release(struct breq_src *s)
{
	buf_release(&s->in);
	s->off = 0;
}

size_t breq_avail(const struct breq_src *s)
{
	return s->in.len - s->off;
}

/* Read more into the buffer.  > 0 bytes, 0 at the end, or -errno. */
static ssize_t src_fill(struct breq_src *s)
{
	ssize_t r;

	if (s->eof)
		return 0;
	if (s->off && s->off == s->in.len) {
		buf_reset(&s->in);
		s->off = 0;
	}
	buf_grow(&s->in, FILL_SIZE);
	r = s->read(s->ctx, s->in.buf + s->in.len, FILL_SIZE);
	if (r > 0)
		buf_setlen(&s->in, s->in.len + (size_t)r);
	else if (r == 0)
		s->eof = 1;
	return r;
}

ssize_t breq_read(struct breq_src *s, void *dst, size_t n)
{
	if (!n)
		return 0;
	if (!breq_avail(s)) {
		ssize_t r;

		if (n >= FILL_SIZE) {
			if (s->eof)
				return 0;
			r = s->read(s->ctx, dst, n);
			if (r == 0)
				s->eof = 1;
			return r;
		}
		r = src_fill(s);
		if (r <= 0)
			return r;
	}
	if (n > breq_avail(s))
		n = breq_avail(s);
	memcpy(dst, s->in.buf + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

int breq_getline(struct breq_src *s, struct buf *line, size_t max)
{
	buf_reset(line);
	for (;;) {
		const char *start = s->in.buf + s->off;
		const char *nl = memchr(start, '\n', breq_avail(s));
		ssize_t r;

		if (nl) {
			size_t n = (size_t)(nl - start);

			if (n > max)
				return -EFBIG;
			buf_add(line, start, n);
			s->off += n + 1;
			if (line->len && line->buf[line->len - 1] == '\r')
				buf_setlen(line, line->len - 1);
			return 0;
		}
		if (breq_avail(s) > max)
			return -EFBIG;
		r = src_fill(s);
		if (r == 0)
			return -ENODATA;
		if (r < 0)
			return (int)r;
	}
}

void breq_msg_release(struct breq_msg *m)
{
	free(m->line);
	for (size_t i = 0; i < m->nh; i++) {
		free(m->h[i].name);
		free(m->h[i].value);
	}
	free(m->h);
	*m = (struct breq_msg)BREQ_MSG_INIT;
}

const char *breq_get(const struct breq_msg *m, const char *name)
{
	for (size_t i = 0; i < m->nh; i++)
		if (!strcasecmp(m->h[i].name, name))
			return m->h[i].value;
	return NULL;
}

size_t breq_count(const struct breq_msg *m, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nh; i++)
		n += !strcasecmp(m->h[i].name, name);
	return n;
}

static int token_char(int c)
{
	return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* One header line into m.  0 or -EBADMSG. */
static int add_header(struct breq_msg *m, const struct buf *line)
{
	const char *colon = memchr(line->buf, ':', line->len);
	const char *v, *end;

	if (!colon || colon == line->buf)
		return -EBADMSG;
	for (const char *p = line->buf; p < colon; p++)
		if (!token_char((unsigned char)*p))
			return -EBADMSG;
	for (size_t i = (size_t)(colon - line->buf); i < line->len; i++) {
		unsigned char ch = (unsigned char)line->buf[i];

		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return -EBADMSG;
	}
	v = colon + 1;
	end = line->buf + line->len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	ALLOC_GROW(m->h, m->nh + 1, m->h_alloc);
	m->h[m->nh].name = xstrndup(line->buf, (size_t)(colon - line->buf));
	m->h[m->nh].value = xstrndup(v, (size_t)(end - v));
	m->nh++;
	return 0;
}

/* Transfer-Encoding and Content-Length into m's framing.  0 or -EBADMSG. */
static int read_framing(struct breq_msg *m)
{
	const char *te = breq_get(m, "Transfer-Encoding");
	const char *cl = breq_get(m, "Content-Length");

	if (breq_count(m, "Transfer-Encoding") > 1 || breq_count(m, "Content-Length") > 1 ||
	    (te && cl))
		return -EBADMSG;
	if (te) {
		if (strcasecmp(te, "chunked"))
			return -EBADMSG;
		m->chunked = 1;
	}
	if (cl) {
		long v;

		if (parse_long(cl, 0, LONG_MAX, &v) < 0)
			return -EBADMSG;
		m->length = v;
	}
	return 0;
}

int breq_read_head(struct breq_src *s, struct breq_msg *m)
{
	struct buf line = BUF_INIT;
	size_t total = 0;
	int r;

	r = breq_getline(s, &line, BREQ_LINE_MAX);
	if (r < 0)
		goto out;
	m->line = xstrdup(line.buf);
	if (strlen(m->line) != line.len) {
		r = -EBADMSG;
		goto out;
	}
	for (;;) {
		r = breq_getline(s, &line, BREQ_LINE_MAX);
		if (r < 0)
			goto out;
		if (!line.len)
			break;
		total += line.len + 2;
		if (total > BREQ_HEAD_MAX || m->nh >= BREQ_HEADERS_MAX) {
			r = -EFBIG;
			goto out;
		}
		r = add_header(m, &line);
		if (r < 0)
			goto out;
	}
	r = read_framing(m);
out:
	buf_release(&line);
	return r;
}

void breq_body_init(struct breq_body *b, struct breq_src *s, const struct breq_msg *m, int to_end)
{
	b->s = s;
	b->chunked = m->chunked;
	b->done = 0;
	if (m->chunked)
		b->left = 0;
	else if (m->length >= 0)
		b->left = m->length;
	else
		b->left = to_end ? -1 : 0;
	if (!m->chunked && b->left == 0)
		b->done = 1;
}

/* Trailers after the last chunk, up to an empty line, dropped.  0 or -errno. */
static int skip_trailers(struct breq_src *s)
{
	struct buf line = BUF_INIT;
	size_t total = 0;
	int err;

	for (;;) {
		err = breq_getline(s, &line, BREQ_LINE_MAX);
		if (err < 0) {
			err = err == -ENODATA ? -EBADMSG : err;
			break;
		}
		if (!line.len)
			break;
		total += line.len;
		if (total > BREQ_HEAD_MAX) {
			err = -EFBIG;
			break;
		}
	}
	buf_release(&line);
	return err;
}

/* The size line of the next chunk.  0 with *size, or -errno. */
static int chunk_size(struct breq_src *s, unsigned long long *size)
{
	struct buf line = BUF_INIT;
	size_t i;
	int err;

	*size = 0;
	err = breq_getline(s, &line, 1024);
	if (err < 0) {
		err = err == -ENODATA ? -EBADMSG : err;
		goto out;
	}
	for (i = 0; i < line.len && isxdigit((unsigned char)line.buf[i]); i++) {
		int c = tolower((unsigned char)line.buf[i]);

		if (*size > (1ull << 40)) {
			err = -EBADMSG;
			goto out;
		}
		*size = *size * 16 + (unsigned)(isdigit(c) ? c - '0' : c - 'a' + 10);
	}
	if (!i || (i < line.len && line.buf[i] != ';' && line.buf[i] != ' ' && line.buf[i] != '\t'))
		err = -EBADMSG;
out:
	buf_release(&line);
	return err;
}

ssize_t breq_body_read(struct breq_body *b, void *dst, size_t n)
{
	ssize_t r;

	if (b->done || !n)
		return 0;
	if (b->chunked && b->left == 0) {
		unsigned long long size;
		int err = chunk_size(b->s, &size);

		if (err < 0)
			return err;
		if (size == 0) {
			err = skip_trailers(b->s);
			if (err < 0)
				return err;
			b->done = 1;
			return 0;
		}
		b->left = (long long)size;
	}
	if (b->left >= 0 && (unsigned long long)n > (unsigned long long)b->left)
		n = (size_t)b->left;
	r = breq_read(b->s, dst, n);
	if (r < 0)
		return r;
	if (r == 0) {
		if (b->left < 0) {
			b->done = 1;
			return 0;
		}
		return -EBADMSG; /* ended early */
	}
	if (b->left > 0) {
		b->left -= r;
		if (b->left == 0) {
			if (b->chunked) {
				struct buf crlf = BUF_INIT;
				int err = breq_getline(b->s, &crlf, 2);
				size_t k = crlf.len;

				buf_release(&crlf);
				if (err < 0 || k)
					return -EBADMSG;
			} else {
				b->done = 1;
			}
		}
	}
	return r;
}

int breq_inflate(struct breq_body *b, struct buf *out, size_t max, unsigned long long *in_bytes)
{
	z_stream zs;
	char *in = xmalloc(FILL_SIZE);
	int r = 0, zr = Z_OK;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
		free(in);
		return -ENOMEM;
	}
	while (zr != Z_STREAM_END) {
		ssize_t n = breq_body_read(b, in, FILL_SIZE);

		if (n < 0) {
			r = (int)n;
			goto out;
		}
		if (n == 0) {
			r = -EBADMSG;
			goto out;
		}
		*in_bytes += (unsigned long long)n;
		zs.next_in = (unsigned char *)in;
		zs.avail_in = (unsigned)n;
		while (zs.avail_in && zr != Z_STREAM_END) {
			size_t room = FILL_SIZE;

			if (out->len >= max) {
				r = -EFBIG;
				goto out;
			}
			if (room > max - out->len + 1)
				room = max - out->len + 1;
			buf_grow(out, room);
			zs.next_out = (unsigned char *)out->buf + out->len;
			zs.avail_out = (unsigned)room;
			zr = inflate(&zs, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
				r = -EBADMSG;
				goto out;
			}
			buf_setlen(out, out->len + (room - zs.avail_out));
			if (out->len > max) {
				r = -EFBIG;
				goto out;
			}
		}
		if (zr == Z_STREAM_END && zs.avail_in) {
			r = -EBADMSG;
			goto out;
		}
	}
	{
		/* Nothing may follow the gzip stream. */
		char extra;
		ssize_t n = breq_body_read(b, &extra, 1);

		if (n != 0)
			r = n < 0 ? (int)n : -EBADMSG;
	}
out:
	inflateEnd(&zs);
	free(in);
	return r;
}

int breq_remote_number(const char *s, size_t n, size_t *idx)
{
	size_t v = 0;

	if (!n || (s[0] == '0' && n > 1))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (size_t)(s[i] - '0');
		if (v >= BREQ_REMOTES_MAX)
			return -EINVAL;
	}
	*idx = v;
	return 0;
}

int breq_parse_target(const char *target, size_t *idx, const char **rest)
{
	const char *p = target, *slash;

	if (!strncasecmp(p, "http://", 7)) {
		p = strchr(p + 7, '/');
		if (!p)
			return -EINVAL;
	}
	if (*p != '/')
		return -EINVAL;
	p++;
	slash = strchr(p, '/');
	if (!slash || breq_remote_number(p, (size_t)(slash - p), idx) < 0)
		return -EINVAL;
	p = slash + 1;
	if (!strncmp(p, ".git/", 5))
		p += 5;
	while (*p == '/')
		p++;
	*rest = p;
	return 0;
}
