#include "git/bundle_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "git/bundle_read.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/printable.h"
#include "base/spawn.h"
#include "base/banned.h"

#define GIT_STDERR_KEEP 4096

static int git_fail(struct buf *err, int ret, const char *what)
{
	const git_error *e = git_error_last();

	buf_addf(err, "%s", what);
	if (e && e->message)
		buf_addf(err, ": %s", e->message);
	return ret;
}

static const char *type_name(git_object_t t)
{
	switch (t) {
	case GIT_OBJECT_TREE:
		return "a tree";
	case GIT_OBJECT_BLOB:
		return "a blob";
	case GIT_OBJECT_TAG:
		return "a tag";
	default:
		return "not a commit";
	}
}

/*
 * Resolve in an open repository; also give back the objects folder to
 * borrow.  The caller owns *objects_dir.
 */
static int resolve(const struct bundle_write_opts *opts, char *oid_hex, struct buf *err,
                   char **objects_dir)
{
	const char *rev = opts->rev ? opts->rev : "HEAD";
	git_repository *repo = NULL;
	git_object *obj = NULL, *commit = NULL;
	int ret = 0, r;

	git_libgit2_init();
	if (git_repository_open_ext(&repo, opts->repo_dir, 0, NULL) < 0) {
		ret = git_fail(err, -ENOENT, "not in a git repository");
		goto out;
	}
	if (git_repository_is_bare(repo)) {
		buf_addf(err, "'%s' is a bare repository", git_repository_path(repo));
		ret = -EPERM;
		goto out;
	}
	r = git_repository_is_shallow(repo);
	if (r != 0) {
		if (r < 0)
			ret = git_fail(err, -EIO, "cannot tell whether the repository is shallow");
		else {
			buf_addstr(err,
			           "the repository is a shallow clone, which lacks the history "
			           "(git fetch --unshallow)");
			ret = -EPERM;
		}
		goto out;
	}
	r = git_repository_is_empty(repo);
	if (r != 0) {
		if (r < 0)
			ret = git_fail(err, -EIO, "cannot tell whether the repository is empty");
		else {
			buf_addstr(err, "the repository is empty (no commits)");
			ret = -EPERM;
		}
		goto out;
	}
	if (git_revparse_single(&obj, repo, rev) < 0) {
		buf_addf(err, "unknown revision '%s'", rev);
		ret = -ENOENT;
		goto out;
	}
	if (git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) < 0) {
		git_object *peeled = NULL;
		git_object_t t = git_object_type(obj);

		if (t == GIT_OBJECT_TAG && git_object_peel(&peeled, obj, GIT_OBJECT_ANY) == 0) {
			buf_addf(err, "'%s' is a tag of %s, not a commit", rev,
			         type_name(git_object_type(peeled)));
			git_object_free(peeled);
		} else {
			buf_addf(err, "'%s' is %s, not a commit", rev, type_name(t));
		}
		ret = -EINVAL;
		goto out;
	}
	git_oid_tostr(oid_hex, GIT_OID_HEXSZ + 1, git_object_id(commit));
	if (objects_dir) {
		struct buf b = BUF_INIT;
		const char *common = git_repository_commondir(repo);

		buf_addstr(&b, common);
		if (b.len && b.buf[b.len - 1] != '/')
			buf_addch(&b, '/');
		buf_addstr(&b, "objects");
		if (b.buf[0] != '/' || strchr(b.buf, '\n')) {
			buf_addf(err, "cannot borrow objects from '%s'", b.buf);
			buf_release(&b);
			ret = -EINVAL;
			goto out;
		}
		*objects_dir = buf_detach(&b, NULL);
	}
out:
	git_object_free(commit);
	git_object_free(obj);
	git_repository_free(repo);
	git_libgit2_shutdown();
	return ret;
}

