#include "git/bundle_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/buf.h"
#include "git/bundle_fsck.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "base/hex.h"
#include "base/banned.h"

static const char sig_v2[] = "# v2 git bundle";
static const char sig_v3[] = "# v3 git bundle";

/* The reason replaces any before it: the last refusal is the one returned. */
__attribute__((format(printf, 2, 3))) static int refuse(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	buf_reset(err);
	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return BUNDLE_REFUSED;
}

void bundle_header_clear(struct bundle_header *h)
{
	for (size_t i = 0; i < h->nr_refs; i++)
		free(h->refs[i].name);
	for (size_t i = 0; i < h->nr_prereqs; i++)
		free(h->prereqs[i].comment);
	free(h->refs);
	free(h->prereqs);
	buf_release(&h->err);
	memset(h, 0, sizeof(*h));
	buf_init(&h->err, 0);
}

const char *bundle_oid_format_name(enum bundle_oid_format f)
{
	return f == BUNDLE_SHA256 ? "sha256" : "sha1";
}

size_t bundle_oid_parse(const char *s, size_t len, char *out)
{
	if (!OID_HEX_LEN_OK(len))
		return 0;
	for (size_t i = 0; i < len; i++) {
		int v = hex_digit((unsigned char)s[i]);

		if (v < 0)
			return 0;
		out[i] = "0123456789abcdef"[v];
	}
	out[len] = '\0';
	return len;
}

int bundle_refname_ok(const char *name, size_t len)
{
	char copy[1025];

	if (len == 4 && !memcmp(name, "HEAD", 4))
		return 1;
	if (len <= 5 || len >= sizeof(copy) || memcmp(name, "refs/", 5) || memchr(name, '\0', len))
		return 0;
	memcpy(copy, name, len);
	copy[len] = '\0';
	return refname_ok(copy);
}

/*
 * Parse one object id at the start of s[0..len), ended by a space or the end,
 * checked against the header's format.  Returns its length or 0 with a reason.
 */
static size_t parse_line_oid(struct bundle_header *h, const char *s, size_t len, size_t lineno,
                             char *out)
{
	size_t n = 0, want = h->oid_format == BUNDLE_SHA256 ? 64 : 40;

	while (n < len && s[n] != ' ')
		n++;
	if (!bundle_oid_parse(s, n, out) || n != want) {
		if (bundle_oid_parse(s, n, out))
			refuse(&h->err, "line %zu: object id is not %s", lineno,
			       bundle_oid_format_name(h->oid_format));
		else
			refuse(&h->err, "line %zu: not an object id", lineno);
		return 0;
	}
	if (oid_is_null(out)) {
		refuse(&h->err, "line %zu: null object id", lineno);
		return 0;
	}
	return n;
}

static int parse_capability(struct bundle_header *h, const char *s, size_t len, size_t lineno,
                            int *seen_format)
{
	const char *eq = memchr(s, '=', len);
	size_t klen = eq ? (size_t)(eq - s) : len;

	if (klen == 13 && !memcmp(s, "object-format", 13)) {
		size_t vlen = eq ? len - klen - 1 : 0;

		if (*seen_format)
			return refuse(&h->err, "line %zu: object-format given twice", lineno);
		*seen_format = 1;
		if (vlen == 4 && !memcmp(eq + 1, "sha1", 4))
			h->oid_format = BUNDLE_SHA1;
		else if (vlen == 6 && !memcmp(eq + 1, "sha256", 6))
			h->oid_format = BUNDLE_SHA256;
		else
			return refuse(&h->err, "line %zu: unknown object format", lineno);
		return 0;
	}
	if (klen == 6 && !memcmp(s, "filter", 6))
		return refuse(&h->err, "line %zu: filtered (partial) bundles are not accepted",
		              lineno);
	if (klen > 64)
		klen = 64;
	/* The name goes into a message: keep it printable. */
	for (size_t i = 0; i < klen; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return refuse(&h->err, "line %zu: unknown capability", lineno);
	return refuse(&h->err, "line %zu: unknown capability '@%.*s'", lineno, (int)klen, s);
}

/*
 * Line lineno of the header, at data[*pos..len) (len at most
 * BUNDLE_HEADER_MAX): its length into *n, and *pos moved past its newline.
 * 0, or BUNDLE_REFUSED when the header ends there, or the line is too long
 * or holds a NUL or a carriage return.
 */
static int next_line(struct bundle_header *h, const char *data, size_t len, size_t *pos,
                     size_t lineno, size_t *n)
{
	const char *line = data + *pos, *nl;
	size_t avail = len - *pos;

	if (avail == 0) {
		if (len == BUNDLE_HEADER_MAX)
			return refuse(&h->err, "header larger than %d bytes", BUNDLE_HEADER_MAX);
		if (lineno == 1)
			return refuse(&h->err, "empty file");
		return refuse(&h->err, "header ends before the blank line (truncated)");
	}
	nl = memchr(line, '\n', avail < BUNDLE_LINE_MAX + 1 ? avail : BUNDLE_LINE_MAX + 1);
	if (!nl && avail > BUNDLE_LINE_MAX)
		return refuse(&h->err, "line %zu: longer than %d bytes", lineno, BUNDLE_LINE_MAX);
	*n = nl ? (size_t)(nl - line) : avail;
	if (*n >= 4 && !memcmp(line, "PACK", 4) && lineno > 1)
		return refuse(&h->err, "line %zu: pack starts without the blank line", lineno);
	if (memchr(line, '\0', *n))
		return refuse(&h->err, "line %zu: NUL byte in header", lineno);
	if (memchr(line, '\r', *n))
		return refuse(&h->err, "line %zu: carriage return in header (CRLF?)", lineno);
	if (!nl) {
		if (len == BUNDLE_HEADER_MAX)
			return refuse(&h->err, "header larger than %d bytes", BUNDLE_HEADER_MAX);
		return refuse(&h->err, "line %zu: header ends in mid-line (truncated)", lineno);
	}
	*pos += *n + 1;
	return 0;
}

/* The first line, the signature: sets h->version. */
static int parse_signature(struct bundle_header *h, const char *line, size_t n)
{
	if (n == sizeof(sig_v2) - 1 && !memcmp(line, sig_v2, n))
		h->version = 2;
	else if (n == sizeof(sig_v3) - 1 && !memcmp(line, sig_v3, n))
		h->version = 3;
	else if (n > 14 && !memcmp(line, "# v", 3) && !memcmp(line + n - 11, " git bundle", 11))
		return refuse(&h->err, "unsupported bundle version");
	else
		return refuse(&h->err, "not a git bundle (no bundle signature)");
	return 0;
}

/* A prerequisite line, "-<oid>[ comment]", added to h. */
static int parse_prereq(struct bundle_header *h, const char *line, size_t n, size_t lineno)
{
	struct bundle_prereq *p;
	size_t olen;
	char oid[OID_HEX_MAX + 1];

	if (h->nr_refs)
		return refuse(&h->err, "line %zu: prerequisite after a ref", lineno);
	olen = parse_line_oid(h, line + 1, n - 1, lineno, oid);
	if (!olen)
		return BUNDLE_REFUSED;
	if (h->nr_prereqs >= BUNDLE_PREREQS_MAX)
		return refuse(&h->err, "more than %d prerequisites", BUNDLE_PREREQS_MAX);
	ALLOC_GROW(h->prereqs, h->nr_prereqs + 1, h->alloc_prereqs);
	p = &h->prereqs[h->nr_prereqs++];
	memcpy(p->oid, oid, sizeof(oid));
	if (1 + olen < n)
		p->comment = xstrndup(line + 2 + olen, n - olen - 2);
	else
		p->comment = xstrdup("");
	return 0;
}

/* A ref line, "<oid> <refname>", added to h: a valid name, once. */
static int parse_ref(struct bundle_header *h, const char *line, size_t n, size_t lineno)
{
	struct bundle_ref *r;
	size_t olen;
	char oid[OID_HEX_MAX + 1];
	const char *name;
	size_t nlen;

	olen = parse_line_oid(h, line, n, lineno, oid);
	if (!olen)
		return BUNDLE_REFUSED;
	if (olen == n || line[olen] != ' ')
		return refuse(&h->err, "line %zu: ref without a name", lineno);
	name = line + olen + 1;
	nlen = n - olen - 1;
	if (!bundle_refname_ok(name, nlen)) {
		size_t i;

		/* Quote it only if it is printable. */
		for (i = 0; i < nlen && i < 200; i++)
			if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f ||
			    (unsigned char)name[i] >= 0x80 || name[i] == '\'')
				break;
		if (i == nlen)
			return refuse(&h->err, "line %zu: invalid ref name '%.*s'", lineno,
			              (int)nlen, name);
		return refuse(&h->err, "line %zu: invalid ref name", lineno);
	}
	if (h->nr_refs >= BUNDLE_REFS_MAX)
		return refuse(&h->err, "more than %d refs", BUNDLE_REFS_MAX);
	for (size_t i = 0; i < h->nr_refs; i++)
		if (strlen(h->refs[i].name) == nlen && !memcmp(h->refs[i].name, name, nlen))
			return refuse(&h->err, "line %zu: ref '%.*s' given twice", lineno,
			              (int)nlen, name);
	ALLOC_GROW(h->refs, h->nr_refs + 1, h->alloc_refs);
	r = &h->refs[h->nr_refs++];
	memcpy(r->oid, oid, sizeof(oid));
	r->name = xstrndup(name, nlen);
	return 0;
}

