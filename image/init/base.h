/*
 * The base of aibox-init, PID 1 in the guest: the mounts, the state disk, the
 * network and the SSH server on the private channel.  The guest layout these
 * functions make is documented in docs/image.md; the launcher that boots it
 * is common/vm/vm.h.
 *
 * Every function returns 0 or a negative errno and prints what went wrong
 * with error() (to the console), so PID 1 can stop at the first failure and
 * power off with the reason on the console.
 */
#ifndef AIBOX_INIT_BASE_H
#define AIBOX_INIT_BASE_H

#include <stddef.h>
#include <sys/types.h>

#include "base/guest_abi.h" /* the paths, tags and settings the host shares */

#define GUEST_SSH_DIR                                                                              \
	GUEST_RUN_DIR "/" GUEST_SSH_SUBDIR /* host key + authorized_keys, root only                \
	                                    */
#define GUEST_SESSION_FLAG GUEST_RUN_DIR "/session-started"
/*
 * Root's line in /etc/passwd: its shell is the init (root_shell_set()), which
 * hands any login but the forced command to GUEST_ROOT_SHELL, root's shell in
 * the root disk as Debian makes it.
 */
#define GUEST_ROOT_PASSWD_LINE "root:x:0:0:root:/root:" GUEST_INIT_PATH
#define GUEST_ROOT_SHELL       "/bin/bash"
#define GUEST_ROOT_SHELL_NAME  "bash"
/* How sshd runs a command through a login shell: `SHELL -c COMMAND`. */
#define GUEST_SHELL_COMMAND_FLAG "-c"

/* The settings the base needs (the task mode reads the rest itself). */
struct guest_mount {
	char *tag;
	char *path;
};

struct guest_settings {
	char *path; /* where the project lives, default /project */
	struct guest_mount *mounts;
	size_t nr_mounts;
	/* The user aibox: GUEST_USER_UID/GID, the host's in run mode (run_setup()). */
	uid_t user_uid;
	gid_t user_gid;
};

/*
 * The mode from the kernel command line (aibox.mode=task|run) into out.
 * -ENOENT when absent, -EINVAL when not one of the known modes.
 */
int guest_mode(char *out, size_t n);

/* proc, sys, devtmpfs (kept from the initramfs), devpts, /dev/shm, cgroup2, /run. */
int mount_early(void);

/*
 * Replace the line of `name` in the passwd or group file `file` with `line`
 * (the whole file rewritten; other lines as they were).
 */
int id_line_set(const char *file, const char *name, const char *line);

/*
 * Root's login shell is aibox-init itself (GUEST_ROOT_PASSWD_LINE in
 * /etc/passwd, in the root's writable layer): sshd runs the forced command
 * as `aibox-init -c GUEST_FORCED_COMMAND`, which the init runs with no shell
 * between; any other -c, or a login, execs GUEST_ROOT_SHELL as sshd would
 * have (docs/image.md, "The guest").
 */
int root_shell_set(void);

/* The task share at GUEST_TASK_DIR, read-only. */
int mount_task_share(void);

/*
 * Read GUEST_TASK_DIR/settings.json (a missing file means the defaults)
 * with the one parser, task_settings_parse() (common/task/task_settings.h): what
 * it refuses is refused here with -EINVAL.
 */
int settings_read(struct guest_settings *s);
void settings_clear(struct guest_settings *s);

/*
 * Format the state disk (found by its serial), mount it at GUEST_STATE_DIR,
 * and put /home/aibox, the project folder, /tmp and /var/tmp on it.
 */
int state_disk_setup(const struct guest_settings *s);

/* The config's mounts (9p tags), read-only, at their paths. */
int mount_extra(const struct guest_settings *s);

/* lo up; eth0 at 10.0.2.15/24, no default route, no DNS. */
int net_setup(void);

/* Copy the share's SSH host key and authorized_keys to GUEST_SSH_DIR (0600, root). */
int ssh_prepare(void);

/* The device of the virtio-serial port named `name`, into path.  -ENOENT if none. */
int find_port(const char *name, char *path, size_t n);

/*
 * Relay sessions on the SSH port to `sshd -i` until the VM should power off.
 * In task mode that is when a session command has run (GUEST_SESSION_FLAG) and
 * its connection ended, or when the host went away.  Never returns 0.
 */
int ssh_relay_loop(const char *port, int task_mode);

/* The /dev node of the virtio disk whose serial is `serial`, into dev.  -ENOENT if none. */
int find_disk(const char *serial, char *dev, size_t n);

/*
 * A snapshot's VM (common/vm/snapshot.h, docs/image.md "Snapshots"):
 * snap_mode() is 1 when the kernel command line has aibox.snapshot=1.
 * snap_wait_go() says SNAP_WAITING on the port SNAP_PORT, waits for the go
 * message (the snapshot is taken during that wait), reseeds the kernel's
 * random pool with its seed, sets the clock, waits for the state disk's new
 * size and keeps the rest of the message for snap_load_map(), which PID 1
 * calls again after it re-executed itself; the secrets that came after the
 * message, if any, go to GUEST_GO_SECRETS for the task to take.
 * snap_share_tag() is the tag a settings.json mount tag is served under
 * (itself outside a snapshot).
 */
int snap_mode(void);
int snap_wait_go(void);
int snap_load_map(void);
const char *snap_share_tag(const char *tag);

/*
 * Before a snapshot's VM says it waits: read whole what a task starts before
 * Claude Code's first request (sshd, git, sh, ps, grep, bash, each with every
 * file its dynamic loader maps, and the CA store's files: their bytes in *more),
 * then Claude Code's binary, and run `claude --version` once as the task's
 * user (no home, output dropped), so the page cache the snapshot holds has
 * what their starts read.  0 with the binary's size in *bytes, or -errno
 * after a warning (the snapshot is still right, only colder).
 */
int snap_warm(long long *bytes, long long *more);

/* Milliseconds since boot, for the console's timings. */
long uptime_ms(void);

#endif
