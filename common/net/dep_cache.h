/*
 * The dependency cache's store (docs/cache.md): immutable artifacts the
 * proxy fetched itself from upstream, kept on the host and shared by every
 * project.
 *
 * An entry is named by the SHA-256 of its key (the normalized upstream URL)
 * and its scope ("" for an artifact anyone may get; a project's secret scope
 * for one fetched with a secret), and holds the bytes after a fixed header
 * that records the key, the scope, the size and the SHA-256 of the bytes.
 * It sits at ROOT/v1/XX/HASH (XX: the hash's first two digits).
 *
 * The store's promises:
 *  - no partial entry is ever visible: a filler writes ROOT/v1/XX/.tmp.HASH,
 *    checks the digest, fsyncs it, renames it into place and fsyncs the
 *    folder; a filler killed half way leaves only the .tmp file, which the
 *    next filler of that key (or an eviction) removes;
 *  - one filler per key: ROOT/locks/XX/HASH is flock()ed for the whole fill,
 *    and a filler that waited for it finds the entry the other one made; the
 *    filler removes that file as it ends, still holding it, and a filler that
 *    took a lock goes on only when it is still the file at its path, so no
 *    file is left for a fill that ended (a dead filler's goes at a trim);
 *  - the size cap: after each fill, the entries least recently used (by
 *    their access time, set on every hit) are removed until the store's
 *    files fit in the cap; and the fills under way through every handle on
 *    the store (every task's proxy, every process) take at most the cap
 *    together: each handle's share is a line of ROOT/filling, counted only
 *    while its handle is open (an OFD lock on the line's byte), so a killed
 *    proxy's share comes back at once (docs/cache.md).
 */
#ifndef AIBOX_DEP_CACHE_H
#define AIBOX_DEP_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct buf;

/* The fixed header before an entry's bytes. */
#define DEP_CACHE_HEADER 4096
/*
 * Caps on a key (printable ASCII, no space) and a scope ([A-Za-z0-9._:/-],
 * starting with a letter or digit; "" for none).
 */
#define DEP_CACHE_KEY_MAX   2048
#define DEP_CACHE_SCOPE_MAX 256
/* The cap when the user sets none (docs/cache.md), and the range one may set. */
#define DEP_CACHE_DEFAULT_MAX (4ULL << 30)
#define DEP_CACHE_MIN_MAX_MIB 16ULL
#define DEP_CACHE_MAX_MAX_MIB (64ULL << 20)

struct dep_cache {
	char *root;
	uint64_t max_bytes;
	/*
	 * 0: every fill trims the store to its cap (a walk of the store).  Else
	 * a fill trims only once the fills since the last trim took this many
	 * bytes (the proxy's event loop walks the store seldom; the cap may be
	 * passed by as much).
	 */
	uint64_t trim_slack, since_trim;
	/*
	 * The bytes the fills under way through this handle hold on disk (their
	 * temporary entries, headers included), and its line of ROOT/filling
	 * that says so to every other handle on the store (share_fd, open from
	 * dep_cache_open(), before a lockdown; its line share_slot, -1 until its
	 * first fill): the handles' lines that are live together at most
	 * max_bytes, so all tasks' fills at once take no more of the disk than
	 * the cap; and a handle's own line at most what the cap leaves free
	 * beside it and the others (at most half the cap), so no one task's
	 * fills leave the others no room.
	 */
	uint64_t filling;
	int share_fd, share_slot;
	/* The user's random key for secrets' scopes (dep_cache_secret_scope()), if loaded. */
	unsigned char scope_key[32];
	int has_key;
};
/* The handles that may fill at once (lines of ROOT/filling); more are refused. */
#define DEP_CACHE_SHARE_SLOTS 1024

/*
 * Which file an entry was when it was read (its device, inode and modification
 * time): dep_cache_remove() removes that file only, never one a filler put at
 * its path since.
 */
struct dep_cache_id {
	uint64_t dev, ino;
	int64_t mtime_sec, mtime_nsec;
};

