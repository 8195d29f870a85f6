/*
 * test-cache: the dependency cache's store (common/net/dep_cache.h), for
 * t/3012-dep-cache.bats.  The store is filled only by the proxy; this drives
 * the same calls from a shell.
 *
 *   test-cache put ROOT MAX KEY SCOPE [ALGO HEX] [--slow MS] [--cut N]
 *	fill KEY in SCOPE ("-" for none) from stdin, waiting for the key's
 *	lock; with ALGO and HEX, the bytes' ALGO digest must be HEX.  Prints
 *	"stored", or "found" when another filler made the entry meanwhile, or
 *	"refused: WHY".  --slow sleeps MS ms after each 4 KiB; --cut N writes N
 *	bytes and then kills itself (a proxy killed half way).
 *   test-cache hold ROOT MAX SIZE
 *	one process (a task's proxy) begins fills of the keys hold.1, hold.2
 *	... and writes SIZE bytes into each, 4 KiB at a time, until the store
 *	refuses a piece (that fill is kept as it is, as a VM that stopped
 *	reading would hold it) or the next fill's header; prints "holding N
 *	bytes: WHY" (N its fills' bytes on disk, headers included), then holds
 *	them, written nowhere, until stdin closes
 *   test-cache get ROOT KEY SCOPE
 *	the entry's bytes on stdout, exit 0; "miss" and exit 1 when there is
 *	none; "refused: WHY" and exit 2 when it cannot be read
 *   test-cache key-ok KEY / scope-ok SCOPE
 *	"yes" or "no"
 *
 * The rules (common/proxy/dep_rules.h):
 *   test-cache request
 *	dep_request_cacheable() of the request head on stdin: "cacheable" or
 *	"bypass: WHY"
 *   test-cache key HOST PORT TARGET / url BASE URL
 *	dep_key() / dep_key_from_url(): the key, or "refused: WHY"
 *   test-cache npm|pypi|crates|debian BASE FILE [KEY ...]
 *	learn from the package document, index page or sparse index file in
 *	FILE fetched from BASE (FILE may be given twice, as "FILE,FILE"):
 *	"learnt N", then for each KEY "KEY ALGO HEX" or "KEY none"; debian:N
 *	reads an index N bytes at a time, as the proxy does as it forwards one
 *   test-cache crate TARGET
 *	dep_crate_download(): the crate's id, or "refused: WHY"
 *   test-cache deb-path TARGET
 *	dep_deb_path(): "other", "package", "index" or "by-hash ALGO HEX"
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hex.h"
#include "base/num.h"
#include "net/dep_cache.h"
#include "net/http.h"
#include "proxy/dep_debian.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

static const char *scope_arg(const char *s)
{
	return strcmp(s, "-") ? s : "";
}

static int cmd_put(int argc, char **argv)
{
	struct dep_cache c;
	struct dep_cache_fill f;
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	struct buf why = BUF_INIT;
	const char *algo = NULL, *hex = NULL;
	unsigned char want[64];
	size_t want_len = 0;
	long slow = 0, cut = -1;
	uint64_t max;
	char chunk[4096];
	int i, ret;

	if (argc < 6 || parse_size(argv[3], 0, UINT64_MAX, &max) < 0)
		die("usage: test-cache put ROOT MAX KEY SCOPE [ALGO HEX] [--slow MS] [--cut N]");
	for (i = 6; i < argc; i++) {
		if (!strcmp(argv[i], "--slow") && i + 1 < argc)
			slow = atol(argv[++i]);
		else if (!strcmp(argv[i], "--cut") && i + 1 < argc)
			cut = atol(argv[++i]);
		else if (!algo && i + 1 < argc) {
			algo = argv[i];
			hex = argv[++i];
		} else
			die("test-cache put: bad argument '%s'", argv[i]);
	}
	if (hex) {
		want_len = strlen(hex) / 2;
		if (want_len > sizeof(want))
			die("test-cache put: digest too long");
		for (size_t k = 0; k < want_len; k++)
			want[k] =
			    (unsigned char)(hex_digit(hex[2 * k]) << 4 | hex_digit(hex[2 * k + 1]));
	}
	if (dep_cache_open(&c, argv[2], max, NULL, &why) < 0)
		die("%s", why.buf);
	ret = dep_cache_fill_begin(&c, argv[4], scope_arg(argv[5]), algo, 1, &f, &e, &why);
	if (ret == 1) {
		puts("found");
		dep_cache_entry_clear(&e);
		ret = 0;
		goto out;
	}
	if (ret < 0) {
		printf("refused: %s\n", why.buf);
		ret = 1;
		goto out;
	}
	for (long done = 0;;) {
		ssize_t n = read(0, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_errno("test-cache: cannot read stdin");
		if (!n)
			break;
		if (cut >= 0 && done + n > cut)
			n = cut - done;
		if (dep_cache_fill_write(&f, chunk, (size_t)n, &why) < 0) {
			dep_cache_fill_abort(&f);
			printf("refused: %s\n", why.buf);
			ret = 1;
			goto out;
		}
		done += n;
		if (cut >= 0 && done >= cut)
			raise(SIGKILL);
		if (slow)
			nanosleep(&(struct timespec){slow / 1000, (slow % 1000) * 1000000}, NULL);
	}
	if (cut >= 0)
		raise(SIGKILL);
	ret = 0;
	if (dep_cache_fill_commit(&f, hex ? want : NULL, want_len, &why) < 0) {
		printf("refused: %s\n", why.buf);
		ret = 1;
	} else
		puts("stored");
out:
	dep_cache_close(&c);
	buf_release(&why);
	return ret;
}

static int cmd_hold(int argc, char **argv)
{
	struct dep_cache c;
	struct dep_cache_fill f[512];
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	struct buf why = BUF_INIT, key = BUF_INIT;
	char chunk[4096] = {0};
	uint64_t max, size;
	size_t nr = 0;

	if (argc != 5 || parse_size(argv[3], 0, UINT64_MAX, &max) < 0 ||
	    parse_size(argv[4], 0, UINT64_MAX, &size) < 0)
		die("usage: test-cache hold ROOT MAX SIZE");
	if (dep_cache_open(&c, argv[2], max, NULL, &why) < 0)
		die("%s", why.buf);
	while (!why.len && nr < sizeof(f) / sizeof(*f)) {
		buf_reset(&key);
		buf_addf(&key, "https://registry.example/hold/-/hold-%ld-%zu.tgz", (long)getpid(),
		         nr + 1);
		if (dep_cache_fill_begin(&c, key.buf, "", NULL, 1, &f[nr], &e, &why) != 0)
			break;
		for (uint64_t done = 0; done < size && !why.len; done += sizeof(chunk))
			dep_cache_fill_write(&f[nr], chunk,
			                     size - done < sizeof(chunk) ? (size_t)(size - done)
			                                                 : sizeof(chunk),
			                     &why);
		nr++;
	}
	printf("holding %llu bytes: %s\n", (unsigned long long)c.filling, why.buf);
	fflush(stdout);
	while (read(0, chunk, sizeof(chunk)) > 0)
		;
	for (size_t i = 0; i < nr; i++)
		dep_cache_fill_abort(&f[i]);
	dep_cache_close(&c);
	buf_release(&why);
	buf_release(&key);
	return 0;
}

static int cmd_get(int argc, char **argv)
{
	struct dep_cache c;
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	struct buf why = BUF_INIT;
	static char chunk[65536];
	int ret;

	if (argc != 5)
		die("usage: test-cache get ROOT KEY SCOPE");
	if (dep_cache_open(&c, argv[2], UINT64_MAX, NULL, &why) < 0)
		die("%s", why.buf);
	ret = dep_cache_lookup(&c, argv[3], scope_arg(argv[4]), &e, &why);
	if (ret <= 0) {
		if (ret < 0)
			printf("refused: %s\n", why.buf);
		else
			puts("miss");
		dep_cache_close(&c);
		buf_release(&why);
		return ret < 0 ? 2 : 1;
	}
	/* Copied as the proxy would serve it: in pieces, never all in memory. */
	for (uint64_t left = e.size; left;) {
		ssize_t n = read(e.fd, chunk, left < sizeof(chunk) ? left : sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("test-cache: entry '%s' is not %llu bytes", e.path,
			    (unsigned long long)e.size);
		if (fwrite(chunk, 1, (size_t)n, stdout) != (size_t)n)
			die_errno("test-cache: cannot write");
		left -= (uint64_t)n;
	}
	dep_cache_entry_clear(&e);
	dep_cache_close(&c);
	return 0;
}

