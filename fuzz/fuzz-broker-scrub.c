/*
 * libFuzzer: the broker's token scrub (common/broker/scrub.h) on arbitrary
 * secrets and text (make fuzz).  The input: a count of secrets (1 to 3),
 * each as a length byte (1 to 40) and its bytes, then the text.  What
 * comes out is the text with bytes replaced by '*' only, holding neither a
 * secret as it is (one without a '*') nor every byte of one as %XX.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "broker/scrub.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf secrets[3] = {BUF_INIT, BUF_INIT, BUF_INIT}, pct = BUF_INIT;
	size_t n, at = 1;
	char *out;

	if (size < 1)
		return 0;
	n = data[0] % 3 + 1;
	for (size_t i = 0; i < n; i++) {
		size_t len;

		if (at >= size)
			goto out;
		len = data[at++] % 40 + 1;
		if (size - at < len)
			goto out;
		buf_add(&secrets[i], data + at, len);
		at += len;
	}
	out = malloc(size - at + 1);
	if (!out)
		goto out;
	scrub_span(secrets, n, (const char *)data + at, out, size - at, size - at);
	for (size_t i = 0; i < size - at; i++)
		if (out[i] != (char)data[at + i] && out[i] != '*')
			abort();
	for (size_t i = 0; i < n; i++) {
		buf_reset(&pct);
		for (size_t j = 0; j < secrets[i].len; j++)
			buf_addf(&pct, "%%%02X", (unsigned char)secrets[i].buf[j]);
		if (memmem(out, size - at, pct.buf, pct.len))
			abort();
		if (!memchr(secrets[i].buf, '*', secrets[i].len) &&
		    memmem(out, size - at, secrets[i].buf, secrets[i].len))
			abort();
	}
	free(out);
out:
	for (size_t i = 0; i < 3; i++)
		buf_release(&secrets[i]);
	buf_release(&pct);
	return 0;
}
