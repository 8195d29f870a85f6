/*
 * aibox image list | build [--force] [NAME] | remove NAME
 *
 * Manages the image store (common/vm/image.h, docs/image.md).  `build` runs
 * image/build-image on the recipe; an unchanged recipe is not rebuilt.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "vm/image.h"
#include "base/opt.h"
#include "base/out.h"
#include "base/paths.h"
#include "vm/snapshot.h"
#include "task/task_group.h"
#include "base/spawn.h"
#include "vm/vm.h"
#include "base/guest_abi.h"
#include "base/banned.h"

static const char usage_text[] = "usage: aibox image list [--json]\n"
                                 "       aibox image build [--force] [<name>]\n"
                                 "       aibox image remove <name>\n";

/* Each subcommand's options (common/base/opt.h). */
static const struct opt_spec list_opts[] = {
    {"json", 0, OPT_FLAG, NULL, 'j', "as JSON"},
    {NULL, 0, 0, NULL, 0, NULL},
};
static const struct opt_spec build_opts[] = {
    {"force", 0, OPT_FLAG, NULL, 'f', "build again"},
    {NULL, 0, 0, NULL, 0, NULL},
};

/* A subcommand's options and its words, from 0 to max of them: the bits of the options given. */
static unsigned sub_args(int argc, char **argv, const struct opt_spec *options, size_t max,
                         struct strvec *words)
{
	unsigned flags = 0;

	opt_words_exit(argc, argv, options, max, &flags, words, usage_text);
	return flags;
}

static int mkdir_p(const char *path)
{
	char *p = xstrdup(path);
	int ret = 0;

	for (char *c = p + 1;; c++) {
		if (*c == '/' || !*c) {
			char save = *c;

			*c = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST) {
				ret = -errno;
				break;
			}
			*c = save;
			if (!save)
				break;
		}
	}
	free(p);
	return ret;
}

/* The value of the first manifest line starting with "key ". */
static const char *manifest_field(const struct buf *m, const char *key, struct buf *out)
{
	size_t klen = strlen(key);
	const char *line = m->buf;

	buf_reset(out);
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		if (len > klen && !strncmp(line, key, klen) && line[klen] == ' ') {
			buf_add(out, line + klen + 1, len - klen - 1);
			return out->buf;
		}
		line = nl ? nl + 1 : NULL;
	}
	buf_addch(out, '-');
	return out->buf;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A manifest's value as JSON: sanitized (common/base/out.h), so always a string. */
static json_t *text_json(const char *s)
{
	struct buf b = BUF_INIT;
	json_t *v;

	out_sanitize(&b, s, strlen(s));
	v = json_stringn(b.buf, b.len);
	buf_release(&b);
	return v;
}

