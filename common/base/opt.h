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
struct opt_spec;

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
 * table lists the options (at most 15, each OPT_FLAG; id is not used; NULL
 * for none); -h and --help are added.  Sets bit i of *flags for each
 * table[i] given, and appends the words, those after `--` too, to words.
 * Returns 0; 1 for -h or --help (the rest unread); 2 for OPT_DESCRIBE_ARG
 * as the first argument; -EINVAL with opt_next()'s reason in err, or
 * "unexpected argument 'x'" for a word after the first max.
 */
int opt_words(int argc, char **argv, const struct opt_spec *table, size_t max, unsigned *flags,
              struct strvec *words, struct buf *err);

/*
 * For a tool with subcommands: the options before the subcommand's word,
 * where only -h and --help are known.  Returns the word's index in argv and
 * makes opt_next() start over on argv + that index (opt_restart()); argc when
 * there is no word; 0 for -h or --help; OPT_DESCRIBE for OPT_DESCRIBE_ARG;
 * -EINVAL with opt_next()'s reason in err.
 */
int opt_subcommand(int argc, char **argv, struct buf *err);

/* The long name (without "--") of longopts' option whose val is val; NULL for none. */
const char *opt_name(const struct option *longopts, int val);

/*
 * The table every tool declares its options in: the parser reads the
 * command line through it (opt_parse(), opt_words()), and shell completion
 * learns the options from it (`aibox-x --aibox-options`, opt_describe();
 * common/task/complete.h), so the two cannot drift apart.  t/0021 holds each
 * tool's table to its --help.
 */
enum opt_kind {
	OPT_FLAG,     /* takes no value */
	OPT_TEXT,     /* a value completion cannot offer: a model, an amount */
	OPT_DURATION, /* a duration, by common/base/duration.h's one rule */
	OPT_FILE,     /* a file or folder name: the shell offers file names */
	OPT_TASK,     /* a task id: the current project's tasks */
	OPT_IMAGE,    /* an image name */
	OPT_REF,      /* a branch, tag or commit */
	OPT_PROJECT,  /* a project name */
	OPT_CHOICE,   /* one of the words of value, separated by '|' */
};

struct opt_spec {
	const char *name; /* the long name, without "--"; NULL ends the table */
	char short_name;  /* the one-letter name, or 0 */
	enum opt_kind kind;
	const char
	    *value;       /* the value's word in --help ("NAME", "basic|bearer"); NULL for a flag */
	int id;           /* what opt_parse() returns for it: above 1, not '?' or 'h' */
	const char *help; /* its line in --help; NULL for plumbing no user is shown */
};

/* The first argument that asks a tool for its table: completion's question. */
#define OPT_DESCRIBE_ARG "--aibox-options"

#define OPT_HELP     'h'  /* -h or --help, added to every table */
#define OPT_DESCRIBE (-2) /* argv[1] is OPT_DESCRIBE_ARG: describe the table (opt_describe()) */

/* At most this many options in a table. */
#define OPT_TABLE_MAX 48

/*
 * The next option or word of argv, read through table (-h and --help added):
 * as opt_next(), but an option's spec's id for it (its short name too),
 * OPT_HELP for -h or --help, and OPT_DESCRIBE when argv[1] is
 * OPT_DESCRIBE_ARG (then the rest is not read).  A table longer than
 * OPT_TABLE_MAX or an id of 0, 1, '?' or 'h' is a BUG().
 */
int opt_parse(int argc, char **argv, const struct opt_spec *table, const char **arg,
              struct buf *err);

/* The spec of table whose id is id; NULL for none. */
const struct opt_spec *opt_spec_of(const struct opt_spec *table, int id);

/*
 * Append table's description for completion to out, one line per option
 * shown to users (help not NULL), -h/--help last:
 *	SUB TAB --name TAB -x TAB kind TAB value
 * sub the subcommand the table is for ("" for the tool itself), -x empty
 * without a short name, kind opt_kind_name()'s, value empty for a flag.
 */
void opt_describe(const char *sub, const struct opt_spec *table, struct buf *out);

/* A tool with subcommands: each subcommand's word and table (NULL: no options). */
struct opt_sub {
	const char *word; /* NULL ends the list */
	const struct opt_spec *table;
};

/*
 * For tools, which may print and exit (as usage_exit() in common/base/err.h):
 * opt_describe() of table (or of each of subs) on stdout, exit 0.
 */
__attribute__((noreturn)) void opt_describe_exit(const struct opt_spec *table);
__attribute__((noreturn)) void opt_describe_subs_exit(const struct opt_sub *subs);

/*
 * For tools: opt_words(), and on -h, --help, OPT_DESCRIBE_ARG or a refusal
 * the end of the process (usage_exit() with usage, opt_describe_exit()).
 */
void opt_words_exit(int argc, char **argv, const struct opt_spec *table, size_t max,
                    unsigned *flags, struct strvec *words, const char *usage);

/* The word for kind in opt_describe()'s lines: "flag", "text", "file", ...; opt_kind_parse() reads
 * it back (-EINVAL for none). */
const char *opt_kind_name(enum opt_kind kind);
int opt_kind_parse(const char *word, enum opt_kind *kind);

#endif
