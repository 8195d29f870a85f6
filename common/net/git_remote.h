/*
 * A git: remote (docs/config.md, "git"): its URL's one grammar, and the
 * plain description of a remote that the config fills and the broker's
 * starter reads (common/task/broker_spawn.h), so that neither needs the other.
 *
 * The grammar, for every reader of a remote's URL (the config, settings.json
 * in the host and the guest, aibox-broker's --remote): "https://", a host
 * (a DNS name, an IPv4 address or an IPv6 address in brackets; no
 * credentials) with an optional port 1-65535, then a path of at least one
 * more byte; at most GIT_REMOTE_URL_MAX bytes, printable ASCII without
 * space, and no query, fragment, '"', '\\', ';', '<', '>', '{', '}', '|',
 * '^', '`' or '.', '..' and '//' segments in the path.  Such a URL can be
 * written into git's config unquoted.
 */
#ifndef AIBOX_GIT_REMOTE_H
#define AIBOX_GIT_REMOTE_H

#include <stddef.h>

#include "base/buf.h"
#include "base/strvec.h"

#define GIT_REMOTE_URL_MAX 2048

/* How the broker presents a remote's token. */
enum git_remote_auth {
	GIT_REMOTE_BASIC,  /* Authorization: Basic base64(user:token) */
	GIT_REMOTE_BEARER, /* Authorization: Bearer token */
};

/* One git: remote, as the config holds it. */
struct git_remote {
	char *url;       /* the grammar's; scheme and host lowercase */
	char *host;      /* the URL's host, lowercase, IPv6 without brackets */
	char *token_env; /* NAME of the host variable holding the token */
	enum git_remote_auth auth;
	char *user;         /* for basic auth; default "x-access-token" */
	int fetch;          /* 1: fetch and clone pass */
	struct strvec push; /* branch names and patterns ('*' matches any run) */
};

/* A URL taken apart (git_remote_url_parse()); each member allocated. */
struct git_remote_url {
	char *host;     /* lowercase, IPv6 without brackets: what resolves */
	char *port;     /* as written, "443" when the URL names none */
	char *hostport; /* the authority, lowercase, for a Host header */
	char *path;     /* from its '/' on, without trailing '/'s (may be "") */
};

/*
 * 0 when s is a remote's URL by the grammar above, else -EINVAL with the
 * reason appended to err ("must be an https:// URL", ...; the caller names
 * the URL).
 */
int git_remote_url_check(const char *s, struct buf *err);

/*
 * git_remote_url_check(), and on success u filled (release it with
 * git_remote_url_release()).  On failure u holds nothing.
 */
int git_remote_url_parse(const char *s, struct git_remote_url *u, struct buf *err);

void git_remote_url_release(struct git_remote_url *u);

#endif
