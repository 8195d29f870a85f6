/*
 * libFuzzer target for common/session_file: any bytes as a task's
 * session.jsonl must be accepted with a session id of the right form, or
 * refused with a reason, never a crash.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/session_file.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf why = BUF_INIT;
	char id[SESSION_ID_LEN + 1];
	int ret = session_file_check((const char *)data, size, id, &why);

	if (ret == 0 && !session_id_valid(id))
		abort();
	if (ret < 0 && !why.len)
		abort();
	buf_release(&why);
	return 0;
}
