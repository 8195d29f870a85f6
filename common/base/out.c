#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/out.h"
#include "base/spawn.h"
#include "base/utf8.h"
#include "base/banned.h"

#define ESC 0x1B
#define BEL 0x07

struct scan {
	const unsigned char *s;
	size_t n, i;
};

/* The code point at the current position, and its length, without moving. */
static uint32_t peek(const struct scan *sc, size_t *len)
{
	uint32_t cp;
	int r = utf8_decode(sc->s + sc->i, sc->n - sc->i, &cp);

	*len = (size_t)(r < 0 ? -r : r);
	return cp; /* U+FFFD for an ill-formed sequence */
}

/* After a CSI introducer: parameters, intermediates, one final byte. */
static void skip_csi(struct scan *sc)
{
	while (sc->i < sc->n) {
		unsigned char c = sc->s[sc->i];

		if (c >= 0x20 && c <= 0x3F) {
			sc->i++;
			continue;
		}
		if (c >= 0x40 && c <= 0x7E)
			sc->i++; /* the final byte ends it */
		/* anything else cuts the sequence short and is looked at anew */
		return;
	}
}

/* After an OSC/DCS/SOS/PM/APC introducer: up to BEL, ST, or a line break. */
static void skip_string(struct scan *sc)
{
	while (sc->i < sc->n) {
		unsigned char c = sc->s[sc->i];
		size_t len;
		uint32_t cp;

		if (c == BEL) {
			sc->i++;
			return;
		}
		if (c == '\n' || c == '\r')
			return;
		if (c == ESC) {
			if (sc->i + 1 < sc->n && sc->s[sc->i + 1] == '\\')
				sc->i += 2; /* ST */
			/* another ESC ends the string and starts something new */
			return;
		}
		cp = peek(sc, &len);
		sc->i += len;
		if (cp == 0x9C) /* 8-bit ST */
			return;
	}
}

static void skip_escape(struct scan *sc)
{
	unsigned char c;

	/* sc->i is just past the ESC */
	if (sc->i >= sc->n)
		return;
	c = sc->s[sc->i];
	if (c == '[') {
		sc->i++;
		skip_csi(sc);
	} else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
		sc->i++;
		skip_string(sc);
	} else if (c >= 0x20 && c <= 0x2F) {
		while (sc->i < sc->n && sc->s[sc->i] >= 0x20 && sc->s[sc->i] <= 0x2F)
			sc->i++;
		if (sc->i < sc->n && sc->s[sc->i] >= 0x30 && sc->s[sc->i] <= 0x7E)
			sc->i++;
	} else if (c >= 0x30 && c <= 0x7E) {
		sc->i++;
	}
	/* else: a lone ESC; what follows is ordinary text */
}

/* The charset part of a locale's name ("UTF-8" of "de_DE.UTF-8@euro") is UTF-8. */
static int names_utf8(const char *name)
{
	const char *dot = strchr(name, '.');
	char set[8];
	size_t len = 0;

	if (!dot)
		return 0;
	for (const char *p = dot + 1; *p && *p != '@'; p++) {
		if (*p == '-' || *p == '_')
			continue;
		if (len == sizeof(set) - 1)
			return 0;
		set[len++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	}
	set[len] = '\0';
	return !strcmp(set, "utf8");
}

int out_charset_ascii(void)
{
	static int ascii = -1;
	static const char *const vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
	const char *name = NULL;

	if (ascii >= 0)
		return ascii;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]) && !name; i++) {
		const char *v = getenv(vars[i]);

		if (v && *v)
			name = v;
	}
	/* C and POSIX have no charset of their own: the terminal's is taken, as before */
	ascii = name && strcmp(name, "C") && strcmp(name, "POSIX") && !names_utf8(name);
	return ascii;
}

