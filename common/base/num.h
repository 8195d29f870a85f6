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
 * Sizes have one grammar, read by size_scan() alone (docs/internals.md,
 * "Sizes"): decimal digits, then no unit or one of K, M, G, T, KiB, MiB, GiB,
 * TiB (powers of 1024).  Nothing else: no sign, space, fraction, lowercase
 * unit or "GB".  A caller counting in bytes takes a number without a unit as
 * bytes (parse_size()); one counting in MiB wants a unit of M or more
 * (parse_size_mib()).
 *
 * size_scan: the size s stands for in bytes, and the unit's power of 1024
 * (0 for none, 1 for K ... 4 for T).  0, -EINVAL (not a size) or -ERANGE
 * (over 2^64 - 1 bytes); *bytes and *unit are set only on success.
 */
int size_scan(const char *s, uint64_t *bytes, unsigned *unit);

/*
 * Parse all of s as a size in bytes (size_scan(); no unit: bytes) within
 * [min, max].  0, -EINVAL or -ERANGE; *out is set only on success.
 */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * A size in MiB: size_scan() with a unit of M, G or T (no unit or K is
 * refused).  The size in MiB must be in [min_mib, max_mib].  0 with *mib set,
 * or -EINVAL (not a size) or -ERANGE, with the reason appended to err, the
 * value quoted (at most 64 bytes of it): "'4GB' is not a size like 512M, 4G
 * or 1T", "'2T' is out of range (512M to 1T)".  docs/config.md states the rule.
 */
int parse_size_mib(const char *s, uint64_t min_mib, uint64_t max_mib, uint64_t *mib,
                   struct buf *err);

/* Append a size in MiB as parse_size_mib() reads it, in the largest exact unit ("4G"). */
void format_size_mib(struct buf *out, uint64_t mib);

/* This machine's online CPUs, clamped to 1..4096. */
int host_cpus(void);

/*
 * A CPU count: a whole number from 1 to host_cpus().  0 with *cpus set, or
 * -EINVAL or -ERANGE with the reason appended to err: "'x' is not a whole
 * number", "'0' is out of range (1 to 8)", "64 is more than the 8 CPUs of
 * this machine".
 */
int parse_cpus(const char *s, int *cpus, struct buf *err);

/* The most attempts of one task (--attempts, the config's attempts:). */
#define ATTEMPTS_MAX 8

/*
 * An attempt count: a whole number from 1 to ATTEMPTS_MAX.  0 with *n set,
 * or -EINVAL or -ERANGE with the reason appended to err: "'x' is not a whole
 * number", "'9' is out of range (1 to 8)".
 */
int parse_attempts(const char *s, int *n, struct buf *err);

#endif
