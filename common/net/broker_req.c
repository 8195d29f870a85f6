/* The broker's request targets: see broker_req.h. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "net/broker_req.h"
#include "base/banned.h"

int breq_remote_number(const char *s, size_t n, size_t *idx)
{
	size_t v = 0;

	if (!n || (s[0] == '0' && n > 1))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (size_t)(s[i] - '0');
		if (v >= BREQ_REMOTES_MAX)
			return -EINVAL;
	}
	*idx = v;
	return 0;
}

int breq_parse_target(const char *target, size_t *idx, const char **rest)
{
	const char *p = target, *slash;

	if (!strncasecmp(p, "http://", 7)) {
		p = strchr(p + 7, '/');
		if (!p)
			return -EINVAL;
	}
	if (*p != '/')
		return -EINVAL;
	p++;
	slash = strchr(p, '/');
	if (!slash || breq_remote_number(p, (size_t)(slash - p), idx) < 0)
		return -EINVAL;
	p = slash + 1;
	if (!strncmp(p, ".git/", 5))
		p += 5;
	while (*p == '/')
		p++;
	*rest = p;
	return 0;
}
