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
 * The values of one JSON text from the VM, at most (json_vm_loadb()'s
 * count), for every such text but a session file's line
 * (SESSION_LINE_VALUES_MAX, common/base/session_file.h): result.json and a
 * transcript line, each at most 1 MiB.  Parsing one takes jansson at most
 * about 16 MiB whatever its shape; the init writes a few dozen values, and a
 * line of Claude Code's holds one per content block, tool input member or
 * line of a patch.
 */
#define JSON_VM_VALUES_MAX (1 << 16)

/*
 * Parse p[0..n), a JSON text from the VM, with jansson's flags, but only
 * when it may hold at most max values: the '[', '{', ',' and ':' outside its
 * strings, plus one, are at least the values and keys jansson would make of
 * it, valid or not.  Every parse of the VM's JSON goes through here, for its
 * size alone does not bound what it costs: each "{}," of a list takes
 * jansson about 230 bytes, so 1 MiB of them 80 MB.  0 with the value in
 * *out (the caller's to json_decref()); -E2BIG, unparsed, when it may hold
 * more than max values; -EINVAL when jansson cannot read it, its reason in
 * *e when e is not NULL.  *out is NULL unless 0.
 */
int json_vm_loadb(const char *p, size_t n, size_t flags, size_t max, json_t **out, json_error_t *e);

#endif
