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

struct scrub_match;

/*
 * What scrub_find() found, and the memory it works in, kept for the next
 * call: a caller that calls it on each piece of a stream keeps one, sets nr
 * to 0 before each call, and releases it with scrub_runs_release().
 */
struct scrub_runs {
	struct scrub_run *v;
	size_t nr, alloc;
	struct scrub_match *m; /* scrub_find()'s matcher, made on its first call */
};
#define SCRUB_RUNS_INIT                                                                            \
	{                                                                                          \
		NULL, 0, 0, NULL                                                                   \
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
 * The same matcher on a stream that comes in pieces, resumed where it
 * stopped: each byte of the stream is read a bounded number of times (once
 * for good, and again on each feed while it is one of the at most
 * SCRUB_SPELLING_MAX - 1 last bytes and an escape may start at or before it
 * there), whatever the pieces' sizes; it keeps, for each form, where the
 * partial spellings under way started, and those last bytes.
 */
struct scrub_ring {
	size_t *start, *ks, n; /* for forms of up to n bytes (see scrub.c form_read()) */
	size_t nks[SCRUB_SPELLING_MAX + 1], live;
	size_t top; /* 1 + the most bytes of the form a partial spelling held since made */
};
struct scrub_match {
	struct scrub_ring *rings; /* one for each form */
	size_t nrings;
	size_t pos;                    /* the stream's bytes read for good */
	size_t len;                    /* the stream's bytes fed */
	char tail[SCRUB_SPELLING_MAX]; /* the stream's bytes from pos to len */
	struct scrub_runs kept; /* runs found for good, not yet handed out for the last time */
	struct scrub_undo {
		size_t *at, old;
	} * undo; /* what reading ahead changed in the rings */
	size_t undo_nr, undo_alloc;
	size_t examined; /* the bytes read, each time one was (for tests) */
};
#define SCRUB_MATCH_INIT                                                                           \
	{                                                                                          \
		NULL, 0, 0, 0, {0}, SCRUB_RUNS_INIT, NULL, 0, 0, 0                                 \
	}

/*
 * Take in[0..n), the stream's next piece (forms the same on each call), and
 * append to runs, with places counted from the stream's start, what
 * scrub_find() finds on the stream's bytes so far, but the runs that start
 * before `from` (from never goes back; a caller passes where what it holds
 * starts: a run it passed on before is not handed out again, and the part
 * after `from` of one that crosses it is not handed out alone).
 * Returns scrub_find()'s cut, from the stream's start; with last (the
 * stream ends with in) its length.  A stream is fed to its end (last) or
 * released with scrub_match_release().
 */
size_t scrub_match_feed(struct scrub_match *m, const struct buf *forms, size_t nforms,
                        const char *in, size_t n, int last, size_t from, struct scrub_runs *runs);
void scrub_match_release(struct scrub_match *m);

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
 * what comes out does not depend on how the stream was cut.  The matcher
 * resumes where it stopped (scrub_match_feed()): each piece costs its own
 * bytes, not what is held.  Nothing is held in text that spells no part of
 * a form at its end, at most SCRUB_SPELLING_MAX times the longest form's
 * length when it does.
 */
struct scrub_stream {
	struct buf held;        /* the stream's bytes not passed on yet, as they came */
	size_t base;            /* where held starts in the stream */
	size_t stars;           /* held's first bytes that a run passed on covers */
	struct scrub_match m;   /* the matcher, resumed from piece to piece */
	struct scrub_runs runs; /* what it found */
};
#define SCRUB_STREAM_INIT                                                                          \
	{                                                                                          \
		BUF_INIT, 0, 0, SCRUB_MATCH_INIT, SCRUB_RUNS_INIT                                  \
	}

/*
 * Take in[0..n), the stream's next piece, and append to out what of the
 * stream may be passed on now (last: all of it, nothing held).
 */
void scrub_stream_feed(struct scrub_stream *s, const struct buf *forms, size_t nforms,
                       const char *in, size_t n, int last, struct buf *out);
void scrub_stream_release(struct scrub_stream *s);

#endif
