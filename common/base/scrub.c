/* A secret's spellings in text that came back from elsewhere: see scrub.h. */
#include "base/scrub.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/hex.h"
#include "base/banned.h"

/* One byte that text spells where it starts (c), and in how many bytes (len). */
struct spelling {
	unsigned char c, len;
};

#define SPELLINGS_AT_MAX 3

/*
 * HTML5's named character references for printable ASCII bytes (the
 * standard's table, every name of each), ';' ended; the first eight are
 * also read without it, as browsers read those (the "legacy" names).
 */
static const struct {
	const char *name;
	char c;
} html_named[] = {
    {"amp", '&'},          {"AMP", '&'},      {"lt", '<'},     {"LT", '<'},
    {"gt", '>'},           {"GT", '>'},       {"quot", '"'},   {"QUOT", '"'},
    {"excl", '!'},         {"num", '#'},      {"dollar", '$'}, {"percnt", '%'},
    {"apos", '\''},        {"lpar", '('},     {"rpar", ')'},   {"ast", '*'},
    {"midast", '*'},       {"plus", '+'},     {"comma", ','},  {"period", '.'},
    {"sol", '/'},          {"colon", ':'},    {"semi", ';'},   {"equals", '='},
    {"quest", '?'},        {"commat", '@'},   {"lsqb", '['},   {"lbrack", '['},
    {"bsol", '\\'},        {"rsqb", ']'},     {"rbrack", ']'}, {"Hat", '^'},
    {"lowbar", '_'},       {"UnderBar", '_'}, {"grave", '`'},  {"DiacriticalGrave", '`'},
    {"lcub", '{'},         {"lbrace", '{'},   {"verbar", '|'}, {"vert", '|'},
    {"VerticalLine", '|'}, {"rcub", '}'},     {"rbrace", '}'},
};
#define HTML_LEGACY_NAMES 8

/* The most digits of a numeric reference read (leading zeros included). */
#define HTML_DIGITS_MAX 7

/*
 * The byte an HTML character reference at p[0..len) (p[0] == '&') stands
 * for, into *c, and its length without a ';' that may end it, or 0 when
 * there is none; *semi is set when a ';' ends it, and the reference may
 * also be read as taking it (*semi == 2: it must).  Numeric: "&#" and 1 to
 * HTML_DIGITS_MAX decimal digits, or "&#x" or "&#X" and as many hex digits
 * (any case), the ';' optional (a browser reads "&#43" too); a value past
 * 255 is no byte.  Named: a name of html_named[] and ';', or one of its
 * legacy names alone.
 */
static size_t html_reference(const char *p, size_t len, unsigned char *c, int *semi)
{
	size_t at, digits = 0;
	unsigned long v = 0;

	*semi = 0;
	if (len >= 3 && p[1] == '#') {
		int hex = p[2] == 'x' || p[2] == 'X';

		for (at = hex ? 3 : 2; at < len && digits <= HTML_DIGITS_MAX; at++, digits++) {
			unsigned char d = (unsigned char)p[at], l = d | 0x20;

			if (d >= '0' && d <= '9')
				v = v * (hex ? 16 : 10) + (d - '0');
			else if (hex && l >= 'a' && l <= 'f')
				v = v * 16 + (l - 'a' + 10);
			else
				break;
		}
		if (!digits || digits > HTML_DIGITS_MAX || v > 255)
			return 0;
		*c = (unsigned char)v;
		*semi = at < len && p[at] == ';';
		return at;
	}
	for (size_t i = 0; i < ARRAY_SIZE(html_named); i++) {
		size_t n = strlen(html_named[i].name);

		if (len < 1 + n || memcmp(p + 1, html_named[i].name, n))
			continue;
		if (len >= 2 + n && p[1 + n] == ';')
			*semi = i < HTML_LEGACY_NAMES ? 1 : 2;
		else if (i >= HTML_LEGACY_NAMES)
			continue;
		*c = (unsigned char)html_named[i].c;
		return 1 + n;
	}
	return 0;
}

/*
 * Every byte that p[0..len) (len >= 1) spells from its start, into d: the
 * byte itself, and the byte an escape starting there decodes to (one kind
 * of escape at most, set by its first byte; '+' is a space too, and a
 * space '+'; an HTML reference with an optional ';' is read with it and
 * without).  How many.
 */
