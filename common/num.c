#include "num.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"

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
                   struct buf *why)
{
	const char *u;
	uint64_t n = 0, mult;

	for (u = s; *u >= '0' && *u <= '9'; u++) {
		if (n > (UINT64_MAX - 9) / 10)
			goto range;
		n = n * 10 + (uint64_t)(*u - '0');
	}
	if (u == s)
		goto bad;
	if (!strcmp(u, "M") || !strcmp(u, "MiB"))
		mult = 1;
	else if (!strcmp(u, "G") || !strcmp(u, "GiB"))
		mult = 1024;
	else if (!strcmp(u, "T") || !strcmp(u, "TiB"))
		mult = 1024 * 1024;
	else
		goto bad;
	if (n > UINT64_MAX / mult || n * mult < min_mib || n * mult > max_mib)
		goto range;
	*mib = n * mult;
	return 0;
bad:
	buf_addf(why, "'%.64s' is not a size like 512M, 4G or 1T", s);
	return -EINVAL;
range:
	buf_addf(why, "'%.64s' is out of range (", s);
	format_size_mib(why, min_mib);
	buf_addstr(why, " to ");
	format_size_mib(why, max_mib);
	buf_addstr(why, ")");
	return -ERANGE;
}

int host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

int parse_cpus(const char *s, int *cpus, struct buf *why)
{
	int max = host_cpus(), ret;
	long n;

	ret = parse_long(s, LONG_MIN, LONG_MAX, &n);
	if (ret == -EINVAL) {
		buf_addf(why, "'%.64s' is not a whole number", s);
		return ret;
	}
	if (ret || n < 1) {
		buf_addf(why, "'%.64s' is out of range (1 to %d)", s, max);
		return -ERANGE;
	}
	if (n > max) {
		buf_addf(why, "%ld is more than the %d CPUs of this machine", n, max);
		return -ERANGE;
	}
	*cpus = (int)n;
	return 0;
}
