/*
 * The dependency cache's store: see dep_cache.h and docs/cache.md.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "base/num.h"
#include "net/dep_cache.h"
#include "base/banned.h"

#define MAGIC "aibox-cache 1\n"

void dep_cache_entry_clear(struct dep_cache_entry *e)
{
	if (e->fd >= 0)
		close(e->fd);
	free(e->key);
	free(e->scope);
	free(e->path);
	*e = (struct dep_cache_entry)DEP_CACHE_ENTRY_INIT;
}

int dep_cache_key_ok(const char *key)
{
	size_t n = strlen(key);

	if (!n || n > DEP_CACHE_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (key[i] <= ' ' || key[i] > '~')
			return 0;
	return 1;
}

int dep_cache_scope_ok(const char *scope)
{
	size_t n = strlen(scope);

	/* "-" is the header's word for no scope: a scope starts with a letter or digit. */
	if (n > DEP_CACHE_SCOPE_MAX || (n && !isalnum((unsigned char)scope[0])))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-",
		            scope[i]))
			return 0;
	return 1;
}

void dep_cache_project_scope(const char *name, struct buf *scope)
{
	size_t len = scope->len;

	buf_addf(scope, "project:%s", name);
	if (!name[0] || !dep_cache_scope_ok(scope->buf + len))
		buf_setlen(scope, len);
}

static int mkdir_p(const char *path, struct buf *err)
{
	struct buf b = BUF_INIT;
	int ret = 0;

	buf_addstr(&b, path);
	for (size_t i = 1; i <= b.len; i++) {
		if (i < b.len && b.buf[i] != '/')
			continue;
		b.buf[i] = '\0';
		if (mkdir(b.buf, 0700) < 0 && errno != EEXIST) {
			ret = -errno;
			if (err)
				buf_addf(err, "cannot make '%s': %s", b.buf, strerror(errno));
			break;
		}
		if (i < b.len)
			b.buf[i] = '/';
	}
	buf_release(&b);
	return ret;
}

/*
 * The fills under way of every handle on the store (docs/cache.md, "Where it
 * is, and its size"): ROOT/filling holds a line a handle, "%020llu\n", the
 * bytes its fills hold on disk.  A handle that took line i holds an OFD
 * write lock on byte SHARE_LINE_LOCK + i for as long as its fd is open; a
 * line whose byte no one holds is a handle's that closed or died, counts for
 * nothing, and is the next claimer's.  Every read and write of the file is
 * under the OFD write lock on byte SHARE_MUTEX.  OFD locks throughout (no
 * flock(2)): NFS emulates flock with byte-range locks, which would meet them.
 */
#define SHARE_LINE      21
#define SHARE_MUTEX     0
#define SHARE_LINE_LOCK 1

static int open_share(const char *path, struct buf *err)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);

	if (fd < 0) {
		fd = -errno;
		if (err)
			buf_addf(err, "cannot open '%s': %s", path, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		if (err)
			buf_addf(err, "'%s' is not a regular file", path);
		return -EINVAL;
	}
	return fd;
}

/* F_OFD_SETLK(W) (set) or F_OFD_GETLK of byte at: -errno, or 0; get: 1 when another holds it. */
static int share_lock(int fd, int cmd, short type, off_t at)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};

	while (fcntl(fd, cmd, &fl) < 0)
		if (errno != EINTR)
			return -errno;
	return cmd == F_OFD_GETLK ? fl.l_type != F_UNLCK : 0;
}

