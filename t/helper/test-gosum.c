/*
 * test-gosum: Go modules' rules in the dependency cache (common/net/go_sum.h,
 * common/proxy/dep_go.h), for t/3012-dep-cache.bats.
 *
 *   test-gosum zip[:N] FILE
 *	go_zip_h1() of the zip FILE: "h1:BASE64", or "refused: WHY"; zip:N
 *	steps go_zip_check_step() with a budget of N bytes, as the proxy does,
 *	and with TEST_GOSUM_TIMES set prints to stderr its steps, the
 *	longest one's time and the whole's
 *   test-gosum vkey KEY
 *	go_vkey_parse(): "NAME HASH", or "refused: WHY"
 *   test-gosum lookup BASE FILE KEY[,KEY...] [TARGET ...]
 *	learn from the checksum database answer in FILE fetched from BASE,
 *	trusting the verifier keys given: "learnt N" or "refused: WHY", then
 *	for each TARGET (a GOPROXY path) "TARGET zip|mod h1:BASE64",
 *	"TARGET zip|mod none", or "TARGET not a download"
 *   test-gosum unescape path|version S
 *	dep_go_unescape(): the decoded S, or "refused: WHY"
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "net/go_sum.h"
#include "proxy/dep_go.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

static void print_h1(const unsigned char md[32])
{
	unsigned char b64[48];

	EVP_EncodeBlock(b64, md, 32);
	printf("h1:%s\n", b64);
}

/* The zip's h1 in steps of budget bytes: 0 or a refusal, as go_zip_h1(). */
static int zip_in_steps(int fd, uint64_t size, uint64_t budget, unsigned char md[32],
                        struct buf *why)
{
	struct go_zip_check *k;
	int64_t start = clock_ms(), t, longest, all;
	size_t steps = 0;
	int ret = go_zip_check_begin(fd, 0, size, &k, why);

	longest = clock_ms() - start;
	while (!ret) {
		t = clock_ms();
		ret = go_zip_check_step(k, budget, md, why);
		t = clock_ms() - t;
		steps++;
		longest = t > longest ? t : longest;
		if (ret != 1)
			break;
		ret = 0;
	}
	all = clock_ms() - start;
	go_zip_check_free(k);
	if (getenv("TEST_GOSUM_TIMES"))
		fprintf(stderr, "the directory and %zu steps in %lld ms, the longest %lld ms\n",
		        steps, (long long)all, (long long)longest);
	return ret;
}

static int cmd_zip(const char *how, const char *file)
{
	struct stat st;
	struct buf why = BUF_INIT;
	unsigned char md[32];
	int fd = open(file, O_RDONLY), ret;

	if (fd < 0 || fstat(fd, &st) < 0)
		die_errno("test-gosum: cannot open '%s'", file);
	if (how[3] == ':')
		ret = zip_in_steps(fd, (uint64_t)st.st_size, strtoull(how + 4, NULL, 10), md, &why);
	else
		ret = go_zip_h1(fd, 0, (uint64_t)st.st_size, md, &why);
	if (ret < 0)
		printf("refused: %s\n", why.buf);
	else
		print_h1(md);
	close(fd);
	buf_release(&why);
	return 0;
}

static int cmd_lookup(int argc, char **argv)
{
	struct dep_digests d = DEP_DIGESTS_INIT;
	struct buf why = BUF_INIT, doc = BUF_INIT;
	struct go_vkey keys[8];
	char *list = xstrdup(argv[4]), *save = NULL;
	size_t nr = 0;
	int fd = open(argv[3], O_RDONLY), ret;

	if (fd < 0 || buf_read_fd(&doc, fd, DEP_META_MAX + 1) < 0)
		die_errno("test-gosum: cannot read '%s'", argv[3]);
	close(fd);
	for (char *k = strtok_r(list, ",", &save); k && nr < 8; k = strtok_r(NULL, ",", &save))
		if (go_vkey_parse(k, &keys[nr++], &why) < 0)
			die("test-gosum: %s", why.buf);
	ret = dep_go_lookup(&d, argv[2], doc.buf, doc.len, keys, nr, &why);
	if (ret < 0)
		printf("refused: %s\n", why.buf);
	else
		printf("learnt %d\n", ret);
	for (int i = 5; i < argc; i++) {
		const struct dep_digest *g;
		int zip;

		if (!dep_go_download(&d, argv[i], strlen(argv[i]), &g, &zip)) {
			printf("%s not a download\n", argv[i]);
			continue;
		}
		printf("%s %s ", argv[i], zip ? "zip" : "mod");
		if (g)
			print_h1(g->md);
		else
			puts("none");
	}
	dep_digests_clear(&d);
	buf_release(&doc);
	buf_release(&why);
	free(list);
	return 0;
}

int main(int argc, char **argv)
{
	struct buf out = BUF_INIT, why = BUF_INIT;
	struct go_vkey k;

	if (argc == 3 && (!strcmp(argv[1], "zip") ||
	                  (!strncmp(argv[1], "zip:", 4) && strtoull(argv[1] + 4, NULL, 10) > 0)))
		return cmd_zip(argv[1], argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "lookup"))
		return cmd_lookup(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "vkey")) {
		if (go_vkey_parse(argv[2], &k, &why) < 0)
			printf("refused: %s\n", why.buf);
		else
			printf("%s %08x\n", k.name, k.hash);
	} else if (argc == 4 && !strcmp(argv[1], "unescape")) {
		if (dep_go_unescape(argv[3], strlen(argv[3]), !strcmp(argv[2], "version"), &out,
		                    &why) < 0)
			printf("refused: %s\n", why.buf);
		else
			puts(out.buf);
	} else {
		die("usage: test-gosum zip|vkey|lookup|unescape ...");
	}
	buf_release(&out);
	buf_release(&why);
	return 0;
}
