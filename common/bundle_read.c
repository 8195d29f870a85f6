#include "bundle_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "buf.h"
#include "err.h"
#include "banned.h"

static const char sig_v2[] = "# v2 git bundle";
static const char sig_v3[] = "# v3 git bundle";

__attribute__((format(printf, 2, 3))) static int refuse(char *reason, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, BUNDLE_REASON_MAX, fmt, ap);
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
	memset(h, 0, sizeof(*h));
}

const char *bundle_oid_format_name(enum bundle_oid_format f)
{
	return f == BUNDLE_SHA256 ? "sha256" : "sha1";
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t bundle_oid_parse(const char *s, size_t len, char *out)
{
	if (len != 40 && len != 64)
		return 0;
	for (size_t i = 0; i < len; i++) {
		int v = hexval((unsigned char)s[i]);

		if (v < 0)
			return 0;
		out[i] = "0123456789abcdef"[v];
	}
	out[len] = '\0';
	return len;
}

int bundle_refname_ok(const char *name, size_t len)
{
	size_t comp = 0; /* start of the current component */

	if (len == 4 && !memcmp(name, "HEAD", 4))
		return 1;
	if (len <= 5 || memcmp(name, "refs/", 5))
		return 0;
	if (name[len - 1] == '/' || name[len - 1] == '.')
		return 0;
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = i < len ? (unsigned char)name[i] : '/';

		if (c == '/') {
			size_t n = i - comp;

			if (n == 0)
				return 0; /* "//" */
			if (name[comp] == '.')
				return 0;
			if (n >= 5 && !memcmp(name + i - 5, ".lock", 5))
				return 0;
			comp = i + 1;
			continue;
		}
		if (c < 0x20 || c == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' ||
		    c == '?' || c == '*' || c == '[' || c == '\\')
			return 0;
		if (c == '.' && i + 1 < len && name[i + 1] == '.')
			return 0;
		if (c == '@' && i + 1 < len && name[i + 1] == '{')
			return 0;
	}
	return 1;
}

/* Whether oid (lowercase hex) is all zeros. */
static int oid_is_null(const char *oid)
{
	for (; *oid; oid++)
		if (*oid != '0')
			return 0;
	return 1;
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
			refuse(h->reason, "line %zu: object id is not %s", lineno,
			       bundle_oid_format_name(h->oid_format));
		else
			refuse(h->reason, "line %zu: not an object id", lineno);
		return 0;
	}
	if (oid_is_null(out)) {
		refuse(h->reason, "line %zu: null object id", lineno);
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
			return refuse(h->reason, "line %zu: object-format given twice", lineno);
		*seen_format = 1;
		if (vlen == 4 && !memcmp(eq + 1, "sha1", 4))
			h->oid_format = BUNDLE_SHA1;
		else if (vlen == 6 && !memcmp(eq + 1, "sha256", 6))
			h->oid_format = BUNDLE_SHA256;
		else
			return refuse(h->reason, "line %zu: unknown object format", lineno);
		return 0;
	}
	if (klen == 6 && !memcmp(s, "filter", 6))
		return refuse(h->reason, "line %zu: filtered (partial) bundles are not accepted",
		              lineno);
	if (klen > 64)
		klen = 64;
	/* The name goes into a message: keep it printable. */
	for (size_t i = 0; i < klen; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return refuse(h->reason, "line %zu: unknown capability", lineno);
	return refuse(h->reason, "line %zu: unknown capability '@%.*s'", lineno, (int)klen, s);
}

