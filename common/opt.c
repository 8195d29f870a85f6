#include "opt.h"

#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "banned.h"

int opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts,
             const char **arg, struct buf *why)
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
			buf_addf(why, "unknown option '-%c'", optopt);
		else if (opt == '?')
			buf_addf(why, "unknown option '%.*s'", (int)strcspn(a, "="), a);
		else
			buf_addf(why, "%s needs a value", a);
		return OPT_BAD;
	}
	return opt;
}
