/*
 * libFuzzer target for the proxy's HTTP parsing (common/net/http.c), on every
 * input:
 *   - a stream of requests as the proxy reads them from the VM: each head,
 *     the forwarding checks on its target and Host (the key forwarding path
 *     check, authority splitting), then its body framed as
 *     common/proxy/proxy_forward.c frames it (chunked, Content-Length or none), fed in
 *     pieces, then the next request on the same connection;
 *   - a stream of responses as the proxy reads them from upstream: interim
 *     1xx heads dropped, then the final head and its body (chunked with
 *     trailers, Content-Length, or until close);
 *   - the whole input as chunked framing on its own.
 * Besides not crashing: heads and headers lie inside the input, a body
 * never takes more bytes than it was fed, and http_body_decode() (the
 * broker's reading) takes and refuses exactly what http_body_feed() does,
 * its payload never more than the bytes taken; a refusal comes with a reason
 * and anything taken with none.  `make fuzz && build/fuzz/fuzz-http`.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "net/http.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MESSAGES 8

static void check_head(const struct http_head *h, const char *p, size_t len)
{
	if (h->head_len == 0 || h->head_len > len || h->nhdr < 0 || h->nhdr > HTTP_MAX_HEADERS)
		__builtin_trap();
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (hd->name < p || hd->name + hd->name_len > p + h->head_len || hd->value < p ||
		    hd->value + hd->value_len > p + h->head_len)
			__builtin_trap();
		(void)http_name_is(hd, "transfer-encoding");
	}
}

/*
 * Feed p[0..n) to b in pieces of 1 to 7 bytes until it is done or refuses.
 * Returns the bytes it took, or -1 when the framing was refused.
 */
static long feed(struct http_body *b, const char *p, size_t n)
{
	struct buf why = BUF_INIT, dwhy = BUF_INIT;
	struct http_body d = *b; /* the same body, decoded */
	size_t off = 0;

	while (off < n && !b->done) {
		size_t piece = (n - off) % 7 + 1, got = 0;
		char out[8];
		long k, kd;

		if (piece > n - off)
			piece = n - off;
		k = http_body_feed(b, p + off, piece, &why);
		kd = http_body_decode(&d, p + off, piece, out, &got, &dwhy);
		if (kd != k || d.done != b->done || (k >= 0 && got > (size_t)k))
			__builtin_trap();
		if ((k < 0) != (why.len > 0) || (kd < 0) != (dwhy.len > 0))
			__builtin_trap();
		if (k < 0) {
			buf_release(&why);
			buf_release(&dwhy);
			return -1;
		}
		if ((size_t)k > piece || (!b->done && (size_t)k != piece))
			__builtin_trap();
		off += (size_t)k;
	}
	return (long)off;
}

/* The framing common/proxy/proxy_forward.c gives the body after a request head. */
static void request_body(const struct http_head *h, struct http_body *b)
{
	char host[256];
	struct buf why = BUF_INIT;
	int port;

	if ((http_api_path_ok(h->target, h->target_len, &why) < 0) != (why.len > 0))
		__builtin_trap();
	buf_reset(&why);
	if ((http_split_authority(h->target, h->target_len, 0, host, sizeof(host), &port, &why) <
	     0) != (why.len > 0))
		__builtin_trap();
	if (h->host)
		http_split_authority(h->host, h->host_len, 80, host, sizeof(host), &port, NULL);
	buf_release(&why);
	if (h->chunked)
		http_body_init(b, BODY_CHUNKED, 0);
	else if (h->content_length > 0)
		http_body_init(b, BODY_LENGTH, (uint64_t)h->content_length);
	else
		http_body_init(b, BODY_NONE, 0);
}

/* The framing common/proxy/proxy_forward.c gives the body after a final response head. */
static void response_body(const struct http_head *h, struct http_body *b)
{
	if (h->status == 204 || h->status == 304)
		http_body_init(b, BODY_NONE, 0);
	else if (h->chunked)
		http_body_init(b, BODY_CHUNKED, 0);
	else if (h->content_length >= 0)
		http_body_init(b, BODY_LENGTH, (uint64_t)h->content_length);
	else
		http_body_init(b, BODY_CLOSE, 0);
}

/* Messages one after another on one connection: requests, or responses. */
static void stream(const char *p, size_t size, int responses)
{
	size_t off = 0;

	for (int m = 0; m < MAX_MESSAGES && off < size; m++) {
		const char *q = p + off;
		struct buf why = BUF_INIT;
		size_t len = size - off;
		struct http_head h;
		struct http_body b;
		int r = responses ? http_parse_response(q, len, &h, &why)
		                  : http_parse_request(q, len, &h, &why);
		long k;

		if ((r < 0) != (why.len > 0))
			__builtin_trap();
		buf_release(&why);
		if (r <= 0)
			return;
		if ((size_t)r > len || h.head_len != (size_t)r ||
		    (responses && (h.status < 100 || h.status > 999)))
			__builtin_trap();
		check_head(&h, q, len);
		off += (size_t)r;
		if (responses && h.status < 200)
			continue; /* interim: the proxy drops it and reads the next head */
		if (responses)
			response_body(&h, &b);
		else
			request_body(&h, &b);
		if ((k = feed(&b, p + off, size - off)) < 0 || !b.done)
			return;
		off += (size_t)k;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct http_body b;

	stream(p, size, 0);
	stream(p, size, 1);
	http_body_init(&b, BODY_CHUNKED, 0);
	feed(&b, p, size);
	return 0;
}
