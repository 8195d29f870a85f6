#include "base/paths.h"

#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/banned.h"

static char *exe_dir_cache, *libexec_cache, *data_cache, *home_cache;

const char *exe_dir(void)
{
	char path[PATH_MAX];
	ssize_t n;
	char *slash;

	if (exe_dir_cache)
		return exe_dir_cache;
	n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0) {
		exe_dir_cache = xstrdup(".");
		return exe_dir_cache;
	}
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (slash)
		*slash = '\0';
	exe_dir_cache = xstrdup(path[0] ? path : "/");
	return exe_dir_cache;
}

static int is_build_tree(const char *dir)
{
	struct buf b = BUF_INIT;
	struct stat st;
	int ret;

	buf_addf(&b, "%s/../common/base/paths.h", dir);
	ret = stat(b.buf, &st) == 0;
	buf_release(&b);
	return ret;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

const char *libexec_dir(void)
{
	const char *d = exe_dir();
	struct buf b = BUF_INIT;

	if (libexec_cache)
		return libexec_cache;
	if (is_build_tree(d) || ends_with(d, "/libexec/aibox"))
		buf_addstr(&b, d);
	else
		buf_addf(&b, "%s/../libexec/aibox", d);
	libexec_cache = buf_detach(&b, NULL);
	return libexec_cache;
}

const char *data_dir(void)
{
	const char *d = exe_dir();
	struct buf b = BUF_INIT;
	const char *env = getenv("AIBOX_DATA_DIR");

	if (data_cache)
		return data_cache;
	if (env && *env)
		buf_addstr(&b, env);
	else if (is_build_tree(d))
		buf_addf(&b, "%s/..", d);
	else if (ends_with(d, "/libexec/aibox"))
		buf_addf(&b, "%s/../../share/aibox", d);
	else
		buf_addf(&b, "%s/../share/aibox", d);
	data_cache = buf_detach(&b, NULL);
	return data_cache;
}

const char *aibox_home(void)
{
	const char *env = getenv("AIBOX_HOME");
	const char *home;
	struct buf b = BUF_INIT;

	if (home_cache)
		return home_cache;
	if (env && *env) {
		home_cache = xstrdup(env);
		return home_cache;
	}
	home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());

		home = pw && pw->pw_dir ? pw->pw_dir : "";
	}
	buf_addf(&b, "%s/.aibox", home);
	home_cache = buf_detach(&b, NULL);
	return home_cache;
}

/* data_dir()/share/NAME in the source tree, else data_dir()/NAME; dir: a folder. */
static const char *data_path(struct buf *b, const char *name, int dir)
{
	struct stat st;

	buf_reset(b);
	buf_addf(b, "%s/share/%s", data_dir(), name);
	if (stat(b->buf, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
		return b->buf;
	buf_reset(b);
	buf_addf(b, "%s/%s", data_dir(), name);
	return b->buf;
}

const char *presets_dir(void)
{
	static struct buf b = BUF_INIT;

	return data_path(&b, "presets", 1);
}

const char *prices_file(void)
{
	static struct buf b = BUF_INIT;

	return data_path(&b, "prices", 0);
}

const char *temp_dir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

const char *user_prices_file(void)
{
	static struct buf b = BUF_INIT;

	buf_reset(&b);
	buf_addf(&b, "%s/prices", aibox_home());
	return b.buf;
}

const char *deps_cache_dir(void)
{
	static struct buf b = BUF_INIT;
	const char *env = getenv("AIBOX_DEPS_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	buf_reset(&b);
	if (env && *env)
		buf_addstr(&b, env);
	else if (xdg && xdg[0] == '/')
		buf_addf(&b, "%s/aibox/deps", xdg);
	else
		buf_addf(&b, "%s/.cache/aibox/deps", home ? home : "");
	return b.buf;
}

const char *deps_cache_max_file(void)
{
	static struct buf b = BUF_INIT;

	buf_reset(&b);
	buf_addf(&b, "%s/cache-max", aibox_home());
	return b.buf;
}

const char *deps_scope_key_file(void)
{
	static struct buf b = BUF_INIT;

	buf_reset(&b);
	buf_addf(&b, "%s/cache-scope-key", aibox_home());
	return b.buf;
}
