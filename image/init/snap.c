/*
 * aibox-init: the wait of a snapshot's VM for its task (common/vm/snapshot.h has
 * the go message, docs/image.md "Snapshots" the design).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/guest_secrets.h"
#include "base/hex.h"
#include "base/num.h"
#include "vm/snapshot.h"
#include "base/banned.h"

#define GO_FILE      GUEST_RUN_DIR "/go" /* the go message without its seed */
#define DISK_WAIT_MS 20000

/* The share map: the task's tag -> the snapshot VM's slot tag. */
static char map_tag[SNAP_SHARES][GUEST_TAG_MAX + 1], map_slot[SNAP_SHARES][GUEST_TAG_MAX + 1];
static size_t map_nr;

int snap_mode(void)
{
	struct buf cmdline = BUF_INIT;
	int ret = 0;
	const char *p;

	if (buf_read_file(&cmdline, "/proc/cmdline", 65536) < 0)
		return 0;
	for (p = cmdline.buf; (p = strstr(p, SNAP_CMDLINE)); p++)
		if ((p == cmdline.buf || p[-1] == ' ') && strchr(" \n", p[strlen(SNAP_CMDLINE)])) {
			ret = 1;
			break;
		}
	buf_release(&cmdline);
	return ret;
}

const char *snap_share_tag(const char *tag)
{
	for (size_t i = 0; i < map_nr; i++)
		if (!strcmp(map_tag[i], tag))
			return map_slot[i];
	return tag;
}

/* A tag of the go message: guest_tag_valid() (common/base/guest_abi.h). */
static int copy_tag(char *dst, const char *src, size_t len)
{
	if (len > GUEST_TAG_MAX)
		return -EINVAL;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return guest_tag_valid(dst) ? 0 : -EINVAL;
}

/*
 * Parse a go message (common/vm/snapshot.h); with seed non-NULL the seed, the
 * time and the disk size too.  The share map goes into map_*.
 */
static int parse_go(char *msg, unsigned char *seed, struct timespec *now, long *disk, long *secrets)
{
	char *line, *next;
	int n = 0, ended = 0;

	map_nr = 0;
	*secrets = 0;
	for (line = msg; *line && !ended; line = next, n++) {
		char *nl = strchr(line, '\n');
		long a, b;

		if (!nl)
			return -EINVAL;
		*nl = '\0';
		next = nl + 1;
		if (n == 0) {
			if (strcmp(line, "aibox-go 1"))
				return -EINVAL;
		} else if (!strncmp(line, "time ", 5)) {
			char *sp = strchr(line + 5, ' ');

			if (!sp)
				return -EINVAL;
			*sp = '\0';
			if (parse_long(line + 5, 0, 1L << 40, &a) < 0 ||
			    parse_long(sp + 1, 0, 999999999, &b) < 0)
				return -EINVAL;
			now->tv_sec = a;
			now->tv_nsec = b;
		} else if (!strncmp(line, "seed ", 5)) {
			if (strlen(line + 5) != 2 * SNAP_SEED_BYTES ||
			    !hex_is_lower(line + 5, 2 * SNAP_SEED_BYTES))
				return -EINVAL;
			for (int i = 0; i < SNAP_SEED_BYTES; i++) {
				int hi = hex_digit(line[5 + 2 * i]),
				    lo = hex_digit(line[6 + 2 * i]);

				if (seed)
					seed[i] = (unsigned char)(hi << 4 | lo);
			}
		} else if (!strncmp(line, "disk ", 5)) {
			if (parse_long(line + 5, 1, 1L << 50, &a) < 0)
				return -EINVAL;
			*disk = a;
		} else if (!strncmp(line, "share ", 6)) {
			char *tag = line + 6, *sp = strchr(tag, ' ');

			if (!sp || map_nr >= SNAP_SHARES ||
			    copy_tag(map_tag[map_nr], tag, (size_t)(sp - tag)) < 0 ||
			    copy_tag(map_slot[map_nr], sp + 1, strlen(sp + 1)) < 0)
				return -EINVAL;
			map_nr++;
		} else if (!strncmp(line, "secrets ", 8)) {
			if (*secrets || parse_long(line + 8, 1, GUEST_SECRETS_MAX, &a) < 0)
				return -EINVAL;
			*secrets = a;
		} else if (!strcmp(line, "end")) {
			ended = 1;
		} else {
			return -EINVAL;
		}
	}
	return ended ? 0 : -EINVAL;
}

