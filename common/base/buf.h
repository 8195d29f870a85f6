/*
 * A growable byte buffer, always NUL-terminated (like git's strbuf).
 *
 * `buf` points at `len` bytes followed by a NUL; it is never NULL, so a
 * fresh BUF_INIT can be printed.  `alloc` is 0 until the first growth.
 * Bytes may include NULs: `len` is the truth, not strlen().
 *
 * Reading untrusted input: buf_read_fd() takes a hard cap and refuses with
 * -EFBIG rather than truncate.
 */
#ifndef AIBOX_BUF_H
#define AIBOX_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

struct buf {
	char *buf;
	size_t len;
	size_t alloc;
};

extern char buf_slopbuf[];
#define BUF_INIT                                                                                   \
	{                                                                                          \
		buf_slopbuf, 0, 0                                                                  \
	}

void buf_init(struct buf *b, size_t hint);

/* Free the memory and return to BUF_INIT. */
void buf_release(struct buf *b);

/*
 * buf_release() for a buffer that held a secret: its whole memory is
 * overwritten with zeros first.  The one wiping release: secrets go nowhere
 * else.
 */
void buf_wipe_release(struct buf *b);

/* Overwrite the bytes from n on (n <= len) with zeros and set len to n. */
void buf_wipe_setlen(struct buf *b, size_t n);

/* Keep the memory, empty the contents. */
void buf_reset(struct buf *b);

/* Make room for `extra` more bytes (plus the NUL) without changing len. */
void buf_grow(struct buf *b, size_t extra);

/* Set len to n (n <= len + available room) and terminate. */
void buf_setlen(struct buf *b, size_t n);

void buf_add(struct buf *b, const void *data, size_t n);
void buf_addstr(struct buf *b, const char *s);
void buf_addch(struct buf *b, int c);
__attribute__((format(printf, 2, 3))) void buf_addf(struct buf *b, const char *fmt, ...);
void buf_vaddf(struct buf *b, const char *fmt, va_list ap);

/*
 * The one form's refusal (common/base/err.h): append why to err, when there is an
 * err, and return ret, a negative errno.
 */
int buf_refuse(struct buf *err, int ret, const char *why);

/* Drop the first n bytes (n <= len), moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);

/* Remove trailing whitespace (space, tab, CR, LF). */
void buf_rtrim(struct buf *b);

/* Hand the memory to the caller (who frees it) and reset b; never NULL. */
char *buf_detach(struct buf *b, size_t *len);

/*
 * Append everything readable from fd until EOF.  Returns the number of bytes
 * appended, -EFBIG if more than `max` bytes would be appended in total (b is
 * then left with what was read so far), or -errno.  EINTR is retried.
 */
ssize_t buf_read_fd(struct buf *b, int fd, size_t max);

/*
 * buf_read_fd() within timeout_ms: -ETIMEDOUT when EOF has not come by then
 * (b keeps what was read).  For a pipe from a child that may hang.
 */
ssize_t buf_read_fd_within(struct buf *b, int fd, size_t max, int timeout_ms);

/* Open path, buf_read_fd() it with cap `max`, close.  Returns as buf_read_fd. */
ssize_t buf_read_file(struct buf *b, const char *path, size_t max);

/* Write all of data to fd, retrying EINTR and short writes.  0 or -errno. */
int write_all(int fd, const void *data, size_t n);

/* Write b to path (created with mode, truncated).  0 or -errno. */
int buf_write_file(const struct buf *b, const char *path, int mode);

#endif
