/*
 * Task mode's steps after Claude Code: commit what it left, and bundle the
 * new commits of aibox/task for the host (task_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/oid.h"
#include "task_int.h"
#include "base/banned.h"

static const char *const aibox_ident[] = {
    "GIT_AUTHOR_NAME=aibox", "GIT_AUTHOR_EMAIL=aibox@localhost", "GIT_COMMITTER_NAME=aibox",
    "GIT_COMMITTER_EMAIL=aibox@localhost", NULL};

/* The head of `git status --porcelain=v2 -z` output: enough to see its first entry. */
#define STATUS_KEEP 4096

struct status_out {
	struct buf b;
	int more; /* output past STATUS_KEEP */
};

static int status_sink(void *ctx, const char *data, size_t n)
{
	struct status_out *so = ctx;
	size_t room = STATUS_KEEP - so->b.len;

	if (n > room) {
		so->more = 1;
		n = room;
	}
	buf_add(&so->b, data, n);
	return 0;
}

/* "+N -M" of a "# branch.ab" record into *ahead and *behind; 0, or -1 for anything else. */
static int ab_parse(const char *s, long *ahead, long *behind)
{
	char *end;

	if (*s != '+' || !strchr("0123456789", s[1]))
		return -1;
	errno = 0;
	*ahead = strtol(s + 1, &end, 10);
	if (errno || strncmp(end, " -", 2) || !strchr("0123456789", end[2]))
		return -1;
	*behind = strtol(end + 2, &end, 10);
	return errno || *end ? -1 : 0;
}

/*
 * Read `git status --porcelain=v2 --branch -z`: t->status_on_branch is 1 when
 * HEAD is on BRANCH, *dirty is 1 when any entry (staged, unstaged or
 * untracked) follows the "# " header records, which git writes first; t->tip
 * is HEAD's commit against the start (TIP_UNKNOWN when git named none: an
 * unborn branch), t->tip_oid that commit; t->ahead and t->behind its counts
 * against START_REF when git named that as the upstream (else -1).
 */
static void status_parse(struct guest_task *t, const struct status_out *so, int *on_branch,
                         int *dirty)
{
	const char *p = so->b.buf, *end = so->b.buf + so->b.len;
	const char *oid = "# branch.oid ", *ab = "# branch.ab ";
	int upstream = 0;
	long ahead = -1, behind = -1;

	*on_branch = *dirty = 0;
	t->tip = TIP_UNKNOWN;
	t->tip_oid[0] = '\0';
	t->ahead = t->behind = -1;
	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		const char *v = p + strlen(oid);

		if (strncmp(p, "# ", 2) || (!z && so->more)) {
			*dirty = 1; /* an entry, or a header too long to be one of git's */
			return;
		}
		if (!z)
			return;
		if (!strcmp(p, "# branch.head " BRANCH)) {
			*on_branch = 1;
		} else if (!strncmp(p, oid, strlen(oid)) &&
		           strspn(v, "0123456789abcdef") == strlen(v) &&
		           (strlen(v) == 40 || strlen(v) == 64)) {
			t->tip = strcmp(v, t->start) ? TIP_MOVED : TIP_AT_START;
			memcpy(t->tip_oid, v, strlen(v) + 1);
		} else if (!strcmp(p, "# branch.upstream " START_REF_SHORT)) {
			upstream = 1;
		} else if (!strncmp(p, ab, strlen(ab)) && upstream &&
		           ab_parse(p + strlen(ab), &ahead, &behind) < 0) {
			ahead = behind = -1;
		}
		p = z + 1;
	}
	if (so->more)
		*dirty = 1;
	if (upstream) {
		t->ahead = ahead;
		t->behind = behind;
	}
}

/*
 * The changes.bundle sink: past BUNDLE_MAX bundle_too_big is 1, a failed
 * write's errno goes into bundle_werr; either way the rest is dropped (-1).
 */
static int bundle_sink(void *ctx, const char *data, size_t n)
{
	struct guest_task *t = ctx;

	if (t->bundle_too_big || t->bundle_werr)
		return -1;
	if (t->bundle_len + n > BUNDLE_MAX) {
		t->bundle_too_big = 1;
		return -1;
	}
	if (write_all(t->bundle_fd, data, n) < 0) {
		t->bundle_werr = errno ? errno : EIO;
		return -1;
	}
	t->bundle_len += n;
	return 0;
}

