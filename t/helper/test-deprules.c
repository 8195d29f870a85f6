/*
 * test-deprules: more of the dependency cache's rules (common/proxy/
 * dep_rules.h, dep_pypi.h) for t/3012-dep-cache.bats.
 *
 *   test-deprules pypi-file TARGET...
 *	dep_pypi_file() of each: the BLAKE2b-256 the path names, in hex, or
 *	"refused: WHY", one line a TARGET
 *   test-deprules bench N
 *	learn N/5 PyPI files from one index page (dep_pypi_index()), then a
 *	second page giving every other one another digest, and look each up:
 *	"learnt N", "found F", "forgotten G"; then N keys learnt straight into
 *	another table, learnt again (every other one with other bytes) and
 *	looked up: "table N found F", and "cpu_ms MS", the process's CPU time
 *	for that second table alone
 *   test-deprules bytes KEYLEN
 *	learn keys of KEYLEN bytes until the table takes no more:
 *	"learnt N bytes B"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "proxy/dep_pypi.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

static const char base[] = "https://pypi.example/simple/p/";

static void page(struct buf *b, int n, int other)
{
	buf_reset(b);
	for (int i = 0; i < n; i++) {
		/* The digest: i's, or another for every other i on the second page. */
		buf_addf(b,
		         "<a href=\"https://files.example/packages/%02x/%02x/p-%d.whl#sha256="
		         "%056x%08x\">p-%d.whl</a>\n",
		         i & 255, (i >> 8) & 255, i, 0u, (unsigned)i ^ (other && i % 2 ? 1u : 0u),
		         i);
	}
}

static long cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmd_bench(int n)
{
	struct dep_digests d = DEP_DIGESTS_INIT, t = DEP_DIGESTS_INIT;
	struct buf one = BUF_INIT, two = BUF_INIT, key = BUF_INIT;
	int learnt, found = 0, forgotten = 0, tfound = 0;
	long t0, ms;

	page(&one, n / 5, 0);
	page(&two, n / 5, 1);
	learnt = dep_pypi_index(&d, base, one.buf, one.len, NULL);
	learnt += dep_pypi_index(&d, base, two.buf, two.len, NULL);
	/* The table alone, timed: n learnt, n learnt again (half of them other bytes), n found. */
	t0 = cpu_ms();
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < n; i++) {
			unsigned char md[32] = {0};

			md[0] = (unsigned char)(round && i % 2);
			buf_reset(&key);
			buf_addf(&key, "https://files.example/bench/%d/p-%d.whl", i, i);
			dep_digests_learn(&t, key.buf, "sha256", md, 32);
		}
	for (int i = 0; i < n; i++) {
		buf_reset(&key);
		buf_addf(&key, "https://files.example/bench/%d/p-%d.whl", i, i);
		tfound += dep_digests_find(&t, key.buf) != NULL;
	}
	ms = cpu_ms() - t0;
	for (int i = 0; i < n / 5; i++) {
		const struct dep_digest *g;

		buf_reset(&key);
		buf_addf(&key, "https://files.example/packages/%02x/%02x/p-%d.whl", i & 255,
		         (i >> 8) & 255, i);
		g = dep_digests_find(&d, key.buf);
		if (!g)
			forgotten++;
		else if (g->len == 32 && g->md[31] == (unsigned char)i &&
		         g->md[30] == (unsigned char)(i >> 8))
			found++;
	}
	printf("learnt %d\nfound %d\nforgotten %d\ntable %zu found %d\ncpu_ms %ld\n", learnt, found,
	       forgotten, t.nr, tfound, ms);
	dep_digests_clear(&d);
	dep_digests_clear(&t);
	buf_release(&one);
	buf_release(&two);
	buf_release(&key);
	return 0;
}

static int cmd_bytes(size_t kl)
{
	struct dep_digests d = DEP_DIGESTS_INIT;
	struct buf key = BUF_INIT;
	unsigned char md[32] = {0};
	int learnt = 0;

	for (int i = 0; i < DEP_DIGESTS_MAX + 1; i++) {
		buf_reset(&key);
		buf_addf(&key, "https://files.example/%d/", i);
		if (key.len < kl) {
			size_t at = key.len;

			buf_grow(&key, kl - at);
			memset(key.buf + at, 'x', kl - at);
			buf_setlen(&key, kl);
		}
		if (!dep_digests_learn(&d, key.buf, "sha256", md, 32))
			break;
		learnt++;
	}
	printf("learnt %d bytes %zu\n", learnt, d.bytes);
	dep_digests_clear(&d);
	buf_release(&key);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "pypi-file")) {
		for (int i = 2; i < argc; i++) {
			struct buf why = BUF_INIT;
			unsigned char md[DEP_PYPI_B2_LEN];
			char hex[2 * DEP_PYPI_B2_LEN + 1];

			if (dep_pypi_file(argv[i], strlen(argv[i]), md, &why) < 0) {
				printf("refused: %s\n", why.buf);
				buf_release(&why);
				continue;
			}
			hex_encode(hex, md, sizeof(md));
			puts(hex);
		}
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "bench"))
		return cmd_bench(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "bytes"))
		return cmd_bytes((size_t)atoi(argv[2]));
	die("usage: test-deprules pypi-file TARGET... | bench N | bytes KEYLEN");
}
