/*
 * A streaming reader for the results tar the VM sends (docs/internals.md,
 * "The results tar").  The VM is untrusted: the reader accepts only what the
 * caller names and refuses everything else with a reason.
 *
 * Push API: feed bytes as they come off the SSH channel; nothing is buffered
 * beyond one 512-byte block.  Each accepted file's bytes go straight to an fd
 * the caller opened beforehand (aibox-task opens the result files before the
 * VM starts and cannot open anything once it has locked itself down).
 *
 *	struct tar_in_file files[] = {
 *		{ .name = "changes.bundle", .fd = fd1, .max = 2ULL << 30 },
 *		...
 *		{ .name = "result.json", .fd = fd4, .max = 1 << 20, .last = 1 },
 *	};
 *	struct tar_in t;
 *	tar_in_init(&t, files, ARRAY_SIZE(files));
 *	while (data comes) if (tar_in_feed(&t, data, n) < 0) stop, say t.err.buf;
 *	at EOF: if (tar_in_finish(&t) < 0) say t.err.buf;
 *	tar_in_clear(&t);
 *
 * What is accepted: POSIX ustar headers ("ustar\0" "00", or GNU's "ustar  \0")
 * with a correct checksum and strictly octal numeric fields; regular files
 * (typeflag '0' or '\0') whose name, with no '/', no "..", and an empty prefix
 * field, is one of the caller's; each at most once and within its cap; after
 * a file marked `last`, only the end of the archive; the end of the archive as
 * two zero blocks, optionally followed by zero padding (at most
 * TAR_IN_MAX_TRAILER bytes).  Everything else is refused: links, directories,
 * devices, pax and GNU extension headers ('x', 'g', 'L', 'K'), base-256
 * numbers, a lone zero block, non-zero bytes after the end.
 */
#ifndef AIBOX_TAR_IN_H
#define AIBOX_TAR_IN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define TAR_IN_MAX_TRAILER (1024 * 1024)

struct tar_in_file {
	const char *name; /* exact name, no '/' */
	int fd;           /* where its bytes go (written with write_all) */
	uint64_t max;     /* size cap in bytes */
	int last;         /* nothing but the end of the archive may follow it */

	/* Set by the reader. */
	int seen;      /* its header was accepted */
	int complete;  /* all its bytes were written */
	uint64_t size; /* its size from the header */
};

struct tar_in {
	struct tar_in_file *files;
	size_t nfiles;
	struct buf err; /* why the stream was refused; empty while all is well */

	/* Private. */
	unsigned char block[512];
	size_t block_len;
	struct tar_in_file *cur; /* file whose data is coming, or NULL */
	uint64_t data_left;      /* bytes of cur's data still to come */
	uint64_t pad_left;       /* padding bytes after the data */
	int zero_blocks;         /* consecutive zero header blocks seen (0-2) */
	int after_last;          /* a `last` file was completed */
	uint64_t trailer;        /* bytes after the end of the archive */
	int error;               /* sticky negative errno */
};

/* Start reading; files (not copied) must outlive the reader. */
void tar_in_init(struct tar_in *t, struct tar_in_file *files, size_t nfiles);

/* Release what the reader holds (its err); t can be initialized again. */
void tar_in_clear(struct tar_in *t);

/*
 * Take the next n bytes of the stream.  Returns 0, or a negative errno with
 * the reason in t->err: -EPROTO for a malformed or refused stream, -EFBIG for a file
 * over its cap, or the errno of a failed write.  Errors are sticky: every
 * later call returns the same error.
 */
int tar_in_feed(struct tar_in *t, const void *data, size_t n);

/*
 * The stream has ended.  0 when it ended after the end-of-archive blocks,
 * otherwise -EPROTO with t->err ("the results end in the middle of
 * 'vm.log'", ...), or the sticky error of an earlier feed.
 */
int tar_in_finish(struct tar_in *t);

/* Nonzero once the end-of-archive blocks have arrived. */
int tar_in_ended(const struct tar_in *t);

#endif
