#include "task/complete.h"

#include <dirent.h>
#include <git2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/commands.h"
#include "base/err.h"
#include "vm/image.h"
#include "base/opt.h"
#include "base/paths.h"
#include "config/project.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "base/taskid.h"
#include "base/banned.h"

/* A table's description is small; more than this is no description. */
#define DESCRIBE_MAX (64 * 1024)

/* Words a command takes before or besides its flags (docs/package.md). */
enum kind { K_NONE, K_TASKS, K_IMAGES, K_PROJECTS, K_REFS, K_FILES, K_WORDS };

static const struct {
	const char *cmd;  /* "projects", "tasks show" */
	const char *word; /* after this first argument only; NULL: as the first argument */
	enum kind kind;
	const char *words; /* K_WORDS: space-separated */
} positional[] = {
    {"projects", NULL, K_WORDS, "list path remove check"},
    {"projects", "remove", K_PROJECTS, NULL},
    {"projects", "check", K_PROJECTS, NULL},
    {"policy", NULL, K_PROJECTS, NULL},
    {"image", NULL, K_WORDS, "list build remove"},
    {"image", "build", K_IMAGES, NULL},
    {"image", "remove", K_IMAGES, NULL},
    {"completion", NULL, K_WORDS, "bash zsh"},
    {"tasks show", NULL, K_TASKS, NULL},
    {"tasks log", NULL, K_TASKS, NULL},
    {"tasks compare", NULL, K_TASKS, NULL},
    {"bundle check", NULL, K_FILES, NULL},
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_str_rev(const void *a, const void *b)
{
	return -cmp_str(a, b);
}

static int has(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 1;
	return 0;
}

/* The commands as words: "task" NULL, "tasks" "clean", ... */
struct cmd {
	char *first, *second;
};

static size_t load_commands(struct cmd **out)
{
	struct strvec names = STRVEC_INIT;
	struct cmd *c;
	size_t n;

	commands_list(&names);
	n = names.nr;
	c = xcalloc(names.nr + 1, sizeof(*c));
	for (size_t i = 0; i < names.nr; i++) {
		const char *w = names.v[i] + 6, *dash = strchr(w, '-');

		c[i].first = dash ? xstrndup(w, (size_t)(dash - w)) : xstrdup(w);
		c[i].second = dash ? xstrdup(dash + 1) : NULL;
	}
	*out = c;
	strvec_clear(&names);
	return n;
}

static void free_commands(struct cmd *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].first);
		free(c[i].second);
	}
	free(c);
}

static int is_cmd(const struct cmd *c, size_t n, const char *first, const char *second)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(c[i].first, first) &&
		    (second ? c[i].second && !strcmp(c[i].second, second) : !c[i].second))
			return 1;
	return 0;
}

void complete_task_ids(struct strvec *out)
{
	struct buf co = BUF_INIT, why = BUF_INIT, dir = BUF_INIT;
	struct project p = PROJECT_INIT;
	struct strvec names = STRVEC_INIT;
	struct dirent *de;
	DIR *d;

	if (project_checkout_here(&co, &why) < 0 || project_find(co.buf, &p) < 0)
		goto out;
	buf_addf(&dir, "%s/tasks", p.dir);
	if (!(d = opendir(dir.buf)))
		goto out;
	while ((de = readdir(d)))
		if (task_name_valid(de->d_name))
			strvec_push(&names, de->d_name);
	closedir(d);
	qsort(names.v, names.nr, sizeof(*names.v), cmp_str_rev);
	for (size_t i = 0; i < names.nr; i++)
		strvec_push(out, names.v[i] + TASK_NAME_LEN - TASK_ID_LEN);
out:
	strvec_clear(&names);
	project_release(&p);
	buf_release(&co);
	buf_release(&why);
	buf_release(&dir);
}

static int add_ref(const char *name, void *payload)
{
	struct strvec *v = payload;

	if (!strncmp(name, "refs/heads/", 11) || !strncmp(name, "refs/tags/", 10))
		strvec_push(v, name);
	return 0;
}

void complete_refs(struct strvec *out)
{
	struct strvec refs = STRVEC_INIT;
	git_repository *repo = NULL;

	git_libgit2_init();
	if (git_repository_open_ext(&repo, ".", 0, NULL) == 0)
		git_reference_foreach_name(repo, add_ref, &refs);
	git_repository_free(repo);
	git_libgit2_shutdown();
	/* refs/heads/ sorts before refs/tags/: the branches, then the tags. */
	qsort(refs.v, refs.nr, sizeof(*refs.v), cmp_str);
	for (size_t i = 0; i < refs.nr; i++) {
		const char *name = refs.v[i] + (refs.v[i][5] == 'h' ? 11 : 10);

		if (!has(out, name))
			strvec_push(out, name);
	}
	strvec_clear(&refs);
}

