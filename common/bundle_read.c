#include "bundle_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
		if (n == 40 || n == 64)
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
			if (n > BUNDLE_LINE_MAX)
				return refuse(h->reason, "line %zu: longer than %d bytes", lineno,
					      BUNDLE_LINE_MAX);
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
				return refuse(h->reason,
					      h->version == 2 ?
						      "line %zu: capability in a v2 bundle" :
						      "line %zu: capability after refs or prerequisites",
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
				return refuse(h->reason, "line %zu: prerequisite after a ref", lineno);
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
					return refuse(h->reason, "line %zu: invalid ref name '%.*s'",
						      lineno, (int)nlen, name);
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

static void remove_tree(const char *dir)
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

struct pack_state {
	git_indexer *idx;
	git_indexer_progress stats;
	unsigned char head[12];
	size_t nhead;
	uint64_t total;
	struct bundle_pack_result *res;
	int failed;
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int libgit2_reason(struct bundle_pack_result *res, const char *what)
{
	const git_error *e = git_error_last();
	const char *msg = e && e->message ? e->message : "unknown error";
	char clean[256];
	size_t i;

	for (i = 0; msg[i] && i < sizeof(clean) - 1; i++)
		clean[i] = ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) ? ' ' : msg[i];
	clean[i] = '\0';
	return refuse(res->reason, "pack: %s: %s", what, clean);
}

/* Check the pack's 12-byte header ourselves, for a plain reason. */
static int check_pack_head(struct pack_state *st)
{
	const unsigned char *p = st->head;

	if (memcmp(p, "PACK", 4))
		return refuse(st->res->reason, "pack: no pack signature");
	st->res->version = be32(p + 4);
	if (st->res->version != 2 && st->res->version != 3)
		return refuse(st->res->reason, "pack: unsupported version %u",
			      (unsigned)st->res->version);
	st->res->objects = be32(p + 8);
	return 0;
}

static int pack_feed(struct pack_state *st, const unsigned char *data, size_t len)
{
	if (st->failed)
		return BUNDLE_REFUSED;
	if (st->nhead < sizeof(st->head)) {
		size_t take = sizeof(st->head) - st->nhead;

		if (take > len)
			take = len;
		memcpy(st->head + st->nhead, data, take);
		st->nhead += take;
		if (st->nhead == sizeof(st->head) && check_pack_head(st)) {
			st->failed = 1;
			return BUNDLE_REFUSED;
		}
	}
	st->total += len;
	if (git_indexer_append(st->idx, data, len, &st->stats) < 0) {
		st->failed = 1;
		return libgit2_reason(st->res, "bad data");
	}
	return 0;
}

static int pack_finish(struct pack_state *st)
{
	struct bundle_pack_result *res = st->res;
	const git_oid *sum;

	if (st->failed)
		return BUNDLE_REFUSED;
	if (st->nhead < sizeof(st->head))
		return refuse(res->reason, "pack: truncated (%zu bytes)", st->nhead);
	/* Each object takes at least 2 bytes, the trailer 20: a claim beyond is a lie. */
	if ((uint64_t)res->objects > (st->total - 12) / 2)
		return refuse(res->reason, "pack: claims %u objects in %llu bytes",
			      (unsigned)res->objects, (unsigned long long)st->total);
	if (git_indexer_commit(st->idx, &st->stats) < 0) {
		res->indexed = st->stats.indexed_objects;
		return libgit2_reason(res, "rejected");
	}
	res->indexed = st->stats.indexed_objects;
	if (res->indexed != res->objects)
		return refuse(res->reason, "pack: %u objects indexed, %u claimed",
			      (unsigned)res->indexed, (unsigned)res->objects);
	sum = git_indexer_hash(st->idx);
	if (sum)
		git_oid_tostr(res->checksum, sizeof(res->checksum), sum);
	return 0;
}

static int make_tmpdir(const char *parent, struct buf *dir)
{
	if (!parent)
		parent = getenv("TMPDIR");
	if (!parent || !*parent)
		parent = "/tmp";
	buf_addf(dir, "%s/aibox-pack.XXXXXX", parent);
	if (!mkdtemp(dir->buf))
		return -errno;
	return 0;
}

/* Open the indexer, with the odb of repo_dir for thin-pack bases. */
static int pack_start(struct pack_state *st, const char *repo_dir, const char *tmp,
		      git_repository **repo, git_odb **odb)
{
	git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;

	git_libgit2_init();
	if (repo_dir) {
		if (git_repository_open_ext(repo, repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) <
			    0 ||
		    git_repository_odb(odb, *repo) < 0)
			return -ENOENT;
	}
	if (git_indexer_new(&st->idx, tmp, 0600, *odb, &opts) < 0)
		return -EIO;
	return 0;
}

static void pack_end(struct pack_state *st, git_repository *repo, git_odb *odb)
{
	if (st->idx)
		git_indexer_free(st->idx);
	git_odb_free(odb);
	git_repository_free(repo);
	git_libgit2_shutdown();
}

int bundle_pack_verify_fd(int fd, const char *repo_dir, const char *tmp_parent,
			  uint64_t max_bytes, struct bundle_pack_result *res)
{
	struct pack_state st = { 0 };
	struct buf tmp = BUF_INIT;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	unsigned char *chunk = NULL;
	const size_t chunk_size = 1 << 20;
	int ret;

	memset(res, 0, sizeof(*res));
	st.res = res;
	ret = make_tmpdir(tmp_parent, &tmp);
	if (ret < 0)
		goto out_notmp;
	ret = pack_start(&st, repo_dir, tmp.buf, &repo, &odb);
	if (ret < 0)
		goto out;
	chunk = xmalloc(chunk_size);
	for (;;) {
		ssize_t n = read(fd, chunk, chunk_size);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		if (st.total + (uint64_t)n > max_bytes) {
			ret = refuse(res->reason, "pack: larger than %llu bytes",
				     (unsigned long long)max_bytes);
			goto out;
		}
		ret = pack_feed(&st, chunk, (size_t)n);
		if (ret)
			goto out;
	}
	ret = pack_finish(&st);
out:
	pack_end(&st, repo, odb);
	remove_tree(tmp.buf);
out_notmp:
	free(chunk);
	buf_release(&tmp);
	return ret;
}

int bundle_pack_verify_buf(const void *data, size_t len, const char *repo_dir,
			   const char *tmp_parent, struct bundle_pack_result *res)
{
	struct pack_state st = { 0 };
	struct buf tmp = BUF_INIT;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	int ret;

	memset(res, 0, sizeof(*res));
	st.res = res;
	ret = make_tmpdir(tmp_parent, &tmp);
	if (ret < 0) {
		buf_release(&tmp);
		return ret;
	}
	ret = pack_start(&st, repo_dir, tmp.buf, &repo, &odb);
	if (ret == 0 && len)
		ret = pack_feed(&st, data, len);
	if (ret == 0)
		ret = pack_finish(&st);
	pack_end(&st, repo, odb);
	remove_tree(tmp.buf);
	buf_release(&tmp);
	return ret;
}
