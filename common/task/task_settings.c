#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "task/task_settings.h"
#include "net/git_remote.h"
#include "git/gitproto.h"
#include "base/json_get.h"
#include "base/secret.h"
#include "base/session_file.h"
#include "base/taskid.h"
#include "base/utf8.h"
#include "base/banned.h"

__attribute__((format(printf, 2, 3))) static int bad(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *const api_names[] = {"none", "forward", "oauth"};
#define NAPI (sizeof(api_names) / sizeof(api_names[0]))

const char *task_api_name(enum task_api api)
{
	return (unsigned)api < NAPI ? api_names[api] : NULL;
}

/* A string of the file: UTF-8, at most max bytes, no control character unless ctl. */
static int text_ok(const char *s, size_t max, int ctl, const char *what, struct buf *err)
{
	size_t n = strlen(s);

	if (!utf8_valid(s, n, NULL))
		return bad(err, "%s is not valid UTF-8", what);
	if (n > max)
		return bad(err, "%s is over %zu bytes", what, max);
	for (; !ctl && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return bad(err, "%s has a control character", what);
	return 0;
}

static int path_ok(const char *p)
{
	return guest_path_valid(p) && utf8_valid(p, strlen(p), NULL);
}

/* The project's path and the mounts: what PID 1 reads too. */
static int check_place(const struct task_settings *s, struct buf *err)
{
	if (s->path && !path_ok(s->path))
		return bad(err, "the project path '%s' is not a clean absolute path", s->path);
	if (s->nmounts > TASK_SETTINGS_MOUNTS_MAX)
		return bad(err, "over %d mounts", TASK_SETTINGS_MOUNTS_MAX);
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct task_mount *m = &s->mounts[i];

		if (!m->path || !path_ok(m->path))
			return bad(err, "the mount path '%s' is not a clean absolute path",
			           m->path ? m->path : "");
		if (!guest_tag_valid(m->tag) || !strcmp(m->tag, GUEST_TAG_TASK))
			return bad(err, "the mount tag '%s' is not valid", m->tag ? m->tag : "");
	}
	return 0;
}

static int check_task_fields(const struct task_settings *s, struct buf *err)
{
	if (!s->start_commit || !oid_hex_valid(s->start_commit, strlen(s->start_commit)))
		return bad(err, "the start commit is not a full commit id");
	if (s->timeout_s <= 0 || s->timeout_s > TASK_SETTINGS_TIMEOUT_MAX)
		return bad(err, "the timeout is not 1 to %d seconds", TASK_SETTINGS_TIMEOUT_MAX);
	if (s->has_budget &&
	    !(s->max_budget_usd > 0 && s->max_budget_usd <= TASK_SETTINGS_BUDGET_MAX))
		return bad(err, "the budget is not a positive amount up to %g",
		           TASK_SETTINGS_BUDGET_MAX);
	if (s->model && text_ok(s->model, TASK_SETTINGS_STRING_MAX, 0, "the model name", err))
		return -EINVAL;
	if (s->model && (!*s->model || s->model[0] == '-'))
		return bad(err, "the model name '%s' is not valid", s->model);
	if (!s->git_name || !*s->git_name)
		return bad(err, "the git user name is empty");
	if (!s->git_email || !*s->git_email)
		return bad(err, "the git email is empty");
	if (text_ok(s->git_name, TASK_SETTINGS_STRING_MAX, 0, "the git user name", err) ||
	    text_ok(s->git_email, TASK_SETTINGS_STRING_MAX, 0, "the git email", err))
		return -EINVAL;
	if (s->branch && strcmp(s->branch, GUEST_BRANCH))
		return bad(err, "the branch is not '%s'", GUEST_BRANCH);
	if (s->system_prompt &&
	    text_ok(s->system_prompt, TASK_SETTINGS_PROMPT_MAX, 1, "the system prompt", err))
		return -EINVAL;
	if (s->resume_session && !session_id_valid(s->resume_session))
		return bad(err, "the session to resume is not a session id");
	return 0;
}

/* Name is among the n names of v. */
static int named(const char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return 1;
	return 0;
}

static int check_placeholders(const struct task_settings *s, struct buf *err)
{
	if (s->nph > TASK_SETTINGS_ENV_MAX)
		return bad(err, "over %d placeholders", TASK_SETTINGS_ENV_MAX);
	for (size_t i = 0; i < s->nph; i++) {
		const char *name = s->ph_names[i];

		if (!guest_env_name_valid(name))
			return bad(err, "'%s' is not a valid variable name", name);
		if (!secret_placeholder_valid(s->ph_values[i], strlen(s->ph_values[i])))
			return bad(err, "the placeholder of %s is not one of aibox's", name);
		if (named(s->env_names, s->nenv, name) || named(s->ph_names, i, name))
			return bad(err, "%s is named twice", name);
	}
	return 0;
}

static int check_run_fields(const struct task_settings *s, struct buf *err)
{
	if (s->ncommand > TASK_SETTINGS_COMMAND_MAX)
		return bad(err, "the command has over %d words", TASK_SETTINGS_COMMAND_MAX);
	for (size_t i = 0; i < s->ncommand; i++)
		if (!utf8_valid(s->command[i], strlen(s->command[i]), NULL))
			return bad(err, "the command's word %zu is not valid UTF-8", i);
	if (s->uid < 0 || s->uid > TASK_SETTINGS_ID_MAX || s->gid < 0 ||
	    s->gid > TASK_SETTINGS_ID_MAX)
		return bad(err, "the user's ids are not 0 to %ld", (long)TASK_SETTINGS_ID_MAX);
	return 0;
}

int task_settings_check(const struct task_settings *s, struct buf *err)
{
	if (s->mode != TASK_MODE_TASK && s->mode != TASK_MODE_RUN)
		return bad(err, "unknown mode");
	if (!s->id || !task_id_valid(s->id))
		return bad(err, "the task id is not 6 lowercase hex digits");
	if (s->mode == TASK_MODE_TASK ? check_task_fields(s, err) : check_run_fields(s, err))
		return -EINVAL;
	if (s->nenv > TASK_SETTINGS_ENV_MAX)
		return bad(err, "over %d env names", TASK_SETTINGS_ENV_MAX);
	for (size_t i = 0; i < s->nenv; i++)
		if (!guest_env_name_valid(s->env_names[i]))
			return bad(err, "'%s' is not a valid variable name", s->env_names[i]);
	if (check_placeholders(s, err) < 0)
		return -EINVAL;
	if (!task_api_name(s->api))
		return bad(err, "unknown API mode");
	if (s->proxy && text_ok(s->proxy, TASK_SETTINGS_STRING_MAX, 0, "the proxy", err))
		return -EINVAL;
	if (s->proxy && (strncmp(s->proxy, "http://", 7) || strchr(s->proxy, ' ')))
		return bad(err, "the proxy is not an http:// URL");
	if (check_place(s, err) < 0)
		return -EINVAL;
	if (s->check && (!*s->check || text_ok(s->check, GUEST_CHECK_MAX, 0, "the check", err)))
		return *s->check ? -EINVAL : bad(err, "the check is empty");
	if (s->check_timeout_ms && (s->check_timeout_ms < GUEST_CHECK_TIMEOUT_MIN_MS ||
	                            s->check_timeout_ms > GUEST_CHECK_TIMEOUT_MAX_MS))
		return bad(err, "the check's time limit is not %lld to %lld ms",
		           GUEST_CHECK_TIMEOUT_MIN_MS, GUEST_CHECK_TIMEOUT_MAX_MS);
	if (s->ngit_remotes > TASK_SETTINGS_REMOTES_MAX)
		return bad(err, "over %d git remotes", TASK_SETTINGS_REMOTES_MAX);
	for (size_t i = 0; i < s->ngit_remotes; i++) {
		struct buf why = BUF_INIT;

		if (git_remote_url_check(s->git_remotes[i], &why) < 0) {
			bad(err, "the git remote '%.200s' %s", s->git_remotes[i], why.buf);
			buf_release(&why);
			return -EINVAL;
		}
	}
	return 0;
}

static int set(json_t *obj, const char *key, json_t *v)
{
	if (!v || json_object_set_new(obj, key, v) < 0)
		return -EINVAL;
	return 0;
}

static json_t *strings(const char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* {"NAME": "VALUE", ...} of n pairs. */
static json_t *pairs(const char *const *k, const char *const *v, size_t n)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < n; i++)
		if (json_object_set_new(o, k[i], json_string(v[i])) < 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static int add_task_fields(json_t *root, const struct task_settings *s)
{
	return set(root, "model", str_or_null(s->model)) ||
	       set(root, "timeout_s", json_integer(s->timeout_s)) ||
	       set(root, "max_budget_usd",
	           s->has_budget ? json_real(s->max_budget_usd) : json_null()) ||
	       set(root, "git",
	           json_pack("{s:s, s:s}", "name", s->git_name, "email", s->git_email)) ||
	       set(root, "start_commit", json_string(s->start_commit)) ||
	       set(root, "branch", json_string(GUEST_BRANCH));
}

int task_settings_json(const struct task_settings *s, struct buf *out, struct buf *err)
{
	json_t *root = json_object(), *mounts = json_array(), *cmd;
	int run = s->mode == TASK_MODE_RUN;
	char *text = NULL;
	int ret = -EINVAL;

	if (task_settings_check(s, err) < 0)
		goto out;
	for (size_t i = 0; i < s->nmounts; i++)
		if (json_array_append_new(mounts, json_pack("{s:s, s:s}", "tag", s->mounts[i].tag,
		                                            "path", s->mounts[i].path)) < 0)
			goto out;
	cmd = run && s->ncommand ? strings(s->command, s->ncommand) : json_null();
	/* The order of docs/internals.md, "settings.json". */
	if (set(root, "version", json_integer(1)) || set(root, "id", json_string(s->id)) ||
	    set(root, "mode", json_string(run ? GUEST_MODE_RUN : GUEST_MODE_TASK)) ||
	    (run ? set(root, "command", cmd) : (json_decref(cmd), add_task_fields(root, s))))
		goto out;
	if (run &&
	    (set(root, "path", json_string(s->path ? s->path : GUEST_PROJECT_PATH)) ||
	     set(root, "mounts", json_incref(mounts)) || set(root, "uid", json_integer(s->uid)) ||
	     set(root, "gid", json_integer(s->gid))))
		goto out;
	if (set(root, "env_names", strings(s->env_names, s->nenv)) ||
	    set(root, "placeholders", pairs(s->ph_names, s->ph_values, s->nph)) ||
	    set(root, "api", json_string(task_api_name(s->api))) ||
	    set(root, "proxy", json_string(s->proxy ? s->proxy : GUEST_PROXY_URL)))
		goto out;
	if (!run &&
	    (set(root, "path", json_string(s->path ? s->path : GUEST_PROJECT_PATH)) ||
	     set(root, "mounts", json_incref(mounts)) ||
	     set(root, "system_prompt", json_string(s->system_prompt ? s->system_prompt : ""))))
		goto out;
	if (set(root, "git_remotes", strings(s->git_remotes, s->ngit_remotes)) ||
	    (!run && (set(root, "resume_session", str_or_null(s->resume_session)) ||
	              set(root, "check", str_or_null(s->check)) ||
	              set(root, "check_timeout_ms",
	                  s->check ? json_integer(s->check_timeout_ms ? s->check_timeout_ms
	                                                              : GUEST_CHECK_TIMEOUT_MS)
	                           : json_null()))))
		goto out;
	text = json_dumps(root, JSON_INDENT(2));
	if (!text)
		goto out;
	buf_addstr(out, text);
	buf_addch(out, '\n');
	ret = 0;
out:
	if (ret < 0 && !err->len)
		bad(err, "cannot write settings.json");
	free(text);
	json_decref(mounts);
	json_decref(root);
	return ret;
}

/* ---- the parser ---------------------------------------------------------- */

/* Member key of o as a string into *out (json_get's rule): 0, or -EINVAL. */
static int get_str(json_t *o, const char *key, int nullable, const char **out, struct buf *err)
{
	*out = NULL;
	return json_get_str(o, key, nullable ? JSON_OPTIONAL : 0, GUEST_SETTINGS_MAX, out, err) < 0
	           ? -EINVAL
	           : 0;
}

/* Member key of o, a list of at most max strings (missing: none), into v. */
static int get_strings(json_t *o, const char *key, const char **v, size_t max, size_t *n,
                       struct buf *err)
{
	json_t *a = NULL, *e;
	size_t i;

	*n = 0;
	if (json_get_list(o, key, JSON_OPTIONAL, max, &a, err) < 0)
		return -EINVAL;
	json_array_foreach(a, i, e)
	{
		if (!(v[*n] = json_str_checked(e, GUEST_SETTINGS_MAX)))
			return bad(err, "'%s'[%zu] is not a string", key, i);
		(*n)++;
	}
	return 0;
}

/* "placeholders" (missing: none) into d, not yet checked. */
static int get_placeholders(struct task_settings_doc *d, struct buf *err)
{
	struct task_settings *s = &d->s;
	json_t *o = NULL, *v;
	const char *name;

	if (json_get_obj(d->root, "placeholders", JSON_OPTIONAL, &o, err) < 0)
		return -EINVAL;
	if (json_object_size(o) > TASK_SETTINGS_ENV_MAX)
		return bad(err, "over %d placeholders", TASK_SETTINGS_ENV_MAX);
	json_object_foreach(o, name, v)
	{
		if (!(d->ph_values[s->nph] = json_str_checked(v, GUEST_SETTINGS_MAX)))
			return bad(err, "placeholder %zu is not a string", s->nph);
		d->ph_names[s->nph++] = name;
	}
	s->ph_names = d->ph_names;
	s->ph_values = d->ph_values;
	return 0;
}

/* A whole number into *out; missing: dflt, or refused when dflt < 0. */
static int get_long(json_t *o, const char *key, long dflt, long *out, struct buf *err)
{
	int64_t l = dflt;
	int r = json_get_int(o, key, dflt >= 0 ? JSON_OPTIONAL : 0, 0, LONG_MAX, &l, err);

	*out = (long)l;
	return r < 0 ? -EINVAL : 0;
}

static int parse_task_fields(json_t *root, struct task_settings *s, struct buf *err)
{
	json_t *git = NULL;
	int r;

	if (get_str(root, "model", 1, &s->model, err) ||
	    get_long(root, "timeout_s", -1, &s->timeout_s, err))
		return -EINVAL;
	if ((r = json_get_real(root, "max_budget_usd", JSON_OPTIONAL, -HUGE_VAL, HUGE_VAL,
	                       &s->max_budget_usd, err)) < 0)
		return -EINVAL;
	s->has_budget = r > 0;
	if (json_get_obj(root, "git", 0, &git, err) < 0)
		return -EINVAL;
	return get_str(git, "name", 0, &s->git_name, err) ||
	               get_str(git, "email", 0, &s->git_email, err) ||
	               get_str(root, "start_commit", 0, &s->start_commit, err) ||
	               get_str(root, "branch", 0, &s->branch, err) ||
	               get_str(root, "system_prompt", 1, &s->system_prompt, err) ||
	               get_str(root, "resume_session", 1, &s->resume_session, err) ||
	               get_str(root, "check", 1, &s->check, err) ||
	               get_long(root, "check_timeout_ms", 0, &s->check_timeout_ms, err)
	           ? -EINVAL
	           : 0;
}

/* "path" (absent: GUEST_PROJECT_PATH) and "mounts" into d, not yet checked. */
static int parse_place(struct task_settings_doc *d, struct buf *err)
{
	struct task_settings *s = &d->s;
	json_t *v = NULL, *m;
	size_t i;

	if (get_str(d->root, "path", 1, &s->path, err))
		return -EINVAL;
	if (!s->path)
		s->path = GUEST_PROJECT_PATH;
	if (json_get_list(d->root, "mounts", JSON_OPTIONAL, TASK_SETTINGS_MOUNTS_MAX, &v, err) < 0)
		return -EINVAL;
	json_array_foreach(v, i, m)
	{
		if (!json_is_object(m))
			return bad(err, "mount %zu is not an object", i);
		if (get_str(m, "tag", 0, &d->mounts[i].tag, err) ||
		    get_str(m, "path", 0, &d->mounts[i].path, err))
			return -EINVAL;
		s->nmounts++;
	}
	s->mounts = d->mounts;
	return 0;
}

static int parse_doc(struct task_settings_doc *d, struct buf *err)
{
	struct task_settings *s = &d->s;
	json_t *root = d->root;
	const char *str;
	int64_t version;

	if (json_get_int(root, "version", 0, 1, 1, &version, err) < 0 ||
	    get_str(root, "mode", 0, &str, err))
		return -EINVAL;
	if (strcmp(str, GUEST_MODE_TASK) && strcmp(str, GUEST_MODE_RUN))
		return bad(err, "'mode' is not task or run");
	s->mode = strcmp(str, GUEST_MODE_TASK) ? TASK_MODE_RUN : TASK_MODE_TASK;
	if (get_str(root, "id", 0, &s->id, err))
		return -EINVAL;
	if (s->mode == TASK_MODE_TASK ? parse_task_fields(root, s, err)
	                              : get_strings(root, "command", d->command,
	                                            TASK_SETTINGS_COMMAND_MAX, &s->ncommand, err) ||
	                                    get_long(root, "uid", GUEST_USER_UID, &s->uid, err) ||
	                                    get_long(root, "gid", GUEST_USER_GID, &s->gid, err))
		return -EINVAL;
	s->command = d->command;
	if (get_strings(root, "env_names", d->env_names, TASK_SETTINGS_ENV_MAX, &s->nenv, err) ||
	    get_strings(root, "git_remotes", d->git_remotes, TASK_SETTINGS_REMOTES_MAX,
	                &s->ngit_remotes, err) ||
	    get_str(root, "api", 0, &str, err) || get_str(root, "proxy", 1, &s->proxy, err))
		return -EINVAL;
	s->env_names = d->env_names;
	s->git_remotes = d->git_remotes;
	if (get_placeholders(d, err) < 0)
		return -EINVAL;
	for (s->api = 0; task_api_name(s->api) && strcmp(task_api_name(s->api), str); s->api++)
		;
	if (!task_api_name(s->api))
		return bad(err, "'api' is not none, forward or oauth");
	if (parse_place(d, err) < 0)
		return -EINVAL;
	return task_settings_check(s, err);
}

static int parse(const char *text, size_t len, int place_only, struct task_settings_doc *d,
                 struct buf *err)
{
	json_error_t jerr;
	size_t at = err->len;
	int r;

	memset(d, 0, sizeof(*d));
	buf_addstr(err, "settings.json: ");
	if (len > GUEST_SETTINGS_MAX)
		return bad(err, "over %d bytes", GUEST_SETTINGS_MAX);
	d->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(d->root))
		r = bad(err, "%s", d->root ? "not an object" : jerr.text);
	else if (place_only)
		r = parse_place(d, err) < 0 ? -EINVAL : check_place(&d->s, err);
	else
		r = parse_doc(d, err);
	if (r < 0) {
		task_settings_doc_release(d);
		return -EINVAL;
	}
	buf_setlen(err, at);
	return 0;
}

int task_settings_parse(const char *text, size_t len, struct task_settings_doc *d, struct buf *err)
{
	return parse(text, len, 0, d, err);
}

int task_settings_parse_place(const char *text, size_t len, struct task_settings_doc *d,
                              struct buf *err)
{
	return parse(text, len, 1, d, err);
}

void task_settings_doc_release(struct task_settings_doc *d)
{
	json_decref(d->root);
	memset(d, 0, sizeof(*d));
}