/* Folders in dir whose name is an image name and that hold `file` (NULL: any). */
static void images_in(const char *dir, const char *file, struct strvec *out)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (!image_name_ok(de->d_name) || has(out, de->d_name))
			continue;
		buf_reset(&path);
		buf_addf(&path, "%s/%s/%s", dir, de->d_name, file);
		if (stat(path.buf, &st) == 0)
			strvec_push(out, de->d_name);
	}
	closedir(d);
	buf_release(&path);
}

void complete_images(struct strvec *out)
{
	struct strvec names = STRVEC_INIT;
	struct buf dir = BUF_INIT;

	images_in(image_store(), "manifest", &names);
	buf_addf(&dir, "%s/image", aibox_home());
	images_in(dir.buf, "recipe", &names);
	buf_reset(&dir);
	buf_addf(&dir, "%s/image", data_dir());
	images_in(dir.buf, "recipe", &names);
	qsort(names.v, names.nr, sizeof(*names.v), cmp_str);
	for (size_t i = 0; i < names.nr; i++)
		strvec_push(out, names.v[i]);
	strvec_clear(&names);
	buf_release(&dir);
}

/* An option of a command, from its table (common/base/opt.h). */
struct flag {
	char sub[32];   /* the subcommand it belongs to, "" for the command's own */
	char name[64];  /* "--json" */
	char value[64]; /* a choice's words, "" for others */
	enum opt_kind kind;
};

/* One line of opt_describe()'s: 1 when it is well formed. */
static int describe_line(const char *line, size_t len, struct flag *f)
{
	const char *field[5];
	size_t flen[5], n = 0;
	const char *p = line, *end = line + len;

	while (n < 5) {
		const char *tab = memchr(p, '\t', (size_t)(end - p));

		field[n] = p;
		flen[n] = (size_t)((tab ? tab : end) - p);
		n++;
		if (!tab)
			break;
		p = tab + 1;
	}
	if (n != 5 || flen[0] >= sizeof(f->sub) || flen[1] < 3 || flen[1] >= sizeof(f->name) ||
	    flen[4] >= sizeof(f->value) || strncmp(field[1], "--", 2) || flen[3] >= 16)
		return 0;
	{
		char kind[16];

		memcpy(kind, field[3], flen[3]);
		kind[flen[3]] = '\0';
		if (opt_kind_parse(kind, &f->kind) < 0)
			return 0;
	}
	memcpy(f->sub, field[0], flen[0]);
	f->sub[flen[0]] = '\0';
	memcpy(f->name, field[1], flen[1]);
	f->name[flen[1]] = '\0';
	memcpy(f->value, field[4], flen[4]);
	f->value[flen[4]] = '\0';
	return 1;
}

/* The options of the command `aibox-<prog>`, from its table (`aibox-<prog> --aibox-options`). */
static size_t command_flags(const char *prog, struct flag **out)
{
	struct spawn sp = SPAWN_INIT;
	struct buf path = BUF_INIT, desc = BUF_INIT;
	struct flag *f = NULL;
	size_t n = 0, alloc = 0;

	*out = NULL;
	if (!command_path(prog, &path))
		goto done;
	strvec_pushl(&sp.args, path.buf, OPT_DESCRIBE_ARG, NULL);
	sp.err = SPAWN_NULL;
	if (spawn_capture(&sp, &desc, DESCRIBE_MAX) != 0)
		goto done;
	for (const char *l = desc.buf, *end; l < desc.buf + desc.len; l = end + 1) {
		struct flag one;

		end = memchr(l, '\n', (size_t)(desc.buf + desc.len - l));
		if (!end)
			end = desc.buf + desc.len;
		if (!describe_line(l, (size_t)(end - l), &one))
			continue;
		if (n == alloc) {
			alloc = alloc ? 2 * alloc : 16;
			f = xrealloc(f, alloc * sizeof(*f));
		}
		f[n++] = one;
	}
	*out = f;
done:
	spawn_clear(&sp);
	buf_release(&path);
	buf_release(&desc);
	return n;
}

/* Append each space- or '|'-separated word of list. */
static void add_words(struct strvec *out, const char *list)
{
	char *copy = xstrdup(list);

	for (char *w = copy, *e; *w; w = e) {
		e = w + strcspn(w, " |");
		if (e > w) {
			char save = *e;

			*e = '\0';
			strvec_push(out, w);
			*e = save;
		}
		if (*e)
			e++;
	}
	free(copy);
}

/* Offer what kind names; COMPLETE_FILES for file names. */
static int add_kind(struct strvec *out, enum kind kind, const char *words)
{
	switch (kind) {
	case K_TASKS:
		complete_task_ids(out);
		break;
	case K_IMAGES:
		complete_images(out);
		break;
	case K_PROJECTS:
		projects_list(out);
		break;
	case K_REFS:
		complete_refs(out);
		break;
	case K_FILES:
		return COMPLETE_FILES;
	case K_WORDS:
		add_words(out, words);
		break;
	case K_NONE:
		break;
	}
	return 0;
}