int bundle_header_parse(struct bundle_header *h, const char *data, size_t len)
{
	size_t pos = 0, lineno = 0;
	int in_caps = 0, seen_format = 0;

	bundle_header_clear(h);
	if (len > BUNDLE_HEADER_MAX)
		len = BUNDLE_HEADER_MAX; /* a header needing more is refused below */

	for (;;) {
		const char *line = data + pos, *nl;
		size_t n, avail = len - pos;

		lineno++;
		if (avail == 0) {
			if (len == BUNDLE_HEADER_MAX)
				return refuse(h->reason, "header larger than %d bytes",
				              BUNDLE_HEADER_MAX);
			if (lineno == 1)
				return refuse(h->reason, "empty file");
			return refuse(h->reason, "header ends before the blank line (truncated)");
		}
		nl = memchr(line, '\n', avail < BUNDLE_LINE_MAX + 1 ? avail : BUNDLE_LINE_MAX + 1);
		if (!nl && avail > BUNDLE_LINE_MAX)
			return refuse(h->reason, "line %zu: longer than %d bytes", lineno,
			              BUNDLE_LINE_MAX);
		n = nl ? (size_t)(nl - line) : avail;
		if (n >= 4 && !memcmp(line, "PACK", 4) && lineno > 1)
			return refuse(h->reason, "line %zu: pack starts without the blank line",
			              lineno);
		if (memchr(line, '\0', n))
			return refuse(h->reason, "line %zu: NUL byte in header", lineno);
		if (memchr(line, '\r', n))
			return refuse(h->reason, "line %zu: carriage return in header (CRLF?)",
			              lineno);
		if (!nl) {
			if (len == BUNDLE_HEADER_MAX)
				return refuse(h->reason, "header larger than %d bytes",
				              BUNDLE_HEADER_MAX);
			return refuse(h->reason, "line %zu: header ends in mid-line (truncated)",
			              lineno);
		}
		pos += n + 1;

		if (lineno == 1) {
			if (n == sizeof(sig_v2) - 1 && !memcmp(line, sig_v2, n))
				h->version = 2;
			else if (n == sizeof(sig_v3) - 1 && !memcmp(line, sig_v3, n))
				h->version = 3;
			else if (n > 14 && !memcmp(line, "# v", 3) &&
			         !memcmp(line + n - 11, " git bundle", 11))
				return refuse(h->reason, "unsupported bundle version");
			else
				return refuse(h->reason, "not a git bundle (no bundle signature)");
			in_caps = h->version == 3;
			continue;
		}
		if (n == 0)
			break; /* the blank line: the pack follows */

		if (line[0] == '@') {
			int ret;

			if (!in_caps)
				return refuse(
				    h->reason,
				    h->version == 2
				        ? "line %zu: capability in a v2 bundle"
				        : "line %zu: capability after refs or prerequisites",
				    lineno);
			if (h->version == 3 && lineno - 1 > BUNDLE_CAPS_MAX)
				return refuse(h->reason, "more than %d capabilities",
				              BUNDLE_CAPS_MAX);
			ret = parse_capability(h, line + 1, n - 1, lineno, &seen_format);
			if (ret)
				return ret;
			continue;
		}
		in_caps = 0;

		if (line[0] == '-') {
			struct bundle_prereq *p;
			size_t olen;
			char oid[BUNDLE_HEXSZ_MAX + 1];

			if (h->nr_refs)
				return refuse(h->reason, "line %zu: prerequisite after a ref",
				              lineno);
			olen = parse_line_oid(h, line + 1, n - 1, lineno, oid);
			if (!olen)
				return BUNDLE_REFUSED;
			if (h->nr_prereqs >= BUNDLE_PREREQS_MAX)
				return refuse(h->reason, "more than %d prerequisites",
				              BUNDLE_PREREQS_MAX);
			ALLOC_GROW(h->prereqs, h->nr_prereqs + 1, h->alloc_prereqs);
			p = &h->prereqs[h->nr_prereqs++];
			memcpy(p->oid, oid, sizeof(oid));
			if (1 + olen < n)
				p->comment = xstrndup(line + 2 + olen, n - olen - 2);
			else
				p->comment = xstrdup("");
			continue;
		}

		{
			struct bundle_ref *r;
			size_t olen;
			char oid[BUNDLE_HEXSZ_MAX + 1];
			const char *name;
			size_t nlen;

			olen = parse_line_oid(h, line, n, lineno, oid);
			if (!olen)
				return BUNDLE_REFUSED;
			if (olen == n || line[olen] != ' ')
				return refuse(h->reason, "line %zu: ref without a name", lineno);
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
					return refuse(h->reason,
					              "line %zu: invalid ref name '%.*s'", lineno,
					              (int)nlen, name);
				return refuse(h->reason, "line %zu: invalid ref name", lineno);
			}
			if (h->nr_refs >= BUNDLE_REFS_MAX)
				return refuse(h->reason, "more than %d refs", BUNDLE_REFS_MAX);
			for (size_t i = 0; i < h->nr_refs; i++)
				if (strlen(h->refs[i].name) == nlen &&
				    !memcmp(h->refs[i].name, name, nlen))
					return refuse(h->reason, "line %zu: ref '%.*s' given twice",
					              lineno, (int)nlen, name);
			ALLOC_GROW(h->refs, h->nr_refs + 1, h->alloc_refs);
			r = &h->refs[h->nr_refs++];
			memcpy(r->oid, oid, sizeof(oid));
			r->name = xstrndup(name, nlen);
		}
	}
	if (!h->nr_refs)
		return refuse(h->reason, "bundle has no refs");
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
				return refuse(h->reason, "unexpected ref '%s'", h->refs[i].name);
		}
		for (size_t j = 0; j < nr_refs; j++) {
			size_t i;

			for (i = 0; i < h->nr_refs; i++)
				if (!strcmp(h->refs[i].name, refs[j]))
					break;
			if (i == h->nr_refs)
				return refuse(h->reason, "missing ref '%s'", refs[j]);
		}
	}
	for (size_t i = 0; i < h->nr_prereqs; i++) {
		int found = 0;

		for (size_t j = 0; j < nr_bases && !found; j++) {
			char oid[BUNDLE_HEXSZ_MAX + 1];

			if (bundle_oid_parse(bases[j], strlen(bases[j]), oid) &&
			    !strcmp(oid, h->prereqs[i].oid))
				found = 1;
		}
		if (found)
			continue;
		if (nr_bases)
			return refuse(h->reason, "prerequisite %s is not a given base",
			              h->prereqs[i].oid);
		return refuse(h->reason, "needs prerequisite %s (no --base given)",
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
	char clean[256];
	size_t i;

	if (strstr(msg, "thin pack"))
		return refuse(res->reason, "pack: a delta's base is not in the pack "
		                           "(a thin pack: give --repo)");
	for (i = 0; msg[i] && i < sizeof(clean) - 1; i++)
		clean[i] = ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) ? ' ' : msg[i];
	clean[i] = '\0';
	return refuse(res->reason, "pack: %s", clean);
}

