/* Printable text in place: see printable.h. */
#include "base/printable.h"

#include "base/banned.h"

void printable_ascii(char *s, size_t n, unsigned flags)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f || (c > 0x7f && !(flags & PRINTABLE_KEEP_8BIT)))
			s[i] = '?';
	}
}
