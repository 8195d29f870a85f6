#include "git/bundle_fsck.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "git/bundle_read.h"
#include "base/err.h"
#include "base/hex.h"
#include "base/printable.h"
#include "base/banned.h"

void bundle_fsck_blobs_clear(struct bundle_fsck_blobs *b)
{
	free(b->ids);
	free(b->kind);
	memset(b, 0, sizeof(*b));
}

__attribute__((format(printf, 2, 3))) static int bad(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return BUNDLE_REFUSED;
}

/* A name from an object in a reason: quoted, at most 64 bytes, unprintable bytes as '?'. */
static void add_quoted(struct buf *err, const char *s, size_t n)
{
	size_t start;

	buf_addch(err, '\'');
	start = err->len;
	buf_add(err, s, n < 64 ? n : 64);
	printable_ascii(err->buf + start, err->len - start, 0);
	if (n > 64)
		buf_addstr(err, "...");
	buf_addch(err, '\'');
}

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* git's isspace: space, tab, LF, CR only. */
static int git_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

/* Whether [*p, end) starts with s; if so *p moves past it. */
static int skip(const char **p, const char *end, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(end - *p) < n || memcmp(*p, s, n))
		return 0;
	*p += n;
	return 1;
}

/* A SHA-1 id in hex (either case) and a newline at *p; *p moves past them. */
static int oid_line(const char **p, const char *end)
{
	if (end - *p < OID_SHA1_HEX + 1)
		return 0;
	for (int i = 0; i < OID_SHA1_HEX; i++)
		if (hex_digit((unsigned char)(*p)[i]) < 0)
			return 0;
	if ((*p)[OID_SHA1_HEX] != '\n')
		return 0;
	*p += OID_SHA1_HEX + 1;
	return 1;
}

/*
 * The header of a commit or tag (git's verify_headers): no NUL before the
 * blank line that ends it, and without one the object ends in a newline.
 */
static int headers_ok(const char *d, size_t len, const char *what, struct buf *err)
{
	for (size_t i = 0; i < len; i++) {
		if (d[i] == '\0')
			return bad(err, "%s: NUL byte in the header (nulInHeader)", what);
		if (d[i] == '\n' && i + 1 < len && d[i + 1] == '\n')
			return 0;
	}
	if (len && d[len - 1] == '\n')
		return 0;
	return bad(err, "%s: unterminated header (unterminatedHeader)", what);
}

/* The first of '<', '>' or the line's end in [p, le). */
static const char *to_angle(const char *p, const char *le)
{
	while (p < le && *p != '<' && *p != '>')
		p++;
	return p;
}

/*
 * An author, committer or tagger line at *p (after its keyword), as git's
 * fsck_ident: "Name <email> 1234567890 +0000\n".  *p moves to the next line.
 */
static int ident_ok(const char **pp, const char *end, const char *who, struct buf *err)
{
	const char *p = *pp, *le = memchr(p, '\n', (size_t)(end - p));
	uint64_t t = 0;

	if (!le)
		le = end;
	*pp = le < end ? le + 1 : le;
	if (p < le && *p == '<')
		return bad(err, "%s: no name before the email (missingNameBeforeEmail)", who);
	p = to_angle(p, le);
	if (p < le && *p == '>')
		return bad(err, "%s: bad name (badName)", who);
	if (p == le)
		return bad(err, "%s: no email (missingEmail)", who);
	if (p[-1] != ' ')
		return bad(err, "%s: no space before the email (missingSpaceBeforeEmail)", who);
	p = to_angle(p + 1, le);
	if (p == le || *p != '>')
		return bad(err, "%s: bad email (badEmail)", who);
	p++;
	if (p == le || *p != ' ')
		return bad(err, "%s: no space before the date (missingSpaceBeforeDate)", who);
	p++;
	/* git takes more blanks before the date, as it always has. */
	while (p < le && (*p == ' ' || *p == '\t'))
		p++;
	if (p == le || !is_digit(*p))
		return bad(err, "%s: bad date (badDate)", who);
	if (*p == '0' && (p + 1 == le || p[1] != ' '))
		return bad(err, "%s: zero-padded date (zeroPaddedDate)", who);
	/* A date must fit git's time_t: at most INT64_MAX. */
	for (; p < le && is_digit(*p); p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (t > ((uint64_t)INT64_MAX - d) / 10)
			return bad(err, "%s: the date overflows (badDateOverflow)", who);
		t = t * 10 + d;
	}
	if (p == le || *p != ' ')
		return bad(err, "%s: bad date (badDate)", who);
	p++;
	if (le - p != 5 || (*p != '+' && *p != '-') || !is_digit(p[1]) || !is_digit(p[2]) ||
	    !is_digit(p[3]) || !is_digit(p[4]) || le == end)
		return bad(err, "%s: bad time zone (badTimezone)", who);
	return 0;
}