int bundle_header_parse(struct bundle_header *h, const char *data, size_t len)
{
	size_t pos = 0, lineno = 0;
	int in_caps = 0, seen_format = 0;

	bundle_header_clear(h);
	if (len > BUNDLE_HEADER_MAX)
		len = BUNDLE_HEADER_MAX; /* a header needing more is refused below */

	for (;;) {
		const char *line = data + pos;
		size_t n = 0;
		int ret;

		lineno++;
		if ((ret = next_line(h, data, len, &pos, lineno, &n)))
			return ret;
		if (lineno == 1) {
			if ((ret = parse_signature(h, line, n)))
				return ret;
			in_caps = h->version == 3;
			continue;
		}
		if (n == 0)
			break; /* the blank line: the pack follows */

		if (line[0] == '@') {
			if (!in_caps)
				return refuse(
				    &h->err,
				    h->version == 2
				        ? "line %zu: capability in a v2 bundle"
				        : "line %zu: capability after refs or prerequisites",
				    lineno);
			if (h->version == 3 && lineno - 1 > BUNDLE_CAPS_MAX)
				return refuse(&h->err, "more than %d capabilities",
				              BUNDLE_CAPS_MAX);
			ret = parse_capability(h, line + 1, n - 1, lineno, &seen_format);
		} else {
			in_caps = 0;
			ret = line[0] == '-' ? parse_prereq(h, line, n, lineno)
			                     : parse_ref(h, line, n, lineno);
		}
		if (ret)
			return ret;
	}
	if (!h->nr_refs)
		return refuse(&h->err, "bundle has no refs");
	h->pack_offset = pos;
	return 0;
}

void bundle_full_refname(struct buf *out, const char *name)
{
	if (!strcmp(name, "HEAD") || !strncmp(name, "refs/", 5))
		buf_addstr(out, name);
	else
		buf_addf(out, "refs/heads/%s", name);
}

int bundle_header_expect(struct bundle_header *h, const char *const *refs, size_t nr_refs,
                         const char *const *bases, size_t nr_bases)
{
	if (nr_refs) {
		for (size_t i = 0; i < h->nr_refs; i++) {
			size_t j;

			for (j = 0; j < nr_refs; j++)
				if (!strcmp(h->refs[i].name, refs[j]))
					break;
			if (j == nr_refs)
				return refuse(&h->err, "unexpected ref '%s'", h->refs[i].name);
		}
		for (size_t j = 0; j < nr_refs; j++) {
			size_t i;

			for (i = 0; i < h->nr_refs; i++)
				if (!strcmp(h->refs[i].name, refs[j]))
					break;
			if (i == h->nr_refs)
				return refuse(&h->err, "missing ref '%s'", refs[j]);
		}
	}
	for (size_t i = 0; i < h->nr_prereqs; i++) {
		int found = 0;

		for (size_t j = 0; j < nr_bases && !found; j++) {
			char oid[OID_HEX_MAX + 1];

			if (bundle_oid_parse(bases[j], strlen(bases[j]), oid) &&
			    !strcmp(oid, h->prereqs[i].oid))
				found = 1;
		}
		if (found)
			continue;
		if (nr_bases)
			return refuse(&h->err, "prerequisite %s is not a given base",
			              h->prereqs[i].oid);
		return refuse(&h->err, "needs prerequisite %s (no --base given)",
		              h->prereqs[i].oid);
	}
	return 0;
}

/*
 * Read from fd until the header's blank line ("\n\n") is in the buffer, EOF,
 * or the cap; then parse what was read.
 */
int bundle_header_read_fd(struct bundle_header *h, int fd)
{
	struct buf b = BUF_INIT;
	size_t scanned = 0;
	int ret;

	bundle_header_clear(h);
	for (;;) {
		ssize_t n;
		size_t want = 64 * 1024;

		if (b.len >= BUNDLE_HEADER_MAX + 1)
			break;
		if (want > BUNDLE_HEADER_MAX + 1 - b.len)
			want = BUNDLE_HEADER_MAX + 1 - b.len;
		buf_grow(&b, want);
		n = read(fd, b.buf + b.len, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		buf_setlen(&b, b.len + (size_t)n);
		if (memmem(b.buf + scanned, b.len - scanned, "\n\n", 2))
			break;
		/* A NUL means a refusal (or a pack without the blank line): stop reading. */
		if (memchr(b.buf + scanned, '\0', b.len - scanned))
			break;
		scanned = b.len - 1;
	}
	ret = bundle_header_parse(h, b.buf, b.len);
out:
	buf_release(&b);
	return ret;
}

/* Pack verification, with libgit2's indexer. */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* libgit2's last message, made printable, with a plainer text for the usual ones. */
static int libgit2_reason(struct bundle_pack_result *res)
{
	const git_error *e = git_error_last();
	const char *msg = e && e->message ? e->message : "unknown error";

	if (strstr(msg, "thin pack"))
		return refuse(&res->err, "pack: a delta's base is not in the pack "
		                         "(a thin pack: give --repo)");
	if (e && e->klass == GIT_ERROR_NOMEMORY)
		return refuse(&res->err, "pack: the check ran out of memory (memory)");
	refuse(&res->err, "pack: ");
	for (size_t i = 0; msg[i] && i < 255; i++)
		buf_addch(&res->err,
		          ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) ? ' ' : msg[i]);
	return BUNDLE_REFUSED;
}

/* The largest object the format can state; git's own limit is the address space. */
#define PACK_OBJECT_MAX ((uint64_t)4 << 30)
/* How much of a file the walk and the indexer see at a time. */
#define PACK_WINDOW (1 << 20)

/*
 * The pack as the walk and the indexer read it: the whole of it in memory,
 * or a file read in windows of PACK_WINDOW bytes, in order.  While hashing,
 * every byte below hash_end is fed to the SHA-1 once, as the windows pass.
 */
struct pack_src {
	const unsigned char *mem; /* the pack, or NULL: read fd */
	int fd;
	off_t base;   /* where the pack starts in fd */
	uint64_t len; /* the pack's length */
	unsigned char *win;
	uint64_t win_off;
	size_t win_len;
	EVP_MD_CTX *sha; /* the checksum, while the walk runs; else NULL */
	uint64_t hashed; /* bytes fed to sha */
	uint64_t hash_end;
};

