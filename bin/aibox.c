/*
 * aibox: the front command.  `aibox tasks clean ...` execs aibox-tasks-clean,
 * `aibox task ...` execs aibox-task, found beside this program (build tree)
 * or in PREFIX/libexec/aibox (git.c's dispatch).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/commands.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "base/banned.h"

static const char usage_text[] = "usage: aibox <command> [<subcommand>] [<args>]\n"
                                 "       aibox help [<command> [<subcommand>]]\n"
                                 "       aibox --version\n"
                                 "\n";

/*
 * Each command's line in `aibox help`, as git's command-list.txt gives them:
 * one a command, in the order `aibox help` lists them (sorted by name), each
 * as the NAME line of its man page in docs/man says it.  A command missing
 * here is listed by its name alone.
 */
static const struct {
	const char *name; /* the program's name without "aibox-" */
	const char *what;
} descriptions[] = {
    {"audit-list", "list the entries of the audit record of tasks"},
    {"audit-verify", "check the hash chain of the audit record"},
    {"broker", "git fetch and push for a task's VM, with the token kept on the host"},
    {"bundle-check", "accept or refuse a git bundle, without git"},
    {"cache", "list, measure, verify or clear the dependency cache"},
    {"completion", "print the bash or zsh completion script"},
    {"image", "build, list and remove the VM images aibox boots"},
    {"policy", "show the administrator's policy, and what a project may do under it"},
    {"prices", "show the price table aibox counts API spend with"},
    {"projects", "list, find, check and remove aibox projects"},
    {"proxy", "allow-listing HTTP proxy with API key forwarding, for one task"},
    {"run", "work with Claude Code in a VM on the project folder"},
    {"task", "run Claude Code unattended in a throwaway VM on one commit"},
    {"tasks-clean", "remove what ended tasks leave behind"},
    {"tasks-compare", "show the attempts of one group side by side"},
    {"tasks-list", "list the tasks, newest first"},
    {"tasks-log", "show a task's transcript, or follow a running task"},
    {"tasks-show", "show a task's summary again"},
};

static const char *description(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(descriptions); i++)
		if (!strcmp(descriptions[i].name, name))
			return descriptions[i].what;
	return NULL;
}

/* The commands, or with word only the subcommands of `aibox word` ("tasks clean"). */
static void print_commands(FILE *f, const char *word)
{
	struct strvec cmds = STRVEC_INIT, words = STRVEC_INIT;
	struct buf prefix = BUF_INIT;
	int width = 0;

	commands_list(&cmds);
	if (word)
		buf_addf(&prefix, "aibox-%s-", word);
	for (size_t i = 0; i < cmds.nr; i++) {
		char *w;

		if (word && strncmp(cmds.v[i], prefix.buf, prefix.len))
			continue;
		w = xstrdup(cmds.v[i] + 6);
		for (char *p = w; *p; p++)
			if (*p == '-')
				*p = ' ';
		if ((int)strlen(w) > width)
			width = (int)strlen(w);
		strvec_push(&words, w);
		free(w);
		strvec_push(&words, cmds.v[i] + 6);
	}
	fprintf(f, word ? "subcommands of '%s':\n" : "commands:\n", word);
	for (size_t i = 0; i + 1 < words.nr; i += 2) {
		const char *what = description(words.v[i + 1]);

		if (what)
			fprintf(f, "   %-*s   %s\n", width, words.v[i], what);
		else
			fprintf(f, "   %s\n", words.v[i]);
	}
	if (!word)
		fprintf(f, "\n'aibox help <command>' shows a command's manual page.\n");
	strvec_clear(&cmds);
	strvec_clear(&words);
	buf_release(&prefix);
}

/* 1 when `aibox word` is no command but some `aibox word SUB` is. */
static int has_subcommands(const char *word)
{
	struct strvec cmds = STRVEC_INIT;
	struct buf prefix = BUF_INIT;
	int found = 0;

	if (strchr(word, '/'))
		return 0;
	buf_addf(&prefix, "aibox-%s-", word);
	commands_list(&cmds);
	for (size_t i = 0; i < cmds.nr && !found; i++)
		found = !strncmp(cmds.v[i], prefix.buf, prefix.len);
	strvec_clear(&cmds);
	buf_release(&prefix);
	return found;
}