/*
 * Whether the bundle could not be whole whatever way it is made: past
 * BUNDLE_MAX or a failed write, said on a progress line.  The git process
 * that fed it may still have ended well (a sink's refusal only drops the
 * rest of its output), so every way checks this before its result.
 */
static int bundle_failed(struct guest_task *t)
{
	if (t->bundle_too_big)
		progress(t, "the bundle is larger than 2 GiB");
	else if (t->bundle_werr)
		progress(t, "cannot write the bundle: %s", strerror(t->bundle_werr));
	return t->bundle_too_big || t->bundle_werr;
}

/* The pack of a bundle of `<tip> ^<start>` (on stdin), as `git bundle create` runs it. */
#define PACK_ARGS                                                                                  \
	((const char *const[]){"pack-objects", "--revs", "--stdout", "--thin",                     \
	                       "--delta-base-offset", "-q", NULL})

/* ---- the bundle's pack beside the status ------------------------------ */

/*
 * bundle_packed()'s pack-objects, started before the commit step's status
 * from the tip read from the files (spec_tip()), in a group of its own: the
 * two git processes run at once on the VM's two vCPUs.  The status then
 * decides: kept only when bundle_packed() would pack that same tip
 * (spec_decide()), else killed and thrown away before anything of it is
 * written.  Its output waits in its pipe until the bundle step.
 */
struct bundle_spec {
	struct step_group g;
	struct git_job job;
	char tip[OID_SHA1_HEX + 1];
	int drop; /* being thrown away: its output goes nowhere */
};

/* The most of .git/HEAD or a loose ref read: either is one short line. */
#define REF_FILE_MAX 128

/*
 * The regular file name in the folder dir into b (NUL-terminated), when it
 * is smaller than max bytes and no link: its length, or -1.  A FIFO is not
 * waited for, a file that grew since its size was read is cut at max - 1.
 */
static ssize_t small_file_at(int dir, const char *name, char *b, size_t max)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	ssize_t n = -1;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (off_t)max) {
		do
			n = read(fd, b, max - 1);
		while (n < 0 && errno == EINTR);
		if (n >= 0)
			b[n] = '\0';
	}
	close(fd);
	return n;
}

/*
 * aibox/task's tip without a git process, when it is simply readable: .git a
 * folder, .git/HEAD exactly "ref: BRANCH_REF", and BRANCH_REF a loose ref of
 * 40 lowercase hex and a newline, every folder on the way no link.  0 with
 * tip filled in, or -1 (a packed ref, a link, a folder, anything else).  The
 * repository is the agent's: what this reads is only a guess, which the
 * status confirms (spec_decide()) before the pack is used.
 */
static int spec_tip(const struct guest_task *t, char tip[OID_SHA1_HEX + 1])
{
	char b[REF_FILE_MAX], path[] = ".git/" BRANCH_REF;
	char *name = path, *slash;
	ssize_t n;
	int dir, ret = -1;

	dir = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	while (dir >= 0 && (slash = strchr(name, '/'))) {
		int next;

		*slash = '\0';
		next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next >= 0 && !strcmp(name, ".git") &&
		    (small_file_at(next, "HEAD", b, sizeof(b)) !=
		         (ssize_t)strlen("ref: " BRANCH_REF "\n") ||
		     strcmp(b, "ref: " BRANCH_REF "\n"))) {
			close(next);
			next = -1;
		}
		close(dir);
		dir = next;
		name = slash + 1;
	}
	if (dir < 0)
		return -1;
	n = small_file_at(dir, name, b, sizeof(b));
	if (n == OID_SHA1_HEX + 1 && b[OID_SHA1_HEX] == '\n' &&
	    strspn(b, "0123456789abcdef") == OID_SHA1_HEX) {
		memcpy(tip, b, OID_SHA1_HEX);
		tip[OID_SHA1_HEX] = '\0';
		ret = 0;
	}
	close(dir);
	return ret;
}

static int spec_sink(void *ctx, const char *data, size_t n)
{
	struct guest_task *t = ctx;

	return t->spec->drop ? -1 : bundle_sink(t, data, n);
}

/*
 * Start the pack when aibox/task's tip reads as a commit other than the
 * start; t->spec set when it runs.  Nothing is said when it cannot start:
 * the ways of today follow.
 */
