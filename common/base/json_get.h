/*
 * Typed getters for one member of a JSON object (jansson), with one rule for
 * every record aibox reads:
 *
 * - A member that is absent and one that is null are the same: missing.  With
 *   JSON_OPTIONAL a missing member returns 0 and leaves *out as it was (the
 *   caller's default); without it, -EINVAL and "'KEY' is missing".
 * - A member of the wrong type: -EINVAL and "'KEY' is not a string" (or an
 *   integer, a number, true or false, an object, a list).
 * - A value outside the caller's bounds: -EINVAL and "'KEY' is out of range"
 *   (for strings: "'KEY' is over N bytes").
 * - A string with a NUL byte in it (JSON's \u0000, which jansson keeps) is
 *   refused: "'KEY' has a NUL byte".  A C reader would see it cut short.
 *
 * Each returns 1 when *out was set, 0 for an optional missing member, or
 * -EINVAL with the reason appended to err.  An o that is not an object has no
 * members.  Nothing is copied: a string stays owned by o.
 */
#ifndef AIBOX_JSON_GET_H
#define AIBOX_JSON_GET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

#define JSON_OPTIONAL 1u

int json_get_str(json_t *o, const char *key, unsigned flags, size_t max, const char **out,
                 struct buf *err);
int json_get_int(json_t *o, const char *key, unsigned flags, int64_t min, int64_t max, int64_t *out,
                 struct buf *err);
/* Any JSON number (an integer too) in [min, max]; NaN is out of range; -0 is read as 0. */
int json_get_real(json_t *o, const char *key, unsigned flags, double min, double max, double *out,
                  struct buf *err);
/* *out is 1 for true, 0 for false. */
int json_get_bool(json_t *o, const char *key, unsigned flags, int *out, struct buf *err);
int json_get_obj(json_t *o, const char *key, unsigned flags, json_t **out, struct buf *err);
/* A list of at most max elements. */
int json_get_list(json_t *o, const char *key, unsigned flags, size_t max, json_t **out,
                  struct buf *err);

/*
 * The string v (a list's element, say) by the same rule: its text, or NULL
 * when v is not a string, has a NUL byte or is over max bytes.
 */
const char *json_str_checked(json_t *v, size_t max);

/*
 * Why jansson could not read a text, for a message: "line L: REASON" appended
 * to out.  jansson's reason quotes the token it stopped at ("near '...'")
 * when the token is at most 20 bytes: the text's own bytes, of which every
 * one outside printable ASCII becomes '?', so a reason of an untrusted text
 * can neither carry its controls nor fill a terminal's row with it
 * (common/base/out.h).
 */
void json_error_why(const json_error_t *e, struct buf *out);

/*
 * 1 when the JSON text p[0..n) may hold more than max values, else 0: the
 * '[', '{', ',' and ':' outside its strings, plus one, are at least the
 * values and keys jansson would make of it, valid or not.  For untrusted
 * text whose size alone does not bound the memory json_loadb() takes: each
 * "{}," of a list costs about 230 bytes, so 16 MiB of them 1.3 GB.
 */
int json_values_over(const char *p, size_t n, size_t max);

#endif