int bundle_fsck_commit(const char *data, size_t len, struct buf *err)
{
	const char *p = data, *end = data + len;
	unsigned authors = 0;
	int ret;

	if ((ret = headers_ok(data, len, "commit", err)))
		return ret;
	if (!skip(&p, end, "tree "))
		return bad(err, "commit: no 'tree' line (missingTree)");
	if (!oid_line(&p, end))
		return bad(err, "commit: bad 'tree' line (badTreeSha1)");
	while (skip(&p, end, "parent "))
		if (!oid_line(&p, end))
			return bad(err, "commit: bad 'parent' line (badParentSha1)");
	while (skip(&p, end, "author ")) {
		authors++;
		if ((ret = ident_ok(&p, end, "commit: author", err)))
			return ret;
	}
	if (authors == 0)
		return bad(err, "commit: no 'author' line (missingAuthor)");
	if (authors > 1)
		return bad(err, "commit: more than one 'author' line (multipleAuthors)");
	if (!skip(&p, end, "committer "))
		return bad(err, "commit: no 'committer' line (missingCommitter)");
	if ((ret = ident_ok(&p, end, "commit: committer", err)))
		return ret;
	if (memchr(data, '\0', len))
		return bad(err, "commit: NUL byte in the commit (nulInCommit)");
	return 0;
}

int bundle_fsck_tag(const char *data, size_t len, struct buf *err)
{
	static const char *const types[] = {"commit", "tree", "blob", "tag"};
	const char *p = data, *end = data + len, *eol;
	int ret, known = 0;

	if ((ret = headers_ok(data, len, "tag", err)))
		return ret;
	if (!skip(&p, end, "object "))
		return bad(err, "tag: no 'object' line (missingObject)");
	if (!oid_line(&p, end))
		return bad(err, "tag: bad 'object' line (badObjectSha1)");
	if (!skip(&p, end, "type "))
		return bad(err, "tag: no 'type' line (missingTypeEntry)");
	if (!(eol = memchr(p, '\n', (size_t)(end - p))))
		return bad(err, "tag: ends after its 'type' line (missingType)");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		known |=
		    (size_t)(eol - p) == strlen(types[i]) && !memcmp(p, types[i], strlen(types[i]));
	if (!known)
		return bad(err, "tag: bad 'type' (badType)");
	p = eol + 1;
	if (!skip(&p, end, "tag "))
		return bad(err, "tag: no 'tag' line (missingTagEntry)");
	if (!(eol = memchr(p, '\n', (size_t)(end - p))))
		return bad(err, "tag: ends after its 'tag' line (missingTag)");
	p = eol + 1;
	/* Early tags have no tagger: git only notes it. */
	if (skip(&p, end, "tagger ") && (ret = ident_ok(&p, end, "tag: tagger", err)))
		return ret;
	/* A signature header, and its continuation lines, each ending in a newline. */
	if (skip(&p, end, "gpgsig ") || skip(&p, end, "gpgsig-sha256 ")) {
		if (!(eol = memchr(p, '\n', (size_t)(end - p))))
			return bad(err, "tag: ends in its 'gpgsig' line (badGpgsig)");
		for (p = eol + 1; p < end && *p == ' '; p = eol + 1)
			if (!(eol = memchr(p, '\n', (size_t)(end - p))))
				return bad(err, "tag: ends in a 'gpgsig' continuation line "
				                "(badHeaderContinuation)");
	}
	return 0;
}

