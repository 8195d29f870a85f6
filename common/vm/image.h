/*
 * The image store: ${AIBOX_IMAGES:-${XDG_CACHE_HOME:-~/.cache}/aibox/images}/<name>/,
 * each image a folder with vmlinuz, initramfs, rootfs.ext4 and a manifest
 * (docs/image.md).  Recipes: $AIBOX_HOME/image/<name>/recipe, else the
 * one shipped in data_dir()/image/<name>/.
 */
#ifndef AIBOX_IMAGE_H
#define AIBOX_IMAGE_H

struct buf;

/* The store's folder (not created).  Never NULL; the string is static. */
const char *image_store(void);

/* 1 when name is a good image name: 1-64 of [a-z0-9._-], starting with [a-z0-9]. */
int image_name_ok(const char *name);

/*
 * The folder of the built image `name` into out.  0 when it holds a
 * manifest and the three artifacts, -EINVAL for a bad name, -ENOENT when
 * the image is not built.
 */
int image_dir(const char *name, struct buf *out);

/*
 * image_dir() with the reason a user reads, the one wording every tool uses:
 * "the image 'x' is not built: run 'aibox image build x'" (-ENOENT),
 * "'x' is not an image name" (-EINVAL), appended to err.
 */
int image_find(const char *name, struct buf *out, struct buf *err);

/* The folder of the recipe for `name` into out.  0, -EINVAL or -ENOENT. */
int image_recipe_dir(const char *name, struct buf *out);

#endif
