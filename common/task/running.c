#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "task/running.h"
#include "base/banned.h"

/* dir and its parent, 0700, when missing. */
static int make_dir(const char *dir, struct buf *err)
{
	struct buf parent = BUF_INIT;
	const char *slash = strrchr(dir, '/');
	int ret = 0;

	if (slash && slash != dir) {
		buf_add(&parent, dir, (size_t)(slash - dir));
		if (mkdir(parent.buf, 0700) < 0 && errno != EEXIST)
			ret = -errno;
	}
	if (ret == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
		ret = -errno;
	if (ret < 0)
		buf_addf(err, "cannot make '%s': %s", dir, strerror(-ret));
	buf_release(&parent);
	return ret;
}

int running_register(const char *dir, struct buf *err)
{
	struct buf tmp = BUF_INIT, name = BUF_INIT;
	struct timespec now;
	int fd = -1, ret;

	if ((ret = make_dir(dir, err)) < 0)
		return ret;
	/* The pid and the time: a name no stale registration has, so a rename replaces none. */
	clock_gettime(CLOCK_REALTIME, &now);
	buf_addf(&tmp, "%s/.new-%ld", dir, (long)getpid());
	buf_addf(&name, "%s/%ld-%lld%09ld", dir, (long)getpid(), (long long)now.tv_sec,
	         now.tv_nsec);
	fd = open(tmp.buf, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || rename(tmp.buf, name.buf) < 0) {
		ret = -errno;
		buf_addf(err, "cannot register this task in '%s': %s", dir, strerror(-ret));
		if (fd >= 0) {
			unlink(tmp.buf);
			close(fd);
		}
		fd = ret;
	}
	buf_release(&tmp);
	buf_release(&name);
	return fd;
}

/* PID-TIME, both decimal, as running_register() names a registration. */
static int registration_name(const char *s)
{
	size_t pid = strspn(s, "0123456789");

	return pid > 0 && pid <= 10 && s[pid] == '-' && s[pid + 1] &&
	       strspn(s + pid + 1, "0123456789") == strlen(s + pid + 1) && strlen(s) < 64;
}

int running_others(const char *dir, int self_fd)
{
	struct stat self, st;
	struct dirent *de;
	DIR *d;
	int n = 0, seen = 0, dfd;

	if (self_fd < 0 || fstat(self_fd, &self) < 0)
		self.st_ino = 0, self.st_dev = 0;
	if (!(d = opendir(dir)))
		return -errno;
	dfd = dirfd(d);
	while ((de = readdir(d)) && seen < RUNNING_MAX) {
		int fd;

		if (!registration_name(de->d_name))
			continue; /* ".", "..", a registration not yet renamed, anything else */
		seen++;
		fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (st.st_ino == self.st_ino && st.st_dev == self.st_dev)) {
			close(fd);
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			if (errno == EWOULDBLOCK)
				n++; /* held: its task runs */
		} else {
			/* Free: its task is gone.  Removed while locked, so no live one goes. */
			unlinkat(dfd, de->d_name, 0);
		}
		close(fd);
	}
	closedir(d);
	return n;
}
