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
 * of ref_ids (the base's raw id).  The checks after the indexer use it to
 * know every object's type without asking libgit2, and to read in pack order.
 */
struct pack_layout {
	uint64_t *offs;
	unsigned char *types;
	uint32_t *base;
	size_t nr, alloc, alloc_types, alloc_base;
	unsigned char (*ref_ids)[20];
	size_t nr_refs, alloc_refs;
};

static void layout_clear(struct pack_layout *l)
{
	free(l->offs);
	free(l->types);
	free(l->base);
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

/* A walk over the pack: where it is, what it has seen, its inflater. */
struct walk {
	struct pack_src *s;
	const struct bundle_pack_opts *o;
	struct bundle_pack_result *res;
	uint64_t pos, end;     /* the next object; where the checksum starts */
	uint64_t total;        /* inflated so far */
	uint64_t max_object;   /* o->max_object, at most PACK_OBJECT_MAX */
	struct pack_layout *l; /* each object so far */
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
	w->l->offs[w->l->nr] = start;
	w->l->types[w->l->nr] = (unsigned char)*type;
	w->l->base[w->l->nr++] = base;
	return 0;
trunc:
	return refuse(&res->err, "pack: object %u: truncated", (unsigned)i);
}

/*
 * Inflate object i's data at w->pos, a window of input at a time, counting
 * what comes out: exactly size bytes.  A delta's own header (its base's and
 * its result's sizes) counts against the limits too.  Leaves w->pos after it.
 */
static int walk_inflate(struct walk *w, uint32_t i, unsigned type, uint64_t size)
{
	struct bundle_pack_result *res = w->res;
	unsigned char dhead[24];
	uint64_t got = 0, dbase = 0, dresult = 0;
	size_t nhead = 0, avail;
	z_stream *z = &w->z;
	int zr = Z_OK, ret = 0;

	inflateReset(z);
	z->avail_in = 0;
	for (;;) {
		size_t produced;
		uInt before;

		if (z->avail_in == 0) {
			const unsigned char *p;

			if (w->pos >= w->end)
				return refuse(&res->err,
				              "pack: object %u: its data ends early (truncated?)",
				              (unsigned)i);
			if ((ret = src_at(w->s, w->pos, 1, &p, &avail)) < 0)
				return ret;
			if (avail > w->end - w->pos)
				avail = (size_t)(w->end - w->pos);
			z->next_in = (unsigned char *)(uintptr_t)p;
			z->avail_in = avail > UINT32_MAX ? UINT32_MAX : (uInt)avail;
		}
		before = z->avail_in;
		z->next_out = w->out;
		z->avail_out = WALK_OUT_SIZE;
		zr = inflate(z, Z_NO_FLUSH);
		w->pos += before - z->avail_in;
		produced = WALK_OUT_SIZE - z->avail_out;
		if (nhead < sizeof(dhead)) {
			size_t n =
			    sizeof(dhead) - nhead < produced ? sizeof(dhead) - nhead : produced;

			memcpy(dhead + nhead, w->out, n);
			nhead += n;
		}
		got += produced;
		if (got > size || zr == Z_STREAM_END)
			break;
		if (zr == Z_BUF_ERROR && z->avail_in == 0)
			continue; /* it wants more input */
		if (zr != Z_OK)
			break;
	}
	if (got > size || (zr == Z_STREAM_END && got != size))
		return refuse(&res->err, "pack: object %u: inflates to %s%llu bytes, not %llu",
		              (unsigned)i, got > size ? "more than " : "",
		              (unsigned long long)(got > size ? size : got),
		              (unsigned long long)size);
	if (zr != Z_STREAM_END)
		return refuse(&res->err, "pack: object %u does not inflate (%s)", (unsigned)i,
		              z->msg ? z->msg : "zlib error");
	if ((type == 6 || type == 7) && delta_sizes(dhead, nhead, &dbase, &dresult) == 0) {
		/* libgit2 holds the base and the result whole, and makes the result. */
		int on = dbase > dresult;

		return add_inflated(res, w->o, i, on ? "a delta on " : "a delta to ",
		                    on ? dbase : dresult, w->max_object, dresult, &w->total);
	}
	return 0;
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
                     struct bundle_pack_result *res, struct pack_layout *l)
{
	struct walk w = {.s = s, .o = o, .res = res, .l = l};
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
	s->sha = NULL;
	free(w.out);
	return ret;
}

static void remove_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d))) {
			struct buf p = BUF_INIT;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			buf_addf(&p, "%s/%s", dir, e->d_name);
			unlink(p.buf);
			buf_release(&p);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* "pack: object <id>: " before a reason of common/git/bundle_fsck.c. */
static int fsck_refuse(struct bundle_pack_result *res, const git_oid *id, struct buf *err)
{
	char hex[GIT_OID_HEXSZ + 1];

	git_oid_tostr(hex, sizeof(hex), id);
	return refuse(&res->err, "pack: object %s: %s", hex, err->buf);
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/*
 * The index file the indexer wrote (version 2), read whole: its n ids in
 * order, each one's offset.  The pack's own checks made it; it is read
 * with bounds all the same.
 */
struct pack_idx {
	struct buf b;
	uint32_t n;
	size_t n64;
	const unsigned char *ids, *offs32, *offs64;
};

static int idx_load(struct pack_idx *x, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;
	size_t need;

	if (fd < 0)
		return -errno;
	got = buf_read_fd(&x->b, fd, (size_t)1 << 40); /* the object count bounds it */
	close(fd);
	if (got < 0)
		return (int)got;
	if (x->b.len < 8 + 1024 + 40 || memcmp(x->b.buf, "\377tOc", 4) ||
	    be32((const unsigned char *)x->b.buf + 4) != 2)
		return -EIO;
	x->n = be32((const unsigned char *)x->b.buf + 8 + 255 * 4);
	need = 8 + 1024 + (size_t)x->n * 28 + 40;
	if (x->b.len < need || (x->b.len - need) % 8)
		return -EIO;
	x->n64 = (x->b.len - need) / 8;
	x->ids = (const unsigned char *)x->b.buf + 8 + 1024;
	x->offs32 = x->ids + (size_t)x->n * 24;
	x->offs64 = x->offs32 + (size_t)x->n * 4;
	return 0;
}

/* Entry k's offset in the pack, or UINT64_MAX when the index is malformed. */
static uint64_t idx_offset(const struct pack_idx *x, uint32_t k)
{
	uint32_t v = be32(x->offs32 + (size_t)k * 4);

	if (!(v & 0x80000000))
		return v;
	v &= 0x7fffffff;
	return v < x->n64 ? be64(x->offs64 + (size_t)v * 8) : UINT64_MAX;
}

/* The entry of the raw id, or UINT32_MAX. */
static uint32_t idx_find(const struct pack_idx *x, const unsigned char *id)
{
	uint32_t lo = 0, hi = x->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = memcmp(x->ids + (size_t)mid * 20, id, 20);

		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX;
}

/*
 * Each object's type, deltas resolved through their bases (the walk's
 * layout, the index for a REF_DELTA's base; one outside the pack is a thin
 * pack's base, which the indexer appended: its type from odb), into t.
 */
static int resolve_types(const struct pack_layout *l, const struct pack_idx *x, git_odb *odb,
                         unsigned char *t, struct bundle_pack_result *res)
{
	if (l->nr)
		memcpy(t, l->types, l->nr);
	for (size_t i = 0; i < l->nr; i++) {
		size_t j = i, steps = 0;
		unsigned char final;

		while (t[j] == 6 || t[j] == 7) {
			size_t next = SIZE_MAX;

			if (++steps > l->nr)
				return refuse(&res->err, "pack: a delta chain loops");
			if (t[j] == 6) {
				next = l->base[j];
			} else {
				const unsigned char *id = l->ref_ids[l->base[j]];
				uint32_t k = idx_find(x, id);

				if (k != UINT32_MAX)
					next = layout_find(l, idx_offset(x, k));
				if (next == SIZE_MAX) {
					git_object_t type;
					git_oid oid;
					size_t len;

					git_oid_fromraw(&oid, id);
					if (git_odb_read_header(&len, &type, odb, &oid) < 0)
						return libgit2_reason(res);
					t[j] = (unsigned char)type;
					break;
				}
			}
			j = next;
		}
		final = t[j];
		for (size_t k = i; t[k] == 6 || t[k] == 7;) {
			size_t next = l->types[k] == 6 ? l->base[k] : SIZE_MAX;

			t[k] = final;
			if (next == SIZE_MAX)
				break;
			k = next;
		}
	}
	return 0;
}

/*
 * A blob a tree named .gitmodules or .gitattributes: from the pack, else
 * from the project's repository (repo_odb, may be NULL) as git reads it;
 * found nowhere, refused as git refuses it.
 */
static int fsck_named_blob(git_odb *odb, git_odb *repo_odb, const unsigned char *raw, int kind,
                           struct buf *err)
{
	const int mods = kind == FSCK_GITMODULES;
	git_odb_object *obj = NULL;
	git_odb *from = odb;
	git_oid id;
	int ret;

	git_oid_fromraw(&id, raw);
	if (!git_odb_exists(odb, &id))
		from = repo_odb && git_odb_exists(repo_odb, &id) ? repo_odb : NULL;
	if (!from) {
		buf_addstr(err, mods ? ".gitmodules is not in the pack or the repository "
		                       "(gitmodulesMissing)"
		                     : ".gitattributes is not in the pack or the repository "
		                       "(gitattributesMissing)");
		return BUNDLE_REFUSED;
	}
	if (git_odb_read(&obj, from, &id) < 0)
		return -EIO;
	if (git_odb_object_type(obj) != GIT_OBJECT_BLOB) {
		buf_addstr(err, mods ? ".gitmodules is not a blob (gitmodulesBlob)"
		                     : ".gitattributes is not a blob (gitattributesBlob)");
		ret = BUNDLE_REFUSED;
	} else {
		ret =
		    bundle_fsck_blob(kind, git_odb_object_data(obj), git_odb_object_size(obj), err);
	}
	git_odb_object_free(obj);
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
 * What git fsck --strict checks, for every object of the pack
 * (common/git/bundle_fsck.h): each commit, tree and tag, read in pack order (so
 * a delta's base is still in libgit2's cache), then each blob a tree names
 * .gitmodules or .gitattributes.  Blobs are known from the walk and the
 * index, and never read otherwise.
 */
static int fsck_pack(git_odb *odb, git_odb *repo_odb, const struct pack_layout *l,
                     const struct pack_idx *x, struct bundle_pack_result *res)
{
	struct bundle_fsck_blobs found = BUNDLE_FSCK_BLOBS_INIT;
	struct named_blob *named = NULL;
	uint32_t *pos = xmalloc(l->nr ? l->nr * sizeof(*pos) : 1);
	unsigned char *t = xmalloc(l->nr ? l->nr : 1);
	struct buf why = BUF_INIT;
	int ret = 0;

	for (size_t i = 0; i < l->nr; i++)
		pos[i] = UINT32_MAX;
	for (uint32_t k = 0; k < x->n; k++) {
		size_t i = layout_find(l, idx_offset(x, k));

		if (i != SIZE_MAX)
			pos[i] = k;
	}
	for (size_t i = 0; i < l->nr && !ret; i++)
		if (pos[i] == UINT32_MAX)
			ret = refuse(&res->err, "pack: object %zu is not in the index", i);
	if (!ret)
		ret = resolve_types(l, x, odb, t, res);
	for (size_t i = 0; i < l->nr && !ret; i++) {
		git_odb_object *obj = NULL;
		const char *data;
		size_t len;
		git_oid id;

		if (t[i] != GIT_OBJECT_COMMIT && t[i] != GIT_OBJECT_TREE && t[i] != GIT_OBJECT_TAG)
			continue;
		git_oid_fromraw(&id, x->ids + (size_t)pos[i] * 20);
		if (git_odb_read(&obj, odb, &id) < 0) {
			ret = libgit2_reason(res);
			break;
		}
		data = git_odb_object_data(obj);
		len = git_odb_object_size(obj);
		if (t[i] == GIT_OBJECT_COMMIT)
			ret = bundle_fsck_commit(data, len, &why);
		else if (t[i] == GIT_OBJECT_TAG)
			ret = bundle_fsck_tag(data, len, &why);
		else
			ret = bundle_fsck_tree(data, len, &found, &why);
		if (ret)
			ret = fsck_refuse(res, &id, &why);
		git_odb_object_free(obj);
	}
	/* Many trees name the same blob: check each blob and kind once. */
	named = xmalloc(found.nr ? found.nr * sizeof(*named) : 1);
	for (size_t i = 0; i < found.nr; i++) {
		memcpy(named[i].id, found.ids[i], 20);
		named[i].kind = found.kind[i];
	}
	qsort(named, found.nr, sizeof(*named), named_cmp);
	for (size_t i = 0; i < found.nr && !ret; i++) {
		if (i && !named_cmp(&named[i - 1], &named[i]))
			continue;
		if ((ret = fsck_named_blob(odb, repo_odb, named[i].id, named[i].kind, &why)) > 0) {
			git_oid id;

			git_oid_fromraw(&id, named[i].id);
			ret = fsck_refuse(res, &id, &why);
		}
	}
	free(named);
	free(pos);
	free(t);
	bundle_fsck_blobs_clear(&found);
	buf_release(&why);
	return ret;
}

/*
 * The pack the indexer wrote into dir: each of o->tips must be in it, and
 * every object pass fsck_pack().
 */
static int check_pack(git_indexer *idx, const char *dir, const struct bundle_pack_opts *o,
                      const struct pack_layout *l, git_odb *repo_odb,
                      struct bundle_pack_result *res)
{
	struct pack_idx x = {.b = BUF_INIT};
	struct buf path = BUF_INIT;
	git_odb *odb = NULL;
	git_odb_backend *be = NULL;
	int ret = 0;

	buf_addf(&path, "%s/pack-%s.idx", dir, git_indexer_name(idx));
	if (git_odb_new(&odb) < 0 || git_odb_backend_one_pack(&be, path.buf) < 0) {
		ret = -EIO;
		goto out;
	}
	if (git_odb_add_backend(odb, be, 1) < 0) {
		be->free(be);
		ret = -EIO;
		goto out;
	}
	for (size_t i = 0; i < o->nr_tips; i++) {
		git_oid id;

		if (git_oid_fromstr(&id, o->tips[i]) < 0 || !git_odb_exists(odb, &id)) {
			ret =
			    refuse(&res->err, "pack: does not hold %.64s, a ref's tip", o->tips[i]);
			break;
		}
	}
	if (!ret && !(ret = idx_load(&x, path.buf)))
		ret = fsck_pack(odb, repo_odb, l, &x, res);
out:
	git_odb_free(odb);
	buf_release(&x.b);
	buf_release(&path);
	return ret;
}

/* Let libgit2's indexer resolve every delta (bases from o->repo_dir if given). */
static int index_pack(struct pack_src *s, const struct bundle_pack_opts *o,
                      const struct pack_layout *l, struct bundle_pack_result *res)
{
	git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;
	git_indexer_progress stats = {0};
	git_repository *repo = NULL;
	git_indexer *idx = NULL;
	git_odb *odb = NULL;
	struct buf tmp = BUF_INIT;
	const char *tmp_parent = o->tmp_parent;
	int ret = 0;

	if (!tmp_parent)
		tmp_parent = getenv("TMPDIR");
	if (!tmp_parent || !*tmp_parent)
		tmp_parent = "/tmp";
	buf_addf(&tmp, "%s/aibox-pack.XXXXXX", tmp_parent);
	if (!mkdtemp(tmp.buf)) {
		ret = -errno;
		buf_release(&tmp);
		return ret;
	}
	git_libgit2_init();
	/* Small windows on its copy of the pack: what it maps stays small too. */
	git_libgit2_opts(GIT_OPT_SET_MWINDOW_SIZE, (size_t)PACK_WINDOW);
	git_libgit2_opts(GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)(8 * PACK_WINDOW));
	/* The checks read each object once: no cache, and the indexer hashed them all. */
	git_libgit2_opts(GIT_OPT_ENABLE_CACHING, 0);
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
	if (o->repo_dir &&
	    (git_repository_open_ext(&repo, o->repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	     git_repository_odb(&odb, repo) < 0)) {
		ret = -ENOENT;
		goto out;
	}
	if (git_indexer_new(&idx, tmp.buf, 0600, odb, &opts) < 0) {
		ret = -EIO;
		goto out;
	}
	/* In slices: the indexer copies what it is given. */
	for (uint64_t off = 0; off < s->len;) {
		size_t avail;
		const unsigned char *p;

		if ((ret = src_at(s, off, PACK_WINDOW, &p, &avail)) < 0)
			goto out;
		if (avail > PACK_WINDOW)
			avail = PACK_WINDOW;
		if (git_indexer_append(idx, p, avail, &stats) < 0) {
			ret = libgit2_reason(res);
			goto out;
		}
		off += avail;
	}
	if (git_indexer_commit(idx, &stats) < 0) {
		ret = libgit2_reason(res);
		goto out;
	}
	res->indexed = stats.indexed_objects;
	ret = check_pack(idx, tmp.buf, o, l, odb, res);
out:
	git_indexer_free(idx);
	git_odb_free(odb);
	git_repository_free(repo);
	git_libgit2_shutdown();
	remove_tmp(tmp.buf);
	buf_release(&tmp);
	return ret;
}

static int verify(struct pack_src *s, const struct bundle_pack_opts *o,
                  struct bundle_pack_result *res)
{
	struct pack_layout l = {NULL};
	int ret = walk_pack(s, o, res, &l);

	if (!ret)
		ret = index_pack(s, o, &l, res);
	layout_clear(&l);
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