int bundle_resolve_start(const struct bundle_write_opts *opts, char *oid_hex, struct buf *err)
{
	return resolve(opts, oid_hex, err, NULL);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int write_text(const char *dir, const char *name, const char *text)
{
	struct buf path = BUF_INIT, content = BUF_INIT;
	int ret;

	buf_addf(&path, "%s/%s", dir, name);
	buf_addstr(&content, text);
	ret = buf_write_file(&content, path.buf, 0600);
	buf_release(&path);
	buf_release(&content);
	return ret;
}

static int make_dirs(const char *dir, const char *sub)
{
	struct buf p = BUF_INIT;
	int ret = 0;

	buf_addf(&p, "%s/", dir);
	for (const char *s = sub;; s++) {
		if (*s == '/' || *s == '\0') {
			if (mkdir(p.buf, 0700) < 0 && errno != EEXIST) {
				ret = -errno;
				break;
			}
			if (!*s)
				break;
		}
		buf_addch(&p, *s);
	}
	buf_release(&p);
	return ret;
}

/* The temporary repository: HEAD on the branch at oid, objects borrowed. */
static int make_temp_repo(const char *tmp, const char *branch, const char *oid, const char *objects)
{
	struct buf t = BUF_INIT, refdir = BUF_INIT;
	const char *slash = strrchr(branch, '/');
	int ret;

	buf_addstr(&refdir, "refs/heads");
	if (slash) {
		buf_addch(&refdir, '/');
		buf_add(&refdir, branch, (size_t)(slash - branch));
	}
	if ((ret = make_dirs(tmp, "objects/info")) < 0 || (ret = make_dirs(tmp, "refs/tags")) < 0 ||
	    (ret = make_dirs(tmp, refdir.buf)) < 0)
		goto out;
	buf_addf(&t, "%s\n", objects);
	if ((ret = write_text(tmp, "objects/info/alternates", t.buf)) < 0)
		goto out;
	buf_reset(&t);
	buf_addf(&t, "%s\n", oid);
	buf_reset(&refdir);
	buf_addf(&refdir, "refs/heads/%s", branch);
	if ((ret = write_text(tmp, refdir.buf, t.buf)) < 0)
		goto out;
	buf_reset(&t);
	buf_addf(&t, "ref: refs/heads/%s\n", branch);
	if ((ret = write_text(tmp, "HEAD", t.buf)) < 0)
		goto out;
	ret = write_text(tmp, "config", "[core]\n\trepositoryformatversion = 0\n\tbare = true\n");
out:
	buf_release(&t);
	buf_release(&refdir);
	return ret;
}

/* Signals that stop the write (and are re-raised once it is cleaned up). */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static const char *const unset_env[] = {
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_SHALLOW_FILE",
    "GIT_GRAFT_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_EXEC_PATH",
    "GIT_PAGER",
    "PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_EXTERNAL_DIFF",
    "GIT_QUARANTINE_PATH",
    "GIT_PROTOCOL",
    "GIT_TRACE",
    "GIT_TRACE2",
    "GIT_TRACE2_EVENT",
    "GIT_TRACE2_PERF",
    "GIT_TRACE_PACKET",
    "GIT_TRACE_PACKFILE",
    "GIT_TRACE_PERFORMANCE",
    "GIT_TRACE_SETUP",
    "GIT_TRACE_PACK_ACCESS",
    "GIT_TRACE_CURL",
    "GIT_TRACE_SHALLOW",
    "GIT_TRACE_FSMONITOR",
    "GIT_TRACE_REFS",
    "GIT_REDACT_COOKIES",
    "GIT_DIFF_OPTS",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_TEMPLATE_DIR",
    "GIT_PROXY_COMMAND",
    "GIT_CONFIG_SYSTEM",
    NULL,
};

/*
 * Every config that could make `git bundle create` run a program or touch
 * anything but the temporary repository, set to something inert.  System
 * and global config are not read at all (GIT_CONFIG_NOSYSTEM,
 * GIT_CONFIG_GLOBAL=/dev/null); the local config is ours.
 */
static const char *const inert_config[] = {
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false",
    "core.pager=cat",           "core.editor=:",        "core.askPass=",
    "core.sshCommand=",         "core.gitProxy=",       "core.alternateRefsCommand=",
    "credential.helper=",       "protocol.allow=never", "gc.auto=0",
    "maintenance.auto=false",   "diff.external=",       "trace2.eventTarget=",
    "trace2.normalTarget=",     "trace2.perfTarget=",   NULL,
};

/*
 * git pack-objects, as `git bundle create` runs it for a bundle without
 * prerequisites (--thin changes nothing then), but writing the pack and its
 * index to files: <tmp>/pack-<checksum>.pack and .idx.  The commit comes on
 * stdin (revs, a file).
 */
static void setup_git(struct spawn *sp, const char *git, const char *tmp, int revs_fd)
{
	strvec_push(&sp->args, git);
	for (size_t i = 0; inert_config[i]; i++)
		strvec_pushl(&sp->args, "-c", inert_config[i], NULL);
	strvec_pushl(&sp->args, "pack-objects", "--revs", "--delta-base-offset", "-q", NULL);
	strvec_pushf(&sp->args, "%s/pack", tmp);
	for (size_t i = 0; unset_env[i]; i++)
		strvec_push(&sp->env, unset_env[i]);
	strvec_pushf(&sp->env, "GIT_DIR=%s", tmp);
	strvec_pushl(&sp->env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	             "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1", "GIT_OPTIONAL_LOCKS=0",
	             "LC_ALL=C", NULL);
	sp->in = revs_fd;
	sp->out = SPAWN_NULL;
	sp->err = SPAWN_PIPE;
	sp->dir = tmp;
	sp->pdeathsig = SIGKILL;
}

/* Keep only the tail of git's stderr. */
static void keep_tail(struct buf *b, const char *data, size_t n)
{
	buf_add(b, data, n);
	if (b->len > GIT_STDERR_KEEP)
		buf_consume(b, b->len - GIT_STDERR_KEEP);
}

/*
 * Run git to the end, or until one of stop_signals arrives (they are blocked
 * except inside ppoll).  Returns git's status (as spawn_wait), or -EINTR
 * after stopping it.
 */
static int run_git(struct spawn *sp, const sigset_t *waitmask, struct buf *gerr)
{
	char chunk[1024];
	int ret;

	ret = spawn_start(sp);
	if (ret < 0)
		return ret;
	for (;;) {
		struct pollfd pfd = {.fd = sp->err_fd, .events = POLLIN};
		ssize_t n;

		if (stop_signal)
			break;
		if (ppoll(&pfd, 1, NULL, waitmask) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		n = read(sp->err_fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		keep_tail(gerr, chunk, (size_t)n);
	}
	if (stop_signal) {
		kill(sp->pid, SIGTERM);
		spawn_wait(sp);
		return -EINTR;
	}
	return spawn_wait(sp);
}

static void last_line(struct buf *err, struct buf *gerr)
{
	char *start;

	buf_rtrim(gerr);
	start = strrchr(gerr->buf, '\n');
	start = start ? start + 1 : gerr->buf;
	printable_ascii(start, strlen(start), PRINTABLE_KEEP_8BIT);
	buf_addstr(err, *start ? start : "(no message)");
}

/* The checksum git named the pack in tmp after (pack-<hex>.pack), into hex. */
static int find_pack(const char *tmp, char hex[GIT_OID_HEXSZ + 1])
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	int ret = -ENOENT;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		const char *n = e->d_name;

		if (strlen(n) == 5 + GIT_OID_HEXSZ + 5 && !strncmp(n, "pack-", 5) &&
		    !strcmp(n + 5 + GIT_OID_HEXSZ, ".pack") &&
		    strspn(n + 5, "0123456789abcdef") == GIT_OID_HEXSZ) {
			memcpy(hex, n + 5, GIT_OID_HEXSZ);
			hex[GIT_OID_HEXSZ] = '\0';
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

/* Copy the rest of in to out: in the kernel where it can, else through a buffer. */
static int copy_rest(int in, int out)
{
	char chunk[65536];
	ssize_t n;

	for (;;) {
		n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n > 0)
			continue;
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL)
			return -errno;
		break;
	}
	for (;;) {
		n = read(in, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (write_all(out, chunk, (size_t)n) < 0)
			return -errno;
	}
}

/*
 * The bundle as `git bundle create HEAD refs/heads/<branch>` writes it (v2,
 * no prerequisites, both refs at oid), followed by the pack git wrote.
 */
static int assemble_bundle(const char *path, const char *pack, const char *branch, const char *oid)
{
	struct buf head = BUF_INIT;
	int in = -1, out, ret = 0;

	out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0)
		return -errno;
	buf_addf(&head, "# v2 git bundle\n%s HEAD\n%s refs/heads/%s\n\n", oid, oid, branch);
	if (write_all(out, head.buf, head.len) < 0) {
		ret = -errno;
		goto out;
	}
	in = open(pack, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		ret = -errno;
		goto out;
	}
	ret = copy_rest(in, out);
out:
	if (in >= 0)
		close(in);
	if (close(out) < 0 && !ret)
		ret = -errno;
	buf_release(&head);
	return ret;
}

/*
 * Before anything is written: a valid branch, the revision resolved into
 * oid_hex (and *objects, resolve()), no file at the outputs.  0 or -errno
 * with err set.
 */
static int check_start(const struct bundle_write_opts *opts, const char *branch, char *oid_hex,
                       char **objects, struct buf *err)
{
	struct buf ref = BUF_INIT;
	struct stat st;
	int ret;

	buf_addf(&ref, "refs/heads/%s", branch);
	ret = bundle_refname_ok(ref.buf, ref.len);
	buf_release(&ref);
	if (!ret) {
		buf_addf(err, "invalid branch name '%s'", branch);
		return -EINVAL;
	}
	ret = resolve(opts, oid_hex, err, objects);
	if (ret < 0)
		return ret;
	if (lstat(opts->out_path, &st) == 0) {
		buf_addf(err, "'%s' already exists", opts->out_path);
		return -EEXIST;
	}
	if (opts->idx_path && lstat(opts->idx_path, &st) == 0) {
		buf_addf(err, "'%s' already exists", opts->idx_path);
		return -EEXIST;
	}
	return 0;
}

/*
 * The template of the temporary repository's name into tmp: beside out_path,
 * in the task folder, absolute (git runs inside it).  0 or -errno with err set.
 */
static int temp_template(const char *out_path, struct buf *tmp, struct buf *err)
{
	struct buf dir = BUF_INIT;
	const char *slash;
	char *real;
	int ret = 0;

	buf_addstr(&dir, out_path);
	slash = strrchr(dir.buf, '/');
	buf_setlen(&dir, slash ? (size_t)(slash - dir.buf) : 0);
	if (!dir.len)
		buf_addstr(&dir, slash ? "/" : ".");
	real = realpath(dir.buf, NULL);
	if (!real) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", dir.buf, strerror(errno));
	} else {
		buf_addf(tmp, "%s/.start-bundle.XXXXXX", strcmp(real, "/") ? real : "");
		free(real);
	}
	buf_release(&dir);
	return ret;
}

/* The stop signals' handlers and the signal mask from before hold_stop_signals(). */
struct held_signals {
	struct sigaction old[ARRAY_SIZE(stop_signals)];
	int installed[ARRAY_SIZE(stop_signals)];
	sigset_t oldmask;
};

/*
 * Block the stop signals and catch them into stop_signal (those not
 * ignored); *waitmask is the old mask without them, for the wait on git.
 */
static void hold_stop_signals(struct held_signals *h, sigset_t *waitmask)
{
	sigset_t block;

	memset(h->installed, 0, sizeof(h->installed));
	stop_signal = 0;
	sigemptyset(&block);
	for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
		sigaddset(&block, stop_signals[i]);
	sigprocmask(SIG_BLOCK, &block, &h->oldmask);
	for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++) {
		struct sigaction sa = {.sa_handler = on_stop};

		sigemptyset(&sa.sa_mask);
		if (sigaction(stop_signals[i], NULL, &h->old[i]) == 0 &&
		    h->old[i].sa_handler != SIG_IGN && sigaction(stop_signals[i], &sa, NULL) == 0)
			h->installed[i] = 1;
	}
	*waitmask = h->oldmask;
	for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
		sigdelset(waitmask, stop_signals[i]);
}