/* What follows a name git's NTFS rules reduce to it: only spaces and dots, up to ':'. */
static int ntfs_tail(const char *p)
{
	for (;; p++) {
		if (!*p || *p == ':')
			return 1;
		if (*p != ' ' && *p != '.')
			return 0;
	}
}

/* Whether the NUL-terminated name is .git on NTFS (git's is_ntfs_dotgit()). */
static int ntfs_dotgit(const char *n)
{
	if (n[0] == '.' && lower(n[1]) == 'g' && lower(n[2]) == 'i' && lower(n[3]) == 't')
		n += 4;
	else if (lower(n[0]) == 'g' && lower(n[1]) == 'i' && lower(n[2]) == 't' && n[3] == '~' &&
	         n[4] == '1')
		n += 5;
	else
		return 0;
	for (;; n++) {
		if (!*n || *n == '\\' || *n == '/' || *n == ':')
			return 1;
		if (*n != '.' && *n != ' ')
			return 0;
	}
}

/*
 * Whether the NUL-terminated name is ".<needle>" on NTFS: any case, its
 * short name (the needle's first 6 letters and ~1 to ~4, or short, git's
 * fallback short name: up to 6 letters of short, '~' and digits), each
 * followed only by spaces and dots (git's is_ntfs_dot_generic()).
 */
static int ntfs_dot(const char *n, const char *needle, const char *short_name)
{
	size_t len = strlen(needle), i;
	int tilde = 0;

	if (n[0] == '.' && !strncasecmp(n + 1, needle, len))
		return ntfs_tail(n + 1 + len);
	if (!strncasecmp(n, needle, 6) && n[6] == '~' && n[7] >= '1' && n[7] <= '4')
		return ntfs_tail(n + 8);
	for (i = 0; i < 8; i++) {
		unsigned char c = (unsigned char)n[i];

		if (!c)
			return 0;
		if (tilde) {
			if (!is_digit(c))
				return 0;
		} else if (c == '~') {
			i++;
			if (n[i] < '1' || n[i] > '9')
				return 0;
			tilde = 1;
		} else if (i >= 6 || (c & 0x80) || lower(c) != short_name[i]) {
			return 0;
		}
	}
	return ntfs_tail(n + i);
}

/*
 * The next character of a NUL-terminated UTF-8 name, skipping the code
 * points HFS+ ignores (zero-width joiners, direction marks and the like,
 * U+FEFF); 0 at the end or on a malformed sequence.
 */
