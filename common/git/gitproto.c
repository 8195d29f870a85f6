/* The pkt-line format and the receive-pack command list: see gitproto.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "git/gitproto.h"
#include "base/hex.h"
#include "base/banned.h"

int pkt_parse(const char *data, size_t len, enum pkt_kind *kind, const char **payload, size_t *plen)
{
	size_t n = 0;

	if (len < 4)
		return 0;
	for (int i = 0; i < 4; i++) {
		int v = hex_digit((unsigned char)data[i]);

		if (v < 0)
			return -EBADMSG;
		n = n * 16 + (size_t)v;
	}
	*payload = NULL;
	*plen = 0;
	switch (n) {
	case 0:
		*kind = PKT_FLUSH;
		return 4;
	case 1:
		*kind = PKT_DELIM;
		return 4;
	case 2:
		*kind = PKT_RESPONSE_END;
		return 4;
	case 3:
	case 4:
		return -EBADMSG;
	}
	if (n > PKT_MAX)
		return -EBADMSG;
	if (len < n)
		return 0;
	*kind = PKT_DATA;
	*payload = data + 4;
	*plen = n - 4;
	return (int)n;
}

int pkt_stream_ok(const char *data, size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		enum pkt_kind kind;
		const char *p;
		size_t n;
		int r = pkt_parse(data + pos, len - pos, &kind, &p, &n);

		if (r <= 0)
			return 0;
		pos += (size_t)r;
	}
	return len > 0;
}

void pkt_add(struct buf *out, const void *data, size_t n)
{
	char hdr[5];

	if (n > PKT_MAX - 4)
		n = PKT_MAX - 4;
	snprintf(hdr, sizeof(hdr), "%04zx", n + 4);
	buf_add(out, hdr, 4);
	buf_add(out, data, n);
}

void pkt_addf(struct buf *out, const char *fmt, ...)
{
	struct buf tmp = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&tmp, fmt, ap);
	va_end(ap);
	pkt_add(out, tmp.buf, tmp.len);
	buf_release(&tmp);
}

void pkt_flush(struct buf *out)
{
	buf_add(out, "0000", 4);
}

void pkt_add_sideband(struct buf *out, int band, const void *data, size_t n, size_t max)
{
	const char *p = data;
	size_t room = max - 5;

	while (n) {
		size_t k = n < room ? n : room;
		char hdr[6];

		snprintf(hdr, sizeof(hdr), "%04zx%c", k + 5, band);
		buf_add(out, hdr, 5);
		buf_add(out, p, k);
		p += k;
		n -= k;
	}
}

int oid_hex_valid(const char *s, size_t n)
{
	return OID_HEX_LEN_OK(n) && hex_is_lower(s, n);
}

int advert_ref_parse(const char *p, size_t n, char *oid, const char **name, size_t *name_len)
{
	const char *sp = memchr(p, ' ', n), *end;
	size_t olen;

	if (!sp)
		return -EBADMSG;
	olen = (size_t)(sp - p);
	if (!oid_hex_valid(p, olen))
		return -EBADMSG;
	end = memchr(sp + 1, '\0', n - olen - 1);
	if (!end)
		end = p + n - (n && p[n - 1] == '\n');
	if (end <= sp + 1)
		return -EBADMSG;
	memcpy(oid, p, olen);
	oid[olen] = '\0';
	*name = sp + 1;
	*name_len = (size_t)(end - sp - 1);
	return 0;
}

int oid_is_null(const char *oid)
{
	if (!*oid)
		return 0;
	for (; *oid; oid++)
		if (*oid != '0')
			return 0;
	return 1;
}

/* "<old> <new> <ref>" in line[0..n) (no NUL, newline already dropped). */
static int parse_command(struct push_commands *pc, const char *line, size_t n)
{
	const char *sp1, *sp2;
	struct push_cmd *c;
	size_t olen, nlen, rlen;

	sp1 = memchr(line, ' ', n);
	if (!sp1)
		return -EBADMSG;
	olen = (size_t)(sp1 - line);
	sp2 = memchr(sp1 + 1, ' ', n - olen - 1);
	if (!sp2)
		return -EBADMSG;
	nlen = (size_t)(sp2 - sp1 - 1);
	rlen = n - olen - nlen - 2;
	if (!oid_hex_valid(line, olen) || nlen != olen || !oid_hex_valid(sp1 + 1, nlen) || !rlen)
		return -EBADMSG;
	if (memchr(sp2 + 1, '\0', rlen))
		return -EBADMSG;
	if (pc->nr >= PUSH_REFS_MAX)
		return -EFBIG;
	ALLOC_GROW(pc->cmds, pc->nr + 1, pc->alloc);
	c = &pc->cmds[pc->nr++];
	memcpy(c->old_oid, line, olen);
	c->old_oid[olen] = '\0';
	memcpy(c->new_oid, sp1 + 1, nlen);
	c->new_oid[nlen] = '\0';
	c->ref = xstrndup(sp2 + 1, rlen);
	return 0;
}

