/* aibox-init: the kernel command line, the mounts, the settings, the state disk. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/spawn.h"
#include "task/task_settings.h"
#include "base/banned.h"

#define MSIZE_9P "msize=524288"

long uptime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int guest_mode(char *out, size_t n)
{
	struct buf cmdline = BUF_INIT;
	const char *p;
	ssize_t r = buf_read_file(&cmdline, "/proc/cmdline", 65536);
	int ret = -ENOENT;

	if (r < 0)
		return (int)r;
	for (p = cmdline.buf; (p = strstr(p, GUEST_CMDLINE_MODE)); p++) {
		size_t len;

		if (p != cmdline.buf && p[-1] != ' ')
			continue;
		p += strlen(GUEST_CMDLINE_MODE);
		len = strcspn(p, " \n");
		if ((len == strlen(GUEST_MODE_TASK) && !memcmp(p, GUEST_MODE_TASK, len)) ||
		    (len == strlen(GUEST_MODE_RUN) && !memcmp(p, GUEST_MODE_RUN, len))) {
			if (len >= n) {
				ret = -ENAMETOOLONG;
				break;
			}
			memcpy(out, p, len);
			out[len] = '\0';
			ret = 0;
		} else {
			ret = -EINVAL;
		}
		break;
	}
	buf_release(&cmdline);
	return ret;
}

static int do_mount(const char *src, const char *target, const char *type, unsigned long flags,
                    const char *data)
{
	if (mkdir(target, 0755) < 0 && errno != EEXIST)
		return error("cannot create '%s': %s", target, strerror(errno)), -errno;
	if (mount(src, target, type, flags, data) < 0) {
		int e = errno;

		error("cannot mount %s on '%s': %s", type ? type : src, target, strerror(e));
		return -e;
	}
	return 0;
}

int mount_early(void)
{
	int r;
	const unsigned long nx = MS_NOSUID | MS_NODEV | MS_NOEXEC;

	/* The initramfs hands over /proc, /sys and /dev mounted. */
	if (access("/proc/self", F_OK) < 0 && (r = do_mount("proc", "/proc", "proc", nx, NULL)) < 0)
		return r;
	if (access("/sys/class", F_OK) < 0 &&
	    (r = do_mount("sysfs", "/sys", "sysfs", nx, NULL)) < 0)
		return r;
	if (access("/dev/null", F_OK) < 0 &&
	    (r = do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL)) < 0)
		return r;
	if ((r = do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	                  "newinstance,ptmxmode=0666,mode=0620,gid=5")) < 0 ||
	    (r = do_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")) < 0 ||
	    (r = do_mount("cgroup2", "/sys/fs/cgroup", "cgroup2", nx, NULL)) < 0 ||
	    (r = do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")) < 0)
		return r;
	if (mkdir(GUEST_RUN_DIR, 0755) < 0 || mkdir("/run/sshd", 0755) < 0 ||
	    mkdir("/run/lock", 01777) < 0 || chmod("/run/lock", 01777) < 0)
		return error("cannot populate /run: %s", strerror(errno)), -errno;
	return 0;
}

int id_line_set(const char *file, const char *name, const char *line)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	const char *p, *end;
	size_t name_len = strlen(name);
	ssize_t n;
	int r;

	if ((n = buf_read_file(&in, file, 1024 * 1024)) < 0) {
		error("cannot read %s: %s", file, strerror((int)-n));
		return (int)n;
	}
	for (p = in.buf; p < in.buf + in.len; p = end) {
		end = memchr(p, '\n', (size_t)(in.buf + in.len - p));
		end = end ? end + 1 : in.buf + in.len;
		if ((size_t)(end - p) > name_len && !strncmp(p, name, name_len) &&
		    p[name_len] == ':')
			buf_addf(&out, "%s\n", line);
		else
			buf_add(&out, p, (size_t)(end - p));
	}
	if ((r = buf_write_file(&out, file, 0644)) < 0)
		error("cannot write %s: %s", file, strerror(-r));
	buf_release(&in);
	buf_release(&out);
	return r;
}

int root_shell_set(void)
{
	return id_line_set("/etc/passwd", "root", GUEST_ROOT_PASSWD_LINE);
}

