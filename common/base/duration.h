/*
 * Durations as Go writes them: "720h", "90m", "1h30m", "45s", "1h0m30s",
 * "500ms", "1.5h".  The one grammar of every duration option of every tool
 * (aibox task --timeout, aibox tasks clean --older-than, aibox-proxy's and
 * aibox-broker's timeouts), each read through duration_arg().
 *
 * A duration is one or more <number><unit> parts, the number a decimal
 * integer with an optional fraction, the unit one of h, m, s, ms.  "0" alone
 * is zero.  Refused: the empty string, a sign (durations are never negative),
 * a part without a unit, an unknown unit (d, w, ns, us, ...), spaces, and a
 * total above DURATION_MAX_MS.  Precision is a millisecond; a fraction finer
 * than that is refused rather than rounded.
 */
#ifndef AIBOX_DURATION_H
#define AIBOX_DURATION_H

#include <stdint.h>

struct buf;

/* Go's limit, 2562047h47m16.854s (about 292 years): INT64_MAX nanoseconds. */
#define DURATION_MAX_MS 9223372036854LL

/*
 * Parse s into milliseconds.  Returns 0 with *ms set, -EINVAL for a malformed
 * duration or -ERANGE for one over DURATION_MAX_MS.  On failure, when err is
 * not NULL, a one-line reason is appended to it (without the input, which
 * the caller quotes), e.g. "unknown unit 'd' (use h, m, s or ms)".
 */
int duration_parse(const char *s, int64_t *ms, struct buf *err);

/*
 * The value v of the option --name, a duration between min_ms and max_ms.
 * 0 with *ms set, or -EINVAL (-ERANGE past DURATION_MAX_MS) with one of
 * these appended to why, the same words in every tool:
 *   --name: 'v' is not a duration: <duration_parse()'s reason>
 *   --name: 'v' is not between <min> and <max>
 * (the bounds as duration_format() writes them, without zero parts after
 * the first: "1s", "24h").  So a bare number other than "0" is refused
 * everywhere ("missing unit"), never read as seconds.
 */
int duration_arg(const char *name, const char *v, int64_t min_ms, int64_t max_ms, int64_t *ms,
                 struct buf *err);

/*
 * duration_arg()'s rule and words without the option's name, for a value
 * read elsewhere (a config key): "'v' is not a duration: ...", "'v' is not
 * between 1s and 24h".
 */
int duration_in(const char *v, int64_t min_ms, int64_t max_ms, int64_t *ms, struct buf *err);

/* Append ms in Go's canonical form: "1h30m0s", "45s", "500ms", "0s". */
void duration_format(struct buf *out, int64_t ms);

#endif
