#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "config/prompt.h"
#include "base/utf8.h"
#include "base/banned.h"

#define MAX_LINKS 40

static const char rule_beneath[] =
    "a relative path, and every link in it, must stay inside the current folder";

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
#ifdef SYS_openat2
	return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
#else
	errno = ENOSYS;
	return -1;
#endif
}

int prompt_have_openat2(void)
{
	static int have = -1;

	if (have < 0) {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
		long fd = sys_openat2(AT_FDCWD, ".", &how);

		if (fd >= 0) {
			close((int)fd);
			have = 1;
		} else {
			/* ENOSYS: old kernel; EPERM/EACCES: a filter that forbids it */
			have = !(errno == ENOSYS || errno == EPERM || errno == EACCES);
		}
	}
	return have;
}

static const char *type_name(mode_t m)
{
	if (S_ISDIR(m))
		return "a folder";
	if (S_ISFIFO(m))
		return "a pipe (FIFO)";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISLNK(m))
		return "a link";
	return "not a plain file";
}

static int refuse_type(const char *path, mode_t m, struct buf *err)
{
	buf_addf(err, "'%s': is %s; the file must be a plain file%s", path, type_name(m),
	         S_ISFIFO(m) ? " (for a pipe, use --file -)" : "");
	return S_ISDIR(m) ? -EISDIR : -EINVAL;
}

static int sys_error(const char *path, int e, struct buf *err)
{
	buf_addf(err, "cannot open '%s': %s", path, strerror(e));
	return -e;
}

/* 1 when what is left of a path names more: anything but slashes and ".", or a "..". */
static int path_has_more(const struct buf *rest)
{
	for (size_t i = 0; i < rest->len; i++)
		if (rest->buf[i] != '/' && rest->buf[i] != '.')
			return 1;
	return rest->len && strstr(rest->buf, "..") != NULL;
}

/*
 * The link fd (O_PATH) met as the component comp of path: its target, which
 * must be relative and within MAX_LINKS links, becomes the start of rest,
 * followed by what came after the link (had_slash: something did); via says
 * which link the walk went through, for the messages.  0, or a negative
 * errno with err set.
 */
static int follow_link(int fd, const char *path, const char *comp, struct buf *rest, int had_slash,
                       int *links, struct buf *via, struct buf *err)
{
	char target[PATH_MAX + 1];
	ssize_t n = readlinkat(fd, "", target, sizeof(target));
	struct buf nrest = BUF_INIT;

	if (n < 0)
		return sys_error(path, errno, err);
	if ((size_t)n >= sizeof(target))
		return sys_error(path, ENAMETOOLONG, err);
	target[n] = '\0';
	if (++*links > MAX_LINKS)
		return sys_error(path, ELOOP, err);
	if (target[0] == '/') {
		buf_addf(err, "'%s': %s (the link '%s' points to the absolute path '%s')", path,
		         rule_beneath, comp, target);
		return -EXDEV;
	}
	buf_reset(via);
	buf_addf(via, ", through the link '%s' to '%s'", comp, target);
	/* walk the target next, then what followed the link */
	buf_addstr(&nrest, target);
	if (rest->len || had_slash) {
		buf_addch(&nrest, '/');
		buf_add(&nrest, rest->buf, rest->len);
	}
	buf_release(rest);
	*rest = nrest;
	return 0;
}

/*
 * The portable walk for a relative path: one component at a time from the
 * current folder, never following a link blindly, never opening "..".
 * Returns an O_PATH fd of what the path names, its parent folder in *parent
 * and its last name in *last (for the reopen), or a negative errno.
 */
