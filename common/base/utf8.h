/*
 * Strict UTF-8, as RFC 3629 and Unicode's "well-formed" table define it: no
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 * Used by the prompt reader (which refuses bad text) and the output sanitizer
 * (which replaces it).
 */
#ifndef AIBOX_UTF8_H
#define AIBOX_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define UTF8_REPLACEMENT 0xFFFD

/*
 * Decode the sequence at s[0..n) (n > 0).  On success returns its length
 * (1-4) and stores the code point in *cp.  On an ill-formed sequence returns
 * minus the length of its maximal subpart (1-3: the bytes to replace with one
 * U+FFFD before going on, Unicode's recommended practice) and stores
 * UTF8_REPLACEMENT in *cp.
 */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Append the UTF-8 form of cp (a scalar value: <= U+10FFFF, not a surrogate). */
void utf8_add(struct buf *b, uint32_t cp);

/*
 * Is s[0..n) well-formed UTF-8?  Returns 1, or 0 with the offset of the first
 * bad byte in *bad (if bad is not NULL).
 */
int utf8_valid(const char *s, size_t n, size_t *bad);

/*
 * The length of s[0..n) without a character cut short at its end: when the
 * last lead byte among its last 3 bytes has fewer bytes after it than its
 * sequence needs, the bytes from it on are left out (at most 3).  For a
 * reader that cuts a stream into pieces of its own size: a character split
 * at the cut then starts the next piece whole, rather than becoming two
 * U+FFFD (common/base/out.h, struct out_lines).
 */
size_t utf8_whole_len(const char *s, size_t n);

/*
 * Is cp a format character (General_Category=Cf in Unicode 15.0: soft
 * hyphen, zero-width space and joiners, the bidi marks, embeddings,
 * overrides and isolates, the byte order mark, the tag characters
 * U+E0001 and U+E0020..U+E007F, ...)?  Most are invisible: the output
 * sanitizer shows them (utf8_is_hidden()).  1 or 0.
 */
int utf8_is_format(uint32_t cp);

/*
 * Is cp a character that a terminal may show as nothing, or as a blank that
 * is no space: a format character (utf8_is_format()), a
 * Default_Ignorable_Code_Point of Unicode 15.0 (the variation selectors
 * U+FE00..U+FE0F and U+E0100..U+E01EF, the combining grapheme joiner U+034F,
 * the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, Khmer's inherent
 * vowels, Mongolian's free variation selectors, and the code points reserved
 * as ignorable: U+2065, U+FFF0..U+FFF8, U+E0000..U+E0FFF), or U+2800
 * BRAILLE PATTERN BLANK?  What the output sanitizer shows as <U+XXXX>
 * (common/base/out.h).  1 or 0.
 */
int utf8_is_hidden(uint32_t cp);

#endif
