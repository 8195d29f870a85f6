/*
 * libFuzzer target: the pack verifier (our walk, then our delta resolution
 * and the fsck checks).
 * Seeds: fuzz/corpus/fuzz-bundle-pack/ (the fixtures' packs).
 *
 * A random mutation almost always breaks the trailing checksum, which is
 * checked last; so for inputs of odd length the target puts the right
 * checksum in place, letting the fuzzer reach the object walk's end and
 * the delta resolution.  Even lengths keep the checksum as given.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bundle_pack_opts opts = BUNDLE_PACK_OPTS_INIT;
	struct bundle_pack_result res = BUNDLE_PACK_RESULT_INIT;
	uint8_t *copy = NULL;
	int ret;

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