static int walk_beneath(const char *path, int *parent, struct buf *last, struct buf *err)
{
	int *stack = NULL; /* folders we went through; stack[0] is "." */
	size_t depth = 0, alloc = 0;
	struct buf rest = BUF_INIT, comp = BUF_INIT, via = BUF_INIT;
	int links = 0, ret = -EINVAL, result = -1;

	ALLOC_GROW(stack, 1, alloc);
	stack[0] = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (stack[0] < 0) {
		ret = -errno;
		buf_addf(err, "cannot open the current folder: %s", strerror(errno));
		goto out;
	}
	buf_addstr(&rest, path);

	while (rest.len) {
		const char *slash = memchr(rest.buf, '/', rest.len);
		size_t clen = slash ? (size_t)(slash - rest.buf) : rest.len;
		int more, fd;
		struct stat st;

		buf_reset(&comp);
		buf_add(&comp, rest.buf, clen);
		buf_consume(&rest, slash ? clen + 1 : clen);
		if (!comp.len || !strcmp(comp.buf, "."))
			continue;
		if (!strcmp(comp.buf, "..")) {
			if (depth == 0) {
				buf_addf(err, "'%s': %s ('..' leaves it%s)", path, rule_beneath,
				         via.buf);
				ret = -EXDEV;
				goto out;
			}
			close(stack[depth--]);
			continue;
		}
		more = path_has_more(&rest);

		fd = openat(stack[depth], comp.buf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			ret = sys_error(path, errno, err);
			goto out;
		}
		if (fstat(fd, &st) < 0) {
			ret = sys_error(path, errno, err);
			close(fd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			ret = follow_link(fd, path, comp.buf, &rest, slash != NULL, &links, &via,
			                  err);
			close(fd);
			if (ret < 0)
				goto out;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			ALLOC_GROW(stack, depth + 2, alloc);
			stack[++depth] = fd;
			continue;
		}
		if (more || slash) {
			close(fd);
			ret = sys_error(path, ENOTDIR, err);
			goto out;
		}
		/* the end: what the path names, not a folder */
		result = fd;
		buf_reset(last);
		buf_add(last, comp.buf, comp.len);
		*parent = dup(stack[depth]);
		if (*parent < 0) {
			ret = sys_error(path, errno, err);
			close(result);
			result = -1;
			goto out;
		}
		ret = result;
		goto out;
	}
	/* the path ended on a folder */
	buf_addf(err, "'%s': is a folder; the file must be a plain file", path);
	ret = -EISDIR;
out:
	for (size_t i = 0; stack && i <= depth; i++)
		if (stack[i] >= 0)
			close(stack[i]);
	free(stack);
	buf_release(&rest);
	buf_release(&comp);
	buf_release(&via);
	return ret;
}

/* Open the plain file that `pathfd` (O_PATH) is, without blocking on a swapped-in FIFO. */
static int reopen_checked(int pathfd, int newfd, const char *path, struct buf *err)
{
	struct stat a, b;
	int flags;

	if (newfd < 0)
		return sys_error(path, errno, err);
	if (fstat(pathfd, &a) < 0 || fstat(newfd, &b) < 0) {
		int e = errno;

		close(newfd);
		return sys_error(path, e, err);
	}
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino || !S_ISREG(b.st_mode)) {
		close(newfd);
		buf_addf(err, "'%s': changed while it was being opened", path);
		return -EAGAIN;
	}
	flags = fcntl(newfd, F_GETFL);
	if (flags >= 0)
		fcntl(newfd, F_SETFL, flags & ~O_NONBLOCK);
	return newfd;
}

