/* proxy.log's lines: see log_line.h. */
#include <sys/stat.h>
#include <time.h>

#include "base/err.h"
#include "proxy/log_line.h"
#include "base/banned.h"

void log_line_time(struct buf *b)
{
	struct timespec ts;
	struct tm tm;
	char tbuf[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	buf_addf(b, "%s.%03ldZ", tbuf, ts.tv_nsec / 1000000);
}

int log_line_fits(int64_t max, int64_t used, size_t n)
{
	return !max || used + (int64_t)n <= max - LOG_CAP_RESERVE;
}

void log_line_write(int fd, const char *p, size_t n, int64_t *used)
{
	if (write_all(fd, p, n) < 0) {
		/* A full disk must not stop the writer; the line is lost. */
	}
	*used += (int64_t)n;
}

int log_line_append_capped(int fd, const char *p, size_t n, int64_t max)
{
	struct stat st;
	int64_t used;

	if (fstat(fd, &st) < 0)
		return 0;
	used = (int64_t)st.st_size;
	if (!log_line_fits(max, used, n))
		return 0;
	log_line_write(fd, p, n, &used);
	return 1;
}