/* Offer the values of the option f; COMPLETE_FILES for file names. */
static int add_value(struct strvec *out, const struct flag *f)
{
	switch (f->kind) {
	case OPT_TASK:
		return add_kind(out, K_TASKS, NULL);
	case OPT_IMAGE:
		return add_kind(out, K_IMAGES, NULL);
	case OPT_REF:
		return add_kind(out, K_REFS, NULL);
	case OPT_PROJECT:
		return add_kind(out, K_PROJECTS, NULL);
	case OPT_FILE:
		return COMPLETE_FILES;
	case OPT_CHOICE:
		return add_kind(out, K_WORDS, f->value);
	default:
		return 0;
	}
}

/*
 * The arguments of the command cmd ("task", "tasks show"), whose program is
 * prog, from argv[start] on, for the word at cword.
 */
static int complete_args(const char *cmd, const char *prog, int start, int cword, int argc,
                         const char *const *argv, struct strvec *out)
{
	const char *cur = cword < argc ? argv[cword] : "";
	const char *first = NULL;
	struct flag *flags;
	size_t nflags = command_flags(prog, &flags);
	int npos = 0, ret = 0;

	for (int i = start; i < cword; i++) {
		const char *w = argv[i];
		const struct flag *f = NULL;

		if (!strcmp(w, "--"))
			goto done; /* the rest is the prompt or a command */
		for (size_t j = 0; j < nflags && w[0] == '-'; j++)
			if (!strcmp(flags[j].name, w) &&
			    (!flags[j].sub[0] || (first && !strcmp(flags[j].sub, first))))
				f = &flags[j];
		if (f && f->kind != OPT_FLAG && i == cword - 1) {
			/* The word is this flag's value. */
			ret = add_value(out, f);
			goto done;
		}
		if (f && f->kind != OPT_FLAG)
			i++;
		else if (w[0] != '-' && !npos++)
			first = w;
	}
	if (cur[0] == '-') {
		for (size_t j = 0; j < nflags; j++)
			if (!flags[j].sub[0] || (first && !strcmp(flags[j].sub, first)))
				strvec_push(out, flags[j].name);
		goto done;
	}
	for (size_t k = 0; k < ARRAY_SIZE(positional); k++) {
		if (strcmp(positional[k].cmd, cmd))
			continue;
		if (positional[k].word ? npos == 1 && !strcmp(positional[k].word, first)
		                       : npos == 0) {
			ret = add_kind(out, positional[k].kind, positional[k].words);
			goto done;
		}
	}
done:
	free(flags);
	return ret;
}

int complete_words(int cword, int argc, const char *const *argv, struct strvec *out)
{
	struct strvec all = STRVEC_INIT;
	struct cmd *cmds;
	size_t ncmds = load_commands(&cmds);
	const char *cur = cword < argc ? argv[cword] : "";
	struct buf cmd = BUF_INIT, prog = BUF_INIT;
	int ret = 0;

	if (cword < 1 || cword > argc)
		goto filter;
	if (cword == 1) {
		for (size_t i = 0; i < ncmds; i++)
			if (!has(&all, cmds[i].first))
				strvec_push(&all, cmds[i].first);
		strvec_pushl(&all, "help", "--help", "--version", NULL);
		goto filter;
	}
	if (!strcmp(argv[1], "help")) {
		for (size_t i = 0; i < ncmds && cword <= 3; i++) {
			const char *w = cword == 2 ? cmds[i].first : cmds[i].second;

			if (w && (cword == 2 || !strcmp(cmds[i].first, argv[2])) && !has(&all, w))
				strvec_push(&all, w);
		}
		goto filter;
	}
	if (cword > 2 && argv[2][0] != '-' && is_cmd(cmds, ncmds, argv[1], argv[2])) {
		buf_addf(&cmd, "%s %s", argv[1], argv[2]);
		buf_addf(&prog, "aibox-%s-%s", argv[1], argv[2]);
		ret = complete_args(cmd.buf, prog.buf, 3, cword, argc, argv, &all);
		goto filter;
	}
	if (cword == 2)
		for (size_t i = 0; i < ncmds; i++)
			if (cmds[i].second && !strcmp(cmds[i].first, argv[1]))
				strvec_push(&all, cmds[i].second);
	if (is_cmd(cmds, ncmds, argv[1], NULL)) {
		buf_addf(&prog, "aibox-%s", argv[1]);
		ret = complete_args(argv[1], prog.buf, 2, cword, argc, argv, &all);
	}
filter:
	if (ret == COMPLETE_FILES)
		goto out;
	for (size_t i = 0; i < all.nr; i++)
		if (!strncmp(all.v[i], cur, strlen(cur)) && !has(out, all.v[i]))
			strvec_push(out, all.v[i]);
out:
	free_commands(cmds, ncmds);
	strvec_clear(&all);
	buf_release(&cmd);
	buf_release(&prog);
	return ret;
}
