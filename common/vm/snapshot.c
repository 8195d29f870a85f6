/* Snapshots of the image's VM (snapshot.h, docs/image.md "Snapshots"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/guest_abi.h"
#include "base/guest_secrets.h"
#include "base/hex.h"
#include "base/paths.h"
#include "vm/qmp.h"
#include "base/shell_quote.h"
#include "vm/snapshot.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "vm/vm.h"
#include "base/banned.h"

/*
 * The snapshot's format: 2 keeps guest RAM in its own file (.ram), out of
 * the migration stream.  A snapshot of another format is stale.
 */
#define SNAP_FORMAT 2
/* The device set below: a snapshot made for another one is stale. */
#define SNAP_DEVICES 1
/* The state disk's size while the snapshot is made (and right after a restore). */
#define PLACEHOLDER_BYTES  (1ULL << 20)
#define BOOT_MS            (300 * 1000) /* the saving VM's boot, under TCG on a busy host */
#define MIGRATE_MS         (120 * 1000)
#define RESTORE_MS         (120 * 1000)
#define MANIFEST_MAX       8192
#define IMAGE_MANIFEST_MAX (4 << 20)

/* The fd numbers QEMU gets. */
#define FD_STATE 3
#define FD_SSH   4
#define FD_CTL   5
#define FD_QMP   6
#define FD_IN    7
#define FD_RAM   8
#define PAGE     4096

struct snap {
	struct buf file;     /* <image>/snapshot-<mem>m-<cpus>c.vmstate: device state */
	struct buf ram;      /* the same with .ram: guest RAM, a sparse file of the memory size */
	struct buf manifest; /* the same with .manifest */
	struct buf empty;    /* <image>/.snapshot-empty: the unused shares */
	struct buf stem;     /* snapshot-<mem>m-<cpus>c: the names of this size's files */
	struct buf deps;     /* what the snapshot depends on: the manifest's first lines */
	struct buf stamp;    /* the same with .stamp (stamp_read()) */
	struct buf old;      /* what the stamp held when read ("" when none) */
	struct buf qemu_id;  /* the stamp's two QEMU lines for the version in deps, or "" */
	struct buf ram_id;   /* "ram <id> <ram-sha256>" of the RAM file checked, or "" */
	int kvm;
	int qemu_stamped; /* deps' QEMU version came from the stamp */
	int qemu_asked;   /* QEMU's version is asked of QEMU, whatever the stamp says */
	int ram_stamped;  /* the RAM file's digest came from the stamp */
	int own_init;     /* the image's init is this aibox's (own_init()); with secrets only */
};

#define SNAP_INIT                                                                                  \
	{                                                                                          \
		.file = BUF_INIT, .ram = BUF_INIT, .manifest = BUF_INIT, .empty = BUF_INIT,        \
		.stem = BUF_INIT, .deps = BUF_INIT, .stamp = BUF_INIT, .old = BUF_INIT,            \
		.qemu_id = BUF_INIT, .ram_id = BUF_INIT                                            \
	}

static void snap_release(struct snap *s)
{
	buf_release(&s->file);
	buf_release(&s->ram);
	buf_release(&s->manifest);
	buf_release(&s->empty);
	buf_release(&s->stem);
	buf_release(&s->deps);
	buf_release(&s->stamp);
	buf_release(&s->old);
	buf_release(&s->qemu_id);
	buf_release(&s->ram_id);
}

/* The image manifest's "sha256 <hex> <file>" for file, as "<key> <hex>\n" into deps. */
static int add_image_sum(const struct buf *manifest, const char *file, const char *key,
                         struct buf *deps)
{
	const char *p = manifest->buf;

	while ((p = strstr(p, "sha256 "))) {
		const char *eol = strchrnul(p, '\n'),
		           *sp = memchr(p + 7, ' ', (size_t)(eol - p - 7));

		if ((p == manifest->buf || p[-1] == '\n') && sp && sp - (p + 7) == 64 &&
		    (size_t)(eol - sp - 1) == strlen(file) && !memcmp(sp + 1, file, strlen(file))) {
			buf_addf(deps, "%s %.64s\n", key, p + 7);
			return 0;
		}
		p = eol;
	}
	return -ENOENT;
}

/* How long `qemu --version` may take (it answers in milliseconds). */
#define QEMU_VERSION_MS 5000

/*
 * The stamp (docs/image.md, "The check's stamp"): <stem>.stamp, what the
 * last full check of this size's snapshot found, each fact with the identity
 * of the file it is about (file_id()), so that a restore need not find it
 * again while that file is the very same:
 *
 *     aibox-snapshot-stamp 1
 *     qemu <id> <path>           QEMU's file, whose version line follows
 *     qemu-version <the first line of its --version>
 *     ram <id> <ram-sha256>      the RAM file, whose digest that was
 *
 * A file written, truncated, replaced or renamed over has another identity
 * (its change time moves, which no user can set), so a stale line only
 * fails to match.  A line is written only for a file whose last change is
 * STAMP_SETTLED_S old: a change in the same tick of the kernel's clock as
 * the one recorded would keep its identity.  Whoever can write the stamp
 * can write the manifest it is checked against: it adds no trust.
 */
#define STAMP_MAX       4096
#define STAMP_HEAD      "aibox-snapshot-stamp 1\n"
#define STAMP_SETTLED_S 2

