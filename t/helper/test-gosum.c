/*
 * test-gosum: Go modules' rules in the dependency cache (common/net/go_sum.h,
 * common/proxy/dep_go.h), for t/3012-dep-cache.bats.
 *
 *   test-gosum zip FILE
 *	go_zip_h1() of the zip FILE: "h1:BASE64", or "refused: WHY"
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

static int cmd_zip(const char *file)
{
	struct stat st;
	struct buf why = BUF_INIT;
	unsigned char md[32];
	int fd = open(file, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0)
		die_errno("test-gosum: cannot open '%s'", file);
	if (go_zip_h1(fd, 0, (uint64_t)st.st_size, md, &why) < 0)
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

	if (argc == 3 && !strcmp(argv[1], "zip"))
		return cmd_zip(argv[2]);
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
