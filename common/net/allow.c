#include "net/allow.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/strvec.h"
#include "net/http.h"
#include "base/banned.h"

#define PRESET_MAX 65536

int allow_preset_name_ok(const char *n)
{
	size_t len = strlen(n);

	if (!len || len > ALLOW_PRESET_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!(islower((unsigned char)n[i]) || isdigit((unsigned char)n[i]) || n[i] == '-'))
			return 0;
	return 1;
}

static int add_lines(struct allow_list *l, const char *text, const char *presets_dir,
                     int allow_presets, const char *what, struct strvec *marks, struct buf *err);

/* The text of preset s ("preset:NAME") from presets_dir into text: 0 or a negative errno with err.
 */
static int read_preset(const char *s, const char *presets_dir, struct buf *text, struct buf *err)
{
	struct buf path = BUF_INIT;
	ssize_t r;

	if (!allow_preset_name_ok(s + 7)) {
		buf_addf(err, "invalid entry '%s': bad preset name", s);
		return -EINVAL;
	}
	buf_addf(&path, "%s/%s", presets_dir, s + 7);
	r = buf_read_file(text, path.buf, PRESET_MAX);
	if (r < 0)
		buf_addf(err, "unknown preset '%s': cannot read '%s': %s", s + 7, path.buf,
		         strerror((int)-r));
	buf_release(&path);
	return r < 0 ? (int)r : 0;
}

static int add_one(struct allow_list *l, const char *s, const char *presets_dir, int allow_presets,
                   struct buf *err)
{
	struct allow_entry e;
	struct buf why = BUF_INIT; /* filled only on the way out */
	const char *rest = s;
	size_t n = strlen(s);
	int colons = 0;

	memset(&e, 0, sizeof(e));
	if (!strncmp(s, "preset:", 7)) {
		struct buf text = BUF_INIT;
		int ret;

		if (!allow_presets) {
			buf_addf(err, "invalid entry '%s': a preset cannot name a preset", s);
			return -EINVAL;
		}
		ret = read_preset(s, presets_dir, &text, err);
		if (!ret)
			ret = add_lines(l, text.buf, presets_dir, 0, s, NULL, err);
		buf_release(&text);
		return ret;
	}
	for (size_t i = 0; i < n; i++)
		colons += s[i] == ':';
	if (colons >= 2 && s[0] != '[') {
		/* A bare IPv6 literal, port 443. */
		if (n >= sizeof(e.host) || inet_pton(AF_INET6, s, e.addr) != 1) {
			buf_addf(err, "invalid entry '%s': bad IPv6 address (use [addr]:port)", s);
			return -EINVAL;
		}
		e.kind = ALLOW_ADDR;
		e.family = AF_INET6;
		e.port = 443;
		memcpy(e.host, s, n + 1);
		goto add;
	}
	if (!strncmp(s, "*.", 2)) {
		e.kind = ALLOW_WILDCARD;
		rest = s + 2;
	}
	if (http_split_authority(rest, strlen(rest), 443, e.host, sizeof(e.host), &e.port, &why)) {
		buf_addf(err, "invalid entry '%s': %s", s, why.buf);
		buf_release(&why);
		return -EINVAL;
	}
	if (inet_pton(AF_INET, e.host, e.addr) == 1) {
		e.family = AF_INET;
	} else if (inet_pton(AF_INET6, e.host, e.addr) == 1) {
		e.family = AF_INET6;
	}
	if (e.family) {
		if (e.kind == ALLOW_WILDCARD) {
			buf_addf(err, "invalid entry '%s': a wildcard needs a domain name", s);
			return -EINVAL;
		}
		e.kind = ALLOW_ADDR;
	} else if (e.kind == ALLOW_WILDCARD && !strchr(e.host, '.')) {
		buf_addf(err, "invalid entry '%s': a wildcard needs a domain with a dot", s);
		return -EINVAL;
	}
add:
	ALLOC_GROW(l->v, l->nr + 1, l->alloc);
	l->v[l->nr++] = e;
	return 0;
}