/* Line i's bytes; UINT64_MAX when it is not a line this file holds. */
static uint64_t share_line(const char *p)
{
	uint64_t v = 0;

	if (p[SHARE_LINE - 1] != '\n')
		return UINT64_MAX;
	for (int i = 0; i < SHARE_LINE - 1; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return UINT64_MAX;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	return v;
}

/*
 * Under the mutex: claim this handle's line when it has none, and set it to
 * want.  When check and want is more than the handle's filling, refused (the
 * line unchanged): -EFBIG if the live lines of the others and want together
 * pass the cap; -EDQUOT if want is more than the cap leaves free beside the
 * others and want (one handle's fills hold at most half of what the others
 * leave: docs/cache.md, "Where it is, and its size").  0 or a negative errno.
 */
static int share_set(struct dep_cache *c, uint64_t want, int check)
{
	char b[DEP_CACHE_SHARE_SLOTS * SHARE_LINE];
	char line[SHARE_LINE + 1];
	uint64_t others = 0;
	ssize_t n;
	int lines, ret;

	if ((ret = share_lock(c->share_fd, F_OFD_SETLKW, F_WRLCK, SHARE_MUTEX)) < 0)
		return ret;
	do
		n = pread(c->share_fd, b, sizeof(b), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	lines = (int)(n / SHARE_LINE);
	for (int i = 0; c->share_slot < 0 && i <= lines && i < DEP_CACHE_SHARE_SLOTS; i++)
		if (share_lock(c->share_fd, F_OFD_SETLK, F_WRLCK, SHARE_LINE_LOCK + i) == 0)
			c->share_slot = i;
	if (c->share_slot < 0) {
		ret = -EFBIG; /* more handles fill at once than the file counts */
		goto out;
	}
	for (int i = 0; i < lines; i++) {
		uint64_t v = share_line(b + (size_t)i * SHARE_LINE);

		if (i == c->share_slot || !v)
			continue;
		if ((ret = share_lock(c->share_fd, F_OFD_GETLK, F_WRLCK, SHARE_LINE_LOCK + i)) < 0)
			goto out;
		if (ret)
			others = v > UINT64_MAX - others ? UINT64_MAX : others + v;
	}
	ret = 0;
	if (check && want > c->filling && (others > c->max_bytes || want > c->max_bytes - others)) {
		ret = -EFBIG;
		goto out;
	}
	if (check && want > c->filling && want > c->max_bytes - others - want) {
		ret = -EDQUOT;
		goto out;
	}
	snprintf(line, sizeof(line), "%020llu\n", (unsigned long long)want);
	do
		n = pwrite(c->share_fd, line, SHARE_LINE, (off_t)c->share_slot * SHARE_LINE);
	while (n < 0 && errno == EINTR);
	if (n != SHARE_LINE)
		ret = n < 0 ? -errno : -EIO;
out:
	share_lock(c->share_fd, F_OFD_SETLK, F_UNLCK, SHARE_MUTEX);
	return ret;
}

/*
 * Count n more bytes of this handle's fills under way: 0, -EFBIG when the
 * fills of every handle on the store would then pass the cap, or this
 * handle's would hold more than they leave free (share_set()), or -errno;
 * the reason in err.
 */
static int share_grow(struct dep_cache *c, uint64_t n, struct buf *err)
{
	int ret = share_set(c, c->filling > UINT64_MAX - n ? UINT64_MAX : c->filling + n, 1);

	if (ret == -EFBIG)
		return buf_refuse(err, -EFBIG,
		                  "the fills under way would take more than the cache's cap");
	if (ret == -EDQUOT)
		return buf_refuse(err, -EFBIG,
		                  "this process's fills under way would hold more of the cache's "
		                  "cap than they leave free");
	if (ret < 0 && err)
		buf_addf(err, "cannot count the fill in '%s/filling': %s", c->root, strerror(-ret));
	return ret;
}

/* Read the 32 bytes of the scope key at path: 1, 0 when there is none, or -errno. */
static int scope_key_read(const char *path, unsigned char key[32], struct buf *err)
{
	unsigned char b[33];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		fd = -errno;
		if (err)
			buf_addf(err, "cannot open '%s': %s", path, strerror(-fd));
		return fd;
	}
	do
		n = fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ? -2 : pread(fd, b, sizeof(b), 0);
	while (n == -1 && errno == EINTR);
	close(fd);
	if (n != 32) {
		OPENSSL_cleanse(b, sizeof(b));
		if (err)
			buf_addf(err, "'%s' is not the cache's scope key (32 bytes)", path);
		return -EINVAL;
	}
	memcpy(key, b, 32);
	OPENSSL_cleanse(b, sizeof(b));
	return 1;
}

/*
 * The scope key at path, made when there is none: from the store's own old
 * key (ROOT/scope-key, removed once moved) when it has one, else 32 random
 * bytes; written whole and synced under a name of its own, then linked into
 * place (a second maker's link fails, and both read the first's).  0 or a
 * negative errno.
 */
static int scope_key_load(const char *root, const char *path, unsigned char key[32],
                          struct buf *err)
{
	struct buf old = BUF_INIT, tmp = BUF_INIT;
	unsigned char r[32];
	ssize_t got;
	int ret, fd, moved;

	buf_addf(&old, "%s/scope-key", root);
	ret = scope_key_read(path, key, err);
	if (ret)
		goto out;
	ret = scope_key_read(old.buf, r, err);
	if (ret < 0)
		goto out;
	moved = ret;
	while (!moved && (got = getrandom(r, sizeof(r), 0)) != (ssize_t)sizeof(r)) {
		if (got < 0 && errno == EINTR)
			continue;
		ret = got < 0 ? -errno : -EIO;
		if (err)
			buf_addf(err, "cannot make the cache's scope key: %s", strerror(-ret));
		goto out;
	}
	/* Named by the process alone (no byte of the key); one left by a dead one goes. */
	buf_addf(&tmp, "%s.%ld", path, (long)getpid());
	unlink(tmp.buf);
	fd = open(tmp.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		if (err)
			buf_addf(err, "cannot make '%s': %s", tmp.buf, strerror(errno));
		goto out;
	}
	ret = write(fd, r, sizeof(r)) == (ssize_t)sizeof(r) && fsync(fd) == 0 ? 0
	      : errno                                                         ? -errno
	                                                                      : -ENOSPC;
	close(fd);
	if (!ret && link(tmp.buf, path) < 0 && errno != EEXIST)
		ret = -errno;
	unlink(tmp.buf);
	if (ret < 0) {
		if (err)
			buf_addf(err, "cannot make '%s': %s", path, strerror(-ret));
		goto out;
	}
	ret = scope_key_read(path, key, err);
	if (ret == 0) {
		ret = -ENOENT;
		if (err)
			buf_addf(err, "cannot read '%s': %s", path, strerror(ENOENT));
	}
out:
	/* Moved out, or one no scope uses: a copy of the store holds no key. */
	if (ret > 0)
		unlink(old.buf);
	OPENSSL_cleanse(r, sizeof(r));
	buf_release(&old);
	buf_release(&tmp);
	return ret < 0 ? ret : 0;
}

void dep_cache_secret_scope(const struct dep_cache *c, const char *base, const char *const *values,
                            size_t n, struct buf *scope)
{
	struct buf msg = BUF_INIT;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char hex[33];
	size_t at = scope->len;

	if (!n)
		BUG("dep_cache_secret_scope: no secret");
	if (!c->has_key)
		return; /* no key to scope them with: not kept */
	/* The project too: two projects with one secret show no common hash. */
	buf_addf(&msg, "aibox-cache-scope 1\n%s\n", base);
	for (size_t i = 0; i < n; i++)
		buf_addf(&msg, "%zu:%s\n", strlen(values[i]), values[i]);
	if (!HMAC(EVP_sha256(), c->scope_key, sizeof(c->scope_key), (unsigned char *)msg.buf,
	          msg.len, md, &len))
		die_oom();
	OPENSSL_cleanse(msg.buf, msg.len);
	buf_release(&msg);
	hex_encode(hex, md, 16);
	buf_addf(scope, "%s/%s", base, hex);
	if (!base[0] || !dep_cache_scope_ok(scope->buf + at))
		buf_setlen(scope, at);
}

int dep_cache_open(struct dep_cache *c, const char *root, uint64_t max_bytes, const char *key_path,
                   struct buf *err)
{
	struct buf b = BUF_INIT;
	int ret;

	c->root = NULL;
	c->share_fd = -1;
	if (!root[0])
		return buf_refuse(err, -EINVAL, "the cache folder is empty");
	buf_addf(&b, "%s/v1", root);
	ret = mkdir_p(b.buf, err);
	if (!ret) {
		buf_reset(&b);
		buf_addf(&b, "%s/locks", root);
		ret = mkdir_p(b.buf, err);
	}
	if (!ret) {
		buf_reset(&b);
		buf_addf(&b, "%s/filling", root);
		c->share_fd = open_share(b.buf, err);
		if (c->share_fd < 0)
			ret = c->share_fd;
	}
	c->has_key = 0;
	if (!ret && key_path && (ret = scope_key_load(root, key_path, c->scope_key, err)) < 0) {
		close(c->share_fd);
		c->share_fd = -1;
	}
	buf_release(&b);
	if (ret < 0)
		return ret;
	c->root = xstrdup(root);
	c->has_key = key_path != NULL;
	c->max_bytes = max_bytes;
	c->trim_slack = c->since_trim = c->filling = 0;
	c->share_slot = -1;
	return 0;
}

void dep_cache_close(struct dep_cache *c)
{
	free(c->root);
	c->root = NULL;
	if (c->share_fd >= 0)
		close(c->share_fd); /* its line's lock goes: the line counts no more */
	c->share_fd = -1;
	OPENSSL_cleanse(c->scope_key, sizeof(c->scope_key));
	c->has_key = 0;
}

int dep_cache_read_max(const char *path, uint64_t *max_bytes, struct buf *err)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	uint64_t mib;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		if (errno == ENOENT) {
			*max_bytes = DEP_CACHE_DEFAULT_MAX;
			return 0;
		}
		ret = -errno;
		if (err)
			buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return ret;
	}
	ret = buf_read_fd(&b, fd, 64);
	close(fd);
	if (ret == -EFBIG) {
		if (err)
			buf_addf(err, "'%s': more than one short line", path);
		ret = -EINVAL;
		goto out;
	}
	if (ret < 0) {
		if (err)
			buf_addf(err, "cannot read '%s': %s", path, strerror(-ret));
		goto out;
	}
	buf_rtrim(&b);
	ret = parse_size_mib(b.buf, DEP_CACHE_MIN_MAX_MIB, DEP_CACHE_MAX_MAX_MIB, &mib, &why);
	if (ret < 0) {
		if (err)
			buf_addf(err, "'%s': %s", path, why.buf);
		goto out;
	}
	*max_bytes = mib << 20;
	ret = 0;
