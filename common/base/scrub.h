/*
 * A secret's spellings in text that came back from elsewhere: the one
 * matcher of the broker's token filter (docs/broker.md, "What the client
 * sees") and the proxy's echo swap (docs/proxy.md, "Secrets and
 * interception"; common/proxy/secret_swap.h).  No I/O: each calls it on the
 * pieces of an answer as they go.
 */
#ifndef AIBOX_SCRUB_H
#define AIBOX_SCRUB_H

#include <stddef.h>

#include "base/buf.h"

/*
 * The most bytes one byte of a form takes in any spelling scrub_find()
 * finds ("&DiacriticalGrave;" for '`'): a run of text spelling an n-byte
 * form is at most SCRUB_SPELLING_MAX * n bytes long.
 */
#define SCRUB_SPELLING_MAX 18

/* A run of text, in[start..end), that spells forms[form]. */
struct scrub_run {
	size_t start, end, form;
};

/*
 * What scrub_find() found, and the memory it works in, kept for the next
 * call (zeroed between calls): a caller that calls it on each piece of a
 * stream keeps one, sets nr to 0 before each call, and releases it with
 * scrub_runs_release().
 */
struct scrub_runs {
	struct scrub_run *v;
	size_t nr, alloc;
	size_t *start, *ks, ring_n; /* the matcher's ring, for forms of up to ring_n bytes */
};
#define SCRUB_RUNS_INIT                                                                            \
	{                                                                                          \
		NULL, 0, 0, NULL, NULL, 0                                                          \
	}

void scrub_runs_release(struct scrub_runs *runs);

/*
 * Find in in[0..n) the runs that spell one of forms[0..nforms) (each at
 * least one byte; an empty one is skipped), each byte of the form in any
 * spelling, in any mix: the byte itself; %XX (hex in either case); '+' for
 * a space (form encoding), and a space for '+' (what form decoding makes of
 * one: PHP's cookies); a JSON string's escape of it (\/, \", \\,
 * \u00XX); or an HTML character reference to it: decimal (&#43;) or hex
 * (&#x2B;, &#X2b;), with leading zeros up to 7 digits, the ';' optional, or
 * named (&plus;, &sol;, every name HTML5 gives a printable ASCII byte, with
 * its ';'; &amp;, &lt;, &gt;, &quot; and their upper-case forms without it
 * too).  Appends to runs, for each form and each place where a run of it
 * ends, the run that starts earliest, in no given order: together they
 * cover every run.
 *
 * Returns where in is to be cut for a stream that goes on after it: the
 * earliest start of a run that bytes after in[n] may still complete, n when
 * none may.  Every run that starts before it is found now; runs that start
 * there or later are found once the rest has come (a caller keeps the bytes
 * from there as they came).  So a caller that holds back in[cut..n) holds
 * back at most SCRUB_SPELLING_MAX times the longest form's length, and
 * holds back nothing in text that spells no part of a form at its end.
 *
 * The time is linear in n (times each form's length at most), whatever the
 * forms hold.
 */
size_t scrub_find(const struct buf *forms, size_t nforms, const char *in, size_t n,
                  struct scrub_runs *runs);

/*
 * Copy in[0..n) to out[0..n) (the same place, or another) with '*' for
 * every byte of a run of in that spells one of secrets[0..nsecrets)
 * (scrub_find()) and starts before `before` (n: every run).  Runs are found
 * in `in` as it is, so overlapping ones are all replaced.  Returns where the
 * last run replaced ends (0: none): a caller that passes a stream on piece
 * by piece holds back a run that may not have come whole, and replaces what
 * a run it passed on covers of the next piece.
 */
size_t scrub_span(const struct buf *secrets, size_t nsecrets, const char *in, char *out, size_t n,
                  size_t before);

/*
 * A stream passed on piece by piece with '*' for every byte of a run that
 * spells one of the forms (scrub_find()), lengths kept (Content-Length and
 * pkt-lines stay right): the broker's answers (docs/broker.md, "What the
 * client sees").  The bytes from where scrub_find() cuts are held back as
 * they came, so a run split between pieces is found once it came whole;
 * what comes out does not depend on how the stream was cut.  Each piece
 * costs scrub_find() on what is held and the piece: nothing is held in
 * text that spells no part of a form at its end, at most
 * SCRUB_SPELLING_MAX times the longest form's length when it does.
 */
struct scrub_stream {
	struct buf held;        /* the stream's bytes not passed on yet, as they came */
	size_t stars;           /* held's first bytes that a run passed on covers */
	struct scrub_runs runs; /* scrub_find()'s, kept from piece to piece */
	size_t examined;        /* the bytes the matcher read, each time it read one (tests) */
};
#define SCRUB_STREAM_INIT                                                                          \
	{                                                                                          \
		BUF_INIT, 0, SCRUB_RUNS_INIT, 0                                                    \
	}

/*
 * Take in[0..n), the stream's next piece, and append to out what of the
 * stream may be passed on now (last: all of it, nothing held).
 */
void scrub_stream_feed(struct scrub_stream *s, const struct buf *forms, size_t nforms,
                       const char *in, size_t n, int last, struct buf *out);
void scrub_stream_release(struct scrub_stream *s);

#endif
