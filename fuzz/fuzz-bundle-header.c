/*
 * libFuzzer target: the bundle header parser (common/git/bundle_read.c).
 * Seeds: fuzz/corpus/fuzz-bundle-header/ (t/make-bundle-fixtures).
 *
 * Besides not crashing, a parse it accepts must be consistent: the pack
 * offset inside the input, every refname valid, every id of the stated
 * format's length, counts within the caps.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "git/bundle_read.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bundle_header h = BUNDLE_HEADER_INIT;
	int ret = bundle_header_parse(&h, (const char *)data, size);

	if (ret == 0) {
		size_t hex = h.oid_format == BUNDLE_SHA256 ? 64 : 40;

		if (h.pack_offset > size || h.nr_refs == 0 || h.nr_refs > BUNDLE_REFS_MAX ||
		    h.nr_prereqs > BUNDLE_PREREQS_MAX || (h.version != 2 && h.version != 3))
			abort();
		for (size_t i = 0; i < h.nr_refs; i++)
			if (strlen(h.refs[i].oid) != hex ||
			    !bundle_refname_ok(h.refs[i].name, strlen(h.refs[i].name)))
				abort();
		for (size_t i = 0; i < h.nr_prereqs; i++)
			if (strlen(h.prereqs[i].oid) != hex)
				abort();
	} else if (ret != BUNDLE_REFUSED || !h.err.len) {
		abort();
	}
	bundle_header_clear(&h);
	return 0;
}
