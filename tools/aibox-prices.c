/*
 * aibox-prices: the price table aibox counts spend with (docs/budget.md).
 *
 *	aibox prices [--json] [MODEL]
 *
 * Without MODEL, every row of the table in use (the installed one with the
 * user's ~/.aibox/prices over it), where it comes from and its date; with
 * MODEL, the row that prices it; then what a web search costs.  Exit 0; 1
 * when MODEL is in no row (it is charged the highest price); 2 for a usage
 * error or a bad price table.  See docs/man/aibox-prices.1.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "config/usage.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox prices [--json] [MODEL]\n"
    "\n"
    "Show the price table aibox counts the API's spend with (USD per million tokens),\n"
    "where each row comes from and its date; with MODEL, the row that prices it;\n"
    "then what a web search costs.\n"
    "\n"
    "    --json       as JSON on stdout\n"
    "    -h, --help   show this help\n"
    "\n"
    "Exit 0; 1: MODEL is in no row (it is charged the highest price of each column);\n"
    "2: usage error, or a price table that cannot be read.\n";

/* Where row and file i come from, in words. */
static const char *const from_names[USAGE_PRICES_FILES] = {"installed", "user"};

static const char *const column_names[USAGE_KINDS] = {
    "input", "output", "cache-write-5m", "cache-write-1h", "cache-read",
};

/* USD per million tokens from nano-USD per token: "10", "0.125", "12.50". */
static void format_price(struct buf *out, uint64_t nano)
{
	uint64_t whole = nano / 1000, frac = nano % 1000;

	if (!frac)
		buf_addf(out, "%llu", (unsigned long long)whole);
	else if (frac % 10)
		buf_addf(out, "%llu.%03llu", (unsigned long long)whole, (unsigned long long)frac);
	else
		buf_addf(out, "%llu.%02llu", (unsigned long long)whole,
		         (unsigned long long)(frac / 10));
}

static void print_band(const char *label, const struct usage_band *b, const char *date,
                       const char *from)
{
	struct buf p = BUF_INIT;
	static const int width[USAGE_KINDS] = {7, 7, 15, 15, 11};

	printf("%-22s", label);
	for (int k = 0; k < USAGE_KINDS; k++) {
		buf_reset(&p);
		format_price(&p, b->nano[k]);
		/* no padding at the line's end */
		printf(" %-*s", k + 1 < USAGE_KINDS || date ? width[k] : 0, p.buf);
	}
	if (date)
		printf(" %-10s %s", date, from);
	printf("\n");
	buf_release(&p);
}

static void print_header(void)
{
	printf("%-22s %-7s %-7s %-15s %-15s %-11s %-10s %s\n", "family", column_names[0],
	       column_names[1], column_names[2], column_names[3], column_names[4], "date", "from");
}

static void print_row(const struct usage_price *r)
{
	struct buf label = BUF_INIT;

	print_band(r->family, &r->band[0], r->date, from_names[r->file]);
	for (size_t b = 1; b < r->nband; b++) {
		buf_reset(&label);
		buf_addf(&label, "  above %llu", (unsigned long long)r->band[b].above);
		print_band(label.buf, &r->band[b], NULL, NULL);
	}
	if (r->geo_milli != USAGE_GEO_MILLI)
		printf("  geo %llu.%03llu (US-only inference: these prices times it)\n",
		       (unsigned long long)(r->geo_milli / 1000),
		       (unsigned long long)(r->geo_milli % 1000));
	buf_release(&label);
}

/* The table's web-search line, after a blank line. */
static void print_search(const struct usage_prices *t)
{
	struct buf p = BUF_INIT;

	format_price(&p, t->search.nano / 1000);
	printf("\nweb search: %s USD per 1,000 searches, date %s, %s (line %d)\n", p.buf,
	       t->search.date, from_names[t->search.file], t->search.line);
	printf("US-only inference (inference_geo): %d.%d times a row's prices, unless its "
	       "'geo' says otherwise\n",
	       USAGE_GEO_MILLI / 1000, USAGE_GEO_MILLI % 1000 / 100);
	buf_release(&p);
}

static void print_files(const struct usage_prices *t)
{
	printf("The price table in use, USD per million tokens (docs/budget.md):\n");
	for (size_t i = 0; i < t->nfiles; i++)
		printf("  %-9s %s, date %s\n", from_names[i], t->files[i].path, t->files[i].date);
	if (t->nfiles < 2)
		printf("  %-9s %s: none (its rows would replace the installed ones)\n",
		       from_names[1], user_prices_file());
	printf("\n");
}

static json_t *band_json(const struct usage_band *b)
{
	json_t *o = json_object();

	json_object_set_new(o, "above", json_integer((json_int_t)b->above));
	for (int k = 0; k < USAGE_KINDS; k++)
		json_object_set_new(o, usage_kind_names[k], json_real((double)b->nano[k] / 1000));
	return o;
}

