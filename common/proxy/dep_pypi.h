/*
 * PyPI's files name their own digest (docs/cache.md, "PyPI"): on
 * files.pythonhosted.org, and the mirrors that copy its layout, a file's path
 * is /packages/H0H1/H2H3/H4...H63/FILE, where the 64 lowercase hex digits are
 * the unkeyed BLAKE2b-256 of the file's bytes (common/base/blake2b.h).  Bytes
 * that match it cannot be anything else, whoever chose the URL.
 */
#ifndef AIBOX_DEP_PYPI_H
#define AIBOX_DEP_PYPI_H

#include <stddef.h>

struct buf;

#define DEP_PYPI_B2_LEN 32

/*
 * The BLAKE2b-256 that target (origin-form, tl bytes, one dep_key() took)
 * names, into md: exactly "/packages/" then 2, 2 and 60 lowercase hex digits
 * as three segments, then one segment FILE (1 to 255 bytes, no '/').  0, or
 * -EINVAL with why for any other path (uppercase hex, other lengths, more or
 * fewer segments, another first segment): such a path is not checked by it.
 */
int dep_pypi_file(const char *target, size_t tl, unsigned char md[DEP_PYPI_B2_LEN],
                  struct buf *why);

#endif