static void spec_start(struct guest_task *t, int64_t deadline)
{
	struct bundle_spec *s;
	struct buf revs = BUF_INIT;
	char tip[OID_SHA1_HEX + 1];
	int pfd[2], ret;

	if (strlen(t->start) != OID_SHA1_HEX || spec_tip(t, tip) < 0 || !strcmp(tip, t->start))
		return;
	s = xcalloc(1, sizeof(*s));
	memcpy(s->tip, tip, sizeof(s->tip));
	if (step_group_create(&s->g, t->o->backend, "pack") < 0) {
		free(s);
		return;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		step_group_destroy(&s->g);
		free(s);
		return;
	}
	/* Less than PIPE_BUF: the write never waits for the reader. */
	buf_addf(&revs, "%s\n^%s\n", tip, t->start);
	ret = write_all(pfd[1], revs.buf, revs.len);
	close(pfd[1]);
	buf_release(&revs);
	vmlog(t, "packing %s beside git status", tip);
	if (ret == 0)
		ret = git_start(t, &s->g, deadline, t->path, pfd[0], spec_sink, t, PACK_ARGS,
		                &s->job);
	close(pfd[0]);
	if (ret < 0) {
		vmlog(t, "the pack beside git status did not start");
		step_group_destroy(&s->g);
		free(s);
		return;
	}
	t->spec = s;
}

/* Wait for the pack (killed first when dropped), and release it. */
static int spec_end(struct guest_task *t, int drop)
{
	struct bundle_spec *s = t->spec;
	int ret;

	s->drop = drop;
	if (drop)
		step_group_kill(&s->g);
	ret = git_finish(t, &s->job);
	step_group_destroy(&s->g);
	free(s);
	t->spec = NULL;
	return ret;
}

/* Throw the pack away, if any: killed, nothing of it written. */
static void spec_drop(struct guest_task *t, const char *why)
{
	if (!t->spec)
		return;
	vmlog(t, "the pack beside git status is thrown away: %s", why);
	spec_end(t, 1);
}

void bundle_spec_drop(struct guest_task *t)
{
	spec_drop(t, "the bundle step did not run");
}

/*
 * After the status: keep the pack only when it is the one bundle_packed()
 * would make now (HEAD on BRANCH, nothing left, the tip the one packed, past
 * the start by one commit or more and lacking none of its), else drop it.
 */
static void spec_decide(struct guest_task *t, int on_branch, int dirty)
{
	const char *why = NULL;

	if (!t->spec)
		return;
	if (!on_branch)
		why = "HEAD is not on " BRANCH;
	else if (dirty)
		why = "changes were left";
	else if (strcmp(t->tip_oid, t->spec->tip))
		why = "git status saw another tip";
	else if (t->ahead <= 0 || t->behind != 0)
		why = "not new commits on the start";
	if (why)
		spec_drop(t, why);
}

/*
 * One git process when Claude Code committed everything (status); add and
 * commit more when it left changes.  The status writes nothing: without
 * --no-optional-locks it would write the index back whenever its refresh saw
 * a racily clean entry, as after any commit made within the index's second.
 */
void step_commit(struct guest_task *t, struct step_info *si, struct step_group *g, int64_t deadline)
{
	struct status_out so = {BUF_INIT, 0};
	struct git_job status;
	int ret, on_branch, dirty;

	spec_start(t, deadline);
	/* START_REF as aibox/task's upstream, for this run only: its "# branch.ab" record. */
	ret = git_start(
	    t, g, deadline, t->path, -1, status_sink, &so,
	    (const char *const[]){"-c", "branch." BRANCH ".remote=.", "-c",
	                          "branch." BRANCH ".merge=" START_REF, "--no-optional-locks",
	                          "status", "--porcelain=v2", "--branch", "--ahead-behind", "-z",
	                          "--untracked-files=normal", "--ignore-submodules=none", NULL},
	    &status);
	/* While git status and the pack run, the init sends what Claude Code left. */
	claude_results_send(t);
	if (ret == 0)
		ret = git_finish(t, &status);
	t->tip = TIP_UNKNOWN;
	if (!git_ok(t, si, ret, "git status"))
		goto out;
	status_parse(t, &so, &on_branch, &dirty);
	spec_decide(t, on_branch, dirty);
	if (!on_branch) {
		t->tip = TIP_UNKNOWN;
		si->status = "skipped";
		progress(t, "HEAD is not on %s: changes left uncommitted stay out", BRANCH);
		goto out;
	}
	/* HEAD is aibox/task: t->tip is its tip, unless a commit below moves it */
	if (!dirty) {
		si->status = "ok";
		goto out;
	}
	t->tip_oid[0] = '\0'; /* a commit of ours would move it: the counts no longer hold */
	t->ahead = t->behind = -1;
	if (!git_ok(t, si, GIT(t, g, deadline, t->path, NULL, "add", "-A"), "git add"))
		goto out;
	/* status counts changes git add may not take (an empty folder, a submodule's own) */
	ret = GIT(t, g, deadline, t->path, NULL, "diff", "--cached", "--quiet", "--no-ext-diff");
	if (ret == 0) {
		si->status = "ok";
		goto out;
	}
	if (ret != 1 && !git_ok(t, si, ret, "git diff"))
		goto out;
	progress(t, "committing leftover changes");
	ret = run_git(t, g, deadline, t->path, NULL, aibox_ident,
	              (const char *const[]){"commit", "-q", "--no-verify", "-m",
	                                    "Commit what Claude Code left uncommitted\n\n"
	                                    "Made by aibox-init when the task ended.",
	                                    NULL});
	if (git_ok(t, si, ret, "git commit")) {
		si->status = "ok";
		t->tip = TIP_MOVED; /* a new commit on top of HEAD */
	} else {
		t->tip = TIP_UNKNOWN;
	}
out:
	/* kept only for an "ok" step, which the bundle step follows */
	if (strcmp(si->status ? si->status : "", "ok"))
		spec_drop(t, "the commit step did not end ok");
	buf_release(&so.b);
}

