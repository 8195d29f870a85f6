/*
 * test-gitproto: common/git/gitproto.c's internals, for t/6000-gitproto.bats.
 *
 *   test-gitproto match PATTERN BRANCH     "yes" or "no"
 *   test-gitproto pattern-ok PATTERN       "yes" or "no"
 *   test-gitproto refname NAME             "yes" or "no"
 *   test-gitproto commands < body          the parsed push command list, or the error
 *   test-gitproto pkt < body               each pkt-line's kind and length, or the error
 *   test-gitproto caps CAP < list          "yes" or "no": caps_have() on the list
 *   test-gitproto caps-drop NAME < list    the list without NAME (caps_drop())
 *   test-gitproto advert < body            the receive-pack advertisement with
 *                                          push-options dropped, or "error ..."/"no ref"
 *   test-gitproto log-escape MAX [keep-space] < bytes   log_escape()'s line
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "git/gitproto.h"
#include "base/log_escape.h"
#include "base/banned.h"

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

/* stdin as a C string, as git reads a capability list. */
static char *stdin_string(void)
{
	struct buf in = BUF_INIT;

	read_stdin(&in);
	return buf_detach(&in, NULL);
}

static int cmd_advert(void)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	size_t at = 0, n = 0;
	int r;

	read_stdin(&in);
	r = advert_find_caps(in.buf, in.len, "git-receive-pack", &at, &n);
	if (r < 0)
		printf("error %s\n", strerror(-r));
	else if (r == 0)
		puts("more");
	else if (r == 2)
		puts("no ref");
	if (r != 1)
		goto out;
	buf_add(&out, in.buf, at);
	advert_caps_rewrite(in.buf + at + 4, n - 4, "push-options", &out);
	buf_add(&out, in.buf + at + n, in.len - at - n);
	fwrite(out.buf, 1, out.len, stdout);
out:
	buf_release(&in);
	buf_release(&out);
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
	else if (argc == 3 && !strcmp(argv[1], "caps")) {
		char *caps = stdin_string();

		puts(yes_no(caps_have(caps, argv[2])));
		free(caps);
	} else if (argc == 3 && !strcmp(argv[1], "caps-drop")) {
		char *caps = stdin_string();
		struct buf out = BUF_INIT;

		caps_drop(caps, argv[2], &out);
		printf("%s\n", out.buf);
		free(caps);
		buf_release(&out);
	} else if (argc == 2 && !strcmp(argv[1], "advert")) {
		return cmd_advert();
	} else if (argc == 2 && !strcmp(argv[1], "ref-line")) {
		struct buf in = BUF_INIT;
		char oid[OID_HEX_MAX + 1];
		const char *name;
		size_t nlen;

		read_stdin(&in);
		if (advert_ref_parse(in.buf, in.len, oid, &name, &nlen) < 0)
			puts("error");
		else
			printf("%s [%.*s]\n", oid, (int)nlen, name);
		buf_release(&in);
	} else if ((argc == 3 || argc == 4) && !strcmp(argv[1], "log-escape")) {
		struct buf in = BUF_INIT, out = BUF_INIT;

		read_stdin(&in);
		log_escape(&out, in.buf, in.len, (size_t)atol(argv[2]),
		           argc == 4 ? LOG_ESCAPE_KEEP_SPACE : 0);
		printf("%s\n", out.buf);
		buf_release(&in);
		buf_release(&out);
	} else
		usage_die("usage: test-gitproto "
		          "match|pattern-ok|refname|commands|pkt|caps|caps-drop|advert|ref-line|"
		          "log-escape ...\n");
	return 0;
}