static json_t *search_json(const struct usage_prices *t)
{
	json_t *o = json_object();

	json_object_set_new(o, "usd_per_1000", json_real((double)t->search.nano / 1000000));
	json_object_set_new(o, "date", json_string(t->search.date));
	json_object_set_new(o, "from", json_string(from_names[t->search.file]));
	json_object_set_new(o, "file", json_string(t->files[t->search.file].path));
	json_object_set_new(o, "line", json_integer(t->search.line));
	return o;
}

static json_t *row_json(const struct usage_prices *t, const struct usage_price *r)
{
	json_t *o = json_object(), *bands = json_array();

	for (size_t b = 0; b < r->nband; b++)
		json_array_append_new(bands, band_json(&r->band[b]));
	json_object_set_new(o, "family", json_string(r->family));
	json_object_set_new(o, "date", json_string(r->date));
	json_object_set_new(o, "from", json_string(from_names[r->file]));
	json_object_set_new(o, "file", json_string(t->files[r->file].path));
	json_object_set_new(o, "line", json_integer(r->line));
	json_object_set_new(o, "bands", bands);
	json_object_set_new(o, "geo", json_real((double)r->geo_milli / 1000));
	return o;
}

static json_t *table_json(const struct usage_prices *t)
{
	json_t *o = json_object(), *files = json_array(), *rows = json_array();

	for (size_t i = 0; i < t->nfiles; i++) {
		json_t *f = json_object();

		json_object_set_new(f, "from", json_string(from_names[i]));
		json_object_set_new(f, "file", json_string(t->files[i].path));
		json_object_set_new(f, "date", json_string(t->files[i].date));
		json_array_append_new(files, f);
	}
	for (size_t i = 0; i < t->nr; i++)
		json_array_append_new(rows, row_json(t, &t->v[i]));
	json_object_set_new(o, "files", files);
	json_object_set_new(o, "rows", rows);
	json_object_set_new(o, "highest", band_json(&t->top.band[0]));
	json_object_set_new(o, "web_search", search_json(t));
	return o;
}

static json_t *model_json(const struct usage_prices *t, const char *model,
                          const struct usage_price *r, int priced)
{
	json_t *o = json_object();

	json_object_set_new(o, "model", json_string(model));
	json_object_set_new(o, "priced", json_boolean(priced));
	json_object_set_new(o, "row", priced ? row_json(t, r) : json_null());
	json_object_set_new(o, "highest", band_json(&t->top.band[0]));
	json_object_set_new(o, "web_search", search_json(t));
	return o;
}

static void print_json(json_t *o)
{
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));

	if (!text)
		die("cannot write JSON");
	puts(text);
	free(text);
	json_decref(o);
}

/* MODEL as the proxy would count it: NULL when it would not count it by name. */
static const char *model_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > USAGE_MODEL_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return NULL;
	return s;
}

/* --json and at most one MODEL (into words), through common/base/opt.c as every tool. */
static void parse_options(int argc, char **argv, int *json, struct strvec *words)
{
	static const struct opt_spec options[] = {
	    {"json", 0, OPT_FLAG, NULL, 'j', "as JSON on stdout"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	unsigned flags;

	opt_words_exit(argc, argv, options, 1, &flags, words, usage_text);
	*json = !!(flags & 1);
}

int main(int argc, char **argv)
{
	struct usage_prices t = USAGE_PRICES_INIT;
	struct buf err = BUF_INIT;
	const char *model = NULL;
	const struct usage_price *r;
	struct strvec words = STRVEC_INIT;
	int json = 0, priced = 1;

	tool_init(argc, argv);
	parse_options(argc, argv, &json, &words);
	model = words.nr ? words.v[0] : NULL;
	if (usage_prices_load_in_use(&t, &err) < 0)
		die("%s", err.buf);
	if (model) {
		priced = usage_price_of(&t, model_name(model), &r);
		if (json) {
			print_json(model_json(&t, model, r, priced));
		} else if (priced) {
			printf("%s is priced by the row %s of %s, line %d (USD per million "
			       "tokens):\n\n",
			       model, r->family, t.files[r->file].path, r->line);
			print_header();
			print_row(r);
		} else {
			printf("%s is in no row of the price table: aibox charges it the highest "
			       "price "
			       "of each column (USD per million tokens):\n\n",
			       model);
			print_header();
			print_band("(highest)", &t.top.band[0], NULL, NULL);
		}
		if (!json)
			print_search(&t);
	} else if (json) {
		print_json(table_json(&t));
	} else {
		print_files(&t);
		print_header();
		for (size_t i = 0; i < t.nr; i++)
			print_row(&t.v[i]);
		print_band("any other model", &t.top.band[0], NULL, NULL);
		print_search(&t);
	}
	usage_prices_release(&t);
	strvec_clear(&words);
	buf_release(&err);
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write to stdout");
	return priced ? 0 : EXIT_REFUSED;
}