/* What an entry's header says, and where it is. */
struct dep_cache_entry {
	struct dep_cache_id id;
	int fd;        /* open for reading at DEP_CACHE_HEADER, or -1 */
	uint64_t size; /* the bytes after the header */
	char sha256[65];
	char *key, *scope;
	char *path;
	time_t atime;
};
#define DEP_CACHE_ENTRY_INIT                                                                       \
	{                                                                                          \
		.fd = -1                                                                           \
	}

void dep_cache_entry_clear(struct dep_cache_entry *e);

/* 1 when key and scope are ones the store takes (see the caps above), else 0. */
int dep_cache_key_ok(const char *key);
int dep_cache_scope_ok(const char *scope);

/*
 * The scope of what project name's tasks fetch with a credential (docs/cache.md,
 * "Scopes"): "project:NAME" into scope, or nothing when that is no scope the
 * store takes (then such artifacts are not kept).
 */
void dep_cache_project_scope(const char *name, struct buf *scope);

/*
 * The scope of what a project's task fetches with the secrets whose values
 * are values[0..n) (n > 0; in an order that does not change from task to
 * task, such as by name): base (dep_cache_project_scope()'s), "/" and 32 hex
 * digits of HMAC-SHA256 over base and the values under the user's random key
 * (dep_cache_open()'s key_path, outside the store), appended to scope;
 * nothing when that is no scope the store takes, or c has no key.  So a
 * secret rotated or removed reaches nothing its old value fetched, and the
 * store holds neither a value, nor an unkeyed hash of one, nor the key.
 */
void dep_cache_secret_scope(const struct dep_cache *c, const char *base, const char *const *values,
                            size_t n, struct buf *scope);

/*
 * Open the store at root (made with its folders, mode 0700, when missing)
 * with a cap of max_bytes; its count of the fills under way is opened now,
 * before a caller's lockdown, and so is the scope key at key_path, when not
 * NULL: made when missing (32 random bytes, 0600), from the store's own old
 * key (ROOT/scope-key, which then goes) when it has one, so that what it
 * scoped is still reached.  0, or a negative errno with the reason in err.
 */
int dep_cache_open(struct dep_cache *c, const char *root, uint64_t max_bytes, const char *key_path,
                   struct buf *err);
void dep_cache_close(struct dep_cache *c);

/*
 * The user's cap: the size in the file at path (one line like "4G", docs/cache.md),
 * DEP_CACHE_DEFAULT_MAX when there is no such file.  0, or -EINVAL with
 * "'PATH': ..." in err.
 */
int dep_cache_read_max(const char *path, uint64_t *max_bytes, struct buf *err);

/*
 * Look key up in scope.  1 with *e filled (e->fd open at the bytes) and the
 * entry's access time set to now; 0 when there is no such entry; a negative
 * errno with the reason in err when it cannot be read (-EBADMSG: not an entry
 * of this key, or cut short; the caller must not serve it).
 */
int dep_cache_lookup(struct dep_cache *c, const char *key, const char *scope,
                     struct dep_cache_entry *e, struct buf *err);

/*
 * The size of the file another filler of key in scope is writing (its
 * temporary entry, header included) into *size: 0, or a negative errno
 * (-ENOENT: none is written).  For a request waiting for that filler's lock,
 * to see whether the fill goes on.
 */
int dep_cache_fill_size(struct dep_cache *c, const char *key, const char *scope, uint64_t *size);

/* One fill under way; see dep_cache_fill_begin(). */
struct dep_cache_fill {
	struct dep_cache *c;
	int lock_fd, fd;
	int locked; /* lock_fd's flock is held, and is the file at lock_path */
	char hash[65];
	char *key, *scope;
	char *tmp_path, *path, *dir, *lock_path;
	uint64_t size;
	uint64_t held;        /* what it counts in c->filling */
	void *sha256, *check; /* EVP_MD_CTX * */
	int failed;
};
#define DEP_CACHE_FILL_INIT                                                                        \
	{                                                                                          \
		NULL, -1, -1                                                                       \
	}

