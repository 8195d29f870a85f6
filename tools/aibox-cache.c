/*
 * aibox cache [list [--json]]  the dependency cache's entries
 * aibox cache size             what the cache takes, and its cap
 * aibox cache verify           check every entry's bytes; remove those that fail
 * aibox cache clear            remove every entry
 *
 * The cache and its rules: docs/cache.md.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/out.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "net/dep_cache.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox cache [list [--json]]\n"
    "       aibox cache size\n"
    "       aibox cache verify\n"
    "       aibox cache clear\n"
    "\n"
    "    list         the cached artifacts: size, last use, scope, URL\n"
    "                 (--json: one JSON array, keys in docs/json.md)\n"
    "    size         the bytes the cache takes, its entries and its cap\n"
    "    verify       read every entry and check its bytes against its SHA-256;\n"
    "                 an entry that fails is removed\n"
    "    clear        remove every entry\n"
    "    -h, --help   show this help\n"
    "\n"
    "Exit status: 0 done, 1 verify found (and removed) a bad entry, 2 usage or error.\n";

static void open_cache(struct dep_cache *c)
{
	struct buf why = BUF_INIT;
	uint64_t max;

	if (dep_cache_read_max(deps_cache_max_file(), &max, &why) < 0)
		die("%s", why.buf);
	if (dep_cache_open(c, deps_cache_dir(), max, NULL, &why) < 0)
		die("%s", why.buf);
}

struct list_ctx {
	json_t *array;
	struct strvec rows;
	uint64_t bytes;
	size_t entries, bad;
};

static int list_one(const struct dep_cache_entry *e, void *data)
{
	struct list_ctx *l = data;
	struct buf key = BUF_INIT, when = BUF_INIT;
	struct tm tm;

	out_sanitize(&key, e->key, strlen(e->key));
	l->entries++;
	l->bytes += e->size;
	if (!e->key[0]) {
		l->bad++;
		buf_release(&key);
		return 0;
	}
	if (l->array) {
		json_t *o = json_object();

		json_object_set_new(o, "url", json_stringn(key.buf, key.len));
		json_object_set_new(o, "scope", e->scope[0] ? json_string(e->scope) : json_null());
		json_object_set_new(o, "size", json_integer((json_int_t)e->size));
		json_object_set_new(o, "sha256", json_string(e->sha256));
		json_object_set_new(o, "used", json_integer((json_int_t)e->atime));
		json_array_append_new(l->array, o);
	} else {
		gmtime_r(&e->atime, &tm);
		buf_grow(&when, 32);
		buf_setlen(&when, strftime(when.buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm));
		/* Sorted by URL, then scope: the line after a tab that sorts before it. */
		strvec_pushf(&l->rows, "%s %s\t%12llu  %s  %s  %s", key.buf, e->scope,
		             (unsigned long long)e->size, when.buf, e->scope[0] ? e->scope : "-",
		             key.buf);
	}
	buf_release(&key);
	buf_release(&when);
	return 0;
}