static int spellings_at(const char *p, size_t len, struct spelling d[SPELLINGS_AT_MAX])
{
	unsigned char x;
	size_t n;
	int nd = 0, semi;

	d[nd++] = (struct spelling){(unsigned char)p[0], 1};
	if (p[0] == '+' || p[0] == ' ')
		d[nd++] = (struct spelling){p[0] == '+' ? ' ' : '+', 1};
	else if (p[0] == '%' && len >= 3 && hex_decode(&x, p + 1, 1) == 0)
		d[nd++] = (struct spelling){x, 3};
	else if (p[0] == '\\' && len >= 2 && (p[1] == '/' || p[1] == '"' || p[1] == '\\'))
		d[nd++] = (struct spelling){(unsigned char)p[1], 2};
	else if (p[0] == '\\' && len >= 6 && !memcmp(p, "\\u00", 4) &&
	         hex_decode(&x, p + 4, 1) == 0)
		d[nd++] = (struct spelling){x, 6};
	else if (p[0] == '&' && (n = html_reference(p, len, &x, &semi)) > 0) {
		/* With an optional ';' there, both: "&amp;" may be '&' or "&amp" and ';'. */
		if (semi != 2)
			d[nd++] = (struct spelling){x, (unsigned char)n};
		if (semi)
			d[nd++] = (struct spelling){x, (unsigned char)(n + 1)};
	}
	return nd;
}

/*
 * Whether p[0..m) (the text's last m bytes, m < SCRUB_SPELLING_MAX; p[0]
 * '%', '\\' or '&') may begin a spelling of c that bytes after it would
 * complete, or make longer (an HTML reference's optional ';').
 */
static int may_spell_more(const char *p, size_t m, unsigned char c)
{
	static const char hexd[] = "0123456789abcdef";

	if (p[0] == '%')
		return m == 1 || (m == 2 && (p[1] | 0x20) == hexd[c >> 4]);
	if (p[0] == '\\') {
		if (m <= 4)
			return !memcmp(p, "\\u00", m);
		return m == 5 && !memcmp(p, "\\u00", 4) && (p[4] | 0x20) == hexd[c >> 4];
	}
	if (m == 1)
		return 1;
	if (p[1] == '#') {
		int hex = m > 2 && (p[2] == 'x' || p[2] == 'X');
		size_t at = hex ? 3 : 2, digits = m - at;
		unsigned long v = 0, base = hex ? 16 : 10, scale = 1;

		for (size_t i = at; i < m; i++) {
			unsigned char d = (unsigned char)p[i], l = d | 0x20;

			if (d >= '0' && d <= '9')
				v = v * base + (d - '0');
			else if (hex && l >= 'a' && l <= 'f')
				v = v * base + (l - 'a' + 10);
			else
				return 0;
		}
		/* More digits, up to HTML_DIGITS_MAX, or a ';', may make c of it. */
		for (size_t j = 0; digits + j <= HTML_DIGITS_MAX && v * scale <= 255; j++) {
			if (c >= v * scale && c < (v + 1) * scale)
				return 1;
			scale *= base;
		}
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(html_named); i++) {
		size_t n = strlen(html_named[i].name);

		if ((unsigned char)html_named[i].c == c && m - 1 <= n &&
		    !memcmp(p + 1, html_named[i].name, m - 1))
			return 1;
	}
	return 0;
}

/* The escapes' first bytes: where a spelling of any byte may start. */
static int escape_start(char c)
{
	return c == '%' || c == '\\' || c == '&';
}

/*
 * Where the runs of one form s[0..n) (n >= 1) are, in p[0..len), read once
 * from left to right: at each place, for each k, the earliest start of a
 * spelling of s[0..k) that ends there.  Spellings are at most
 * SCRUB_SPELLING_MAX bytes, so only the next SCRUB_SPELLING_MAX places can
 * be reached from one: a ring of that many + 1 slots holds them.  Each place
 * costs at most (n + 1) * SPELLINGS_AT_MAX steps; a run found ends at its
 * earliest start, so the runs cover every match.  The ring (out's, kept
 * from call to call) is zeroed once, when made, and left zeroed: each piece
 * of an answer costs its own bytes, not a ring as long as a token (a JWT is
 * kilobytes) cleared again.  Returns where scrub_find() says to cut for
 * this form.
 */
static size_t find_form(const unsigned char *s, size_t n, size_t form, const char *p, size_t len,
                        struct scrub_runs *out)
{
	enum { R = SCRUB_SPELLING_MAX + 1 };
	/* [k * R + slot]: 1 + the earliest start of k of s's bytes ending there; 0: none. */
	size_t *start;
	size_t *ks; /* [slot * n + j]: the k set in a slot */
	size_t nks[R] = {0}, live = 0, cut = len;
	/* The bytes a spelling of s[0] may start with: itself, or an escape's first byte. */
	unsigned char may_start[256] = {['%'] = 1, ['\\'] = 1, ['&'] = 1};

