/*
 * Output lines and the sanitizer for untrusted text (docs/internals.md, "Output").
 *
 * Everything aibox shows on stderr is a line "HH:MM:SS source[id6]: text"
 * (local time; source "aibox" for the host's own lines, "vm" for what came
 * from the VM; id6 the last 6 characters of the task id, which is all of a
 * 6-hex id and its end in a task folder's name).  The text always
 * goes through out_sanitize() first, whoever wrote it, so a line from the VM
 * can never move the cursor, retitle the terminal, recolour it, hide text, or
 * start a new line that pretends to be from aibox: every line break in the
 * text becomes a new line with its own prefix.
 */
#ifndef AIBOX_OUT_H
#define AIBOX_OUT_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "base/buf.h"

/* Bytes of text per output line; longer lines are split (at a character boundary). */
#define OUT_LINE_MAX 2000

/*
 * Append a cleaned copy of s[0..n) to out.  The result is well-formed UTF-8
 * with no control character but '\n' and no format character, and
 * cleaning it again changes nothing:
 * - "\r\n" and a lone "\r" become "\n"; a tab becomes spaces up to the next
 *   multiple of 8 columns (columns counted in characters since the last line
 *   break); every other C0 control and DEL is dropped;
 * - escape sequences are dropped whole: CSI (ESC [ ... final), OSC
 *   (ESC ] ... BEL or ST), DCS/SOS/PM/APC strings (ESC P/X/^/_ ... ST),
 *   ESC with intermediates (ESC ( B), two-character ESC sequences; a string
 *   with no terminator ends at the next line break; a lone ESC is dropped;
 * - C1 controls (U+0080..U+009F) are dropped, and the 8-bit forms of CSI,
 *   OSC, DCS, SOS, PM and APC take their payload with them;
 * - the line and paragraph separators U+2028 and U+2029 are line breaks
 *   ("\n");
 * - every format character (Unicode's category Cf: the bidi embeddings,
 *   overrides, isolates and marks, zero-width spaces and joiners, the byte
 *   order mark, soft hyphen, the tag characters, ...), every other
 *   default-ignorable one (the variation selectors, the combining grapheme
 *   joiner, the Hangul fillers, ...) and U+2800 BRAILLE PATTERN BLANK
 *   (utf8_is_hidden()) becomes the ASCII text "<U+XXXX>" (4 to 6 uppercase
 *   hex digits): they are invisible or make text read differently from what
 *   it is, and a hidden one must not pass into what the user reads or
 *   copies, nor go unseen;
 * - ill-formed UTF-8 (overlong forms, surrogates, > U+10FFFF, stray or
 *   missing continuation bytes) becomes U+FFFD, one per maximal subpart;
 * - under a locale whose charset is not UTF-8 (out_charset_ascii()), every
 *   character outside ASCII (U+FFFD too) becomes "<U+XXXX>" as a hidden one
 *   does, so the result is ASCII: in an 8-bit charset the bytes 0x80-0x9F of
 *   a UTF-8 character ("Û" is C3 9B: 9B is CSI there) are C1 controls.
 */
void out_sanitize(struct buf *out, const char *s, size_t n);

/*
 * Whether the locale the environment names (LC_ALL, else LC_CTYPE, else
 * LANG: the first set and not empty) has a charset other than UTF-8: a name
 * whose charset part ("de_DE.ISO-8859-1", "ru_RU.KOI8-R") is not UTF-8 in
 * any spelling ("UTF-8", "utf8"), or that has none ("en_US": its language's
 * 8-bit one); not so for C, POSIX or no name at all, which say nothing of the
 * terminal's.  Read once a process.  1 or 0.
 */
int out_charset_ascii(void);

/*
 * Append to out the lines for text s[0..n), as written at `when`: the text
 * is sanitized, split at its line breaks and every OUT_LINE_MAX bytes, and
 * each piece becomes "HH:MM:SS source[id6]: piece\n" ("source: " when id is
 * NULL or empty).  A final line break adds no empty line; an empty text gives
 * one line with an empty text.  source and id are the caller's own
 * (trusted) strings.
 */
void out_format(struct buf *out, time_t when, const char *source, const char *id, const char *s,
                size_t n);

/*
 * The fewest columns of text a line's piece gets on a terminal, however
 * narrow: a prefix wider than the terminal leaves this many.
 */
#define OUT_MIN_COLUMNS 20

/*
 * out_format() for a terminal cols columns wide (0: not a terminal, the same
 * as out_format()): each piece of a line also fits the row its prefix
 * starts, counting any character outside ASCII as two columns, so the
 * terminal does not wrap a line and no row starts with text of the line
 * itself (which could pose as a line of aibox's at the left edge).  Not
 * so on a terminal narrower than the prefix and OUT_MIN_COLUMNS, whose
 * pieces get OUT_MIN_COLUMNS anyway, nor on one made narrower afterwards.
 */
void out_format_width(struct buf *out, time_t when, const char *source, const char *id,
                      const char *s, size_t n, unsigned cols);

/*
 * out_format_width() with a prefix of the caller's own (ASCII, trusted) in
 * place of "HH:MM:SS source[id6]: ": `aibox tasks log`'s live lines,
 * "HH:MM:SS text".
 */
void out_format_prefix(struct buf *out, const char *prefix, const char *s, size_t n, unsigned cols);

