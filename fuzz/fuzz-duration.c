/* libFuzzer: Go-style durations on arbitrary strings (make fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/duration.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct buf why = BUF_INIT, out = BUF_INIT;
	int64_t ms, again;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (duration_parse(s, &ms, &why) == 0) {
		/* What it prints, it reads back to the same value. */
		duration_format(&out, ms);
		if (duration_parse(out.buf, &again, NULL) != 0 || again != ms)
			abort();
	}
	buf_release(&why);
	buf_release(&out);
	free(s);
	return 0;
}
