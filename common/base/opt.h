/*
 * Command-line options as git's parse-options reads them, for every aibox
 * tool (docs/man/aibox-task.1, docs/man/aibox-run.1), so that each says the
 * same words for the same mistake: "unknown option '--x'" (docs/exit-codes.md
 * has the exit status, t/0002-front.bats runs every tool with one).  An option may
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
#include <stddef.h>

struct buf;
struct strvec;

#define OPT_END  (-1) /* no more options: the words after `--` are argv[optind..argc) */
#define OPT_WORD 1    /* *arg is a word that stood before `--` */
#define OPT_BAD  '?'  /* an unknown option or a missing value, the reason in err */

/*
 * The next option or word of argv.  shortopts and longopts are getopt_long()'s
 * (shortopts without a leading '+', '-' or ':'; an option's val must not be 1
 * or '?').  Returns the option's val with *arg its value (NULL without one),
 * OPT_WORD, OPT_END, or OPT_BAD with "unknown option '--x'" or "--x needs a
 * value" appended to err.  Uses getopt_long()'s globals: one parse at a time,
 * from argv[1] on.
 */
int opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts,
             const char **arg, struct buf *err);

/*
 * Start over on another argv, as a tool with subcommands does once it has
 * read the subcommand's word: the next opt_next() reads that argv from its
 * argv[1] on.
 */
void opt_restart(void);

/*
 * The whole of a simple command line: options that take no value, and words.
 * longopts lists the options (at most 15, each no_argument; val and flag are
 * not used; NULL for none); -h and --help are added.  Sets bit i of *flags
 * for each longopts[i] given, and appends the words, those after `--` too,
 * to words.  Returns 0; 1 for -h or --help (the rest unread); -EINVAL with
 * opt_next()'s reason in err, or "unexpected argument 'x'" for a word after
 * the first max.
 */
int opt_words(int argc, char **argv, const struct option *longopts, size_t max, unsigned *flags,
              struct strvec *words, struct buf *err);

/*
 * For a tool with subcommands: the options before the subcommand's word,
 * where only -h and --help are known.  Returns the word's index in argv and
 * makes opt_next() start over on argv + that index (opt_restart()); argc when
 * there is no word; 0 for -h or --help; -EINVAL with opt_next()'s reason in
 * err.
 */
int opt_subcommand(int argc, char **argv, struct buf *err);

/* The long name (without "--") of longopts' option whose val is val; NULL for none. */
const char *opt_name(const struct option *longopts, int val);

#endif
