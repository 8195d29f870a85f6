/*
 * libFuzzer target for common/tar_in: any byte stream, fed in chunks whose
 * sizes come from the input's first byte, must end in acceptance or a
 * refusal with a reason, never a crash, and must never write more than a
 * file's cap.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "git/tar_in.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int devnull = -1;
	struct tar_in_file files[] = {
	    {.name = "changes.bundle", .max = 4096},
	    {.name = "transcript.jsonl", .max = 1000},
	    {.name = "vm.log", .max = 0},
	    {.name = "result.json", .max = 600, .last = 1},
	};
	struct tar_in t;
	size_t chunk, off = 0;
	int ret = 0;

	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		files[i].fd = devnull;
	if (!size)
		return 0;
	chunk = (size_t)data[0] + 1;
	data++;
	size--;
	tar_in_init(&t, files, ARRAY_SIZE(files));
	while (off < size && ret == 0) {
		size_t n = size - off < chunk ? size - off : chunk;

		ret = tar_in_feed(&t, data + off, n);
		off += n;
	}
	if (ret == 0)
		ret = tar_in_finish(&t);
	if ((ret < 0) != (t.err.len > 0))
		abort();
	tar_in_clear(&t);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		if (files[i].seen && files[i].size > files[i].max)
			abort();
	return 0;
}