	if (out->ring_n < n) {
		free(out->start);
		free(out->ks);
		out->start = xcalloc(R * n, sizeof(*out->start));
		out->ks = xmalloc(R * n * sizeof(*out->ks));
		out->ring_n = n;
	}
	start = out->start;
	ks = out->ks;
	may_start[s[0]] = 1;
	if (s[0] == ' ' || s[0] == '+')
		may_start[s[0] == ' ' ? '+' : ' '] = 1;
	for (size_t i = 0; i < len; i++) {
		size_t slot, *kl;
		struct spelling d[SPELLINGS_AT_MAX];
		int nd, tail;

		if (!live) {
			/* Nothing under way: on to where a match may start. */
			while (i < len && !may_start[(unsigned char)p[i]])
				i++;
			if (i == len)
				break;
		}
		slot = i % R;
		kl = ks + slot * n;
		nd = spellings_at(p + i, len - i, d);
		/* An escape the text may end inside of: what it may yet spell is not known. */
		tail = len - i < SCRUB_SPELLING_MAX && escape_start(p[i]);
		if (tail && i < cut && may_spell_more(p + i, len - i, s[0]))
			cut = i;
		/* k == 0: a match may start here; then the partial ones that reached here. */
		for (size_t j = 0; j <= nks[slot]; j++) {
			size_t k = j ? kl[j - 1] : 0, from = j ? start[k * R + slot] - 1 : i;

			if (j && tail && from < cut && may_spell_more(p + i, len - i, s[k]))
				cut = from;
			for (int e = 0; e < nd; e++) {
				size_t end = i + d[e].len, *to;

				if (d[e].c != s[k])
					continue;
				if (k + 1 == n) {
					ALLOC_GROW(out->v, out->nr + 1, out->alloc);
					out->v[out->nr++] = (struct scrub_run){from, end, form};
					continue;
				}
				to = &start[(k + 1) * R + end % R];
				if (!*to) {
					ks[(end % R) * n + nks[end % R]++] = k + 1;
					*to = from + 1;
					live++;
				} else if (from + 1 < *to) {
					*to = from + 1;
				}
			}
		}
		for (size_t j = 0; j < nks[slot]; j++)
			start[kl[j] * R + slot] = 0;
		live -= nks[slot];
		nks[slot] = 0;
	}
	/* The partial matches the text ends with: the rest may come.  The ring is left zeroed. */
	for (size_t j = 0; j < nks[len % R]; j++) {
		size_t *at = &start[ks[(len % R) * n + j] * R + len % R];

		if (*at - 1 < cut)
			cut = *at - 1;
		*at = 0;
	}
	return cut;
}

size_t scrub_find(const struct buf *forms, size_t nforms, const char *in, size_t n,
                  struct scrub_runs *runs)
{
	size_t cut = n;

	for (size_t i = 0; i < nforms; i++) {
		size_t c;

		if (!forms[i].len)
			continue;
		c = find_form((const unsigned char *)forms[i].buf, forms[i].len, i, in, n, runs);
		if (c < cut)
			cut = c;
	}
	return cut;
}

size_t scrub_span(const struct buf *secrets, size_t nsecrets, const char *in, char *out, size_t n,
                  size_t before)
{
	struct scrub_runs runs = SCRUB_RUNS_INIT;
	size_t end = 0;

	/* Every match is found in the text as it came, before any is replaced. */
	scrub_find(secrets, nsecrets, in, n, &runs);
	if (out != in)
		memcpy(out, in, n);
	for (size_t i = 0; i < runs.nr; i++) {
		if (runs.v[i].start >= before)
			continue;
		memset(out + runs.v[i].start, '*', runs.v[i].end - runs.v[i].start);
		if (runs.v[i].end > end)
			end = runs.v[i].end;
	}
	scrub_runs_release(&runs);
	return end;
}

void scrub_runs_release(struct scrub_runs *runs)
{
	free(runs->v);
	free(runs->start);
	free(runs->ks);
	*runs = (struct scrub_runs)SCRUB_RUNS_INIT;
}

void scrub_stream_feed(struct scrub_stream *s, const struct buf *forms, size_t nforms,
                       const char *in, size_t n, int last, struct buf *out)
{
	size_t cut, end = s->stars;
	char *o;

	buf_add(&s->held, in, n);
	s->runs.nr = 0;
	cut = scrub_find(forms, nforms, s->held.buf, s->held.len, &s->runs);
	s->examined += s->held.len * nforms;
	if (last)
		cut = s->held.len;
	buf_add(out, s->held.buf, cut);
	o = out->buf + out->len - cut;
	/* Every run that starts before the cut is found whole now; a run that crosses it is starred
	 * on. */
	memset(o, '*', s->stars < cut ? s->stars : cut);
	for (size_t i = 0; i < s->runs.nr; i++) {
		const struct scrub_run *r = &s->runs.v[i];

		if (r->start >= cut)
			continue;
		memset(o + r->start, '*', (r->end < cut ? r->end : cut) - r->start);
		if (r->end > end)
			end = r->end;
	}
	s->stars = end > cut ? end - cut : 0;
	buf_consume(&s->held, cut);
}

void scrub_stream_release(struct scrub_stream *s)
{
	buf_release(&s->held);
	scrub_runs_release(&s->runs);
	s->stars = 0;
}