/* A file's identity: device, inode, size, modification and change times (ns). */
static void file_id(const struct stat *st, struct buf *out)
{
	buf_addf(out, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld", (unsigned long long)st->st_dev,
	         (unsigned long long)st->st_ino, (long long)st->st_size,
	         (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
	         st->st_ctim.tv_nsec);
}

/* 1 when st's file last changed STAMP_SETTLED_S ago or more. */
static int file_settled(const struct stat *st)
{
	struct timespec now;

	return clock_gettime(CLOCK_REALTIME, &now) == 0 &&
	       st->st_ctim.tv_sec + STAMP_SETTLED_S <= now.tv_sec;
}

/* s->stamp's text into s->old (bounded; "" when there is none or it is not one). */
static void stamp_read(struct snap *s)
{
	buf_reset(&s->old);
	if (buf_read_file(&s->old, s->stamp.buf, STAMP_MAX) < 0 ||
	    strncmp(s->old.buf, STAMP_HEAD, strlen(STAMP_HEAD)) ||
	    memchr(s->old.buf, '\0', s->old.len))
		buf_reset(&s->old);
}

/* The rest of the stamp's first line that starts with key (and a space) into value: 1, or 0. */
static int stamp_value(const struct snap *s, const char *key, struct buf *value)
{
	size_t kl = strlen(key);

	for (const char *p = s->old.buf; *p;) {
		size_t l = strcspn(p, "\n");

		if (l > kl + 1 && !strncmp(p, key, kl) && p[kl] == ' ') {
			buf_add(value, p + kl + 1, l - kl - 1);
			return 1;
		}
		p += l + (p[l] == '\n');
	}
	return 0;
}

/* 1 when the stamp's line of key is exactly "<key> <value>". */
static int stamp_has(const struct snap *s, const char *key, const char *value)
{
	struct buf v = BUF_INIT;
	int r = stamp_value(s, key, &v) && !strcmp(v.buf, value);

	buf_release(&v);
	return r;
}

/*
 * QEMU's file, as execvp() would find name (the first executable regular
 * file of that name in PATH's folders): its path into path; 0, or -ENOENT.
 */
static int qemu_path(const char *name, struct buf *path)
{
	const char *dirs = getenv("PATH");
	struct stat st;

	if (strchr(name, '/')) {
		buf_addstr(path, name);
		return 0;
	}
	for (dirs = dirs ? dirs : "/usr/local/bin:/bin:/usr/bin"; *dirs;) {
		size_t l = strcspn(dirs, ":");

		buf_reset(path);
		if (l)
			buf_add(path, dirs, l);
		else
			buf_addch(path, '.');
		buf_addf(path, "/%s", name);
		if (stat(path->buf, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(path->buf, X_OK) == 0)
			return 0;
		dirs += l + (dirs[l] == ':');
	}
	buf_reset(path);
	return -ENOENT;
}

/*
 * The first line of `qemu --version`, appended to out: the stamp's when
 * QEMU's file is the one it names (s->qemu_stamped), else by running it
 * (s->qemu_id then names the file, when it did not change meanwhile and has
 * settled).  -ETIMEDOUT when it did not end within QEMU_VERSION_MS (it is
 * killed), -EIO when it failed.
 */
static int qemu_version(const struct vm_config *cfg, struct snap *s, struct buf *out)
{
	const char *name = cfg->qemu ? cfg->qemu : "qemu-system-x86_64";
	struct spawn sp = SPAWN_INIT;
	struct buf b = BUF_INIT, path = BUF_INIT, id = BUF_INIT, again = BUF_INIT;
	struct stat st;
	int known = 0, r;

	/* A path with a newline cannot be a stamp's line: it is run each time. */
	if (qemu_path(name, &path) == 0 && !strchr(path.buf, '\n') && stat(path.buf, &st) == 0) {
		file_id(&st, &id);
		buf_addf(&id, " %s", path.buf);
		known = file_settled(&st);
		if (known && !s->qemu_asked && stamp_has(s, "qemu", id.buf) &&
		    stamp_value(s, "qemu-version", &b)) {
			buf_add(out, b.buf, b.len);
			buf_addf(&s->qemu_id, "qemu %s\nqemu-version %s", id.buf, b.buf);
			s->qemu_stamped = 1;
			r = 0;
			goto out;
		}
	}
	strvec_pushl(&sp.args, path.len ? path.buf : name, "--version", NULL);
	sp.err = SPAWN_NULL;
	r = spawn_capture_within(&sp, &b, 4096, QEMU_VERSION_MS);
	spawn_clear(&sp);
	if (r == 0 && b.len) {
		buf_setlen(&b, strcspn(b.buf, "\n"));
		buf_add(out, b.buf, b.len);
		/* The file that answered, if it is still the one stat() saw. */
		if (known && stat(path.buf, &st) == 0) {
			file_id(&st, &again);
			buf_addf(&again, " %s", path.buf);
			if (!strcmp(again.buf, id.buf) && !memchr(b.buf, '\0', b.len))
				buf_addf(&s->qemu_id, "qemu %s\nqemu-version %s", id.buf, b.buf);
		}
	}
	r = r == 0 ? 0 : r == -ETIMEDOUT ? r : -EIO;
out:
	buf_release(&b);
	buf_release(&path);
	buf_release(&id);
	buf_release(&again);
	return r;
}

/* sha256 of data in hex (65 bytes). */
static void sha256_hex(const void *data, size_t len, char *hex)
{
	unsigned char sum[32];
	unsigned int n = 0;

	EVP_Digest(data, len, sum, &n, EVP_sha256(), NULL);
	hex_encode(hex, sum, sizeof(sum));
}

/*
 * Under KVM the CPU model is the host's: its model name and flags (the first
 * processor's) stand for it.
 */
static void add_cpu(int kvm, struct buf *deps)
{
	struct buf info = BUF_INIT, id = BUF_INIT;
	char hex[65];

	if (!kvm) {
		buf_addstr(deps, "cpu max\n");
		return;
	}
	if (buf_read_file(&info, "/proc/cpuinfo", 16 << 20) >= 0) {
		const char *keys[] = {"model name", "flags"};

		for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
			const char *p = strstr(info.buf, keys[i]);

			if (p)
				buf_add(&id, p, strcspn(p, "\n"));
		}
	}
	sha256_hex(id.buf, id.len, hex);
	buf_addf(deps, "cpu host %s\n", hex);
	buf_release(&info);
	buf_release(&id);
}

static int fd_sha256(int fd, unsigned long long *size, char *hex);

/*
 * 1 when the image's init (the manifest's "init <sha256>") is this aibox's
 * own, libexec_dir()'s aibox-init: only such an init is sent what an init
 * of another aibox might not read (the go message's secrets, snapshot.h).
 */
static int own_init(const struct buf *man)
{
	const char *l = strstr(man->buf, "\ninit ");
	char want[65], hex[65];
	unsigned long long size;
	struct buf path = BUF_INIT;
	int fd, ret = 0;

	if (!l || strcspn(l + 6, "\n") != 64)
		return 0;
	memcpy(want, l + 6, 64);
	want[64] = '\0';
	buf_addf(&path, "%s/aibox-init", libexec_dir());
	fd = open(path.buf, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fd_sha256(fd, &size, hex) == 0)
		ret = !strcmp(hex, want);
	if (fd >= 0)
		close(fd);
	buf_release(&path);
	return ret;
}

/* s->deps, what the snapshot depends on (QEMU's version from s->old if it can). */
static int snap_deps(const struct vm_config *cfg, struct snap *s, struct buf *err)
{
	struct buf man = BUF_INIT;
	int r;

	buf_reset(&s->deps);
	buf_reset(&s->qemu_id);
	s->qemu_stamped = 0;
	buf_addf(&s->deps, "aibox-snapshot %d\ndevices %d\nqemu ", SNAP_FORMAT, SNAP_DEVICES);
	if ((r = qemu_version(cfg, s, &s->deps)) < 0) {
		if (r == -ETIMEDOUT)
			buf_addf(
			    err,
			    "cannot read QEMU's version: '%s --version' did not end within %d s",
			    cfg->qemu ? cfg->qemu : "qemu-system-x86_64", QEMU_VERSION_MS / 1000);
		else
			buf_addstr(err, "cannot read QEMU's version");
		r = -EIO;
		goto out;
	}
	buf_addf(&s->deps, "\nmachine q35\naccel %s\n", s->kvm ? "kvm" : "tcg");
	add_cpu(s->kvm, &s->deps);
	buf_addf(&s->deps, "memory %u\ncpus %u\n", vm_memory_mb(cfg), vm_cpus(cfg));
	{
		struct buf path = BUF_INIT;

		buf_addf(&path, "%s/manifest", cfg->image_dir);
		r = (int)buf_read_file(&man, path.buf, IMAGE_MANIFEST_MAX);
		buf_release(&path);
	}
	/* Asked only when there is something to send (go_secrets()): a hash of the init. */
	s->own_init = r >= 0 && cfg->secrets && cfg->secrets_len && own_init(&man);
	if (r >= 0 && !strstr(man.buf, "\nsnapshot 1\n")) {
		buf_addstr(err,
		           "the image's init predates snapshots (rebuild it: aibox image build)");
		r = -ENOTSUP;
		goto out;
	}
	if (r < 0 || add_image_sum(&man, "vmlinuz", "kernel", &s->deps) < 0 ||
	    add_image_sum(&man, "initramfs", "initramfs", &s->deps) < 0 ||
	    add_image_sum(&man, "rootfs.ext4", "rootfs", &s->deps) < 0) {
		buf_addstr(err, "the image's manifest has no digests of its files");
		r = -EINVAL;
		goto out;
	}
	r = 0;
out:
	buf_release(&man);
	return r;
}

static int snap_init(const struct vm_config *cfg, struct snap *s, struct buf *err)
{
	s->kvm = vm_kvm_usable();
	buf_addf(&s->file, "%s/snapshot-%um-%uc.vmstate", cfg->image_dir, vm_memory_mb(cfg),
	         vm_cpus(cfg));
	buf_addf(&s->ram, "%s/snapshot-%um-%uc.ram", cfg->image_dir, vm_memory_mb(cfg),
	         vm_cpus(cfg));
	buf_addf(&s->manifest, "%s/snapshot-%um-%uc.manifest", cfg->image_dir, vm_memory_mb(cfg),
	         vm_cpus(cfg));
	buf_addf(&s->stamp, "%s/snapshot-%um-%uc.stamp", cfg->image_dir, vm_memory_mb(cfg),
	         vm_cpus(cfg));
	buf_addf(&s->empty, "%s/.snapshot-empty", cfg->image_dir);
	buf_addf(&s->stem, "snapshot-%um-%uc", vm_memory_mb(cfg), vm_cpus(cfg));
	stamp_read(s);
	return snap_deps(cfg, s, err);
}

/*
 * The snapshot's manifest checked against s->deps: 0 with the vmstate's size
 * and digest and the RAM file's digest (ram_sha256()), -ENOENT when there is
 * none, -ESTALE when it was made for something else (why says what).
 */
static int read_manifest(const struct snap *s, unsigned long long *size, char *hex, char *ram_hex,
                         struct buf *err)
{
	struct buf m = BUF_INIT;
	ssize_t n = buf_read_file(&m, s->manifest.buf, MANIFEST_MAX);
	const char *a, *b, *rest;
	int r = -ESTALE;

	if (n == -ENOENT) {
		buf_addstr(err, "there is no snapshot yet");
		r = -ENOENT;
		goto out;
	}
	if (n < 0) {
		buf_addf(err, "cannot read the snapshot's manifest: %s", strerror((int)-n));
		r = (int)n;
		goto out;
	}
	/* Line by line: the first that differs says err. */
	for (a = m.buf, b = s->deps.buf; *b;) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

		if (la != lb || memcmp(a, b, la) || a[la] != '\n') {
			buf_addf(err, "the snapshot was made for '%.*s', this VM is '%.*s'",
			         (int)(la < 100 ? la : 100), a, (int)(lb < 100 ? lb : 100), b);
			goto out;
		}
		a += la + 1;
		b += lb + 1;
	}
	rest = a;
	if (sscanf(rest, "size %llu\nsha256 %64[0-9a-f]\nram-sha256 %64[0-9a-f]\n", size, hex,
	           ram_hex) != 3 ||
	    strlen(hex) != 64 || strlen(ram_hex) != 64) {
		buf_addstr(err, "the snapshot's manifest is damaged");
		goto out;
	}
	r = 0;
out:
	buf_release(&m);
	return r;
}

