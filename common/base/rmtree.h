/*
 * Careful removal of a folder tree, for `aibox tasks clean --all` and
 * `aibox projects remove`.
 *
 * Everything is done relative to open folder fds (openat, fstatat,
 * unlinkat), so a path is never resolved twice and a symlink is never
 * followed: a symlink inside the tree is removed as a link and its target
 * survives, even when it points out of the tree.  The tree's file system is
 * the one of the top folder: a folder on another file system (st_dev) or at
 * a mount point (statx's STATX_ATTR_MOUNT_ROOT) is not entered, and the
 * removal fails with -EXDEV naming it.  Depth is capped at RMTREE_MAX_DEPTH.
 * Permissions are not changed to get through: a folder the user made
 * read-only stays, with what is in it, and is reported.
 */
#ifndef AIBOX_RMTREE_H
#define AIBOX_RMTREE_H

#include <stddef.h>
#include <stdint.h>

struct buf;

#define RMTREE_MAX_DEPTH 256

struct rmtree_stats {
	uint64_t bytes; /* disk space freed (st_blocks of entries whose last link went) */
	size_t entries; /* entries removed */
};

/*
 * Remove `name` in the folder dirfd (or AT_FDCWD): a file or symlink is
 * unlinked, a folder removed with everything in it.  Goes on past failures to
 * remove as much as it can.  Returns 0 (also when name does not exist), or
 * the first failure's negative errno with its path, relative to dirfd and
 * starting with name, appended to where (if not NULL).  stats (may be NULL)
 * adds what went.
 */
int rmtree_at(int dirfd, const char *name, struct rmtree_stats *stats, struct buf *where);

/* Format a byte count for people: "0 B", "512 B", "1.5 KiB", "20.0 MiB", "3.2 GiB". */
void format_bytes(struct buf *out, uint64_t bytes);

#endif
