/*
 * Task mode's step clone: start.bundle into the project folder, on aibox/task
 * at the start commit (docs/init-task.md, "The prepared clone").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "gitconfig.h"
#include "prepared.h"
#include "base/rmtree.h"
#include "task_int.h"
#include "base/banned.h"

static int ensure_project_dir(struct guest_task *t)
{
	struct stat st;

	if (lstat(t->path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return -errno;
	if (mkdir(t->path, 0755) < 0)
		return -errno;
	if (t->o->drop && chown(t->path, t->o->uid, t->o->gid) < 0)
		return -errno;
	return 0;
}

/*
 * 1 when the fresh clone is on BRANCH at the start commit, as a clone of the
 * host's start.bundle (HEAD a symref to BRANCH) is.  Read straight from the
 * files git just wrote: nothing else has run in the repository yet.
 */
static int clone_on_start(struct guest_task *t)
{
	struct buf file = BUF_INIT, b = BUF_INIT, want = BUF_INIT;
	int ok = 0;

	buf_addf(&file, "%s/.git/HEAD", t->path);
	if (buf_read_file(&b, file.buf, 256) < 0 || strcmp(b.buf, "ref: " BRANCH_REF "\n"))
		goto out;
	buf_reset(&file);
	buf_reset(&b);
	buf_addf(&file, "%s/.git/" BRANCH_REF, t->path);
	buf_addf(&want, "%s\n", t->start);
	ok = buf_read_file(&b, file.buf, 256) >= 0 && !strcmp(b.buf, want.buf);
out:
	buf_release(&file);
	buf_release(&b);
	buf_release(&want);
	return ok;
}

int empty_project(struct guest_task *t)
{
	struct buf where = BUF_INIT;
	struct dirent *e;
	DIR *d;
	int fd, ret = 0;

	fd = open(t->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = rmtree_at(dirfd(d), e->d_name, NULL, &where);
		if (r < 0 && !ret) {
			ret = r;
			vmlog(t, "cannot remove '%s': %s", where.buf, strerror(-r));
		}
	}
	closedir(d);
	buf_release(&where);
	return ret;
}

/* Create path (no such file yet) with mode, owned by the user; the fd or -errno. */
static int create_user_file(struct guest_task *t, const char *path, int mode, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, mode);

	if (fd < 0)
		return -errno;
	if ((t->o->drop && fchown(fd, t->o->uid, t->o->gid) < 0) || fchmod(fd, mode) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* Make the folder path (none yet), owned by the user. */
static int mkdir_user(struct guest_task *t, const char *path)
{
	if (mkdir(path, 0755) < 0 || (t->o->drop && lchown(path, t->o->uid, t->o->gid) < 0))
		return -errno;
	return 0;
}

/*
 * No `git maintenance run --auto` after each commit (git starts it from
 * every commit, a process of a few hundred ms under emulation, for a
 * repository that lives one task): the same in both clones' config.
 */
#define MAINTENANCE_CONFIG "[maintenance]\n\tauto = false\n"
#define MAINTENANCE_OPTION "maintenance.auto=false"

/*
 * What `git init -q --initial-branch=BRANCH` makes of the empty project
 * folder, without a git process: .git with objects/{info,pack}, refs/{heads,
 * tags}, HEAD on BRANCH and git's config for a new repository (the user's
 * name and email are appended later).  No template: no sample hooks, no
 * info/exclude, no description, which git never needs.
 */
static int init_repo(struct guest_task *t)
{
	static const char *const dirs[] = {
	    ".git",      ".git/objects",    ".git/objects/info", ".git/objects/pack",
	    ".git/refs", ".git/refs/heads", ".git/refs/tags"};
	static const struct {
		const char *name, *text;
	} files[] = {
	    {".git/HEAD", "ref: " BRANCH_REF "\n"},
	    {".git/config", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"
	                    "\tbare = false\n\tlogallrefupdates = true\n" MAINTENANCE_CONFIG},
	};
	struct buf path = BUF_INIT;
	int fd, ret = 0;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && !ret; i++) {
		buf_reset(&path);
		buf_addf(&path, "%s/%s", t->path, dirs[i]);
		ret = mkdir_user(t, path.buf);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && !ret; i++) {
		buf_reset(&path);
		buf_addf(&path, "%s/%s", t->path, files[i].name);
		if ((fd = create_user_file(t, path.buf, 0644, O_EXCL)) < 0) {
			ret = fd;
		} else if (write_all(fd, files[i].text, strlen(files[i].text)) < 0) {
			ret = -errno;
			close(fd);
		} else if (close(fd) < 0) {
			ret = -errno;
		}
	}
	buf_release(&path);
	return ret;
}

