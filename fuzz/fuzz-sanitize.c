/*
 * fuzz-sanitize: out_sanitize() and out_format_width() on arbitrary bytes.  The
 * sanitized text must be well-formed UTF-8 whose only control is '\n', with
 * no C1 controls, no format characters (bidi controls among them) and no
 * U+2028 or U+2029, and cleaning it again must change nothing; every
 * formatted line must start with the prefix, hold no other line break and no
 * more than OUT_LINE_MAX bytes, and on a terminal (the first byte its width)
 * fit its row.  struct out_lines, fed the bytes in reads of any size, hands
 * on pieces of at most its bound, each well-formed when the input is (no
 * character split at a cut).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/out.h"
#include "base/utf8.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_clean(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	if (!utf8_valid(s, n, NULL))
		abort();
	while (i < n) {
		uint32_t cp;
		int r = utf8_decode(p + i, n - i, &cp);

		if (r <= 0)
			abort();
		if ((cp < 0x20 && cp != '\n') || cp == 0x7F || cp == 0x1B)
			abort();
		if (cp >= 0x80 && cp <= 0x9F)
			abort();
		if (utf8_is_hidden(cp) || cp == 0x2028 || cp == 0x2029)
			abort();
		i += (size_t)r;
	}
}

/* What the pieces struct out_lines hands on must hold. */
struct pieces {
	size_t max;
	int valid; /* the input is well-formed UTF-8: so is every piece, never a character split */
};

static void check_piece(void *ctx, const char *s, size_t n)
{
	const struct pieces *p = ctx;

	if (n > p->max || memchr(s, '\n', n))
		abort();
	if (p->valid && !utf8_valid(s, n, NULL))
		abort();
}

/* The input through struct out_lines, fed in reads of 1 to 17 bytes the input picks. */
static void check_lines(const uint8_t *data, size_t size)
{
	struct pieces p = {size ? 4 + data[0] % 61 : 4, utf8_valid((const char *)data, size, NULL)};
	struct out_lines ol;
	size_t pos = 0;

	out_lines_init(&ol, p.max, check_piece, &p);
	while (pos < size) {
		size_t take = 1 + data[pos] % 17;

		if (take > size - pos)
			take = size - pos;
		out_lines_feed(&ol, (const char *)data + pos, take);
		pos += take;
	}
	out_lines_end(&ol);
	out_lines_release(&ol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char prefix[] = "00:00:00 vm[abcdef]: ";
	struct buf clean = BUF_INIT, lines = BUF_INIT, again = BUF_INIT;
	size_t pos = 0;

	out_sanitize(&clean, (const char *)data, size);
	check_clean(clean.buf, clean.len);
	out_sanitize(&again, clean.buf, clean.len);
	if (again.len != clean.len || memcmp(again.buf, clean.buf, clean.len))
		abort();

	setenv("TZ", "UTC", 1);
	/* the first byte picks a terminal's width too: 0 (none) or 1 to 255 */
	unsigned cols = size ? data[0] : 0;
	size_t avail = cols > sizeof(prefix) - 1 + OUT_MIN_COLUMNS ? cols - (sizeof(prefix) - 1)
	                                                           : OUT_MIN_COLUMNS;

	out_format_width(&lines, 0, "vm", "0123abcdef", (const char *)data, size, cols);
	check_clean(lines.buf, lines.len);
	if (!lines.len || lines.buf[lines.len - 1] != '\n')
		abort();
	while (pos < lines.len) {
		const char *nl = memchr(lines.buf + pos, '\n', lines.len - pos);
		size_t len = (size_t)(nl - (lines.buf + pos)), columns = 0;

		if (len < sizeof(prefix) - 1 || memcmp(lines.buf + pos, prefix, sizeof(prefix) - 1))
			abort();
		if (len - (sizeof(prefix) - 1) > OUT_LINE_MAX)
			abort();
		/* a piece fits its row: ASCII one column, any other character two */
		for (size_t i = pos + sizeof(prefix) - 1; i < pos + len; i++)
			if (((unsigned char)lines.buf[i] & 0xC0) != 0x80)
				columns += (unsigned char)lines.buf[i] < 0x80 ? 1 : 2;
		if (cols && columns > avail)
			abort();
		pos += len + 1;
	}
	check_lines(data, size);
	buf_release(&clean);
	buf_release(&again);
	buf_release(&lines);
	return 0;
}