static int cmp_row(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmd_list(int json)
{
	struct dep_cache c;
	struct list_ctx l = {json ? json_array() : NULL, STRVEC_INIT};
	struct buf why = BUF_INIT;

	open_cache(&c);
	if (dep_cache_walk(&c, list_one, &l, &why) < 0)
		die("%s", why.buf);
	if (json) {
		char *s = json_dumps(l.array, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		puts(s);
		free(s);
		json_decref(l.array);
	} else {
		qsort(l.rows.v, l.rows.nr, sizeof(*l.rows.v), cmp_row);
		if (l.rows.nr)
			printf("%12s  %-20s  %s  %s\n", "SIZE", "USED", "SCOPE", "URL");
		for (size_t i = 0; i < l.rows.nr; i++)
			puts(strchr(l.rows.v[i], '\t') + 1);
	}
	strvec_clear(&l.rows);
	dep_cache_close(&c);
	return 0;
}

static int cmd_size(void)
{
	struct dep_cache c;
	struct list_ctx l = {NULL, STRVEC_INIT};
	struct buf why = BUF_INIT;

	open_cache(&c);
	if (dep_cache_walk(&c, list_one, &l, &why) < 0)
		die("%s", why.buf);
	strvec_clear(&l.rows);
	printf("%llu bytes in %zu entries, cap %llu bytes (%s)\n", (unsigned long long)l.bytes,
	       l.entries, (unsigned long long)c.max_bytes, c.root);
	dep_cache_close(&c);
	return 0;
}

struct verify_ctx {
	struct dep_cache *c;
	size_t bad;
};

static int verify_one(const struct dep_cache_entry *e, void *data)
{
	struct buf why = BUF_INIT;
	struct verify_ctx *v = data;
	struct dep_cache_id judged;
	int ret = dep_cache_verify(e->path, &judged, &why);

	if (ret == -ENOENT) {
		/* Evicted, cleared or filled anew since it was listed: gone, not bad. */
		warning("%s: not checked", why.buf);
	} else if (ret < 0) {
		/* Only the file judged: never one a task's filler put in its place since. */
		ret = dep_cache_remove(v->c, e->path, &judged);
		if (ret == -ESTALE)
			warning("%s: filled anew since, the new one left", why.buf);
		else if (ret == -EAGAIN)
			error("%s: left, a task's filler holds its lock", why.buf);
		else if (ret < 0)
			error("%s: cannot remove it: %s", why.buf, strerror(-ret));
		else
			error("%s: removed", why.buf);
		v->bad += ret != -ESTALE;
	}
	buf_release(&why);
	return 0;
}

static int cmd_verify(void)
{
	struct dep_cache c;
	struct verify_ctx v = {&c, 0};
	struct buf why = BUF_INIT;

	open_cache(&c);
	if (dep_cache_walk(&c, verify_one, &v, &why) < 0)
		die("%s", why.buf);
	dep_cache_close(&c);
	return v.bad ? EXIT_REFUSED : 0;
}

static int cmd_clear(void)
{
	struct dep_cache c;
	struct buf why = BUF_INIT;
	size_t removed = 0;

	open_cache(&c);
	if (dep_cache_trim(&c, 0, &removed, &why) < 0)
		die("%s", why.buf);
	printf("removed %zu entries\n", removed);
	dep_cache_close(&c);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct opt_spec json[] = {
	    {"json", 0, OPT_FLAG, NULL, 'j', "one JSON array, keys in docs/json.md"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	static const struct opt_sub subs[] = {
	    {"list", json}, {"size", NULL}, {"verify", NULL}, {"clear", NULL}, {NULL, NULL}};
	struct strvec words = STRVEC_INIT;
	struct buf why = BUF_INIT;
	unsigned flags = 0;
	int i;

	tool_init(argc, argv);
	i = opt_subcommand(argc, argv, &why);
	if (i == OPT_DESCRIBE)
		opt_describe_subs_exit(subs);
	if (i <= 0)
		usage_exit(i == 0, why.buf, usage_text);
	if (i == argc)
		return cmd_list(0);
	argc -= i;
	argv += i;
	if (!strcmp(argv[0], "list")) {
		opt_words_exit(argc, argv, json, 0, &flags, &words, usage_text);
		return cmd_list(flags & 1);
	}
	if (!strcmp(argv[0], "size")) {
		opt_words_exit(argc, argv, NULL, 0, &flags, &words, usage_text);
		return cmd_size();
	}
	if (!strcmp(argv[0], "verify")) {
		opt_words_exit(argc, argv, NULL, 0, &flags, &words, usage_text);
		return cmd_verify();
	}
	if (!strcmp(argv[0], "clear")) {
		opt_words_exit(argc, argv, NULL, 0, &flags, &words, usage_text);
		return cmd_clear();
	}
	error("unknown subcommand '%s'", argv[0]);
	usage_die(usage_text);
}