static int cmd_request(void)
{
	struct buf head = BUF_INIT, why = BUF_INIT;
	struct http_head h;

	if (buf_read_fd(&head, 0, 65536) < 0 ||
	    http_parse_request(head.buf, head.len, &h, &why) <= 0)
		die("test-cache: not a request head: %s", why.buf);
	if (dep_request_cacheable(&h, &why))
		puts("cacheable");
	else
		printf("bypass: %s\n", why.buf);
	buf_release(&head);
	buf_release(&why);
	return 0;
}

static int cmd_key(int argc, char **argv)
{
	struct buf key = BUF_INIT, why = BUF_INIT;
	int ret;

	if (!strcmp(argv[1], "key"))
		ret = dep_key(argv[2], atoi(argv[3]), argv[4], strlen(argv[4]), &key, &why);
	else if (!strcmp(argv[1], "crate"))
		ret = dep_crate_download(argv[2], strlen(argv[2]), &key, &why);
	else
		ret = dep_key_from_url(argv[2], argv[3], &key, &why);
	if (ret < 0)
		printf("refused: %s\n", why.buf);
	else
		puts(key.buf);
	buf_release(&key);
	buf_release(&why);
	return 0;
}

/*
 * dep_deb_index() as the proxy reads an index: piece bytes at a time, then
 * the end.  With TEST_CACHE_TIMES set, stderr gets the longest piece's time
 * and the end's (what one step of the proxy's event loop costs at most).
 */