int prompt_open(const char *path, unsigned flags, struct buf *err)
{
	const int rdflags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
	struct stat st;
	int pathfd = -1, ret;

	if (!*path) {
		buf_addf(err, "'': an empty path names no file");
		return -ENOENT;
	}
	if (path[0] == '/') {
		/* O_PATH|O_NOFOLLOW gives the link itself when the path ends in one */
		pathfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pathfd < 0)
			return sys_error(path, errno, err);
		if (fstat(pathfd, &st) < 0) {
			ret = sys_error(path, errno, err);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			buf_addf(err, "'%s': an absolute path must not end in a link", path);
			ret = -ELOOP;
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			ret = refuse_type(path, st.st_mode, err);
			goto out;
		}
		ret = reopen_checked(pathfd, open(path, rdflags | O_NOFOLLOW), path, err);
		goto out;
	}

	if (!(flags & PROMPT_NO_OPENAT2) && prompt_have_openat2()) {
		struct open_how how = {
		    .flags = O_PATH | O_CLOEXEC,
		    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
		};
		long fd = sys_openat2(AT_FDCWD, path, &how);

		if (fd < 0) {
			if (errno == EXDEV) {
				/* the walk says which part leaves; it refuses too */
				struct buf last = BUF_INIT, why = BUF_INIT;
				int parent = -1, r = walk_beneath(path, &parent, &last, &why);

				if (r >= 0) {
					close(r);
					close(parent);
				}
				if (r == -EXDEV)
					buf_add(err, why.buf, why.len);
				else
					buf_addf(err, "'%s': %s", path, rule_beneath);
				buf_release(&last);
				buf_release(&why);
				return -EXDEV;
			}
			return sys_error(path, errno, err);
		}
		pathfd = (int)fd;
		if (fstat(pathfd, &st) < 0) {
			ret = sys_error(path, errno, err);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			ret = refuse_type(path, st.st_mode, err);
			goto out;
		}
		how.flags = (uint64_t)rdflags;
		fd = sys_openat2(AT_FDCWD, path, &how);
		ret = reopen_checked(pathfd, fd < 0 ? -1 : (int)fd, path, err);
		goto out;
	}

	{
		struct buf last = BUF_INIT;
		int parent = -1;

		pathfd = walk_beneath(path, &parent, &last, err);
		if (pathfd < 0) {
			buf_release(&last);
			return pathfd;
		}
		if (fstat(pathfd, &st) < 0)
			ret = sys_error(path, errno, err);
		else if (!S_ISREG(st.st_mode))
			ret = refuse_type(path, st.st_mode, err);
		else
			ret = reopen_checked(pathfd, openat(parent, last.buf, rdflags | O_NOFOLLOW),
			                     path, err);
		close(parent);
		buf_release(&last);
	}
out:
	if (pathfd >= 0)
		close(pathfd);
	return ret;
}

static int bad_text(const char *name, const char *what, size_t off, struct buf *err)
{
	buf_addf(
	    err,
	    "%s: %s at byte %zu; the prompt must be UTF-8 text (or UTF-16 with a byte order mark)",
	    name, what, off);
	return -EILSEQ;
}

static int check_utf8(const char *s, size_t n, size_t base, const char *name, struct buf *err)
{
	const char *nul = memchr(s, '\0', n);
	size_t nul_at = nul ? (size_t)(nul - s) : n, bad;

	/* report whichever comes first */
	if (!utf8_valid(s, nul_at, &bad))
		return bad_text(name, "invalid UTF-8", base + bad, err);
	if (nul)
		return bad_text(name, "a NUL character", base + nul_at, err);
	return 0;
}

static int decode_utf16(const unsigned char *s, size_t n, int big, const char *name,
                        struct buf *out, struct buf *err)
{
	if (n % 2)
		return bad_text(name, "UTF-16 with an odd number of bytes", n - 1 + 2, err);
	for (size_t i = 0; i < n; i += 2) {
		uint32_t u =
		    big ? (uint32_t)(s[i] << 8 | s[i + 1]) : (uint32_t)(s[i + 1] << 8 | s[i]);

		if (u >= 0xD800 && u <= 0xDBFF) {
			uint32_t l;

			if (i + 2 >= n)
				return bad_text(name, "an unpaired UTF-16 surrogate", i + 2, err);
			l = big ? (uint32_t)(s[i + 2] << 8 | s[i + 3])
			        : (uint32_t)(s[i + 3] << 8 | s[i + 2]);
			if (l < 0xDC00 || l > 0xDFFF)
				return bad_text(name, "an unpaired UTF-16 surrogate", i + 2, err);
			u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
			i += 2;
		} else if (u >= 0xDC00 && u <= 0xDFFF) {
			return bad_text(name, "an unpaired UTF-16 surrogate", i + 2, err);
		} else if (u == 0) {
			return bad_text(name, "a NUL character", i + 2, err);
		}
		utf8_add(out, u);
	}
	return 0;
}

