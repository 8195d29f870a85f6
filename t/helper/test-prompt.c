/*
 * test-prompt: the prompt reader and the output lines, for t/1100-prompt.bats
 * and t/0100-out.bats.
 *
 *   test-prompt read [--no-openat2] [--max N] [--file F]... [--] [WORD]...
 *       prompt_read() with stdin as stdin: the prompt on stdout, as is; or
 *       "ENAME: message" on stderr and exit 1
 *   test-prompt open [--no-openat2] PATH    prompt_open(): "ok N" (bytes) or as above
 *   test-prompt have-openat2                "yes" or "no"
 *   test-prompt deny-openat2 ENOSYS|EPERM CMD ...
 *       run CMD with a seccomp filter that fails openat2 with that error, as an
 *       old kernel or a container's filter would
 *   test-prompt sanitize < text             out_sanitize() of stdin to stdout
 *   test-prompt format-chars                each code point utf8_is_format()
 *       holds, as 4 to 6 uppercase hex digits, one a line
 *   test-prompt hidden-chars                the same for utf8_is_hidden()
 *   test-prompt lines SOURCE ID [EPOCH] < text
 *       out_write() (or out_format() at EPOCH, written as one block) to stdout;
 *       ID "-" means none
 *   test-prompt relay SOURCE ID < text
 *       out_relay_start() toward stderr, fed stdin one read at a time as it
 *       comes, then out_relay_end()
 */
#include <errno.h>
#include <inttypes.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/num.h"
#include "base/out.h"
#include "config/prompt.h"
#include "base/strvec.h"
#include "base/utf8.h"
#include "base/banned.h"

/* Print the error as "ENAME: message", free the buffers, return 1. */
static int fail(int ret, struct buf *err, struct buf *other)
{
	fprintf(stderr, "%s: %s\n", strerrorname_np(-ret) ? strerrorname_np(-ret) : "?", err->buf);
	buf_release(err);
	buf_release(other);
	return 1;
}

static int cmd_read(int argc, char **argv)
{
	struct prompt_opts o = {.stdin_fd = 0};
	struct strvec files = STRVEC_INIT;
	struct buf out = BUF_INIT, err = BUF_INIT;
	int i, ret, dashdash = 0, nwords = 0;

	/* options anywhere, as getopt would take them; words after "--" are words */
	for (i = 0; i < argc; i++) {
		if (!dashdash && !strcmp(argv[i], "--no-openat2")) {
			o.flags |= PROMPT_NO_OPENAT2;
		} else if (!dashdash && !strcmp(argv[i], "--max") && i + 1 < argc) {
			long v;

			if (parse_long(argv[++i], 1, 1L << 30, &v) < 0)
				die("bad --max");
			o.max = (size_t)v;
		} else if (!dashdash && !strcmp(argv[i], "--file") && i + 1 < argc) {
			strvec_push(&files, argv[++i]);
		} else if (!dashdash && !strcmp(argv[i], "--")) {
			dashdash = 1;
		} else {
			argv[nwords++] = argv[i];
		}
	}
	o.args = argv;
	o.nargs = (size_t)nwords;
	o.files = files.v;
	o.nfiles = files.nr;
	ret = prompt_read(&o, &out, &err);
	strvec_clear(&files);
	if (ret < 0)
		return fail(ret, &err, &out);
	if (write_all(1, out.buf, out.len) < 0)
		die_errno("write");
	buf_release(&out);
	buf_release(&err);
	return 0;
}

static int cmd_open(int argc, char **argv)
{
	struct buf err = BUF_INIT, data = BUF_INIT;
	unsigned flags = 0;
	ssize_t n;
	int fd;

	if (argc == 2 && !strcmp(argv[0], "--no-openat2")) {
		flags |= PROMPT_NO_OPENAT2;
		argv++;
		argc--;
	}
	if (argc != 1)
		die("usage: test-prompt open [--no-openat2] PATH");
	fd = prompt_open(argv[0], flags, &err);
	if (fd < 0)
		return fail(fd, &err, &data);
	n = buf_read_fd(&data, fd, 1 << 24);
	close(fd);
	if (n < 0)
		die_err((int)n, "read");
	printf("ok %zu\n", data.len);
	buf_release(&data);
	buf_release(&err);
	return 0;
}

static void read_stdin(struct buf *in)
{
	ssize_t n = buf_read_fd(in, 0, 1 << 24);

	if (n < 0)
		die_err((int)n, "read stdin");
}

/* A filter that makes openat2 fail as on an old kernel or in a strict container. */
static void deny_openat2(int e)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	if (!ctx)
		die("seccomp_init failed");
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)e), SCMP_SYS(openat2), 0) < 0 ||
	    seccomp_load(ctx) < 0)
		die("cannot load the seccomp filter");
	seccomp_release(ctx);
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-prompt read|open|have-openat2|deny-openat2|sanitize|lines ...");
	if (!strcmp(argv[1], "deny-openat2") && argc >= 4) {
		deny_openat2(!strcmp(argv[2], "EPERM") ? EPERM : ENOSYS);
		argv += 2;
		argc -= 2;
	}
	if (!strcmp(argv[1], "read"))
		return cmd_read(argc - 2, argv + 2);
	if (!strcmp(argv[1], "open"))
		return cmd_open(argc - 2, argv + 2);
	if (!strcmp(argv[1], "have-openat2")) {
		printf("%s\n", prompt_have_openat2() ? "yes" : "no");
		return 0;
	}
	if (!strcmp(argv[1], "sanitize")) {
		struct buf in = BUF_INIT, out = BUF_INIT;

		read_stdin(&in);
		out_sanitize(&out, in.buf, in.len);
		if (write_all(1, out.buf, out.len) < 0)
			die_errno("write");
		buf_release(&in);
		buf_release(&out);
		return 0;
	}
	if (!strcmp(argv[1], "format-chars")) {
		for (uint32_t cp = 0; cp <= 0x10FFFF; cp++)
			if (utf8_is_format(cp))
				printf("%04" PRIX32 "\n", cp);
		return 0;
	}
	if (!strcmp(argv[1], "hidden-chars")) {
		for (uint32_t cp = 0; cp <= 0x10FFFF; cp++)
			if (utf8_is_hidden(cp))
				printf("%04" PRIX32 "\n", cp);
		return 0;
	}
	if (!strcmp(argv[1], "lines") && (argc == 4 || argc == 5)) {
		struct buf in = BUF_INIT, out = BUF_INIT;
		const char *id = strcmp(argv[3], "-") ? argv[3] : NULL;
		int ret;

		read_stdin(&in);
		if (argc == 5) {
			long when;

			if (parse_long(argv[4], 0, 1L << 40, &when) < 0)
				die("bad EPOCH");
			out_format(&out, (time_t)when, argv[2], id, in.buf, in.len);
			ret = write_all(1, out.buf, out.len);
		} else {
			ret = out_write(1, argv[2], id, in.buf, in.len);
		}
		if (ret < 0)
			die_err(ret, "write");
		buf_release(&in);
		buf_release(&out);
		return 0;
	}
	if (!strcmp(argv[1], "relay") && argc == 4) {
		struct out_relay r;
		char chunk[4096];
		ssize_t n;
		int ret;

		if ((ret = out_relay_start(&r, 2, argv[2], argv[3])) < 0)
			die_err(ret, "cannot start the relay");
		while ((n = read(0, chunk, sizeof(chunk))) > 0)
			if (write_all(r.fd, chunk, (size_t)n) < 0)
				die_errno("write");
		out_relay_end(&r, 10000);
		return 0;
	}
	die("unknown command '%s'", argv[1]);
}
