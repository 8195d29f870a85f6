#include "config/project.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "base/paths.h"
#include "base/strvec.h"
#include "base/banned.h"

#define NAME_BASE_MAX 48
#define MAX_SUFFIX    9999

int project_checkout(const char *dir, struct buf *out)
{
	git_repository *repo = NULL;
	const char *wd;
	char *real;
	int ret;

	git_libgit2_init();
	ret = git_repository_open_ext(&repo, dir, 0, NULL);
	if (ret == GIT_ENOTFOUND) {
		ret = -ENOENT;
		goto out;
	}
	if (ret == GIT_EOWNER) {
		ret = -EPERM;
		goto out;
	}
	if (ret < 0) {
		ret = -EIO;
		goto out;
	}
	wd = git_repository_workdir(repo);
	if (git_repository_is_bare(repo) || !wd) {
		ret = -ENOTDIR;
		goto out;
	}
	real = realpath(wd, NULL);
	if (!real) {
		ret = -errno;
		goto out;
	}
	buf_addstr(out, real);
	free(real);
	ret = 0;
out:
	git_repository_free(repo);
	git_libgit2_shutdown();
	return ret;
}

static int name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int project_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > PROJECT_NAME_MAX ||
	    !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!name_char(name[i]))
			return 0;
	return 1;
}

void project_name_base(const char *checkout, struct buf *name)
{
	const char *base = strrchr(checkout, '/');
	size_t start = name->len;

	base = base ? base + 1 : checkout;
	for (const char *p = base; *p && name->len - start < NAME_BASE_MAX; p++) {
		char c = *p >= 'A' && *p <= 'Z' ? (char)(*p + 'a' - 'A') : *p;

		if (!name_char(c))
			c = '-';
		/* Start with a letter or digit; no runs of '-'. */
		if (name->len == start && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			continue;
		if (c == '-' && name->buf[name->len - 1] == '-')
			continue;
		buf_addch(name, c);
	}
	while (name->len > start && strchr("-._", name->buf[name->len - 1]))
		buf_setlen(name, name->len - 1);
	if (name->len == start)
		buf_addstr(name, "project");
}

void projects_dir(struct buf *out)
{
	buf_addf(out, "%s/projects", aibox_home());
}

int project_read_checkout(const char *project_dir, struct buf *out)
{
	struct buf path = BUF_INIT, data = BUF_INIT;
	ssize_t n;

	buf_addf(&path, "%s/checkout", project_dir);
	n = buf_read_file(&data, path.buf, PATH_MAX + 1);
	buf_release(&path);
	if (n < 0) {
		buf_release(&data);
		return n == -EFBIG ? -EINVAL : (int)n;
	}
	if (!data.len || data.buf[data.len - 1] != '\n' || data.buf[0] != '/' ||
	    memchr(data.buf, '\0', data.len)) {
		buf_release(&data);
		return -EINVAL;
	}
	buf_add(out, data.buf, data.len - 1);
	buf_release(&data);
	return 0;
}

static void project_fill(struct project *p, const char *name, const char *checkout)
{
	struct buf dir = BUF_INIT;

	projects_dir(&dir);
	buf_addf(&dir, "/%s", name);
	p->name = xstrdup(name);
	p->dir = buf_detach(&dir, NULL);
	p->checkout = checkout ? xstrdup(checkout) : NULL;
}

void project_release(struct project *p)
{
	free(p->name);
	free(p->dir);
	free(p->checkout);
	p->name = p->dir = p->checkout = NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int projects_list(struct strvec *names)
{
	struct buf dir = BUF_INIT;
	struct dirent *de;
	DIR *d;
	int fd;

	projects_dir(&dir);
	fd = open(dir.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	buf_release(&dir);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!project_name_valid(de->d_name))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		strvec_push(names, de->d_name);
	}
	closedir(d);
	qsort(names->v, names->nr, sizeof(*names->v), cmp_str);
	return 0;
}

int project_find(const char *checkout, struct project *p)
{
	struct strvec names = STRVEC_INIT;
	struct buf dir = BUF_INIT, co = BUF_INIT;
	int ret = projects_list(&names);

	if (ret < 0)
		goto out;
	ret = -ENOENT;
	for (size_t i = 0; i < names.nr; i++) {
		buf_reset(&dir);
		projects_dir(&dir);
		buf_addf(&dir, "/%s", names.v[i]);
		buf_reset(&co);
		if (project_read_checkout(dir.buf, &co) == 0 && !strcmp(co.buf, checkout)) {
			project_fill(p, names.v[i], checkout);
			ret = 0;
			break;
		}
	}
out:
	strvec_clear(&names);
	buf_release(&dir);
	buf_release(&co);
	return ret;
}

int project_by_name(const char *name, struct project *p)
{
	struct buf dir = BUF_INIT, co = BUF_INIT;
	struct stat st;
	int ret = 0;

	if (!project_name_valid(name))
		return -EINVAL;
	projects_dir(&dir);
	buf_addf(&dir, "/%s", name);
	if (lstat(dir.buf, &st) < 0)
		ret = -errno;
	else if (!S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	if (!ret) {
		project_fill(p, name, project_read_checkout(dir.buf, &co) == 0 ? co.buf : NULL);
	}
	buf_release(&dir);
	buf_release(&co);
	return ret;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char *tmp = xstrdup(path);
	int ret = 0;

	for (char *p = tmp + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;

			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST) {
				ret = -errno;
				break;
			}
			*p = c;
			if (!c)
				break;
		}
	}
	free(tmp);
	return ret;
}