int prompt_decode(const char *data, size_t n, const char *name, struct buf *out, struct buf *err)
{
	const unsigned char *s = (const unsigned char *)data;

	/* byte offsets in messages count from the start of the file, BOM included */
	if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) {
		int ret = check_utf8(data + 3, n - 3, 3, name, err);

		if (!ret)
			buf_add(out, data + 3, n - 3);
		return ret;
	}
	if (n >= 2 && ((s[0] == 0xFF && s[1] == 0xFE) || (s[0] == 0xFE && s[1] == 0xFF))) {
		size_t start = out->len;
		int ret = decode_utf16(s + 2, n - 2, s[0] == 0xFE, name, out, err);

		if (ret)
			buf_setlen(out, start);
		return ret;
	}
	{
		int ret = check_utf8(data, n, 0, name, err);

		if (!ret)
			buf_add(out, data, n);
		return ret;
	}
}

static int too_big(size_t max, struct buf *err)
{
	buf_addf(err, "the prompt is over %zu bytes (%s), arguments and files together, as saved",
	         max, max == PROMPT_MAX ? "1 MiB" : "the limit");
	return -EFBIG;
}

/* Read one source (file or stdin) within the budget, decode it, append it. */
static int add_source(int fd, const char *name, size_t *used, size_t max, struct buf *out,
                      struct buf *err)
{
	struct buf raw = BUF_INIT;
	ssize_t n;
	int ret;

	n = buf_read_fd(&raw, fd, max - *used);
	if (n == -EFBIG) {
		ret = too_big(max, err);
		goto out;
	}
	if (n < 0) {
		buf_addf(err, "cannot read %s: %s", name, strerror((int)-n));
		ret = (int)n;
		goto out;
	}
	*used += raw.len;
	ret = prompt_decode(raw.buf, raw.len, name, out, err);
out:
	buf_release(&raw);
	return ret;
}

int prompt_read(const struct prompt_opts *o, struct buf *out, struct buf *err)
{
	size_t max = o->max ? o->max : PROMPT_MAX;
	size_t used = 0, start = out->len;
	int stdin_used = 0, ret = 0;
	struct buf name = BUF_INIT;

	for (size_t i = 0; i < o->nargs; i++) {
		size_t len = strlen(o->args[i]);

		if (len > max - used) {
			ret = too_big(max, err);
			goto out;
		}
		used += len;
		buf_reset(&name);
		buf_addf(&name, "argument %zu", i + 1);
		ret = check_utf8(o->args[i], len, 0, name.buf, err);
		if (ret)
			goto out;
		if (i)
			buf_addch(out, ' ');
		buf_add(out, o->args[i], len);
	}

	if (!o->nargs && !o->nfiles && isatty(o->stdin_fd)) {
		buf_addf(err, "no prompt: give it as arguments, with --file, or on stdin (stdin is "
		              "a terminal)");
		ret = -ENOTTY;
		goto out;
	}

	for (size_t i = 0; i < o->nfiles || (!o->nargs && !o->nfiles && i == 0); i++) {
		const char *f = o->nfiles ? o->files[i] : "-";
		int fd;

		if (out->len > start)
			buf_addstr(out, "\n\n");
		buf_reset(&name);
		if (!strcmp(f, "-")) {
			if (stdin_used++) {
				buf_addf(err, "'-': stdin can be read only once");
				ret = -EINVAL;
				goto out;
			}
			buf_addstr(&name, "stdin");
			ret = add_source(o->stdin_fd, name.buf, &used, max, out, err);
		} else {
			fd = prompt_open(f, o->flags, err);
			if (fd < 0) {
				ret = fd;
				goto out;
			}
			buf_addf(&name, "'%s'", f);
			ret = add_source(fd, name.buf, &used, max, out, err);
			close(fd);
		}
		if (ret)
			goto out;
	}

	{
		int blank = 1;

		for (size_t i = start; i < out->len && blank; i++)
			blank = out->buf[i] && strchr(" \t\r\n\v\f", out->buf[i]);
		if (blank) {
			buf_addf(err, "the prompt is empty");
			ret = -ENODATA;
		}
	}
out:
	buf_release(&name);
	return ret;
}
