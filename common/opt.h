/*
 * Command-line options as git's parse-options reads them, for aibox task and
 * aibox run (docs/man/aibox-task.1, docs/man/aibox-run.1): an option may
 * stand anywhere on the line, before, between or after the other words;
 * `--` ends the options, and every argument after it is a word, even one
 * that starts with '-'; "-" alone is a word.  POSIXLY_CORRECT changes
 * nothing.  Underneath it is getopt_long() in its in-order mode, so a long
 * option takes its value as "--name=v" or "--name v" and may be shortened
 * to any unambiguous prefix.
 */
#ifndef AIBOX_OPT_H
#define AIBOX_OPT_H

#include <getopt.h>

struct buf;

#define OPT_END  (-1) /* no more options: the words after `--` are argv[optind..argc) */
#define OPT_WORD 1    /* *arg is a word that stood before `--` */
#define OPT_BAD  '?'  /* an unknown option or a missing value, the reason in why */

/*
 * The next option or word of argv.  shortopts and longopts are getopt_long()'s
 * (shortopts without a leading '+', '-' or ':'; an option's val must not be 1
 * or '?').  Returns the option's val with *arg its value (NULL without one),
 * OPT_WORD, OPT_END, or OPT_BAD with "unknown option '--x'" or "--x needs a
 * value" appended to why.  Uses getopt_long()'s globals: one parse per
 * process.
 */
int opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts,
             const char **arg, struct buf *why);

#endif
