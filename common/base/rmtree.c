#include "base/rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/strvec.h"
#include "base/banned.h"

static int at_mount_root(int fd)
{
#ifdef STATX_ATTR_MOUNT_ROOT
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return !!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
#endif
	(void)fd;
	return 0;
}

struct walk {
	dev_t dev;
	struct rmtree_stats *stats;
	struct buf *where;
	struct buf path; /* relative path of the current entry */
	int err;
};

static void failed(struct walk *w, int err)
{
	if (w->err)
		return;
	w->err = err;
	if (w->where)
		buf_add(w->where, w->path.buf, w->path.len);
}

static void count(struct walk *w, const struct stat *st)
{
	if (!w->stats)
		return;
	w->stats->entries++;
	if (S_ISDIR(st->st_mode) || st->st_nlink <= 1)
		w->stats->bytes += (uint64_t)st->st_blocks * 512;
}

static void rm_entry(struct walk *w, int dirfd, const char *name, int depth, int top);

/* Read every name first: removing while reading may skip entries. */
static void rm_contents(struct walk *w, int fd, int depth)
{
	struct strvec names = STRVEC_INIT;
	struct dirent *de;
	int dfd = dup(fd);
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		failed(w, -errno);
		return;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		strvec_push(&names, de->d_name);
		errno = 0;
	}
	if (errno)
		failed(w, -errno);
	closedir(d);
	for (size_t i = 0; i < names.nr; i++) {
		size_t base = w->path.len;

		buf_addf(&w->path, "/%s", names.v[i]);
		rm_entry(w, fd, names.v[i], depth + 1, 0);
		buf_setlen(&w->path, base);
	}
	strvec_clear(&names);
}

static void rm_entry(struct walk *w, int dirfd, const char *name, int depth, int top)
{
	struct stat st, fst;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			failed(w, -errno);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0) {
			if (errno != ENOENT)
				failed(w, -errno);
			return;
		}
		count(w, &st);
		return;
	}
	if (depth > RMTREE_MAX_DEPTH) {
		failed(w, -ELOOP);
		return;
	}
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		failed(w, -errno);
		return;
	}
	if (fstat(fd, &fst) < 0 || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) {
		/* Swapped between the look and the open: leave it. */
		failed(w, -EAGAIN);
		close(fd);
		return;
	}
	if (top)
		w->dev = fst.st_dev;
	if (fst.st_dev != w->dev || at_mount_root(fd)) {
		failed(w, -EXDEV);
		close(fd);
		return;
	}
	rm_contents(w, fd, depth);
	close(fd);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0) {
		/* The cause inside was reported already; this names the folder otherwise. */
		if (errno != ENOENT)
			failed(w, -errno);
		return;
	}
	count(w, &st);
}

int rmtree_at(int dirfd, const char *name, struct rmtree_stats *stats, struct buf *where)
{
	struct walk w = {.stats = stats, .where = where, .path = BUF_INIT};
	struct stat st;

	if (fstatat(dirfd, ".", &st, 0) < 0) /* fstat() would refuse AT_FDCWD */
		return -errno;
	w.dev = st.st_dev;
	buf_addstr(&w.path, name);
	rm_entry(&w, dirfd, name, 0, 0);
	buf_release(&w.path);
	return w.err;
}

void format_bytes(struct buf *out, uint64_t n)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = -1;

	if (n < 1024) {
		buf_addf(out, "%llu B", (unsigned long long)n);
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	buf_addf(out, "%.1f %s", v, units[u]);
}
