/*
 * aibox tasks log [-f] TASK
 *
 * A task's transcript as a person reads it (common/task/transcript.h).  An ended
 * task's comes from transcript.jsonl; while a task runs there is none yet
 * (it comes back with the results), so what it has done so far is its live
 * lines: the vm[id] lines aibox task keeps in aibox.log, among them one per
 * tool call.  -f follows a running task's live lines until it ends (its
 * lock is free), then prints how it ended.  Nothing here wakes or signals
 * the task: aibox.log is read as it grows.  Everything is sanitized before
 * it is printed (common/base/out.h); on a terminal the live lines are cut
 * to its width, each piece with its time, and the transcript's lines too,
 * each piece but a line's first indented, so that no row the terminal wraps
 * starts with the VM's text posing as the line that says how it ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/opt.h"
#include "base/out.h"
#include "config/project.h"
#include "task/task_info.h"
#include "task/task_session.h"
#include "task/transcript.h"
#include "base/banned.h"

/* How often -f looks at aibox.log and the lock. */
#define FOLLOW_MS 250

static const char usage_text[] =
    "usage: aibox tasks log [-f] TASK\n"
    "\n"
    "Show a task's transcript: the agent's text, one line per tool call, the tools'\n"
    "results abbreviated, errors marked.  While the task runs, its live lines.\n"
    "TASK is the task's id (6 hex), its folder's name or its folder's path.\n"
    "\n"
    "    -f, --follow  follow a running task until it ends\n"
    "    -h, --help    show this help\n"
    "\n"
    "Exit status: 0 shown, 2 usage or error (no such task).\n";

/*
 * Before each piece of a transcript line cut to a terminal's width but its
 * first: no row but a line's first starts with the VM's text.
 */
#define TRANSCRIPT_CONT "  "

struct logger {
	struct task_dir td;
	struct buf out; /* rendered, not yet sanitized */
	unsigned cols;  /* stdout's width when a terminal, else 0 */
};

/*
 * Write l->out sanitized; transcript: it is transcript lines, each cut to a
 * terminal's width (the live lines come cut with their times).
 */
static void flush_out(struct logger *l, int transcript)
{
	struct buf clean = BUF_INIT;

	if (!l->out.len)
		return;
	if (transcript && l->cols)
		out_format_pieces(&clean, "", "", TRANSCRIPT_CONT, l->out.buf, l->out.len, l->cols);
	else
		out_sanitize(&clean, l->out.buf, l->out.len);
	if (write_all(1, clean.buf, clean.len) < 0)
		die_errno("cannot write the log");
	buf_reset(&l->out);
	buf_release(&clean);
}

/* One transcript line rendered; only_end: only the end line ("= ..."), if it is the result. */
static void transcript_render_filtered(const char *line, size_t n, int only_end, struct buf *out)
{
	if (only_end)
		transcript_render_end(line, n, out);
	else
		transcript_render(line, n, out);
}

/*
 * Render transcript.jsonl, line by line, each parsed within the bound of
 * common/task/transcript.h.  only_end: just the result line (no note of a
 * line over the bound either).  0, or -ENOENT when there is no transcript or
 * it is empty.
 */
static int show_transcript(struct logger *l, int only_end)
{
	struct buf line = BUF_INIT;
	struct stat st;
	char chunk[65536];
	size_t skipped = 0;
	int long_line = 0, fd;
	ssize_t n;

	fd = openat(l->td.dfd, guest_results[RESULT_TRANSCRIPT].name,
	            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		return -ENOENT;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		const char *p = chunk;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_errno("cannot read transcript.jsonl");
		while (n > 0) {
			const char *nl = memchr(p, '\n', (size_t)n);
			size_t take = nl ? (size_t)(nl - p) : (size_t)n;

			if (long_line)
				skipped += take;
			else if (line.len + take > TRANSCRIPT_LINE_MAX) {
				skipped = line.len + take;
				long_line = 1;
				buf_reset(&line);
			} else {
				buf_add(&line, p, take);
			}
			if (nl) {
				if (long_line && !only_end)
					buf_addf(&l->out, "[a line of %zu bytes, not shown]\n",
					         skipped);
				else if (!only_end || memmem(line.buf, line.len, "\"result\"", 8))
					transcript_render_filtered(line.buf, line.len, only_end,
					                           &l->out);
				buf_reset(&line);
				long_line = 0;
				skipped = 0;
				take++;
			}
			p += take;
			n -= (ssize_t)take;
			if (l->out.len > 65536)
				flush_out(l, 1);
		}
	}
	/* the file ends inside a line (the results' cap may have cut it): say so */
	if (long_line && !only_end)
		buf_addf(&l->out, "[a line of %zu bytes without its end, not shown]\n", skipped);
	else if (line.len)
		transcript_render_filtered(line.buf, line.len, only_end, &l->out);
	flush_out(l, 1);
	close(fd);
	buf_release(&line);
	return 0;
}

/*
 * What starts aibox's own notes among the live lines, and nothing else: each
 * row of the VM's text starts with its time (digits), so that no VM line can
 * pose as a note.
 */
#define NOTE_PREFIX "aibox: "

/* A note of aibox's own among the live lines (NOTE_PREFIX, cut as a live line is). */
static void add_note(struct logger *l, const char *note)
{
	out_format_prefix(&l->out, NOTE_PREFIX, note, strlen(note), l->cols);
}