out:
	buf_release(&b);
	buf_release(&why);
	return ret;
}

static void key_hash(const char *key, const char *scope, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die_oom();
	EVP_DigestUpdate(ctx, "aibox-cache-key 1\n", 18);
	EVP_DigestUpdate(ctx, scope, strlen(scope));
	EVP_DigestUpdate(ctx, "\n", 1);
	EVP_DigestUpdate(ctx, key, strlen(key));
	EVP_DigestFinal_ex(ctx, md, &len);
	EVP_MD_CTX_free(ctx);
	hex_encode(out, md, 32);
}

/* The value of the header line "NAME VALUE\n" at *p, moving *p past it; NULL if not. */
static char *header_field(char **p, const char *name)
{
	size_t n = strlen(name);
	char *nl;

	if (strncmp(*p, name, n) || (*p)[n] != ' ')
		return NULL;
	nl = strchr(*p + n + 1, '\n');
	if (!nl)
		return NULL;
	*nl = '\0';
	n = (size_t)(nl - (*p + n + 1));
	nl = *p + strlen(name) + 1;
	*p += strlen(name) + 1 + n + 1;
	return nl;
}

/*
 * Open the entry at path (relative to dirfd) for reading: never following a
 * symbolic link, and never waiting on a file that is not a regular one (a
 * named pipe's open or read would block).  The fd, -ENOENT when there is no
 * file, -EBADMSG (reason in err) when it is not a regular file, or -errno.
 */