/*
 * Take key's fill lock (waiting for it when wait, else -EAGAIN when another
 * filler holds it), then look again.  1: the entry is there (another filler
 * made it), *e filled as by dep_cache_lookup(), the lock released; 0: the
 * caller fills it: dep_cache_fill_write() the bytes, then
 * dep_cache_fill_commit() or dep_cache_fill_abort().  check_algo names a
 * digest (OpenSSL's name: "sha256", "sha512", "sha1") computed over the bytes
 * for dep_cache_fill_commit() to compare, or is NULL.  -EFBIG when the
 * fill's header (DEP_CACHE_HEADER bytes, counted before it is written) would
 * take the fills under way of every handle on the store past the cap, or
 * this handle's past what the cap leaves free beside them.  A
 * negative errno with the reason in err otherwise.
 */
int dep_cache_fill_begin(struct dep_cache *c, const char *key, const char *scope,
                         const char *check_algo, int wait, struct dep_cache_fill *f,
                         struct dep_cache_entry *e, struct buf *err);

/*
 * Append n bytes.  0, -EFBIG when the entry would be bigger than half the
 * cap, the fills under way through every handle on the store together
 * (struct dep_cache's filling and the other handles' lines) bigger than the
 * cap, or this handle's fills more than the cap leaves free beside them and
 * the others', or -errno.  The fill has then failed: abort it.
 */
int dep_cache_fill_write(struct dep_cache_fill *f, const void *data, size_t n, struct buf *err);

/*
 * Finish the fill: when the fill has a check_algo, its digest must equal the
 * want_len bytes at want (-EBADMSG otherwise: nothing is stored); the entry is
 * then fsynced and renamed into place, the lock released, and the store
 * trimmed to its cap.  The fill is cleared in every case.  0 or a negative
 * errno with the reason in err.
 */
int dep_cache_fill_commit(struct dep_cache_fill *f, const unsigned char *want, size_t want_len,
                          struct buf *err);

/* Drop the fill: its temporary file is removed, the lock released, nothing stored. */
void dep_cache_fill_abort(struct dep_cache_fill *f);

/*
 * Call fn for every entry (e->fd is -1, e->id the file read; e is cleared
 * after fn returns), in no
 * order.  Files not named as entries are skipped; a file named as one that is
 * not a whole entry (a named pipe or a symbolic link too, never opened to
 * wait) is given with an empty key, to be verified or cleared.  fn returns 0 to go on, or a
 * negative errno that ends the walk and is returned.
 */
int dep_cache_walk(struct dep_cache *c, int (*fn)(const struct dep_cache_entry *e, void *data),
                   void *data, struct buf *err);

/*
 * Read the entry at path whole and compare its bytes with its header's size
 * and SHA-256, and its file's name with the hash of its header's key and
 * scope: 0 when they match, -EBADMSG with the reason in err when not (a file
 * that is not a regular one, a symbolic link included, is not an entry),
 * -ENOENT with the reason when there is no file at path, or another file
 * came there as it was opened (an entry removed or filled anew since it was
 * listed: nothing wrong), or another negative errno.  *judged is the file
 * judged (for dep_cache_remove()).  Never waits on a named pipe.
 */
int dep_cache_verify(const char *path, struct dep_cache_id *judged, struct buf *err);

/*
 * Remove every entry of scope (not ""), and of each scope made from it by
 * dep_cache_secret_scope() ("SCOPE/..."): a removed project's (docs/cache.md,
 * "Scopes").  *removed (when not NULL) is the count removed.  0 or a negative
 * errno with the reason in err.
 */
int dep_cache_drop_scope(struct dep_cache *c, const char *scope, size_t *removed, struct buf *err);

/*
 * Remove the entry at path (an entry's path from a walk) when it is still
 * the file judged (read by a walk or dep_cache_verify()), under its key's
 * fill lock taken without waiting, so that no filler puts another file there
 * between the look and the removal.  0 when removed or gone; -ESTALE when
 * another file is at path now (a filler's; left); -EAGAIN when a filler of
 * its key is under way (left: that filler's entry replaces it); or -errno.
 */
int dep_cache_remove(struct dep_cache *c, const char *path, const struct dep_cache_id *judged);

/*
 * Remove the entries least recently used until the store's files take at most
 * max_bytes, and the temporary and lock files no filler holds.  *removed (when not
 * NULL) is the count removed.  0 or a negative errno with the reason in err.
 */
int dep_cache_trim(struct dep_cache *c, uint64_t max_bytes, size_t *removed, struct buf *err);

#endif
