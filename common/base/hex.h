/*
 * Hex digits: the one reader and writer of the hex the tree speaks (object
 * names, checksums, task ids, pkt-line lengths, the snapshot's seed).
 */
#ifndef AIBOX_HEX_H
#define AIBOX_HEX_H

#include <stddef.h>

/* The value 0..15 of the hex digit c ('0'-'9', 'a'-'f', 'A'-'F'), else -1. */
int hex_digit(int c);

/* 1 when the n bytes of s are all lowercase hex digits ('0'-'9', 'a'-'f'), else 0. */
int hex_is_lower(const char *s, size_t n);

/* The n bytes that the 2n hex digits at s (any case) spell, into out: 0, or -1 at a byte that is
 * not one. */
int hex_decode(unsigned char *out, const char *s, size_t n);

/* Write the n bytes of in as 2n lowercase hex digits and a NUL into out (2n + 1 bytes). */
void hex_encode(char *out, const unsigned char *in, size_t n);

#endif
