#include "num.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

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