/* The sha256 of what fd holds, from its start; the offset is left at 0. */
static int fd_sha256(int fd, unsigned long long *size, char *hex)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char sum[32];
	unsigned int n = 0;
	size_t bufsz = 1 << 20;
	char *b = xmalloc(bufsz);
	off_t off = 0;
	int ret = 0;

	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r = pread(fd, b, bufsz, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		if (r == 0)
			break;
		EVP_DigestUpdate(c, b, (size_t)r);
		off += r;
	}
	EVP_DigestFinal_ex(c, sum, &n);
	hex_encode(hex, sum, sizeof(sum));
	*size = (unsigned long long)off;
	if (lseek(fd, 0, SEEK_SET) < 0)
		ret = -errno;
out:
	EVP_MD_CTX_free(c);
	free(b);
	return ret;
}

/*
 * The digest of a RAM file: sha256 over its size (8 bytes, little-endian),
 * then each page that is not all zeros, in order, as its offset (8 bytes,
 * little-endian) and its 4096 bytes.  Holes and zero pages count alike, so a
 * copy that made holes of zero pages or filled them has the same digest;
 * only the data extents are read (SEEK_DATA), never the holes.
 */
static int ram_sha256(int fd, unsigned long long *size, char *hex)
{
	static const unsigned char zero[PAGE];
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char sum[32], le[8];
	unsigned int n = 0;
	size_t bufsz = 1 << 20;
	char *b = xmalloc(bufsz);
	struct stat st;
	off_t off = 0, end;
	int ret = 0;

	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)((unsigned long long)st.st_size >> (8 * i));
	EVP_DigestUpdate(c, le, 8);
	while (off < st.st_size) {
		if ((off = lseek(fd, off, SEEK_DATA)) < 0) {
			if (errno != ENXIO)
				ret = -errno;
			break; /* ENXIO: only a hole is left */
		}
		if ((end = lseek(fd, off, SEEK_HOLE)) < 0) {
			ret = -errno;
			goto out;
		}
		off &= ~(off_t)(PAGE - 1);
		while (off < end) {
			size_t want = (size_t)(end - off) < bufsz ? (size_t)(end - off) : bufsz;
			ssize_t r = pread(fd, b, want, off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				ret = -errno;
				goto out;
			}
			if (r == 0)
				break;
			/* A short read's last part page is padded with zeros. */
			if (r % PAGE)
				memset(b + r, 0, PAGE - (size_t)(r % PAGE));
			for (ssize_t p = 0; p < r; p += PAGE) {
				unsigned long long at = (unsigned long long)(off + p);

				if (!memcmp(b + p, zero, PAGE))
					continue;
				for (int i = 0; i < 8; i++)
					le[i] = (unsigned char)(at >> (8 * i));
				EVP_DigestUpdate(c, le, 8);
				EVP_DigestUpdate(c, b + p, PAGE);
			}
			off += (r + PAGE - 1) & ~(ssize_t)(PAGE - 1);
		}
	}
	if (ret < 0)
		goto out;
	EVP_DigestFinal_ex(c, sum, &n);
	hex_encode(hex, sum, sizeof(sum));
	*size = (unsigned long long)st.st_size;