size_t out_line_break_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	if (!n)
		return 0;
	if (u[0] == '\n')
		return 1;
	if (u[0] == '\r')
		return n > 1 && u[1] == '\n' ? 2 : 1;
	/* the line and paragraph separators, U+2028 and U+2029: line breaks like any other */
	if (n >= 3 && u[0] == 0xE2 && u[1] == 0x80 && (u[2] == 0xA8 || u[2] == 0xA9))
		return 3;
	return 0;
}

void out_sanitize(struct buf *out, const char *s, size_t n)
{
	struct scan sc = {(const unsigned char *)s, n, 0};
	size_t col = 0;
	int ascii = out_charset_ascii();

	while (sc.i < sc.n) {
		unsigned char c = sc.s[sc.i];
		size_t len;
		uint32_t cp;

		if ((len = out_line_break_len(s + sc.i, sc.n - sc.i))) {
			sc.i += len;
			buf_addch(out, '\n');
			col = 0;
			continue;
		}
		if (c < 0x80) {
			sc.i++;
			if (c == '\t') {
				do {
					buf_addch(out, ' ');
					col++;
				} while (col % 8);
			} else if (c == ESC) {
				skip_escape(&sc);
			} else if (c >= 0x20 && c < 0x7F) {
				buf_addch(out, (char)c);
				col++;
			}
			/* other C0 controls and DEL: dropped */
			continue;
		}
		cp = peek(&sc, &len);
		sc.i += len;
		if (cp >= 0x80 && cp <= 0x9F) {
			if (cp == 0x9B)
				skip_csi(&sc);
			else if (cp == 0x9D || cp == 0x90 || cp == 0x98 || cp == 0x9E || cp == 0x9F)
				skip_string(&sc);
			continue;
		}
		if (utf8_is_hidden(cp) || ascii) {
			size_t before = out->len;

			/*
			 * invisible, or able to reorder what follows: shown, never passed;
			 * so is every character outside ASCII in a charset other than
			 * UTF-8, where its bytes 0x80-0x9F are C1 controls
			 */
			buf_addf(out, "<U+%04" PRIX32 ">", cp);
			col += out->len - before;
			continue;
		}
		utf8_add(out, cp);
		col++;
	}
}

/* "HH:MM:SS source[id6]: " of when, in local time (00:00:00 where it has none). */
static void add_prefix(struct buf *out, time_t when, const char *source, const char *id)
{
	struct tm tm;

	if (!localtime_r(&when, &tm))
		memset(&tm, 0, sizeof(tm));
	buf_addf(out, "%02d:%02d:%02d %s", tm.tm_hour, tm.tm_min, tm.tm_sec, source);
	if (id && *id) {
		size_t len = strlen(id);

		/* the end of the id: a folder name "20261007-170916-259e07" gives 259e07 */
		buf_addf(out, "[%s]", id + (len > 6 ? len - 6 : 0));
	}
	buf_addstr(out, ": ");
}

/*
 * Where the piece of clean[pos..end) that starts at pos ends: at most
 * OUT_LINE_MAX bytes, and with avail (0: any) at most that many columns,
 * counting an ASCII character as one and any other as two (wide or not: a
 * row may then end short, never past the edge).  At a character boundary;
 * at least one character.
 */
static size_t piece_end(const char *clean, size_t pos, size_t end, size_t avail)
{
	size_t cut = pos, cols = 0;

	while (cut < end) {
		unsigned char c = (unsigned char)clean[cut];
		size_t len = 1, w = c < 0x80 ? 1 : 2;

		while (c >= 0x80 && cut + len < end &&
		       ((unsigned char)clean[cut + len] & 0xC0) == 0x80)
			len++;
		if (cut > pos && ((avail && cols + w > avail) || cut + len - pos > OUT_LINE_MAX))
			break;
		cols += w;
		cut += len;
	}
	return cut;
}

/* The columns a piece after a prefix of plen bytes (ASCII: its columns) gets; 0: any. */
static size_t piece_columns(size_t plen, unsigned cols)
{
	if (!cols)
		return 0;
	return cols > plen + OUT_MIN_COLUMNS ? cols - plen : OUT_MIN_COLUMNS;
}

