#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/guest_abi.h"
#include "base/guest_secrets.h"
#include "base/secret.h"
#include "base/utf8.h"
#include "base/banned.h"

/* The wrapper of the stdin framing: its one member. */
#define STDIN_MEMBER "env"

__attribute__((format(printf, 2, 3))) static int bad(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return -EINVAL;
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

int guest_secrets_write(const struct guest_secret *v, size_t n, enum guest_secrets_framing f,
                        struct buf *out, struct buf *err)
{
	int wrap = f != GUEST_SECRETS_ENV_VAR;
	/*
	 * Grow once, generously, so that no realloc leaves a copy of a value
	 * behind in freed memory.
	 */
	size_t need = 32;

	if (n > GUEST_SECRETS_NAMES_MAX)
		return bad(err, "more than %d env values", GUEST_SECRETS_NAMES_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!guest_env_name_valid(v[i].name))
			return bad(err, "'%s' is not a valid variable name", v[i].name);
		if (!utf8_valid(v[i].value, strlen(v[i].value), NULL))
			return bad(err, "the value of %s is not valid UTF-8", v[i].name);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(v[i].name, v[j].name))
				return bad(err, "%s is given twice", v[i].name);
		need += strlen(v[i].name) + 6 * strlen(v[i].value) + 8;
	}
	buf_grow(out, need);
	buf_addstr(out, wrap ? "{\"" STDIN_MEMBER "\": {" : "{");
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_addstr(out, ", ");
		json_quote(out, v[i].name);
		buf_addstr(out, ": ");
		json_quote(out, v[i].value);
	}
	buf_addstr(out, wrap ? "}}\n" : "}");
	return 0;
}

int guest_secrets_read(const char *text, size_t len, enum guest_secrets_framing f,
                       struct strvec *out, struct buf *err)
{
	const char *what = f == GUEST_SECRETS_STDIN ? "the secrets on stdin"
	                   : f == GUEST_SECRETS_GO  ? "the go message's secrets"
	                                            : GUEST_RUN_ENV_VAR;
	size_t nr = out->nr;
	json_t *root, *env, *v;
	const char *name;
	int ret = -EINVAL;

	if (!len)
		return 0;
	if (len > GUEST_SECRETS_MAX) {
		buf_addf(err, "%s: over %d bytes", what, GUEST_SECRETS_MAX);
		return -EFBIG;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	env = root;
	if (f != GUEST_SECRETS_ENV_VAR)
		env = json_object_size(root) == 1 ? json_object_get(root, STDIN_MEMBER) : NULL;
	if (!json_is_object(env)) {
		buf_addf(err, "%s: not %s", what,
		         f != GUEST_SECRETS_ENV_VAR ? "{\"" STDIN_MEMBER "\": {...}}"
		                                    : "a JSON object");
		goto out;
	}
	if (json_object_size(env) > GUEST_SECRETS_NAMES_MAX) {
		buf_addf(err, "%s: more than %d names", what, GUEST_SECRETS_NAMES_MAX);
		goto out;
	}
	json_object_foreach(env, name, v)
	{
		if (!guest_env_name_valid(name)) {
			buf_addf(err, "%s: '%.64s' is not a variable name", what, name);
			goto out;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			buf_addf(err, "%s: secret '%s' is not a string", what, name);
			goto out;
		}
		strvec_pushf(out, "%s=%s", name, json_string_value(v));
	}
	ret = 0;
out:
	for (; ret < 0 && out->nr > nr; strvec_pop(out))
		explicit_bzero((char *)out->v[out->nr - 1], strlen(out->v[out->nr - 1]));
	/* jansson's copies: overwrite the values before they are freed. */
	secret_json_wipe(env);
	json_decref(root);
	return ret;
}