static int open_entry(int dirfd, const char *name, const char *path, struct buf *err)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), ret;

	if (fd < 0) {
		ret = errno == ELOOP ? -EBADMSG : -errno;
		if (ret == -EBADMSG && err)
			buf_addf(err, "'%s' is not a cache entry", path);
		else if (ret != -ENOENT && err)
			buf_addf(err, "cannot open '%s': %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		close(fd);
		if (err)
			buf_addf(err, "'%s' is not a cache entry", path);
		return -EBADMSG;
	}
	return fd;
}

static void file_id(const struct stat *st, struct dep_cache_id *id)
{
	*id = (struct dep_cache_id){(uint64_t)st->st_dev, (uint64_t)st->st_ino,
	                            (int64_t)st->st_mtim.tv_sec, (int64_t)st->st_mtim.tv_nsec};
}

static int same_file(const struct dep_cache_id *a, const struct dep_cache_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->mtime_sec == b->mtime_sec &&
	       a->mtime_nsec == b->mtime_nsec;
}

/*
 * Read and check the header of the entry open at fd (path for messages), and
 * its file's size: 0 with e's fields set, -EBADMSG with the reason, or -errno.
 */
static int read_header(int fd, const char *path, struct dep_cache_entry *e, struct buf *err)
{
	char hdr[DEP_CACHE_HEADER + 1], *p = hdr, *size, *sha, *scope, *key;
	struct stat st;
	ssize_t n;
	uint64_t sz;

	n = pread(fd, hdr, DEP_CACHE_HEADER, 0);
	if (n < 0) {
		if (err)
			buf_addf(err, "cannot read '%s': %s", path, strerror(errno));
		return -errno;
	}
	hdr[n] = '\0';
	if (fstat(fd, &st) < 0) {
		if (err)
			buf_addf(err, "cannot stat '%s': %s", path, strerror(errno));
		return -errno;
	}
	file_id(&st, &e->id);
	if (n != DEP_CACHE_HEADER || strncmp(hdr, MAGIC, strlen(MAGIC)))
		goto bad;
	p += strlen(MAGIC);
	size = header_field(&p, "size");
	sha = size ? header_field(&p, "sha256") : NULL;
	scope = sha ? header_field(&p, "scope") : NULL;
	key = scope ? header_field(&p, "key") : NULL;
	if (!key || *p || parse_size(size, 0, UINT64_MAX - DEP_CACHE_HEADER, &sz) < 0 ||
	    strlen(sha) != 64 || !hex_is_lower(sha, 64) || !dep_cache_key_ok(key) ||
	    (strcmp(scope, "-") && !dep_cache_scope_ok(scope)))
		goto bad;
	if ((uint64_t)st.st_size != sz + DEP_CACHE_HEADER) {
		if (err)
			buf_addf(err,
			         "'%s' is cut short or too long: %llu bytes, its header says %llu",
			         path, (unsigned long long)(st.st_size - DEP_CACHE_HEADER),
			         (unsigned long long)sz);
		return -EBADMSG;
	}
	e->size = sz;
	memcpy(e->sha256, sha, 65);
	e->key = xstrdup(key);
	e->scope = xstrdup(strcmp(scope, "-") ? scope : "");
	e->atime = st.st_atim.tv_sec;
	return 0;
bad:
	if (err)
		buf_addf(err, "'%s' is not a cache entry", path);
	return -EBADMSG;
}

static void entry_path(const struct dep_cache *c, const char *hash, const char *sub,
                       const char *prefix, struct buf *out)
{
	buf_addf(out, "%s/%s/%.2s/%s%s", c->root, sub, hash, prefix, hash);
}

int dep_cache_lookup(struct dep_cache *c, const char *key, const char *scope,
                     struct dep_cache_entry *e, struct buf *err)
{
	struct buf path = BUF_INIT;
	char hash[65];
	int fd, ret;

	if (!dep_cache_key_ok(key) || !dep_cache_scope_ok(scope))
		BUG("dep_cache_lookup: a key or scope the store does not take");
	key_hash(key, scope, hash);
	entry_path(c, hash, "v1", "", &path);
	fd = open_entry(AT_FDCWD, path.buf, path.buf, err);
	if (fd < 0) {
		buf_release(&path);
		return fd == -ENOENT ? 0 : fd;
	}
	ret = read_header(fd, path.buf, e, err);
	if (!ret && (strcmp(e->key, key) || strcmp(e->scope, scope))) {
		if (err)
			buf_addf(err, "'%s' holds another key", path.buf);
		ret = -EBADMSG;
	}
	if (!ret && lseek(fd, DEP_CACHE_HEADER, SEEK_SET) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		dep_cache_entry_clear(e);
		buf_release(&path);
		return ret;
	}
	/* The access time eviction goes by, whatever the mount's atime rule. */
	futimens(fd, (struct timespec[2]){{0, UTIME_NOW}, {0, UTIME_OMIT}});
	e->fd = fd;
	e->path = buf_detach(&path, NULL);
	return 1;
}

