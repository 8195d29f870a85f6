/* A task folder's files (task_folder.h). */
#include <errno.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "git/bundle_read.h"
#include "git/bundle_write.h"
#include "config/project.h"
#include "base/spawn.h"
#include "task/task_folder.h"
#include "base/guest_abi.h"
#include "task/task_session.h"
#include "base/banned.h"

int task_folder_create(const char *project_dir, char *name, int *lock_fd, struct buf *dir,
                       struct buf *err)
{
	struct buf tasks = BUF_INIT;
	int ret = 0;

	buf_addf(&tasks, "%s/tasks", project_dir);
	if (mkdir(tasks.buf, 0700) < 0 && errno != EEXIST) {
		ret = -errno;
		buf_addf(err, "cannot make '%s': %s", tasks.buf, strerror(errno));
	} else if ((ret = task_create(tasks.buf, time(NULL), name, lock_fd)) < 0) {
		buf_addf(err, "cannot make a task folder in '%s': %s", tasks.buf, strerror(-ret));
	} else {
		buf_addf(dir, "%s/%s", tasks.buf, name);
	}
	buf_release(&tasks);
	return ret;
}

int task_folder_open_results(const char *dir, int *fds, int create, struct buf *err)
{
	for (size_t i = 0; i < RESULT_NFILES; i++) {
		/* O_RDWR: result.json and the bundle are read back after the lockdown. */
		fds[i] = task_folder_open(dir, guest_results[i].name,
		                          O_RDWR | (create ? O_CREAT | O_EXCL : 0));
		if (fds[i] < 0) {
			int ret = fds[i];

			buf_addf(err, "cannot create '%s/%s': %s", dir, guest_results[i].name,
			         strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int task_folder_open(const char *dir, const char *name, int flags)
{
	struct buf path = BUF_INIT;
	int fd;

	buf_addf(&path, "%s/%s", dir, name);
	fd = open(path.buf, flags | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		fd = -errno;
	buf_release(&path);
	return fd;
}

int task_folder_write(const char *dir, const char *name, const struct buf *b, int mode)
{
	struct buf path = BUF_INIT;
	int ret;

	buf_addf(&path, "%s/%s", dir, name);
	ret = buf_write_file(b, path.buf, mode);
	buf_release(&path);
	return ret;
}

ssize_t task_folder_read_fd(int fd, struct buf *out, size_t max)
{
	char c[8192];
	off_t off = 0;
	size_t start = out->len;

	for (;;) {
		ssize_t n = pread(fd, c, sizeof(c), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return (ssize_t)(out->len - start);
		buf_add(out, c, (size_t)n);
		off += n;
		if (out->len - start > max)
			return -EFBIG;
	}
}

/* Less free than this where start.bundle failed: its disk is said to be full. */
#define START_DISK_FULL_BYTES (1ULL << 20)

int task_folder_start_bundle(const char *dir, const char *checkout, const char *commit,
                             struct buf *err)
{
	struct bundle_write_opts bo = {0};
	struct buf path = BUF_INIT, idx = BUF_INIT, why = BUF_INIT;
	char oid[OID_HEX_MAX + 1];
	int ret;

	buf_addf(&path, "%s/" GUEST_FILE_START_BUNDLE, dir);
	buf_addf(&idx, "%s/" GUEST_FILE_START_IDX, dir);
	bo.repo_dir = checkout;
	bo.rev = commit;
	bo.out_path = path.buf;
	bo.idx_path = idx.buf; /* the guest's clone places it beside the pack */
	if ((ret = bundle_write_start(&bo, oid, &why)) < 0) {
		struct statvfs st;

		/*
		 * git's own words for it vary, and its temporary pack is gone
		 * by now: either of them, or a disk all but full, says it.
		 */
		if (!statvfs(dir, &st) &&
		    ((unsigned long long)st.f_bavail * st.f_frsize < START_DISK_FULL_BYTES ||
		     strstr(why.buf, "Out of diskspace") || strstr(why.buf, strerror(ENOSPC))))
			buf_addf(err,
			         "cannot write '%s': the disk of '%s' is full (%llu KiB free): %s",
			         path.buf, dir,
			         ((unsigned long long)st.f_bavail * st.f_frsize) >> 10, why.buf);
		else
			buf_addf(err, "cannot write '%s': %s", path.buf, why.buf);
		goto out;
	} else if (strcmp(oid, commit)) {
		buf_addf(err, "start.bundle holds %s, not %s", oid, commit);
		ret = -EINVAL;
		goto out;
	}
	/*
	 * The guest clones it as its unprivileged user (the share shows the
	 * host's modes): the folder may be passed through, the bundle read;
	 * the rest stays the owner's (ssh/ is 0700).
	 */
	if (chmod(path.buf, 0644) < 0 || chmod(dir, 0711) < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s' to the VM: %s", path.buf, strerror(errno));
	}
out:
	buf_release(&path);
	buf_release(&idx);
	buf_release(&why);
	return ret;
}

int task_folder_remove_at_exit(const char *dir, const char *const *names, size_t n)
{
	int p[2], keep[2];
	pid_t pid;
	char c;

	keep[1] = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (keep[1] < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0) {
		int err = -errno;

		close(keep[1]);
		return err;
	}
	keep[0] = p[0];
	pid = spawn_worker(keep, 2, SPAWN_WORKER_DETACH);
	if (pid == 0) {
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		for (size_t i = 0; i < n; i++)
			unlinkat(keep[1], names[i], 0);
		_exit(0);
	}
	close(p[0]);
	close(keep[1]);
	if (pid < 0) {
		close(p[1]);
		return (int)pid;
	}
	/* Left open on purpose: our exit closes it, and that is the worker's signal. */
	return 0;
}
