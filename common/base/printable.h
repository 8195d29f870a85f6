/*
 * The one loop that makes untrusted text printable in place, for a reason
 * that quotes it on one line: jansson's parse error of result.json (it quotes
 * the VM's token), the bundle checker's answer (the child's, which the bundle
 * may have taken over) and git's last line when pack-objects fails.
 */
#ifndef AIBOX_PRINTABLE_H
#define AIBOX_PRINTABLE_H

#include <stddef.h>

/* Keep the bytes over 0x7f (UTF-8, valid or not) as they are. */
#define PRINTABLE_KEEP_8BIT 1

/*
 * Replace, in s[0..n), each byte outside printable ASCII with '?': below
 * 0x20 (NUL, tab, CR, LF, ESC, every C0 control), 0x7f (DEL) and, unless
 * flags has PRINTABLE_KEEP_8BIT, over 0x7f.  Nothing else changes, the length
 * neither: the text cannot end early, break a line or drive a terminal by an
 * ASCII control.  With PRINTABLE_KEEP_8BIT it may still hold C1 controls and
 * line separators in UTF-8, and must go through out_sanitize()
 * (common/base/out.h) before it is shown.
 */
void printable_ascii(char *s, size_t n, unsigned flags);

#endif
