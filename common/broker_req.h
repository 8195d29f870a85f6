/*
 * Reading HTTP/1.1 messages as aibox-broker needs them (docs/broker.md,
 * "Requests"): a buffered byte source, a message head, a body framed by
 * Content-Length, chunked or the end of the connection, a gzip body inflated
 * under a cap, and the request target's remote number.
 *
 * The bytes come from a client in the VM (requests) or from a remote
 * (answers): every line, head and body has a hard cap, and whatever is
 * malformed is refused, never repaired.  Functions return 0 (or a byte
 * count) or a negative errno: -EBADMSG malformed, -EFBIG past a cap,
 * -ENODATA the source ended before the message did, or the source's own
 * error.  fuzz/fuzz-broker-request.c runs all of it on any bytes;
 * t/6001 and t/6002 test it through the broker.
 */
#ifndef AIBOX_BROKER_REQ_H
#define AIBOX_BROKER_REQ_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

/* Caps on a message head: each line, all of it, the number of headers. */
#define BREQ_LINE_MAX 8192
#define BREQ_HEAD_MAX 65536
#define BREQ_HEADERS_MAX 100

/* Remote numbers in a path: decimal, no leading zero, below this. */
#define BREQ_REMOTES_MAX 1000

/*
 * A buffered byte source.  `read` fills dst with up to n bytes and returns
 * how many (> 0), 0 at the end, or -errno; `ctx` is its own.  Bytes may be
 * put into `in` before the first read (a proxy's read-ahead): they come
 * first.
 */
struct breq_src {
	ssize_t (*read)(void *ctx, void *dst, size_t n);
	void *ctx;
	struct buf in;
	size_t off; /* bytes of `in` already taken */
	int eof;
};

#define BREQ_SRC_INIT(fn, c) { (fn), (c), BUF_INIT, 0, 0 }

void breq_src_release(struct breq_src *s);

/* Bytes buffered and not yet taken. */
size_t breq_avail(const struct breq_src *s);

/* Up to n bytes, buffered ones first.  > 0, 0 at the end, or -errno. */
ssize_t breq_read(struct breq_src *s, void *dst, size_t n);

/*
 * One line ending in LF, the LF and a CR before it dropped, into `line`:
 * 0, -EFBIG when it would be longer than max bytes, -ENODATA at the end.
 */
int breq_getline(struct breq_src *s, struct buf *line, size_t max);

struct breq_header {
	char *name;
	char *value; /* leading and trailing blanks dropped */
};

/* A message head and its body's framing. */
struct breq_msg {
	char *line; /* the request or status line */
	struct breq_header *h;
	size_t nh, h_alloc;
	int chunked;	  /* Transfer-Encoding: chunked */
	long long length; /* Content-Length, or -1 */
};

#define BREQ_MSG_INIT { NULL, NULL, 0, 0, 0, -1 }

void breq_msg_release(struct breq_msg *m);

/*
 * Read a head: the first line, then headers up to an empty line (LF or
 * CRLF).  Refused (-EBADMSG): a NUL in the first line, a header name that
 * is not a token or an empty one, control bytes (but tab) in a value,
 * obsolete line folding, Transfer-Encoding other than "chunked", a
 * Content-Length that is not a plain number, either of them twice, both
 * together.  -EFBIG past BREQ_LINE_MAX, BREQ_HEADERS_MAX or BREQ_HEAD_MAX.
 * m must be fresh (BREQ_MSG_INIT) and is released by the caller either way.
 */
int breq_read_head(struct breq_src *s, struct breq_msg *m);

/* The first header's value (name compared without case), or NULL. */
const char *breq_get(const struct breq_msg *m, const char *name);

/* How many headers have this name. */
size_t breq_count(const struct breq_msg *m, const char *name);

/* A body being read. */
struct breq_body {
	struct breq_src *s;
	int chunked;
	long long left; /* of Content-Length or this chunk; -1: to the end */
	int done;
};

/*
 * Start reading the body of m from s: chunked, Content-Length, or when
 * to_end (answers only) up to the end of the source; else none.
 */
void breq_body_init(struct breq_body *b, struct breq_src *s, const struct breq_msg *m, int to_end);

/*
 * Up to n bytes of the body (framing removed).  > 0, 0 at its end (chunked
 * trailers, at most BREQ_HEAD_MAX bytes, read and dropped), -EBADMSG for
 * broken framing or a body that ends early, or the source's error.
 */
ssize_t breq_body_read(struct breq_body *b, void *dst, size_t n);

/*
 * Inflate a gzip body whole into `out`, at most `max` bytes of output, and
 * add the compressed bytes read to *in_bytes.  0, -EFBIG past max, -EBADMSG
 * (not gzip, or anything after the gzip stream), -ENOMEM, or a
 * breq_body_read() error.  Memory: out plus 64 KiB and zlib's state.
 */
int breq_inflate(struct breq_body *b, struct buf *out, size_t max, unsigned long long *in_bytes);

/*
 * The remote number at the start of s[0..n): decimal digits only, no
 * leading zero ("0" itself is fine), below BREQ_REMOTES_MAX, and the whole
 * of s[0..n).  0 with *idx set, or -EINVAL.
 */
int breq_remote_number(const char *s, size_t n, size_t *idx);

/*
 * Split a request target into the remote number and the rest: origin form
 * "/<n>/rest" or absolute form "http://<host>/<n>/rest" (the host is not
 * looked at).  After "/<n>/", one ".git/" and any run of '/' are skipped
 * (insteadOf rewrites by prefix, docs/broker.md "In the VM").  *rest
 * points into target.  0 or -EINVAL.
 */
int breq_parse_target(const char *target, size_t *idx, const char **rest);

#endif