static int deb_in_pieces(struct dep_digests *d, const char *base, const struct buf *doc,
                         size_t piece, struct buf *why)
{
	struct dep_deb_reader *r = dep_deb_reader_new(base, why);
	int64_t start = clock_ms(), t, longest = 0, all;
	size_t n = 0, held;
	int ret = 0;

	if (!r)
		return -EINVAL;
	for (size_t off = 0; off < doc->len && !ret; off += piece, n++) {
		t = clock_ms();
		ret = dep_deb_reader_feed(r, doc->buf + off,
		                          doc->len - off < piece ? doc->len - off : piece, why);
		t = clock_ms() - t;
		longest = t > longest ? t : longest;
	}
	all = clock_ms() - start;
	held = dep_deb_reader_size(r);
	t = clock_ms();
	if (!ret)
		ret = dep_deb_reader_end(r, d, why);
	t = clock_ms() - t;
	if (getenv("TEST_CACHE_TIMES"))
		fprintf(stderr,
		        "%zu pieces in %lld ms, the longest %lld ms; the end %lld ms, holding %zu "
		        "KiB before it\n",
		        n, (long long)all, (long long)longest, (long long)t, held >> 10);
	dep_deb_reader_free(r);
	return ret;
}

static int cmd_learn(int argc, char **argv)
{
	struct dep_digests d = DEP_DIGESTS_INIT;
	struct buf why = BUF_INIT;
	char *files = xstrdup(argv[3]), *save = NULL;
	int learnt = 0;

	for (char *f = strtok_r(files, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		struct buf doc = BUF_INIT;
		int fd = open(f, O_RDONLY), ret;

		if (fd < 0 || buf_read_fd(&doc, fd, DEP_META_MAX + 1) < 0)
			die_errno("test-cache: cannot read '%s'", f);
		close(fd);
		if (!strcmp(argv[1], "npm"))
			ret = dep_npm_document(&d, argv[2], doc.buf, doc.len, &why);
		else if (!strcmp(argv[1], "pypi"))
			ret = dep_pypi_index(&d, argv[2], doc.buf, doc.len, &why);
		else if (!strcmp(argv[1], "crates"))
			ret = dep_crates_index(&d, argv[2], doc.buf, doc.len, &why);
		else if (argv[1][6] == ':')
			ret = deb_in_pieces(&d, argv[2], &doc, (size_t)atoi(argv[1] + 7), &why);
		else
			ret = dep_deb_index(&d, argv[2], doc.buf, doc.len, &why);
		buf_release(&doc);
		if (ret < 0) {
			printf("refused: %s\n", why.buf);
			dep_digests_clear(&d);
			buf_release(&why);
			free(files);
			return 1;
		}
		learnt += ret;
	}
	printf("learnt %d\n", learnt);
	for (int i = 4; i < argc; i++) {
		const struct dep_digest *g = dep_digests_find(&d, argv[i]);
		char hex[129];

		if (!g) {
			printf("%s none\n", argv[i]);
			continue;
		}
		hex_encode(hex, g->md, g->len);
		printf("%s %s %s\n", argv[i], g->algo, hex);
	}
	dep_digests_clear(&d);
	free(files);
	return 0;
}

static int cmd_deb_path(const char *t)
{
	static const char *const names[] = {"other", "package", "index", "by-hash"};
	struct dep_digest d;
	enum dep_deb_path k = dep_deb_path(t, strlen(t), &d);
	char hex[129];

	if (k != DEP_DEB_BY_HASH)
		return puts(names[k]), 0;
	hex_encode(hex, d.md, d.len);
	printf("by-hash %s %s\n", d.algo, hex);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "key-ok"))
		return puts(dep_cache_key_ok(argv[2]) ? "yes" : "no"), 0;
	if (argc == 3 && !strcmp(argv[1], "scope-ok"))
		return puts(dep_cache_scope_ok(argv[2]) ? "yes" : "no"), 0;
	if (argc >= 2 && !strcmp(argv[1], "put"))
		return cmd_put(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "hold"))
		return cmd_hold(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "get"))
		return cmd_get(argc, argv);
	if (argc == 2 && !strcmp(argv[1], "request"))
		return cmd_request();
	if ((argc == 5 && !strcmp(argv[1], "key")) || (argc == 4 && !strcmp(argv[1], "url")) ||
	    (argc == 3 && !strcmp(argv[1], "crate")))
		return cmd_key(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "deb-path"))
		return cmd_deb_path(argv[2]);
	if (argc >= 4 && (!strcmp(argv[1], "npm") || !strcmp(argv[1], "pypi") ||
	                  !strcmp(argv[1], "crates") || !strcmp(argv[1], "debian") ||
	                  (!strncmp(argv[1], "debian:", 7) && atoi(argv[1] + 7) > 0)))
		return cmd_learn(argc, argv);
	die("usage: test-cache "
	    "put|get|key-ok|scope-ok|request|key|url|crate|deb-path|npm|pypi|crates|"
	    "debian ...");
}
