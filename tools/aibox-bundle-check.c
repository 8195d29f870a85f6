/*
 * aibox-bundle-check: accept or refuse a git bundle, without git.
 *
 *	aibox-bundle-check [--ref NAME]... [--base OID]... [--pack [--repo DIR]
 *	                   [--limit NAME=VALUE]...] [--json] FILE
 *
 * Exit 0 accepted, 1 refused (one line "aibox-bundle-check: FILE: <reason>"
 * on stderr), 2 usage or I/O error.  See docs/man/aibox-bundle-check.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "git/bundle_check.h"
#include "git/bundle_read.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/strvec.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox-bundle-check [--ref NAME]... [--base OID]... [--pack [--repo DIR]\n"
    "                          [--limit NAME=VALUE]...] [--json] FILE\n"
    "\n"
    "    --ref NAME    the bundle's refs must be exactly the set given\n"
    "                  (a bare branch name means refs/heads/NAME)\n"
    "    --base OID    a prerequisite the bundle may need (without any, it may need none)\n"
    "    --pack        also verify the pack: objects inflate, deltas resolve, checksum\n"
    "    --repo DIR    with --pack: take thin-pack bases from the repository DIR\n"
    "    --limit NAME=VALUE\n"
    "                  with --pack: a limit of the check (defaults in brackets):\n"
    "                  max-object=SIZE (16M) one object inflated, max-inflated=SIZE\n"
    "                  (256M) all of them, memory=SIZE (256M) the checker's memory,\n"
    "                  cpu=SECONDS (10) its CPU time, time=SECONDS (60) its wall time\n"
    "    --json        print what was read, and the verdict, as JSON on stdout\n"
    "\n"
    "Exit 0: accepted; 1: refused (the reason on stderr); 2: usage or I/O error.\n";

struct check {
	const char *file;
	struct strvec refs;  /* expected full refnames */
	struct strvec bases; /* lowercase hex */
	int pack, json;
	const char *repo;
	struct bundle_limits lim;
	int limits_given;

	struct bundle_header h;
	int header_ok;
	int pack_checked;
	int pack_ret;
	struct bundle_verdict v;
	const char *reason; /* in h.err or v.err */
};

/* A JSON string of untrusted bytes: invalid UTF-8 becomes U+FFFD-free '?'. */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);

	if (!j) {
		char *copy = xstrdup(s);

		for (char *p = copy; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		j = json_string(copy);
		free(copy);
	}
	return j;
}

static void print_json(struct check *c, int accepted)
{
	json_t *o = json_object();
	const struct bundle_header *h = &c->h;

	json_object_set_new(o, "file", jstr(c->file));
	json_object_set_new(o, "format", h->version ? json_integer(h->version) : json_null());
	json_object_set_new(o, "object_format",
	                    h->version ? json_string(bundle_oid_format_name(h->oid_format))
	                               : json_null());
	if (c->header_ok) {
		json_t *refs = json_array(), *pre = json_array();

		for (size_t i = 0; i < h->nr_refs; i++)
			json_array_append_new(refs,
			                      json_pack("{s:o,s:s}", "name", jstr(h->refs[i].name),
			                                "oid", h->refs[i].oid));
		for (size_t i = 0; i < h->nr_prereqs; i++)
			json_array_append_new(pre,
			                      json_pack("{s:s,s:o}", "oid", h->prereqs[i].oid,
			                                "comment", jstr(h->prereqs[i].comment)));
		json_object_set_new(o, "refs", refs);
		json_object_set_new(o, "prerequisites", pre);
	} else {
		json_object_set_new(o, "refs", json_null());
		json_object_set_new(o, "prerequisites", json_null());
	}
	if (c->pack_checked) {
		json_t *p = json_object();

		json_object_set_new(p, "ok", json_boolean(c->pack_ret == 0));
		json_object_set_new(p, "version",
		                    c->v.m.version ? json_integer(c->v.m.version) : json_null());
		json_object_set_new(p, "objects", json_integer(c->v.m.objects));
		json_object_set_new(p, "checksum",
		                    c->pack_ret == 0 && c->v.m.checksum[0]
		                        ? json_string(c->v.m.checksum)
		                        : json_null());
		json_object_set_new(p, "reason", c->pack_ret ? jstr(c->v.err.buf) : json_null());
		json_object_set_new(p, "checker",
		                    json_pack("{s:f,s:I}", "cpu_s", c->v.cpu_s, "max_rss_kib",
		                              (json_int_t)c->v.max_rss_kib));
		json_object_set_new(o, "pack", p);
	} else {
		json_object_set_new(o, "pack", json_null());
	}
	json_object_set_new(o, "accepted", json_boolean(accepted));
	json_object_set_new(o, "reason", accepted ? json_null() : jstr(c->reason));
	if (json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
		die_errno("cannot write the JSON");
	json_decref(o);
}

/* The value of --ref, --base or --limit. */
static void value_option(struct check *c, int opt, const char *v)
{
	struct buf err = BUF_INIT;
	char oid[OID_HEX_MAX + 1];

	if (opt == 'r') {
		bundle_full_refname(&err, v);
		if (!*v || !bundle_refname_ok(err.buf, err.len))
			die("invalid ref name '%s'", v);
		strvec_push(&c->refs, err.buf);
	} else if (opt == 'b') {
		if (!bundle_oid_parse(v, strlen(v), oid))
			die("invalid object id '%s'", v);
		strvec_push(&c->bases, oid);
	} else {
		if (bundle_limits_parse(&c->lim, v, &err) < 0)
			die("--limit: %s", err.buf);
		c->limits_given = 1;
	}
	buf_release(&err);
}

static void parse_args(struct check *c, int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"ref", 0, OPT_TEXT, "NAME", 'r', "the bundle's refs must be exactly the set given"},
	    {"base", 0, OPT_TEXT, "OID", 'b',
	     "a prerequisite the bundle may need (without any, it may need none)"},
	    {"repo", 0, OPT_FILE, "DIR", 'R',
	     "with --pack: take thin-pack bases from the repository DIR"},
	    {"limit", 0, OPT_TEXT, "NAME=VALUE", 'l', "with --pack: a limit of the check"},
	    {"pack", 0, OPT_FLAG, NULL, 'p',
	     "also verify the pack: objects inflate, deltas resolve, checksum"},
	    {"json", 0, OPT_FLAG, NULL, 'j',
	     "print what was read, and the verdict, as JSON on stdout"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT;
	size_t nwords = 0;
	const char *v;
	int opt;

	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
		if (opt == 'h' || opt == OPT_BAD)
			usage_exit(opt == 'h', why.buf, usage_text);
		if (opt == OPT_WORD && !nwords++)
			c->file = v;
		else if (opt == OPT_WORD)
			continue;
		else if (opt == 'R')
			c->repo = v;
		else if (opt == 'p')
			c->pack = 1;
		else if (opt == 'j')
			c->json = 1;
		else
			value_option(c, opt, v);
	}
	for (; optind < argc; optind++)
		if (!nwords++)
			c->file = argv[optind];
	if (nwords != 1)
		usage_die(usage_text);
	if (c->repo && !c->pack)
		die("--repo needs --pack");
	if (c->limits_given && !c->pack)
		die("--limit needs --pack");
	buf_release(&why);
}

