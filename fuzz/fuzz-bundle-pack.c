/*
 * libFuzzer target: the pack verifier (our walk, then libgit2's indexer).
 * Seeds: fuzz/corpus/fuzz-bundle-pack/ (the fixtures' packs).
 *
 * A random mutation almost always breaks the trailing checksum, which is
 * checked last; so for inputs of odd length the target puts the right
 * checksum in place, letting the fuzzer reach the object walk's end and
 * libgit2's delta resolution.  Even lengths keep the checksum as given.
 *
 * The indexer writes its index into a private folder: one per process,
 * made here once, under $TMPDIR (use a tmpfs for speed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "git/bundle_read.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char tmp[4096];

static void cleanup(void)
{
	rmdir(tmp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *t = getenv("TMPDIR");

	(void)argc;
	(void)argv;
	snprintf(tmp, sizeof(tmp), "%s/fuzz-bundle-pack.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmp))
		abort();
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bundle_pack_opts opts = BUNDLE_PACK_OPTS_INIT;
	struct bundle_pack_result res = BUNDLE_PACK_RESULT_INIT;
	uint8_t *copy = NULL;
	int ret;

	opts.tmp_parent = tmp;
	if (size >= 32 && size % 2) {
		unsigned int n = 0;

		copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		if (!EVP_Digest(copy, size - 20, copy + size - 20, &n, EVP_sha1(), NULL))
			abort();
		data = copy;
	}
	ret = bundle_pack_verify_buf(data, size, &opts, &res);
	free(copy);

	if (ret == BUNDLE_REFUSED && !res.err.len)
		abort();
	if (ret == 0 && (size < 32 || res.checksum[0] == '\0'))
		abort();
	bundle_pack_result_clear(&res);
	return 0;
}