out:
	EVP_MD_CTX_free(c);
	free(b);
	return ret;
}

/*
 * The snapshot VM's devices, in one order for saving and restoring (QEMU
 * matches them by their place): the state disk, the task share and the
 * SNAP_SHARES spare shares, the SSH and control ports, virtio-rng, the
 * network, the monitor.  slots[i] is the folder of spare share i.
 */
static void snap_devices(struct strvec *a, const char *share, const char *const *slots,
                         const char *netdev)
{
	struct buf b = BUF_INIT;

	strvec_pushl(a, "-drive",
	             "file=/dev/fd/" TOSTR(FD_STATE) ",format=raw,if=none,id=state,cache=unsafe",
	             "-device", "virtio-blk-pci,drive=state,serial=" GUEST_SERIAL_STATE, NULL);
	for (int i = -1; i < SNAP_SHARES; i++) {
		buf_reset(&b);
		buf_addstr(&b, "local,path=");
		vm_add_opt_value(&b, i < 0 ? share : slots[i]);
		buf_addf(&b, ",id=fs%d,security_model=none,readonly=on", i + 1);
		strvec_pushl(a, "-fsdev", b.buf, "-device", NULL);
		if (i < 0)
			strvec_pushf(a, "virtio-9p-pci,fsdev=fs0,mount_tag=" GUEST_TAG_TASK);
		else
			strvec_pushf(a, "virtio-9p-pci,fsdev=fs%d,mount_tag=" SNAP_SLOT_TAG "%d",
			             i + 1, i);
	}
	strvec_pushl(a, "-device", "virtio-serial-pci", "-chardev",
	             "socket,id=ssh,fd=" TOSTR(FD_SSH), "-device",
	             "virtserialport,chardev=ssh,name=" GUEST_PORT_SSH, "-chardev",
	             "socket,id=ctl,fd=" TOSTR(FD_CTL), "-device",
	             "virtserialport,chardev=ctl,name=" SNAP_PORT, NULL);
	strvec_pushl(a, "-object", "rng-random,id=rng,filename=/dev/urandom", "-device",
	             "virtio-rng-pci,rng=rng", NULL);
	strvec_pushl(a, "-netdev", netdev, "-device",
	             "virtio-net-pci,netdev=net0,romfile=", "-chardev",
	             "socket,id=qmp,fd=" TOSTR(FD_QMP), "-mon", "chardev=qmp,mode=control", NULL);
	buf_release(&b);
}

