/*
 * libFuzzer target: what the host reads back from the VM's result.json and
 * proxy.log (common/results.c): result_parse() and the summary made from
 * what it accepts, and proxy_log_hosts() on the same bytes.
 *
 * Besides not crashing: an accepted result holds only checked values
 * (steps within the cap, commits of 40 or 64 lowercase hex digits or empty,
 * the last message within its cap and without NUL); a refused one says why
 * and holds nothing; the hosts taken from a log are printable, distinct and
 * within the cap asked for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "results.h"
#include "strvec.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_commit(const char *c)
{
	size_t n = strlen(c);

	if (n != 0 && n != 40 && n != 64)
		abort();
	if (strspn(c, "0123456789abcdef") != n)
		abort();
}

static void check_hosts(const char *log, size_t len, size_t max)
{
	struct strvec hosts = STRVEC_INIT;
	size_t distinct = proxy_log_hosts(log, len, max, &hosts);

	if (hosts.nr > max || distinct < hosts.nr || (distinct > hosts.nr && hosts.nr != max))
		abort();
	for (size_t i = 0; i < hosts.nr; i++) {
		for (const char *p = hosts.v[i]; *p; p++)
			if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
				abort();
		for (size_t j = 0; j < i; j++)
			if (!strcmp(hosts.v[i], hosts.v[j]))
				abort();
	}
	strvec_clear(&hosts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const hosts[] = { "api.anthropic.com:443" };
	struct task_result r;
	struct buf err = BUF_INIT;
	int ret = result_parse((const char *)data, size, &r, &err);

	if (ret == 0) {
		struct summary s = SUMMARY_INIT;
		struct summary_in in = {
			.result = &r,
			.hosts = hosts,
			.nhosts = 1,
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
	check_hosts((const char *)data, size, 3);
	return 0;
}
