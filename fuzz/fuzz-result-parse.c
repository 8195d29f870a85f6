/*
 * libFuzzer target: what aibox-task reads back at the end of a task:
 * result.json from the VM (common/task/task_results.c: result_parse() and the summary
 * made from what it accepts) and, on the same bytes, the proxy's record
 * (common/proxy/proxy_report.c: proxy_report_parse(), and the summary's host lines
 * made from what it accepts).
 *
 * Besides not crashing: an accepted result holds only checked values
 * (steps within the cap, commits of 40 or 64 lowercase hex digits or empty,
 * the last message within its cap and without NUL); a refused one says why
 * and holds nothing; an accepted record's hosts are within their caps and
 * printable, a refused one says why and holds nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proxy/proxy_report.h"
#include "task/task_results.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_commit(const char *c)
{
	size_t n = strlen(c);

	if (n != 0 && n != 40 && n != 64)
		abort();
	if (strspn(c, "0123456789abcdef") != n)
		abort();
}

static void check_report(const char *p, size_t n)
{
	struct proxy_report rep = PROXY_REPORT_INIT;
	struct buf err = BUF_INIT;

	if (proxy_report_parse(p, n, &rep, &err) == 0) {
		struct summary s = SUMMARY_INIT;
		struct summary_in in = {
		    .report = &rep, .bundle_path = "/t/changes.bundle", .branch = "aibox/task-x"};

		if (err.len || rep.nhosts > PROXY_REPORT_HOSTS)
			abort();
		for (size_t i = 0; i < rep.nhosts; i++) {
			const char *h = rep.hosts[i].name;

			if (!*h || strlen(h) > PROXY_REPORT_HOST_MAX)
				abort();
			for (; *h; h++)
				if ((unsigned char)*h <= 0x20 || (unsigned char)*h >= 0x7f)
					abort();
		}
		summary_make(&in, &s);
		summary_release(&s);
	} else if (!err.len || rep.nhosts) {
		abort();
	}
	proxy_report_release(&rep);
	buf_release(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct task_result r;
	struct buf err = BUF_INIT;
	int ret = result_parse((const char *)data, size, &r, &err);

	if (ret == 0) {
		struct summary s = SUMMARY_INIT;
		struct summary_in in = {
		    .result = &r,
		    .end_commit = r.end_commit[0] ? r.end_commit : NULL,
		    .bundle_path = "/tmp/it's here/changes.bundle",
		    .branch = "aibox/task-x",
		};

		if (err.len || r.version != 1 || r.nsteps > RESULT_STEPS_MAX)
			abort();
		check_commit(r.start_commit);
		check_commit(r.end_commit);
		if (r.claude.last_message && strlen(r.claude.last_message) > RESULT_MESSAGE_MAX)
			abort();
		summary_make(&in, &s);
		if (!s.nr)
			abort();
		summary_release(&s);
		result_release(&r);
	} else {
		if (!err.len || r.claude.last_message || r.nsteps)
			abort();
	}
	buf_release(&err);
	check_report((const char *)data, size);
	return 0;
}