static uint32_t hfs_next(const unsigned char **pp)
{
	for (;;) {
		const unsigned char *p = *pp;
		uint32_t c = p[0], min;
		int n;

		if (c < 0x80) {
			if (c)
				(*pp)++;
			return c;
		}
		if ((c & 0xe0) == 0xc0)
			n = 1, c &= 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			n = 2, c &= 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			n = 3, c &= 0x07, min = 0x10000;
		else
			return 0;
		for (int k = 1; k <= n; k++) {
			if ((p[k] & 0xc0) != 0x80)
				return 0;
			c = c << 6 | (p[k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return 0;
		*pp = p + n + 1;
		if ((c >= 0x200c && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
		    (c >= 0x206a && c <= 0x206f) || c == 0xfeff)
			continue;
		return c;
	}
}

/* Whether the NUL-terminated name is ".<needle>" on HFS+ (git's is_hfs_dot_generic()). */
static int hfs_dot(const char *name, const char *needle)
{
	const unsigned char *p = (const unsigned char *)name;
	uint32_t c = hfs_next(&p);

	if (c != '.')
		return 0;
	for (; *needle; needle++) {
		c = hfs_next(&p);
		if (c > 127 || lower((int)c) != *needle)
			return 0;
	}
	c = hfs_next(&p);
	return !c || c == '/';
}

static int is_dotgitmodules(const char *n)
{
	return hfs_dot(n, "gitmodules") || ntfs_dot(n, "gitmodules", "gi7eba");
}

static int is_dotgitattributes(const char *n)
{
	return hfs_dot(n, "gitattributes") || ntfs_dot(n, "gitattributes", "gi7d29");
}

/* A name and its length, within the tree's data. */
struct tname {
	const char *s;
	size_t n;
};

struct tree_order {
	struct tname *stack; /* file names that a later directory may duplicate */
	size_t nr, alloc;
};

static int below_slash(unsigned char c)
{
	return c > 0 && c < '/';
}

enum { TREE_OK, TREE_UNSORTED, TREE_DUP };

/*
 * Whether entry b may follow entry a in git's tree order (a directory
 * sorts as if its name ended in '/'), and whether it duplicates a or an
 * earlier file (a file "x" and a directory "x" with "x.y" between them).
 */
static int tree_order(struct tree_order *o, unsigned mode_a, struct tname a, unsigned mode_b,
                      struct tname b)
{
	size_t n = a.n < b.n ? a.n : b.n;
	int cmp = memcmp(a.s, b.s, n);
	unsigned char ca, cb;

	if (cmp)
		return cmp < 0 ? TREE_OK : TREE_UNSORTED;
	ca = n < a.n ? (unsigned char)a.s[n] : 0;
	cb = n < b.n ? (unsigned char)b.s[n] : 0;
	if (!ca && !cb)
		return TREE_DUP;
	if (!ca && (mode_a & 0170000) == 0040000)
		ca = '/';
	if (!cb && (mode_b & 0170000) == 0040000)
		cb = '/';
	if (!ca && below_slash(cb)) {
		ALLOC_GROW(o->stack, o->nr + 1, o->alloc);
		o->stack[o->nr++] = a;
	} else if (cb == '/' && below_slash(ca)) {
		while (o->nr) {
			struct tname f = o->stack[--o->nr];

			if (f.n > b.n || memcmp(f.s, b.s, f.n))
				continue;
			if (f.n == b.n)
				return TREE_DUP;
			if (below_slash((unsigned char)b.s[f.n])) {
				o->nr++;
				break;
			}
		}
	}
	return ca < cb ? TREE_OK : TREE_UNSORTED;
}

static void note_blob(struct bundle_fsck_blobs *found, const unsigned char *id, int kind)
{
	if (!found)
		return;
	ALLOC_GROW(found->ids, found->nr + 1, found->alloc);
	found->kind = xrealloc(found->kind, found->alloc);
	memcpy(found->ids[found->nr], id, 20);
	found->kind[found->nr++] = (unsigned char)kind;
}

/* git's limit on one name in a tree (its fsck.largePathname default). */
#define PATH_COMPONENT_MAX 4096

/* One entry's name and mode; its id at id.  0 or a refusal naming it. */
static int entry_ok(const char *name, size_t n, unsigned mode, const unsigned char *id,
                    struct bundle_fsck_blobs *found, struct buf *err)
{
	static const unsigned char zero[20];
	int link = (mode & 0170000) == 0120000, dotgit = 0;
	const char *why = NULL;

	if (!memcmp(id, zero, 20))
		why = "points at the null id (nullSha1)";
	else if (memchr(name, '/', n))
		why = "holds '/' (fullPathname)";
	else if (!strcmp(name, "."))
		why = "is '.' (hasDot)";
	else if (!strcmp(name, ".."))
		why = "is '..' (hasDotdot)";
	if (why)
		goto refuse;
	if (n > PATH_COMPONENT_MAX) {
		why = "is longer than 4096 bytes (largePathname)";
		goto refuse;
	}
	/*
	 * Every name below starts, in git's spelling rules, with '.', '~', 'g' or
	 * 'm' in either case, or with a code point HFS+ ignores (not ASCII), or
	 * holds a backslash: the rest (most names) need none of it.
	 */
	if (!strchr(".~gGmM", name[0]) && !((unsigned char)name[0] & 0x80) &&
	    !memchr(name, '\\', n))
		return 0;
	dotgit = hfs_dot(name, "git") || ntfs_dotgit(name);
	for (const char *bs = strchr(name, '\\'); bs; bs = strchr(bs + 1, '\\')) {
		dotgit |= ntfs_dotgit(bs + 1);
		if (ntfs_dot(bs + 1, "gitmodules", "gi7eba")) {
			if (link)
				why = "is a symbolic link to .gitmodules (gitmodulesSymlink)";
			else
				note_blob(found, id, FSCK_GITMODULES);
		}
	}
	if (dotgit)
		why = "is '.git' (hasDotgit)";
	else if (is_dotgitmodules(name) && link)
		why = "is a symbolic link named .gitmodules (gitmodulesSymlink)";
	else if (is_dotgitattributes(name) && link)
		why = "is a symbolic link named .gitattributes (gitattributesSymlink)";
	else if (link && (hfs_dot(name, "gitignore") || ntfs_dot(name, "gitignore", "gi250a")))
		why = "is a symbolic link named .gitignore (gitignoreSymlink)";
	else if (link && (hfs_dot(name, "mailmap") || ntfs_dot(name, "mailmap", "maba30")))
		why = "is a symbolic link named .mailmap (mailmapSymlink)";
	if (why)
		goto refuse;
	if (is_dotgitmodules(name))
		note_blob(found, id, FSCK_GITMODULES);
	if (is_dotgitattributes(name))
		note_blob(found, id, FSCK_GITATTRIBUTES);
	return 0;
refuse:
	buf_addstr(err, "tree: the entry ");
	add_quoted(err, name, n);
	return bad(err, " %s", why);
}

int bundle_fsck_tree(const char *data, size_t len, struct bundle_fsck_blobs *found, struct buf *err)
{
	const char *p = data, *end = data + len;
	struct tree_order order = {NULL};
	struct tname prev = {NULL, 0};
	unsigned prev_mode = 0;
	int ret = 0;

	while (p < end && !ret) {
		const char *name, *nul;
		unsigned mode = 0;
		int zero_pad = *p == '0', digits = 0;
		struct tname cur;

		for (; p < end && *p != ' '; p++, digits++) {
			if (*p < '0' || *p > '7' || digits >= 7) {
				ret = bad(err, "tree: an entry's mode is not octal (badTree)");
				goto out;
			}
			mode = mode << 3 | (unsigned)(*p - '0');
		}
		if (p == end || !digits) {
			ret = bad(err, "tree: cannot be parsed (badTree)");
			break;
		}
		name = ++p;
		nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || end - nul - 1 < 20) {
			ret = bad(err, "tree: an entry is cut short (badTree)");
			break;
		}
		if (nul == name) {
			ret = bad(err, "tree: an entry has an empty name (badTree)");
			break;
		}
		cur.s = name;
		cur.n = (size_t)(nul - name);
		p = nul + 1 + 20;
		if ((ret = entry_ok(name, cur.n, mode, (const unsigned char *)nul + 1, found, err)))
			break;
		if (zero_pad) {
			buf_addstr(err, "tree: the entry ");
			add_quoted(err, cur.s, cur.n);
			ret = bad(err, " has a zero-padded mode (zeroPaddedFilemode)");
			break;
		}
		if (mode != 0100755 && mode != 0100644 && mode != 0120000 && mode != 0040000 &&
		    mode != 0160000) {
			buf_addstr(err, "tree: the entry ");
			add_quoted(err, cur.s, cur.n);
			ret = bad(err, " has the bad mode %o (badFilemode)", mode);
			break;
		}
		if (prev.s) {
			int o = tree_order(&order, prev_mode, prev, mode, cur);

			if (o == TREE_DUP) {
				buf_addstr(err, "tree: the entry ");
				add_quoted(err, cur.s, cur.n);
				ret = bad(err, " is there twice (duplicateEntries)");
			} else if (o == TREE_UNSORTED) {
				ret = bad(err, "tree: not sorted (treeNotSorted)");
			}
		}
		prev = cur;
		prev_mode = mode;
	}
out:
	free(order.stack);
	return ret;
}

/* git's url_decode(): %XY as its byte, anything else as it is; into out. */
static void url_decode(struct buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < n && (hi = hex_digit((unsigned char)s[i + 1])) >= 0 &&
		    (lo = hex_digit((unsigned char)s[i + 2])) >= 0) {
			buf_addch(out, (char)(hi << 4 | lo));
			i += 2;
		} else {
			buf_addch(out, s[i]);
		}
	}
}

static int dir_sep(char c)
{
	return c == '/' || c == '\\';
}

/* Whether url, decoded as git decodes it, holds a newline. */
static int url_has_newline(const char *url)
{
	struct buf d = BUF_INIT;
	int nl;

	url_decode(&d, url, strlen(url));
	nl = d.len && memchr(d.buf, '\n', d.len) != NULL;
	buf_release(&d);
	return nl;
}

/* Whether every '%' in s[0..n) starts an escape of two hex digits. */
static int escapes_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '%' && (i + 2 >= n || hex_digit((unsigned char)s[i + 1]) < 0 ||
		                    hex_digit((unsigned char)s[i + 2]) < 0))
			return 0;
	return 1;
}

