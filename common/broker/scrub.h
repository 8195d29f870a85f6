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
 * finds: a run of text spelling an n-byte secret is at most
 * SCRUB_SPELLING_MAX * n bytes long.
 */
#define SCRUB_SPELLING_MAX 6

/*
 * Replace with '*' every run of p[0..n) that spells one of secrets[0..nsecrets)
 * (each at least one byte), each of its bytes in any spelling, in any mix:
 * the byte itself, %XX (hex in either case), or a JSON string's escape of
 * it (\/, \", \\, \u00XX).  Overlapping runs are all replaced.  The time is
 * linear in n (times each secret's length at most), whatever the secrets
 * hold.
 */
void scrub_span(const struct buf *secrets, size_t nsecrets, char *p, size_t n);

#endif