/* Write data to dir/name through a temporary file and rename. */
static int write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
	struct buf tmp = BUF_INIT, path = BUF_INIT;
	int fd, ret = 0;

	buf_addf(&tmp, "%s/.%s.tmp", dir, name);
	buf_addf(&path, "%s/%s", dir, name);
	fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = write_all(fd, data, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp.buf, path.buf) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp.buf);
out:
	buf_release(&tmp);
	buf_release(&path);
	return ret;
}

static int create_project(const char *dir, const char *checkout)
{
	struct buf path = BUF_INIT, co = BUF_INIT;
	int ret = 0, fd;

	if (mkdir(dir, 0700) < 0)
		return -errno;
	buf_addf(&path, "%s/config.yaml", dir);
	fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = write_all(fd, config_default_text, strlen(config_default_text));
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret)
		goto out;
	buf_reset(&path);
	buf_addf(&path, "%s/tasks", dir);
	if (mkdir(path.buf, 0700) < 0) {
		ret = -errno;
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/home", dir);
	if (mkdir(path.buf, 0700) < 0) {
		ret = -errno;
		goto out;
	}
	/* Last: a folder without it is not found as this checkout's project. */
	buf_addf(&co, "%s\n", checkout);
	ret = write_atomic(dir, "checkout", co.buf, co.len);
out:
	buf_release(&path);
	buf_release(&co);
	return ret;
}

int project_open(const char *checkout, struct project *p, int *created)
{
	struct buf dir = BUF_INIT, lock = BUF_INIT, name = BUF_INIT, cand = BUF_INIT;
	struct stat st;
	int fd = -1, ret;

	if (created)
		*created = 0;
	if (checkout[0] != '/' || strchr(checkout, '\n'))
		return -EINVAL;
	projects_dir(&dir);
	ret = mkdir_p(dir.buf, 0700);
	if (ret < 0)
		goto out;
	buf_addf(&lock, "%s/.lock", dir.buf);
	fd = open(lock.buf, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			goto out;
		}
	}
	ret = project_find(checkout, p);
	if (ret != -ENOENT)
		goto out;
	project_name_base(checkout, &name);
	for (int i = 1; i <= MAX_SUFFIX; i++) {
		buf_reset(&cand);
		buf_addstr(&cand, name.buf);
		if (i > 1)
			buf_addf(&cand, "-%d", i);
		buf_reset(&lock);
		buf_addf(&lock, "%s/%s", dir.buf, cand.buf);
		if (lstat(lock.buf, &st) == 0 || errno != ENOENT)
			continue;
		ret = create_project(lock.buf, checkout);
		if (ret == 0) {
			project_fill(p, cand.buf, checkout);
			if (created)
				*created = 1;
		}
		goto out;
	}
	ret = -EEXIST;
out:
	if (fd >= 0)
		close(fd);
	buf_release(&dir);
	buf_release(&lock);
	buf_release(&name);
	buf_release(&cand);
	return ret;
}

