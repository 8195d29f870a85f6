/*
 * The one escaper for what a log line takes from the VM: proxy.log
 * (common/proxy/proxy_log.c) and the broker's log (common/broker/broker.c) write every
 * byte a client controls through it (docs/proxy.md, docs/broker.md "Log").
 */
#ifndef AIBOX_LOG_ESCAPE_H
#define AIBOX_LOG_ESCAPE_H

#include <stddef.h>

#include "base/buf.h"

/* Keep ' ' as it is: for a field inside double quotes (why="..."). */
#define LOG_ESCAPE_KEEP_SPACE 1

/*
 * Append s[0..n) to out with every byte outside printable ASCII (below
 * 0x21 or above 0x7e: control bytes, ESC, CR, LF, DEL, any byte of UTF-8,
 * valid or not), '\\' and '"' written as \xNN (lowercase hex); ' ' too
 * unless flags has LOG_ESCAPE_KEEP_SPACE.  So a line never holds a byte a
 * terminal acts on, and a field never ends early.  Once `max` bytes have
 * been appended, the rest of s is left out and "..." ends the field (max 0:
 * no cut).
 */
void log_escape(struct buf *out, const char *s, size_t n, size_t max, unsigned flags);

#endif
