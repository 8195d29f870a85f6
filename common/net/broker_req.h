/*
 * The grammar of aibox-broker's request targets, shared by the broker and
 * aibox-proxy (which reads the remote number to hand a request over):
 * "/<n>/rest" or "http://<host>/<n>/rest" (docs/broker.md, "Requests").
 * The HTTP around them is read with common/net/http.h (common/net/hconn.h).
 */
#ifndef AIBOX_BROKER_REQ_H
#define AIBOX_BROKER_REQ_H

#include <stddef.h>

/* Remote numbers in a path: decimal, no leading zero, below this. */
#define BREQ_REMOTES_MAX 1000

/*
 * The remote number at the start of s[0..n): decimal digits only, no
 * leading zero ("0" itself is fine), below BREQ_REMOTES_MAX, and the whole
 * of s[0..n).  0 with *idx set, or -EINVAL.
 */
int breq_remote_number(const char *s, size_t n, size_t *idx);

/*
 * Split a request target into the remote number and the rest: origin form
 * "/<n>/rest" or absolute form "http://<host>/<n>/rest" (the host is not
 * looked at).  After "/<n>/", one ".git/" and any run of '/' are skipped
 * (insteadOf rewrites by prefix, docs/broker.md "In the VM").  *rest
 * points into target.  0 or -EINVAL.
 */
int breq_parse_target(const char *target, size_t *idx, const char **rest);

#endif
