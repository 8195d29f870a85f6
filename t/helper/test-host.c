/*
 * test-host: the host layer of aibox task and aibox run (common/host_start.h),
 * for t/5009-host-layer.bats.
 *
 *   test-host env-json [--object] NAME=VALUE...
 *	print host_env_json() of the pairs: the task's stdin, or with --object
 *	aibox run's AIBOX_ENV; "error: REASON" (exit 1) when refused
 */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "host_start.h"
#include "strvec.h"
#include "banned.h"

static int cmd_env_json(int argc, char **argv)
{
	struct strvec names = STRVEC_INIT, values = STRVEC_INIT;
	struct buf out = BUF_INIT, err = BUF_INIT;
	int object = argc > 0 && !strcmp(argv[0], "--object"), ret;

	for (int i = object; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');

		if (!eq)
			die("usage: test-host env-json [--object] NAME=VALUE...");
		strvec_pushf(&names, "%.*s", (int)(eq - argv[i]), argv[i]);
		strvec_push(&values, eq + 1);
	}
	ret = host_env_json(&names, &values, object, &out, &err);
	if (ret < 0)
		printf("error: %s\n", err.buf);
	else
		fwrite(out.buf, 1, out.len, stdout);
	strvec_clear(&names);
	strvec_clear(&values);
	buf_release(&out);
	buf_release(&err);
	return ret < 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "env-json"))
		return cmd_env_json(argc - 2, argv + 2);
	die("usage: test-host env-json [--object] NAME=VALUE...");
}
