/*
 * aibox projects [list [--json]] list the projects
 * aibox projects path            the current checkout's project folder (made if new)
 * aibox projects remove NAME     remove a project's folder, unless it is in use
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/out.h"
#include "base/paths.h"
#include "config/project.h"
#include "net/dep_cache.h"
#include "base/rmtree.h"
#include "base/strvec.h"
#include "base/taskid.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox projects [list [--json]]\n"
    "       aibox projects path\n"
    "       aibox projects remove NAME\n"
    "       aibox projects check [NAME]\n"
    "\n"
    "    list         the projects: name, tasks, running tasks, checkout, folder\n"
    "                 (--json: one JSON array, keys in docs/json.md)\n"
    "    path         print the folder of the current checkout's project, making it\n"
    "                 (with the default config) when it is new\n"
    "    remove NAME  remove the project's folder, its config, home and tasks, and\n"
    "                 its scope of the dependency cache; a project in use by a\n"
    "                 task or aibox run is left alone\n"
    "    check [NAME] check the config of the current checkout's project, or of NAME\n"
    "    -h, --help   show this help\n"
    "\n"
    "Exit status: 0 done, 1 the project was left alone or not all removed, or its\n"
    "config is refused, 2 usage or error.\n";

/* Control characters in a path would reach the terminal: show them as '?'. */
static char *printable(const char *s)
{
	char *r = xstrdup(s);

	for (char *p = r; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return r;
}

/* Count a project's tasks and running tasks; -1 each when it cannot. */
static void count_tasks(const char *dir, long *tasks, long *running)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	int fd;
	DIR *d;

	*tasks = *running = 0;
	buf_addf(&path, "%s/tasks", dir);
	fd = open(path.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	buf_release(&path);
	if (fd < 0) {
		if (errno != ENOENT)
			*tasks = *running = -1;
		return;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		*tasks = *running = -1;
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int lock_fd, ret;

		if (!task_name_valid(de->d_name) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		(*tasks)++;
		ret = task_check(fd, de->d_name, &lock_fd);
		if (lock_fd >= 0)
			close(lock_fd);
		if (ret == 1 && *running >= 0)
			(*running)++;
		else if (ret < 0)
			*running = -1;
	}
	closedir(d);
}

static void add_count(struct strvec *col, long n)
{
	if (n < 0)
		strvec_push(col, "?");
	else
		strvec_pushf(col, "%ld", n);
}

/* One project of `list --json` (docs/json.md). */
static json_t *project_json(const struct project *p, long tasks, long running)
{
	json_t *o = json_object();
	struct buf b = BUF_INIT;

	json_object_set_new(o, "name", json_string(p->name));
	json_object_set_new(o, "tasks", tasks < 0 ? json_null() : json_integer(tasks));
	json_object_set_new(o, "running", running < 0 ? json_null() : json_integer(running));
	if (p->checkout)
		out_sanitize(&b, p->checkout, strlen(p->checkout));
	json_object_set_new(o, "checkout", p->checkout ? json_stringn(b.buf, b.len) : json_null());
	buf_reset(&b);
	out_sanitize(&b, p->dir, strlen(p->dir));
	json_object_set_new(o, "folder", json_stringn(b.buf, b.len));
	buf_release(&b);
	return o;
}

static int cmd_list(int json)
{
	json_t *array = json_array();
	struct strvec names = STRVEC_INIT;
	struct strvec cols[5] = {STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, STRVEC_INIT};
	static const char *const heads[5] = {"NAME", "TASKS", "RUNNING", "CHECKOUT", "FOLDER"};
	size_t width[5];
	int ret = projects_list(&names);

	if (ret < 0)
		die_err(ret, "cannot read '%s/projects'", aibox_home());
	if (!names.nr && json)
		puts("[]");
	if (!names.nr) {
		json_decref(array);
		fprintf(stderr,
		        "%s: no projects yet; `aibox projects path` in a checkout makes one\n",
		        progname);
		return 0;
	}
	for (int k = 0; k < 5; k++)
		strvec_push(&cols[k], heads[k]);
	for (size_t i = 0; i < names.nr; i++) {
		struct project p = PROJECT_INIT;
		long tasks = -1, running = -1;

		if (project_by_name(names.v[i], &p) < 0)
			continue;
		count_tasks(p.dir, &tasks, &running);
		if (json)
			json_array_append_new(array, project_json(&p, tasks, running));
		strvec_push(&cols[0], p.name);
		add_count(&cols[1], tasks);
		add_count(&cols[2], running);
		{
			char *co = printable(p.checkout ? p.checkout : "-");
			char *dir = printable(p.dir);

			strvec_push(&cols[3], co);
			strvec_push(&cols[4], dir);
			free(co);
			free(dir);
		}
		project_release(&p);
	}
	if (json) {
		char *text = json_dumps(array, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		if (text)
			puts(text);
		free(text);
		goto out;
	}
	for (int k = 0; k < 5; k++) {
		width[k] = 0;
		for (size_t i = 0; i < cols[k].nr; i++)
			if (strlen(cols[k].v[i]) > width[k])
				width[k] = strlen(cols[k].v[i]);
	}
	for (size_t i = 0; i < cols[0].nr; i++)
		printf("%-*s  %*s  %*s  %-*s  %s\n", (int)width[0], cols[0].v[i], (int)width[1],
		       cols[1].v[i], (int)width[2], cols[2].v[i], (int)width[3], cols[3].v[i],
		       cols[4].v[i]);
out:
	json_decref(array);
	for (int k = 0; k < 5; k++)
		strvec_clear(&cols[k]);
	strvec_clear(&names);
	return 0;
}

static int cmd_path(void)
{
	struct buf checkout = BUF_INIT, why = BUF_INIT;
	struct project p = PROJECT_INIT;
	int created = 0, ret;

	if (project_checkout_here(&checkout, &why) < 0)
		die("%s", why.buf);
	ret = project_open(checkout.buf, &p, &created);
	if (ret < 0)
		die_err(ret, "cannot make the project folder for '%s' in '%s/projects'",
		        checkout.buf, aibox_home());
	if (created)
		fprintf(stderr, "%s: made project '%s' for %s\n", progname, p.name, checkout.buf);
	printf("%s\n", p.dir);
	project_release(&p);
	buf_release(&checkout);
	return 0;
}

static void find_current(struct project *p)
{
	struct buf checkout = BUF_INIT;
	struct buf why = BUF_INIT;
	int ret;

	if (project_checkout_here(&checkout, &why) < 0)
		die("%s", why.buf);
	ret = project_find(checkout.buf, p);
	if (ret == -ENOENT)
		die("this checkout has no project yet (`aibox projects path` makes it)");
	if (ret < 0)
		die_err(ret, "cannot read the projects in '%s/projects'", aibox_home());
	buf_release(&checkout);
	buf_release(&why);
}

/* The project called name into p, or die saying why there is none. */
static void find_named(const char *name, struct project *p)
{
	int ret;

	if (!project_name_valid(name))
		die("'%s' is not a project name (see `aibox projects`)", name);
	ret = project_by_name(name, p);
	if (ret == -ENOENT)
		die("no project '%s' (see `aibox projects`)", name);
	if (ret < 0)
		die_err(ret, "cannot read project '%s'", name);
}

static int cmd_check(const char *name)
{
	struct project p = PROJECT_INIT;
	struct buf path = BUF_INIT, err = BUF_INIT;
	struct config cfg;
	int ret;

	if (name)
		find_named(name, &p);
	else
		find_current(&p);
	buf_addf(&path, "%s/config.yaml", p.dir);
	ret = config_load(&cfg, path.buf, &err);
	if (ret == -EINVAL) {
		fprintf(stderr, "%s\n", err.buf);
		ret = EXIT_REFUSED;
	} else if (ret < 0) {
		die("%s", err.buf);
	} else {
		printf("%s: fine\n", path.buf);
	}
	config_release(&cfg);
	project_release(&p);
	buf_release(&path);
	buf_release(&err);
	return ret;
}

/* 1 when a task of the project runs (its own lock held), -1 when that cannot be told. */
static int any_task_running(const char *dir)
{
	long tasks, running;

	count_tasks(dir, &tasks, &running);
	return running < 0 ? -1 : running > 0;
}

/*
 * What the tasks of project name kept in the dependency cache with a
 * credential goes with it: a later project given its name must not get it
 * (docs/cache.md, "Scopes").  0, or -1 when not all of it could go (said).
 */
static int drop_cached(const char *name)
{
	struct dep_cache c;
	struct buf scope = BUF_INIT, why = BUF_INIT;
	struct stat st;
	size_t removed = 0;
	int ret = 0;

	dep_cache_project_scope(name, &scope);
	if (!scope.len || stat(deps_cache_dir(), &st) < 0)
		goto out;
	if (dep_cache_open(&c, deps_cache_dir(), DEP_CACHE_DEFAULT_MAX, NULL, &why) < 0 ||
	    (ret = dep_cache_drop_scope(&c, scope.buf, &removed, &why)) < 0) {
		error("cannot remove the dependency cache's entries of project '%s': %s", name,
		      why.buf);
		ret = -1;
	}
	if (c.root)
		dep_cache_close(&c);
	if (removed)
		printf("removed %zu entr%s of project '%s' from the dependency cache\n", removed,
		       removed == 1 ? "y" : "ies", name);
out:
	buf_release(&scope);
	buf_release(&why);
	return ret;
}

static int cmd_remove(const char *name)
{
	struct project p = PROJECT_INIT;
	struct rmtree_stats st = {0};
	struct buf where = BUF_INIT, pdir = BUF_INIT, size = BUF_INIT;
	int lock, pfd, ret;

	find_named(name, &p);
	lock = project_lock(p.dir, PROJECT_LOCK_EXCLUSIVE | PROJECT_LOCK_NONBLOCK);
	if (lock == -EWOULDBLOCK) {
		error("project '%s' is in use by a task or aibox run: left alone", name);
		project_release(&p);
		return EXIT_REFUSED;
	}
	if (lock == -ENOENT)
		die("project '%s' was removed meanwhile", name);
	if (lock < 0)
		die_err(lock, "cannot lock project '%s'", name);
	ret = any_task_running(p.dir);
	if (ret) {
		if (ret < 0)
			error("cannot tell whether the tasks of project '%s' run: left alone",
			      name);
		else
			error("project '%s' has a running task: left alone", name);
		close(lock);
		project_release(&p);
		return EXIT_REFUSED;
	}
	projects_dir(&pdir);
	pfd = open(pdir.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		die_errno("cannot open '%s'", pdir.buf);
	ret = rmtree_at(pfd, name, &st, &where);
	close(pfd);
	close(lock);
	format_bytes(&size, st.bytes);
	if (ret < 0) {
		error("cannot remove '%s/%s': %s", pdir.buf, where.buf, strerror(-ret));
		error("project '%s' is partly removed (%s freed); fix that and run this again",
		      name, size.buf);
		ret = EXIT_REFUSED;
	} else {
		printf("removed project '%s' (%s, freed %s)\n", name, p.dir, size.buf);
		if (drop_cached(name) < 0)
			ret = EXIT_REFUSED;
	}
	project_release(&p);
	buf_release(&where);
	buf_release(&pdir);
	buf_release(&size);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct opt_spec json[] = {
	    {"json", 0, OPT_FLAG, NULL, 'j', "one JSON array, keys in docs/json.md"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	static const struct opt_sub subs[] = {
	    {"list", json}, {"path", NULL}, {"check", NULL}, {"remove", NULL}, {NULL, NULL}};
	struct strvec words = STRVEC_INIT;
	struct buf why = BUF_INIT;
	unsigned flags = 0;
	int i;

	tool_init(argc, argv);
	i = opt_subcommand(argc, argv, &why);
	if (i == OPT_DESCRIBE)
		opt_describe_subs_exit(subs);
	if (i <= 0)
		usage_exit(i == 0, why.buf, usage_text);
	if (i == argc)
		return cmd_list(0);
	argc -= i;
	argv += i;
	if (!strcmp(argv[0], "list")) {
		opt_words_exit(argc, argv, json, 0, &flags, &words, usage_text);
		return cmd_list(flags & 1);
	}
	if (!strcmp(argv[0], "path")) {
		opt_words_exit(argc, argv, NULL, 0, &flags, &words, usage_text);
		return cmd_path();
	}
	if (!strcmp(argv[0], "check")) {
		int ret;

		opt_words_exit(argc, argv, NULL, 1, &flags, &words, usage_text);
		ret = cmd_check(words.nr ? words.v[0] : NULL);
		strvec_clear(&words);
		return ret;
	}
	if (!strcmp(argv[0], "remove")) {
		int ret;

		opt_words_exit(argc, argv, NULL, 1, &flags, &words, usage_text);
		if (words.nr != 1) {
			error("remove takes one project name");
			usage_die(usage_text);
		}
		ret = cmd_remove(words.v[0]);
		strvec_clear(&words);
		return ret;
	}
	error("unknown subcommand '%s'", argv[0]);
	usage_die(usage_text);
}
