#include "resume.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/session_file.h"
#include "task_int.h"
#include "base/banned.h"

/* HOME/.claude/projects/<folder of path> into dir; -ENAMETOOLONG past Claude Code's rule. */
static int sessions_dir(const struct guest_task_opts *o, const char *path, struct buf *dir)
{
	buf_addf(dir, "%s/.claude/projects/", o->home);
	return session_project_dir(dir, path);
}

/* Make dir (0700, the user's) unless it is there; it must be a folder, not a link. */
static int make_dir(const struct guest_task_opts *o, const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) == 0) {
		if (o->drop && lchown(dir, o->uid, o->gid) < 0)
			return -errno;
	} else if (errno != EEXIST) {
		return -errno;
	}
	if (lstat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int resume_place(const struct guest_task_opts *o, const char *path, const char *id, struct buf *err)
{
	struct buf src = BUF_INIT, data = BUF_INIT, dir = BUF_INIT, file = BUF_INIT;
	size_t home_len = strlen(o->home);
	ssize_t n;
	int fd = -1, ret;

	buf_addf(&src, "%s/%s", o->share, SESSION_RESUME_NAME);
	n = buf_read_file(&data, src.buf, SESSION_FILE_MAX);
	if (n < 0) {
		ret = (int)n;
		buf_addf(err, "cannot read '%s': %s", src.buf, strerror(-ret));
		goto out;
	}
	if ((ret = sessions_dir(o, path, &dir)) < 0) {
		buf_addf(err, "cannot resume a conversation in '%s': %s", path, strerror(-ret));
		goto out;
	}
	/* Each folder from the home down: .claude, projects, the project's. */
	for (char *p = dir.buf + home_len + 1;; p++) {
		char save = *p;

		if (save != '/' && save)
			continue;
		*p = '\0';
		ret = make_dir(o, dir.buf);
		if (ret < 0) {
			buf_addf(err, "cannot make '%s': %s", dir.buf, strerror(-ret));
			goto out;
		}
		*p = save;
		if (!save)
			break;
	}
	buf_addf(&file, "%s/%s.jsonl", dir.buf, id);
	fd = open(file.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || (o->drop && fchown(fd, o->uid, o->gid) < 0) ||
	    (ret = write_all(fd, data.buf, data.len)) < 0) {
		ret = fd < 0 || ret >= 0 ? -errno : ret;
		buf_addf(err, "cannot write '%s': %s", file.buf, strerror(-ret));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	buf_release(&src);
	buf_release(&data);
	buf_release(&dir);
	buf_release(&file);
	return ret;
}

int resume_session_open(const struct guest_task_opts *o, const char *path, const char *id)
{
	struct buf file = BUF_INIT;
	struct stat st;
	int fd, ret;

	if (!session_id_valid(id))
		return -EINVAL;
	if ((ret = sessions_dir(o, path, &file)) < 0)
		goto out;
	buf_addf(&file, "/%s.jsonl", id);
	fd = open(file.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		ret = -EINVAL;
		goto out;
	}
	ret = fd;
out:
	buf_release(&file);
	return ret;
}

void resume_send(struct guest_task *t)
{
	const char *id = json_string_value(json_object_get(t->result_line, "session_id"));
	int fd = id ? resume_session_open(t->o, t->path, id) : -ENOENT;
	struct stat st;

	if (fd < 0) {
		vmlog(t, "no session file to send: %s", strerror(-fd));
		return;
	}
	/* Over the cap it stays here (a refused member would end the results). */
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size <= SESSION_FILE_MAX)
		results_send_file(t, SESSION_FILE_NAME, fd, SESSION_FILE_MAX);
	else
		progress(t,
		         "the conversation is over %llu MiB: it is left out, the task cannot "
		         "be continued",
		         SESSION_FILE_MAX >> 20);
	close(fd);
}