/* The largest object we accept; git's own limit is the address space. */
#define PACK_OBJECT_MAX ((uint64_t)4 << 30)

/*
 * Our own walk over the pack, before libgit2 sees it: the header, each
 * object's type and size, that each inflates to exactly its stated size and
 * ends where the next begins, the count, and the trailing SHA-1.  Gives a
 * plain reason for each fault (libgit2 misses a wrong size and words the
 * rest for its own developers).
 */
static int walk_pack(const unsigned char *p, size_t len, struct bundle_pack_result *res)
{
	unsigned char sum[EVP_MAX_MD_SIZE], *out = NULL;
	const size_t out_size = 64 * 1024;
	size_t pos = 12, end, *offs = NULL, nr_offs = 0, alloc_offs = 0;
	unsigned int sumlen = 0;
	z_stream z;
	int ret = 0, zinit = 0;

	if (len < 4 || memcmp(p, "PACK", 4))
		return refuse(res->reason, len < 4
		                               ? "pack: missing (the bundle ends after its header)"
		                               : "pack: no pack signature");
	if (len < 12)
		return refuse(res->reason, "pack: truncated in its header");
	res->version = be32(p + 4);
	if (res->version != 2 && res->version != 3)
		return refuse(res->reason, "pack: unsupported version %u", (unsigned)res->version);
	res->objects = be32(p + 8);
	if (len < 12 + 20)
		return refuse(res->reason, "pack: truncated (no checksum)");
	end = len - 20;

	memset(&z, 0, sizeof(z));
	if (inflateInit(&z) != Z_OK)
		return -ENOMEM;
	zinit = 1;
	out = xmalloc(out_size);
	for (uint32_t i = 0; i < res->objects; i++) {
		size_t start = pos;
		unsigned type, shift = 4;
		uint64_t size;
		unsigned char c;

		if (pos >= end) {
			ret = refuse(res->reason, "pack: ends after %u of %u objects (truncated?)",
			             (unsigned)i, (unsigned)res->objects);
			goto out;
		}
		c = p[pos++];
		type = (c >> 4) & 7;
		size = c & 15;
		while (c & 0x80) {
			if (pos >= end || shift > 60) {
				ret = refuse(res->reason, "pack: object %u: bad size", (unsigned)i);
				goto out;
			}
			c = p[pos++];
			size |= (uint64_t)(c & 0x7f) << shift;
			shift += 7;
		}
		if (size > PACK_OBJECT_MAX) {
			ret = refuse(res->reason, "pack: object %u: larger than %llu bytes",
			             (unsigned)i, (unsigned long long)PACK_OBJECT_MAX);
			goto out;
		}
		if (type == 0 || type == 5) {
			ret = refuse(res->reason, "pack: object %u: unknown type %u", (unsigned)i,
			             type);
			goto out;
		}
		if (type == 6) { /* OFS_DELTA: the base is this many bytes back */
			uint64_t back;
			size_t lo = 0, hi = nr_offs;

			if (pos >= end)
				goto trunc;
			c = p[pos++];
			back = c & 0x7f;
			while (c & 0x80) {
				if (pos >= end || back > (UINT64_MAX >> 8))
					goto trunc;
				c = p[pos++];
				back = ((back + 1) << 7) | (c & 0x7f);
			}
			if (back == 0 || back > start - 12) {
				ret = refuse(res->reason,
				             "pack: object %u: delta base out of the pack",
				             (unsigned)i);
				goto out;
			}
			while (lo < hi) { /* the base must be where an object starts */
				size_t mid = lo + (hi - lo) / 2;

				if (offs[mid] < start - back)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == nr_offs || offs[lo] != start - back) {
				ret = refuse(res->reason,
				             "pack: object %u: delta base is not an object",
				             (unsigned)i);
				goto out;
			}
		} else if (type == 7) { /* REF_DELTA: the base's id */
			if (end - pos < 20)
				goto trunc;
			pos += 20;
		}
		ALLOC_GROW(offs, nr_offs + 1, alloc_offs);
		offs[nr_offs++] = start;

		/* Inflate, counting what comes out. */
		{
			uint64_t got = 0;
			int zr;

			inflateReset(&z);
			z.next_in = (unsigned char *)(uintptr_t)(p + pos);
			z.avail_in = end - pos > UINT32_MAX ? UINT32_MAX : (uInt)(end - pos);
			do {
				z.next_out = out;
				z.avail_out = out_size;
				zr = inflate(&z, Z_NO_FLUSH);
				got += out_size - z.avail_out;
				if (got > size)
					break;
			} while (zr == Z_OK && (z.avail_out == 0 || z.avail_in > 0));
			if (got > size || (zr == Z_STREAM_END && got != size)) {
				ret = refuse(res->reason,
				             "pack: object %u: inflates to %s%llu bytes, not %llu",
				             (unsigned)i, got > size ? "more than " : "",
				             (unsigned long long)(got > size ? size : got),
				             (unsigned long long)size);
				goto out;
			}
			if (zr != Z_STREAM_END) {
				if (zr == Z_BUF_ERROR || (zr == Z_OK && z.avail_in == 0))
					goto trunc_obj;
				ret = refuse(res->reason, "pack: object %u does not inflate (%s)",
				             (unsigned)i, z.msg ? z.msg : "zlib error");
				goto out;
			}
			pos += (size_t)((const unsigned char *)z.next_in - (p + pos));
			continue;
		trunc_obj:
			ret =
			    refuse(res->reason, "pack: object %u: its data ends early (truncated?)",
			           (unsigned)i);
			goto out;
		}
	trunc:
		ret = refuse(res->reason, "pack: object %u: truncated", (unsigned)i);
		goto out;
	}
	if (pos != end) {
		ret = refuse(res->reason,
		             "pack: %zu bytes after the last of %u objects (wrong object count?)",
		             end - pos, (unsigned)res->objects);
		goto out;
	}
	if (!EVP_Digest(p, end, sum, &sumlen, EVP_sha1(), NULL) || sumlen != 20) {
		ret = -EIO;
		goto out;
	}
	if (memcmp(sum, p + end, 20)) {
		ret = refuse(res->reason, "pack: checksum mismatch");
		goto out;
	}
	for (int k = 0; k < 20; k++) {
		res->checksum[2 * k] = "0123456789abcdef"[sum[k] >> 4];
		res->checksum[2 * k + 1] = "0123456789abcdef"[sum[k] & 15];
	}
	res->checksum[40] = '\0';
out:
	if (zinit)
		inflateEnd(&z);
	free(out);
	free(offs);
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

/* Let libgit2's indexer resolve every delta (bases from repo_dir if given). */
static int index_pack(const unsigned char *p, size_t len, const char *repo_dir,
                      const char *tmp_parent, struct bundle_pack_result *res)
{
	git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;
	git_indexer_progress stats = {0};
	git_repository *repo = NULL;
	git_indexer *idx = NULL;
	git_odb *odb = NULL;
	struct buf tmp = BUF_INIT;
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
	if (repo_dir &&
	    (git_repository_open_ext(&repo, repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	     git_repository_odb(&odb, repo) < 0)) {
		ret = -ENOENT;
		goto out;
	}
	if (git_indexer_new(&idx, tmp.buf, 0600, odb, &opts) < 0) {
		ret = -EIO;
		goto out;
	}
	/* In slices: the indexer copies what it is given. */
	for (size_t off = 0; off < len;) {
		size_t n = len - off > (1 << 20) ? (1 << 20) : len - off;

		if (git_indexer_append(idx, p + off, n, &stats) < 0) {
			ret = libgit2_reason(res);
			goto out;
		}
		off += n;
	}
	if (git_indexer_commit(idx, &stats) < 0) {
		ret = libgit2_reason(res);
		goto out;
	}
	res->indexed = stats.indexed_objects;
out:
	git_indexer_free(idx);
	git_odb_free(odb);
	git_repository_free(repo);
	git_libgit2_shutdown();
	remove_tmp(tmp.buf);
	buf_release(&tmp);
	return ret;
}

int bundle_pack_verify_buf(const void *data, size_t len, const char *repo_dir,
                           const char *tmp_parent, struct bundle_pack_result *res)
{
	int ret;

	memset(res, 0, sizeof(*res));
	ret = walk_pack(data, len, res);
	if (ret)
		return ret;
	return index_pack(data, len, repo_dir, tmp_parent, res);
}

int bundle_pack_verify_fd(int fd, const char *repo_dir, const char *tmp_parent, uint64_t max_bytes,
                          struct bundle_pack_result *res)
{
	struct stat st;
	off_t here;
	int ret;

	memset(res, 0, sizeof(*res));
	here = lseek(fd, 0, SEEK_CUR);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && here >= 0 && st.st_size >= here) {
		/* A file: map it, whatever its size, rather than copy it. */
		long page = sysconf(_SC_PAGESIZE);
		off_t base = here - here % page;
		uint64_t len = (uint64_t)(st.st_size - here);
		void *map;

		if (len > max_bytes)
			return refuse(res->reason, "pack: larger than %llu bytes",
			              (unsigned long long)max_bytes);
		if (len == 0)
			return bundle_pack_verify_buf("", 0, repo_dir, tmp_parent, res);
		map = mmap(NULL, (size_t)(st.st_size - base), PROT_READ, MAP_PRIVATE, fd, base);
		if (map == MAP_FAILED)
			return -errno;
		ret = bundle_pack_verify_buf((const char *)map + (here - base), (size_t)len,
		                             repo_dir, tmp_parent, res);
		munmap(map, (size_t)(st.st_size - base));
		return ret;
	} else {
		struct buf b = BUF_INIT;
		ssize_t n =
		    buf_read_fd(&b, fd, max_bytes > SIZE_MAX ? SIZE_MAX : (size_t)max_bytes);

		if (n == -EFBIG)
			ret = refuse(res->reason, "pack: larger than %llu bytes",
			             (unsigned long long)max_bytes);
		else if (n < 0)
			ret = (int)n;
		else
			ret = bundle_pack_verify_buf(b.buf, b.len, repo_dir, tmp_parent, res);
		buf_release(&b);
		return ret;
	}
}
