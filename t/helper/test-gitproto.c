/*
 * test-gitproto: common/gitproto.c's internals, for t/6000-gitproto.bats.
 *
 *   test-gitproto match PATTERN BRANCH     "yes" or "no"
 *   test-gitproto pattern-ok PATTERN       "yes" or "no"
 *   test-gitproto refname NAME             "yes" or "no"
 *   test-gitproto commands < body          the parsed push command list, or the error
 *   test-gitproto pkt < body               each pkt-line's kind and length, or the error
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "gitproto.h"
#include "banned.h"

static const char *yes_no(int v)
{
	return v ? "yes" : "no";
}

static void read_stdin(struct buf *in)
{
	if (buf_read_fd(in, 0, 16 << 20) < 0)
		die("cannot read stdin");
}

static int cmd_commands(void)
{
	struct buf in = BUF_INIT;
	struct push_commands pc = PUSH_COMMANDS_INIT;
	int r;

	read_stdin(&in);
	r = push_commands_parse(&pc, in.buf, in.len);
	if (r < 0) {
		printf("error %s\n", strerror(-r));
	} else {
		printf("caps '%s' consumed %zu\n", pc.caps, pc.consumed);
		for (size_t i = 0; i < pc.nr; i++)
			printf("%s %s %s\n", pc.cmds[i].old_oid, pc.cmds[i].new_oid,
			       pc.cmds[i].ref);
	}
	push_commands_release(&pc);
	buf_release(&in);
	return 0;
}

static int cmd_pkt(void)
{
	static const char *const names[] = {"data", "flush", "delim", "response-end"};
	struct buf in = BUF_INIT;
	size_t pos = 0;

	read_stdin(&in);
	while (pos < in.len) {
		enum pkt_kind kind;
		const char *p;
		size_t n;
		int r = pkt_parse(in.buf + pos, in.len - pos, &kind, &p, &n);

		if (r < 0) {
			printf("error %s\n", strerror(-r));
			break;
		}
		if (r == 0) {
			printf("partial\n");
			break;
		}
		printf("%s %zu\n", names[kind], n);
		pos += (size_t)r;
	}
	buf_release(&in);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc == 4 && !strcmp(argv[1], "match"))
		puts(yes_no(branch_pattern_match(argv[2], argv[3])));
	else if (argc == 3 && !strcmp(argv[1], "pattern-ok"))
		puts(yes_no(branch_pattern_ok(argv[2])));
	else if (argc == 3 && !strcmp(argv[1], "refname"))
		puts(yes_no(refname_ok(argv[2])));
	else if (argc == 2 && !strcmp(argv[1], "commands"))
		return cmd_commands();
	else if (argc == 2 && !strcmp(argv[1], "pkt"))
		return cmd_pkt();
	else
		usage_die("usage: test-gitproto match|pattern-ok|refname|commands|pkt ...\n");
	return 0;
}
