/*
 * The broker's token filter (docs/broker.md, "What the client sees"):
 * every spelling of a secret in what the broker relays back to the client
 * is replaced by as many '*'.  No I/O: the broker calls it on each piece of
 * an answer as it goes.
 */
#ifndef AIBOX_SCRUB_H
#define AIBOX_SCRUB_H

#include <stddef.h>

#include "base/buf.h"

/*
 * The most bytes one byte of a secret takes in any spelling scrub_span()
 * finds ("&DiacriticalGrave;" for '`'): a run of text spelling an n-byte
 * secret is at most SCRUB_SPELLING_MAX * n bytes long.
 */
#define SCRUB_SPELLING_MAX 18

/*
 * Copy in[0..n) to out[0..n) (the same place, or another) with '*' for
 * every byte of a run of in that spells one of secrets[0..nsecrets) (each
 * at least one byte) and starts before `before` (n: every run), each byte
 * of the secret in any spelling, in any mix: the byte itself; %XX (hex in
 * either case); a JSON string's escape of it (\/, \", \\, \u00XX); or an
 * HTML character reference to it: decimal (&#43;) or hex (&#x2B;, &#X2b;),
 * with leading zeros up to 7 digits, the ';' optional, or named (&plus;,
 * &sol;, every name HTML5 gives a printable ASCII byte, with its ';';
 * &amp;, &lt;, &gt;, &quot; and their upper-case forms without it too).
 * Runs are found in `in` as it is, so overlapping ones are all replaced.
 * Returns where the last run replaced ends (0: none): a caller that passes
 * a stream on piece by piece holds back a run that may not have come
 * whole, and replaces what a run it passed on covers of the next piece.
 * The time is linear in n (times each secret's length at most), whatever
 * the secrets hold.
 */
size_t scrub_span(const struct buf *secrets, size_t nsecrets, const char *in, char *out, size_t n,
                  size_t before);

#endif
