#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "task_settings.h"
#include "session_file.h"
#include "utf8.h"
#include "banned.h"

__attribute__((format(printf, 2, 3))) static int bad(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int task_env_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 128 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

int task_git_remote_valid(const char *s)
{
	size_t n = strlen(s);

	if (n <= 8 || n > 2048 || strncmp(s, "https://", 8))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch <= 0x20 || ch >= 0x7f || strchr("\"\\#;", ch))
			return 0;
	}
	return 1;
}

/* A JSON string of s, or NULL (with a reason) when s is not UTF-8. */
static json_t *str(const char *s, const char *what, struct buf *err)
{
	json_t *j;

	if (!utf8_valid(s, strlen(s), NULL) || !(j = json_string(s))) {
		bad(err, "%s is not valid UTF-8", what);
		return NULL;
	}
	return j;
}

static int set(json_t *obj, const char *key, json_t *v)
{
	if (!v || json_object_set_new(obj, key, v) < 0)
		return -EINVAL;
	return 0;
}

int task_settings_json(const struct task_settings *s, struct buf *out, struct buf *err)
{
	static const char *const api_names[] = { "none", "forward", "oauth" };
	json_t *root = json_object(), *git = json_object(), *env = json_array(),
	       *mounts = json_array(), *remotes = json_array();
	char *text = NULL;
	int ret = -EINVAL;

	if (!s->id || !is_hex(s->id, 6)) {
		bad(err, "the task id is not 6 lowercase hex digits");
		goto out;
	}
	if (!s->start_commit || !(is_hex(s->start_commit, 40) || is_hex(s->start_commit, 64))) {
		bad(err, "the start commit is not a full commit id");
		goto out;
	}
	if (s->timeout_s <= 0) {
		bad(err, "the timeout is not positive");
		goto out;
	}
	if (s->has_budget && !(s->max_budget_usd > 0 && s->max_budget_usd < 1e9)) {
		bad(err, "the budget is not a positive amount");
		goto out;
	}
	if ((unsigned)s->api >= sizeof(api_names) / sizeof(api_names[0])) {
		bad(err, "unknown API mode");
		goto out;
	}
	if (set(root, "version", json_integer(1)) || set(root, "id", json_string(s->id)) ||
	    set(root, "mode", json_string("task")) ||
	    set(root, "model", s->model ? str(s->model, "the model name", err) : json_null()) ||
	    set(root, "timeout_s", json_integer(s->timeout_s)) ||
	    set(root, "max_budget_usd", s->has_budget ? json_real(s->max_budget_usd) : json_null()))
		goto out;
	if (set(git, "name", str(s->git_name ? s->git_name : "", "the git user name", err)) ||
	    set(git, "email", str(s->git_email ? s->git_email : "", "the git email", err)))
		goto out;
	if (set(root, "git", json_incref(git)) ||
	    set(root, "start_commit", json_string(s->start_commit)) ||
	    set(root, "branch", str(s->branch ? s->branch : "aibox/task", "the branch", err)))
		goto out;
	for (size_t i = 0; i < s->nenv; i++) {
		if (!task_env_name_valid(s->env_names[i])) {
			bad(err, "'%s' is not a valid variable name", s->env_names[i]);
			goto out;
		}
		json_array_append_new(env, json_string(s->env_names[i]));
	}
	if (set(root, "env_names", json_incref(env)) ||
	    set(root, "api", json_string(api_names[s->api])) ||
	    set(root, "proxy", str(s->proxy ? s->proxy : "http://10.0.2.100:3128", "the proxy", err)) ||
	    set(root, "path", str(s->path ? s->path : "/project", "the project path", err)))
		goto out;
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct task_mount *m = &s->mounts[i];
		json_t *o = json_object();

		json_array_append_new(mounts, o);
		if (!m->path || m->path[0] != '/') {
			bad(err, "the mount path '%s' is not absolute", m->path ? m->path : "");
			goto out;
		}
		if (!m->tag || !*m->tag || strlen(m->tag) > 31 ||
		    strspn(m->tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
			    strlen(m->tag)) {
			bad(err, "the mount tag '%s' is not valid", m->tag ? m->tag : "");
			goto out;
		}
		if (set(o, "tag", json_string(m->tag)) || set(o, "path", str(m->path, "a mount path", err)))
			goto out;
	}
	for (size_t i = 0; i < s->ngit_remotes; i++) {
		if (!task_git_remote_valid(s->git_remotes[i])) {
			bad(err, "the git remote '%s' is not a plain https:// URL", s->git_remotes[i]);
			goto out;
		}
		json_array_append_new(remotes, json_string(s->git_remotes[i]));
	}
	if (set(root, "mounts", json_incref(mounts)) ||
	    set(root, "system_prompt",
		str(s->system_prompt ? s->system_prompt : "", "the system prompt", err)) ||
	    set(root, "git_remotes", json_incref(remotes)))
		goto out;
	if (s->resume_session && !session_id_valid(s->resume_session)) {
		bad(err, "the session to resume is not a session id");
		goto out;
	}
	if (set(root, "resume_session",
	        s->resume_session ? json_string(s->resume_session) : json_null()))
		goto out;
	text = json_dumps(root, JSON_INDENT(2));
	if (!text) {
		bad(err, "cannot write settings.json");
		goto out;
	}
	buf_addstr(out, text);
	buf_addch(out, '\n');
	ret = 0;
out:
	if (ret < 0 && !err->len)
		bad(err, "cannot write settings.json");
	free(text);
	json_decref(git);
	json_decref(env);
	json_decref(mounts);
	json_decref(remotes);
	json_decref(root);
	return ret;
}

static void json_quote(struct buf *out, const char *s)
{
	buf_addch(out, '"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			buf_addch(out, '\\');
			buf_addch(out, ch);
		} else if (ch < 0x20 || ch == 0x7f) {
			buf_addf(out, "\\u%04x", ch);
		} else {
			buf_addch(out, ch);
		}
	}
	buf_addch(out, '"');
}

int task_secrets_json(const struct task_secret *v, size_t n, struct buf *out, struct buf *err)
{
	/*
	 * Grow once, generously, so that no realloc leaves a copy of a value
	 * behind in freed memory.
	 */
	size_t need = 32;

	for (size_t i = 0; i < n; i++) {
		if (!task_env_name_valid(v[i].name))
			return bad(err, "'%s' is not a valid variable name", v[i].name);
		if (!utf8_valid(v[i].value, strlen(v[i].value), NULL))
			return bad(err, "the value of %s is not valid UTF-8", v[i].name);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(v[i].name, v[j].name))
				return bad(err, "%s is given twice", v[i].name);
		need += strlen(v[i].name) + 6 * strlen(v[i].value) + 8;
	}
	buf_grow(out, need);
	buf_addstr(out, "{\"env\": {");
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_addstr(out, ", ");
		json_quote(out, v[i].name);
		buf_addstr(out, ": ");
		json_quote(out, v[i].value);
	}
	buf_addstr(out, "}}\n");
	return 0;
}

void buf_wipe_release(struct buf *b)
{
	if (b->alloc)
		explicit_bzero(b->buf, b->alloc);
	buf_release(b);
}
