#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "base/banned.h"

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xBF;
	size_t need, i;
	uint32_t v;

	*cp = UTF8_REPLACEMENT;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF) {
		need = 1;
		v = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		v = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0; /* overlong below U+0800 */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		v = c & 0x07;
		if (c == 0xF0)
			lo = 0x90; /* overlong below U+10000 */
		else if (c == 0xF4)
			hi = 0x8F; /* above U+10FFFF */
	} else {
		return -1; /* continuation byte, C0/C1 overlong lead, F5..FF */
	}
	for (i = 1; i <= need; i++) {
		unsigned char d;

		if (i >= n)
			return -(int)i;
		d = s[i];
		if (i == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF))
			return -(int)i;
		v = (v << 6) | (d & 0x3F);
	}
	*cp = v;
	return (int)need + 1;
}

void utf8_add(struct buf *b, uint32_t cp)
{
	unsigned char o[4];
	size_t n;

	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		o[0] = (unsigned char)(0xC0 | (cp >> 6));
		o[1] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		o[0] = (unsigned char)(0xE0 | (cp >> 12));
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		o[0] = (unsigned char)(0xF0 | (cp >> 18));
		o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
		o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		o[3] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	buf_add(b, o, n);
}

int utf8_valid(const char *s, size_t n, size_t *bad)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		uint32_t cp;
		int r;

		if (p[i] < 0x80) {
			i++;
			continue;
		}
		r = utf8_decode(p + i, n - i, &cp);
		if (r < 0) {
			if (bad)
				*bad = i;
			return 0;
		}
		i += (size_t)r;
	}
	return 1;
}

size_t utf8_whole_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = u[n - back];
		size_t need;

		if ((c & 0xC0) == 0x80)
			continue; /* a continuation byte: its lead is further back */
		need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > back ? n - back : n;
	}
	return n;
}

/*
 * General_Category=Cf (format) of Unicode 15.0, from its UnicodeData.txt
 * (Debian's unicode-data 15.0.0: /usr/share/unicode/UnicodeData.txt), as
 * inclusive ranges in order; t/0100-out.bats compares it with that file
 * when the machine has it.  Made with
 *	awk -F';' '$3 == "Cf" { print $1 }' UnicodeData.txt
 * and consecutive code points joined.
 */
struct range {
	uint32_t first, last;
};

static const struct range format_chars[] = {
    {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},
    {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x180E, 0x180E},
    {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},
    {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
    {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
    {0xE0020, 0xE007F},
};

/*
 * Default_Ignorable_Code_Point of Unicode 15.0, from its
 * DerivedCoreProperties.txt (Debian's unicode-data 15.0.0), as inclusive
 * ranges in order: what a renderer that does not support a character of the
 * set shows as nothing.  t/0100-out.bats compares utf8_is_hidden() with that
 * file and UnicodeData.txt when the machine has them.
 */
static const struct range ignorable_chars[] = {
    {0x00AD, 0x00AD},   {0x034F, 0x034F},   {0x061C, 0x061C}, {0x115F, 0x1160}, {0x17B4, 0x17B5},
    {0x180B, 0x180F},   {0x200B, 0x200F},   {0x202A, 0x202E}, {0x2060, 0x206F}, {0x3164, 0x3164},
    {0xFE00, 0xFE0F},   {0xFEFF, 0xFEFF},   {0xFFA0, 0xFFA0}, {0xFFF0, 0xFFF8}, {0x1BCA0, 0x1BCA3},
    {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF},
};

/* Is cp in one of the n ranges of r (in order, apart)?  1 or 0. */
static int in_ranges(const struct range *r, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < r[mid].first)
			hi = mid;
		else if (cp > r[mid].last)
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

int utf8_is_format(uint32_t cp)
{
	return in_ranges(format_chars, sizeof(format_chars) / sizeof(format_chars[0]), cp);
}

int utf8_is_hidden(uint32_t cp)
{
	/* U+2800 BRAILLE PATTERN BLANK: a blank that is neither a space nor ignorable */
	return utf8_is_format(cp) || cp == 0x2800 ||
	       in_ranges(ignorable_chars, sizeof(ignorable_chars) / sizeof(ignorable_chars[0]), cp);
}
