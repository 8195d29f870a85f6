/*
 * A small ustar writer for the results stream (docs/internals.md, "The
 * results tar").  Regular files only, names under 100 bytes, no prefix field,
 * sizes under 8 GiB.  Each call writes one whole member to fd; the stream ends
 * with tar_out_end().  Every function returns 0 or a negative errno; after an
 * error the stream is broken and the caller stops writing to it.
 */
#ifndef AIBOX_INIT_TAR_OUT_H
#define AIBOX_INIT_TAR_OUT_H

#include <stddef.h>
#include <stdint.h>

/* Write the member `name` holding the `len` bytes at data. */
int tar_out_buf(int fd, const char *name, const void *data, size_t len);

/*
 * Write the member `name` holding the whole of the regular file open at src
 * (read from offset 0).  Its size is taken with fstat; a file larger than max
 * is refused with -EFBIG before anything is written, and a file that shrinks
 * while it is copied gives -EIO (the header has already gone out).
 */
int tar_out_file(int fd, const char *name, int src, uint64_t max);

/* Write the end-of-archive marker (two zero blocks). */
int tar_out_end(int fd);

#endif
