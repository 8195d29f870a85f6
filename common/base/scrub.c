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

/* The text a feed reads: the bytes kept from before (tail, in a window with in's first ones), then
 * in. */
struct text {
	const char *in;
	size_t t, n;                          /* tail's length, in's */
	char win[2 * SCRUB_SPELLING_MAX + 1]; /* the tail, then in's first bytes */
	size_t winn;
};

/* Text at i (0: the tail's first byte), and how much of it may be read from there, into *avail. */
static const char *text_at(const struct text *x, size_t i, size_t *avail)
{
	if (i < x->t) {
		*avail = x->winn - i;
		return x->win + i;
	}
	*avail = x->n - (i - x->t);
	return x->in + (i - x->t);
}

/* A ring's entry set while a feed looks ahead (m->undo): put back as it was after. */
static inline void ring_set(struct scrub_match *m, int ahead, size_t *at, size_t v)
{
	if (ahead) {
		ALLOC_GROW(m->undo, m->undo_nr + 1, m->undo_alloc);
		m->undo[m->undo_nr].at = at;
		m->undo[m->undo_nr++].old = *at;
	}
	*at = v;
}

/*
 * Read the text's places from..to (relative to m->pos) for the form s[0..n)
 * (n >= 1) in ring g, from left to right: at each place, for each k, the
 * earliest start of a spelling of s[0..k) that ends there.  Spellings are at
 * most SCRUB_SPELLING_MAX bytes, so only the next SCRUB_SPELLING_MAX places
 * can be reached from one: a ring of that many + 1 slots (by the place in
 * the stream) holds them.  Each place costs at most (n + 1) *
 * SPELLINGS_AT_MAX steps; a run found ends at its earliest start, so the
 * runs cover every match.  Runs found go to out (from the stream's start;
 * those that start before `from` left out).  With ahead, the places are
 * read as the text may yet go on (an escape cut short; how far back to cut,
 * returned), every change to the ring's entries logged in m->undo (its
 * counts, g->nks and g->live, the caller saves); else the places
 * are read for good (the text after each is long enough, or ends there).
 */
static size_t form_read(struct scrub_match *m, struct scrub_ring *g, const unsigned char *s,
                        size_t n, size_t form, const struct text *x, size_t i0, size_t to,
                        int ahead, size_t from, struct scrub_runs *out)
{
	enum { R = SCRUB_SPELLING_MAX + 1 };
	size_t *start = g->start, *ks = g->ks, base = m->pos, len = x->t + x->n, cut = SIZE_MAX;
	size_t nks[R], live = g->live, examined = 0; /* g's, here apart from the ring's entries */
	/* The bytes a spelling of s[0] may start with: itself, or an escape's first byte. */
	unsigned char may_start[256] = {['%'] = 1, ['\\'] = 1, ['&'] = 1};

	memcpy(nks, g->nks, sizeof(nks));
	may_start[s[0]] = 1;
	if (s[0] == ' ' || s[0] == '+')
		may_start[s[0] == ' ' ? '+' : ' '] = 1;
	for (size_t i = i0; i < to; i++) {
		size_t slot, *kl, avail, at;
		struct spelling d[SPELLINGS_AT_MAX];
		const char *p;
		int nd, tail;

		if (!live && i >= x->t) {
			/* Nothing under way: on to where a match may start. */
			const unsigned char *q = (const unsigned char *)x->in + (i - x->t),
			                    *e = (const unsigned char *)x->in + (to - x->t);

			while (q < e && !may_start[*q])
				q++;
			examined += (size_t)(q - ((const unsigned char *)x->in + (i - x->t)));
			i = (size_t)(q - (const unsigned char *)x->in) + x->t;
			if (i == to)
				break;
		}
		at = base + i;
		p = text_at(x, i, &avail);
		examined++;
		if (!live && !may_start[(unsigned char)p[0]])
			continue; /* nothing under way, and no match starts here */
		slot = at % R;
		kl = ks + slot * n;
		nd = spellings_at(p, avail, d);
		/* An escape the text may end inside of: what it may yet spell is not known. */
		tail = ahead && len - i < SCRUB_SPELLING_MAX && escape_start(p[0]);
		if (tail && at < cut && may_spell_more(p, len - i, s[0]))
			cut = at;
		/* k == 0: a match may start here; then the partial ones that reached here. */
		for (size_t j = 0; j <= nks[slot]; j++) {
			size_t k = j ? kl[j - 1] : 0, st = j ? start[k * R + slot] - 1 : at;

			if (j && tail && st < cut && may_spell_more(p, len - i, s[k]))
				cut = st;
			for (int e = 0; e < nd; e++) {
				size_t end = at + d[e].len, *toe, es = end % R;

				if (d[e].c != s[k])
					continue;
				if (k + 1 == n) {
					if (st < from)
						continue;
					ALLOC_GROW(out->v, out->nr + 1, out->alloc);
					out->v[out->nr++] = (struct scrub_run){st, end, form};
					continue;
				}
				toe = &start[(k + 1) * R + es];
				if (k + 2 > g->top)
					g->top = k + 2;
				if (!*toe) {
					ks[es * n + nks[es]++] = k + 1;
					ring_set(m, ahead, toe, st + 1);
					live++;
				} else if (st + 1 < *toe) {
					ring_set(m, ahead, toe, st + 1);
				}
			}
		}
		for (size_t j = 0; j < nks[slot]; j++)
			ring_set(m, ahead, &start[kl[j] * R + slot], 0);
		live -= nks[slot];
		nks[slot] = 0;
	}
	m->examined += examined;
	memcpy(g->nks, nks, sizeof(nks));
	g->live = live;
	if (!ahead || to != len)
		return cut;
	/* The partial matches the text ends with: the rest may come. */
	{
		size_t slot = (base + len) % R;

		for (size_t j = 0; j < g->nks[slot]; j++) {
			size_t st = start[ks[slot * n + j] * R + slot] - 1;

			if (st < cut)
				cut = st;
		}
	}
	return cut;
}