static int src_fill(struct pack_src *s, uint64_t off)
{
	size_t n = s->len - off < PACK_WINDOW ? (size_t)(s->len - off) : PACK_WINDOW, got = 0;

	while (got < n) {
		ssize_t r = pread(s->fd, s->win + got, n - got, s->base + (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the file shrank under us */
		got += (size_t)r;
	}
	s->win_off = off;
	s->win_len = n;
	return 0;
}

/* Feed the checksum what the window holds of [hashed, upto). */
static void src_hash_window(struct pack_src *s, uint64_t upto)
{
	uint64_t wend = s->win_off + s->win_len;

	if (!s->sha || s->hashed < s->win_off || s->hashed >= wend)
		return;
	if (upto > wend)
		upto = wend;
	if (upto > s->hash_end)
		upto = s->hash_end;
	if (upto > s->hashed) {
		EVP_DigestUpdate(s->sha, s->win + (s->hashed - s->win_off), upto - s->hashed);
		s->hashed = upto;
	}
}

/*
 * The bytes at off (off <= len) in *p: at least min(want, len - off) of them,
 * want at most PACK_WINDOW; *avail says how many follow in memory.  0, or
 * -errno when the file cannot be read.
 */
static int src_at(struct pack_src *s, uint64_t off, size_t want, const unsigned char **p,
                  size_t *avail)
{
	uint64_t left = s->len - off;
	int ret;

	if (s->mem) {
		*avail = left > SIZE_MAX ? SIZE_MAX : (size_t)left;
		*p = s->mem + off;
		return 0;
	}
	if (want > left)
		want = (size_t)left;
	if (off < s->win_off || off + want > s->win_off + s->win_len) {
		/* Hash what this window had, and anything skipped, before it goes. */
		src_hash_window(s, UINT64_MAX);
		while (s->sha && s->hashed < off && s->hashed < s->hash_end) {
			if ((ret = src_fill(s, s->hashed)) < 0)
				return ret;
			src_hash_window(s, off);
		}
		if ((ret = src_fill(s, off)) < 0)
			return ret;
	}
	*avail = (size_t)(s->win_off + s->win_len - off);
	*p = s->win + (off - s->win_off);
	return 0;
}

/* The checksum of the pack's first hash_end bytes, into sum[20]. */
static int src_hash_finish(struct pack_src *s, unsigned char *sum)
{
	unsigned int n = 0;
	int err = 0;

	if (s->mem) {
		EVP_DigestUpdate(s->sha, s->mem, s->hash_end);
	} else {
		while (s->hashed < s->hash_end) {
			const unsigned char *p;
			size_t avail;

			if ((err = src_at(s, s->hashed, 1, &p, &avail)) < 0)
				return err;
			src_hash_window(s, s->hash_end);
		}
	}
	if (!EVP_DigestFinal_ex(s->sha, sum, &n) || n != 20)
		return -EIO;
	return 0;
}

/* The two sizes at the start of a delta's data: its base's and its result's. */
static int delta_sizes(const unsigned char *d, size_t len, uint64_t *base, uint64_t *result)
{
	size_t i = 0;

	for (int k = 0; k < 2; k++) {
		uint64_t v = 0;
		unsigned shift = 0;
		unsigned char c;

		do {
			if (i >= len || shift > 63)
				return -1;
			c = d[i++];
			v |= (uint64_t)(c & 0x7f) << shift;
			shift += 7;
		} while (c & 0x80);
		*(k ? result : base) = v;
	}
	return 0;
}

/*
 * An object (what: "") or a delta's base or result (what: "a delta on ", "a
 * delta to ") of size bytes, within max_object; then add bytes to the total,
 * within o->max_inflated.  0, or BUNDLE_REFUSED naming the limit.
 */
static int add_inflated(struct bundle_pack_result *res, const struct bundle_pack_opts *o,
                        uint32_t i, const char *what, uint64_t size, uint64_t max_object,
                        uint64_t bytes, uint64_t *total)
{
	if (size > max_object)
		return refuse(&res->err,
		              "pack: object %u: %s%llu bytes%s, over the limit of %llu for one "
		              "object (max-object)",
		              (unsigned)i, what, (unsigned long long)size, *what ? "" : " inflated",
		              (unsigned long long)max_object);
	*total += bytes;
	if (*total > o->max_inflated)
		return refuse(&res->err,
		              "pack: more than %llu bytes inflated in all (max-inflated), at "
		              "object %u",
		              (unsigned long long)o->max_inflated, (unsigned)i);
	return 0;
}

/*
 * What the walk learnt of each object, in pack order (ascending offsets):
 * where it starts, its type as packed (1-4, or 6 and 7 for deltas) and a
 * delta's base: an OFS_DELTA's as the base's index, a REF_DELTA's as a slot
 * of ref_ids (the base's raw id).  Each object's id and real type (1-4) are
 * filled in as it is hashed: by the walk for a whole object, by the delta
 * resolution for a delta.
 */
struct pack_layout {
	uint64_t *offs;
	unsigned char *types;
	uint32_t *base;
	unsigned char (*ids)[20];
	unsigned char *real; /* 0 until the object is resolved */
	size_t nr, alloc, alloc_types, alloc_base, alloc_ids, alloc_real;
	unsigned char (*ref_ids)[20];
	size_t nr_refs, alloc_refs;
};

static void layout_clear(struct pack_layout *l)
{
	free(l->offs);
	free(l->types);
	free(l->base);
	free(l->ids);
	free(l->real);
	free(l->ref_ids);
	memset(l, 0, sizeof(*l));
}

/* The index of the object starting at off, or SIZE_MAX. */
static size_t layout_find(const struct pack_layout *l, uint64_t off)
{
	size_t lo = 0, hi = l->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->offs[mid] < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < l->nr && l->offs[lo] == off ? lo : SIZE_MAX;
}

/* git's name of each whole object's type (1-4), as its id hashes it. */
static const char *const type_names[5] = {"", "commit", "tree", "blob", "tag"};

/*
 * What a commit, tree or tag names and the type it says it is (a commit's
 * tree and parents, a tree's entries, a tag's object): checked against the
 * pack's objects (and the project's) after the resolution, as git fsck
 * checks the links.  28 bytes each.
 */
struct fsck_link {
	uint32_t from; /* the object that names it, by its place in the pack */
	unsigned char to[20];
	unsigned char type;
};

/*
 * The fsck checks (common/git/bundle_fsck.h) as objects are made, in any
 * order: the refusal kept is that of the first object in pack order, as a
 * check in pack order would give.
 */
struct fsck_state {
	size_t bad;        /* the first object refused; SIZE_MAX: none */
	struct buf reason; /* its refusal */
	struct buf why;
	struct bundle_fsck_blobs found; /* blobs named .gitmodules or .gitattributes */
	struct fsck_link *links;        /* what the objects name, and as what */
	size_t nr_links, alloc_links;
};

#define FSCK_STATE_INIT                                                                            \
	{                                                                                          \
		.bad = SIZE_MAX, .reason = BUF_INIT, .why = BUF_INIT,                              \
		.found = BUNDLE_FSCK_BLOBS_INIT                                                    \
	}

static void fsck_state_clear(struct fsck_state *f)
{
	buf_release(&f->reason);
	buf_release(&f->why);
	bundle_fsck_blobs_clear(&f->found);
	free(f->links);
}

/* Note that object i names the object raw (or hex, 40 digits already checked) as a `type`. */
static void add_link(struct fsck_state *f, size_t i, const unsigned char *raw, const char *hex,
                     unsigned type)
{
	struct fsck_link *k;

	ALLOC_GROW(f->links, f->nr_links + 1, f->alloc_links);
	k = &f->links[f->nr_links++];
	k->from = (uint32_t)i;
	for (int j = 0; j < 20; j++)
		k->to[j] =
		    raw ? raw[j]
		        : (unsigned char)(hex_digit(hex[2 * j]) << 4 | hex_digit(hex[2 * j + 1]));
	k->type = (unsigned char)type;
}

/*
 * The links of a commit, tree or tag fsck accepted (so well-formed): a
 * commit's tree and parents, a tree's entries (a directory a tree, a file or
 * symbolic link a blob; a submodule's commit is another repository's), a
 * tag's object.
 */
static void note_links(struct fsck_state *f, size_t i, unsigned type, const char *d, size_t len)
{
	const char *p = d, *end = d + len;

	if (type == 1) {
		add_link(f, i, NULL, p + 5, 2); /* "tree <hex>\n" */
		for (p += 46; end - p >= 48 && !memcmp(p, "parent ", 7); p += 48)
			add_link(f, i, NULL, p + 7, 1);
		return;
	}
	if (type == 2) {
		while (p < end) {
			const char *nul = memchr(p, '\0', (size_t)(end - p));

			if (!nul || end - nul - 1 < 20)
				return;
			if (!memcmp(p, "40000 ", 6))
				add_link(f, i, (const unsigned char *)nul + 1, NULL, 2);
			else if (memcmp(p, "160000 ", 7))
				add_link(f, i, (const unsigned char *)nul + 1, NULL, 3);
			p = nul + 21;
		}
		return;
	}
	/* "object <hex>\ntype <type>\n" */
	for (unsigned t = 1; t <= 4; t++) {
		size_t n = strlen(type_names[t]);

		if ((size_t)(end - (p + 53)) > n && !memcmp(p + 53, type_names[t], n) &&
		    p[53 + n] == '\n')
			add_link(f, i, NULL, p + 7, t);
	}
}

static void hex_id(char *hex, const unsigned char *id)
{
	hex_encode(hex, id, 20);
}

/* A tip's 40 hex digits into raw[20]: 0, or -1 when it is not one. */
static int tip_raw(unsigned char *raw, const char *hex)
{
	if (strlen(hex) != 40)
		return -1;
	for (int j = 0; j < 20; j++) {
		int hi = hex_digit(hex[2 * j]), lo = hex_digit(hex[2 * j + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		raw[j] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* Check object i (its id and real type known) as git fsck --strict would. */
static void fsck_object(struct fsck_state *f, size_t i, unsigned type, const unsigned char *id,
                        const unsigned char *data, size_t len)
{
	char hex[41];
	int r;

	if (i >= f->bad || (type != 1 && type != 2 && type != 4))
		return;
	buf_reset(&f->why);
	if (type == 1)
		r = bundle_fsck_commit((const char *)data, len, &f->why);
	else if (type == 4)
		r = bundle_fsck_tag((const char *)data, len, &f->why);
	else
		r = bundle_fsck_tree((const char *)data, len, &f->found, &f->why);
	if (!r) {
		note_links(f, i, type, (const char *)data, len);
		return;
	}
	f->bad = i;
	hex_id(hex, id);
	refuse(&f->reason, "pack: object %s: %s", hex, f->why.buf);
}

/* Start hashing an object's id: its header, "<type> <size>\0". */
static void id_start(EVP_MD_CTX *md, unsigned type, uint64_t size)
{
	char head[48];
	int n = snprintf(head, sizeof(head), "%s %llu", type_names[type], (unsigned long long)size);

	EVP_DigestInit_ex(md, EVP_sha1(), NULL);
	EVP_DigestUpdate(md, head, (size_t)n + 1);
}

static void id_finish(EVP_MD_CTX *md, unsigned char *id)
{
	unsigned int n = 0;

	EVP_DigestFinal_ex(md, id, &n);
}

/* A walk over the pack: where it is, what it has seen, its inflater. */
struct walk {
	struct pack_src *s;
	const struct bundle_pack_opts *o;
	struct bundle_pack_result *res;
	uint64_t pos, end;     /* the next object; where the checksum starts */
	uint64_t total;        /* inflated so far */
	uint64_t max_object;   /* o->max_object, at most PACK_OBJECT_MAX */
	struct pack_layout *l; /* each object so far */
	struct fsck_state *f;
	EVP_MD_CTX *md; /* each whole object's id */
	z_stream z;
	int zinit;
	unsigned char *out; /* inflate's output, thrown away */
};

#define WALK_OUT_SIZE (64 * 1024)

/*
 * An object's header in p[0..n): its type, its size (a varint of at most
 * 64 bits).  The bytes it takes, or -1 when it is longer than n or the size
 * overflows.
 */
static int pack_obj_header(const unsigned char *p, size_t n, unsigned *type, uint64_t *size)
{
	unsigned shift = 4;
	size_t k = 0;
	unsigned char c;

	if (!n)
		return -1;
	c = p[k++];
	*type = (c >> 4) & 7;
	*size = c & 15;
	while (c & 0x80) {
		if (k >= n || shift > 60)
			return -1;
		c = p[k++];
		*size |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
	}
	return (int)k;
}

/* An OFS_DELTA's distance back to its base in p[0..n): the bytes it takes, or -1. */
static int pack_ofs_back(const unsigned char *p, size_t n, uint64_t *back)
{
	size_t k = 0;
	unsigned char c;

	if (!n)
		return -1;
	c = p[k++];
	*back = c & 0x7f;
	while (c & 0x80) {
		if (k >= n || *back > (UINT64_MAX >> 8))
			return -1;
		c = p[k++];
		*back = ((*back + 1) << 7) | (c & 0x7f);
	}
	return (int)k;
}

/* The pack's header (signature, version, count), then the hash and the inflater. */
static int walk_start(struct walk *w)
{
	struct bundle_pack_result *res = w->res;
	struct pack_src *s = w->s;
	const unsigned char *p;
	size_t avail;
	int ret = 0;

	w->max_object = w->o->max_object;
	if (w->max_object > PACK_OBJECT_MAX)
		w->max_object = PACK_OBJECT_MAX;
	if ((ret = src_at(s, 0, 12, &p, &avail)) < 0)
		return ret;
	if (s->len < 4 || memcmp(p, "PACK", 4))
		return refuse(&res->err, s->len < 4
		                             ? "pack: missing (the bundle ends after its header)"
		                             : "pack: no pack signature");
	if (s->len < 12)
		return refuse(&res->err, "pack: truncated in its header");
	res->version = be32(p + 4);
	if (res->version != 2 && res->version != 3)
		return refuse(&res->err, "pack: unsupported version %u", (unsigned)res->version);
	res->objects = be32(p + 8);
	if (s->len < 12 + 20)
		return refuse(&res->err, "pack: truncated (no checksum)");
	w->pos = 12;
	w->end = s->len - 20;

	s->sha = EVP_MD_CTX_new();
	if (!s->sha || !EVP_DigestInit_ex(s->sha, EVP_sha1(), NULL))
		return -ENOMEM;
	s->hashed = 0;
	s->hash_end = w->end;
	memset(&w->z, 0, sizeof(w->z));
	if (inflateInit(&w->z) != Z_OK)
		return -ENOMEM;
	w->zinit = 1;
	w->out = xmalloc(WALK_OUT_SIZE);
	if (!(w->md = EVP_MD_CTX_new()))
		return -ENOMEM;
	return 0;
}

/*
 * Object i's header at w->pos: its type and size (counted against the
 * limits), a delta's base (an OFS_DELTA's must be an earlier object).
 * Leaves w->pos at its data.
 */
static int walk_header(struct walk *w, uint32_t i, unsigned *type, uint64_t *size)
{
	struct bundle_pack_result *res = w->res;
	const unsigned char *p;
	uint64_t start = w->pos, hlen;
	uint32_t base = UINT32_MAX;
	size_t avail;
	int k, n, ret = 0;

	if (w->pos >= w->end)
		return refuse(&res->err, "pack: ends after %u of %u objects (truncated?)",
		              (unsigned)i, (unsigned)res->objects);
	/* The object's header: type and size, then a delta's base; 64 bytes hold it. */
	if ((ret = src_at(w->s, w->pos, 64, &p, &avail)) < 0)
		return ret;
	hlen = w->end - w->pos < avail ? w->end - w->pos : avail;
	if ((k = pack_obj_header(p, (size_t)hlen, type, size)) < 0)
		return refuse(&res->err, "pack: object %u: bad size", (unsigned)i);
	if ((ret = add_inflated(res, w->o, i, "", *size, w->max_object, *size, &w->total)))
		return ret;
	if (*type == 0 || *type == 5)
		return refuse(&res->err, "pack: object %u: unknown type %u", (unsigned)i, *type);
	if (*type == 6) { /* OFS_DELTA: the base is this many bytes back */
		uint64_t back;

		if ((n = pack_ofs_back(p + k, (size_t)hlen - (size_t)k, &back)) < 0)
			goto trunc;
		k += n;
		if (back == 0 || back > start - 12)
			return refuse(&res->err, "pack: object %u: delta base out of the pack",
			              (unsigned)i);
		if ((base = (uint32_t)layout_find(w->l, start - back)) == UINT32_MAX)
			return refuse(&res->err, "pack: object %u: delta base is not an object",
			              (unsigned)i);
	} else if (*type == 7) { /* REF_DELTA: the base's id */
		struct pack_layout *l = w->l;

		if (hlen - (uint64_t)k < 20)
			goto trunc;
		ALLOC_GROW(l->ref_ids, l->nr_refs + 1, l->alloc_refs);
		memcpy(l->ref_ids[l->nr_refs], p + k, 20);
		base = (uint32_t)l->nr_refs++;
		k += 20;
	}
	w->pos += (uint64_t)k;
	ALLOC_GROW(w->l->offs, w->l->nr + 1, w->l->alloc);
	ALLOC_GROW(w->l->types, w->l->nr + 1, w->l->alloc_types);
	ALLOC_GROW(w->l->base, w->l->nr + 1, w->l->alloc_base);
	ALLOC_GROW(w->l->ids, w->l->nr + 1, w->l->alloc_ids);
	ALLOC_GROW(w->l->real, w->l->nr + 1, w->l->alloc_real);
	w->l->real[w->l->nr] = 0;
	w->l->offs[w->l->nr] = start;
	w->l->types[w->l->nr] = (unsigned char)*type;
	w->l->base[w->l->nr++] = base;
	return 0;
trunc:
	return refuse(&res->err, "pack: object %u: truncated", (unsigned)i);
}

/*
 * Inflate object i's data at w->pos, a window of input at a time, counting
 * what comes out: exactly size bytes.  A whole object is hashed for its id
 * as it comes out; a commit, tree or tag is kept whole (size is within
 * max_object) and checked.  A delta's own header (its base's and its
 * result's sizes) counts against the limits too.  Leaves w->pos after it.
 */
static int walk_inflate(struct walk *w, uint32_t i, unsigned type, uint64_t size)
{
	struct bundle_pack_result *res = w->res;
	unsigned char dhead[24], *keep = NULL;
	uint64_t got = 0, dbase = 0, dresult = 0;
	size_t nhead = 0, avail;
	z_stream *z = &w->z;
	int zr = Z_OK, ret = 0, whole = type <= 4;

	if (type == 1 || type == 2 || type == 4) {
		if (!(keep = malloc((size_t)size + 1)))
			return refuse(&res->err, "pack: the check ran out of memory (memory)");
	}
	if (whole)
		id_start(w->md, type, size);
	inflateReset(z);
	z->avail_in = 0;
	for (;;) {
		unsigned char *out = keep ? keep + got : w->out;
		size_t produced, cap = WALK_OUT_SIZE;
		uInt before;

		if (keep && cap > size + 1 - got)
			cap = (size_t)(size + 1 - got);
		if (z->avail_in == 0) {
			const unsigned char *p;

			if (w->pos >= w->end) {
				ret = refuse(&res->err,
				             "pack: object %u: its data ends early (truncated?)",
				             (unsigned)i);
				goto out;
			}
			if ((ret = src_at(w->s, w->pos, 1, &p, &avail)) < 0)
				goto out;
			if (avail > w->end - w->pos)
				avail = (size_t)(w->end - w->pos);
			z->next_in = (unsigned char *)(uintptr_t)p;
			z->avail_in = avail > UINT32_MAX ? UINT32_MAX : (uInt)avail;
		}
		before = z->avail_in;
		z->next_out = out;
		z->avail_out = (uInt)cap;
		zr = inflate(z, Z_NO_FLUSH);
		w->pos += before - z->avail_in;
		produced = cap - z->avail_out;
		if (nhead < sizeof(dhead)) {
			size_t n =
			    sizeof(dhead) - nhead < produced ? sizeof(dhead) - nhead : produced;

			memcpy(dhead + nhead, out, n);
			nhead += n;
		}
		if (whole && !keep && produced)
			EVP_DigestUpdate(w->md, out, produced);
		got += produced;
		if (got > size || zr == Z_STREAM_END)
			break;
		if (zr == Z_BUF_ERROR && z->avail_in == 0)
			continue; /* it wants more input */
		if (zr != Z_OK)
			break;
	}
	if (got > size || (zr == Z_STREAM_END && got != size)) {
		ret =
		    refuse(&res->err, "pack: object %u: inflates to %s%llu bytes, not %llu",
		           (unsigned)i, got > size ? "more than " : "",
		           (unsigned long long)(got > size ? size : got), (unsigned long long)size);
		goto out;
	}
	if (zr != Z_STREAM_END) {
		ret = refuse(&res->err, "pack: object %u does not inflate (%s)", (unsigned)i,
		             z->msg ? z->msg : "zlib error");
		goto out;
	}
	if (whole) {
		if (keep)
			EVP_DigestUpdate(w->md, keep, (size_t)size);
		id_finish(w->md, w->l->ids[i]);
		w->l->real[i] = (unsigned char)type;
		if (keep)
			fsck_object(w->f, i, type, w->l->ids[i], keep, (size_t)size);
	} else if (delta_sizes(dhead, nhead, &dbase, &dresult) == 0) {
		/* The resolution holds the base and the result whole, and makes the result. */
		int on = dbase > dresult;

		ret = add_inflated(res, w->o, i, on ? "a delta on " : "a delta to ",
		                   on ? dbase : dresult, w->max_object, dresult, &w->total);
	}
out:
	free(keep);
	return ret;
}

/* After the last object: the checksum, and nothing between. */
static int walk_finish(struct walk *w)
{
	struct bundle_pack_result *res = w->res;
	unsigned char sum[EVP_MAX_MD_SIZE];
	const unsigned char *p;
	size_t avail;
	int ret = 0;

	if (w->pos != w->end)
		return refuse(&res->err,
		              "pack: %llu bytes after the last of %u objects (wrong object count?)",
		              (unsigned long long)(w->end - w->pos), (unsigned)res->objects);
	if ((ret = src_hash_finish(w->s, sum)) < 0)
		return ret;
	if ((ret = src_at(w->s, w->end, 20, &p, &avail)) < 0)
		return ret;
	if (memcmp(sum, p, 20))
		return refuse(&res->err, "pack: checksum mismatch");
	for (int j = 0; j < 20; j++) {
		res->checksum[2 * j] = "0123456789abcdef"[sum[j] >> 4];
		res->checksum[2 * j + 1] = "0123456789abcdef"[sum[j] & 15];
	}
	res->checksum[40] = '\0';
	return 0;
}

/*
 * Our own walk over the pack, before libgit2 sees it: the header, each
 * object's type and size, that each inflates to exactly its stated size and
 * ends where the next begins, the limits on what it inflates, the count, and
 * the trailing SHA-1.  Gives a plain reason for each fault (libgit2 misses a
 * wrong size and words the rest for its own developers).
 */
static int walk_pack(struct pack_src *s, const struct bundle_pack_opts *o,
                     struct bundle_pack_result *res, struct pack_layout *l, struct fsck_state *f)
{
	struct walk w = {.s = s, .o = o, .res = res, .l = l, .f = f};
	int ret = walk_start(&w);

	for (uint32_t i = 0; !ret && i < res->objects; i++) {
		unsigned type = 0;
		uint64_t size = 0;

		if (!(ret = walk_header(&w, i, &type, &size)))
			ret = walk_inflate(&w, i, type, size);
	}
	if (!ret)
		ret = walk_finish(&w);
	if (w.zinit)
		inflateEnd(&w.z);
	EVP_MD_CTX_free(s->sha);
	EVP_MD_CTX_free(w.md);
	s->sha = NULL;
	free(w.out);
	return ret;
}

/*
 * The delta resolution, after the walk: git index-pack's order.  Each whole
 * object with deltas on it is a root; its deltas (OFS_DELTAs by their base's
 * index, REF_DELTAs by their base's id) are made from it, hashed and
 * checked, and each result with deltas of its own is the base for them in
 * turn, depth first.  So every delta is inflated again once and applied
 * once.  The bases on the way down are kept while they fit in
 * PACK_BASE_CACHE bytes; past that the oldest are let go, and made again
 * (read from the pack, and their deltas applied) when another delta on them
 * comes.  A thin pack's bases are read from the repository last.
 */

/* The bases kept while deltas are resolved; with a base, a delta and a result, each at most
 * max_object (16 MiB by default), the check stays within 64 MiB. */
#define PACK_BASE_CACHE (16 << 20)
/* Compressed data read at a time by the resolution. */
#define RESOLVE_READ (64 * 1024)

/* A base on the way down: an object and the deltas on it still to make. */
struct frame {
	uint32_t obj;        /* the object; UINT32_MAX: a thin pack's base from the repository */
	unsigned type;       /* its real type, 1-4 */
	unsigned char *data; /* its data, or NULL when let go */
	size_t len, cap;
	uint32_t ofs_next, ofs_end; /* its OFS_DELTAs, in children[] */
	size_t ref_next, ref_end;   /* its REF_DELTAs, in refs[] */
};

struct ref_child {
	unsigned char id[20]; /* the base's id */
	uint32_t obj;
};

struct resolver {
	struct pack_src *s;
	const struct bundle_pack_opts *o;
	struct bundle_pack_result *res;
	struct pack_layout *l;
	struct fsck_state *f;
	git_odb *repo_odb; /* a thin pack's bases; NULL: none */
	uint64_t end;      /* where the checksum starts */
	uint64_t max_object;
	uint32_t *first, *children; /* object i's OFS_DELTAs: children[first[i]..first[i + 1]) */
	struct ref_child *refs;     /* the REF_DELTAs, by their base's id */
	size_t nr_refs;
	unsigned char *done;
	size_t nr_done;
	struct frame *st;
	size_t sp, alloc_st, evict_lo; /* frames below evict_lo hold no data of the pack's */
	uint64_t cached;               /* bytes the frames hold */
	unsigned char (*ext)[20];      /* the thin pack's bases read */
	size_t nr_ext, alloc_ext;
	EVP_MD_CTX *md;
	z_stream z;
	int zinit;
	unsigned char *in;
	unsigned char *spare; /* a large buffer freed, for the next large object */
	size_t spare_cap;
};

/* Buffers from this size up are kept for reuse, their sizes rounded up to RESOLVE_ROUND. */
#define RESOLVE_BIG   (1 << 20)
#define RESOLVE_ROUND (64 * 1024)

/*
 * A buffer for n bytes and one more, its size in *cap: the spare one when it
 * fits (large objects come in chains of about one size: reusing the memory
 * spares a page fault a page), else a new one.  NULL when out of memory.
 */
static unsigned char *buf_take(struct resolver *r, size_t n, size_t *cap)
{
	size_t want = n + 1;
	unsigned char *p;

	if (want >= RESOLVE_BIG) {
		if (r->spare && r->spare_cap >= want) {
			p = r->spare;
			*cap = r->spare_cap;
			r->spare = NULL;
			r->spare_cap = 0;
			return p;
		}
		want = (want + RESOLVE_ROUND - 1) / RESOLVE_ROUND * RESOLVE_ROUND;
	}
	*cap = want;
	return malloc(want);
}

/* Give back a buffer of buf_take(): kept as the spare when it is the larger, else freed. */
static void buf_give(struct resolver *r, unsigned char *p, size_t cap)
{
	if (p && cap >= RESOLVE_BIG && cap > r->spare_cap) {
		free(r->spare);
		r->spare = p;
		r->spare_cap = cap;
	} else {
		free(p);
	}
}

static int ref_child_cmp(const void *a, const void *b)
{
	const struct ref_child *x = a, *y = b;
	int c = memcmp(x->id, y->id, 20);

	return c ? c : (x->obj > y->obj) - (x->obj < y->obj);
}

/* The REF_DELTAs on the object of this id: refs[*lo..*hi). */
static void ref_range(const struct resolver *r, const unsigned char *id, size_t *lo, size_t *hi)
{
	size_t a = 0, b = r->nr_refs;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (memcmp(r->refs[mid].id, id, 20) < 0)
			a = mid + 1;
		else
			b = mid;
	}
	*lo = a;
	while (b < r->nr_refs && !memcmp(r->refs[b].id, id, 20))
		b++;
	*hi = b < a ? a : b;
}

/* The pack's bytes [off, off + n) (n at most RESOLVE_READ), in *p. */
static int resolve_bytes(struct resolver *r, uint64_t off, size_t n, const unsigned char **p)
{
	size_t got = 0;

	if (r->s->mem) {
		*p = r->s->mem + off;
		return 0;
	}
	while (got < n) {
		ssize_t k = pread(r->s->fd, r->in + got, n - got, r->s->base + (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO; /* the file shrank under us */
		got += (size_t)k;
	}
	*p = r->in;
	return 0;
}

/*
 * Object i's data as stored, inflated (a delta's the delta itself), into
 * *data (malloc'ed, *len bytes).  The walk checked it all; anything else now
 * means the file changed under the check: -EIO.
 */
static int read_object(struct resolver *r, size_t i, unsigned char **data, size_t *len, size_t *cap)
{
	uint64_t off = r->l->offs[i], end = i + 1 < r->l->nr ? r->l->offs[i + 1] : r->end, size;
	const unsigned char *p;
	unsigned char *out;
	size_t n = end - off < RESOLVE_READ ? (size_t)(end - off) : RESOLVE_READ, got = 0;
	unsigned type;
	int k, ret, zr;

	if ((ret = resolve_bytes(r, off, n, &p)) < 0)
		return ret;
	if (r->s->mem)
		n = (size_t)(end - off);
	if ((k = pack_obj_header(p, n, &type, &size)) < 0 || size > r->max_object)
		return -EIO;
	if (type == 6) {
		uint64_t back;
		int m = pack_ofs_back(p + k, n - (size_t)k, &back);

		if (m < 0)
			return -EIO;
		k += m;
	} else if (type == 7) {
		k += 20;
	}
	if ((size_t)k > n)
		return -EIO;
	if (!(out = buf_take(r, (size_t)size, cap)))
		return refuse(&r->res->err, "pack: the check ran out of memory (memory)");
	inflateReset(&r->z);
	r->z.next_in = (unsigned char *)(uintptr_t)(p + k);
	r->z.avail_in = (uInt)(n - (size_t)k);
	off += n;
	for (;;) {
		r->z.next_out = out + got;
		r->z.avail_out = (uInt)(size + 1 - got);
		zr = inflate(&r->z, Z_NO_FLUSH);
		got = (size_t)(r->z.next_out - out);
		if (zr == Z_STREAM_END || got > size)
			break;
		if (zr != Z_OK && zr != Z_BUF_ERROR)
			break;
		if (r->z.avail_in == 0) {
			if (off >= end)
				break;
			n = end - off < RESOLVE_READ ? (size_t)(end - off) : RESOLVE_READ;
			if ((ret = resolve_bytes(r, off, n, &p)) < 0) {
				buf_give(r, out, *cap);
				return ret;
			}
			r->z.next_in = (unsigned char *)(uintptr_t)p;
			r->z.avail_in = (uInt)n;
			off += n;
		} else if (zr == Z_BUF_ERROR) {
			break;
		}
	}
	if (zr != Z_STREAM_END || got != size) {
		buf_give(r, out, *cap);
		return -EIO;
	}
	*data = out;
	*len = (size_t)size;
	return 0;
}

static int delta_varint(const unsigned char *d, size_t n, size_t *i, uint64_t *v)
{
	unsigned shift = 0;
	unsigned char c;

	*v = 0;
	do {
		if (*i >= n || shift > 63)
			return -1;
		c = d[(*i)++];
		*v |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
	} while (c & 0x80);
	return 0;
}

/*
 * Apply delta d[0..dn) to base b[0..bn): the result (malloc'ed) in *out,
 * *outn bytes.  0, or BUNDLE_REFUSED in libgit2's words, which the check
 * gave before it resolved deltas itself.
 */
static int delta_apply(struct resolver *r, const unsigned char *b, size_t bn,
                       const unsigned char *d, size_t dn, unsigned char **out, size_t *outn,
                       size_t *cap)
{
	uint64_t bsize, rsize;
	size_t i = 0, pos = 0;
	unsigned char *o;

	if (delta_varint(d, dn, &i, &bsize) < 0 || bsize != bn ||
	    delta_varint(d, dn, &i, &rsize) < 0)
		return refuse(&r->res->err,
		              "pack: failed to apply delta: base size does not match given data");
	if (rsize > r->max_object)
		return refuse(&r->res->err, "pack: failed to apply delta");
	if (!(o = buf_take(r, (size_t)rsize, cap)))
		return refuse(&r->res->err, "pack: the check ran out of memory (memory)");
	while (i < dn) {
		unsigned c = d[i++];

		if (c &
		    0x80) { /* copy from the base: offset and size, each byte present by a bit */
			uint64_t off = 0, n = 0;

			for (int k = 0; k < 4; k++)
				if (c & (1u << k)) {
					if (i >= dn)
						goto fail;
					off |= (uint64_t)d[i++] << (8 * k);
				}
			for (int k = 0; k < 3; k++)
				if (c & (0x10u << k)) {
					if (i >= dn)
						goto fail;
					n |= (uint64_t)d[i++] << (8 * k);
				}
			if (!n)
				n = 0x10000;
			if (off > bn || n > bn - off || n > rsize - pos)
				goto fail;
			memcpy(o + pos, b + off, (size_t)n);
			pos += (size_t)n;
		} else if (c) { /* insert the next c bytes */
			if (c > dn - i || c > rsize - pos)
				goto fail;
			memcpy(o + pos, d + i, c);
			i += c;
			pos += c;
		} else {
			goto fail; /* 0 is reserved */
		}
	}
	if (pos != rsize)
		goto fail;
	*out = o;
	*outn = (size_t)rsize;
	return 0;
fail:
	buf_give(r, o, *cap);
	return refuse(&r->res->err, "pack: failed to apply delta");
}

/* Delta object i applied on base b[0..bn), into *out, *outn. */
static int make_delta(struct resolver *r, size_t i, const unsigned char *b, size_t bn,
                      unsigned char **out, size_t *outn, size_t *cap)
{
	unsigned char *d;
	size_t dn, dcap;
	int ret = read_object(r, i, &d, &dn, &dcap);

	if (ret)
		return ret;
	ret = delta_apply(r, b, bn, d, dn, out, outn, cap);
	buf_give(r, d, dcap);
	return ret;
}

/* Let the oldest bases go while they hold more than PACK_BASE_CACHE; never the top one. */
static void prune(struct resolver *r)
{
	while (r->cached > PACK_BASE_CACHE && r->evict_lo + 1 < r->sp) {
		struct frame *f = &r->st[r->evict_lo++];

		if (f->data && f->obj != UINT32_MAX) {
			buf_give(r, f->data, f->cap);
			f->data = NULL;
			r->cached -= f->len;
		}
	}
}

/* Make frame k's data again if it was let go: from the nearest frame below that has it. */
static int frame_data(struct resolver *r, size_t k)
{
	size_t j = k;
	int ret;

	if (r->st[k].data)
		return 0;
	while (j > 0 && !r->st[j].data)
		j--;
	if (!r->st[j].data) { /* the root, a whole object of the pack */
		if ((ret = read_object(r, r->st[j].obj, &r->st[j].data, &r->st[j].len,
		                       &r->st[j].cap)))
			return ret;
		r->cached += r->st[j].len;
	}
	if (r->evict_lo > j)
		r->evict_lo = j;
	for (size_t m = j + 1; m <= k; m++) {
		struct frame *b = &r->st[m - 1], *f = &r->st[m];

		if ((ret = make_delta(r, f->obj, b->data, b->len, &f->data, &f->len, &f->cap)))
			return ret;
		r->cached += f->len;
		if (r->cached > PACK_BASE_CACHE && m - 1 > 0 && b->obj != UINT32_MAX) {
			buf_give(r, b->data, b->cap);
			b->data = NULL;
			r->cached -= b->len;
		}
	}
	return 0;
}

static void push(struct resolver *r, uint32_t obj, unsigned type, unsigned char *data, size_t len,
                 size_t cap, size_t ref_lo, size_t ref_hi)
{
	struct frame *f;

	ALLOC_GROW(r->st, r->sp + 1, r->alloc_st);
	f = &r->st[r->sp++];
	f->obj = obj;
	f->type = type;
	f->data = data;
	f->len = len;
	f->cap = cap;
	f->ofs_next = obj == UINT32_MAX ? 0 : r->first[obj];
	f->ofs_end = obj == UINT32_MAX ? 0 : r->first[obj + 1];
	f->ref_next = ref_lo;
	f->ref_end = ref_hi;
	if (data)
		r->cached += len;
	prune(r);
}

static void pop(struct resolver *r)
{
	struct frame *f = &r->st[--r->sp];

	if (f->data) {
		buf_give(r, f->data, f->cap);
		r->cached -= f->len;
	}
	if (r->evict_lo > r->sp)
		r->evict_lo = r->sp;
}

/* Delta c on the top frame: made, hashed, checked; a base for its own deltas in turn. */
static int resolve_one(struct resolver *r, uint32_t c)
{
	struct pack_layout *l = r->l;
	unsigned type = r->st[r->sp - 1].type;
	unsigned char *out;
	size_t len, cap, lo, hi;
	int ret;

	if ((ret = frame_data(r, r->sp - 1)))
		return ret;
	if ((ret = make_delta(r, c, r->st[r->sp - 1].data, r->st[r->sp - 1].len, &out, &len, &cap)))
		return ret;
	id_start(r->md, type, len);
	EVP_DigestUpdate(r->md, out, len);
	id_finish(r->md, l->ids[c]);
	l->real[c] = (unsigned char)type;
	r->done[c] = 1;
	r->nr_done++;
	fsck_object(r->f, c, type, l->ids[c], out, len);
	ref_range(r, l->ids[c], &lo, &hi);
	if (r->first[c] == r->first[c + 1] && lo == hi)
		buf_give(r, out, cap);
	else
		push(r, c, type, out, len, cap, lo, hi);
	return 0;
}

/* Every delta on the frames, depth first, until the stack is empty. */
static int resolve_stack(struct resolver *r)
{
	int ret;

	while (r->sp) {
		struct frame *f = &r->st[r->sp - 1];
		uint32_t c;

		if (f->ofs_next < f->ofs_end)
			c = r->children[f->ofs_next++];
		else if (f->ref_next < f->ref_end)
			c = r->refs[f->ref_next++].obj;
		else {
			pop(r);
			continue;
		}
		if (!r->done[c] && (ret = resolve_one(r, c)))
			return ret;
	}
	return 0;
}

/* A delta whose base is neither in the pack nor in the repository (libgit2's words with one). */
static int thin_refusal(const struct resolver *r)
{
	return refuse(&r->res->err, r->repo_odb ? "pack: missing delta bases"
	                                        : "pack: a delta's base is not in the pack (a thin "
	                                          "pack: give --repo)");
}

/* The REF_DELTAs left: their bases from the repository, or refused. */
static int resolve_thin(struct resolver *r)
{
	for (size_t k = 0, e; k < r->nr_refs; k = e) {
		git_odb_object *obj = NULL;
		unsigned char *data;
		size_t len, left = 0;
		git_object_t type;
		git_oid id;
		int ret;

		for (e = k; e < r->nr_refs && !memcmp(r->refs[e].id, r->refs[k].id, 20); e++)
			left += !r->done[r->refs[e].obj];
		if (!left)
			continue;
		git_oid_fromraw(&id, r->refs[k].id);
		if (!r->repo_odb || git_odb_read_header(&len, &type, r->repo_odb, &id) < 0)
			return thin_refusal(r);
		if (type < GIT_OBJECT_COMMIT || type > GIT_OBJECT_TAG || len > r->max_object)
			return refuse(&r->res->err,
			              "pack: failed to apply delta: base size does not "
			              "match given data");
		if (git_odb_read(&obj, r->repo_odb, &id) < 0)
			return libgit2_reason(r->res);
		len = git_odb_object_size(obj);
		data = xmalloc(len ? len : 1);
		memcpy(data, git_odb_object_data(obj), len);
		git_odb_object_free(obj);
		ALLOC_GROW(r->ext, r->nr_ext + 1, r->alloc_ext);
		memcpy(r->ext[r->nr_ext++], r->refs[k].id, 20);
		push(r, UINT32_MAX, (unsigned)type, data, len, len ? len : 1, k, e);
		if ((ret = resolve_stack(r)))
			return ret;
	}
	return r->nr_done == r->l->nr ? 0 : thin_refusal(r);
}

static int resolve_deltas(struct resolver *r)
{
	struct pack_layout *l = r->l;
	size_t n = l->nr, lo, hi;
	int ret = 0;

	r->first = xcalloc(n + 2, sizeof(*r->first));
	r->children = xmalloc((n ? n : 1) * sizeof(*r->children));
	r->refs = xmalloc((n ? n : 1) * sizeof(*r->refs));
	r->done = xcalloc(n ? n : 1, 1);
	for (size_t i = 0; i < n; i++) {
		if (l->types[i] == 6)
			r->first[l->base[i] + 2]++;
		else if (l->types[i] == 7) {
			memcpy(r->refs[r->nr_refs].id, l->ref_ids[l->base[i]], 20);
			r->refs[r->nr_refs++].obj = (uint32_t)i;
		} else {
			r->done[i] = 1;
			r->nr_done++;
		}
	}
	for (size_t i = 0; i < n; i++)
		r->first[i + 2] += r->first[i + 1];
	for (size_t i = 0; i < n; i++)
		if (l->types[i] == 6)
			r->children[r->first[l->base[i] + 1]++] = (uint32_t)i;
	qsort(r->refs, r->nr_refs, sizeof(*r->refs), ref_child_cmp);
	for (size_t i = 0; i < n && !ret; i++) {
		if (l->types[i] > 4)
			continue;
		ref_range(r, l->ids[i], &lo, &hi);
		if (r->first[i] == r->first[i + 1] && lo == hi)
			continue;
		push(r, (uint32_t)i, l->types[i], NULL, 0, 0, lo, hi);
		ret = resolve_stack(r);
	}
	if (!ret && r->nr_done < n)
		ret = resolve_thin(r);
	while (r->sp)
		pop(r);
	return ret;
}

/* Each object by id, for the lookups after the resolution. */
struct by_id {
	unsigned char id[20];
	uint32_t obj;
};

static int by_id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 20);
}

/* The pack's object of this id, or UINT32_MAX. */
static uint32_t find_id(const struct by_id *ids, size_t n, const unsigned char *id)
{
	const struct by_id *e = bsearch(id, ids, n, sizeof(*ids), by_id_cmp);

	return e ? e->obj : UINT32_MAX;
}

static int is_ext(const struct resolver *r, const unsigned char *id)
{
	for (size_t i = 0; i < r->nr_ext; i++)
		if (!memcmp(r->ext[i], id, 20))
			return 1;
	return 0;
}

/*
 * Object i's data made again, through its chain of bases (a thin pack's
 * last base from the repository), into *data, *len.
 */
static int object_data(struct resolver *r, const struct by_id *ids, uint32_t i,
                       unsigned char **data, size_t *len)
{
	struct pack_layout *l = r->l;
	uint32_t *chain = NULL;
	size_t nr = 0, alloc = 0;
	unsigned char *cur = NULL;
	size_t curn = 0, curcap = 0;
	int ret = 0;

	while (l->types[i] == 6 || l->types[i] == 7) {
		uint32_t next =
		    l->types[i] == 6 ? l->base[i] : find_id(ids, l->nr, l->ref_ids[l->base[i]]);

		ALLOC_GROW(chain, nr + 1, alloc);
		chain[nr++] = i;
		if (nr > l->nr) { /* ids made twice can only loop here */
			free(chain);
			return -EIO;
		}
		if (next == UINT32_MAX)
			break; /* a thin pack's base */
		i = next;
	}
	if (l->types[i] <= 4) {
		ret = read_object(r, i, &cur, &curn, &curcap);
	} else {
		git_odb_object *obj = NULL;
		git_oid id;

		git_oid_fromraw(&id, l->ref_ids[l->base[i]]);
		if (!r->repo_odb || git_odb_read(&obj, r->repo_odb, &id) < 0) {
			ret = -EIO;
		} else {
			curn = git_odb_object_size(obj);
			curcap = curn ? curn : 1;
			cur = xmalloc(curcap);
			memcpy(cur, git_odb_object_data(obj), curn);
			git_odb_object_free(obj);
		}
	}
	for (size_t k = nr; k-- > 0 && !ret;) {
		unsigned char *next;
		size_t nextn, nextcap;

		if (!(ret = make_delta(r, chain[k], cur, curn, &next, &nextn, &nextcap))) {
			buf_give(r, cur, curcap);
			cur = next;
			curn = nextn;
			curcap = nextcap;
		}
	}
	free(chain);
	if (ret) {
		free(cur);
		return ret;
	}
	*data = cur;
	*len = curn;
	return 0;
}

/*
 * A blob a tree named .gitmodules or .gitattributes: from the pack, else
 * from the project's repository (repo_odb, may be NULL) as git reads it;
 * found nowhere, refused as git refuses it.
 */
static int fsck_named_blob(struct resolver *r, const struct by_id *ids, const unsigned char *raw,
                           int kind, struct buf *err)
{
	const int mods = kind == FSCK_GITMODULES;
	uint32_t i = find_id(ids, r->l->nr, raw);
	git_odb_object *obj = NULL;
	unsigned char *data = NULL;
	size_t len = 0;
	unsigned type;
	git_oid id;
	int ret;

	git_oid_fromraw(&id, raw);
	if (i != UINT32_MAX) {
		type = r->l->real[i];
		if (type == GIT_OBJECT_BLOB && (ret = object_data(r, ids, i, &data, &len)))
			return ret;
	} else if (r->repo_odb && git_odb_exists(r->repo_odb, &id)) {
		if (git_odb_read(&obj, r->repo_odb, &id) < 0)
			return -EIO;
		type = (unsigned)git_odb_object_type(obj);
	} else {
		buf_addstr(err, mods ? ".gitmodules is not in the pack or the repository "
		                       "(gitmodulesMissing)"
		                     : ".gitattributes is not in the pack or the repository "
		                       "(gitattributesMissing)");
		return BUNDLE_REFUSED;
	}
	if (type != GIT_OBJECT_BLOB) {
		buf_addstr(err, mods ? ".gitmodules is not a blob (gitmodulesBlob)"
		                     : ".gitattributes is not a blob (gitattributesBlob)");
		ret = BUNDLE_REFUSED;
	} else if (obj) {
		ret =
		    bundle_fsck_blob(kind, git_odb_object_data(obj), git_odb_object_size(obj), err);
	} else {
		ret = bundle_fsck_blob(kind, (const char *)data, len, err);
	}
	git_odb_object_free(obj);
	free(data);
	return ret;
}

struct named_blob {
	unsigned char id[20];
	unsigned char kind;
};

static int named_cmp(const void *a, const void *b)
{
	const struct named_blob *x = a, *y = b;
	int c = memcmp(x->id, y->id, 20);

	return c ? c : (int)x->kind - (int)y->kind;
}

/*
 * The type (1-4) of the object raw: the pack's, else the project's (read
 * from the repository, a thin pack's base for one).  0 when neither holds it.
 */
static unsigned object_type(const struct resolver *r, const struct by_id *ids,
                            const unsigned char *raw)
{
	uint32_t i = find_id(ids, r->l->nr, raw);
	git_object_t ot;
	git_oid id;
	size_t len;

	if (i != UINT32_MAX)
		return r->l->real[i];
	memcpy(id.id, raw, 20);
	if (!r->repo_odb || git_odb_read_header(&len, &ot, r->repo_odb, &id) < 0 ||
	    ot < GIT_OBJECT_COMMIT || ot > GIT_OBJECT_TAG)
		return 0;
	return (unsigned)ot;
}

/*
 * Whether a ref of this name is a branch, to which git writes only a commit
 * (its refs.c is_branch(): "HEAD", or under "refs/heads/").
 */
static int is_branch(const char *name)
{
	return !strcmp(name, "HEAD") || !strncmp(name, "refs/heads/", 11);
}

/*
 * After the resolution: each of o->tips is in the pack (a thin pack's bases
 * count, as git's index of the pack holds them), the first object fsck
 * refused (pack order), then each blob a tree named .gitmodules or
 * .gitattributes, once per blob and kind, then each object's links, then
 * (with o->tip_refs) that a branch's tip is a commit: the worse faults are
 * named first.
 */
static int check_objects(struct resolver *r)
{
	const struct bundle_pack_opts *o = r->o;
	struct pack_layout *l = r->l;
	struct fsck_state *f = r->f;
	struct by_id *ids = xmalloc((l->nr ? l->nr : 1) * sizeof(*ids));
	struct named_blob *named = NULL;
	struct buf why = BUF_INIT;
	int ret = 0;

	for (size_t i = 0; i < l->nr; i++) {
		memcpy(ids[i].id, l->ids[i], 20);
		ids[i].obj = (uint32_t)i;
	}
	qsort(ids, l->nr, sizeof(*ids), by_id_cmp);
	for (size_t i = 0; i < o->nr_tips && !ret; i++) {
		unsigned char raw[20];

		if (tip_raw(raw, o->tips[i]) < 0 ||
		    (find_id(ids, l->nr, raw) == UINT32_MAX && !is_ext(r, raw)))
			ret = refuse(&r->res->err, "pack: does not hold %.64s, a ref's tip",
			             o->tips[i]);
	}
	if (!ret && f->bad != SIZE_MAX) {
		refuse(&r->res->err, "%s", f->reason.buf);
		ret = BUNDLE_REFUSED;
	}
	/* Many trees name the same blob: check each blob and kind once. */
	named = xmalloc(f->found.nr ? f->found.nr * sizeof(*named) : 1);
	for (size_t i = 0; i < f->found.nr; i++) {
		memcpy(named[i].id, f->found.ids[i], 20);
		named[i].kind = f->found.kind[i];
	}
	qsort(named, f->found.nr, sizeof(*named), named_cmp);
	for (size_t i = 0; i < f->found.nr && !ret; i++) {
		if (i && !named_cmp(&named[i - 1], &named[i]))
			continue;
		buf_reset(&why);
		if ((ret = fsck_named_blob(r, ids, named[i].id, named[i].kind, &why)) > 0) {
			char hex[41];

			hex_id(hex, named[i].id);
			ret = refuse(&r->res->err, "pack: object %s: %s", hex, why.buf);
		}
	}
	free(named);
	/*
	 * A commit's tree and parents, a tree's entries, a tag's object, where
	 * the pack or the project (--repo) holds them, are of the type named
	 * (git fsck: "bad tree pointer", "bad parent", "bad tag pointer", "is a
	 * tree, not a blob"; git fetch keeps every object of the pack and does
	 * not look at types).
	 */
	for (size_t i = 0; i < f->nr_links && !ret; i++) {
		const struct fsck_link *k = &f->links[i];
		unsigned real = object_type(r, ids, k->to); /* 0: in neither */
		char from[41], to[41];

		if (real == k->type)
			continue;
		hex_id(from, l->ids[k->from]);
		hex_id(to, k->to);
		if (!real) {
			git_oid id;

			/*
			 * With the project to look in, an object the pack names
			 * and neither holds breaks the history (git fsck:
			 * "broken link", "missing"; git fetch: "did not send all
			 * necessary objects"); without it, it may be the project's.
			 */
			memcpy(id.id, k->to, 20);
			if (!r->repo_odb || git_odb_exists(r->repo_odb, &id))
				continue;
			ret = refuse(&r->res->err,
			             "pack: object %s: names %s, a %s neither the pack nor the "
			             "project holds (missing)",
			             from, to, type_names[k->type]);
			break;
		}
		ret = refuse(&r->res->err, "pack: object %s: names %s as a %s, but it is a %s (%s)",
		             from, to, type_names[k->type], type_names[real],
		             l->real[k->from] == 2   ? "badTreeEntry"
		             : l->real[k->from] == 4 ? "badTagPointer"
		             : k->type == 2          ? "badTreePointer"
		                                     : "badParentPointer");
	}
	/*
	 * A branch's tip is a commit: git fetches nothing else into a branch,
	 * and does not peel a tag to find one ("trying to write non-commit
	 * object"); a tag may name any object.
	 */
	for (size_t i = 0; o->tip_refs && i < o->nr_tips && !ret; i++) {
		const char *name = o->tip_refs[i];
		unsigned char raw[20];
		unsigned type;

		if (!is_branch(name) || tip_raw(raw, o->tips[i]) < 0)
			continue;
		type = object_type(r, ids, raw); /* the pack's, or a thin pack's base */
		if (!type)
			ret = -EIO;
		else if (type != GIT_OBJECT_COMMIT)
			ret =
			    refuse(&r->res->err, "pack: ref '%.200s' names a %s, not a commit (%s)",
			           name, type_names[type], o->tips[i]);
	}
	free(ids);
	buf_release(&why);
	return ret;
}

/* Resolve every delta (a thin pack's bases from o->repo_dir if given), then check_objects(). */
static int resolve_pack(struct pack_src *s, const struct bundle_pack_opts *o, struct pack_layout *l,
                        struct fsck_state *f, struct bundle_pack_result *res)
{
	struct resolver r = {.s = s, .o = o, .res = res, .l = l, .f = f};
	git_repository *repo = NULL;
	int ret = 0;

	/* git writes version 2 only; libgit2's indexer refused 3 in these words, and so do we. */
	if (res->version != 2)
		return refuse(&res->err, "pack: wrong pack version");
	r.end = s->len - 20;
	r.max_object = o->max_object > PACK_OBJECT_MAX ? PACK_OBJECT_MAX : o->max_object;
	git_libgit2_init();
	/* Small windows on the repository's packs: what it maps stays small. */
	git_libgit2_opts(GIT_OPT_SET_MWINDOW_SIZE, (size_t)PACK_WINDOW);
	git_libgit2_opts(GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)(8 * PACK_WINDOW));
	git_libgit2_opts(GIT_OPT_ENABLE_CACHING, 0);
	if (o->repo_dir &&
	    (git_repository_open_ext(&repo, o->repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	     git_repository_odb(&r.repo_odb, repo) < 0)) {
		ret = -ENOENT;
		goto out;
	}
	if (!(r.md = EVP_MD_CTX_new()) || inflateInit(&r.z) != Z_OK) {
		ret = -ENOMEM;
		goto out;
	}
	r.zinit = 1;
	r.in = xmalloc(RESOLVE_READ);
	if (!(ret = resolve_deltas(&r))) {
		res->indexed = (uint32_t)r.nr_done;
		ret = check_objects(&r);
	}
out:
	if (r.zinit)
		inflateEnd(&r.z);
	EVP_MD_CTX_free(r.md);
	free(r.in);
	free(r.first);
	free(r.children);
	free(r.refs);
	free(r.done);
	free(r.st);
	free(r.ext);
	free(r.spare);
	git_odb_free(r.repo_odb);
	git_repository_free(repo);
	git_libgit2_shutdown();
	return ret;
}

static int verify(struct pack_src *s, const struct bundle_pack_opts *o,
                  struct bundle_pack_result *res)
{
	struct pack_layout l = {NULL};
	struct fsck_state f = FSCK_STATE_INIT;
	int ret = walk_pack(s, o, res, &l, &f);

	if (!ret)
		ret = resolve_pack(s, o, &l, &f, res);
	layout_clear(&l);
	fsck_state_clear(&f);
	return ret;
}

/* Empty res for a new verification, keeping its err's memory. */
static void result_reset(struct bundle_pack_result *res)
{
	struct buf err = res->err;

	memset(res, 0, sizeof(*res));
	res->err = err;
	buf_reset(&res->err);
}

void bundle_pack_result_clear(struct bundle_pack_result *res)
{
	buf_release(&res->err);
}

int bundle_pack_verify_buf(const void *data, size_t len, const struct bundle_pack_opts *o,
                           struct bundle_pack_result *res)
{
	struct pack_src s = {.mem = data, .fd = -1, .len = len};

	result_reset(res);
	return verify(&s, o, res);
}

int bundle_pack_verify_fd(int fd, const struct bundle_pack_opts *o, struct bundle_pack_result *res)
{
	struct stat st;
	off_t here;
	int ret;

	result_reset(res);
	here = lseek(fd, 0, SEEK_CUR);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && here >= 0 && st.st_size >= here) {
		/* A file: read in windows, whatever its size. */
		struct pack_src s = {.fd = fd, .base = here, .len = (uint64_t)(st.st_size - here)};

		if (s.len > o->max_bytes)
			return refuse(&res->err, "pack: larger than %llu bytes",
			              (unsigned long long)o->max_bytes);
		s.win = xmalloc(PACK_WINDOW);
		ret = verify(&s, o, res);
		free(s.win);
		return ret;
	} else {
		struct buf b = BUF_INIT;
		ssize_t n =
		    buf_read_fd(&b, fd, o->max_bytes > SIZE_MAX ? SIZE_MAX : (size_t)o->max_bytes);

		if (n == -EFBIG)
			ret = refuse(&res->err, "pack: larger than %llu bytes",
			             (unsigned long long)o->max_bytes);
		else if (n < 0)
			ret = (int)n;
		else
			ret = bundle_pack_verify_buf(b.buf ? b.buf : "", b.len, o, res);
		buf_release(&b);
		return ret;
	}
}