/* Read from fd until it has sent `line`; bounded by deadline and QEMU's life. */
static int wait_line(int fd, int pidfd, const char *line, long deadline)
{
	char got[512];
	size_t len = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
		                      {.fd = pidfd, .events = POLLIN}};
		long left = deadline - clock_ms();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(p, pidfd >= 0 ? 2 : 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents & POLLIN)
			return -ECHILD;
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		if (len == sizeof(got) - 1) {
			/* Keep the tail: the line may start in it. */
			memmove(got, got + len / 2, len - len / 2);
			len -= len / 2;
		}
		n = read(fd, got + len, sizeof(got) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECHILD : -errno;
		len += (size_t)n;
		got[len] = '\0';
		if (strstr(got, line))
			return 0;
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Wait for an outgoing migration: 0 once completed. */
static int wait_migrated(struct qmp *q, long deadline, struct buf *err)
{
	for (;;) {
		json_t *ret = NULL;
		const char *st;
		int r;

		if ((r = qmp_call(q, "query-migrate", NULL, &ret, (int)(deadline - clock_ms()),
		                  err)) < 0)
			return r;
		st = json_string_value(json_object_get(ret, "status"));
		if (st && !strcmp(st, "completed")) {
			json_decref(ret);
			return 0;
		}
		if (st && (!strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
			buf_addf(err, "QEMU's migration to the file %s", st);
			json_decref(ret);
			return -EIO;
		}
		json_decref(ret);
		if (clock_ms() > deadline) {
			buf_addstr(err, "QEMU did not write the snapshot in time");
			return -ETIMEDOUT;
		}
		usleep(20000);
	}
}

/*
 * The RAM file's mode: QEMU 7.2 opens a private (share=off) memory backend's
 * file for writing and refuses one it cannot (its readonly=on maps it
 * read-only: ROM), so the owner keeps the write bit.  It never writes: the
 * mapping is private, and only a RAM discard (balloon, virtio-mem, postcopy:
 * none in this VM) would punch holes through the fd: in the file every
 * restored VM reads, so never add one (docs/image.md, "Why no balloon").
 */
#define RAM_MODE 0644

/*
 * Migration's x-ignore-shared on, on both sides: RAM of a shared file
 * backend is not in the stream (saving), and the stream has no pages for it
 * (restoring, where the backend is private and keeps the file's pages).
 */
static int ignore_shared(struct qmp *q, struct buf *err)
{
	return qmp_call(q, "migrate-set-capabilities",
	                json_pack("{s:[{s:s,s:b}]}", "capabilities", "capability",
	                          "x-ignore-shared", "state", 1),
	                NULL, MIGRATE_MS, err);
}

/* Write text to path through a temporary file: 0444, synced, renamed. */
static int write_atomic(const char *path, const struct buf *text)
{
	struct buf tmp = BUF_INIT;
	int fd, r = 0;

	buf_addf(&tmp, "%s.tmp-XXXXXX", path);
	if ((fd = mkostemp(tmp.buf, O_CLOEXEC)) < 0) {
		buf_release(&tmp);
		return -errno;
	}
	if ((r = write_all(fd, text->buf, text->len)) == 0 &&
	    (fchmod(fd, 0444) < 0 || fsync(fd) < 0 || rename(tmp.buf, path) < 0))
		r = -errno;
	if (r < 0)
		unlink(tmp.buf);
	close(fd);
	buf_release(&tmp);
	return r;
}

/*
 * Remove what a process that died saving this size left (its temporary
 * files, .<stem>-XXXXXX, <stem>.manifest.tmp-XXXXXX and
 * <stem>.stamp.tmp-XXXXXX): under this size's
 * lock, no other process is writing one.  Another size's are its own
 * saver's.  The .snapshot-XXXXXX of an older aibox, whose lock was the
 * image's, go too.
 */
static void remove_leftovers(const char *dir, const struct buf *stem)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct buf man = BUF_INIT, stamp = BUF_INIT;

	buf_addf(&man, "%s.manifest.tmp-", stem->buf);
	buf_addf(&stamp, "%s.stamp.tmp-", stem->buf);
	while (d && (de = readdir(d))) {
		const char *n = de->d_name;
		size_t len = strlen(n);

		if ((!strncmp(n, ".snapshot-", 10) && len == 16 && strcmp(n, ".snapshot-empty")) ||
		    (n[0] == '.' && len == stem->len + 8 && !strncmp(n + 1, stem->buf, stem->len) &&
		     n[1 + stem->len] == '-') ||
		    (!strncmp(n, man.buf, man.len) && len == man.len + 6) ||
		    (!strncmp(n, stamp.buf, stamp.len) && len == stamp.len + 6))
			unlinkat(dirfd(d), n, 0);
	}
	if (d)
		closedir(d);
	buf_release(&man);
	buf_release(&stamp);
}

/* A snapshot VM's QEMU, saving or restoring: what it holds of ours. */
struct snap_qemu {
	struct spawn sp;
	struct qmp q;
	int state_fd;
	int ssh[2], ctl[2], mon[2]; /* [0] ours, [1] QEMU's */
};

#define SNAP_QEMU_INIT                                                                             \
	{                                                                                          \
		.sp = SPAWN_INIT, .q = QMP_INIT, .state_fd = -1, .ssh = {-1, -1}, .ctl = {-1, -1}, \
		.mon = { -1,                                                                       \
			 -1 }                                                                      \
	}

static void snap_qemu_clear(struct snap_qemu *x)
{
	qmp_close(&x->q);
	close_fd(&x->state_fd);
	for (int i = 0; i < 2; i++) {
		close_fd(&x->ssh[i]);
		close_fd(&x->ctl[i]);
		close_fd(&x->mon[i]);
	}
	spawn_clear(&x->sp);
}

/*
 * Start a snapshot VM's QEMU (snap_devices()) with a new placeholder state
 * disk in state_dir, and take its monitor.  Guest RAM is the file ram_fd
 * (QEMU reopens it as /dev/fd/FD_RAM): mapped shared while saving (the
 * guest's pages land in the file), private when restoring (in_fd >= 0:
 * pages come from the file's page cache and a guest write copies the page,
 * never reaching the file).  Restoring waits for the stream (-incoming
 * defer) until x-ignore-shared is set (restore()).  0 with vm->pid set, or a
 * negative errno with why (QEMU may run: the caller stops it).
 */
static int snap_qemu_start(struct snap_qemu *x, const struct vm_config *cfg, const struct snap *s,
                           const char *state_dir, const char *share, const char *const *slots,
                           const char *netdev, int ram_fd, int in_fd, struct vm *vm,
                           struct buf *err)
{
	int r;

	if ((x->state_fd = vm_make_state_disk(state_dir, PLACEHOLDER_BYTES)) < 0) {
		r = x->state_fd;
		x->state_fd = -1;
		buf_addf(err, "cannot make the state disk: %s", strerror(-r));
		return r;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->ssh) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->ctl) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->mon) < 0) {
		r = -errno;
		buf_addf(err, "cannot make a socket pair: %s", strerror(errno));
		return r;
	}
	vm_base_args(&x->sp.args, cfg, s->kvm, SNAP_CMDLINE);
	strvec_pushl(&x->sp.args, "-machine", "memory-backend=ram", "-object", NULL);
	strvec_pushf(&x->sp.args,
	             "memory-backend-file,id=ram,size=%uM,mem-path=/dev/fd/" TOSTR(
	                 FD_RAM) ",share=%s,prealloc=off,discard-data=off",
	             vm_memory_mb(cfg), in_fd >= 0 ? "off" : "on");
	spawn_give_fd(&x->sp, ram_fd, FD_RAM);
	snap_devices(&x->sp.args, share, slots, netdev);
	if (in_fd >= 0) {
		strvec_pushl(&x->sp.args, "-incoming", "defer", NULL);
		spawn_give_fd(&x->sp, in_fd, FD_IN);
	}
	spawn_give_fd(&x->sp, x->state_fd, FD_STATE);
	spawn_give_fd(&x->sp, x->ssh[1], FD_SSH);
	spawn_give_fd(&x->sp, x->ctl[1], FD_CTL);
	spawn_give_fd(&x->sp, x->mon[1], FD_QMP);
	vm->kvm = s->kvm;
	if ((r = vm_spawn(&x->sp, cfg, vm)) < 0) {
		buf_addf(err, "cannot start QEMU: %s", strerror(-r));
		return r;
	}
	close_fd(&x->ssh[1]);
	close_fd(&x->ctl[1]);
	close_fd(&x->mon[1]);
	if ((r = qmp_open(&x->q, x->mon[0], vm->pidfd, in_fd >= 0 ? RESTORE_MS : BOOT_MS, err)) < 0)
		return r;
	x->mon[0] = -1; /* the monitor's now */
	return 0;
}