static int cmd_list(int argc, char **argv)
{
	DIR *d;
	struct dirent *de;
	struct strvec names = STRVEC_INIT;
	struct buf dir = BUF_INIT, path = BUF_INIT, m = BUF_INIT, v = BUF_INIT;
	json_t *array = json_array();
	struct strvec none = STRVEC_INIT;
	int json = sub_args(argc, argv, list_opts, 0, &none) & 1;

	d = opendir(image_store());
	if (!d) {
		if (errno == ENOENT) {
			if (json)
				puts("[]");
			json_decref(array);
			return 0;
		}
		die_errno("cannot open '%s'", image_store());
	}
	while ((de = readdir(d)))
		if (image_name_ok(de->d_name) && image_dir(de->d_name, &dir) == 0)
			strvec_push(&names, de->d_name);
	closedir(d);
	qsort(names.v, names.nr, sizeof(*names.v), cmp_str);
	for (size_t i = 0; i < names.nr; i++) {
		buf_reset(&path);
		buf_reset(&m);
		buf_addf(&path, "%s/%s/manifest", image_store(), names.v[i]);
		if (buf_read_file(&m, path.buf, 1 << 20) < 0)
			continue;
		if (json) {
			/* docs/json.md, "aibox image list --json" */
			json_t *o = json_object();

			json_object_set_new(o, "name", json_string(names.v[i]));
			json_object_set_new(o, "built", text_json(manifest_field(&m, "built", &v)));
			json_object_set_new(o, "claude_code",
			                    text_json(manifest_field(&m, "claude-code", &v)));
			json_object_set_new(o, "kernel",
			                    text_json(manifest_field(&m, "kernel", &v)));
			json_array_append_new(array, o);
			continue;
		}
		printf("%s\tbuilt %s", names.v[i], manifest_field(&m, "built", &v));
		printf("\tclaude-code %s", manifest_field(&m, "claude-code", &v));
		printf("\tkernel %s\n", manifest_field(&m, "kernel", &v));
	}
	if (json) {
		char *text = json_dumps(array, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		if (text)
			puts(text);
		free(text);
	}
	json_decref(array);
	strvec_clear(&names);
	buf_release(&dir);
	buf_release(&path);
	buf_release(&m);
	buf_release(&v);
	return 0;
}

/*
 * After a build that made something: save the image's snapshots for a task
 * of the default size (common/config/config.h), and for the attempts of a
 * group on this machine when they get fewer CPUs (task_group_cpus() at
 * ATTEMPTS_MAX: the smallest share), so that the first task or group
 * restores them rather than saving them (docs/image.md, "Snapshots").  A
 * failure costs only that: the first task saves it, or boots cold.
 */
static void save_snapshot(const char *name)
{
	struct config cfg;
	struct buf dir = BUF_INIT, why = BUF_INIT;
	unsigned sizes[2];
	int nsizes = 0, share, r;

	config_init(&cfg);
	sizes[nsizes++] = (unsigned)cfg.cpus;
	if ((share = task_group_cpus(ATTEMPTS_MAX, host_cpus(), cfg.cpus)) > 0)
		sizes[nsizes++] = (unsigned)share;
	if (image_find(name, &dir, &why) < 0) {
		warning("the snapshot was not saved: %s (the first task saves it)", why.buf);
		nsizes = 0;
	}
	for (int i = 0; i < nsizes; i++) {
		struct vm_config vc = VM_CONFIG_INIT;

		vc.image_dir = dir.buf;
		vc.mode = GUEST_MODE_TASK;
		vc.memory_mb = (unsigned)cfg.memory_mib;
		vc.cpus = sizes[i];
		buf_reset(&why);
		r = snapshot_save(&vc, &why);
		if (r > 0)
			fprintf(
			    stderr,
			    "aibox-image: saved the snapshot for tasks of %u MiB and %u CPU%s\n",
			    vc.memory_mb, vc.cpus, vc.cpus == 1 ? "" : "s");
		else if (r < 0 && r != -EBUSY)
			warning("the snapshot was not saved: %s (the first task saves it)",
			        why.buf);
	}
	config_release(&cfg);
	buf_release(&dir);
	buf_release(&why);
}

static int cmd_build(int argc, char **argv)
{
	struct strvec words = STRVEC_INIT;
	const char *name = "default";
	int force = sub_args(argc, argv, build_opts, 1, &words) & 1, r;
	struct buf recipe = BUF_INIT, path = BUF_INIT, m = BUF_INIT, before = BUF_INIT;
	struct buf after = BUF_INIT;
	struct spawn sp = SPAWN_INIT;

	if (words.nr)
		name = words.v[0];
	if (!image_name_ok(name))
		die("bad image name '%s'", name);
	if (image_recipe_dir(name, &recipe) < 0)
		die("no recipe for image '%s' (in %s/image/ or %s/image/)", name, aibox_home(),
		    data_dir());
	if ((r = mkdir_p(image_store())) < 0)
		die_err(r, "cannot create '%s'", image_store());
	/* A build made something when the manifest's "built" line changed. */
	buf_addf(&path, "%s/%s/manifest", image_store(), name);
	if (buf_read_file(&m, path.buf, 1 << 20) >= 0)
		manifest_field(&m, "built", &before);
	strvec_pushf(&sp.args, "%s/image/build-image", data_dir());
	strvec_pushl(&sp.args, name, recipe.buf, image_store(), NULL);
	strvec_pushf(&sp.env, "AIBOX_INIT=%s/aibox-init", libexec_dir());
	if (force)
		strvec_push(&sp.env, "AIBOX_IMAGE_FORCE=1");
	sp.out = 2;
	r = spawn_run(&sp);
	spawn_clear(&sp);
	buf_release(&recipe);
	if (r < 0)
		die_err(r, "cannot run build-image");
	if (r != 0)
		die("cannot build image '%s'", name);
	buf_reset(&m);
	if (buf_read_file(&m, path.buf, 1 << 20) >= 0 &&
	    strcmp(manifest_field(&m, "built", &after), before.buf))
		save_snapshot(name);
	buf_release(&path);
	buf_release(&m);
	buf_release(&before);
	buf_release(&after);
	printf("%s/%s\n", image_store(), name);
	strvec_clear(&words);
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

static int cmd_remove(int argc, char **argv)
{
	struct buf dir = BUF_INIT, tmp = BUF_INIT;
	struct strvec words = STRVEC_INIT;
	const char *name;
	struct stat st;
	int ret = 0;

	sub_args(argc, argv, NULL, 1, &words);
	if (words.nr != 1) {
		error("remove takes one image name");
		usage_die(usage_text);
	}
	name = words.v[0];
	if (!image_name_ok(name))
		die("bad image name '%s'", name);
	buf_addf(&dir, "%s/%s", image_store(), name);
	if (lstat(dir.buf, &st) < 0 || !S_ISDIR(st.st_mode))
		die("no image '%s' in '%s'", name, image_store());
	/* Out of sight first, so nobody starts a VM on half an image. */
	buf_addf(&tmp, "%s/.remove-%s.%ld", image_store(), name, (long)getpid());
	if (rename(dir.buf, tmp.buf) < 0)
		die_errno("cannot remove '%s'", dir.buf);
	if (nftw(tmp.buf, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0) {
		error("cannot remove '%s': %s", tmp.buf, strerror(errno));
		ret = EXIT_REFUSED;
	}
	buf_release(&dir);
	buf_release(&tmp);
	strvec_clear(&words);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct opt_sub subs[] = {
	    {"list", list_opts}, {"build", build_opts}, {"remove", NULL}, {NULL, NULL}};
	struct buf why = BUF_INIT;
	int i;

	tool_init(argc, argv);
	i = opt_subcommand(argc, argv, &why);
	if (i == OPT_DESCRIBE)
		opt_describe_subs_exit(subs);
	if (i <= 0)
		usage_exit(i == 0, why.buf, usage_text);
	if (i == argc)
		usage_die(usage_text);
	if (!strcmp(argv[i], "list"))
		return cmd_list(argc - i, argv + i);
	if (!strcmp(argv[i], "build"))
		return cmd_build(argc - i, argv + i);
	if (!strcmp(argv[i], "remove"))
		return cmd_remove(argc - i, argv + i);
	error("unknown subcommand '%s'", argv[i]);
	usage_die(usage_text);
}
