/*
 * aibox completion bash|zsh      print the completion script for the shell
 * aibox completion --words N WORD...
 *                                the candidates for WORD number N (the
 *                                scripts call this; common/complete.h)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "complete.h"
#include "err.h"
#include "num.h"
#include "paths.h"
#include "strvec.h"
#include "banned.h"

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

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	progname = "aibox completion";
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "bash")) {
		print_script("aibox.bash");
	} else if (argc == 2 && !strcmp(argv[1], "zsh")) {
		print_script("_aibox");
	} else if (argc >= 3 && !strcmp(argv[1], "--words")) {
		struct strvec out = STRVEC_INIT;
		long cword;

		if (parse_long(argv[2], 0, argc - 3, &cword) < 0)
			usage_die(usage_text);
		if (complete_words((int)cword, argc - 3, (const char *const *)argv + 3, &out) ==
		    COMPLETE_FILES)
			puts(":files");
		for (size_t i = 0; i < out.nr; i++)
			puts(out.v[i]);
		strvec_clear(&out);
	} else {
		usage_die(usage_text);
	}
	if (fflush(stdout) || ferror(stdout))
		die_errno("cannot write to stdout");
	return 0;
}