int mount_task_share(void)
{
	return do_mount(GUEST_TAG_TASK, GUEST_TASK_DIR, "9p", MS_RDONLY | MS_NOSUID | MS_NODEV,
	                "trans=virtio,version=9p2000.L," MSIZE_9P ",cache=none");
}

void settings_clear(struct guest_settings *s)
{
	for (size_t i = 0; i < s->nr_mounts; i++) {
		free(s->mounts[i].tag);
		free(s->mounts[i].path);
	}
	free(s->mounts);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

int settings_read(struct guest_settings *s)
{
	struct task_settings_doc d;
	struct buf raw = BUF_INIT, why = BUF_INIT;
	ssize_t r;
	int ret = -EINVAL;

	memset(s, 0, sizeof(*s));
	s->user_uid = GUEST_USER_UID;
	s->user_gid = GUEST_USER_GID;
	r = buf_read_file(&raw, GUEST_TASK_DIR "/" GUEST_FILE_SETTINGS, GUEST_SETTINGS_MAX);
	if (r == -ENOENT) {
		s->path = xstrdup(GUEST_PROJECT_PATH);
		ret = 0;
		goto out;
	}
	if (r < 0) {
		error("cannot read " GUEST_FILE_SETTINGS ": %s", strerror((int)-r));
		ret = (int)r;
		goto out;
	}
	if (task_settings_parse_place(raw.buf, raw.len, &d, &why) < 0) {
		error("%s", why.buf);
		goto out;
	}
	s->path = xstrdup(d.s.path);
	s->mounts = xcalloc(d.s.nmounts + 1, sizeof(*s->mounts));
	for (size_t i = 0; i < d.s.nmounts; i++) {
		s->mounts[i].tag = xstrdup(d.s.mounts[i].tag);
		s->mounts[i].path = xstrdup(d.s.mounts[i].path);
	}
	s->nr_mounts = d.s.nmounts;
	task_settings_doc_release(&d);
	ret = 0;
out:
	buf_release(&why);
	buf_release(&raw);
	return ret;
}

int find_disk(const char *serial, char *dev, size_t n)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	struct buf path = BUF_INIT, val = BUF_INIT;
	int ret = -ENOENT;

	if (!d)
		return -errno;
	while (ret == -ENOENT && (de = readdir(d))) {
		if (strncmp(de->d_name, "vd", 2))
			continue;
		buf_reset(&path);
		buf_reset(&val);
		buf_addf(&path, "/sys/block/%s/serial", de->d_name);
		if (buf_read_file(&val, path.buf, 256) < 0)
			continue;
		buf_rtrim(&val);
		if (!strcmp(val.buf, serial)) {
			if ((size_t)snprintf(dev, n, "/dev/%s", de->d_name) >= n)
				ret = -ENAMETOOLONG;
			else
				ret = 0;
		}
	}
	closedir(d);
	buf_release(&path);
	buf_release(&val);
	return ret;
}

/* mkdir -p, each new component owned by uid:gid with mode. */
static int mkdir_p(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	char *p = xstrdup(path);
	int ret = 0;

	for (char *c = p + 1;; c++) {
		if (*c == '/' || *c == '\0') {
			char save = *c;

			*c = '\0';
			if (mkdir(p, mode) == 0) {
				if (chown(p, uid, gid) < 0) {
					ret = -errno;
					break;
				}
			} else if (errno != EEXIST) {
				ret = -errno;
				break;
			}
			*c = save;
			if (!save)
				break;
		}
	}
	if (ret < 0)
		error("cannot create '%s': %s", p, strerror(-ret));
	free(p);
	return ret;
}

static int bind_dir(const char *src, const char *target)
{
	int r = mkdir_p(target, 0755, 0, 0);

	if (r < 0)
		return r;
	if (mount(src, target, NULL, MS_BIND, NULL) < 0) {
		r = -errno;
		error("cannot bind '%s' on '%s': %s", src, target, strerror(errno));
	}
	return r;
}

