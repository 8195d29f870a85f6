/*
 * libFuzzer target: the usage parser aibox-proxy runs on every answer it
 * forwards with the key (common/config/usage.c: usage_stream_feed() and
 * usage_stream_end()), and on the same bytes the price table parser
 * (usage_prices_parse()).
 *
 * The first byte picks SSE or JSON and how the rest is cut into pieces.
 * Besides not crashing: the count of each kind only grows, stays within
 * USAGE_TOKENS_MAX, equals the sum of the growths reported, and does not
 * depend on where the stream was cut (fed whole, the same counts and model
 * come out); the model is printable ASCII without spaces.  An accepted price
 * table has a date and at least one family, each row 1 to USAGE_BANDS bands
 * with rising thresholds and prices that never fall, its top price at least
 * every band's; a model named by the input is priced by a row whose family
 * starts its name; fewer tokens never cost more, and an answer counted in
 * two growths (usage_count_add()) costs what it costs counted at once.  The
 * request scanner (usage_req_feed()) gives the same max_tokens and model
 * wherever the body was cut, and where jansson reads the body as an object,
 * never less: its max_tokens at least jansson's (or the documented maximum
 * for one it cannot read), its model jansson's or none.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/usage.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(const char *p, size_t n, enum usage_mode mode, unsigned cut, struct usage_stream *s)
{
	struct usage_tokens sum = {{0}};
	size_t off = 0;

	usage_stream_init(s, mode);
	while (off < n) {
		struct usage_tokens d = {{0}};
		struct usage_tokens before = s->seen;
		size_t take =
		    cut ? 1 + (size_t)(((unsigned char)p[off] * 31u + cut) % (cut * 8)) : n;

		if (take > n - off)
			take = n - off;
		usage_stream_feed(s, p + off, take, &d);
		for (int k = 0; k < USAGE_KINDS; k++) {
			if (s->seen.n[k] < before.n[k] || s->seen.n[k] > USAGE_TOKENS_MAX ||
			    s->seen.n[k] - before.n[k] != d.n[k])
				abort();
			sum.n[k] += d.n[k];
		}
		if (s->seen.searches < before.searches ||
		    s->seen.searches - before.searches != d.searches)
			abort();
		off += take;
	}
	{
		struct usage_tokens d = {{0}};

		usage_stream_end(s, &d);
		for (int k = 0; k < USAGE_KINDS; k++) {
			sum.n[k] += d.n[k];
			if (sum.n[k] != s->seen.n[k] || s->seen.n[k] > USAGE_TOKENS_MAX)
				abort();
		}
	}
	for (const char *m = s->model; *m; m++)
		if ((unsigned char)*m <= 0x20 || (unsigned char)*m >= 0x7f)
			abort();
}

/* Does v hold a key that makes a body unbounded (usage_req_unbounded())? depth: v's. */
static int has_unbounding_key(json_t *v, int depth, int in_tools)
{
	const char *k;
	json_t *m;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach(v, k, m)
		{
			if (!strcmp(k, "source") || !strcmp(k, "mcp_servers") ||
			    !strcmp(k, "container") || !strcmp(k, "context_management") ||
			    (in_tools && depth == 3 && !strcmp(k, "type")) ||
			    has_unbounding_key(m, depth + 1,
			                       depth == 1 ? !strcmp(k, "tools") : in_tools))
				return 1;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m)
		{
			if (has_unbounding_key(m, depth + 1, in_tools))
				return 1;
		}
	}
	return 0;
}

