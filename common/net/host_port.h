/*
 * The one host grammar: the config's allow entries and a git remote's URL
 * (common/net/git_remote.h) name hosts this way.
 */
#ifndef AIBOX_HOST_PORT_H
#define AIBOX_HOST_PORT_H

#include "base/buf.h"

/*
 * 0 when s is host, host:port, *.domain[:port], IPv4[:port] or
 * [IPv6][:port] (a name: labels of 1-63 bytes of [a-z0-9-], not starting
 * or ending in '-', at most 253 bytes; the port 1-65535 without a leading
 * 0), else -EINVAL with the reason appended to err.  s is taken as it is:
 * lowercase it first (host_port_lower()) where case does not matter.
 */
int host_port_check(const char *s, struct buf *err);

/* Lowercase the ASCII letters of s in place. */
void host_port_lower(char *s);

#endif
