/*
 * libFuzzer target for common/session_mend: a session file and a transcript,
 * both from the VM.  The input is one flag byte (bit 0: the transcript is
 * whole), the session file, a NUL, the transcript.  A session file that
 * session_file_check() refuses is not given to session_mend() (its
 * precondition).  session_mend() must never crash, must leave the session as
 * it was unless it appends, and may only append to it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/session_file.h"
#include "task/session_mend.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf why = BUF_INIT, s = BUF_INIT;
	char id[SESSION_ID_LEN + 1];
	const char *p, *nul;
	size_t slen;
	int whole, ret;

	if (size < 1)
		return 0;
	whole = data[0] & 1;
	p = (const char *)data + 1;
	if (!(nul = memchr(p, 0, size - 1)))
		return 0;
	slen = (size_t)(nul - p);
	if (session_file_check(p, slen, id, &why) == 0) {
		buf_add(&s, p, slen);
		ret = session_mend(&s, nul + 1, size - 1 - slen - 1, whole);
		if (ret < 0 && ret != -EFBIG)
			abort();
		if (ret <= 0 && (s.len != slen || memcmp(s.buf, p, slen)))
			abort();
		if (ret > 0 && (s.len <= slen || memcmp(s.buf, p, slen)))
			abort();
	}
	buf_release(&s);
	buf_release(&why);
	return 0;
}