static int in_set(const char *set, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return 0;
	return 1;
}

#define URL_ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/*
 * Whether a URL for git's curl transport normalizes as newer git's
 * url_normalize() requires (git 2.45's check_submodule_url()): a scheme and
 * "://", valid %-escapes, a host of host characters, a port of 1 to 65535,
 * no ".." above the path's root.
 */
static int curl_url_normal(const char *url)
{
	size_t scheme = strspn(url, URL_ALNUM "+.-"), n;
	const char *p, *at, *slash, *colon, *q;
	int depth = 0;

	if (!scheme || !strchr(URL_ALNUM, url[0]) || (url[0] >= '0' && url[0] <= '9') ||
	    strncmp(url + scheme, "://", 3))
		return 0;
	p = url + scheme + 3;
	slash = p + strcspn(p, "/?#");
	at = strchr(p, '@');
	if (at && at < slash) {
		if (!escapes_ok(p, (size_t)(at - p)))
			return 0;
		p = at + 1;
	}
	if (!*p || strchr(":/?#", *p))
		return 0; /* no host */
	for (colon = slash - 1; colon > p && *colon != ':' && *colon != ']'; colon--)
		;
	if (*colon != ':')
		colon = slash;
	if (!in_set(URL_ALNUM ".-_[:]", p, (size_t)(colon - p)))
		return 0;
	if (colon < slash) {
		const char *port = colon + 1;

		while (port < slash && *port == '0')
			port++;
		if (port == slash && port[-1] == '0')
			port--; /* all zeros: port 0 */
		n = (size_t)(slash - port);
		if (n) {
			unsigned long v = 0;

			if (!in_set("0123456789", port, n) || n > 5)
				return 0;
			for (size_t i = 0; i < n; i++)
				v = v * 10 + (unsigned long)(port[i] - '0');
			if (v == 0 || v > 65535)
				return 0;
		}
	}
	/* The path, a segment at a time, up to '?' or '#'. */
	for (p = slash; *p == '/';) {
		struct buf seg = BUF_INIT;
		int dots;

		p++;
		q = p + strcspn(p, "/?#");
		if (!escapes_ok(p, (size_t)(q - p)))
			return 0;
		url_decode(&seg, p, (size_t)(q - p));
		dots = (seg.len == 1 || seg.len == 2) && !strncmp(seg.buf, "..", seg.len);
		if (dots && seg.len == 2 && depth-- == 0) {
			buf_release(&seg);
			return 0;
		}
		if (!dots)
			depth++;
		buf_release(&seg);
		p = q;
	}
	return escapes_ok(p, strlen(p));
}

/* git's check_submodule_url(): 0 allowed, -1 not. */
static int submodule_url_ok(const char *url)
{
	static const char *const curl_prefix[] = {"http::", "https::", "ftp::", "ftps::"};
	static const char *const curl_scheme[] = {"http://", "https://", "ftp://", "ftps://"};
	const char *curl = NULL;

	if (url[0] == '-')
		return -1;
	if ((url[0] == '.' && dir_sep(url[1])) ||
	    (url[0] == '.' && url[1] == '.' && dir_sep(url[2])) || !strncmp(url, "git://", 6)) {
		const char *next = url;
		int dotdots = 0;

		if (url_has_newline(url))
			return -1;
		for (;;) {
			if (next[0] == '.' && next[1] == '.' && dir_sep(next[2])) {
				dotdots++;
				next += 3;
			} else if (next[0] == '.' && dir_sep(next[1])) {
				next += 2;
			} else {
				break;
			}
		}
		return dotdots > 0 && (*next == ':' || *next == '/') ? -1 : 0;
	}
	for (size_t i = 0; i < 4 && !curl; i++) {
		if (!strncmp(url, curl_prefix[i], strlen(curl_prefix[i])))
			curl = url + strlen(curl_prefix[i]);
		else if (!strncmp(url, curl_scheme[i], strlen(curl_scheme[i])))
			curl = url;
	}
	if (curl) {
		/* As git's credential_from_url_gently(): a scheme, a host, no newline. */
		const char *scheme_end = strstr(curl, "://"), *host, *at, *stop;
		struct buf h = BUF_INIT;
		int empty;

		if (!scheme_end || scheme_end == curl || url_has_newline(curl))
			return -1;
		host = scheme_end + 3;
		stop = host + strcspn(host, "/?#");
		at = strchr(host, '@');
		if (at && at < stop)
			host = at + 1;
		url_decode(&h, host, (size_t)(stop - host));
		empty = h.len == 0;
		buf_release(&h);
		return empty || !curl_url_normal(curl) ? -1 : 0;
	}
	return 0;
}

/* git's check_submodule_name(): not empty, no ".." component ('/' or '\' between). */
static int submodule_name_ok(const char *name)
{
	const char *p = name;

	if (!*name)
		return -1;
	for (;;) {
		if (p[0] == '.' && p[1] == '.' && (!p[2] || dir_sep(p[2])))
			return -1;
		while (*p && !dir_sep(*p))
			p++;
		if (!*p)
			return 0;
		p++;
	}
}

/* Reading git config from memory as git's parser does (CRLF as LF, the end as a newline). */
struct cfg {
	const char *p, *end;
	int eof;
};

static int cfg_next(struct cfg *c)
{
	int ch;

	if (c->p >= c->end) {
		c->eof = 1;
		return '\n';
	}
	ch = (unsigned char)*c->p++;
	if (ch == '\r' && c->p < c->end && *c->p == '\n')
		ch = (unsigned char)*c->p++;
	return ch;
}

static int key_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-';
}