int dep_cache_fill_size(struct dep_cache *c, const char *key, const char *scope, uint64_t *size)
{
	struct buf path = BUF_INIT;
	struct stat st;
	char hash[65];
	int ret = 0;

	key_hash(key, scope, hash);
	entry_path(c, hash, "v1", ".tmp.", &path);
	if (lstat(path.buf, &st) < 0)
		ret = -errno;
	else
		*size = (uint64_t)st.st_size;
	buf_release(&path);
	return ret;
}

static void fill_clear(struct dep_cache_fill *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->held) {
		f->c->filling -= f->held;
		share_set(f->c, f->c->filling, 0); /* lowered: never refused */
	}
	/* Held, the lock file goes: a filler that opened it finds it unlinked (lock_taken()). */
	if (f->locked)
		unlink(f->lock_path);
	if (f->lock_fd >= 0)
		close(f->lock_fd); /* releases the flock */
	EVP_MD_CTX_free(f->sha256);
	EVP_MD_CTX_free(f->check);
	free(f->key);
	free(f->scope);
	free(f->tmp_path);
	free(f->path);
	free(f->dir);
	free(f->lock_path);
	*f = (struct dep_cache_fill)DEP_CACHE_FILL_INIT;
}

/*
 * Whether the lock fd, whose flock the caller holds, is still the file at
 * path: its last holder removes it (fill_clear(), unlock_dead()) while it
 * holds it, so one opened before that is another file than the path's now.
 */
