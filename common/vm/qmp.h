/*
 * A small client of QEMU's monitor protocol (QMP) over a stream given to
 * QEMU as `-chardev socket,fd=N -mon chardev=...,mode=control`.
 *
 *	struct qmp q = QMP_INIT;
 *	if (qmp_open(&q, fd, vm.pidfd, 10000, &why) < 0) ...
 *	if (qmp_call(&q, "stop", NULL, NULL, 10000, &why) < 0) ...
 *	qmp_close(&q);
 *
 * Replies are read a line at a time, each at most QMP_LINE_MAX bytes (a
 * longer one is an error, never cut); events between replies are skipped.
 * Every wait is bounded by its timeout and ends early when QEMU exits
 * (pidfd readable).  Errors: -ETIMEDOUT, -ECHILD (QEMU exited or closed the
 * monitor), -EPROTO (not QMP, or QEMU's error reply), -EFBIG, -errno; the
 * reason, in words, is appended to err.
 */
#ifndef AIBOX_QMP_H
#define AIBOX_QMP_H

#include <jansson.h>

#include "base/buf.h"

#define QMP_LINE_MAX (1024 * 1024)

struct qmp {
	int fd;    /* ours; closed by qmp_close() */
	int pidfd; /* QEMU's, or -1; not ours */
	struct buf in;
};

#define QMP_INIT                                                                                   \
	{                                                                                          \
		.fd = -1, .pidfd = -1, .in = BUF_INIT                                              \
	}

/* Take fd, read QEMU's greeting and enter command mode (qmp_capabilities). */
int qmp_open(struct qmp *q, int fd, int pidfd, int timeout_ms, struct buf *err);

/*
 * Run `execute` with args (a JSON object, or NULL; the reference is stolen)
 * and wait for its reply.  With ret non-NULL, *ret gets a new reference to
 * the reply's "return" value.  0 or a negative error (above).
 */
int qmp_call(struct qmp *q, const char *execute, json_t *args, json_t **ret, int timeout_ms,
             struct buf *err);

void qmp_close(struct qmp *q);

#endif
