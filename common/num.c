#include "num.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "banned.h"

int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '-'))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_fd(const char *s, int *out)
{
	long v;
	int ret = parse_long(s, 0, INT_MAX, &v);

	if (ret < 0)
		return ret;
	*out = (int)v;
	return 0;
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char units[] = "KMG";
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end) {
		const char *u = strchr(units, *end);

		if (!u || !*u || (end[1] && strcmp(end + 1, "iB")))
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		if (v > (UINT64_MAX >> shift))
			return -ERANGE;
		v <<= shift;
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}
