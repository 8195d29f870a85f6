/*
 * proxy.log's lines (docs/proxy.md, "proxy.log"): the one writer of the
 * lines' time and of their cap, used by aibox-proxy (common/proxy/proxy_log.c)
 * and by aibox-connect, which appends its refusals to the same file.
 */
#ifndef AIBOX_LOG_LINE_H
#define AIBOX_LOG_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/log_cap.h"

/* Append the time a line starts with, UTC to the millisecond: "2026-11-29T09:12:01.123Z". */
void log_line_time(struct buf *b);

/*
 * Whether a line of n bytes fits a log of max bytes (0: no cap) that holds
 * used bytes: used + n at most max less LOG_CAP_RESERVE (common/base/log_cap.h:
 * kept for the proxy's two notes about the cap).
 */
int log_line_fits(int64_t max, int64_t used, size_t n);

/*
 * Append the n bytes at p to the log fd (opened O_APPEND) and add n to
 * *used.  A failed write (a full disk) loses the line and stops nothing.
 */
void log_line_write(int fd, const char *p, size_t n, int64_t *used);

/*
 * For a writer that shares the log with aibox-proxy (aibox-connect): append
 * the line at p (n bytes) to fd only when it fits max counting everything
 * the file already holds.  1 when written, 0 when left out (or fd cannot be
 * sized).
 */
int log_line_append_capped(int fd, const char *p, size_t n, int64_t max);

#endif
