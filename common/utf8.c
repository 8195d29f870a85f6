#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "utf8.h"
#include "banned.h"

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