static void req_check(const char *p, size_t n, unsigned cut)
{
	struct usage_req a, b;
	json_t *root, *v;
	size_t off = 0;

	usage_req_init(&a);
	usage_req_init(&b);
	while (off < n) {
		size_t take = 1 + (size_t)(((unsigned char)p[off] * 17u + cut) % (cut * 8));

		if (take > n - off)
			take = n - off;
		usage_req_feed(&a, p + off, take);
		off += take;
	}
	usage_req_feed(&b, p, n);
	if (usage_req_max_tokens(&a) != usage_req_max_tokens(&b) ||
	    !usage_req_model(&a) != !usage_req_model(&b) ||
	    (usage_req_model(&a) && strcmp(usage_req_model(&a), usage_req_model(&b))) ||
	    usage_req_unbounded(&a) != usage_req_unbounded(&b) ||
	    usage_req_fast(&a) != usage_req_fast(&b) || usage_req_geo(&a) != usage_req_geo(&b) ||
	    usage_req_standard_only(&a) != usage_req_standard_only(&b) || a.bytes != n)
		abort();
	root = json_loadb(p, n, JSON_DECODE_INT_AS_REAL, NULL);
	if (json_is_object(root)) {
		v = json_object_get(root, "max_tokens");
		if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= 1e9 &&
		    (double)usage_req_max_tokens(&a) < json_real_value(v) &&
		    usage_req_max_tokens(&a) != USAGE_MAX_TOKENS_UNREAD)
			abort();
		/* A key the API reads as one that unbounds the prompt is never missed. */
		if (has_unbounding_key(root, 1, 0) && !usage_req_unbounded(&a))
			abort();
		/* A speed the API may run fast is never missed. */
		v = json_object_get(root, "speed");
		if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "standard")) &&
		    !usage_req_fast(&a))
			abort();
		/* Nor a geo other than global, nor a tier that may be the Priority Tier. */
		v = json_object_get(root, "inference_geo");
		if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "global")) &&
		    !usage_req_geo(&a))
			abort();
		v = json_object_get(root, "service_tier");
		if (!(json_is_string(v) && !strcmp(json_string_value(v), "standard_only")) &&
		    usage_req_standard_only(&a))
			abort();
		v = json_object_get(root, "model");
		if (usage_req_model(&a) &&
		    (!json_is_string(v) || strcmp(json_string_value(v), usage_req_model(&a))))
			abort();
	}
	json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usage_stream a, b;
	struct usage_prices t;
	struct buf err = BUF_INIT;
	enum usage_mode mode;
	unsigned cut;

	if (!size)
		return 0;
	mode = data[0] & 1 ? USAGE_JSON : USAGE_SSE;
	cut = 1 + (data[0] >> 1) % 16;
	run((const char *)data + 1, size - 1, mode, cut, &a);
	run((const char *)data + 1, size - 1, mode, 0, &b);
	if (memcmp(&a.seen, &b.seen, sizeof(a.seen)) || strcmp(a.model, b.model) ||
	    a.skipped != b.skipped)
		abort();
	/* The iterations too (their seen, not delta: the deltas were summed differently). */
	for (int i = 0; i < USAGE_ITERATIONS; i++)
		if (memcmp(&a.it[i].seen, &b.it[i].seen, sizeof(a.it[i].seen)) ||
		    strcmp(a.it[i].model, b.it[i].model))
			abort();
	usage_stream_release(&b);
	req_check((const char *)data + 1, size - 1, cut);

	if (usage_prices_parse((const char *)data, size, &t, &err) == 0) {
		const struct usage_price *p;
		struct usage_tokens half, whole;

		if (!t.files[0].date[0] || !t.nr)
			abort();
		for (size_t i = 0; i < t.nr; i++) {
			const struct usage_price *r = &t.v[i];

			if (!r->nband || r->nband > USAGE_BANDS || r->band[0].above || !r->date[0])
				abort();
			for (size_t b = 0; b < r->nband; b++)
				for (int k = 0; k < USAGE_KINDS; k++)
					if (r->band[b].nano[k] > t.top.band[0].nano[k] ||
					    (b && (r->band[b].above <= r->band[b - 1].above ||
					           r->band[b].nano[k] < r->band[b - 1].nano[k])))
						abort();
		}
		/* The stream's model (if any) against the table; the tokens seen, split in two. */
		if (usage_price_of(&t, a.model[0] ? a.model : NULL, &p) &&
		    strncmp(a.model, p->family, strlen(p->family)))
			abort();
		for (int k = 0; k < USAGE_KINDS; k++) {
			whole.n[k] = a.seen.n[k];
			half.n[k] = a.seen.n[k] / 2;
		}
		whole.searches = a.seen.searches;
		half.searches = a.seen.searches / 2;
		if (usage_cost(p, &half) > usage_cost(p, &whole))
			abort();
		{
			static struct usage_count c;
			struct usage_tokens zero = {{0}}, rest;
			uint64_t n1, n2;

			memset(&c, 0, sizeof(c));
			for (int k = 0; k < USAGE_KINDS; k++)
				rest.n[k] = whole.n[k] - half.n[k];
			rest.searches = whole.searches - half.searches;
			usage_count_add(&c, &t, a.model, 0, 0, &zero, &half, 1, &n1);
			usage_count_add(&c, &t, a.model, 0, 0, &half, &rest, 0, &n2);
			if (c.nano != usage_cost(p, &whole) || n1 + n2 != c.nano)
				abort();
		}
		usage_prices_release(&t);
	} else if (!err.len || t.v || t.nr) {
		abort();
	}
	usage_stream_release(&a);
	buf_release(&err);
	return 0;
}