/* A value after '=', as git's parse_value(); -1 when it does not parse. */
static int cfg_value(struct cfg *c, struct buf *v)
{
	int quote = 0, comment = 0;
	size_t space = 0;

	for (;;) {
		int ch = cfg_next(c);

		if (ch == '\n')
			return quote ? -1 : 0;
		if (comment)
			continue;
		if (git_space(ch) && !quote) {
			if (v->len)
				space++;
			continue;
		}
		if (!quote && (ch == ';' || ch == '#')) {
			comment = 1;
			continue;
		}
		for (; space; space--)
			buf_addch(v, ' ');
		if (ch == '\\') {
			ch = cfg_next(c);
			if (ch == '\n')
				continue; /* a continued line (or the end) */
			if (ch == 't')
				ch = '\t';
			else if (ch == 'b')
				ch = '\b';
			else if (ch == 'n')
				ch = '\n';
			else if (ch != '\\' && ch != '"')
				return -1;
		} else if (ch == '"') {
			quote = !quote;
			continue;
		}
		buf_addch(v, (char)ch);
	}
}

/* A section header after '[', into sec ("section" or "section.subsection"); -1 if bad. */
static int cfg_section(struct cfg *c, struct buf *sec)
{
	int ch;

	for (;;) {
		ch = cfg_next(c);
		if (c->eof)
			return -1;
		if (ch == ']')
			return 0;
		if (git_space(ch))
			break;
		if (!key_char(ch) && ch != '.')
			return -1;
		buf_addch(sec, (char)lower(ch));
	}
	/* [section "subsection"]: kept as written, \x is x; no newline before it. */
	buf_addch(sec, '.');
	do {
		if (ch == '\n')
			return -1;
		ch = cfg_next(c);
	} while (git_space(ch));
	if (ch != '"')
		return -1;
	for (;;) {
		ch = cfg_next(c);
		if (ch == '\n')
			return -1;
		if (ch == '"')
			break;
		if (ch == '\\' && (ch = cfg_next(c)) == '\n')
			return -1;
		buf_addch(sec, (char)ch);
	}
	return cfg_next(c) == ']' ? 0 : -1;
}