static int lock_taken(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && a.st_nlink > 0 && lstat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int dep_cache_fill_begin(struct dep_cache *c, const char *key, const char *scope,
                         const char *check_algo, int wait, struct dep_cache_fill *f,
                         struct dep_cache_entry *e, struct buf *err)
{
	struct buf b = BUF_INIT;
	const EVP_MD *md = NULL;
	char zeros[DEP_CACHE_HEADER] = {0};
	int ret;

	if (!dep_cache_key_ok(key) || !dep_cache_scope_ok(scope))
		BUG("dep_cache_fill_begin: a key or scope the store does not take");
	if (check_algo && !(md = EVP_get_digestbyname(check_algo)))
		BUG("dep_cache_fill_begin: no digest '%s'", check_algo);
	*f = (struct dep_cache_fill)DEP_CACHE_FILL_INIT;
	f->c = c;
	key_hash(key, scope, f->hash);
	f->key = xstrdup(key);
	f->scope = xstrdup(scope);

	buf_addf(&b, "%s/locks/%.2s", c->root, f->hash);
	ret = mkdir_p(b.buf, err);
	if (ret < 0)
		goto fail;
	buf_reset(&b);
	entry_path(c, f->hash, "locks", "", &b);
	f->lock_path = buf_detach(&b, NULL);
	for (;;) {
		f->lock_fd = open(f->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (f->lock_fd < 0) {
			ret = -errno;
			if (err)
				buf_addf(err, "cannot open '%s': %s", f->lock_path,
				         strerror(errno));
			goto fail;
		}
		if (flock(f->lock_fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
			if (errno == EINTR) {
				close(f->lock_fd);
				continue;
			}
			ret = errno == EWOULDBLOCK ? -EAGAIN : -errno;
			if (ret != -EAGAIN && err)
				buf_addf(err, "cannot lock '%s': %s", f->lock_path,
				         strerror(errno));
			goto fail;
		}
		if (lock_taken(f->lock_fd, f->lock_path))
			break;
		/* Its holder removed it as we waited: the lock is the path's new file. */
		close(f->lock_fd);
	}
	f->locked = 1;
	/* An entry that cannot be read (cut short, another key) is filled anew. */
	ret = dep_cache_lookup(c, key, scope, e, NULL);
	if (ret > 0) {
		fill_clear(f);
		buf_release(&b);
		return ret;
	}

	buf_reset(&b);
	buf_addf(&b, "%s/v1/%.2s", c->root, f->hash);
	ret = mkdir_p(b.buf, err);
	if (ret < 0)
		goto fail;
	f->dir = buf_detach(&b, NULL);
	entry_path(c, f->hash, "v1", "", &b);
	f->path = buf_detach(&b, NULL);
	/* The header's room counts toward the fills' bytes on disk as the rest does,
	 * before it is written (upstream may take its time to answer). */
	if ((ret = share_grow(c, sizeof(zeros), err)) < 0)
		goto fail;
	f->held = sizeof(zeros);
	c->filling += f->held;
	/* With the lock held, a .tmp file of this key is a dead filler's: O_TRUNC. */
	entry_path(c, f->hash, "v1", ".tmp.", &b);
	f->tmp_path = buf_detach(&b, NULL);
	f->fd = open(f->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (f->fd < 0) {
		ret = -errno;
		if (err)
			buf_addf(err, "cannot make '%s': %s", f->tmp_path, strerror(errno));
		goto fail;
	}
	if (write(f->fd, zeros, sizeof(zeros)) != (ssize_t)sizeof(zeros)) {
		ret = errno ? -errno : -ENOSPC;
		if (err)
			buf_addf(err, "cannot write '%s': %s", f->tmp_path, strerror(-ret));
		goto fail;
	}
	f->sha256 = EVP_MD_CTX_new();
	if (!f->sha256 || !EVP_DigestInit_ex(f->sha256, EVP_sha256(), NULL))
		die_oom();
	if (md) {
		f->check = EVP_MD_CTX_new();
		if (!f->check || !EVP_DigestInit_ex(f->check, md, NULL))
			die_oom();
	}
	return 0;
fail:
	buf_release(&b);
	dep_cache_fill_abort(f);
	return ret;
}

int dep_cache_fill_write(struct dep_cache_fill *f, const void *data, size_t n, struct buf *err)
{
	const char *p = data;
	size_t left = n;
	int ret;

	if (f->fd < 0)
		BUG("dep_cache_fill_write: no fill under way");
	if (f->failed)
		return -EIO;
	/* No one handle's fills hold more than half the cap (share_set()). */
	if (n > f->c->max_bytes / 2 || f->size + DEP_CACHE_HEADER > f->c->max_bytes / 2 - n) {
		f->failed = 1;
		return buf_refuse(err, -EFBIG, "the artifact is bigger than half the cache's cap");
	}
	if ((ret = share_grow(f->c, n, err)) < 0) {
		f->failed = 1;
		return ret;
	}
	while (left) {
		ssize_t w = write(f->fd, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ret = w < 0 ? -errno : -ENOSPC;
			f->failed = 1;
			if (err)
				buf_addf(err, "cannot write '%s': %s", f->tmp_path, strerror(-ret));
			return ret;
		}
		p += w;
		left -= (size_t)w;
	}
	EVP_DigestUpdate(f->sha256, data, n);
	if (f->check)
		EVP_DigestUpdate(f->check, data, n);
	f->size += n;
	f->held += n;
	f->c->filling += n;
	return 0;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int dep_cache_fill_commit(struct dep_cache_fill *f, const unsigned char *want, size_t want_len,
                          struct buf *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char sha[65];
	struct buf hdr = BUF_INIT;
	struct dep_cache *c = f->c;
	int ret = 0;

	if (f->fd < 0)
		BUG("dep_cache_fill_commit: no fill under way");
	if (f->failed) {
		ret = buf_refuse(err, -EIO, "the fill failed before its end");
		goto fail;
	}
	if (f->check) {
		EVP_DigestFinal_ex(f->check, md, &len);
		if (len != want_len || CRYPTO_memcmp(md, want, len)) {
			ret = buf_refuse(err, -EBADMSG, "the artifact's digest does not match");
			goto fail;
		}
	}
	EVP_DigestFinal_ex(f->sha256, md, &len);
	hex_encode(sha, md, 32);
	buf_addf(&hdr, MAGIC "size %llu\nsha256 %s\nscope %s\nkey %s\n",
	         (unsigned long long)f->size, sha, f->scope[0] ? f->scope : "-", f->key);
	if (hdr.len >= DEP_CACHE_HEADER)
		BUG("dep_cache_fill_commit: a header over %d bytes", DEP_CACHE_HEADER);
	if (pwrite(f->fd, hdr.buf, hdr.len, 0) != (ssize_t)hdr.len || fsync(f->fd) < 0) {
		ret = errno ? -errno : -ENOSPC;
		if (err)
			buf_addf(err, "cannot write '%s': %s", f->tmp_path, strerror(-ret));
		goto fail;
	}
	if (rename(f->tmp_path, f->path) < 0) {
		ret = -errno;
		if (err)
			buf_addf(err, "cannot rename '%s': %s", f->tmp_path, strerror(errno));
		goto fail;
	}
	sync_dir(f->dir);
	c->since_trim += f->size;
	buf_release(&hdr);
	fill_clear(f);
	if (c->trim_slack && c->since_trim < c->trim_slack)
		return 0;
	c->since_trim = 0;
	return dep_cache_trim(c, c->max_bytes, NULL, err);
fail:
	buf_release(&hdr);
	dep_cache_fill_abort(f);
	return ret;
}

void dep_cache_fill_abort(struct dep_cache_fill *f)
{
	if (f->tmp_path && f->fd >= 0)
		unlink(f->tmp_path);
	fill_clear(f);
}

/* Call fn(dirfd, name, path, data) for each file of ROOT/SUB/XX/ (SUB: v1 or locks). */
static int walk_files(struct dep_cache *c, const char *subdir,
                      int (*fn)(int dirfd, const char *name, const char *path, void *data),
                      void *data, struct buf *err)
{
	struct buf b = BUF_INIT;
	DIR *top, *sub;
	struct dirent *d, *s;
	int ret = 0;

	buf_addf(&b, "%s/%s", c->root, subdir);
	top = opendir(b.buf);
	if (!top) {
		ret = -errno;
		if (err)
			buf_addf(err, "cannot open '%s': %s", b.buf, strerror(errno));
		buf_release(&b);
		return ret;
	}
	while (!ret && (d = readdir(top))) {
		if (strlen(d->d_name) != 2 || !hex_is_lower(d->d_name, 2))
			continue;
		buf_reset(&b);
		buf_addf(&b, "%s/%s/%s", c->root, subdir, d->d_name);
		sub = opendir(b.buf);
		if (!sub)
			continue;
		while (!ret && (s = readdir(sub))) {
			size_t len = b.len;

			if (!strcmp(s->d_name, ".") || !strcmp(s->d_name, ".."))
				continue;
			buf_addf(&b, "/%s", s->d_name);
			ret = fn(dirfd(sub), s->d_name, b.buf, data);
			buf_setlen(&b, len);
		}
		closedir(sub);
	}
	closedir(top);
	buf_release(&b);
	return ret;
}

struct walk_ctx {
	int (*fn)(const struct dep_cache_entry *e, void *data);
	void *data;
};

static int walk_one(int dirfd, const char *name, const char *path, void *data)
{
	struct walk_ctx *w = data;
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	struct stat st;
	int fd, ret;

	if (strlen(name) != 64 || !hex_is_lower(name, 64))
		return 0;
	fd = open_entry(dirfd, name, path, NULL);
	if (fd == -ENOENT)
		return 0; /* removed meanwhile */
	ret = fd < 0 ? fd : read_header(fd, path, &e, NULL);
	if (fd >= 0 && ret < 0 && fstat(fd, &st) == 0)
		file_id(&st, &e.id); /* read_header() failed before its stat */
	else if (fd < 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		file_id(&st, &e.id); /* not opened: a symbolic link */
	if (fd >= 0)
		close(fd);
	if (ret < 0) {
		/* A file that is not a whole entry is still listed, to be verified or cleared. */
		e.key = xstrdup("");
		e.scope = xstrdup("");
		memset(e.sha256, 0, sizeof(e.sha256));
	}
	e.path = xstrdup(path);
	ret = w->fn(&e, w->data);
	dep_cache_entry_clear(&e);
	return ret;
}

int dep_cache_walk(struct dep_cache *c, int (*fn)(const struct dep_cache_entry *e, void *data),
                   void *data, struct buf *err)
{
	struct walk_ctx w = {fn, data};

	return walk_files(c, "v1", walk_one, &w, err);
}

int dep_cache_verify(const char *path, struct dep_cache_id *judged, struct buf *err)
{
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	unsigned char md[32];
	unsigned int len = 0;
	char sha[65], chunk[65536];
	const char *base;
	EVP_MD_CTX *ctx;
	struct stat st;
	uint64_t seen = 0;
	int fd, ret;

	/* What is judged is the file at path now: the one opened, or, not opened, this one. */
	if (lstat(path, &st) < 0) {
		ret = -errno;
		if (ret == -ENOENT && err)
			buf_addf(err, "'%s' was removed before it was read", path);
		else if (err)
			buf_addf(err, "cannot stat '%s': %s", path, strerror(errno));
		return ret;
	}
	file_id(&st, judged);
	fd = open_entry(AT_FDCWD, path, path, err);
	if (fd == -ENOENT && err)
		buf_addf(err, "'%s' was removed before it was read", path);
	if (fd >= 0 && (fstat(fd, &st) < 0 || (file_id(&st, &e.id), !same_file(&e.id, judged)))) {
		close(fd);
		fd = -ENOENT;
		if (err)
			buf_addf(err, "'%s' was filled anew before it was read", path);
	}
	if (fd < 0)
		return fd;
	ret = read_header(fd, path, &e, err);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	/* A lookup reads it only as the entry its name is the hash of: one never served. */
	key_hash(e.key, e.scope, sha);
	base = strrchr(path, '/');
	if (strcmp(base ? base + 1 : path, sha)) {
		if (err)
			buf_addf(err,
			         "'%s': its header names another key or scope than its file's name",
			         path);
		close(fd);
		dep_cache_entry_clear(&e);
		return -EBADMSG;
	}
	ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die_oom();
	for (;;) {
		ssize_t n = pread(fd, chunk, sizeof(chunk), (off_t)(DEP_CACHE_HEADER + seen));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			if (err)
				buf_addf(err, "cannot read '%s': %s", path, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		EVP_DigestUpdate(ctx, chunk, (size_t)n);
		seen += (uint64_t)n;
	}
	EVP_DigestFinal_ex(ctx, md, &len);
	hex_encode(sha, md, 32);
	if (seen != e.size || strcmp(sha, e.sha256)) {
		if (err)
			buf_addf(err, "'%s': its bytes do not match its SHA-256", path);
		ret = -EBADMSG;
	}
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	dep_cache_entry_clear(&e);
	return ret;
}

int dep_cache_remove(struct dep_cache *c, const char *path, const struct dep_cache_id *judged)
{
	struct buf lock = BUF_INIT;
	const char *name = strrchr(path, '/');
	struct dep_cache_id now;
	struct stat st;
	int fd = -1, ret;

	name = name ? name + 1 : path;
	if (strlen(name) != 64 || !hex_is_lower(name, 64))
		BUG("dep_cache_remove: '%s' is not named as an entry", path);
	/* The lock a filler of its key holds as it renames its entry into place. */
	buf_addf(&lock, "%s/locks/%.2s", c->root, name);
	if ((ret = mkdir_p(lock.buf, NULL)) < 0)
		goto out;
	buf_reset(&lock);
	entry_path(c, name, "locks", "", &lock);
	for (;;) {
		fd = open(lock.buf, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			ret = -errno;
			goto out;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EAGAIN : -errno;
			close(fd);
			fd = -1;
			goto out;
		}
		if (lock_taken(fd, lock.buf))
			break;
		close(fd);
	}
	if (lstat(path, &st) < 0) {
		ret = errno == ENOENT ? 0 : -errno;
	} else {
		file_id(&st, &now);
		ret = !same_file(&now, judged)              ? -ESTALE
		      : unlink(path) < 0 && errno != ENOENT ? -errno
		                                            : 0;
	}
	unlink(lock.buf); /* held: as fill_clear() */
	close(fd);
out:
	buf_release(&lock);
	return ret;
}

struct drop_ctx {
	struct dep_cache *c;
	const char *scope;
	size_t removed;
};

static int drop_one(const struct dep_cache_entry *e, void *data)
{
	struct drop_ctx *d = data;

	size_t n = strlen(d->scope);

	/* The scope itself, or one dep_cache_secret_scope() made from it. */
	if (!strncmp(e->scope, d->scope, n) && (!e->scope[n] || e->scope[n] == '/') &&
	    !dep_cache_remove(d->c, e->path, &e->id))
		d->removed++;
	return 0;
}

int dep_cache_drop_scope(struct dep_cache *c, const char *scope, size_t *removed, struct buf *err)
{
	struct drop_ctx d = {c, scope, 0};
	int ret;

	if (!scope[0])
		BUG("dep_cache_drop_scope: no scope");
	ret = dep_cache_walk(c, drop_one, &d, err);
	if (removed)
		*removed = d.removed;
	return ret;
}

struct trim_file {
	char *path;
	struct dep_cache_id id;
	time_t atime;
	uint64_t size;
};

struct trim_ctx {
	struct dep_cache *c;
	struct trim_file *v;
	size_t nr, alloc;
	uint64_t total;
	size_t removed;
};

/*
 * The lock file at path when no filler holds it (a dead filler's, left
 * behind): removed while held, as fill_clear() does.
 */
static void unlock_dead(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && lock_taken(fd, path))
		unlink(path);
	close(fd);
}

/* A .tmp file whose key's lock is free belongs to a dead filler: remove it. */
static void drop_dead_tmp(struct dep_cache *c, const char *name, const char *path)
{
	struct buf b = BUF_INIT;
	const char *hash = name + 5;
	int fd;

	if (strlen(hash) != 64 || !hex_is_lower(hash, 64))
		return;
	entry_path(c, hash, "locks", "", &b);
	fd = open(b.buf, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) == 0) {
		unlink(path);
		if (fd >= 0 && lock_taken(fd, b.buf))
			unlink(b.buf);
	}
	if (fd >= 0)
		close(fd);
	buf_release(&b);
}

static int trim_one(int dirfd, const char *name, const char *path, void *data)
{
	struct trim_ctx *t = data;
	struct stat st;

	if (!strncmp(name, ".tmp.", 5)) {
		drop_dead_tmp(t->c, name, path);
		return 0;
	}
	if (strlen(name) != 64 || !hex_is_lower(name, 64) ||
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (t->nr == t->alloc) {
		t->alloc = t->alloc ? 2 * t->alloc : 64;
		t->v = realloc(t->v, t->alloc * sizeof(*t->v));
		if (!t->v)
			die_oom();
	}
	t->v[t->nr] =
	    (struct trim_file){xstrdup(path), {0}, st.st_atim.tv_sec, (uint64_t)st.st_size};
	file_id(&st, &t->v[t->nr++].id);
	t->total += (uint64_t)st.st_size;
	return 0;
}

/* A lock file no filler holds (a dead one's): removed. */
static int unlock_one(int dirfd, const char *name, const char *path, void *data)
{
	(void)dirfd;
	(void)data;
	if (strlen(name) == 64 && hex_is_lower(name, 64))
		unlock_dead(path);
	return 0;
}

static int by_atime(const void *a, const void *b)
{
	const struct trim_file *x = a, *y = b;

	return (x->atime > y->atime) - (x->atime < y->atime);
}

int dep_cache_trim(struct dep_cache *c, uint64_t max_bytes, size_t *removed, struct buf *err)
{
	struct trim_ctx t = {c};
	int ret = walk_files(c, "v1", trim_one, &t, err);

	if (!ret) {
		qsort(t.v, t.nr, sizeof(*t.v), by_atime);
		for (size_t i = 0; i < t.nr && t.total > max_bytes; i++)
			if (dep_cache_remove(c, t.v[i].path, &t.v[i].id) == 0) {
				t.total -= t.v[i].size;
				t.removed++;
			}
	}
	/* After the .tmp files: a dead filler's lock goes once its .tmp did. */
	if (!ret)
		ret = walk_files(c, "locks", unlock_one, NULL, err);
	for (size_t i = 0; i < t.nr; i++)
		free(t.v[i].path);
	free(t.v);
	if (removed)
		*removed = t.removed;
	return ret;
}