/*
 * A preset's line may end with a cache mark, " cache:KIND" (KIND 1 to 16
 * lowercase letters): cut it off line, pushing the line's entry and KIND
 * onto marks when marks is not NULL.  0, or -EINVAL for other words after
 * the entry.
 */
static int cut_mark(char *line, struct strvec *marks)
{
	char *sp = strpbrk(line, " \t"), *k;
	size_t n;

	if (!sp)
		return 0;
	*sp = '\0';
	for (k = sp + 1; *k == ' ' || *k == '\t'; k++)
		;
	if (strncmp(k, "cache:", 6))
		return -EINVAL;
	k += 6;
	n = strlen(k);
	if (!n || n > 16)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)k[i]))
			return -EINVAL;
	if (marks) {
		strvec_push(marks, line);
		strvec_push(marks, k);
	}
	return 0;
}

static int add_lines(struct allow_list *l, const char *text, const char *presets_dir,
                     int allow_presets, const char *what, struct strvec *marks, struct buf *err)
{
	const char *p = text;
	int lineno = 0, r;

	while (*p) {
		const char *e = strchr(p, '\n'), *s, *t;
		char line[512];
		size_t len;

		if (!e)
			e = p + strlen(p);
		lineno++;
		s = p;
		t = e;
		while (s < t && isspace((unsigned char)*s))
			s++;
		while (t > s && isspace((unsigned char)t[-1]))
			t--;
		len = t - s;
		p = *e ? e + 1 : e;
		if (!len || *s == '#')
			continue;
		if (len >= sizeof(line)) {
			buf_addf(err, "%s:%d: entry too long", what, lineno);
			return -EINVAL;
		}
		memcpy(line, s, len);
		line[len] = '\0';
		if (!allow_presets && cut_mark(line, marks) < 0) {
			buf_addf(err, "%s:%d: words after the entry that are not one cache:KIND",
			         what, lineno);
			return -EINVAL;
		}
		if ((r = add_one(l, line, presets_dir, allow_presets, err)) < 0) {
			buf_addf(err, " (%s:%d)", what, lineno);
			return r;
		}
	}
	return 0;
}

int allow_add(struct allow_list *l, const char *entry, const char *presets_dir, struct buf *err)
{
	return add_one(l, entry, presets_dir, 1, err);
}

int allow_entry_same(const char *a, const char *b)
{
	struct allow_list la = ALLOW_LIST_INIT, lb = ALLOW_LIST_INIT;
	struct buf why = BUF_INIT;
	const struct allow_entry *x, *y;
	int same = 0;

	if (!add_one(&la, a, NULL, 0, &why) && !add_one(&lb, b, NULL, 0, &why)) {
		x = &la.v[0];
		y = &lb.v[0];
		same = x->kind == y->kind && x->port == y->port &&
		       (x->kind == ALLOW_ADDR
		            ? x->family == y->family &&
		                  !memcmp(x->addr, y->addr, x->family == AF_INET ? 4 : 16)
		            : !strcasecmp(x->host, y->host));
	}
	allow_clear(&la);
	allow_clear(&lb);
	buf_release(&why);
	return same;
}

int allow_add_file(struct allow_list *l, const char *path, const char *presets_dir, struct buf *err)
{
	struct buf text = BUF_INIT;
	ssize_t r = buf_read_file(&text, path, 1 << 20);
	int ret;

	if (r < 0) {
		buf_addf(err, "cannot read '%s': %s", path, strerror((int)-r));
		buf_release(&text);
		return (int)r;
	}
	if (memchr(text.buf, '\0', text.len)) {
		buf_addf(err, "'%s' holds a NUL byte", path);
		buf_release(&text);
		return -EINVAL;
	}
	ret = add_lines(l, text.buf, presets_dir, 1, path, NULL, err);
	buf_release(&text);
	return ret;
}

int allow_preset_marks(const char *entry, const char *presets_dir, struct strvec *marks,
                       struct buf *err)
{
	struct allow_list l = ALLOW_LIST_INIT;
	struct buf text = BUF_INIT;
	int ret;

	if (strncmp(entry, "preset:", 7))
		BUG("allow_preset_marks: '%s' is not a preset", entry);
	ret = read_preset(entry, presets_dir, &text, err);
	if (!ret)
		ret = add_lines(&l, text.buf, presets_dir, 0, entry, marks, err);
	allow_clear(&l);
	buf_release(&text);
	return ret;
}

