/* A git remote's URL: see git_remote.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "net/git_remote.h"
#include "net/host_port.h"
#include "base/banned.h"

/* The path's bytes the grammar refuses, besides controls, space and non-ASCII. */
#define PATH_REFUSED "?#\\\"<>{}|^`;"

/* The authority of s (after "https://"), lowercase, into *auth; s's path at *path. */
static int check(const char *s, char **auth, const char **path, struct buf *err)
{
	const char *a, *slash;
	char *hp, *colon;
	int r;

	if (strncmp(s, "https://", 8))
		return buf_refuse(err, -EINVAL, "must be an https:// URL");
	if (strlen(s) > GIT_REMOTE_URL_MAX)
		return buf_refuse(err, -EINVAL, "is longer than 2048 bytes");
	a = s + 8;
	slash = strchr(a, '/');
	if (!slash || !slash[1])
		return buf_refuse(err, -EINVAL, "needs a repository path after the host");
	if (memchr(a, '@', (size_t)(slash - a)))
		return buf_refuse(
		    err, -EINVAL,
		    "cannot hold credentials; name the variable holding the token in token");
	for (const char *p = slash; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f ||
		    strchr(PATH_REFUSED, *p))
			return buf_refuse(
			    err, -EINVAL,
			    "may hold no spaces, query, fragment or special characters in its "
			    "path");
	for (const char *p = slash; p; p = strchr(p + 1, '/'))
		if (!strcmp(p, "/.") || !strncmp(p, "/./", 3) || !strcmp(p, "/..") ||
		    !strncmp(p, "/../", 4) || !strncmp(p, "//", 2))
			return buf_refuse(err, -EINVAL,
			                  "cannot hold '.', '..' or '//' in its path");
	hp = xstrndup(a, (size_t)(slash - a));
	host_port_lower(hp);
	if (!hp[0] || hp[0] == '*' || hp[0] == ':' ||
	    (!strchr(hp, '[') && (colon = strchr(hp, ':')) && !colon[1])) {
		r = buf_refuse(err, -EINVAL, "needs a host");
	} else {
		struct buf why = BUF_INIT;

		if ((r = host_port_check(hp, &why)) < 0)
			buf_addf(err, "has a bad host: %s", why.buf);
		buf_release(&why);
	}
	if (r < 0) {
		free(hp);
		return r;
	}
	*auth = hp;
	*path = slash;
	return 0;
}

int git_remote_url_check(const char *s, struct buf *err)
{
	const char *path;
	char *auth = NULL;
	int r = check(s, &auth, &path, err);

	free(auth);
	return r;
}

int git_remote_url_parse(const char *s, struct git_remote_url *u, struct buf *err)
{
	const char *path, *port;
	char *auth = NULL;
	size_t n;
	int r;

	memset(u, 0, sizeof(*u));
	if ((r = check(s, &auth, &path, err)) < 0)
		return r;
	if (auth[0] == '[') {
		const char *end = strchr(auth, ']');

		u->host = xstrndup(auth + 1, (size_t)(end - auth - 1));
		port = end[1] == ':' ? end + 2 : NULL;
	} else {
		port = strchr(auth, ':');
		u->host = xstrndup(auth, port ? (size_t)(port - auth) : strlen(auth));
		if (port)
			port++;
	}
	u->port = xstrdup(port ? port : "443");
	u->hostport = auth;
	n = strlen(path);
	while (n && path[n - 1] == '/')
		n--;
	u->path = xstrndup(path, n);
	return 0;
}

void git_remote_url_release(struct git_remote_url *u)
{
	free(u->host);
	free(u->port);
	free(u->hostport);
	free(u->path);
	memset(u, 0, sizeof(*u));
}
