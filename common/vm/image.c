/* The image store (image.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "vm/image.h"
#include "base/paths.h"
#include "base/banned.h"

const char *image_store(void)
{
	static char *store;
	struct buf b = BUF_INIT;
	const char *env = getenv("AIBOX_IMAGES"), *cache = getenv("XDG_CACHE_HOME");

	if (store)
		return store;
	if (env && *env)
		buf_addstr(&b, env);
	else if (cache && cache[0] == '/')
		buf_addf(&b, "%s/aibox/images", cache);
	else
		buf_addf(&b, "%s/.cache/aibox/images", getenv("HOME") ? getenv("HOME") : "");
	store = buf_detach(&b, NULL);
	return store;
}

int image_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n <= 64 && strchr("abcdefghijklmnopqrstuvwxyz0123456789", name[0]) &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int image_dir(const char *name, struct buf *out)
{
	static const char *const files[] = {"manifest", "vmlinuz", "initramfs", "rootfs.ext4"};
	struct buf p = BUF_INIT;
	int ret = 0;

	if (!image_name_ok(name))
		return -EINVAL;
	buf_reset(out);
	buf_addf(out, "%s/%s", image_store(), name);
	for (size_t i = 0; i < ARRAY_SIZE(files) && !ret; i++) {
		buf_reset(&p);
		buf_addf(&p, "%s/%s", out->buf, files[i]);
		if (access(p.buf, R_OK) < 0)
			ret = -ENOENT;
	}
	buf_release(&p);
	return ret;
}

int image_recipe_dir(const char *name, struct buf *out)
{
	if (!image_name_ok(name))
		return -EINVAL;
	buf_reset(out);
	buf_addf(out, "%s/image/%s", aibox_home(), name);
	if (access(out->buf, F_OK) == 0) {
		buf_addstr(out, "/recipe");
		if (access(out->buf, R_OK) < 0)
			return -ENOENT;
		buf_setlen(out, out->len - strlen("/recipe"));
		return 0;
	}
	buf_reset(out);
	buf_addf(out, "%s/image/%s/recipe", data_dir(), name);
	if (access(out->buf, R_OK) < 0)
		return -ENOENT;
	buf_setlen(out, out->len - strlen("/recipe"));
	return 0;
}

int image_find(const char *name, struct buf *out, struct buf *err)
{
	int ret = image_dir(name, out);

	if (ret == -ENOENT)
		buf_addf(err, "the image '%s' is not built: run 'aibox image build %s'", name,
		         name);
	else if (ret == -EINVAL)
		buf_addf(err, "'%.64s' is not an image name", name);
	return ret;
}
