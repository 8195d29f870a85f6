/*
 * The Claude API's paths by kind, for key forwarding (docs/proxy.md, "Key
 * forwarding", and docs/budget.md, "Counting"): the proxy adds the key only
 * to a path in this list, after one normalization, and counts the paid ones.
 */
#ifndef AIBOX_API_PATHS_H
#define AIBOX_API_PATHS_H

#include <stddef.h>

#include "base/buf.h"

enum api_path_kind {
	API_PATH_FREE = 1, /* the API charges nothing: forwarded, also after a cap */
	API_PATH_PAID = 2, /* charged by the usage its answer reports: counted and capped */
};

/*
 * Classify the request method m (ml bytes) for the target t (tl bytes: a
 * path and an optional query).  The path is normalized once: what
 * http_api_path_ok() refuses (dot and empty segments, ';', encoded '/', '.'
 * or '%', controls) is refused, %XX escapes are decoded, letters are
 * compared without case, and one trailing '/' is dropped.  On success the
 * kind, with the path to forward appended to canon (the listed spelling of
 * the path, an identifier segment as it came, then the query as it came);
 * else -EINVAL with the reason in err.
 */
int api_path_classify(const char *m, size_t ml, const char *t, size_t tl, struct buf *canon,
                      struct buf *err);

#endif