/* aibox/task's commit into t->end_commit, by git rev-parse.  0, 1: the branch is gone, <0. */
static int branch_tip(struct guest_task *t, struct step_group *g, int64_t deadline)
{
	struct buf out = BUF_INIT;
	int ret;

	ret = GIT(t, g, deadline, t->path, &out, "rev-parse", "--verify", "-q",
	          BRANCH_REF "^{commit}");
	if (ret == 0) {
		buf_rtrim(&out);
		free(t->end_commit);
		t->end_commit = xstrdup(out.buf);
	}
	buf_release(&out);
	return ret > 0 ? 1 : ret;
}

/*
 * Read the bundle's header: aibox/task's commit into t->end_commit, and
 * whether the start commit is one of its prerequisites.  Bit 0: the tip was
 * found; bit 1: the start commit is a prerequisite.  Only the first
 * BUNDLE_HEAD_READ bytes are read: a header longer than that finds less.
 */
#define BUNDLE_HEAD_READ 65536
static int bundle_head(struct guest_task *t)
{
	char *head = xmalloc(BUNDLE_HEAD_READ + 1);
	size_t olen = strlen(t->start);
	ssize_t n = pread(t->bundle_fd, head, BUNDLE_HEAD_READ, 0);
	const char *p, *q;
	int found = 0;

	if (n <= 0)
		goto out;
	head[n] = '\0';
	for (p = head; (q = strchr(p, '\n')); p = q + 1) {
		if (q == p)
			break; /* the end of the header */
		if (*p == '-' && (size_t)(q - p) >= olen + 1 && !strncmp(p + 1, t->start, olen) &&
		    (p[1 + olen] == ' ' || p[1 + olen] == '\n'))
			found |= 2;
		else if ((size_t)(q - p) == olen + 1 + strlen(BRANCH_REF) && p[olen] == ' ' &&
		         !strncmp(p + olen + 1, BRANCH_REF, strlen(BRANCH_REF)) &&
		         strspn(p, "0123456789abcdef") == olen) {
			free(t->end_commit);
			t->end_commit = xstrndup(p, olen);
			found |= 1;
		}
	}
out:
	free(head);
	return found;
}

