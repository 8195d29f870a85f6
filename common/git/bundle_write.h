/*
 * Writing a task's start bundle: one commit with its full history.
 *
 * git can only bundle refs, and the project must get no new ref, so the
 * bundle is written from a temporary repository that borrows the project's
 * objects (objects/info/alternates) and holds the commit as its branch
 * `branch` and its HEAD.  The bundle therefore carries two refs at the same
 * commit, HEAD and refs/heads/<branch>, so that `git clone start.bundle`
 * checks the branch out directly (docs/bundles.md).
 *
 * The pack is written by `git pack-objects --revs --delta-base-offset`, the
 * command `git bundle create` runs for such a bundle, to a file, so git also
 * writes the pack's index (.idx) from what it already knows: no object is
 * inflated or hashed again.  The bundle is then the v2 header git would
 * write followed by that pack, byte for byte what `git bundle create HEAD
 * refs/heads/<branch>` writes; the index can be handed to the VM beside it
 * (opts->idx_path), so the guest's clone need not index the pack under
 * emulation (docs/init-task.md).  git runs through spawn with no system or
 * global config, no hooks, no fsmonitor, and every config that could run a
 * program set to something inert; libgit2 only resolves the revision.
 *
 * The temporary repository is a folder ".start-bundle.XXXXXX" beside the
 * output file (inside the task folder), removed on every path out: on
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT arriving while git runs, git is stopped,
 * the folder and any partial output are removed, and the signal is raised
 * again with the caller's disposition.  Only SIGKILL leaves it behind, in
 * the task folder, where `aibox tasks clean --all` removes it with the folder.
 */
#ifndef AIBOX_BUNDLE_WRITE_H
#define AIBOX_BUNDLE_WRITE_H

#include "base/buf.h"

struct bundle_write_opts {
	const char *repo_dir; /* where to look for the project (searching upwards) */
	const char *rev;      /* any rev-parse spelling; NULL means HEAD */
	const char *out_path; /* the bundle to write (e.g. <task>/start.bundle) */
	const char *branch;   /* branch the bundle carries; NULL means "aibox/task" */
	const char *git;      /* the git program; NULL means "git" from PATH */
	const char *idx_path; /* where to put the pack's index too (start.idx); NULL: not kept */
};

/*
 * Resolve opts->rev in the repository found from opts->repo_dir, peeling
 * tags, into oid_hex (41 bytes).  Returns 0, or a negative errno with a
 * one-line message in err:
 *	-ENOENT   no repository there, or the revision does not exist
 *	-EINVAL   the revision is not a commit (a tree, a blob, a tag of one)
 *	-EPERM    the repository is bare, empty or shallow
 */
int bundle_resolve_start(const struct bundle_write_opts *opts, char *oid_hex, struct buf *err);

/*
 * Resolve as above and write the bundle to opts->out_path, and with
 * opts->idx_path its pack's index there (each created anew, replacing
 * nothing: an existing file is -EEXIST).  The files appear only complete
 * (written beside, then renamed; the index first, removed again if the
 * bundle cannot be put in place).  Returns 0 with oid_hex set, the
 * errors of bundle_resolve_start(), -EIO when git failed (its last stderr
 * lines in err), -EINTR when a signal stopped it and the caller survived the
 * signal, or another negative errno.
 */
int bundle_write_start(const struct bundle_write_opts *opts, char *oid_hex, struct buf *err);

#endif