/* Copy the pack out of the bundle into .git/objects/pack, in large reads (9p). */
static int place_pack(struct guest_task *t, int bundle_fd, const struct prepared *p,
                      const struct buf *idx)
{
	const size_t chunk = 1 << 20;
	struct buf path = BUF_INIT;
	char *data = NULL;
	uint64_t off = p->pack_off, left = p->pack_len;
	int fd = -1, ret = 0;

	buf_addf(&path, "%s/.git/objects/pack/pack-%s.idx", t->path, p->pack_hex);
	if ((fd = create_user_file(t, path.buf, 0444, O_EXCL)) < 0 ||
	    write_all(fd, idx->buf, idx->len) < 0 || close(fd) < 0) {
		ret = fd < 0 ? fd : -errno;
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/.git/objects/pack/pack-%s.pack", t->path, p->pack_hex);
	if ((fd = create_user_file(t, path.buf, 0444, O_EXCL)) < 0) {
		ret = fd;
		goto out;
	}
	data = xmalloc(chunk);
	while (left) {
		ssize_t n = pread(bundle_fd, data, left < chunk ? (size_t)left : chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto out;
		}
		if (write_all(fd, data, (size_t)n) < 0) {
			ret = -errno;
			goto out;
		}
		off += (uint64_t)n;
		left -= (uint64_t)n;
	}
out:
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	free(data);
	buf_release(&path);
	return ret;
}

/* The ref file .git/REF at the start commit, in a new folder of the user's (REF less its last
 * part). */
static int write_start_ref(struct guest_task *t, const char *ref)
{
	struct buf path = BUF_INIT, b = BUF_INIT;
	char *slash;
	int fd, ret = 0;

	buf_addf(&path, "%s/.git/%s", t->path, ref);
	slash = strrchr(path.buf, '/');
	*slash = '\0';
	ret = mkdir_user(t, path.buf);
	*slash = '/';
	if (ret < 0)
		goto out;
	buf_addf(&b, "%s\n", t->start);
	if ((fd = create_user_file(t, path.buf, 0644, O_EXCL)) < 0 ||
	    write_all(fd, b.buf, b.len) < 0 || close(fd) < 0)
		ret = fd < 0 ? fd : -errno;
out:
	buf_release(&path);
	buf_release(&b);
	return ret;
}

/*
 * The branch and START_REF at the start commit, and the user's name and
 * email in the config.
 */
static int write_branch_and_user(struct guest_task *t)
{
	struct buf path = BUF_INIT, b = BUF_INIT;
	int fd, ret = 0;

	if ((ret = write_start_ref(t, BRANCH_REF)) < 0 || (ret = write_start_ref(t, START_REF)) < 0)
		goto out;
	buf_reset(&path);
	buf_addf(&path, "%s/.git/config", t->path);
	buf_reset(&b);
	buf_addstr(&b, "[user]\n\tname = ");
	gitconfig_value(&b, t->git_name);
	buf_addstr(&b, "\n\temail = ");
	gitconfig_value(&b, t->git_email);
	buf_addch(&b, '\n');
	fd = open(path.buf, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || write_all(fd, b.buf, b.len) < 0 || close(fd) < 0)
		ret = -errno;
out:
	buf_release(&path);
	buf_release(&b);
	return ret;
}

/*
 * The prepared clone (docs/init-task.md): with the host's start.idx the
 * bundle's pack is placed as it is, beside that index, instead of being
 * indexed here (inflating and hashing every object under emulation).  One
 * git process, the checkout (`read-tree --reset -u`): the repository around
 * the pack is written here (init_repo()).
 * 1 when the project is ready; 0 when there is no start.idx, it does not
 * match the bundle, or a step failed: the reason is in vm.log and the
 * project folder is empty again, for the plain clone.
 */
static int clone_prepared(struct guest_task *t, struct step_group *g, int64_t deadline)
{
	struct buf path = BUF_INIT, idx = BUF_INIT, why = BUF_INIT;
	struct prepared p;
	struct stat st;
	int idx_fd = -1, bundle_fd = -1, ok = 0, ret;

	buf_addf(&path, "%s/" GUEST_FILE_START_IDX, t->o->share);
	idx_fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (idx_fd < 0) {
		vmlog(t, "no start.idx (%s): cloning the bundle", strerror(errno));
		goto out;
	}
	/* One allocation and large reads: small ones are slow on the 9p share. */
	if (fstat(idx_fd, &st) == 0 && st.st_size > 0 && st.st_size <= PREPARED_IDX_MAX)
		buf_grow(&idx, (size_t)st.st_size + 1);
	if ((ret = (int)buf_read_fd(&idx, idx_fd, PREPARED_IDX_MAX)) < 0) {
		vmlog(t, "start.idx is not used: %s",
		      ret == -EFBIG ? "larger than 256 MiB" : strerror(-ret));
		goto out;
	}
	buf_reset(&path);
	buf_addf(&path, "%s/" GUEST_FILE_START_BUNDLE, t->o->share);
	bundle_fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (bundle_fd < 0) {
		vmlog(t, "cannot open start.bundle: %s", strerror(errno));
		goto out;
	}
	if (prepared_check(bundle_fd, t->start, BRANCH, (const unsigned char *)idx.buf, idx.len, &p,
	                   &why) < 0) {
		vmlog(t, "the prepared clone is not used: %s", why.buf);
		goto out;
	}
	vmlog(t, "prepared clone: pack-%s, %u objects", p.pack_hex, p.objects);
	if ((ret = init_repo(t)) < 0 || (ret = place_pack(t, bundle_fd, &p, &idx)) < 0 ||
	    (ret = write_branch_and_user(t)) < 0) {
		vmlog(t, "cannot write the repository: %s", strerror(-ret));
		goto undo;
	}
	vmlog(t,
	      "placed the pack (%llu bytes), its index, aibox/task, " START_REF_SHORT
	      " and the user",
	      (unsigned long long)p.pack_len);
	ret = GIT(t, g, deadline, t->path, NULL, "read-tree", "--reset", "-u", "HEAD");
	if (ret != 0) {
		vmlog(t, "git read-tree failed (%d)", ret);
		goto undo;
	}
	ok = 1;
	goto out;
undo:
	if ((ret = empty_project(t)) < 0)
		vmlog(t, "cannot empty '%s': %s", t->path, strerror(-ret));
out:
	if (idx_fd >= 0)
		close(idx_fd);
	if (bundle_fd >= 0)
		close(bundle_fd);
	buf_release(&path);
	buf_release(&idx);
	buf_release(&why);
	return ok;
}

int clone_project_prepared(struct guest_task *t, struct step_group *g, int64_t deadline)
{
	int err = ensure_project_dir(t);

	return err < 0 ? err : clone_prepared(t, g, deadline);
}

/*
 * Two git processes, each of which costs a few hundred ms under emulation:
 * the clone (which writes user.name and user.email into the new repository's
 * config and checks out aibox/task) and the remote's removal.  A bundle whose
 * HEAD is not aibox/task at the start commit costs a checkout more.
 */
void step_clone(struct guest_task *t, struct step_info *si, struct step_group *g, int64_t unused)
{
	int64_t deadline = clock_ms() + t->o->git_limit_ms;
	struct buf bundle = BUF_INIT, name = BUF_INIT, email = BUF_INIT, head = BUF_INIT;
	struct buf why = BUF_INIT;
	int err;

	progress(t, "cloning");
	/* PID 1's child may have done the prepared clone below already (early_clone.c). */
	if ((err = early_clone_take(t, deadline)) < 0) {
		si->status = err == -ETIMEDOUT ? "timeout" : "failed";
		progress(t, "the early clone: %s", strerror(-err));
		goto out;
	}
	if (!err && (err = clone_project_prepared(t, g, deadline)) < 0) {
		si->status = "failed";
		progress(t, "cannot make the project folder '%s': %s", t->path, strerror(-err));
		goto out;
	}
	if (err > 0) {
		si->status = "ok";
		goto out;
	}
	buf_addf(&bundle, "%s/" GUEST_FILE_START_BUNDLE, t->o->share);
	buf_addf(&name, "user.name=%s", t->git_name);
	buf_addf(&email, "user.email=%s", t->git_email);
	if (!git_ok(t, si,
	            GIT(t, g, deadline, t->o->home, NULL, "clone", "-q", "-c", name.buf, "-c",
	                email.buf, "-c", MAINTENANCE_OPTION, "--", bundle.buf, t->path),
	            "git clone"))
		goto out;
	if (!git_ok(t, si, GIT(t, g, deadline, t->path, NULL, "remote", "remove", "origin"),
	            "git remote remove"))
		goto out;
	if (!clone_on_start(t)) {
		/* Not a bundle as aibox-task writes them: its HEAD must still be the start. */
		vmlog(t, "the clone is not on %s at %s: checking it out", BRANCH, t->start);
		if (!git_ok(t, si,
		            GIT(t, g, deadline, t->path, &head, "rev-parse", "--verify", "-q",
		                "HEAD^{commit}"),
		            "finding the bundle's HEAD"))
			goto out;
		buf_rtrim(&head);
		if (strcmp(head.buf, t->start)) {
			si->status = "failed";
			progress(t, "the bundle's HEAD is %s, not the start commit %s", head.buf,
			         t->start);
			goto out;
		}
		if (!git_ok(t, si,
		            GIT(t, g, deadline, t->path, NULL, "checkout", "-q", "-B", BRANCH,
		                t->start),
		            "git checkout"))
			goto out;
	}
	/* Without it the bundle step only takes the longer way. */
	if ((err = write_start_ref(t, START_REF)) < 0)
		vmlog(t, "cannot write %s: %s", START_REF, strerror(-err));
	si->status = "ok";
out:
	/*
	 * The secrets last: the host sends them once the session's command has
	 * started, and they travel while the clone is taken; only Claude Code's
	 * environment needs them.
	 */
	if (si->status && !strcmp(si->status, "ok") && secrets_read(t, &why) < 0) {
		si->status = "failed";
		progress(t, "%s", why.buf);
	}
	buf_release(&why);
	buf_release(&bundle);
	buf_release(&name);
	buf_release(&email);
	buf_release(&head);
}
