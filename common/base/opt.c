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

int opt_words(int argc, char **argv, const struct option *longopts, size_t max, unsigned *flags,
              struct strvec *words, struct buf *err)
{
	struct option all[17];
	const char *v;
	size_t n = 0;
	int opt;

	for (; longopts && longopts[n].name; n++) {
		if (n >= 15 || longopts[n].has_arg != no_argument)
			BUG("opt_words() takes up to 15 options without a value");
		all[n] = (struct option){longopts[n].name, no_argument, NULL, 256 + (int)n};
	}
	all[n] = (struct option){"help", no_argument, NULL, 'h'};
	all[n + 1] = (struct option){NULL, 0, NULL, 0};
	*flags = 0;
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

int opt_subcommand(int argc, char **argv, struct buf *err)
{
	static const struct option help[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *v;
	int opt, at;

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
