/*
 * aibox completion bash|zsh      print the completion script for the shell
 * aibox completion --words N WORD...
 *                                the candidates for WORD number N (the
 *                                scripts call this; common/task/complete.h)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "task/complete.h"
#include "base/err.h"
#include "base/num.h"
#include "base/opt.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox completion bash|zsh\n"
    "\n"
    "Print the shell completion script for bash or zsh.  make install puts them\n"
    "where the shells find them; to try one without installing it:\n"
    "    source <(aibox completion bash)\n"
    "    -h, --help   show this help\n";

/* The script for shell: data_dir()'s share/completion/FILE, or completion/FILE installed. */
static void print_script(const char *file)
{
	struct buf path = BUF_INIT, text = BUF_INIT;
	ssize_t n;

	buf_addf(&path, "%s/share/completion/%s", data_dir(), file);
	n = buf_read_file(&text, path.buf, 256 * 1024);
	if (n == -ENOENT) {
		buf_reset(&path);
		buf_addf(&path, "%s/completion/%s", data_dir(), file);
		n = buf_read_file(&text, path.buf, 256 * 1024);
	}
	if (n < 0)
		die_err((int)n, "cannot read '%s'", path.buf);
	fwrite(text.buf, 1, text.len, stdout);
	buf_release(&path);
	buf_release(&text);
}

/* The candidates for word number cword of words (common/task/complete.h), one a line. */
static void print_words(const char *cword_arg, int argc, char **words)
{
	struct strvec out = STRVEC_INIT;
	long cword;

	if (parse_long(cword_arg, 0, argc, &cword) < 0)
		usage_die(usage_text);
	if (complete_words((int)cword, argc, (const char *const *)words, &out) == COMPLETE_FILES)
		puts(":files");
	for (size_t i = 0; i < out.nr; i++)
		puts(out.v[i]);
	strvec_clear(&out);
}

int main(int argc, char **argv)
{
	struct strvec words = STRVEC_INIT;
	struct buf why = BUF_INIT;
	unsigned flags;

	tool_init(argc, argv);
	progname = "aibox completion";
	/* The words to complete may look like options: they are not parsed. */
	if (argc >= 3 && !strcmp(argv[1], "--words")) {
		print_words(argv[2], argc - 3, argv + 3);
	} else {
		opt_words_exit(argc, argv, NULL, 1, &flags, &words, usage_text);
		if (words.nr == 1 && !strcmp(words.v[0], "bash"))
			print_script("aibox.bash");
		else if (words.nr == 1 && !strcmp(words.v[0], "zsh"))
			print_script("_aibox");
		else
			usage_die(usage_text);
	}
	if (fflush(stdout) || ferror(stdout))
		die_errno("cannot write to stdout");
	strvec_clear(&words);
	buf_release(&why);
	return 0;
}