/* Put back what hold_stop_signals() changed; the stop signal that came, or 0. */
static int release_stop_signals(struct held_signals *h)
{
	int caught = stop_signal;

	for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
		if (h->installed[i])
			sigaction(stop_signals[i], &h->old[i], NULL);
	sigprocmask(SIG_SETMASK, &h->oldmask, NULL);
	return caught;
}

/*
 * Make the temporary repository from the template tmp (emptied when it
 * cannot be made) with the start commit's objects, and pack them with git
 * pack-objects, the stop signals let through only while git runs.  0 with
 * the pack's name in packhex; -EINTR when a stop signal came; another
 * -errno.  err says why.
 */
static int make_pack(const struct bundle_write_opts *opts, const char *branch, const char *oid_hex,
                     const char *objects, struct buf *tmp, const sigset_t *waitmask, char *packhex,
                     struct buf *err)
{
	struct buf revs = BUF_INIT, line = BUF_INIT, gerr = BUF_INIT;
	struct spawn sp = SPAWN_INIT;
	int ret, revs_fd = -1;

	if (!mkdtemp(tmp->buf)) {
		ret = -errno;
		buf_addf(err, "cannot create '%s': %s", tmp->buf, strerror(errno));
		buf_reset(tmp);
		goto out;
	}
	ret = make_temp_repo(tmp->buf, branch, oid_hex, objects);
	if (ret < 0) {
		buf_addf(err, "cannot write the temporary repository '%s': %s", tmp->buf,
		         strerror(-ret));
		goto out;
	}
	buf_addf(&revs, "%s/revs", tmp->buf);
	buf_addf(&line, "%s\n", oid_hex);
	if ((ret = buf_write_file(&line, revs.buf, 0600)) < 0 ||
	    (revs_fd = open(revs.buf, O_RDONLY | O_CLOEXEC)) < 0) {
		ret = ret < 0 ? ret : -errno;
		buf_addf(err, "cannot write '%s': %s", revs.buf, strerror(-ret));
		goto out;
	}
	setup_git(&sp, opts->git ? opts->git : "git", tmp->buf, revs_fd);
	ret = run_git(&sp, waitmask, &gerr);
	if (ret == -EINTR) {
		buf_addstr(err, "interrupted");
		goto out;
	}
	if (ret < 0) {
		buf_addf(err, "cannot run git: %s", strerror(-ret));
		goto out;
	}
	if (ret != 0) {
		buf_addf(err, "git pack-objects failed (exit %d): ", ret);
		last_line(err, &gerr);
		ret = -EIO;
		goto out;
	}
	if ((ret = find_pack(tmp->buf, packhex)) < 0) {
		buf_addf(err, "git pack-objects wrote no pack in '%s'", tmp->buf);
		ret = -EIO;
	}
out:
	if (revs_fd >= 0)
		close(revs_fd);
	spawn_clear(&sp);
	buf_release(&revs);
	buf_release(&line);
	buf_release(&gerr);
	return ret;
}