/*
 * out_format_prefix() with first before the text's first piece, line before
 * the first piece of each of its later lines, and cont before every other
 * piece (all ASCII, trusted): `aibox tasks log`'s transcript lines, the VM's
 * text from their start (first and line ""), whose rows on a terminal other
 * than a line's first then never start with its text (cont "  ");
 * out_write_quoting()'s line (line and cont blanks).
 */
void out_format_pieces(struct buf *out, const char *first, const char *line, const char *cont,
                       const char *s, size_t n, unsigned cols);

/*
 * The width taken for a terminal that does not say its own (0 columns: a
 * serial console, a pseudo-terminal not sized yet), as terminal programs
 * take it.
 */
#define OUT_DEFAULT_COLUMNS 80

/*
 * The length of the line break s[0..n) starts with as out_sanitize() reads
 * one: "\r\n" 2, "\n" or a lone "\r" 1, U+2028 or U+2029 3; 0 when it
 * starts with none.
 */
size_t out_line_break_len(const char *s, size_t n);

/* A line s[0..n) without its '\n', as struct out_lines hands it on. */
typedef void out_line_fn(void *ctx, const char *s, size_t n);

/*
 * The one reader of lines from a stream of untrusted bytes
 * (out_relay_start()'s worker, common/vm/ssh.c's reader of the VM's stderr):
 * out_lines_feed() hands each line to fn(ctx, ...) without its '\n' as it
 * ends.  A line longer than max (at least 4) comes in pieces of at most max
 * bytes, each cut before a character the cut would split
 * (utf8_whole_len()), so that it shows whole in the next piece, not as two
 * U+FFFD; a line break (out_line_break_len(): "\r", "\r\n", U+2028,
 * U+2029) right after such a piece, or the newline alone, ends the line of
 * that piece and adds no empty line, in whatever read it comes or at the end
 * of the stream, as the line read whole would show.  out_lines_end() at
 * the end of the stream hands on what is left: a last line without its
 * end.  The line is held in a buffer of at most max bytes.  fn NULL:
 * lines are dropped.
 */
struct out_lines {
	struct buf line; /* the line so far, at most max bytes */
	size_t max;
	int cut; /* the last piece handed on had no end: the line goes on */
	out_line_fn *fn;
	void *ctx;
};

void out_lines_init(struct out_lines *ol, size_t max, out_line_fn *fn, void *ctx);
void out_lines_feed(struct out_lines *ol, const char *p, size_t n);
void out_lines_end(struct out_lines *ol);
void out_lines_release(struct out_lines *ol);

/* fd's width in columns when it is a terminal (OUT_DEFAULT_COLUMNS when it says 0), else 0. */
unsigned out_columns(int fd);

/*
 * out_format() for now, written to fd with one write per line (so lines from
 * several processes sharing a terminal do not interleave mid-line); to a
 * terminal, the lines of any source but "aibox" (the VM's) with
 * out_format_width() at its width: aibox's own lines, which may hold a
 * command to copy (the fetch command), wrap as the terminal wraps them.
 * Returns 0 or -errno.
 */
int out_write(int fd, const char *source, const char *id, const char *s, size_t n);

/* out_write() of lines written at `when` (aibox tasks show: a task's lines with their times). */
int out_write_at(int fd, time_t when, const char *source, const char *id, const char *s, size_t n);

/*
 * out_write_at() of one line of source's own words that quote text the VM
 * chose (a task's why: a ref name the bundle check refused, a results file
 * name): its first piece has the prefix, every other piece (past a line
 * break, or on a terminal past its width, cut as a vm line is) starts with
 * blanks as wide as the prefix, so that no row starts with the VM's text,
 * which could pose there as a line of aibox's or a command to paste
 * (docs/internals.md, "Output").  Returns 0 or -errno.
 */
int out_write_quoting(int fd, time_t when, const char *source, const char *id, const char *s,
                      size_t n);

/*
 * A relay that gives other programs' stderr our lines: what is written to
 * the pipe it makes goes to fd as out_write() lines of source and id, one a
 * line as it comes (a longer one in pieces of OUT_LINE_MAX bytes, struct
 * out_lines).  aibox task hands the write end
 * to its helpers as their stderr (docs/tasks.md, "Results").
 *
 * The relay is a worker of ours (spawn_worker(), SPAWN_WORKER_PDEATH) that
 * holds the read end and fd, and ends at the pipe's end of file: once every
 * holder of the write end has closed it.
 */
struct out_relay {
	pid_t pid; /* the worker, -1 when none */
	int fd;    /* the pipe's write end (ours until out_relay_end()), -1 when none */
};

#define OUT_RELAY_INIT                                                                             \
	{                                                                                          \
		-1, -1                                                                             \
	}

/* Start the relay.  0, or -errno (then r holds nothing). */
int out_relay_start(struct out_relay *r, int fd, const char *source, const char *id);

/*
 * The same relay with each line handed to fn(ctx, ...) in the worker instead
 * (in pieces of at most max bytes, struct out_lines); fd is
 * what the worker keeps open for it, ctx what it points to is the worker's
 * copy (taken at the fork).
 */
int out_relay_start_fn(struct out_relay *r, int fd, size_t max, out_line_fn *fn, void *ctx);

/*
 * Close our write end and wait for the worker to write what it has and end,
 * at most timeout_ms (a writer that still holds the pipe: then SIGKILL).
 * Nothing to do for a relay never started.
 */
void out_relay_end(struct out_relay *r, int timeout_ms);

/* out_write() of a printf-formatted text. */
__attribute__((format(printf, 4, 5))) int out_printf(int fd, const char *source, const char *id,
                                                     const char *fmt, ...);

#endif