/* Feed the seed to the kernel's pool, credited, and reseed its CRNG from it. */
static int reseed(const unsigned char *seed)
{
	struct {
		struct rand_pool_info info;
		unsigned char bytes[SNAP_SEED_BYTES];
	} e;
	int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return error("cannot open /dev/urandom: %s", strerror(errno)), -errno;
	e.info.entropy_count = SNAP_SEED_BYTES * 8;
	e.info.buf_size = SNAP_SEED_BYTES;
	memcpy(e.bytes, seed, SNAP_SEED_BYTES);
	if (ioctl(fd, RNDADDENTROPY, &e) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0) {
		ret = -errno;
		error("cannot reseed the kernel's random pool: %s", strerror(errno));
	}
	explicit_bzero(&e, sizeof(e));
	close(fd);
	return ret;
}

/* Wait until the state disk shows the size the host resized it to. */
static int wait_disk(long bytes)
{
	char dev[64], path[128];
	long start = uptime_ms();
	struct buf v = BUF_INIT;
	int r;

	if ((r = find_disk(GUEST_SERIAL_STATE, dev, sizeof(dev))) < 0)
		return error("no state disk (serial %s)", GUEST_SERIAL_STATE), r;
	snprintf(path, sizeof(path), "/sys/block/%s/size", dev + strlen("/dev/"));
	for (;;) {
		long sectors;

		buf_reset(&v);
		if (buf_read_file(&v, path, 64) >= 0) {
			buf_rtrim(&v);
			if (parse_long(v.buf, 0, 1L << 50, &sectors) == 0 && sectors * 512 == bytes)
				break;
		}
		if (uptime_ms() - start > DISK_WAIT_MS) {
			buf_release(&v);
			return error("the state disk did not grow to %ld bytes", bytes), -ETIMEDOUT;
		}
		usleep(5000);
	}
	buf_release(&v);
	return 0;
}

/* Write SNAP_WAITING on the port, retrying while the host end is not there. */
static int say_waiting(int fd)
{
	for (int i = 0; i < 600; i++) {
		if (write(fd, SNAP_WAITING, strlen(SNAP_WAITING)) == (ssize_t)strlen(SNAP_WAITING))
			return 0;
		usleep(50000);
	}
	return -EIO;
}

/*
 * What the port fd has, up to max - *len bytes, into b + *len, waiting until
 * something comes.  0, or -errno.
 */
static int port_read(int fd, char *b, size_t *len, size_t max)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(fd, b + *len, max - *len);
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (n > 0) {
			*len += (size_t)n;
			return 0;
		}
		/* 0: the host end is not connected (yet). */
		usleep(10000);
	}
}

/*
 * The go message's secrets: the extra bytes that came with the message, then
 * the rest from fd, all `want` of them, into GUEST_GO_SECRETS (made new,
 * root's only; never a disk: /run is a tmpfs and the guest has no swap).
 * Every copy is wiped.  0, or -errno.
 */
static int take_secrets(int fd, const char *extra, size_t n, size_t want)
{
	char *b = xmalloc(want);
	size_t len = n;
	int out, r = 0;

	memcpy(b, extra, n);
	while (len < want && (r = port_read(fd, b, &len, want)) == 0)
		;
	if (r < 0) {
		error("cannot read the secrets on %s: %s", SNAP_PORT, strerror(-r));
		goto out;
	}
	out = open(GUEST_GO_SECRETS, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		r = -errno;
	} else {
		r = write_all(out, b, want);
		if (close(out) < 0 && !r)
			r = -errno;
	}
	if (r < 0) {
		error("cannot write '%s': %s", GUEST_GO_SECRETS, strerror(-r));
		unlink(GUEST_GO_SECRETS);
	}
out:
	explicit_bzero(b, want);
	free(b);
	return r;
}