void allow_clear(struct allow_list *l)
{
	free(l->v);
	l->v = NULL;
	l->nr = l->alloc = 0;
}

const struct allow_entry *allow_match(const struct allow_list *l, const char *host, int port)
{
	unsigned char addr[16];
	int family = 0;
	size_t hl = strlen(host);

	if (inet_pton(AF_INET, host, addr) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, host, addr) == 1)
		family = AF_INET6;
	for (size_t i = 0; i < l->nr; i++) {
		const struct allow_entry *e = &l->v[i];

		if (e->port != port)
			continue;
		switch (e->kind) {
		case ALLOW_ADDR:
			if (family == e->family &&
			    !memcmp(addr, e->addr, family == AF_INET ? 4 : 16))
				return e;
			break;
		case ALLOW_NAME:
			if (!family && !strcmp(host, e->host))
				return e;
			break;
		case ALLOW_WILDCARD: {
			size_t dl = strlen(e->host);

			if (!family && hl > dl + 1 && host[hl - dl - 1] == '.' &&
			    !strcmp(host + hl - dl, e->host))
				return e;
			break;
		}
		}
	}
	return NULL;
}

static int v4_public(uint32_t a)
{
	static const struct {
		uint32_t net;
		int bits;
	} special[] = {
	    {0x00000000, 8},  {0x0a000000, 8},  {0x64400000, 10}, {0x7f000000, 8},
	    {0xa9fe0000, 16}, {0xac100000, 12}, {0xc0000000, 24}, {0xc0000200, 24},
	    {0xc0586300, 24}, {0xc0a80000, 16}, {0xc6120000, 15}, {0xc6336400, 24},
	    {0xcb007100, 24}, {0xe0000000, 4},  {0xf0000000, 4},
	};

	for (size_t i = 0; i < ARRAY_SIZE(special); i++) {
		uint32_t mask = 0xffffffffu << (32 - special[i].bits);

		if ((a & mask) == special[i].net)
			return 0;
	}
	return 1;
}

/*
 * The IPv4 address inside an address of NAT64's well-known prefix
 * 64:ff9b::/96 (RFC 6052), where a DNS64 resolver puts every IPv4-only name
 * on an IPv6-only network (docs/proxy.md, "The allow list"): 1 with *v4
 * set, else 0.
 */
static int nat64_v4(const unsigned char *a, uint32_t *v4)
{
	static const unsigned char wkp[12] = {0x00, 0x64, 0xff, 0x9b};

	if (memcmp(a, wkp, sizeof(wkp)))
		return 0;
	*v4 = (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 | (uint32_t)a[14] << 8 | a[15];
	return 1;
}

int addr_is_public(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		return v4_public(ntohl(s4->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		uint32_t v4;

		/* NAT64 reaches the IPv4 address it holds: that one decides. */
		if (nat64_v4(a, &v4))
			return v4_public(v4);
		/* Global unicast is 2000::/3; within it refuse the special blocks. */
		if ((a[0] & 0xe0) != 0x20)
			return 0;
		if (a[0] == 0x20 && a[1] == 0x01 && a[2] < 0x02) /* 2001::/23 */
			return 0;
		if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d &&
		    a[3] == 0xb8) /* 2001:db8::/32 */
			return 0;
		if (a[0] == 0x20 && a[1] == 0x02) /* 2002::/16, 6to4 */
			return 0;
		if (a[0] == 0x3f && a[1] == 0xff && (a[2] & 0xf0) == 0) /* 3fff::/20 */
			return 0;
		return 1;
	}
	return 0;
}

int addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

int allow_addr_ok(const struct allow_entry *e, const struct sockaddr *sa)
{
	if (e->kind == ALLOW_ADDR) {
		if (sa->sa_family != e->family)
			return 0;
		if (e->family == AF_INET)
			return !memcmp(&((const struct sockaddr_in *)sa)->sin_addr, e->addr, 4);
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, e->addr, 16);
	}
	if (e->kind == ALLOW_NAME && !strcmp(e->host, "localhost"))
		return addr_is_loopback(sa);
	return addr_is_public(sa);
}

