/* The log escaper: see log_escape.h. */
#include "base/log_escape.h"

#include "base/banned.h"

void log_escape(struct buf *out, const char *s, size_t n, size_t max, unsigned flags)
{
	size_t start = out->len;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (max && out->len - start >= max) {
			buf_addstr(out, "...");
			return;
		}
		if ((ch > 0x20 && ch < 0x7f && ch != '\\' && ch != '"') ||
		    (ch == ' ' && (flags & LOG_ESCAPE_KEEP_SPACE)))
			buf_addch(out, (char)ch);
		else
			buf_addf(out, "\\x%02x", ch);
	}
}