int snap_wait_go(void)
{
	char port[64], msg[SNAP_GO_MAX + 1], *end = NULL;
	unsigned char seed[SNAP_SEED_BYTES];
	struct timespec now = {0, 0};
	struct buf keep = BUF_INIT;
	size_t len = 0, head;
	long disk = 0, secrets = 0;
	int fd, r;

	if ((r = find_port(SNAP_PORT, port, sizeof(port))) < 0)
		return error("no virtio-serial port named %s", SNAP_PORT), r;
	if ((fd = open(port, O_RDWR | O_CLOEXEC)) < 0)
		return error("cannot open '%s': %s", port, strerror(errno)), -errno;
	if (say_waiting(fd) < 0) {
		close(fd);
		return error("cannot write on '%s'", port), -EIO;
	}
	/*
	 * The snapshot is taken here; a restored VM goes on from this read.
	 * The secrets may follow the message in the same read.
	 */
	while (!(len >= 5 && (end = memmem(msg, len, "\nend\n", 5)))) {
		if (len == SNAP_GO_MAX) {
			close(fd);
			explicit_bzero(msg, sizeof(msg));
			return error("the go message is over %d bytes", SNAP_GO_MAX), -EFBIG;
		}
		if ((r = port_read(fd, msg, &len, SNAP_GO_MAX)) < 0) {
			close(fd);
			explicit_bzero(msg, sizeof(msg));
			return error("cannot read '%s': %s", port, strerror(-r)), r;
		}
	}
	head = (size_t)(end - msg) + 5;
	/* Kept for the re-executed PID 1 without the seed line. */
	for (const char *l = msg; l < msg + head;) {
		const char *nl = memchr(l, '\n', (size_t)(msg + head - l));

		if (strncmp(l, "seed ", 5))
			buf_add(&keep, l, (size_t)(nl - l + 1));
		l = nl + 1;
	}
	{
		char copy[SNAP_GO_MAX + 1];

		memcpy(copy, msg, head);
		copy[head] = '\0';
		r = parse_go(copy, seed, &now, &disk, &secrets);
		explicit_bzero(copy, sizeof(copy));
	}
	if (r < 0 || !now.tv_sec || !disk || len - head > (size_t)secrets) {
		close(fd);
		explicit_bzero(msg, sizeof(msg));
		buf_release(&keep);
		return error("a bad go message on %s", SNAP_PORT), -EINVAL;
	}
	if (secrets)
		r = take_secrets(fd, msg + head, len - head, (size_t)secrets);
	close(fd);
	explicit_bzero(msg, sizeof(msg));
	if (r < 0) {
		buf_release(&keep);
		return r;
	}
	r = reseed(seed);
	explicit_bzero(seed, sizeof(seed));
	if (r < 0)
		goto out;
	/* The snapshot's clock is the saving host's: take the task's. */
	if (clock_settime(CLOCK_REALTIME, &now) < 0) {
		r = -errno;
		error("cannot set the clock: %s", strerror(errno));
		goto out;
	}
	if ((r = wait_disk(disk)) < 0)
		goto out;
	if ((r = buf_write_file(&keep, GO_FILE, 0600)) < 0)
		error("cannot write '%s': %s", GO_FILE, strerror(-r));
out:
	buf_release(&keep);
	return r;
}

int snap_load_map(void)
{
	struct buf b = BUF_INIT;
	struct timespec now;
	long disk, secrets;
	ssize_t r = buf_read_file(&b, GO_FILE, SNAP_GO_MAX);
	int ret;

	if (r < 0)
		return error("cannot read '%s': %s", GO_FILE, strerror((int)-r)), (int)r;
	ret = parse_go(b.buf, NULL, &now, &disk, &secrets);
	if (ret < 0)
		error("'%s' is not a go message", GO_FILE);
	buf_release(&b);
	return ret;
}
