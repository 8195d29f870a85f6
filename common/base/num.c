#include "base/num.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"

#include "base/banned.h"

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

int size_scan(const char *s, uint64_t *bytes, unsigned *unit)
{
	static const char units[] = "KMGT";
	const char *p, *u = NULL;
	uint64_t n = 0;
	unsigned shift = 0;
	int over = 0;

	if (!s)
		return -EINVAL;
	for (p = s; *p >= '0' && *p <= '9'; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (n > (UINT64_MAX - d) / 10)
			over = 1;
		else
			n = n * 10 + d;
	}
	if (p == s)
		return -EINVAL;
	if (*p) {
		u = strchr(units, *p);
		if (!u || !*u || (p[1] && strcmp(p + 1, "iB")))
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
	}
	if (over || n > (UINT64_MAX >> shift))
		return -ERANGE;
	*bytes = n << shift;
	*unit = shift / 10;
	return 0;
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	unsigned unit;
	int ret = size_scan(s, &v, &unit);

	if (ret < 0)
		return ret;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

void format_size_mib(struct buf *out, uint64_t mib)
{
	if (mib && mib % (1024 * 1024) == 0)
		buf_addf(out, "%lluT", (unsigned long long)(mib / 1024 / 1024));
	else if (mib && mib % 1024 == 0)
		buf_addf(out, "%lluG", (unsigned long long)(mib / 1024));
	else
		buf_addf(out, "%lluM", (unsigned long long)mib);
}

int parse_size_mib(const char *s, uint64_t min_mib, uint64_t max_mib, uint64_t *mib,
                   struct buf *err)
{
	uint64_t bytes;
	unsigned unit;
	int ret = size_scan(s, &bytes, &unit);

	if (ret == -ERANGE)
		goto range;
	if (ret < 0 || unit < 2)
		goto bad;
	if (bytes >> 20 < min_mib || bytes >> 20 > max_mib)
		goto range;
	*mib = bytes >> 20;
	return 0;
bad:
	buf_addf(err, "'%.64s' is not a size like 512M, 4G or 1T", s);
	return -EINVAL;
range:
	buf_addf(err, "'%.64s' is out of range (", s);
	format_size_mib(err, min_mib);
	buf_addstr(err, " to ");
	format_size_mib(err, max_mib);
	buf_addstr(err, ")");
	return -ERANGE;
}

int host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

int parse_cpus(const char *s, int *cpus, struct buf *err)
{
	int max = host_cpus(), ret;
	long n;

	ret = parse_long(s, LONG_MIN, LONG_MAX, &n);
	if (ret == -EINVAL) {
		buf_addf(err, "'%.64s' is not a whole number", s);
		return ret;
	}
	if (ret || n < 1) {
		buf_addf(err, "'%.64s' is out of range (1 to %d)", s, max);
		return -ERANGE;
	}
	if (n > max) {
		buf_addf(err, "%ld is more than the %d CPUs of this machine", n, max);
		return -ERANGE;
	}
	*cpus = (int)n;
	return 0;
}

int parse_attempts(const char *s, int *n, struct buf *err)
{
	long v;
	int ret = parse_long(s, LONG_MIN, LONG_MAX, &v);

	if (ret == -EINVAL) {
		buf_addf(err, "'%.64s' is not a whole number", s);
		return ret;
	}
	if (ret || v < 1 || v > ATTEMPTS_MAX) {
		buf_addf(err, "'%.64s' is out of range (1 to %d)", s, ATTEMPTS_MAX);
		return -ERANGE;
	}
	*n = (int)v;
	return 0;
}