int main(int argc, char **argv)
{
	struct check c = {.refs = STRVEC_INIT, .bases = STRVEC_INIT, .lim = BUNDLE_LIMITS_INIT};
	struct stat st;
	int fd, ret, accepted;

	tool_init(argc, argv);
	parse_args(&c, argc, argv);

	fd = open(c.file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die_errno("cannot open '%s'", c.file);
	if (fstat(fd, &st) < 0)
		die_errno("cannot stat '%s'", c.file);
	if (!S_ISREG(st.st_mode))
		die("'%s' is not a regular file", c.file);
	if (c.repo && access(c.repo, R_OK | X_OK) < 0)
		die_errno("cannot open repository '%s'", c.repo);

	ret = bundle_header_read_fd(&c.h, fd);
	if (ret < 0)
		die_err(ret, "cannot read '%s'", c.file);
	if (ret) {
		c.reason = c.h.err.buf;
	} else {
		c.header_ok = 1;
		ret = bundle_header_expect(&c.h, c.refs.v, c.refs.nr, c.bases.v, c.bases.nr);
		if (ret)
			c.reason = c.h.err.buf;
	}
	if (!ret && c.pack) {
		struct bundle_check bc = BUNDLE_CHECK_INIT;

		/* The pack in a child under limits (bundle_check.h); it reads the header again. */
		c.pack_checked = 1;
		bc.fd = fd;
		strvec_pushv(&bc.refs, c.refs.v);
		strvec_pushv(&bc.bases, c.bases.v);
		bc.repo_dir = c.repo;
		bc.max_bytes = (uint64_t)st.st_size - c.h.pack_offset;
		bc.lim = c.lim;
		if ((ret = bundle_check_fork(&bc)) < 0)
			die_err(ret, "cannot start the check of '%s'", c.file);
		c.pack_ret = bundle_check_run(&bc, &c.v, NULL);
		bundle_check_clear(&bc);
		if (c.pack_ret == -ENOENT && c.repo)
			die("cannot open repository '%s'", c.repo);
		if (c.pack_ret < 0)
			die("cannot verify the pack of '%s': %s", c.file, c.v.err.buf);
		if (c.pack_ret)
			c.reason = c.v.err.buf;
		ret = c.pack_ret;
	}
	close(fd);

	accepted = ret == 0;
	if (c.json)
		print_json(&c, accepted);
	if (!accepted)
		fprintf(stderr, "%s: %s: %s\n", progname, c.file, c.reason);
	bundle_header_clear(&c.h);
	if (c.pack_checked)
		bundle_verdict_clear(&c.v);
	strvec_clear(&c.refs);
	strvec_clear(&c.bases);
	return accepted ? 0 : EXIT_REFUSED;
}