int state_disk_setup(const struct guest_settings *s)
{
	char dev[64];
	struct spawn sp = SPAWN_INIT;
	int r;

	if ((r = find_disk(GUEST_SERIAL_STATE, dev, sizeof(dev))) < 0) {
		error("no state disk (serial %s)", GUEST_SERIAL_STATE);
		return r;
	}
	/*
	 * A throwaway disk: no journal (nothing to recover after a crash), and
	 * lazy init so formatting writes a few MB whatever the disk's size.
	 */
	strvec_pushl(&sp.args, "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E",
	             "lazy_itable_init=1,nodiscard", "-L", "aibox-state", dev, NULL);
	sp.out = SPAWN_NULL;
	r = spawn_run(&sp);
	spawn_clear(&sp);
	if (r != 0) {
		error("mkfs.ext4 %s failed (%d)", dev, r);
		return r < 0 ? r : -EIO;
	}
	if ((r = do_mount(dev, GUEST_STATE_DIR, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL)) <
	    0)
		return r;
	if ((r = mkdir_p(GUEST_STATE_DIR "/home", 0755, GUEST_USER_UID, GUEST_USER_GID)) < 0 ||
	    (r = mkdir_p(GUEST_STATE_DIR "/project", 0755, GUEST_USER_UID, GUEST_USER_GID)) < 0 ||
	    (r = mkdir_p(GUEST_STATE_DIR "/tmp", 01777, 0, 0)) < 0 ||
	    (r = mkdir_p(GUEST_STATE_DIR "/var-tmp", 01777, 0, 0)) < 0)
		return r;
	if (chmod(GUEST_STATE_DIR "/tmp", 01777) < 0 ||
	    chmod(GUEST_STATE_DIR "/var-tmp", 01777) < 0)
		return -errno;
	if ((r = bind_dir(GUEST_STATE_DIR "/home", GUEST_HOME)) < 0 ||
	    (r = bind_dir(GUEST_STATE_DIR "/project", s->path)) < 0 ||
	    (r = bind_dir(GUEST_STATE_DIR "/tmp", "/tmp")) < 0 ||
	    (r = bind_dir(GUEST_STATE_DIR "/var-tmp", "/var/tmp")) < 0)
		return r;
	return 0;
}

int mount_extra(const struct guest_settings *s)
{
	for (size_t i = 0; i < s->nr_mounts; i++) {
		const struct guest_mount *m = &s->mounts[i];
		int home = !strncmp(m->path, GUEST_HOME "/", strlen(GUEST_HOME) + 1);
		int r;

		/*
		 * Folders made under the home belong to the user, like the home
		 * (in run mode a 9p share, where only the host user's ids work).
		 */
		r = mkdir_p(m->path, 0755, home ? s->user_uid : 0, home ? s->user_gid : 0);
		if (r < 0)
			return r;
		r = do_mount(snap_share_tag(m->tag), m->path, "9p",
		             MS_RDONLY | MS_NOSUID | MS_NODEV,
		             "trans=virtio,version=9p2000.L," MSIZE_9P);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Copy src to dst (created 0600, owned by root), at most 64 KiB. */
static int copy_small(const char *src, const char *dst)
{
	struct buf b = BUF_INIT;
	ssize_t r = buf_read_file(&b, src, 65536);
	int ret;

	if (r < 0) {
		error("cannot read '%s': %s", src, strerror((int)-r));
		buf_release(&b);
		return (int)r;
	}
	ret = buf_write_file(&b, dst, 0600);
	if (ret == 0 && chmod(dst, 0600) < 0)
		ret = -errno;
	if (ret < 0)
		error("cannot write '%s': %s", dst, strerror(-ret));
	buf_release(&b);
	return ret;
}

int ssh_prepare(void)
{
	int r;

	if (mkdir(GUEST_SSH_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((r = copy_small(GUEST_TASK_DIR "/" GUEST_SSH_SUBDIR "/" GUEST_SSH_HOST_KEY,
	                    GUEST_SSH_DIR "/" GUEST_SSH_HOST_KEY)) < 0 ||
	    (r = copy_small(GUEST_TASK_DIR "/" GUEST_SSH_SUBDIR "/" GUEST_SSH_AUTH,
	                    GUEST_SSH_DIR "/" GUEST_SSH_AUTH)) < 0)
		return r;
	return 0;
}