static int flock_retry(int fd, int op)
{
	while (flock(fd, op) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int project_lock(const char *project_dir, int flags)
{
	struct buf path = BUF_INIT;
	int op = (flags & PROJECT_LOCK_EXCLUSIVE) ? LOCK_EX : LOCK_SH;
	int fd = -1, ret;

	if (flags & PROJECT_LOCK_NONBLOCK)
		op |= LOCK_NB;
	buf_addf(&path, "%s/lock", project_dir);
	for (;;) {
		struct stat a, b;

		fd = open(path.buf, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		ret = flock_retry(fd, op);
		if (ret < 0)
			break;
		/* Removed (or replaced) while we waited: not the project's lock any more. */
		if (fstat(fd, &a) < 0) {
			ret = -errno;
			break;
		}
		if (stat(path.buf, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			ret = fd;
			fd = -1;
			break;
		}
		close(fd);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	return ret == -EAGAIN ? -EWOULDBLOCK : ret;
}

int task_create(const char *tasks_dir, time_t now, char name[TASK_NAME_LEN + 1], int *lock_fd)
{
	char id[TASK_ID_LEN + 1];
	struct buf lock = BUF_INIT, dir = BUF_INIT;
	int fd = -1, ret = -EEXIST;

	for (int tries = 0; tries < 16 && fd < 0; tries++) {
		if ((ret = task_id_new(id)) < 0 || (ret = task_name_make(name, now, id)) < 0)
			goto out;
		buf_reset(&lock);
		buf_addf(&lock, "%s/%s.lock", tasks_dir, name);
		fd = open(lock.buf, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno != EEXIST) {
			ret = -errno;
			goto out;
		}
		ret = -EEXIST;
	}
	if (fd < 0)
		goto out;
	/* Blocking: `aibox tasks clean` may hold it for a moment while it looks. */
	if ((ret = flock_retry(fd, LOCK_EX)) < 0)
		goto fail;
	buf_addf(&dir, "%s/%s", tasks_dir, name);
	if (mkdir(dir.buf, 0700) < 0) {
		ret = -errno;
		goto fail;
	}
	*lock_fd = fd;
	ret = 0;
	goto out;
fail:
	unlink(lock.buf);
	close(fd);
out:
	buf_release(&lock);
	buf_release(&dir);
	return ret;
}

/* 1 when name is a lock an older aibox kept inside the task folder. */
static int inner_lock_name(const char *name)
{
	size_t n = strlen(name);

	return !strcmp(name, "lock") || (n > 5 && !strcmp(name + n - 5, ".lock"));
}

static int lock_held(int dirfd, const char *name, int *keep)
{
	struct stat st;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;

		close(fd);
		return err == EWOULDBLOCK ? 1 : -err;
	}
	if (keep)
		*keep = fd;
	else
		close(fd);
	return 0;
}

int task_check(int tasks_fd, const char *name, int *lock_fd)
{
	char lock[TASK_NAME_BUF];
	struct dirent *de;
	int fd = -1, dfd, ret;
	DIR *d;

	*lock_fd = -1;
	if (strlen(name) != TASK_NAME_LEN)
		return -EINVAL;
	snprintf(lock, sizeof(lock), "%s.lock", name);
	ret = lock_held(tasks_fd, lock, &fd);
	if (ret == -ENOENT)
		ret = 0;
	if (ret)
		return ret;

	dfd = openat(tasks_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		ret = -errno;
		goto out;
	}
	d = fdopendir(dfd);
	if (!d) {
		ret = -errno;
		close(dfd);
		goto out;
	}
	errno = 0;
	while (!ret && (de = readdir(d))) {
		if (inner_lock_name(de->d_name)) {
			struct stat st;

			/* Only regular files can be locks; anything else is not one. */
			if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISREG(st.st_mode))
				continue;
			ret = lock_held(dfd, de->d_name, NULL);
		}
		errno = 0;
	}
	if (!ret && errno)
		ret = -errno;
	closedir(d);
out:
	if (ret && fd >= 0)
		close(fd);
	else
		*lock_fd = fd;
	return ret;
}

int project_checkout_here(struct buf *out, struct buf *err)
{
	int ret = project_checkout(".", out);

	if (ret == -ENOENT)
		buf_addstr(err,
		           "not in a git checkout: a project is the checkout of a git repository");
	else if (ret == -ENOTDIR)
		buf_addstr(err, "a bare repository has no checkout, so no project");
	else if (ret < 0)
		buf_addf(err, "cannot find the git checkout of the current folder: %s",
		         strerror(-ret));
	return ret;
}