int push_commands_parse(struct push_commands *pc, const char *data, size_t len)
{
	size_t pos = 0;

	for (;;) {
		enum pkt_kind kind;
		const char *p;
		size_t n;
		int r;

		if (pos >= PUSH_COMMANDS_MAX)
			return -EFBIG;
		r = pkt_parse(data + pos, len - pos, &kind, &p, &n);
		if (r < 0)
			return r;
		if (r == 0)
			return len - pos >= PKT_MAX || len >= PUSH_COMMANDS_MAX ? -EFBIG : -EAGAIN;
		if (pos + (size_t)r > PUSH_COMMANDS_MAX)
			return -EFBIG;
		pos += (size_t)r;
		if (kind == PKT_FLUSH) {
			if (!pc->nr)
				return -ENODATA;
			pc->consumed = pos;
			if (!pc->caps)
				pc->caps = xstrdup("");
			return 0;
		}
		if (kind != PKT_DATA)
			return -EBADMSG;
		if (n && p[n - 1] == '\n')
			n--;
		if (!pc->nr && n > 8 && !memcmp(p, "shallow ", 8)) {
			if (!oid_hex_valid(p + 8, n - 8))
				return -EBADMSG;
			continue;
		}
		if (!pc->nr) {
			const char *nul = memchr(p, '\0', n);

			if (nul) {
				size_t clen = n - (size_t)(nul - p) - 1;

				if (memchr(nul + 1, '\0', clen))
					return -EBADMSG;
				pc->caps = xstrndup(nul + 1, clen);
				n = (size_t)(nul - p);
			}
		}
		r = parse_command(pc, p, n);
		if (r < 0)
			return r;
	}
}

void push_commands_release(struct push_commands *pc)
{
	for (size_t i = 0; i < pc->nr; i++)
		free(pc->cmds[i].ref);
	free(pc->cmds);
	free(pc->caps);
	pc->cmds = NULL;
	pc->nr = pc->alloc = 0;
	pc->caps = NULL;
	pc->consumed = 0;
}

/* What git's ctype calls space (ctype.c sane_ctype): the separators of a capability list. */
static int git_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int caps_have(const char *caps, const char *cap)
{
	size_t n = strlen(cap);
	const char *p = caps;

	if (!n)
		return 0;
	while (*p) {
		const char *found = strstr(p, cap);

		if (!found)
			return 0;
		if ((found == caps || git_space(found[-1])) &&
		    (!found[n] || git_space(found[n]) || found[n] == '='))
			return 1;
		p = found + 1;
	}
	return 0;
}

