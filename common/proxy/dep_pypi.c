/* PyPI's file paths and the BLAKE2b-256 they name: see dep_pypi.h. */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "proxy/dep_pypi.h"
#include "base/banned.h"

#define PREFIX   "/packages/"
#define FILE_MAX 255

int dep_pypi_file(const char *target, size_t tl, unsigned char md[DEP_PYPI_B2_LEN], struct buf *why)
{
	static const size_t seg[3] = {2, 2, 60};
	const char *p = target, *end = target + tl, *file;
	char hex[2 * DEP_PYPI_B2_LEN];
	size_t h = 0;

	if (tl < sizeof(PREFIX) - 1 || memcmp(p, PREFIX, sizeof(PREFIX) - 1))
		return buf_refuse(why, -EINVAL, "not a PyPI file path");
	p += sizeof(PREFIX) - 1;
	for (int i = 0; i < 3; i++) {
		if ((size_t)(end - p) <= seg[i] || !hex_is_lower(p, seg[i]) || p[seg[i]] != '/')
			return buf_refuse(why, -EINVAL, "not a PyPI file path");
		memcpy(hex + h, p, seg[i]);
		h += seg[i];
		p += seg[i] + 1;
	}
	file = p;
	if (file == end || (size_t)(end - file) > FILE_MAX ||
	    memchr(file, '/', (size_t)(end - file)))
		return buf_refuse(why, -EINVAL, "not a PyPI file path");
	hex_decode(md, hex, DEP_PYPI_B2_LEN); /* checked lowercase hex above */
	return 0;
}
