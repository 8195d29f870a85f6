/* Numbers from the command line and from config files, range-checked. */
#ifndef AIBOX_NUM_H
#define AIBOX_NUM_H

#include <stdint.h>

struct buf;

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

/*
 * A size: a whole number and a unit, M, G or T (or MiB, GiB, TiB), powers of
 * 1024; no unit, a lowercase unit, a fraction, "4GB" are refused.  The size
 * in MiB must be in [min_mib, max_mib].  0 with *mib set, or -EINVAL (not a
 * size) or -ERANGE, with the reason appended to why, the value quoted
 * (at most 64 bytes of it): "'4GB' is not a size like 512M, 4G or 1T",
 * "'2T' is out of range (512M to 1T)".  docs/config.md states the rule.
 */
int parse_size_mib(const char *s, uint64_t min_mib, uint64_t max_mib, uint64_t *mib,
                   struct buf *why);

/* Append a size in MiB as parse_size_mib() reads it, in the largest exact unit ("4G"). */
void format_size_mib(struct buf *out, uint64_t mib);

/* This machine's online CPUs, clamped to 1..4096. */
int host_cpus(void);

/*
 * A CPU count: a whole number from 1 to host_cpus().  0 with *cpus set, or
 * -EINVAL or -ERANGE with the reason appended to why: "'x' is not a whole
 * number", "'0' is out of range (1 to 8)", "64 is more than the 8 CPUs of
 * this machine".
 */
int parse_cpus(const char *s, int *cpus, struct buf *why);

#endif
