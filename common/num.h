/* Numbers from the command line and from config files, range-checked. */
#ifndef AIBOX_NUM_H
#define AIBOX_NUM_H

#include <stdint.h>

/*
 * Parse all of s as a base-10 integer in [min, max].  Leading spaces, a '+',
 * trailing garbage and empty strings are refused.  0, -EINVAL (not a number)
 * or -ERANGE (out of range); *out is set only on success.
 */
int parse_long(const char *s, long min, long max, long *out);

/* parse_long() for an fd number handed over on the command line (3..INT_MAX). */
int parse_fd(const char *s, int *out);

/*
 * Parse all of s as a size in bytes: digits, then optionally K, M or G (or
 * KiB, MiB, GiB; powers of 1024), within [min, max].  0, -EINVAL or -ERANGE;
 * *out is set only on success.
 */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