/*
 * Resolve words to a tool: "a b" is aibox-a-b when that exists (b not an
 * option), else aibox-a.  Returns how many words the tool name used (1 or 2),
 * or 0 when neither exists; path gets the tool's path.
 */
static int resolve(int argc, char **argv, struct buf *path)
{
	struct buf name = BUF_INIT;
	int used = 0;

	if (argc >= 2 && argv[1][0] != '-') {
		buf_addf(&name, "aibox-%s-%s", argv[0], argv[1]);
		if (!strchr(argv[0], '/') && !strchr(argv[1], '/') && command_path(name.buf, path))
			used = 2;
	}
	if (!used && !strchr(argv[0], '/')) {
		buf_reset(&name);
		buf_addf(&name, "aibox-%s", argv[0]);
		if (command_path(name.buf, path))
			used = 1;
	}
	buf_release(&name);
	return used;
}

/*
 * Neither `aibox a b` nor `aibox a` is a command.  When a has subcommands,
 * say which: `aibox tasks` alone gives its usage, `aibox tasks frob` says
 * that is no command; either way the subcommands are listed.
 */
static void unknown(int argc, char **argv)
{
	if (has_subcommands(argv[0])) {
		if (argc < 2 || argv[1][0] == '-')
			fprintf(stderr, "usage: aibox %s <subcommand> [<args>]\n\n", argv[0]);
		else
			fprintf(stderr,
			        "aibox: '%s %s' is not an aibox command, see 'aibox help %s'\n",
			        argv[0], argv[1], argv[0]);
		print_commands(stderr, argv[0]);
		exit(EXIT_ERROR);
	}
	fprintf(stderr, "aibox: '%s' is not an aibox command, see 'aibox help'\n", argv[0]);
	print_commands(stderr, NULL);
	exit(EXIT_ERROR);
}

static int help(int argc, char **argv)
{
	struct buf path = BUF_INIT, man = BUF_INIT;
	const char *base;
	int used;

	if (argc == 0) {
		fputs(usage_text, stdout);
		print_commands(stdout, NULL);
		return 0;
	}
	used = resolve(argc, argv, &path);
	if (!used && argc == 1 && has_subcommands(argv[0])) {
		printf("usage: aibox %s <subcommand> [<args>]\n\n", argv[0]);
		print_commands(stdout, argv[0]);
		buf_release(&path);
		return 0;
	}
	if (!used)
		unknown(argc, argv);
	base = strrchr(path.buf, '/') + 1;
	/* The man page: installed, or the build tree's docs/man. */
	buf_addf(&man, "%s/docs/man/%s.1", data_dir(), base);
	if (access(man.buf, R_OK) == 0 && isatty(1)) {
		execlp("man", "man", "-l", man.buf, (char *)NULL);
	}
	if (isatty(1))
		execlp("man", "man", base, (char *)NULL);
	execl(path.buf, base, "--help", (char *)NULL);
	die_errno("cannot run '%s'", path.buf);
}

int main(int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct strvec args = STRVEC_INIT;
	int used;

	tool_init(argc, argv);
	progname = "aibox";
	argc--;
	argv++;
	if (argc == 0) {
		/* As `aibox help`, but a usage error. */
		fputs(usage_text, stderr);
		print_commands(stderr, NULL);
		return EXIT_ERROR;
	}
	if (!strcmp(argv[0], "--version") || !strcmp(argv[0], "version")) {
		printf("aibox version %s\n", AIBOX_VERSION);
		return 0;
	}
	if (!strcmp(argv[0], "help") || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))
		return help(argc - 1, argv + 1);
	if (argv[0][0] == '-') {
		error("unknown option '%.*s'", (int)strcspn(argv[0], "="), argv[0]);
		usage_die(usage_text);
	}
	used = resolve(argc, argv, &path);
	/* `aibox tasks --help` is `aibox help tasks`. */
	if (!used && argc == 2 && has_subcommands(argv[0]) &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		buf_release(&path);
		return help(1, argv);
	}
	if (!used)
		unknown(argc, argv);
	strvec_push(&args, strrchr(path.buf, '/') + 1);
	for (int i = used; i < argc; i++)
		strvec_push(&args, argv[i]);
	execv(path.buf, (char *const *)args.v);
	die_errno("cannot run '%s'", path.buf);
}
