/*
 * The prompt reader: what `aibox task` hands Claude Code as its prompt.
 *
 * The prompt is the arguments joined by one space, then the text of each
 * --file in order, each after a blank line ("\n\n" between parts; a part's
 * own text is never changed).  `--file -` reads stdin (once).  With no
 * arguments and no --file, stdin is read, unless it is a terminal.
 *
 * Limits and conversions:
 * - At most PROMPT_MAX (1 MiB) bytes, arguments and files together, each
 *   counted as given or as saved on disk, before any conversion (the joining
 *   separators are not counted).  More is refused, never truncated.
 * - A file (or stdin) starting with a byte order mark is converted: UTF-8's
 *   BOM is dropped; UTF-16 LE or BE is converted to UTF-8 (an odd length or
 *   an unpaired surrogate is refused).  Without a BOM the text must be UTF-8.
 * - Invalid UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated
 *   sequences) and NUL characters are refused, in arguments too.
 * - A prompt that is empty or only white space is refused.
 *
 * Path rules (a repository's links must not make a task read other files):
 * - A relative path, and every link met on the way, must stay inside the
 *   current folder: a ".." that leaves it, or a link whose target leaves it or
 *   is absolute, is refused.  The kernel's openat2(RESOLVE_BENEATH) does the
 *   walk where it exists; elsewhere (ENOSYS, or a seccomp filter saying
 *   EPERM) an equivalent walk, one component at a time with
 *   O_PATH|O_NOFOLLOW and readlinkat, keeping the folders it went through so
 *   that ".." goes back the way it came.
 * - An absolute path must not end in a link (links before the end are fine).
 * - The file must be a plain file: a folder, FIFO, socket or device is
 *   refused before it is opened for reading, so a FIFO cannot block.
 *
 * Errors: every function returns 0 or a negative errno and appends one
 * message line to `err` (no program name, no newline), naming the path and
 * the rule, e.g. "'../x': a relative path must stay inside the current
 * folder ('..' leaves it)".  Nothing here exits or prints.
 */
#ifndef AIBOX_PROMPT_H
#define AIBOX_PROMPT_H

#include <stddef.h>

#include "base/buf.h"
#include "base/guest_abi.h"

/* The host's cap is the guest's (common/base/guest_abi.h): the init runs no longer prompt. */
#define PROMPT_MAX GUEST_PROMPT_MAX

/* Flags for prompt_read() and prompt_open(). */
#define PROMPT_NO_OPENAT2 0x1 /* use the portable walk even where openat2 exists */

struct prompt_opts {
	char **args; /* the words of the prompt, may be NULL if nargs is 0 */
	size_t nargs;
	const char **files; /* --file arguments in order; "-" is stdin */
	size_t nfiles;
	int stdin_fd;   /* what "stdin" is (normally 0) */
	size_t max;     /* 0 means PROMPT_MAX */
	unsigned flags; /* PROMPT_NO_OPENAT2 */
};

/*
 * Build the prompt into `out` (appended, always NUL-terminated).  Returns 0,
 * or a negative errno with a message in `err`:
 * -EFBIG over the limit; -EILSEQ bad text; -ENODATA empty prompt;
 * -ENOTTY no arguments, no --file and stdin is a terminal; -EXDEV a path that
 * leaves the current folder; -ELOOP an absolute path ending in a link (or
 * too many links); -EISDIR a folder; -EINVAL another file that is not a
 * plain file, or stdin named twice; other errors (-ENOENT, -EACCES, ...) as
 * the system gave them.
 * On error `out` holds an unspecified part of the prompt.
 */
int prompt_read(const struct prompt_opts *o, struct buf *out, struct buf *err);

/*
 * Open `path` for reading under the path rules above.  Returns an fd (>= 0,
 * close-on-exec, a plain file) or a negative errno with a message in `err`.
 */
int prompt_open(const char *path, unsigned flags, struct buf *err);

/*
 * Convert text read from a file: drop a UTF-8 BOM, convert UTF-16 with a BOM,
 * then check that the result is UTF-8 without NUL.  `name` is used in the
 * message.  Appends to `out`; returns 0, or -EILSEQ with a message in `err`.
 */
int prompt_decode(const char *data, size_t n, const char *name, struct buf *out, struct buf *err);

/* Does this kernel (and seccomp filter) let us use openat2()?  Cached. */
int prompt_have_openat2(void);

#endif
