/*
 * libFuzzer target for a Go module zip's h1 (common/net/go_sum.c), which the
 * proxy works out from a zip an upstream sent before it stores it: the
 * input (after its first byte) is the zip, read with pread() from a memfd
 * as the proxy reads its fill, at an offset, once whole (go_zip_h1()) and
 * once a step at a time (go_zip_check_*()), each step's budget from the
 * first byte.  Besides not crashing: both give the same verdict, and the
 * same h1 when they take it; a refusal comes with a reason.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/buf.h"
#include "net/go_sum.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the zip starts in the file: the proxy's fill has a header before it. */
#define AT 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	unsigned char h1[32], h2[32];
	struct buf why = BUF_INIT, why2 = BUF_INIT;
	struct go_zip_check *k = NULL;
	uint64_t budget;
	int a, b;

	if (size < 1 || size > (4u << 20))
		return 0;
	if (fd < 0 && (fd = memfd_create("fuzz-go-zip", MFD_CLOEXEC)) < 0)
		__builtin_trap();
	budget = (uint64_t)data[0] * 97 + 1;
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data + 1, size - 1, AT) != (ssize_t)(size - 1))
		__builtin_trap();

	a = go_zip_h1(fd, AT, size - 1, h1, &why);
	if (a < 0 && !why.len)
		__builtin_trap();
	b = go_zip_check_begin(fd, AT, size - 1, &k, &why2);
	if (b == 0) {
		if (!k)
			__builtin_trap();
		while ((b = go_zip_check_step(k, budget, h2, &why2)) == 1)
			;
	} else if (k) {
		__builtin_trap();
	}
	go_zip_check_free(k);
	if (a != b || (a == 0 && memcmp(h1, h2, sizeof(h1))) || (b < 0 && !why2.len))
		__builtin_trap();
	buf_release(&why);
	buf_release(&why2);
	return 0;
}
