/*
 * Shell completion's candidates (docs/package.md, "Shell completion").  The
 * bash and zsh scripts in share/completion/ know no aibox command: they hand
 * the words of the command line to `aibox completion --words` and offer what
 * comes back, so commands, flags and names are found where aibox itself
 * finds them:
 *	commands and subcommands	the programs in libexec (common/base/commands.h)
 *	a command's flags		its option table (common/base/opt.h),
 *					which the program describes when asked
 *					`aibox-x --aibox-options`; a flag's value
 *					by the kind its table gives
 *	task ids			the current checkout's project's tasks/,
 *					newest first
 *	images				the built ones in the store and the
 *					recipes (common/vm/image.h)
 *	projects			projects_list()
 *	--from's revisions		the current checkout's branches and
 *					tags
 */
#ifndef AIBOX_COMPLETE_H
#define AIBOX_COMPLETE_H

struct strvec;

/* complete_words() returned this: the shell should offer file names. */
#define COMPLETE_FILES 1

/*
 * The candidates for the word at index cword of argv (argv[0] is "aibox";
 * cword may be argc, a new word after the last), those that start with that
 * word, without repeats, appended to out.  Returns 0, or COMPLETE_FILES with
 * nothing appended when the word is a file name (a --file value, ...).
 * Never fails: what cannot be read offers nothing.
 */
int complete_words(int cword, int argc, const char *const *argv, struct strvec *out);

/* The task ids of the current checkout's project, newest first (none: nothing appended). */
void complete_task_ids(struct strvec *out);

/*
 * The branches, then the tags, of the repository that holds the current
 * folder, by their short names, each sorted, without repeats (none outside
 * a repository).
 */
void complete_refs(struct strvec *out);

/* The image names: built ones and recipes, sorted, without repeats. */
void complete_images(struct strvec *out);

#endif