/*
 * One variable of .gitmodules, as git's fsck_gitmodules_fn(): var is
 * "submodule.<name>.<key>" (C strings: a NUL ends them, as in git), value
 * NULL for a bare key.
 */
static int gitmodules_var(const char *var, const char *value, struct buf *err)
{
	const char *sub, *dot;
	char *name;
	int ret = 0;

	if (strncmp(var, "submodule.", 10))
		return 0;
	sub = var + 10;
	dot = strrchr(sub, '.');
	if (!dot)
		return 0;
	name = xstrndup(sub, (size_t)(dot - sub));
	if (submodule_name_ok(name) < 0) {
		buf_addstr(err, ".gitmodules: the submodule name ");
		add_quoted(err, name, strlen(name));
		ret = bad(err, " is not allowed (gitmodulesName)");
	} else if (value && !strcmp(dot + 1, "url") && submodule_url_ok(value) < 0) {
		buf_addstr(err, ".gitmodules: the url ");
		add_quoted(err, value, strlen(value));
		ret = bad(err, " is not allowed (gitmodulesUrl)");
	} else if (value && !strcmp(dot + 1, "path") && value[0] == '-') {
		buf_addstr(err, ".gitmodules: the path ");
		add_quoted(err, value, strlen(value));
		ret = bad(err, " is not allowed (gitmodulesPath)");
	} else if (value && !strcmp(dot + 1, "update") && value[0] == '!') {
		ret = bad(err, ".gitmodules: an update command is not allowed (gitmodulesUpdate)");
	}
	free(name);
	return ret;
}

