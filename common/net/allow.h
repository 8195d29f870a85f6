/*
 * The proxy's allow list: which host:port a client may reach.
 *
 * Entries:
 *   host             host on port 443 ("github.com")
 *   host:port        ("localhost:5432", "example.com:80")
 *   *.example.com    every subdomain of example.com (not example.com itself), port 443;
 *                    "*.example.com:8443" for another port
 *   1.2.3.4[:port]   an IPv4 literal; [2001:db8::1][:port] an IPv6 literal
 *   preset:NAME      the entries of the preset file NAME (see docs/proxy.md)
 * Names are compared case-insensitively, without a trailing dot.
 *
 * A name on the list is only reached at public addresses that are not the
 * machine's own; loopback, private, link-local and other special addresses,
 * and the machine's own, are reached only through an entry that names the
 * address itself or "localhost" (see allow_addr_check()).
 */
#ifndef AIBOX_ALLOW_H
#define AIBOX_ALLOW_H

#include <netinet/in.h>
#include <sys/socket.h>

struct buf;
struct strvec;

enum allow_kind {
	ALLOW_NAME,     /* exact name */
	ALLOW_WILDCARD, /* subdomains of host */
	ALLOW_ADDR,     /* an IP literal */
};

struct allow_entry {
	enum allow_kind kind;
	char host[256]; /* lowercase; for ALLOW_WILDCARD the domain without "*." */
	int port;
	int family; /* ALLOW_ADDR: AF_INET or AF_INET6 */
	unsigned char addr[16];
};

struct allow_list {
	struct allow_entry *v;
	size_t nr, alloc;
};

#define ALLOW_LIST_INIT                                                                            \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* The longest preset name. */
#define ALLOW_PRESET_NAME_MAX 32

/*
 * Whether n is a preset name: 1 to ALLOW_PRESET_NAME_MAX lowercase letters,
 * digits and '-'.  The one rule for the config and the proxy.
 */
int allow_preset_name_ok(const char *n);

/*
 * Add one entry.  A preset is read now from presets_dir/NAME (NAME is
 * [a-z0-9-], at most 32 long).  0, or a negative errno with a message in err
 * ("invalid entry 'x': ...").
 */
int allow_add(struct allow_list *l, const char *entry, const char *presets_dir, struct buf *err);

/*
 * Whether entries a and b (neither a preset) name the same hosts on the same
 * port: "a.com", "A.com" and "a.com:443" are one, "[2001:db8::1]" and
 * "2001:DB8:0::1" too; "*.a.com" and "a.com:8443" are others.  0 for an
 * entry allow_add() refuses.
 */
int allow_entry_same(const char *a, const char *b);

/*
 * Add the entries of a file: one a line, blank lines and lines starting with
 * '#' ignored, surrounding spaces trimmed.  0, or a negative errno with a message in err.
 */
int allow_add_file(struct allow_list *l, const char *path, const char *presets_dir,
                   struct buf *err);

/*
 * The cache marks of a preset entry ("preset:NAME"): a preset's line may
 * end with " cache:KIND" (docs/cache.md, "Which hosts are cached"), which
 * allow_add() leaves out; here each such line pushes its entry and KIND onto
 * marks, in pairs.  KIND is only checked to be 1 to 16 lowercase letters.
 * 0, or a negative errno with err, in allow_add()'s words.
 */
int allow_preset_marks(const char *entry, const char *presets_dir, struct strvec *marks,
                       struct buf *err);

void allow_clear(struct allow_list *l);

/*
 * The entry that lets a client reach host:port (host as from
 * http_split_authority: lowercase, an IP literal without brackets), or NULL.
 */
const struct allow_entry *allow_match(const struct allow_list *l, const char *host, int port);

/*
 * Is the address an ordinary public unicast address (no loopback, private,
 * ...)?  An address of NAT64's well-known prefix 64:ff9b::/96 is judged by
 * the IPv4 address it holds.
 */
int addr_is_public(const struct sockaddr *sa);

/* Is the address a loopback address (127/8, ::1)? */
int addr_is_loopback(const struct sockaddr *sa);

/*
 * May a connection made through entry e go to address sa?  An entry naming
 * an IP literal allows exactly that address, "localhost" allows loopback
 * addresses, and every other entry allows only public addresses.
 */
int allow_addr_ok(const struct allow_entry *e, const struct sockaddr *sa);

/*
 * Is sa (len bytes) an address of this machine, one the kernel routes to
 * itself?  Found by connecting a UDP socket to it, which sends nothing, and
 * reading the source address the kernel chose: for the machine's own
 * address that is the address itself; else by asking the kernel's routing
 * (netlink RTM_GETROUTE) whether it delivers sa here (a local route, whose
 * source may be another address).  1 or 0, or a negative errno when it
 * cannot tell (no socket, no route).
 */
int addr_is_own(const struct sockaddr *sa, socklen_t len);

/* allow_addr_check(): sa is an address of this machine, which e does not name. */
#define ALLOW_ADDR_OWN 2

/*
 * May a connection made through entry e go to address sa (len bytes)?
 * allow_addr_ok(), and for an entry that allows only public addresses, sa
 * is no address of this machine (addr_is_own()): a name on the list does
 * not reach the machine's own services, whatever its address (nor, for a
 * NAT64 address, the IPv4 address it holds).  1 (it may),
 * 0 (not an address e allows), ALLOW_ADDR_OWN, or a negative errno from
 * addr_is_own().
 */
int allow_addr_check(const struct allow_entry *e, const struct sockaddr *sa, socklen_t len);

#endif