/* <results>/changes.bundle open and empty in t->bundle_fd: 0, or -errno after a progress line. */
static int bundle_open(struct guest_task *t)
{
	struct buf file = BUF_INIT;
	int ret = 0;

	if (t->bundle_fd < 0) {
		buf_addf(&file, "%s/%s", t->results, guest_results[RESULT_BUNDLE].name);
		t->bundle_fd =
		    open(file.buf, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (t->bundle_fd < 0) {
			ret = -errno;
			progress(t, "cannot open '%s': %s", file.buf, strerror(errno));
		}
	} else if (ftruncate(t->bundle_fd, 0) < 0 || lseek(t->bundle_fd, 0, SEEK_SET) < 0) {
		ret = -errno;
		progress(t, "cannot empty the bundle: %s", strerror(errno));
	}
	t->bundle_len = 0;
	t->bundle_too_big = 0;
	t->bundle_werr = 0;
	buf_release(&file);
	return ret;
}

/*
 * `git bundle create` of aibox/task's commits past the start into
 * <results>/changes.bundle (truncated first); git's result, or -EFBIG past
 * BUNDLE_MAX or on a failed write (bundle_failed() says which), or -errno
 * when the file cannot be opened.
 */
static int bundle_create(struct guest_task *t, struct step_group *g, int64_t deadline)
{
	struct buf range = BUF_INIT;
	int ret;

	if ((ret = bundle_open(t)) < 0)
		goto out;
	buf_addf(&range, "^%s", t->start);
	ret = run_git_to(
	    t, g, deadline, t->path, NULL, bundle_sink, t, NULL,
	    (const char *const[]){"bundle", "create", "-q", "-", BRANCH_REF, range.buf, NULL});
	if (t->bundle_too_big || t->bundle_werr)
		ret = -EFBIG;
out:
	buf_release(&range);
	return ret;
}

/*
 * The bundle with one git process, its header written here: when the commit
 * step's status counted aibox/task's tip past START_REF with none of
 * START_REF's commits missing, the tip descends from the start, so the
 * bundle is what `git bundle create` would write (its prerequisites the start
 * and any older commit a merge brought in, all of which the start's history
 * holds): the header `# v2 git bundle`, `-<start>`, `<tip> BRANCH_REF`, a
 * blank line, then `git pack-objects --revs --stdout --thin
 * --delta-base-offset` of `<tip> ^<start>`, the pack git bundle create runs.
 * The counts come from the repository Claude Code had (START_REF is its
 * file); the host checks the bundle whole either way (docs/bundles.md).
 * 1: done (ok, or failed past BUNDLE_MAX or on the file: a failed write is
 * final); 0: not done, the other ways below decide.
 */
static int bundle_packed(struct guest_task *t, struct step_info *si, struct step_group *g,
                         int64_t deadline)
{
	struct buf head = BUF_INIT, revs = BUF_INIT;
	int pfd[2], ret;

	if (strlen(t->start) != 40 || strlen(t->tip_oid) != 40 || t->ahead <= 0 || t->behind != 0)
		return 0;
	if (!t->said_bundling)
		progress(t, "bundling");
	t->said_bundling = 1;
	if (bundle_open(t) < 0)
		return 1;
	buf_addf(&head, "# v2 git bundle\n-%s\n%s " BRANCH_REF "\n\n", t->start, t->tip_oid);
	buf_addf(&revs, "%s\n^%s\n", t->tip_oid, t->start);
	if (bundle_sink(t, head.buf, head.len) < 0) {
		ret = -EIO;
	} else if (pipe2(pfd, O_CLOEXEC) < 0) {
		ret = -errno;
	} else {
		/* Less than PIPE_BUF: the write never waits for the reader. */
		ret = write_all(pfd[1], revs.buf, revs.len) < 0 ? -errno : 0;
		close(pfd[1]);
		if (ret == 0)
			ret = run_git_in(t, g, deadline, t->path, pfd[0], NULL, bundle_sink, t,
			                 PACK_ARGS);
		close(pfd[0]);
	}
	buf_release(&head);
	buf_release(&revs);
	if (bundle_failed(t))
		return 1;
	if (ret != 0) {
		vmlog(t, "git pack-objects failed (%d): checking %s", ret, BRANCH);
		return 0;
	}
	free(t->end_commit);
	t->end_commit = xstrdup(t->tip_oid);
	t->changes = 1;
	si->status = "ok";
	return 1;
}

/*
 * The bundle made straight away when the commit step saw aibox/task move:
 * one git process instead of rev-list and bundle create.  A tip past the
 * start has the start among the bundle's prerequisites exactly when it
 * descends from it (`git bundle create` lists the boundary of start..tip).
 * 1: done (ok, or failed past BUNDLE_MAX or on the file); 0: the checks below
 * must decide.
 */
static int bundle_moved(struct guest_task *t, struct step_info *si, struct step_group *g,
                        int64_t deadline)
{
	int ret;

	if (!t->said_bundling)
		progress(t, "bundling"); /* else said by bundle_packed() */
	t->said_bundling = 1;
	ret = bundle_create(t, g, deadline);
	if (bundle_failed(t) || t->bundle_fd < 0)
		return 1;
	if (ret == 0 && bundle_head(t) == 3) {
		t->changes = 1;
		si->status = "ok";
		return 1;
	}
	vmlog(t, "the bundle is not one of new commits on the start (%d): checking %s", ret,
	      BRANCH);
	return 0;
}

/*
 * The bundle from the pack the commit step kept (t->spec): bundle_packed()'s
 * header, then the pack's output as it comes.  1: done (ok, or failed past
 * BUNDLE_MAX or on the file); 0: thrown away (the pack failed), the other
 * ways decide.
 */
static int spec_use(struct guest_task *t, struct step_info *si)
{
	struct buf head = BUF_INIT;
	char tip[OID_SHA1_HEX + 1];
	int ret;

	memcpy(tip, t->spec->tip, sizeof(tip));
	progress(t, "bundling");
	t->said_bundling = 1;
	if (bundle_open(t) < 0) {
		spec_drop(t, "no bundle file");
		return 1;
	}
	buf_addf(&head, "# v2 git bundle\n-%s\n%s " BRANCH_REF "\n\n", t->start, tip);
	bundle_sink(t, head.buf, head.len);
	buf_release(&head);
	if (bundle_failed(t)) {
		spec_drop(t, "cannot write the bundle's header");
		return 1;
	}
	ret = spec_end(t, 0);
	if (bundle_failed(t))
		return 1;
	if (ret != 0) {
		vmlog(t, "the pack beside git status failed (%d): thrown away", ret);
		return 0;
	}
	vmlog(t, "the pack beside git status is the bundle");
	free(t->end_commit);
	t->end_commit = xstrdup(tip);
	t->changes = 1;
	si->status = "ok";
	return 1;
}

/*
 * No git process when the commit step saw aibox/task at the start (no
 * changes); usually one (bundle create) when it saw it move.  Otherwise, or
 * when that bundle is not one of new commits on the start: rev-list, then
 * bundle create when there is something to send; rev-parse only to explain
 * a failure.
 */
void step_bundle(struct guest_task *t, struct step_info *si, struct step_group *g, int64_t deadline)
{
	struct buf out = BUF_INIT, range = BUF_INIT;
	long left, right;
	char *end;
	int ret;

	si->status = "failed";
	if (t->spec && spec_use(t, si))
		goto out;
	if (t->tip == TIP_AT_START) {
		free(t->end_commit);
		t->end_commit = xstrdup(t->start);
		/* Not said here: the host's summary says "no changes" (common/task/task_results.h).
		 */
		si->status = "ok";
		goto out;
	}
	if (t->tip == TIP_MOVED &&
	    (bundle_packed(t, si, g, deadline) || bundle_moved(t, si, g, deadline)))
		goto out;
	/* left: start's commits that aibox/task lacks (none when it descends); right: new ones */
	buf_addf(&range, "%s..." BRANCH_REF, t->start);
	ret = GIT(t, g, deadline, t->path, &out, "rev-list", "--left-right", "--count", range.buf,
	          "--");
	if (ret > 0) {
		int tip = branch_tip(t, g, deadline);

		if (tip == 1)
			progress(t, "the branch %s is gone", BRANCH);
		else
			git_ok(t, si, tip < 0 ? tip : ret, "git rev-list");
		goto out;
	}
	if (!git_ok(t, si, ret, "git rev-list"))
		goto out;
	errno = 0;
	left = strtol(out.buf, &end, 10);
	right = *end == '\t' ? strtol(end + 1, &end, 10) : -1;
	if (errno || left < 0 || right < 0 || (*end && *end != '\n')) {
		progress(t, "git rev-list gave '%.40s', not two counts", out.buf);
		goto out;
	}
	if (left > 0) {
		branch_tip(t, g, deadline);
		progress(t, "%s does not descend from the start commit", BRANCH);
		goto out;
	}
	if (right == 0) {
		free(t->end_commit);
		t->end_commit = xstrdup(t->start);
		si->status = "ok";
		goto out;
	}

	if (t->tip != TIP_MOVED)
		progress(t, "bundling");
	ret = bundle_create(t, g, deadline);
	if (bundle_failed(t))
		goto out;
	if (t->bundle_fd < 0 || !git_ok(t, si, ret, "git bundle create"))
		goto out;
	if (!(bundle_head(t) & 1) && branch_tip(t, g, deadline) != 0) {
		progress(t, "cannot find %s's commit", BRANCH);
		goto out;
	}
	t->changes = 1;
	si->status = "ok";
out:
	buf_release(&out);
	buf_release(&range);
}