/* .gitmodules parsed as git config (git's config parser), each variable checked. */
static int gitmodules_ok(const char *data, size_t len, struct buf *err)
{
	struct cfg c = {data, data + len, 0};
	struct buf sec = BUF_INIT, var = BUF_INIT, val = BUF_INIT;
	int comment = 0, ret = 0;

	if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
		c.p += 3;
	while (!ret) {
		int ch = cfg_next(&c), has_value = 0;

		if (ch == '\n') {
			if (c.eof)
				break;
			comment = 0;
			continue;
		}
		if (comment || git_space(ch))
			continue;
		if (ch == '#' || ch == ';') {
			comment = 1;
			continue;
		}
		if (ch == '[') {
			buf_reset(&sec);
			if (cfg_section(&c, &sec) < 0)
				ret = -1;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) {
			ret = -1;
			break;
		}
		buf_reset(&var);
		if (sec.len) {
			buf_add(&var, sec.buf, sec.len);
			buf_addch(&var, '.');
		}
		for (; key_char(ch) && !c.eof; ch = cfg_next(&c))
			buf_addch(&var, (char)lower(ch));
		while (ch == ' ' || ch == '\t')
			ch = cfg_next(&c);
		buf_reset(&val);
		if (ch != '\n') {
			if (ch != '=' || cfg_value(&c, &val) < 0) {
				ret = -1;
				break;
			}
			has_value = 1;
		}
		buf_addch(&val, '\0'); /* a C string, as git hands it on */
		if (gitmodules_var(var.buf, has_value ? val.buf : NULL, err))
			ret = BUNDLE_REFUSED;
	}
	if (ret < 0)
		ret = bad(err, ".gitmodules does not parse as git config (gitmodulesParse)");
	buf_release(&sec);
	buf_release(&var);
	buf_release(&val);
	return ret;
}

/* git's limits for .gitattributes (attr.h). */
#define ATTR_FILE_MAX (100 * 1024 * 1024)
#define ATTR_LINE_MAX 2048

int bundle_fsck_blob(int kind, const char *data, size_t len, struct buf *err)
{
	if (kind == FSCK_GITMODULES)
		return gitmodules_ok(data, len, err);
	if (len > ATTR_FILE_MAX)
		return bad(err, ".gitattributes is too large (gitattributesLarge)");
	for (const char *p = data, *end = data + len; p < end && *p;) {
		const char *eol = p;

		while (eol < end && *eol && *eol != '\n')
			eol++;
		if (eol - p >= ATTR_LINE_MAX)
			return bad(err,
			           ".gitattributes has a line of %d bytes or more "
			           "(gitattributesLineLength)",
			           ATTR_LINE_MAX);
		p = eol < end && *eol == '\n' ? eol + 1 : eol;
	}
	return 0;
}