/* The saving: s is initialized, the lock is held. */
static int save_locked(const struct vm_config *cfg, struct snap *s, struct buf *err)
{
	struct snap_qemu x = SNAP_QEMU_INIT;
	struct vm vm = VM_INIT;
	struct buf tmp = BUF_INIT, uri = BUF_INIT, text = BUF_INIT;
	struct buf ram_tmp = BUF_INIT;
	const char *slots[SNAP_SHARES];
	int out_fd = -1, ram_fd = -1;
	unsigned long long size = 0, ram_size = 0;
	char hex[65], ram_hex[65];
	long deadline;
	int r;

	if (mkdir(s->empty.buf, 0555) < 0 && errno != EEXIST) {
		r = -errno;
		buf_addf(err, "cannot create '%s': %s", s->empty.buf, strerror(errno));
		goto out;
	}
	remove_leftovers(cfg->image_dir, &s->stem);
	buf_addf(&tmp, "%s/.%s-XXXXXX", cfg->image_dir, s->stem.buf);
	if ((out_fd = mkostemp(tmp.buf, O_CLOEXEC)) < 0) {
		r = -errno;
		buf_reset(&tmp);
		buf_addf(err, "cannot create the snapshot's file: %s", strerror(errno));
		goto out;
	}
	buf_addf(&ram_tmp, "%s/.%s-XXXXXX", cfg->image_dir, s->stem.buf);
	if ((ram_fd = mkostemp(ram_tmp.buf, O_CLOEXEC)) < 0 ||
	    ftruncate(ram_fd, (off_t)vm_memory_mb(cfg) << 20) < 0) {
		r = -errno;
		if (ram_fd < 0)
			buf_reset(&ram_tmp);
		buf_addf(err, "cannot create the snapshot's RAM file: %s", strerror(errno));
		goto out;
	}
	for (int i = 0; i < SNAP_SHARES; i++)
		slots[i] = s->empty.buf;
	/* Nothing connects while the snapshot is made: the command is never run. */
	if ((r = snap_qemu_start(
	         &x, cfg, s, cfg->image_dir, s->empty.buf, slots,
	         "user,id=net0,restrict=on,ipv6=off,guestfwd=tcp:" GUEST_PROXY_HOSTPORT
	         "-cmd:false",
	         ram_fd, -1, &vm, err)) < 0)
		goto out;
	if ((r = wait_line(x.ctl[0], vm.pidfd, SNAP_WAITING, clock_ms() + BOOT_MS)) < 0) {
		buf_addstr(err, r == -ETIMEDOUT ? "the snapshot's VM did not come up in time"
		                                : "the snapshot's VM stopped before it was ready");
		goto out;
	}
	deadline = clock_ms() + MIGRATE_MS;
	buf_addstr(&uri, "exec:cat > ");
	shell_quote(&uri, tmp.buf);
	/* Guest RAM stays in the RAM file (shared): the stream has the rest. */
	if ((r = qmp_call(&x.q, "stop", NULL, NULL, MIGRATE_MS, err)) < 0 ||
	    (r = ignore_shared(&x.q, err)) < 0 ||
	    (r = qmp_call(&x.q, "migrate", json_pack("{s:s}", "uri", uri.buf), NULL, MIGRATE_MS,
	                  err)) < 0 ||
	    (r = wait_migrated(&x.q, deadline, err)) < 0)
		goto out;
	/* QEMU ends before the RAM file is read: nothing writes it any more. */
	vm_stop(&vm, 0);
	if (fsync(out_fd) < 0 || (r = fd_sha256(out_fd, &size, hex)) < 0 || size == 0 ||
	    fchmod(out_fd, 0444) < 0 || fsync(ram_fd) < 0 ||
	    (r = ram_sha256(ram_fd, &ram_size, ram_hex)) < 0 || fchmod(ram_fd, RAM_MODE) < 0) {
		r = r < 0 ? r : -EIO;
		buf_addstr(err, "cannot finish the snapshot's file");
		goto out;
	}
	/* The old manifest goes first: a reader never pairs it with the new files. */
	if ((unlink(s->manifest.buf) < 0 && errno != ENOENT) ||
	    rename(ram_tmp.buf, s->ram.buf) < 0 || rename(tmp.buf, s->file.buf) < 0) {
		r = -errno;
		buf_addf(err, "cannot rename the snapshot: %s", strerror(errno));
		goto out;
	}
	buf_reset(&tmp);
	buf_reset(&ram_tmp);
	buf_add(&text, s->deps.buf, s->deps.len);
	buf_addf(&text, "size %llu\nsha256 %s\nram-sha256 %s\n", size, hex, ram_hex);
	if ((r = write_atomic(s->manifest.buf, &text)) < 0) {
		buf_addf(err, "cannot write the snapshot's manifest: %s", strerror(-r));
		goto out;
	}
	r = 1;
out:
	if (vm.pid > 0)
		vm_stop(&vm, 0);
	snap_qemu_clear(&x);
	if (tmp.len)
		unlink(tmp.buf);
	if (ram_tmp.len)
		unlink(ram_tmp.buf);
	close_fd(&out_fd);
	close_fd(&ram_fd);
	buf_release(&tmp);
	buf_release(&ram_tmp);
	buf_release(&uri);
	buf_release(&text);
	return r;
}

/*
 * The lock of the image's snapshot of s's size, .<stem>.lock: held while it
 * is saved or removed.  One a size, so that a save of one size never makes
 * tasks of another boot cold.
 */
