/*
 * A strict HTTP/1.1 message-head parser and body framing tracker, for the
 * proxy (untrusted input from the VM, and the answers of upstream servers).
 *
 * Strict means: every line ends in CRLF (a bare CR or LF is refused),
 * obs-fold is refused, header names are tokens with the colon right after
 * them (in a request, and in any trailer, without "_": some servers read
 * Transfer_Encoding as Transfer-Encoding), values hold no control
 * characters, Content-Length is one plain decimal number given once,
 * Transfer-Encoding is "chunked" given once and never together with
 * Content-Length, and the request line and the head have hard caps.  A
 * message is refused, never repaired.
 *
 * The parsed head points into the caller's buffer: keep the buffer as it is
 * while the head is in use.
 */
#ifndef AIBOX_HTTP_H
#define AIBOX_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct buf;

#define HTTP_MAX_LINE    8192  /* request line, status line, one header line */
#define HTTP_MAX_HEAD    16384 /* the whole head, empty line included */
#define HTTP_MAX_HEADERS 100

struct http_header {
	const char *name, *value;
	size_t name_len, value_len;
};

struct http_head {
	/* Request: method and target; response: status and reason in target. */
	const char *method, *target;
	size_t method_len, target_len;
	int status;      /* responses only */
	int minor;       /* HTTP/1.<minor>: 0 or 1 */
	size_t head_len; /* bytes up to and including the empty line */
	int nhdr;
	struct http_header hdr[HTTP_MAX_HEADERS];

	/* Filled from the headers. */
	int64_t content_length; /* -1 when absent */
	int chunked;            /* Transfer-Encoding: chunked */
	int conn_close;         /* Connection: close (or HTTP/1.0 without keep-alive) */
	int expect_continue;    /* Expect: 100-continue */
	const char *host;       /* the Host header's value, or NULL */
	size_t host_len;
};

/*
 * Parse a request head from the start of buf[0..len).  Returns the head's
 * length (> 0) when complete, 0 when more bytes are needed (the caller
 * refuses when len reached HTTP_MAX_HEAD), or -EBADMSG with a short reason
 * ("bare CR or LF in the head", ...) appended to err when the bytes are
 * refused; -EMSGSIZE (with the reason) when they are refused for a cap: a
 * line, the head or the number of headers (a server answers 413 rather than
 * 400).  Refused or not, h->method and h->target are the request line's
 * method and target as sent (a token, and bytes without a space, not yet
 * checked) once that line is whole and has both, else NULL.  Here and
 * below, err may be NULL, and nothing is appended to it (or allocated) when
 * the bytes are taken.
 */
int http_parse_request(const char *buf, size_t len, struct http_head *h, struct buf *err);

/* The same for a response head ("HTTP/1.1 200 OK"). */
int http_parse_response(const char *buf, size_t len, struct http_head *h, struct buf *err);

/* Case-insensitive equality of a header name with a lowercase string. */
int http_name_is(const struct http_header *hd, const char *lower);

/*
 * The first header of h named `lower` (compared without case), or NULL; when
 * count is not NULL, *count is how many headers have that name.
 */
const struct http_header *http_header(const struct http_head *h, const char *lower, int *count);

/*
 * Split an authority "host:port", "host" (default_port, 0 to require a
 * port), "[v6]:port" or "[v6]" into a lowercase host without brackets and a
 * port.  The host is checked to be a valid DNS name or an IP literal; host
 * must hold hostsz bytes.  0, or -EINVAL with the reason appended to err.
 */
int http_split_authority(const char *s, size_t n, int default_port, char *host, size_t hostsz,
                         int *port, struct buf *err);

/*
 * Is p[0..n) an origin path the key forwarding may pass on: "/v1/..." or
 * "/api/hello" (a query allowed after either), plain printable ASCII, the
 * path only RFC 3986 pchars and "/", with no dot segment in any spelling, no
 * encoded slash or backslash, no path parameter (";" or "%3B"), no empty
 * segment and no fragment.  0 yes, or -EINVAL with the reason appended to err.
 */
int http_api_path_ok(const char *p, size_t n, struct buf *err);

/* The framing of a body, and how much of it is left. */
enum http_body_kind {
	BODY_NONE,   /* no body: done at once */
	BODY_LENGTH, /* Content-Length bytes */
	BODY_CHUNKED,
	BODY_CLOSE, /* until the connection closes (responses only) */
};

struct http_body {
	enum http_body_kind kind;
	uint64_t left; /* BODY_LENGTH: bytes to go; BODY_CHUNKED: of this chunk */
	int state;     /* chunked parser state */
	unsigned line; /* length of the current size/trailer line */
	unsigned ndigits;
	int done;
	/*
	 * Optional, set after http_body_init(): called by http_body_feed() with
	 * each piece of the body's content (without the chunked framing), in
	 * order, as it is fed.
	 */
	void (*content)(void *ctx, const char *p, size_t n);
	void *content_ctx;
};

void http_body_init(struct http_body *b, enum http_body_kind kind, uint64_t length);

/*
 * Feed n body bytes at p.  Returns how many belong to this body (<= n; less
 * than n only when the body ended inside p, and then b->done is set), or
 * -EBADMSG with the reason appended to err when chunked framing is broken (a trailer line that is
 * not "name: value", the name a token without "_", counts as broken).  The bytes are not changed:
 * the proxy passes the framing through as it came.
 */
long http_body_feed(struct http_body *b, const char *p, size_t n, struct buf *err);

/*
 * http_body_feed() for a reader that wants the payload: the same bytes are
 * taken and the same framing refused, and the payload among them (the chunk
 * data, without sizes, extensions, CRLFs and trailers) is copied to out,
 * which must hold n bytes; *out_len is how many.
 */
long http_body_decode(struct http_body *b, const char *p, size_t n, char *out, size_t *out_len,
                      struct buf *err);

/*
 * The reason phrase of an HTTP status (RFC 9110's words: "OK", "Bad
 * Request", "Bad Gateway", ...), "Error" for a status not in the table.
 * The one table for every status line we write: the proxy's answers, the
 * broker's own and the upstream's it relays.
 */
const char *http_reason(int status);

/* The two heads written without a table: the interim 100 and a tunnel's start. */
#define HTTP_CONTINUE_HEAD "HTTP/1.1 100 Continue\r\n\r\n"
#define HTTP_TUNNEL_HEAD   "HTTP/1.1 200 Connection established\r\n\r\n"

#endif
