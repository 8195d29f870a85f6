/* The POSIX shell quoter: see shell_quote.h. */
#include <string.h>

#include "base/shell_quote.h"
#include "base/banned.h"

void shell_quote(struct buf *out, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                           "0123456789_@%+=:,./-";

	if (*s && strspn(s, safe) == strlen(s)) {
		buf_addstr(out, s);
		return;
	}
	buf_addch(out, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			buf_addstr(out, "'\\''");
		else
			buf_addch(out, *s);
	}
	buf_addch(out, '\'');
}
