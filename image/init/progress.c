/*
 * Task mode's vm.log and progress lines (task_int.h).
 */
#include <stdarg.h>

#include "base/clock.h"
#include "base/err.h"
#include "task_int.h"
#include "base/banned.h"

void log_raw(struct guest_task *t, const char *data, size_t n)
{
	if (t->log_fd < 0 || t->log_full)
		return;
	if (t->log_len + n > LOG_MAX) {
		static const char note[] = "\n[aibox-init: vm.log is full, the rest is left out]\n";

		t->log_full = 1;
		write_all(t->log_fd, note, sizeof(note) - 1);
		return;
	}
	if (write_all(t->log_fd, data, n) == 0)
		t->log_len += n;
}

int log_sink(void *ctx, const char *data, size_t n)
{
	log_raw(ctx, data, n);
	return 0;
}

void vmlog(struct guest_task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	int64_t ms = clock_ms() - t->t0;
	va_list ap;

	buf_addf(&b, "[%6lld.%03lld] ", (long long)(ms / 1000), (long long)(ms % 1000));
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	buf_addch(&b, '\n');
	log_raw(t, b.buf, b.len);
	buf_release(&b);
}

void progress(struct guest_task *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	vmlog(t, "%s", b.buf);
	buf_addch(&b, '\n');
	write_all(t->o->err, b.buf, b.len);
	buf_release(&b);
}