/* Put back what form_read() changed while it looked ahead. */
static void undo(struct scrub_match *m)
{
	while (m->undo_nr) {
		m->undo_nr--;
		*m->undo[m->undo_nr].at = m->undo[m->undo_nr].old;
	}
}

/* Empty ring g (its entries zeroed: left so from then on). */
static void ring_clear(struct scrub_ring *g)
{
	enum { R = SCRUB_SPELLING_MAX + 1 };

	for (size_t slot = 0; slot < R; slot++) {
		for (size_t j = 0; j < g->nks[slot]; j++)
			g->start[g->ks[slot * g->n + j] * R + slot] = 0;
		g->nks[slot] = 0;
	}
	g->live = 0;
}

/* The most bytes a ring with nothing under way keeps of what it spread over. */
#define RING_KEEP_MAX (64 * 1024)

size_t scrub_match_feed(struct scrub_match *m, const struct buf *forms, size_t nforms,
                        const char *in, size_t n, int last, size_t from, struct scrub_runs *runs)
{
	enum { R = SCRUB_SPELLING_MAX + 1 };
	struct text x;
	size_t len, firm, cut, kept = 0, counts[R], live;

	if (m->nrings < nforms) {
		m->rings = xrealloc(m->rings, nforms * sizeof(*m->rings));
		memset(m->rings + m->nrings, 0, (nforms - m->nrings) * sizeof(*m->rings));
		m->nrings = nforms;
	}
	x.in = in;
	x.n = n;
	x.t = m->len - m->pos;
	memcpy(x.win, m->tail, x.t);
	x.winn = x.t + (n < SCRUB_SPELLING_MAX + 1 ? n : SCRUB_SPELLING_MAX + 1);
	if (x.winn > x.t)
		memcpy(x.win + x.t, in, x.winn - x.t);
	len = x.t + n;
	/* Read for good up to the first escape that the text may end inside of. */
	firm = len;
	if (!last)
		for (size_t i = len > SCRUB_SPELLING_MAX ? len - SCRUB_SPELLING_MAX + 1 : 0;
		     i < len && firm == len; i++) {
			size_t avail;

			if (escape_start(*text_at(&x, i, &avail)))
				firm = i;
		}
	/* The runs found for good before, that start at from or later, then the new ones. */
	for (size_t i = 0; i < m->kept.nr; i++)
		if (m->kept.v[i].start >= from)
			m->kept.v[kept++] = m->kept.v[i];
	m->kept.nr = kept;
	cut = m->pos + len;
	for (size_t f = 0; f < nforms; f++) {
		struct scrub_ring *g = &m->rings[f];
		size_t c, fn = forms[f].len;
		const unsigned char *s = (const unsigned char *)forms[f].buf;

		if (!fn)
			continue;
		if (g->n < fn) {
			ring_clear(g);
			free(g->start);
			free(g->ks);
			g->start = xcalloc(R * fn, sizeof(*g->start));
			g->top = 0;
			g->ks = xmalloc(R * fn * sizeof(*g->ks));
			g->n = fn;
		}
		form_read(m, g, s, fn, f, &x, 0, firm, 0, from, &m->kept);
		if (last) {
			ring_clear(g);
			continue;
		}
		memcpy(counts, g->nks, sizeof(counts));
		live = g->live;
		c = form_read(m, g, s, fn, f, &x, firm, len, 1, from, runs);
		undo(m);
		memcpy(g->nks, counts, sizeof(counts));
		g->live = live;
		if (c < cut)
			cut = c;
		/*
		 * A ring with nothing under way that a long partial spelling spread over many pages
		 * is given back: what each form's ring holds stays in proportion to what is under
		 * way, not to every form's length (a stream that spelled each form's most once).
		 */
		if (!g->live && g->top * R * sizeof(*g->start) > RING_KEEP_MAX) {
			free(g->start);
			free(g->ks);
			*g = (struct scrub_ring){0};
		}
	}
	for (size_t i = 0; i < m->kept.nr; i++) {
		ALLOC_GROW(runs->v, runs->nr + 1, runs->alloc);
		runs->v[runs->nr++] = m->kept.v[i];
	}
	/* What is read for good is left; what is not, kept (a few bytes) for the next feed. */
	{
		size_t avail;

		for (size_t i = firm; i < len; i++)
			m->tail[i - firm] = *text_at(&x, i, &avail);
	}
	m->pos += firm;
	m->len = m->pos + (len - firm);
	if (last)
		m->kept.nr = 0;
	return cut;
}

