/*
 * libFuzzer: the token scrub (common/base/scrub.h) on arbitrary secrets and
 * text (make fuzz).  The input: a count of secrets (1 to 3), each as a
 * length byte (1 to 40) and its bytes, then the text.  What comes out is
 * the text with bytes replaced by '*' only, holding neither a secret as it
 * is (one without a '*'), nor every byte of one as %XX, nor one with '+'
 * for each space, nor one with a space for each '+'.  And scrub_find()'s
 * cut, for the text cut short at each place: every run of the whole text
 * that starts before it ends in the part, and is found there (as far back
 * or further).  And scrub_stream_feed() on the text fed in pieces (of 1 to
 * 7 bytes, set by the text) passes on what scrub_span() makes of it whole.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/scrub.h"
#include "base/banned.h"

/* The text through a scrub_stream in pieces: the same as scrub_span() of it whole (want). */
static void stream(const struct buf *secrets, size_t n, const char *text, size_t len,
                   const char *want)
{
	struct scrub_stream st = SCRUB_STREAM_INIT;
	struct buf out = BUF_INIT;
	size_t at = 0;

	while (at < len) {
		size_t k = (unsigned char)text[at] % 7 + 1;

		if (k > len - at)
			k = len - at;
		scrub_stream_feed(&st, secrets, n, text + at, k, 0, &out);
		at += k;
	}
	scrub_stream_feed(&st, secrets, n, NULL, 0, 1, &out);
	if (out.len != len || memcmp(out.buf, want, len))
		abort();
	scrub_stream_release(&st);
	buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether runs has one of form that ends at end and starts at start or before. */
static int has_run(const struct scrub_runs *runs, size_t form, size_t start, size_t end)
{
	for (size_t i = 0; i < runs->nr; i++)
		if (runs->v[i].form == form && runs->v[i].end == end && runs->v[i].start <= start)
			return 1;
	return 0;
}

/* The cut of text[0..k) for each k: what starts before it is found whole there. */
static void cuts(const struct buf *secrets, size_t n, const char *text, size_t len)
{
	struct scrub_runs all = SCRUB_RUNS_INIT, part = SCRUB_RUNS_INIT;

	if (scrub_find(secrets, n, text, len, &all) > len)
		abort();
	for (size_t k = 0; k < len && len <= 512; k++) {
		size_t cut;

		part.nr = 0;
		cut = scrub_find(secrets, n, text, k, &part);
		if (cut > k)
			abort();
		for (size_t i = 0; i < all.nr; i++)
			if (all.v[i].start < cut &&
			    (all.v[i].end > k ||
			     !has_run(&part, all.v[i].form, all.v[i].start, all.v[i].end)))
				abort();
	}
	scrub_runs_release(&all);
	scrub_runs_release(&part);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf secrets[3] = {BUF_INIT, BUF_INIT, BUF_INIT}, pct = BUF_INIT;
	size_t n, at = 1;
	char *out;

	if (size < 1)
		return 0;
	n = data[0] % 3 + 1;
	for (size_t i = 0; i < n; i++) {
		size_t len;

		if (at >= size)
			goto out;
		len = data[at++] % 40 + 1;
		if (size - at < len)
			goto out;
		buf_add(&secrets[i], data + at, len);
		at += len;
	}
	out = malloc(size - at + 1);
	if (!out)
		goto out;
	cuts(secrets, n, (const char *)data + at, size - at);
	scrub_span(secrets, n, (const char *)data + at, out, size - at, size - at);
	stream(secrets, n, (const char *)data + at, size - at, out);
	for (size_t i = 0; i < size - at; i++)
		if (out[i] != (char)data[at + i] && out[i] != '*')
			abort();
	for (size_t i = 0; i < n; i++) {
		buf_reset(&pct);
		for (size_t j = 0; j < secrets[i].len; j++)
			buf_addf(&pct, "%%%02X", (unsigned char)secrets[i].buf[j]);
		if (memmem(out, size - at, pct.buf, pct.len))
			abort();
		if (!memchr(secrets[i].buf, '*', secrets[i].len) &&
		    memmem(out, size - at, secrets[i].buf, secrets[i].len))
			abort();
		for (int plus = 0; plus < 2; plus++) {
			char from = plus ? '+' : ' ', to = plus ? ' ' : '+';

			buf_reset(&pct);
			for (size_t j = 0; j < secrets[i].len; j++)
				buf_addch(&pct, secrets[i].buf[j] == from ? to : secrets[i].buf[j]);
			if (!memchr(secrets[i].buf, '*', secrets[i].len) &&
			    memmem(out, size - at, pct.buf, pct.len))
				abort();
		}
	}
	free(out);
out:
	for (size_t i = 0; i < 3; i++)
		buf_release(&secrets[i]);
	buf_release(&pct);
	return 0;
}
