/*
 * What `git fsck --strict` checks in each object, for the objects of an
 * untrusted pack (docs/bundles.md, "What the objects may hold").
 *
 * Every check works on the object's bytes alone (no repository), bounded by
 * its length; the data is untrusted and need not be NUL-terminated.  A tree
 * check notes the ids of the blobs its entries name .gitmodules or
 * .gitattributes (in any spelling git knows: case, NTFS short names and
 * trailing dots and spaces, HFS+ ignorable code points); the caller reads
 * those blobs afterwards and checks them with bundle_fsck_blob().
 *
 * Each check returns 0, or BUNDLE_REFUSED (common/git/bundle_read.h) with one
 * lowercase reason appended to err, ending in git's message id in
 * parentheses, e.g. "tree has a '.git' entry (hasDotgit)".
 */
#ifndef AIBOX_BUNDLE_FSCK_H
#define AIBOX_BUNDLE_FSCK_H

#include <stddef.h>

struct buf;

/* git's object types, as a pack numbers them. */
enum { FSCK_COMMIT = 1, FSCK_TREE = 2, FSCK_BLOB = 3, FSCK_TAG = 4 };

/* The blobs trees named .gitmodules or .gitattributes, raw 20-byte ids. */
struct bundle_fsck_blobs {
	unsigned char (*ids)[20];
	unsigned char *kind; /* FSCK_GITMODULES or FSCK_GITATTRIBUTES, per id */
	size_t nr, alloc;
};

enum { FSCK_GITMODULES = 1, FSCK_GITATTRIBUTES = 2 };

#define BUNDLE_FSCK_BLOBS_INIT                                                                     \
	{                                                                                          \
		NULL                                                                               \
	}

void bundle_fsck_blobs_clear(struct bundle_fsck_blobs *b);

/* A commit's header: tree, parents, one author, a committer; no NUL anywhere. */
int bundle_fsck_commit(const char *data, size_t len, struct buf *err);

/*
 * A tag's header: object, type, tag, a tagger when there is one, and a
 * gpgsig header's lines each ended.
 */
int bundle_fsck_tag(const char *data, size_t len, struct buf *err);

/*
 * A tree: every entry parses (an octal mode, a name, an id), its mode one of
 * git's five without zero padding, its name not empty, ".", "..", ".git" in
 * any spelling, longer than 4096 bytes, nor holding '/'; no null id; sorted as git sorts, without
 * duplicates; .gitmodules, .gitattributes, .gitignore and .mailmap not
 * symlinks.  The ids of .gitmodules and .gitattributes entries are added to
 * found (NULL: not noted).
 */
int bundle_fsck_tree(const char *data, size_t len, struct bundle_fsck_blobs *found,
                     struct buf *err);

/*
 * A blob a tree named .gitmodules (kind FSCK_GITMODULES: it parses as git
 * config, every submodule's name, url, path and update as git allows them;
 * a url for git's curl transport also as newer git normalizes it)
 * or .gitattributes (FSCK_GITATTRIBUTES: no line of 2048 bytes or more).
 */
int bundle_fsck_blob(int kind, const char *data, size_t len, struct buf *err);

#endif