/*
 * Assemble the bundle of the pack in tmp and move it, and with
 * opts->idx_path the pack's index, into place, never over a file.  0, or
 * -errno with err set and neither left in place.
 */
static int place_bundle(const struct bundle_write_opts *opts, const char *branch,
                        const char *oid_hex, const char *tmp, const char *packhex, struct buf *err)
{
	struct buf pack = BUF_INIT, partial = BUF_INIT, idx = BUF_INIT;
	int ret, idx_made = 0;

	buf_addf(&pack, "%s/pack-%s.pack", tmp, packhex);
	buf_addf(&partial, "%s/start.bundle", tmp);
	if ((ret = assemble_bundle(partial.buf, pack.buf, branch, oid_hex)) < 0) {
		buf_addf(err, "cannot write '%s': %s", partial.buf, strerror(-ret));
		goto out;
	}
	if (opts->idx_path) {
		buf_addf(&idx, "%s/pack-%s.idx", tmp, packhex);
		if (chmod(idx.buf, 0644) < 0 ||
		    renameat2(AT_FDCWD, idx.buf, AT_FDCWD, opts->idx_path, RENAME_NOREPLACE) < 0) {
			ret = -errno;
			buf_addf(err, "cannot create '%s': %s", opts->idx_path, strerror(errno));
			goto out;
		}
		idx_made = 1;
	}
	if (renameat2(AT_FDCWD, partial.buf, AT_FDCWD, opts->out_path, RENAME_NOREPLACE) < 0) {
		ret = -errno;
		buf_addf(err, "cannot create '%s': %s", opts->out_path, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (ret < 0 && idx_made)
		unlink(opts->idx_path);
	buf_release(&pack);
	buf_release(&partial);
	buf_release(&idx);
	return ret;
}

int bundle_write_start(const struct bundle_write_opts *opts, char *oid_hex, struct buf *err)
{
	const char *branch = opts->branch ? opts->branch : GUEST_BRANCH;
	struct buf tmp = BUF_INIT;
	struct held_signals held;
	sigset_t waitmask;
	char *objects = NULL, packhex[GIT_OID_HEXSZ + 1];
	int ret, caught;

	if ((ret = check_start(opts, branch, oid_hex, &objects, err)) < 0 ||
	    (ret = temp_template(opts->out_path, &tmp, err)) < 0)
		goto out;

	/* From here on a stop signal is held back until git runs. */
	hold_stop_signals(&held, &waitmask);
	ret = make_pack(opts, branch, oid_hex, objects, &tmp, &waitmask, packhex, err);
	if (!ret)
		ret = place_bundle(opts, branch, oid_hex, tmp.buf, packhex, err);
	if (tmp.len)
		remove_tree(tmp.buf);
	caught = release_stop_signals(&held);
	if (caught) {
		/* Cleaned up: now let the signal do what the caller wanted. */
		raise(caught);
		if (ret == 0) {
			/* It arrived after git was done; the bundle is whole. */
		} else {
			ret = -EINTR;
		}
	}
out:
	free(objects);
	buf_release(&tmp);
	return ret;
}
