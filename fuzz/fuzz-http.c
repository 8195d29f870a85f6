/*
 * libFuzzer target for the proxy's HTTP parsing (common/http.c): request and
 * response heads, chunked framing fed in pieces, the key forwarding path
 * check and authority splitting.  `make fuzz && build/fuzz/fuzz-http`.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *why = NULL;
	struct http_head h;
	struct http_body b;
	char host[256];
	int port, r;
	size_t off = 0;

	r = http_parse_request(p, size, &h, &why);
	if (r > 0) {
		if ((size_t)r > size || h.head_len != (size_t)r)
			__builtin_trap();
		http_api_path_ok(h.target, h.target_len, &why);
		http_split_authority(h.target, h.target_len, 0, host, sizeof(host), &port, &why);
		if (h.host)
			http_split_authority(h.host, h.host_len, 80, host, sizeof(host), &port,
					     &why);
	}
	http_parse_response(p, size, &h, &why);

	/* Chunked framing, fed in pieces of varying size. */
	http_body_init(&b, BODY_CHUNKED, 0);
	while (off < size && !b.done) {
		size_t n = (size - off) % 7 + 1;
		long k;

		if (n > size - off)
			n = size - off;
		k = http_body_feed(&b, p + off, n, &why);

		if (k < 0)
			break;
		if ((size_t)k > n || (!b.done && (size_t)k != n))
			__builtin_trap();
		off += k;
	}
	return 0;
}
