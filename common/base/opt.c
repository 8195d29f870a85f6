#include "base/opt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/strvec.h"
#include "base/banned.h"

int opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts,
             const char **arg, struct buf *err)
{
	char spec[64];
	int opt, at;

	/* '-': words come back in order, POSIXLY_CORRECT or not; ':': no messages. */
	if ((size_t)snprintf(spec, sizeof(spec), "-:%s", shortopts) >= sizeof(spec))
		return OPT_BAD;
	opterr = 0;
	at = optind ? optind : 1;
	opt = getopt_long(argc, argv, spec, longopts, NULL);
	*arg = optarg;
	if (opt == '?' || opt == ':') {
		/* The option at fault is the argument getopt_long() just stepped over. */
		const char *a = optind > at && optind <= argc ? argv[optind - 1] : argv[at];

		if (opt == '?' && optopt && !(a[0] == '-' && a[1] == '-'))
			buf_addf(err, "unknown option '-%c'", optopt);
		else if (opt == '?')
			buf_addf(err, "unknown option '%.*s'", (int)strcspn(a, "="), a);
		else
			buf_addf(err, "%s needs a value", a);
		return OPT_BAD;
	}
	return opt;
}

void opt_restart(void)
{
	/* glibc's getopt starts over, forgetting a half-read cluster, when optind is 0. */
	optind = 0;
}

const char *opt_name(const struct option *longopts, int val)
{
	for (; longopts->name; longopts++)
		if (longopts->val == val)
			return longopts->name;
	return NULL;
}

static int describing(int argc, char **argv)
{
	return (optind == 0 || optind == 1) && argc > 1 && !strcmp(argv[1], OPT_DESCRIBE_ARG);
}

int opt_words(int argc, char **argv, const struct opt_spec *table, size_t max, unsigned *flags,
              struct strvec *words, struct buf *err)
{
	struct option all[17];
	const char *v;
	size_t n = 0;
	int opt;

	for (; table && table[n].name; n++) {
		if (n >= 15 || table[n].kind != OPT_FLAG)
			BUG("opt_words() takes up to 15 options without a value");
		all[n] = (struct option){table[n].name, no_argument, NULL, 256 + (int)n};
	}
	all[n] = (struct option){"help", no_argument, NULL, 'h'};
	all[n + 1] = (struct option){NULL, 0, NULL, 0};
	*flags = 0;
	if (describing(argc, argv))
		return 2;
	while ((opt = opt_next(argc, argv, "h", all, &v, err)) != OPT_END) {
		if (opt == 'h')
			return 1;
		if (opt == OPT_BAD)
			return -EINVAL;
		if (opt == OPT_WORD)
			strvec_push(words, v);
		else
			*flags |= 1u << (opt - 256);
	}
	for (; optind < argc; optind++)
		strvec_push(words, argv[optind]);
	if (words->nr > max) {
		buf_addf(err, "unexpected argument '%s'", words->v[max]);
		return -EINVAL;
	}
	return 0;
}

int opt_parse(int argc, char **argv, const struct opt_spec *table, const char **arg,
              struct buf *err)
{
	struct option all[OPT_TABLE_MAX + 2];
	char shorts[2 * OPT_TABLE_MAX + 4], *sp = shorts;
	size_t n = 0;
	int opt;

	if (describing(argc, argv)) {
		optind = argc;
		*arg = NULL;
		return OPT_DESCRIBE;
	}
	for (; table[n].name; n++) {
		const struct opt_spec *o = &table[n];

		if (n >= OPT_TABLE_MAX || o->id == 0 || o->id == 1 || o->id == '?' ||
		    o->id == 'h' || (o->kind == OPT_FLAG) != !o->value)
			BUG("option table: '%s'", o->name);
		all[n] = (struct option){
		    o->name, o->kind == OPT_FLAG ? no_argument : required_argument, NULL, o->id};
		if (o->short_name) {
			*sp++ = o->short_name;
			if (o->kind != OPT_FLAG)
				*sp++ = ':';
		}
	}
	*sp++ = 'h';
	*sp = '\0';
	all[n] = (struct option){"help", no_argument, NULL, 'h'};
	all[n + 1] = (struct option){NULL, 0, NULL, 0};
	opt = opt_next(argc, argv, shorts, all, arg, err);
	if (opt == 'h' || opt == OPT_BAD || opt == OPT_WORD || opt == OPT_END)
		return opt;
	/* A short name stands for its option's id. */
	for (size_t i = 0; i < n; i++)
		if (table[i].short_name && table[i].short_name == opt && table[i].id != opt)
			return table[i].id;
	return opt;
}

const struct opt_spec *opt_spec_of(const struct opt_spec *table, int id)
{
	for (; table->name; table++)
		if (table->id == id)
			return table;
	return NULL;
}

static const char *const kind_names[] = {
    [OPT_FLAG] = "flag", [OPT_TEXT] = "text",       [OPT_DURATION] = "duration",
    [OPT_FILE] = "file", [OPT_TASK] = "task",       [OPT_IMAGE] = "image",
    [OPT_REF] = "ref",   [OPT_PROJECT] = "project", [OPT_CHOICE] = "choice",
};

const char *opt_kind_name(enum opt_kind kind)
{
	if ((size_t)kind >= ARRAY_SIZE(kind_names))
		BUG("option kind %d", (int)kind);
	return kind_names[kind];
}

int opt_kind_parse(const char *word, enum opt_kind *kind)
{
	for (size_t i = 0; i < ARRAY_SIZE(kind_names); i++)
		if (!strcmp(word, kind_names[i])) {
			*kind = (enum opt_kind)i;
			return 0;
		}
	return -EINVAL;
}

void opt_describe(const char *sub, const struct opt_spec *table, struct buf *out)
{
	for (; table && table->name; table++) {
		if (!table->help)
			continue;
		buf_addf(out, "%s\t--%s\t", sub, table->name);
		if (table->short_name)
			buf_addf(out, "-%c", table->short_name);
		buf_addf(out, "\t%s\t%s\n", opt_kind_name(table->kind),
		         table->value ? table->value : "");
	}
	buf_addf(out, "%s\t--help\t-h\tflag\t\n", sub);
}

int opt_subcommand(int argc, char **argv, struct buf *err)
{
	static const struct option help[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *v;
	int opt, at;

	if (describing(argc, argv))
		return OPT_DESCRIBE;
	opt = opt_next(argc, argv, "h", help, &v, err);
	if (opt == 'h')
		return 0;
	if (opt == OPT_BAD)
		return -EINVAL;
	/* A word, or what follows `--`. */
	at = opt == OPT_WORD ? optind - 1 : optind;
	opt_restart();
	return at;
}