static int lock_image(const struct vm_config *cfg, const struct snap *s, struct buf *err)
{
	struct buf p = BUF_INIT;
	int fd;

	buf_addf(&p, "%s/.%s.lock", cfg->image_dir, s->stem.buf);
	fd = open(p.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	buf_release(&p);
	if (fd < 0) {
		buf_addf(err, "cannot save a snapshot in the image's folder: %s", strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			buf_addstr(err, "another task is saving the snapshot");
			return -EBUSY;
		}
		buf_addf(err, "cannot lock the image's snapshot: %s", strerror(e));
		return -e;
	}
	return fd;
}

static int save(const struct vm_config *cfg, struct snap *s, struct buf *err)
{
	struct buf ignored = BUF_INIT;
	unsigned long long size;
	char hex[65], ram_hex[65];
	int lock, r;

	if ((lock = lock_image(cfg, s, err)) < 0)
		return lock;
	/* Saved by another meanwhile? */
	if (read_manifest(s, &size, hex, ram_hex, &ignored) == 0)
		r = 0;
	else
		r = save_locked(cfg, s, err);
	close(lock);
	buf_release(&ignored);
	return r;
}

int snapshot_save(const struct vm_config *cfg, struct buf *err)
{
	struct snap s = SNAP_INIT;
	int r;

	if ((r = snap_init(cfg, &s, err)) == 0)
		r = save(cfg, &s, err);
	snap_release(&s);
	return r;
}

/* 1 when the go message carries cfg's secrets: there are some, and s's init reads them. */
static int go_secrets(const struct vm_config *cfg, const struct snap *s)
{
	return cfg->secrets && cfg->secrets_len && s->own_init;
}

/* The go message (snapshot.h) for cfg, into b. */
static int go_message(const struct vm_config *cfg, const struct snap *s, struct buf *b)
{
	unsigned char seed[SNAP_SEED_BYTES];
	char seed_hex[2 * SNAP_SEED_BYTES + 1];
	struct timespec now;
	size_t got = 0;

	while (got < sizeof(seed)) {
		ssize_t n = getrandom(seed + got, sizeof(seed) - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	buf_addf(b, "aibox-go 1\ntime %lld %ld\nseed ", (long long)now.tv_sec, now.tv_nsec);
	hex_encode(seed_hex, seed, sizeof(seed));
	buf_addstr(b, seed_hex);
	explicit_bzero(seed, sizeof(seed));
	explicit_bzero(seed_hex, sizeof(seed_hex));
	buf_addf(b, "\ndisk %llu\n", vm_disk_bytes(cfg));
	for (size_t i = 0; i < cfg->nr_mounts; i++)
		buf_addf(b, "share %s " SNAP_SLOT_TAG "%zu\n", cfg->mounts[i].tag, i);
	if (go_secrets(cfg, s)) {
		if (cfg->secrets_len > GUEST_SECRETS_MAX)
			return -EFBIG;
		buf_addf(b, "secrets %zu\n", cfg->secrets_len);
	}
	buf_addstr(b, "end\n");
	return b->len <= SNAP_GO_MAX ? 0 : -EFBIG;
}

/*
 * All n bytes of data to the guest's port fd by deadline (clock_ms()): the
 * guest takes them only as its init reads.  0, or -errno (-ETIMEDOUT).
 */
static int send_by(int fd, const void *data, size_t n, long deadline)
{
	const char *p = data;

	while (n) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		long left = deadline - (long)clock_ms();
		ssize_t w;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		}
	}
	return 0;
}

/* Wait until the restored VM runs. */
static int wait_running(struct qmp *q, long deadline, struct buf *err)
{
	for (;;) {
		json_t *ret = NULL;
		const char *st;
		int r;

		if ((r = qmp_call(q, "query-status", NULL, &ret, (int)(deadline - clock_ms()),
		                  err)) < 0)
			return r;
		st = json_string_value(json_object_get(ret, "status"));
		if (st && !strcmp(st, "running")) {
			json_decref(ret);
			return 0;
		}
		/* Saved stopped, so restored paused once loaded: run it. */
		if (st && !strcmp(st, "paused")) {
			json_decref(ret);
			return qmp_call(q, "cont", NULL, NULL, (int)(deadline - clock_ms()), err);
		}
		if (!st || strcmp(st, "inmigrate")) {
			buf_addf(err, "the restored VM is '%.40s', not running", st ? st : "?");
			json_decref(ret);
			return -EIO;
		}
		json_decref(ret);
		if (clock_ms() > deadline) {
			buf_addstr(err, "QEMU did not restore the snapshot in time");
			return -ETIMEDOUT;
		}
		usleep(10000);
	}
}

static int restore(const struct vm_config *cfg, struct snap *s, int in_fd, int ram_fd,
                   struct vm *vm, struct buf *err)
{
	struct snap_qemu x = SNAP_QEMU_INIT;
	struct buf net = BUF_INIT, go = BUF_INIT;
	const char *slots[SNAP_SHARES];
	long deadline = clock_ms() + RESTORE_MS;
	int r;

	if (mkdir(s->empty.buf, 0555) < 0 && errno != EEXIST) {
		r = -errno;
		buf_addf(err, "cannot create '%s': %s", s->empty.buf, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < SNAP_SHARES; i++)
		slots[i] = i < cfg->nr_mounts ? cfg->mounts[i].host_path : s->empty.buf;
	vm_netdev_arg(cfg, &net);
	if ((r = snap_qemu_start(&x, cfg, s, cfg->state_dir, cfg->share_dir, slots, net.buf, ram_fd,
	                         in_fd, vm, err)) < 0 ||
	    (r = ignore_shared(&x.q, err)) < 0 ||
	    (r = qmp_call(&x.q, "migrate-incoming", json_pack("{s:s}", "uri", "fd:" TOSTR(FD_IN)),
	                  NULL, RESTORE_MS, err)) < 0 ||
	    (r = wait_running(&x.q, deadline, err)) < 0 ||
	    (r = qmp_call(
	         &x.q, "block_resize",
	         json_pack("{s:s,s:I}", "device", "state", "size", (json_int_t)vm_disk_bytes(cfg)),
	         NULL, RESTORE_MS, err)) < 0)
		goto out;
	/* The secrets from the caller's buffer: no copy of them is made here. */
	if ((r = go_message(cfg, s, &go)) < 0 ||
	    (r = send_by(x.ctl[0], go.buf, go.len, deadline)) < 0 ||
	    (go_secrets(cfg, s) &&
	     (r = send_by(x.ctl[0], cfg->secrets, cfg->secrets_len, deadline)) < 0)) {
		buf_addf(err, "cannot send the go message: %s", strerror(-r));
		goto out;
	}
	vm->secrets_sent = go_secrets(cfg, s);
	vm->ssh_fd = x.ssh[0];
	x.ssh[0] = -1;
	vm->ctl_fd = x.ctl[0];
	x.ctl[0] = -1;
	vm->restored = 1;
	r = 0;
out:
	if (r < 0 && vm->pid > 0)
		vm_stop(vm, 0);
	snap_qemu_clear(&x);
	buf_release(&net);
	buf_wipe_release(&go);
	return r;
}

/*
 * Remove a snapshot found bad (stale, damaged): the next task saves a new
 * one.  Under the lock, and only if its manifest still says what was read
 * (hex, or stale): another process may have replaced it meanwhile.  1 when
 * removed.
 */
static int discard(const struct vm_config *cfg, struct snap *s, const char *hex)
{
	struct buf ignored = BUF_INIT;
	unsigned long long size;
	char now[65] = "", ram_now[65] = "";
	int lock, r, ret = 0;

	if ((lock = lock_image(cfg, s, &ignored)) >= 0) {
		r = read_manifest(s, &size, now, ram_now, &ignored);
		if ((r == -ESTALE || (r == 0 && !strcmp(now, hex))) &&
		    unlink(s->manifest.buf) == 0) {
			unlink(s->file.buf);
			unlink(s->ram.buf);
			unlink(s->stamp.buf);
			ret = 1;
		}
		close(lock);
	}
	buf_release(&ignored);
	return ret;
}

/*
 * Open the snapshot's RAM file read-only into *fd and check it: a regular
 * file that only its owner may write (RAM_MODE), of the memory size, whose
 * digest (ram_sha256()) is the manifest's: the stamp's, when it names this
 * very file with that digest (s->ram_stamped), else read (s->ram_id then
 * names the file, once it has settled).  The fd is what QEMU reopens, so
 * the file checked is the file mapped.  -EACCES when this user cannot open
 * it for writing, as QEMU 7.2 must (a store another user owns): the
 * snapshot is good, it is only not for this user.
 */
static int check_ram(const struct vm_config *cfg, struct snap *s, const char *ram_hex, int *fd,
                     struct buf *err)
{
	unsigned long long got = 0;
	char sum[65] = "";
	struct buf id = BUF_INIT;
	struct stat st;
	int settled, r;

	if ((*fd = open(s->ram.buf, O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		buf_addf(err, "cannot open the snapshot's RAM file: %s", strerror(errno));
		return r;
	}
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022)) {
		buf_addstr(err,
		           "the snapshot's RAM file is not a regular file only its owner writes");
		return -EPERM;
	}
	if ((unsigned long long)st.st_size != (unsigned long long)vm_memory_mb(cfg) << 20) {
		buf_addf(err, "the snapshot's RAM file is %llu bytes, not the memory size %u MiB",
		         (unsigned long long)st.st_size, vm_memory_mb(cfg));
		return -EINVAL;
	}
	if (faccessat(AT_FDCWD, s->ram.buf, W_OK, AT_EACCESS) < 0) {
		buf_addstr(err, "the snapshot's RAM file is not this user's to open as QEMU does");
		return -EACCES;
	}
	settled = file_settled(&st);
	file_id(&st, &id);
	buf_addf(&id, " %s", ram_hex);
	if (settled && stamp_has(s, "ram", id.buf)) {
		s->ram_stamped = 1;
	} else if ((r = ram_sha256(*fd, &got, sum)) < 0 || strcmp(sum, ram_hex)) {
		buf_release(&id);
		buf_addstr(err, "the snapshot's RAM file does not match its manifest's digest");
		return r < 0 ? r : -EINVAL;
	}
	if (settled)
		buf_addf(&s->ram_id, "ram %s", id.buf);
	buf_release(&id);
	return 0;
}

/*
 * Write the stamp again when what was found differs from what it held: only
 * the facts found about settled files (s->qemu_id, s->ram_id).  A store this
 * user cannot write keeps its stamp (or none): the checks are then made in
 * full.
 */
static void stamp_write(const struct snap *s)
{
	struct buf text = BUF_INIT;

	buf_addstr(&text, STAMP_HEAD);
	if (s->qemu_id.len)
		buf_addf(&text, "%s\n", s->qemu_id.buf);
	if (s->ram_id.len)
		buf_addf(&text, "%s\n", s->ram_id.buf);
	if (strcmp(text.buf, s->old.buf) && text.len < STAMP_MAX)
		write_atomic(s->stamp.buf, &text);
	buf_release(&text);
}

int snapshot_start(const struct vm_config *cfg, struct vm *vm, struct buf *err)
{
	struct snap s = SNAP_INIT;
	unsigned long long size = 0, got = 0;
	char hex[65] = "", sum[65] = "", ram_hex[65] = "";
	struct stat st;
	int in_fd = -1, ram_fd = -1, saved = 0, bad = 0, r;

	if (strcmp(cfg->mode, GUEST_MODE_TASK) || cfg->extra_cmdline) {
		buf_addstr(err, "only a task's VM starts from a snapshot");
		return -EINVAL;
	}
	if (!cfg->proxy_socket) {
		buf_addstr(err, "a snapshot's VM has a network: this VM has none");
		return -EINVAL;
	}
	if (cfg->nr_mounts > SNAP_SHARES) {
		buf_addf(err, "the task has %zu shares, a snapshot's VM %d", cfg->nr_mounts,
		         SNAP_SHARES);
		return -E2BIG;
	}
	for (size_t i = 0; i < cfg->nr_mounts; i++)
		if (cfg->mounts[i].writable) {
			buf_addstr(err, "a snapshot's VM has no writable share");
			return -EINVAL;
		}
	if ((r = snap_init(cfg, &s, err)) < 0)
		goto out;
	r = read_manifest(&s, &size, hex, ram_hex, err);
	if (r == -ESTALE && s.qemu_stamped) {
		/* Ask QEMU itself before the snapshot is called stale. */
		s.qemu_asked = 1;
		buf_reset(err);
		if ((r = snap_deps(cfg, &s, err)) < 0)
			goto out;
		r = read_manifest(&s, &size, hex, ram_hex, err);
	}
	if (r == -ENOENT) {
		/* The first task of this image and size saves it. */
		buf_reset(err);
		if ((r = save(cfg, &s, err)) < 0)
			goto out;
		saved = r;
		r = read_manifest(&s, &size, hex, ram_hex, err);
	}
	if (r < 0) {
		bad = r == -ESTALE;
		goto out;
	}
	if ((in_fd = open(s.file.buf, O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		bad = r == -ENOENT;
		buf_addf(err, "cannot open the snapshot: %s", strerror(errno));
		goto out;
	}
	bad = 1; /* until it is found good */
	if (fstat(in_fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0222)) {
		r = -EPERM;
		buf_addstr(err, "the snapshot is not a read-only file");
		goto out;
	}
	if ((unsigned long long)st.st_size != size) {
		r = -EINVAL;
		buf_addf(err, "the snapshot is %s (%llu bytes, its manifest says %llu)",
		         (unsigned long long)st.st_size < size ? "truncated" : "too long",
		         (unsigned long long)st.st_size, size);
		goto out;
	}
	if ((r = fd_sha256(in_fd, &got, sum)) < 0 || got != size || strcmp(sum, hex)) {
		r = r < 0 ? r : -EINVAL;
		buf_addstr(err, "the snapshot does not match its manifest's digest");
		goto out;
	}
	if ((r = check_ram(cfg, &s, ram_hex, &ram_fd, err)) < 0) {
		bad = r != -EACCES;
		goto out;
	}
	bad = 0;
	if ((r = restore(cfg, &s, in_fd, ram_fd, vm, err)) < 0)
		goto out;
	vm->stamped = s.qemu_stamped | s.ram_stamped << 1;
	stamp_write(&s);
	/* Its size on disk: the stream, and the RAM file's pages that are not holes. */
	if (saved && fstat(ram_fd, &st) == 0)
		buf_addf(err, "saved the image's snapshot for %u MiB and %u CPU%s (%llu MB)",
		         vm_memory_mb(cfg), vm_cpus(cfg), vm_cpus(cfg) == 1 ? "" : "s",
		         (size + (unsigned long long)st.st_blocks * 512) / 1000000);
out:
	if (in_fd >= 0)
		close(in_fd);
	if (ram_fd >= 0)
		close(ram_fd);
	if (bad && discard(cfg, &s, hex))
		buf_addstr(err, "; it is removed, the next task saves a new one");
	snap_release(&s);
	return r;
}

int snapshot_boot(const struct vm_config *cfg, struct vm *vm)
{
	struct buf why = BUF_INIT;
	char note[sizeof(vm->note)];
	int ret;

	*vm = (struct vm)VM_INIT;
	if ((ret = vm_check_config(cfg)) < 0)
		return ret;
	ret = snapshot_start(cfg, vm, &why);
	/* Stopped (vm.h): not a cold boot, which the stop would only kill. */
	if (ret < 0 && cfg->stop && *cfg->stop) {
		buf_release(&why);
		return -EINTR;
	}
	/* The reasons are made short (above): this never cuts one. */
	snprintf(note, sizeof(note), "%s%s", ret < 0 ? "booting cold: " : "", why.buf);
	buf_release(&why);
	if (ret < 0)
		ret = vm_start(cfg, vm);
	if (ret == 0)
		memcpy(vm->note, note, sizeof(note));
	return ret;
}