void out_format_pieces(struct buf *out, const char *first, const char *line, const char *cont,
                       const char *s, size_t n, unsigned cols)
{
	struct buf clean = BUF_INIT;
	const char *lead = first;
	size_t pos = 0;

	out_sanitize(&clean, s, n);
	do {
		const char *nl = memchr(clean.buf + pos, '\n', clean.len - pos);
		size_t end = nl ? (size_t)(nl - clean.buf) : clean.len;

		/* one logical line, in pieces */
		do {
			size_t plen = strlen(lead);
			size_t cut = piece_end(clean.buf, pos, end, piece_columns(plen, cols));

			buf_add(out, lead, plen);
			buf_add(out, clean.buf + pos, cut - pos);
			buf_addch(out, '\n');
			lead = cont;
			pos = cut;
		} while (pos < end);
		pos = nl ? end + 1 : end;
		lead = line;
	} while (pos < clean.len);
	buf_release(&clean);
}

void out_format_prefix(struct buf *out, const char *prefix, const char *s, size_t n, unsigned cols)
{
	out_format_pieces(out, prefix, prefix, prefix, s, n, cols);
}

void out_format_width(struct buf *out, time_t when, const char *source, const char *id,
                      const char *s, size_t n, unsigned cols)
{
	struct buf prefix = BUF_INIT;

	add_prefix(&prefix, when, source, id);
	out_format_prefix(out, prefix.buf, s, n, cols);
	buf_release(&prefix);
}

void out_format(struct buf *out, time_t when, const char *source, const char *id, const char *s,
                size_t n)
{
	out_format_width(out, when, source, id, s, n, 0);
}

unsigned out_columns(int fd)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
		return 0;
	/* one that does not say its width (0) wraps all the same, at a width of its own */
	return ws.ws_col ? ws.ws_col : OUT_DEFAULT_COLUMNS;
}

int out_write(int fd, const char *source, const char *id, const char *s, size_t n)
{
	return out_write_at(fd, time(NULL), source, id, s, n);
}

/* lines (each ending in '\n') to fd, one write a line.  0 or -errno. */
static int write_lines(int fd, const struct buf *lines)
{
	size_t pos = 0;
	int ret = 0;

	while (pos < lines->len && !ret) {
		const char *nl = memchr(lines->buf + pos, '\n', lines->len - pos);
		size_t end = (size_t)(nl - lines->buf) + 1; /* every line ends in '\n' */

		ret = write_all(fd, lines->buf + pos, end - pos);
		pos = end;
	}
	return ret;
}

int out_write_at(int fd, time_t when, const char *source, const char *id, const char *s, size_t n)
{
	struct buf lines = BUF_INIT;
	int ret;

	/* aibox's own lines wrap as the terminal likes: a command in one copies whole */
	out_format_width(&lines, when, source, id, s, n,
	                 strcmp(source, "aibox") ? out_columns(fd) : 0);
	ret = write_lines(fd, &lines);
	buf_release(&lines);
	return ret;
}

int out_write_quoting(int fd, time_t when, const char *source, const char *id, const char *s,
                      size_t n)
{
	struct buf lines = BUF_INIT, prefix = BUF_INIT, cont = BUF_INIT;
	int ret;

	add_prefix(&prefix, when, source, id);
	for (size_t i = 0; i < prefix.len; i++)
		buf_addch(&cont, ' ');
	out_format_pieces(&lines, prefix.buf, cont.buf, cont.buf, s, n, out_columns(fd));
	ret = write_lines(fd, &lines);
	buf_release(&lines);
	buf_release(&prefix);
	buf_release(&cont);
	return ret;
}

int out_printf(int fd, const char *source, const char *id, const char *fmt, ...)
{
	struct buf text = BUF_INIT;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	buf_vaddf(&text, fmt, ap);
	va_end(ap);
	ret = out_write(fd, source, id, text.buf, text.len);
	buf_release(&text);
	return ret;
}

