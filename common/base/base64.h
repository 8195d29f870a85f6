/*
 * Base64 as a secret's filter looks for it: the proxy's echo swap
 * (common/proxy/secret_swap.h) and the broker's token scrub
 * (common/broker/broker.h), both through common/base/scrub.h.
 */
#ifndef AIBOX_BASE64_H
#define AIBOX_BASE64_H

#include <stddef.h>

/* The shortest value base64_core() gives a core for. */
#define BASE64_CORE_MIN 8

/*
 * The base64 characters that only value[0..len)'s bytes make when it starts
 * r bytes (0 to 2) into a group of three, whatever bytes stand around it:
 * the characters whose six bits all lie within the value (a value inside a
 * longer base64 string, a Basic credential's "user:value" one).  A new
 * string (the caller wipes and frees it), or NULL for a value under
 * BASE64_CORE_MIN bytes, whose core would be too short to look for.
 */
char *base64_core(const char *value, size_t len, int r);

/*
 * s (base64, as base64_core() gives it) in base64url's alphabet (RFC 4648
 * 5: '-' for '+', '_' for '/'), in place: 1 when a character changed, 0
 * when s is the same in both.
 */
int base64_url(char *s);

#endif
