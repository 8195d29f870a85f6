#include "task/slurm_detach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "git/gitproto.h"
#include "base/paths.h"
#include "task/slurm.h"
#include "base/spawn.h"
#include "base/taskid.h"
#include "base/banned.h"

/* squeue's answer at most: a line per job of ours with this name (one). */
#define SQUEUE_OUT_MAX (64 * 1024)

static size_t digits(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

int slurm_job_id_parse(const char *out, size_t n, char id[SLURM_JOB_ID_MAX + 1])
{
	size_t d = digits(out, n);

	if (!d || d > SLURM_JOB_ID_MAX || d == n || (out[d] != '\n' && out[d] != ';'))
		return -EINVAL;
	if (memchr(out + d, '\n', n - d) != out + n - 1)
		return -EINVAL; /* one line, ending the output */
	memcpy(id, out, d);
	id[d] = '\0';
	return 0;
}

int slurm_job_write(const char *dir, const struct slurm_job_rec *r, struct buf *err)
{
	struct buf path = BUF_INIT, line = BUF_INIT;
	int fd, ret = 0;

	buf_addf(&path, "%s/%s", dir, SLURM_JOB_FILE);
	buf_addf(&line, "%s %s\n", r->id, r->start_commit);
	fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || (ret = write_all(fd, line.buf, line.len)) < 0 || close(fd) < 0) {
		ret = ret ? ret : -errno;
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
	}
	buf_release(&path);
	buf_release(&line);
	return ret;
}

int slurm_job_read(int dfd, struct slurm_job_rec *r)
{
	struct buf b = BUF_INIT;
	struct stat st;
	ssize_t n = -EINVAL;
	size_t d, h;
	int ret = -EINVAL;
	int fd =
	    openat(dfd, SLURM_JOB_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		ret = errno == ENOENT ? -ENOENT : -EINVAL;
		goto out;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= SLURM_JOB_FILE_MAX)
		n = buf_read_fd(&b, fd, SLURM_JOB_FILE_MAX);
	close(fd);
	if (n < 0)
		goto out;
	d = digits(b.buf, b.len);
	if (!d || d > SLURM_JOB_ID_MAX || d + 1 >= b.len || b.buf[d] != ' ')
		goto out;
	h = b.len - d - 2; /* the commit id between the space and the newline */
	if (!oid_hex_valid(b.buf + d + 1, h) || b.buf[b.len - 1] != '\n')
		goto out;
	memcpy(r->id, b.buf, d);
	r->id[d] = '\0';
	memcpy(r->start_commit, b.buf + d + 1, h);
	r->start_commit[h] = '\0';
	ret = 0;
out:
	buf_release(&b);
	return ret;
}

/* The job's state as squeue lists it: QUEUED, RUNNING, ENDED, or -1 with err set. */
static int ask_squeue(const char *name, const char *id, struct buf *err)
{
	struct spawn sp = SPAWN_INIT;
	struct buf out = BUF_INIT;
	const char *p, *end;
	int ret, state = SLURM_DETACHED_ENDED;

	strvec_pushl(&sp.args, "squeue", "--noheader", "--format=%i %T", NULL);
	strvec_pushf(&sp.args, "--name=aibox-%s", name);
	strvec_pushf(&sp.args, "--user=%u", (unsigned)getuid());
	sp.err = SPAWN_NULL;
	ret = spawn_capture(&sp, &out, SQUEUE_OUT_MAX);
	spawn_clear(&sp);
	if (ret != 0) {
		if (ret < 0)
			buf_addf(err, "cannot run squeue: %s", strerror(-ret));
		else
			buf_addf(err, "squeue exit %d", ret);
		state = -1;
		goto out;
	}
	for (p = out.buf; p < out.buf + out.len; p = end + 1) {
		size_t idlen = strlen(id);

		end = memchr(p, '\n', (size_t)(out.buf + out.len - p));
		if (!end)
			end = out.buf + out.len;
		if ((size_t)(end - p) > idlen && !strncmp(p, id, idlen) && p[idlen] == ' ') {
			p += idlen + 1;
			state = (size_t)(end - p) == 7 && !strncmp(p, "PENDING", 7)
			            ? SLURM_DETACHED_QUEUED
			            : SLURM_DETACHED_RUNNING;
			break;
		}
	}
out:
	buf_release(&out);
	return state;
}

int slurm_detached_unchecked(int dfd)
{
	struct stat st;

	if (fstatat(dfd, "summary.json", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return 0;
	return fstatat(dfd, SLURM_JOB_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int slurm_detached_state(int dfd, const char *name, struct buf *err)
{
	struct slurm_job_rec r;
	struct stat st;
	int ret;

	if (!slurm_detached_unchecked(dfd))
		return SLURM_DETACHED_NO;
	if ((ret = slurm_job_read(dfd, &r)) < 0) {
		buf_addf(err, "%s is not an id and a commit", SLURM_JOB_FILE);
		return ret;
	}
	if (fstatat(dfd, SLURM_SECRETS_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return SLURM_DETACHED_ENDED;
	ret = ask_squeue(name, r.id, err);
	return ret < 0 ? SLURM_DETACHED_QUEUED : ret;
}

int slurm_task_lock(const char *dir, int nonblock)
{
	struct buf path = BUF_INIT;
	int fd, ret;

	buf_addf(&path, "%s.lock", dir);
	fd = open(path.buf, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	buf_release(&path);
	if (fd < 0)
		return -errno;
	while ((ret = flock(fd, LOCK_EX | (nonblock ? LOCK_NB : 0))) < 0 && errno == EINTR)
		;
	if (ret < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

int slurm_detached_check(const char *dir)
{
	struct spawn sp = SPAWN_INIT;
	int ret;

	strvec_pushf(&sp.args, "%s/aibox-task", libexec_dir());
	strvec_pushl(&sp.args, "--slurm-check", dir, NULL);
	sp.out = SPAWN_NULL;
	ret = spawn_run(&sp);
	spawn_clear(&sp);
	return ret;
}
