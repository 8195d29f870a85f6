/* A small QMP client (qmp.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "vm/qmp.h"
#include "base/banned.h"

/* The next line from QEMU, parsed, into *out (a new reference). */
static int read_msg(struct qmp *q, json_t **out, long deadline, struct buf *err)
{
	for (;;) {
		char *nl = q->in.len ? memchr(q->in.buf, '\n', q->in.len) : NULL;
		struct pollfd p[2] = {{.fd = q->fd, .events = POLLIN},
		                      {.fd = q->pidfd, .events = POLLIN}};
		long left;
		ssize_t n;
		int r;

		if (nl) {
			json_error_t jerr;
			size_t len = (size_t)(nl - q->in.buf) + 1;

			*out = json_loadb(q->in.buf, len, JSON_REJECT_DUPLICATES, &jerr);
			buf_consume(&q->in, len);
			if (!*out || !json_is_object(*out)) {
				json_decref(*out);
				*out = NULL;
				buf_addstr(err, "QEMU's monitor sent something that is not QMP");
				return -EPROTO;
			}
			return 0;
		}
		if (q->in.len >= QMP_LINE_MAX) {
			buf_addf(err, "a line from QEMU's monitor is over %d bytes", QMP_LINE_MAX);
			return -EFBIG;
		}
		left = deadline - clock_ms();
		if (left <= 0) {
			buf_addstr(err, "QEMU's monitor did not answer in time");
			return -ETIMEDOUT;
		}
		r = poll(p, q->pidfd >= 0 ? 2 : 1, (int)left);
		if (r < 0 && errno != EINTR) {
			buf_addf(err, "cannot wait for QEMU's monitor: %s", strerror(errno));
			return -errno;
		}
		if (r <= 0)
			continue;
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (p[1].revents & POLLIN)) {
			buf_addstr(err, "QEMU exited");
			return -ECHILD;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		buf_grow(&q->in, 65536);
		n = read(q->fd, q->in.buf + q->in.len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			buf_addstr(err, "QEMU closed its monitor (it exited)");
			return -ECHILD;
		}
		if (n < 0) {
			int e = errno;

			buf_addf(err, "cannot read QEMU's monitor: %s", strerror(e));
			return -e;
		}
		buf_setlen(&q->in, q->in.len + (size_t)n);
	}
}

int qmp_open(struct qmp *q, int fd, int pidfd, int timeout_ms, struct buf *err)
{
	long deadline = clock_ms() + timeout_ms;
	json_t *greeting = NULL;
	int r;

	q->fd = fd;
	q->pidfd = pidfd;
	if ((r = read_msg(q, &greeting, deadline, err)) < 0)
		return r;
	r = json_object_get(greeting, "QMP") ? 0 : -EPROTO;
	json_decref(greeting);
	if (r < 0) {
		buf_addstr(err, "QEMU's monitor did not greet with QMP");
		return r;
	}
	return qmp_call(q, "qmp_capabilities", NULL, NULL, (int)(deadline - clock_ms()), err);
}

int qmp_call(struct qmp *q, const char *execute, json_t *args, json_t **ret, int timeout_ms,
             struct buf *err)
{
	long deadline = clock_ms() + timeout_ms;
	json_t *cmd = json_pack("{s:s}", "execute", execute);
	char *text;
	int r;

	if (ret)
		*ret = NULL;
	if (args)
		json_object_set_new(cmd, "arguments", args);
	text = json_dumps(cmd, JSON_COMPACT);
	json_decref(cmd);
	if (!text)
		return -ENOMEM;
	r = write_all(q->fd, text, strlen(text));
	if (r == 0)
		r = write_all(q->fd, "\n", 1);
	free(text);
	if (r < 0) {
		buf_addf(err, "cannot write to QEMU's monitor: %s", strerror(-r));
		return r;
	}
	for (;;) {
		json_t *msg, *v;

		if ((r = read_msg(q, &msg, deadline, err)) < 0)
			return r;
		if ((v = json_object_get(msg, "return"))) {
			if (ret)
				*ret = json_incref(v);
			json_decref(msg);
			return 0;
		}
		if ((v = json_object_get(msg, "error"))) {
			const char *desc = json_string_value(json_object_get(v, "desc"));

			buf_addf(err, "QEMU refused %s: %.200s", execute,
			         desc ? desc : "no reason");
			json_decref(msg);
			return -EPROTO;
		}
		json_decref(msg); /* an event */
	}
}

void qmp_close(struct qmp *q)
{
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	buf_release(&q->in);
}