/*
 * Does the kernel deliver packets for sa to this machine (its route's type is
 * RTN_LOCAL, as `ip route get` prints "local")?  1 or 0, or a negative errno.
 * This catches a local route whose preferred source is another address
 * (AnyIP: `ip route add table local local PREFIX dev lo src ...`), which the
 * source address check below does not.
 */
static int route_is_local(const struct sockaddr *sa)
{
	struct {
		struct nlmsghdr n;
		struct rtmsg r;
		char attrs[RTA_SPACE(16)];
	} req = {0};
	union {
		struct nlmsghdr n;
		char buf[4096];
	} ans;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct rtattr *rta;
	size_t alen = sa->sa_family == AF_INET ? 4 : 16;
	ssize_t got;
	int fd, ret;

	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(req.r)) + RTA_SPACE(alen);
	req.n.nlmsg_type = RTM_GETROUTE;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.n.nlmsg_seq = 1;
	req.r.rtm_family = sa->sa_family;
	req.r.rtm_dst_len = alen * 8;
	rta = (struct rtattr *)((char *)&req + NLMSG_LENGTH(sizeof(req.r)));
	rta->rta_type = RTA_DST;
	rta->rta_len = RTA_LENGTH(alen);
	memcpy(RTA_DATA(rta),
	       sa->sa_family == AF_INET
	           ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
	           : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
	       alen);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, req.n.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	do
		got = recv(fd, &ans, sizeof(ans), 0);
	while (got < 0 && errno == EINTR);
	ret = got < 0 ? -errno : 0;
	close(fd);
	if (ret < 0)
		return ret;
	if (!NLMSG_OK(&ans.n, (size_t)got))
		return -EPROTO;
	if (ans.n.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&ans.n);

		if (ans.n.nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EPROTO;
		return e->error < 0 ? e->error : -EPROTO;
	}
	if (ans.n.nlmsg_type != RTM_NEWROUTE ||
	    ans.n.nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
		return -EPROTO;
	return ((const struct rtmsg *)NLMSG_DATA(&ans.n))->rtm_type == RTN_LOCAL;
}

int addr_is_own(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage src;
	socklen_t sl = sizeof(src);
	int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0 || getsockname(fd, (struct sockaddr *)&src, &sl) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	close(fd);
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return 0;
	if (src.ss_family == sa->sa_family &&
	    (sa->sa_family == AF_INET ? !memcmp(&((struct sockaddr_in *)&src)->sin_addr,
	                                        &((const struct sockaddr_in *)sa)->sin_addr, 4)
	                              : !memcmp(&((struct sockaddr_in6 *)&src)->sin6_addr,
	                                        &((const struct sockaddr_in6 *)sa)->sin6_addr, 16)))
		return 1;
	/*
	 * The kernel routed it; only a local route with another source is left.
	 * Where netlink cannot be asked (a sandbox without it), the source
	 * check's answer stands.
	 */
	return route_is_local(sa) == 1;
}

int allow_addr_check(const struct allow_entry *e, const struct sockaddr *sa, socklen_t len)
{
	uint32_t v4;
	int own;

	if (!allow_addr_ok(e, sa))
		return 0;
	/* Only a public address is left to look at: one e names itself, or loopback. */
	if (e->kind == ALLOW_ADDR || addr_is_loopback(sa))
		return 1;
	own = addr_is_own(sa, len);
	if (own != 1 && sa->sa_family == AF_INET6 &&
	    nat64_v4(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr, &v4)) {
		struct sockaddr_in s4 = {.sin_family = AF_INET,
		                         .sin_port = ((const struct sockaddr_in6 *)sa)->sin6_port,
		                         .sin_addr.s_addr = htonl(v4)};
		int own4 = addr_is_own((const struct sockaddr *)&s4, sizeof(s4));

		/* No route to any IPv4 address: an IPv6-only machine, not one of its own. */
		if (own4 == 1 || (!own && own4 != -ENETUNREACH))
			own = own4;
	}
	if (own < 0)
		return own;
	return own ? ALLOW_ADDR_OWN : 1;
}
