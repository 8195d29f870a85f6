/*
 * A buffered, blocking HTTP/1.1 connection: a socket, maybe under TLS, with
 * a read buffer, read with the one HTTP parser (common/net/http.h: CRLF only,
 * the caps HTTP_MAX_LINE, HTTP_MAX_HEAD and HTTP_MAX_HEADERS).  aibox-broker
 * reads its client's request and its remote's answer with it
 * (docs/broker.md, "Requests").
 *
 * Functions return 0 (or a byte count) or a negative errno: -EBADMSG
 * malformed, -EFBIG past a cap, -ENODATA the peer closed before a message
 * began or ended, or the socket's own error (reads and writes block; the
 * caller bounds them with socket timeouts).
 */
#ifndef AIBOX_HCONN_H
#define AIBOX_HCONN_H

#include <openssl/ssl.h>
#include <sys/types.h>

#include "base/buf.h"
#include "net/http.h"

struct hconn {
	int fd;   /* -1: none; then only the bytes put into `in` are read */
	SSL *ssl; /* when set, reads and writes go through it */
	/*
	 * Another source of bytes (the fuzz target's): when set, reads call it
	 * instead: > 0 bytes, 0 at the end, or -errno.
	 */
	ssize_t (*read)(void *ctx, void *dst, size_t n);
	void *read_ctx;
	/*
	 * When set, called with 1 before each read or write of the socket
	 * that may block, and with 0 after it (aibox-broker marks the time a
	 * child waits on its client: docs/broker.md, "Limits").
	 */
	void (*wait)(void *ctx, int waiting);
	void *wait_ctx;
	struct buf in;
	size_t off; /* bytes of `in` already taken */
	int eof;
};

/*
 * Start c on fd (-1: none yet).  Bytes may be added to c->in before the
 * first read (a proxy's read-ahead): they come first.
 */
void hconn_init(struct hconn *c, int fd);

/* Free the TLS state and the buffer, and close the fd. */
void hconn_close(struct hconn *c);

/* Write all of data[0..n).  0 or -errno (-EPROTO for a TLS failure). */
int hconn_write(struct hconn *c, const void *data, size_t n);

/* A message head, parsed into its own copy of the bytes. */
struct hconn_head {
	struct buf raw;
	struct http_head h; /* points into raw */
};

#define HCONN_HEAD_INIT                                                                            \
	{                                                                                          \
		BUF_INIT                                                                           \
	}

void hconn_head_release(struct hconn_head *m);

/*
 * Read one head (a request when `request`, else a response) into m, which
 * must be released by the caller either way.  0, -EBADMSG refused by the
 * parser (a bare CR or LF, a malformed line, ...), -EFBIG past a cap (a
 * line, the head, the number of headers), -ENODATA the connection ended
 * first, or a read error.
 */
int hconn_read_head(struct hconn *c, int request, struct hconn_head *m);

/* A body being read, its framing taken off. */
struct hconn_body {
	struct hconn *c;
	struct http_body b;
};

/*
 * Start reading the body that follows head h on c: chunked, Content-Length,
 * else none for a request and up to the end of the connection for a
 * response.
 */
void hconn_body_init(struct hconn_body *b, struct hconn *c, const struct http_head *h, int request);

/*
 * Up to n payload bytes.  > 0, 0 at the body's end, -EBADMSG for broken
 * framing or a body that ends early, or a read error.
 */
ssize_t hconn_body_read(struct hconn_body *b, void *dst, size_t n);

/*
 * Inflate a gzip body whole into `out`, at most `max` bytes of output, and
 * add the compressed bytes read to *in_bytes.  0, -EFBIG past max, -EBADMSG
 * (not gzip, or anything after the gzip stream), -ENOMEM, or a
 * hconn_body_read() error.  Memory: out plus 64 KiB and zlib's state.
 */
int hconn_body_inflate(struct hconn_body *b, struct buf *out, size_t max,
                       unsigned long long *in_bytes);

#endif
