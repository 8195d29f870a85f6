/*
 * aibox-init: what a snapshot's VM reads before it is saved, so that every
 * VM restored from it finds Claude Code in its page cache (docs/image.md,
 * "Snapshots").
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "base/err.h"
#include "task_int.h"
#include "base/banned.h"

#define WARM_CHUNK (1 << 20)
/* Well inside the saving VM's BOOT_MS (common/vm/snapshot.c), which counts this too. */
#define WARM_VERSION_MS 120000

/* Read the file at path to its end; its bytes or -errno. */
static long long read_whole(const char *path)
{
	static char chunk[WARM_CHUNK];
	long long total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	return total;
}

/*
 * Run `claude --version` as the task's user with nothing of a task (no home,
 * no network, output to /dev/null) and wait for it: what its start maps (the
 * libraries, the loader's cache) is read too.  Its exit status, 128 + signal,
 * or -errno; killed after WARM_VERSION_MS.
 */
static int run_version(const char *claude)
{
	const char *argv[] = {claude, "--version", NULL};
	const char *envp[] = {"PATH=" GUEST_PATH, "HOME=/nonexistent", NULL};
	long start = uptime_ms();
	int status;
	pid_t pid = fork(), w;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;
		int null = open("/dev/null", O_RDWR);
		gid_t gid = GUEST_USER_GID;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
		    chdir("/") < 0 || setgroups(1, &gid) < 0 || setgid(GUEST_USER_GID) < 0 ||
		    setuid(GUEST_USER_UID) < 0)
			_exit(127);
		execve(claude, (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	while ((w = waitpid(pid, &status, WNOHANG)) == 0) {
		if (uptime_ms() - start > WARM_VERSION_MS) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return 128 + SIGKILL;
		}
		usleep(20000);
	}
	if (w < 0)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int snap_warm(long long *bytes)
{
	char *claude = find_in_path("claude");
	int r;

	if (!claude) {
		warning("cannot warm the page cache: no claude in %s", GUEST_PATH);
		return -ENOENT;
	}
	*bytes = read_whole(claude);
	if (*bytes < 0) {
		r = (int)*bytes;
		warning("cannot read '%s': %s", claude, strerror(-r));
	} else if ((r = run_version(claude)) < 0) {
		warning("cannot run '%s --version': %s", claude, strerror(-r));
	} else if (r) {
		warning("'%s --version' exited with %d", claude, r);
		r = -EIO;
	}
	free(claude);
	return r;
}