/*
 * The live lines in aibox.log from *off on: each "HH:MM:SS vm[id]: text"
 * line as "HH:MM:SS text", an empty text too (an empty line of the VM's),
 * and aibox's line where they stop at their cap (TASK_LOG_FULL_TEXT) as a
 * note (NOTE_PREFIX); aibox's other lines (phase times) are left out.
 * A line without its end yet waits in partial (at most OUT_LINE_MAX * 4
 * bytes: a longer one is no line of ours and is dropped); ended: the task
 * has ended, so the file ends where it ends: a line without its end (a disk
 * that filled up) is shown as far as it goes, then a note says it is cut.
 */
/* The VM's text s[0..n) of the aibox.log line that starts at line (its time, 8 bytes). */
static void live_line(struct logger *l, const char *line, const char *s, size_t n)
{
	char time_prefix[10];

	/* cut to a terminal's width as aibox task cut it, each piece with its time */
	memcpy(time_prefix, line, 8);
	memcpy(time_prefix + 8, " ", 2);
	out_format_prefix(&l->out, time_prefix, s, n, l->cols);
}

static void show_live(struct logger *l, off_t *off, struct buf *partial, int ended)
{
	char chunk[65536], prefix[32], full[128];
	size_t plen, flen;
	ssize_t n;
	int fd = openat(l->td.dfd, "aibox.log", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	snprintf(prefix, sizeof(prefix), " vm[%s]: ", l->td.id);
	plen = strlen(prefix);
	snprintf(full, sizeof(full), " aibox[%s]: " TASK_LOG_FULL_TEXT, l->td.id);
	flen = strlen(full);
	while ((n = pread(fd, chunk, sizeof(chunk), *off)) > 0) {
		*off += n;
		buf_add(partial, chunk, (size_t)n);
		for (;;) {
			char *nl = memchr(partial->buf, '\n', partial->len);
			size_t len;

			if (!nl) {
				if (partial->len > OUT_LINE_MAX * 4)
					buf_reset(partial);
				break;
			}
			len = (size_t)(nl - partial->buf);
			if (len >= 8 + plen && !memcmp(partial->buf + 8, prefix, plen))
				live_line(l, partial->buf, partial->buf + 8 + plen, len - 8 - plen);
			else if (len == 8 + flen && !memcmp(partial->buf + 8, full, flen))
				add_note(l, TASK_LOG_FULL_TEXT);
			buf_consume(partial, len + 1);
		}
	}
	close(fd);
	if (ended && partial->len) {
		if (partial->len >= 8 + plen && !memcmp(partial->buf + 8, prefix, plen)) {
			live_line(l, partial->buf, partial->buf + 8 + plen,
			          partial->len - 8 - plen);
			add_note(l, "aibox.log ends inside the line above: the rest of it is lost");
		} else {
			/* one of aibox's not shown, or a VM line cut before its text */
			add_note(l, "aibox.log ends inside a line: the rest of it is lost");
		}
		buf_reset(partial);
	}
	flush_out(l, 0);
}

/* 1 while the task runs (its lock is held), 0 once it ended. */
static int running(struct logger *l)
{
	int lock_fd = -1, ret = task_check(l->td.tasks_fd, l->td.name, &lock_fd);

	if (lock_fd >= 0)
		close(lock_fd);
	return ret == 1;
}

int main(int argc, char **argv)
{
	struct logger l = {.td = TASK_DIR_INIT, .out = BUF_INIT};
	struct buf why = BUF_INIT, partial = BUF_INIT;
	struct task_info ti;
	const char *arg = NULL;
	off_t off = 0;
	int follow = 0;
	static const struct opt_spec options[] = {
	    {"follow", 'f', OPT_FLAG, NULL, 'f', "follow a running task until it ends"}, /* bit 0 */
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf bad = BUF_INIT;
	unsigned flags = 0;
	int ret;

	tool_init(argc, argv);
	if ((ret = task_args(argc, argv, options, &flags, &arg, &bad)) == 2)
		opt_describe_exit(options);
	if (ret == 1) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (ret < 0) {
		error("%s", bad.buf);
		usage_die(usage_text);
	}
	follow = flags & 1;
	l.cols = out_columns(1);
	if (task_open(arg, &l.td, &why) < 0)
		die("%s", why.buf);

	if (running(&l)) {
		show_live(&l, &off, &partial, 0);
		if (!follow)
			goto out;
		while (running(&l)) {
			struct timespec ts = {0, FOLLOW_MS * 1000000L};

			nanosleep(&ts, NULL);
			show_live(&l, &off, &partial, 0);
		}
		show_live(&l, &off, &partial, 1);
		show_transcript(&l, 1);
		if (task_info_read(l.td.tasks_fd, l.td.name, time(NULL), &ti) == 0) {
			printf("the task ended: %s\n", task_state_name(ti.state));
			task_info_release(&ti);
		}
		goto out;
	}
	/* Ended: its transcript, or without one (Claude Code did not run) its live lines. */
	if (show_transcript(&l, 0) < 0)
		show_live(&l, &off, &partial, 1);
out:
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write the log");
	task_dir_release(&l.td);
	buf_release(&l.out);
	buf_release(&why);
	buf_release(&partial);
	return 0;
}