void scrub_match_release(struct scrub_match *m)
{
	for (size_t f = 0; f < m->nrings; f++) {
		free(m->rings[f].start);
		free(m->rings[f].ks);
	}
	free(m->rings);
	free(m->kept.v);
	free(m->undo);
	memset(m->tail, 0, sizeof(m->tail));
	*m = (struct scrub_match)SCRUB_MATCH_INIT;
}

size_t scrub_find(const struct buf *forms, size_t nforms, const char *in, size_t n,
                  struct scrub_runs *runs)
{
	size_t cut;

	if (!runs->m)
		runs->m = xcalloc(1, sizeof(*runs->m));
	cut = scrub_match_feed(runs->m, forms, nforms, in, n, 0, 0, runs);
	/* Each call reads its text alone: the rings are left empty for the next. */
	for (size_t f = 0; f < runs->m->nrings; f++)
		ring_clear(&runs->m->rings[f]);
	runs->m->pos = runs->m->len = 0;
	runs->m->kept.nr = 0;
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
	if (runs->m)
		scrub_match_release(runs->m);
	free(runs->m);
	*runs = (struct scrub_runs)SCRUB_RUNS_INIT;
}

void scrub_stream_feed(struct scrub_stream *s, const struct buf *forms, size_t nforms,
                       const char *in, size_t n, int last, struct buf *out)
{
	size_t cut, end = s->stars;
	char *o;

	buf_add(&s->held, in, n);
	s->runs.nr = 0;
	cut = scrub_match_feed(&s->m, forms, nforms, in, n, last, s->base, &s->runs) - s->base;
	buf_add(out, s->held.buf, cut);
	o = out->buf + out->len - cut;
	/* Every run that starts before the cut is found whole now; a run that crosses it is starred
	 * on. */
	memset(o, '*', s->stars < cut ? s->stars : cut);
	for (size_t i = 0; i < s->runs.nr; i++) {
		const struct scrub_run *r = &s->runs.v[i];
		size_t rs = r->start - s->base, re = r->end - s->base;

		if (rs >= cut)
			continue;
		memset(o + rs, '*', (re < cut ? re : cut) - rs);
		if (re > end)
			end = re;
	}
	s->stars = end > cut ? end - cut : 0;
	buf_consume(&s->held, cut);
	s->base += cut;
}

void scrub_stream_release(struct scrub_stream *s)
{
	buf_release(&s->held);
	scrub_match_release(&s->m);
	scrub_runs_release(&s->runs);
	s->stars = 0;
	s->base = 0;
}
