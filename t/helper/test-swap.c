/*
 * test-swap: the proxy's swap and rules (common/proxy/secret_swap.h), for
 * t/3009-secret-swap.bats.
 *
 *   test-swap head HOST PORT NAME PLACEHOLDER VALUE HOSTS [NAME ...]
 *	swap_request_head() of the head on stdin for a request to HOST:PORT,
 *	each secret given as four words (HOSTS: allow entries, comma-separated);
 *	prints "swapped N used=NAME,..." then the head, or "refused: WHY"
 *   test-swap rule METHODS PATHS METHOD TARGET
 *	swap_rule_allows() of a rule (METHODS, PATHS comma-separated, "-" for
 *	any): "allowed", or "refused: WHY"
 *   test-swap echo CHUNK VALUE PLACEHOLDER...
 *	stdin through swap_echo_feed() CHUNK bytes at a time, then
 *	swap_echo_end(), to stdout
 *   test-swap echo-work CHUNK VALUE PLACEHOLDER...
 *	the same, but prints how many bytes the matcher read doing it
 *   test-swap ws CHUNK VALUE PLACEHOLDER...
 *	stdin, the host's WebSocket frames, through ws_scrub_feed() CHUNK
 *	bytes at a time, to stdout, or "refused: WHY"
 *   test-swap ws-work CHUNK VALUE PLACEHOLDER...
 *	the same, but prints how many bytes the matcher read doing it
 *   test-swap path TARGET
 *	swap_normalize_path(): the path, or "error"
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "proxy/secret_swap.h"
#include "proxy/ws_scrub.h"
#include "base/strvec.h"
#include "base/banned.h"

static void split(const char *s, struct strvec *out)
{
	char *copy = xstrdup(s), *save = NULL;

	if (strcmp(s, "-"))
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			strvec_push(out, t);
	free(copy);
}

static int cmd_head(int argc, char **argv)
{
	struct swap_secret sec[8];
	struct buf head = BUF_INIT, why = BUF_INIT;
	struct strvec used = STRVEC_INIT;
	size_t n = 0;
	int ret;

	if (argc < 2 || (argc - 2) % 4 || (argc - 2) / 4 > 8)
		die("usage: test-swap head HOST PORT NAME PLACEHOLDER VALUE HOSTS...");
	for (int i = 2; i < argc; i += 4, n++) {
		struct strvec hosts = STRVEC_INIT;

		sec[n] = (struct swap_secret){argv[i], argv[i + 1], argv[i + 2], ALLOW_LIST_INIT};
		split(argv[i + 3], &hosts);
		for (size_t k = 0; k < hosts.nr; k++)
			if (allow_add(&sec[n].hosts, hosts.v[k], NULL, &why) < 0)
				die("%s", why.buf);
		strvec_clear(&hosts);
	}
	if (buf_read_fd(&head, 0, SWAP_MAX_HEAD + 1) < 0)
		die("cannot read stdin");
	ret = swap_request_head(sec, n, argv[0], atoi(argv[1]), &head, &used, &why);
	if (ret < 0) {
		printf("refused: %s\n", why.buf);
	} else {
		printf("swapped %d used=", ret);
		for (size_t i = 0; i < used.nr; i++)
			printf("%s%s", i ? "," : "", used.v[i]);
		printf("\n");
		fwrite(head.buf, 1, head.len, stdout);
	}
	for (size_t i = 0; i < n; i++)
		allow_clear(&sec[i].hosts);
	strvec_clear(&used);
	buf_release(&head);
	buf_release(&why);
	return ret < 0;
}

static int cmd_echo(int argc, char **argv, int work)
{
	struct swap_secret sec[8];
	struct swap_echo e;
	struct buf in = BUF_INIT, out = BUF_INIT;
	size_t chunk, n = 0;

	if (argc < 3 || (argc - 1) % 2 || (argc - 1) / 2 > 8 || !(chunk = (size_t)atol(argv[0])))
		die("usage: test-swap echo CHUNK VALUE PLACEHOLDER...");
	for (int i = 1; i < argc; i += 2, n++)
		sec[n] = (struct swap_secret){"S", argv[i + 1], argv[i], ALLOW_LIST_INIT};
	if (buf_read_fd(&in, 0, 64 << 20) < 0)
		die("cannot read stdin");
	swap_echo_init(&e, sec, n);
	for (size_t at = 0; at < in.len; at += chunk)
		swap_echo_feed(&e, in.buf + at, in.len - at < chunk ? in.len - at : chunk, &out);
	swap_echo_end(&e, &out);
	if (work)
		printf("%zu\n", e.m.examined);
	else
		fwrite(out.buf, 1, out.len, stdout);
	swap_echo_release(&e);
	buf_release(&in);
	buf_release(&out);
	return 0;
}

static int cmd_ws(int argc, char **argv, int work)
{
	struct swap_secret sec[8];
	struct ws_scrub w;
	struct buf in = BUF_INIT, out = BUF_INIT, why = BUF_INIT;
	size_t chunk, n = 0, read = 0;
	int ret = 0;

	if (argc < 3 || (argc - 1) % 2 || (argc - 1) / 2 > 8 || !(chunk = (size_t)atol(argv[0])))
		die("usage: test-swap ws|ws-work CHUNK VALUE PLACEHOLDER...");
	for (int i = 1; i < argc; i += 2, n++)
		sec[n] = (struct swap_secret){"S", argv[i + 1], argv[i], ALLOW_LIST_INIT};
	if (buf_read_fd(&in, 0, 64 << 20) < 0)
		die("cannot read stdin");
	ws_scrub_init(&w, sec, n);
	for (size_t at = 0; at < in.len && !ret; at += chunk)
		ret = ws_scrub_feed(&w, in.buf + at, in.len - at < chunk ? in.len - at : chunk,
		                    &out, &why);
	read = (w.echo.found.m ? w.echo.found.m->examined : 0) + w.m.examined;
	if (ret < 0)
		printf("refused: %s\n", why.buf);
	else if (work)
		printf("%zu\n", read);
	else
		fwrite(out.buf, 1, out.len, stdout);
	ws_scrub_release(&w);
	buf_release(&in);
	buf_release(&out);
	buf_release(&why);
	return ret < 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "head"))
		return cmd_head(argc - 2, argv + 2);
	if (argc == 6 && !strcmp(argv[1], "rule")) {
		struct config_rule r = {0};
		struct buf why = BUF_INIT;
		int ok;

		strvec_init(&r.methods);
		strvec_init(&r.paths);
		split(argv[2], &r.methods);
		split(argv[3], &r.paths);
		ok = swap_rule_allows(&r, argv[4], argv[5], &why);
		printf(ok ? "allowed\n" : "refused: %s\n", why.buf);
		strvec_clear(&r.methods);
		strvec_clear(&r.paths);
		buf_release(&why);
		return !ok;
	}
	if (argc >= 2 && !strcmp(argv[1], "echo"))
		return cmd_echo(argc - 2, argv + 2, 0);
	if (argc >= 2 && !strcmp(argv[1], "ws"))
		return cmd_ws(argc - 2, argv + 2, 0);
	if (argc >= 2 && !strcmp(argv[1], "ws-work"))
		return cmd_ws(argc - 2, argv + 2, 1);
	if (argc >= 2 && !strcmp(argv[1], "echo-work"))
		return cmd_echo(argc - 2, argv + 2, 1);
	if (argc == 3 && !strcmp(argv[1], "path")) {
		struct buf out = BUF_INIT;
		int ret = swap_normalize_path(argv[2], &out);

		printf("%s\n", ret < 0 ? "error" : out.buf);
		buf_release(&out);
		return ret < 0;
	}
	die("usage: test-swap head|rule|path ...");
}
