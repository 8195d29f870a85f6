/* libFuzzer: the project config parser on arbitrary bytes (make fuzz). */
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config cfg;
	struct buf err = BUF_INIT;

	config_parse(&cfg, "fuzz.yaml", (const char *)data, size, &err);
	config_release(&cfg);
	buf_release(&err);
	return 0;
}