void out_lines_init(struct out_lines *ol, size_t max, out_line_fn *fn, void *ctx)
{
	if (max < 4)
		BUG("out_lines_init: a bound of %zu bytes holds no character", max);
	*ol = (struct out_lines){.line = BUF_INIT, .max = max, .fn = fn, .ctx = ctx};
}

/* Whether the line so far is nothing but the end of a line handed on in pieces. */
static int end_only(const struct out_lines *ol)
{
	return ol->cut &&
	       (!ol->line.len || out_line_break_len(ol->line.buf, ol->line.len) == ol->line.len);
}

/* The line's first n bytes to fn. */
static void hand_on(struct out_lines *ol, size_t n)
{
	/* a line break right after a piece ends the line of that piece: no empty line */
	size_t skip = ol->cut ? out_line_break_len(ol->line.buf, n) : 0;

	if (ol->fn)
		ol->fn(ol->ctx, ol->line.buf + skip, n - skip);
	buf_consume(&ol->line, n);
}

void out_lines_feed(struct out_lines *ol, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (take > ol->max - ol->line.len)
			take = ol->max - ol->line.len;
		buf_add(&ol->line, p, take);
		p += take;
		n -= take;
		if (n && *p == '\n') {
			p++;
			n--;
			if (end_only(ol))
				buf_reset(&ol->line);
			else
				hand_on(ol, ol->line.len);
			ol->cut = 0;
		} else if (ol->line.len == ol->max) {
			/* a piece; a character it would split waits for the next */
			hand_on(ol, utf8_whole_len(ol->line.buf, ol->line.len));
			ol->cut = 1;
		}
	}
}

void out_lines_end(struct out_lines *ol)
{
	if (ol->line.len && !end_only(ol))
		hand_on(ol, ol->line.len);
	buf_reset(&ol->line);
	ol->cut = 0;
}

void out_lines_release(struct out_lines *ol)
{
	buf_release(&ol->line);
}

/* The worker: lines from in to fn until the end of file. */
static __attribute__((noreturn)) void relay_run(int in, size_t max, out_line_fn *fn, void *ctx)
{
	struct out_lines ol;
	char chunk[4096];
	ssize_t n;

	out_lines_init(&ol, max, fn, ctx);
	while ((n = read(in, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		out_lines_feed(&ol, chunk, (size_t)n);
	}
	out_lines_end(&ol);
	_exit(0);
}

int out_relay_start_fn(struct out_relay *r, int fd, size_t max, out_line_fn *fn, void *ctx)
{
	int p[2];
	pid_t pid;

	*r = (struct out_relay)OUT_RELAY_INIT;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = spawn_worker((int[]){p[0], fd}, 2, SPAWN_WORKER_PDEATH);
	if (pid == 0) {
		close(p[1]);
		relay_run(p[0], max, fn, ctx);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return (int)pid;
	}
	r->pid = pid;
	r->fd = p[1];
	return 0;
}

struct relay_lines {
	int fd;
	const char *source, *id;
};

static void relay_line(void *ctx, const char *s, size_t n)
{
	const struct relay_lines *rl = ctx;

	out_write(rl->fd, rl->source, rl->id, s, n);
}

int out_relay_start(struct out_relay *r, int fd, const char *source, const char *id)
{
	struct relay_lines rl = {fd, source, id};

	return out_relay_start_fn(r, fd, OUT_LINE_MAX, relay_line, &rl);
}

void out_relay_end(struct out_relay *r, int timeout_ms)
{
	int waited = 0;

	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	if (r->pid <= 0)
		return;
	while (waitpid(r->pid, NULL, WNOHANG) == 0) {
		struct timespec ts = {0, 10 * 1000000L};

		if (waited >= timeout_ms) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, NULL, 0);
			break;
		}
		nanosleep(&ts, NULL);
		waited += 10;
	}
	r->pid = -1;
}
