/*
 * fuzz-prompt-decode: prompt_decode() on arbitrary file contents.  What it
 * accepts must come out as well-formed UTF-8 without NUL; what it refuses
 * must leave `out` as it was and say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/prompt.h"
#include "base/utf8.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf out = BUF_INIT, err = BUF_INIT;
	int ret;

	buf_addstr(&out, "before");
	ret = prompt_decode((const char *)data, size, "'f'", &out, &err);
	if (ret == 0) {
		if (!utf8_valid(out.buf, out.len, NULL) || memchr(out.buf, '\0', out.len))
			abort();
		if (err.len)
			abort();
	} else {
		if (out.len != 6 || memcmp(out.buf, "before", 6) || !err.len)
			abort();
	}
	buf_release(&out);
	buf_release(&err);
	return 0;
}
