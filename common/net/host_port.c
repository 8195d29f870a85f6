/* The host grammar: see host_port.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "net/host_port.h"
#include "base/num.h"
#include "base/banned.h"

/* A DNS name: labels of [a-z0-9-], 1..63 each, not starting or ending in '-'. */
static int valid_hostname(const char *s)
{
	size_t total = strlen(s), label = 0;

	if (!total || total > 253)
		return 0;
	for (const char *p = s;; p++) {
		if (*p == '.' || !*p) {
			if (!label || p[-1] == '-')
				return 0;
			if (!*p)
				return 1;
			label = 0;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return 0;
		if (*p == '-' && !label)
			return 0;
		if (++label > 63)
			return 0;
	}
}

void host_port_lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s += 'a' - 'A';
}

static int valid_port(const char *s)
{
	long v;

	return *s != '0' && parse_long(s, 1, 65535, &v) == 0;
}

/* host_port_check() on a copy it may cut. */
static int check(char *s, struct buf *err)
{
	char *host = s, *port = NULL, *end;
	unsigned char addr[16];

	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return buf_refuse(err, -EINVAL, "an IPv6 address needs its closing ']'");
		*end = '\0';
		if (inet_pton(AF_INET6, s + 1, addr) != 1) {
			*end = ']';
			return buf_refuse(err, -EINVAL, "not an IPv6 address");
		}
		*end = ']';
		if (end[1] == ':')
			port = end + 2;
		else if (end[1])
			return buf_refuse(err, -EINVAL, "unexpected text after ']'");
		if (port && !valid_port(port))
			return buf_refuse(err, -EINVAL,
			                  "the port must be a number from 1 to 65535");
		return 0;
	}
	end = strchr(s, ':');
	if (end) {
		if (strchr(end + 1, ':'))
			return buf_refuse(
			    err, -EINVAL,
			    "write an IPv6 address in brackets, like [2001:db8::1]:443");
		port = end + 1;
		*end = '\0';
	}
	if (port && !valid_port(port)) {
		*end = ':';
		return buf_refuse(err, -EINVAL, "the port must be a number from 1 to 65535");
	}
	if (inet_pton(AF_INET, host, addr) == 1)
		goto ok;
	if (!strncmp(host, "*.", 2) ? !valid_hostname(host + 2) : !valid_hostname(host)) {
		if (end)
			*end = ':';
		return buf_refuse(err, -EINVAL,
		                  strchr(host, '*')
		                      ? "a wildcard is only allowed as '*.' at the start"
		                      : "not a host name");
	}
	{
		/* All-digit last label that inet_pton refused: a bad IPv4 address. */
		const char *dot = strrchr(host, '.');
		const char *last = dot ? dot + 1 : host;

		if (strspn(last, "0123456789") == strlen(last)) {
			if (end)
				*end = ':';
			return buf_refuse(err, -EINVAL, "not an IPv4 address");
		}
	}
ok:
	if (end)
		*end = ':';
	return 0;
}

int host_port_check(const char *s, struct buf *err)
{
	char *copy = xstrdup(s);
	int r = check(copy, err);

	free(copy);
	return r;
}
