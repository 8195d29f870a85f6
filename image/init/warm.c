/*
 * aibox-init: what a snapshot's VM reads before it is saved, so that every
 * VM restored from it finds Claude Code in its page cache (docs/image.md,
 * "Snapshots").
 */
#include <dirent.h>
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
#include "base/spawn.h"
#include "task_int.h"
#include "base/banned.h"

#define WARM_CHUNK (1 << 20)
/* Well inside the saving VM's BOOT_MS (common/vm/snapshot.c), which counts this too. */
#define WARM_VERSION_MS 120000
/* The guest's dynamic loader: `--list` names what a program maps, as ldd does, never running it. */
#define WARM_LOADER   "/lib64/ld-linux-x86-64.so.2"
#define WARM_LIST_MAX 65536
/* The system's CA store, which Claude Code reads file by file at its start. */
#define WARM_CERTS     "/etc/ssl/certs"
#define WARM_CERTS_MAX 4096

/*
 * What a task starts besides Claude Code before its first request or right
 * after it: sshd (the session), git (the early clone, the status Claude Code
 * asks for), what Claude Code's start runs (sh, ps and grep) and the shell of
 * its Bash tool, whose environment it reads first (bash).  Names without a
 * slash are looked up in GUEST_PATH.
 */
static const char *const warm_programs[] = {"/usr/sbin/sshd", "git", "sh", "ps", "grep", "bash"};

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

/*
 * The files the dynamic loader maps for the program at path (its `--list`
 * output's absolute paths) into *files, one per line; 0, or -errno.
 */
static int loader_list(const char *path, struct buf *files)
{
	struct spawn sp = SPAWN_INIT;
	struct buf out = BUF_INIT;
	int ret;

	strvec_pushl(&sp.args, WARM_LOADER, "--list", path, NULL);
	strvec_push(&sp.env, "PATH=" GUEST_PATH);
	sp.env_replace = 1;
	sp.err = SPAWN_NULL;
	ret = spawn_capture(&sp, &out, WARM_LIST_MAX);
	spawn_clear(&sp);
	if (ret > 0)
		ret = -ENOEXEC; /* not a dynamic program, or no loader */
	/* "\tname => /path (0x...)" or "\t/path (0x...)": the absolute paths */
	for (const char *l = out.buf; ret == 0 && l && *l;) {
		const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
		const char *a = memchr(l, '/', (size_t)(end - l)), *z;

		if (a && (z = strstr(a, " (")) && z < end) {
			buf_add(files, a, (size_t)(z - a));
			buf_addch(files, '\n');
		}
		l = nl ? nl + 1 : NULL;
	}
	buf_release(&out);
	return ret;
}

/*
 * The programs of warm_programs[] and every file their loader maps, and the
 * CA store's files, read whole: the bytes read, which may be 0 (nothing of
 * it is needed for a right snapshot).
 */
static long long warm_task_files(void)
{
	struct buf files = BUF_INIT;
	long long total = 0, n;
	DIR *d;

	for (size_t i = 0; i < ARRAY_SIZE(warm_programs); i++) {
		char *path = strchr(warm_programs[i], '/') ? xstrdup(warm_programs[i])
		                                           : find_in_path(warm_programs[i]);
		int r;

		if (!path)
			continue;
		buf_reset(&files);
		buf_addf(&files, "%s\n", path);
		if ((r = loader_list(path, &files)) < 0)
			warning("cannot list what '%s' maps: %s", path, strerror(-r));
		for (char *f = files.buf, *nl; *f; f = nl + 1) {
			nl = strchr(f, '\n');
			*nl = '\0';
			if ((n = read_whole(f)) > 0)
				total += n;
		}
		free(path);
	}
	d = opendir(WARM_CERTS);
	for (int i = 0; d && i < WARM_CERTS_MAX; i++) {
		struct dirent *de = readdir(d);

		if (!de)
			break;
		if (de->d_name[0] == '.')
			continue;
		buf_reset(&files);
		buf_addf(&files, WARM_CERTS "/%s", de->d_name);
		/* A link is followed to its certificate; a folder reads as an error. */
		if ((n = read_whole(files.buf)) > 0)
			total += n;
	}
	if (d)
		closedir(d);
	buf_release(&files);
	return total;
}

int snap_warm(long long *bytes, long long *more)
{
	char *claude = find_in_path("claude");
	int r;

	*more = warm_task_files();
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