int caps_printable(const char *caps)
{
	for (const char *p = caps; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			return 0;
	return 1;
}

void caps_drop(const char *caps, const char *name, struct buf *out)
{
	size_t n = strlen(name);
	int first = 1;

	for (const char *p = caps; *p;) {
		const char *end = p;
		size_t k;

		while (*end && !git_space(*end))
			end++;
		k = (size_t)(end - p);
		if (k && !(k >= n && !memcmp(p, name, n) && (k == n || p[n] == '='))) {
			if (!first)
				buf_addch(out, ' ');
			buf_add(out, p, k);
			first = 0;
		}
		p = *end ? end + 1 : end;
	}
}

/*
 * Whether the data pkt-line p[0..n) reads as the line `s` to git's packet
 * reader with PACKET_READ_CHOMP_NEWLINE: one trailing LF dropped, then read
 * as a C string (up to a NUL).
 */
static int line_is(const char *p, size_t n, const char *s)
{
	const char *nul = memchr(p, '\0', n);
	size_t len = nul ? (size_t)(nul - p) : n && p[n - 1] == '\n' ? n - 1 : n;

	return len == strlen(s) && !memcmp(p, s, len);
}

int advert_find_caps(const char *data, size_t len, const char *service, size_t *at, size_t *pktlen)
{
	enum { SERVICE, HEADER, VERSION, FIRST_REF } state = SERVICE;
	size_t pos = 0;
	struct buf want = BUF_INIT;
	int ret = 0;

	buf_addf(&want, "# service=%s", service);
	while (!ret) {
		enum pkt_kind kind;
		const char *p;
		size_t n;
		int r = pkt_parse(data + pos, len - pos, &kind, &p, &n);

		if (r <= 0) {
			ret = r;
			break;
		}
		switch (state) {
		case SERVICE:
			if (kind != PKT_DATA || !line_is(p, n, want.buf))
				ret = -EBADMSG;
			state = HEADER;
			break;
		case HEADER:
			/* remote-curl skips any lines up to the end of the header. */
			if (kind != PKT_DATA)
				state = VERSION;
			break;
		case VERSION:
			if (kind == PKT_DATA && n >= 8 && !memcmp(p, "version ", 8)) {
				if (!line_is(p, n, "version 1"))
					ret = -EBADMSG; /* git dies, or speaks v2 */
				state = FIRST_REF;
				break;
			}
			/* No version line (protocol v0): this is the first ref's. */
			__attribute__((fallthrough));
		case FIRST_REF:
			if (kind != PKT_DATA) {
				ret = 2;
				break;
			}
			*at = pos;
			*pktlen = (size_t)r;
			ret = 1;
			break;
		}
		pos += (size_t)r;
	}
	buf_release(&want);
	return ret;
}

void advert_caps_rewrite(const char *p, size_t n, const char *name, struct buf *out)
{
	size_t len = n && p[n - 1] == '\n' ? n - 1 : n;
	const char *nul = memchr(p, '\0', len), *caps_end;
	struct buf line = BUF_INIT;
	char *caps;

	if (!nul) {
		pkt_add(out, p, n);
		return;
	}
	caps_end = memchr(nul + 1, '\0', (size_t)(p + len - nul - 1));
	if (!caps_end)
		caps_end = p + len;
	caps = xstrndup(nul + 1, (size_t)(caps_end - nul - 1));
	buf_add(&line, p, (size_t)(nul + 1 - p));
	caps_drop(caps, name, &line);
	if (len < n)
		buf_addch(&line, '\n');
	pkt_add(out, line.buf, line.len);
	free(caps);
	buf_release(&line);
}

int refname_ok(const char *name)
{
	size_t n = strlen(name);
	const char *comp = name;

	if (!n || n > 1024 || !strcmp(name, "@"))
		return 0;
	if (name[n - 1] == '/' || name[n - 1] == '.')
		return 0;
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c <= ' ' || c >= 0x7f || strchr("~^:?*[\\", c))
			return 0;
		if (c == '.' && p[1] == '.')
			return 0;
		if (c == '@' && p[1] == '{')
			return 0;
		if (c == '/' && (p[1] == '/' || p == name))
			return 0;
		if (p == comp && c == '.')
			return 0;
		if (c == '/' || !p[1]) {
			const char *end = c == '/' ? p : p + 1;

			if (end - comp >= 5 && !memcmp(end - 5, ".lock", 5))
				return 0;
			comp = p + 1;
		}
	}
	return 1;
}

int branch_pattern_match(const char *pattern, const char *branch)
{
	const char *p = pattern, *s = branch;

	while (*p) {
		if (*p == '*') {
			/* '*' takes zero or more bytes of this component. */
			p++;
			for (;;) {
				if (branch_pattern_match(p, s))
					return 1;
				if (!*s || *s == '/')
					return 0;
				s++;
			}
		}
		if (!*s)
			return 0;
		if (*p == '?') {
			if (*s == '/')
				return 0;
		} else if (*p != *s) {
			return 0;
		}
		p++;
		s++;
	}
	return !*s;
}

int branch_pattern_ok(const char *pattern)
{
	struct buf b = BUF_INIT;
	int ok;

	for (const char *p = pattern; *p; p++)
		buf_addch(&b, *p == '*' || *p == '?' ? 'x' : *p);
	ok = b.len && b.len <= BRANCH_PATTERN_MAX && strncmp(pattern, "refs/", 5) &&
	     pattern[0] != '-' && strcmp(pattern, "HEAD") && refname_ok(b.buf);
	buf_release(&b);
	return ok;
}
