/* Typed JSON getters: one rule for missing members, types and NUL bytes. */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/json_get.h"
#include "base/printable.h"
#include "base/banned.h"

static int refuse(struct buf *err, const char *key, const char *what)
{
	buf_addf(err, "'%s' %s", key, what);
	return -EINVAL;
}

/* The member, or NULL when missing (absent or null): then 0 or the refusal in *r. */
static json_t *member(json_t *o, const char *key, unsigned flags, int *r, struct buf *err)
{
	json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;

	if (v && !json_is_null(v))
		return v;
	*r = (flags & JSON_OPTIONAL) ? 0 : refuse(err, key, "is missing");
	return NULL;
}

const char *json_str_checked(json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	size_t n;

	if (!s)
		return NULL;
	n = json_string_length(v);
	if (n > max || strlen(s) != n)
		return NULL;
	return s;
}

int json_get_str(json_t *o, const char *key, unsigned flags, size_t max, const char **out,
                 struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);
	const char *s;

	if (!v)
		return r;
	if (!(s = json_string_value(v)))
		return refuse(err, key, "is not a string");
	if (strlen(s) != json_string_length(v))
		return refuse(err, key, "has a NUL byte");
	if (json_string_length(v) > max) {
		buf_addf(err, "'%s' is over %zu bytes", key, max);
		return -EINVAL;
	}
	*out = s;
	return 1;
}

int json_get_int(json_t *o, const char *key, unsigned flags, int64_t min, int64_t max, int64_t *out,
                 struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);
	json_int_t i;

	if (!v)
		return r;
	if (!json_is_integer(v))
		return refuse(err, key, "is not an integer");
	i = json_integer_value(v);
	if (i < min || i > max)
		return refuse(err, key, "is out of range");
	*out = i;
	return 1;
}

int json_get_real(json_t *o, const char *key, unsigned flags, double min, double max, double *out,
                  struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);
	double d;

	if (!v)
		return r;
	if (!json_is_number(v))
		return refuse(err, key, "is not a number");
	d = json_number_value(v);
	if (!(d >= min && d <= max))
		return refuse(err, key, "is out of range");
	/* -0 passes a range from 0 and would print "-0.00": it is 0 */
	*out = d == 0 ? 0.0 : d;
	return 1;
}

int json_get_bool(json_t *o, const char *key, unsigned flags, int *out, struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);

	if (!v)
		return r;
	if (!json_is_boolean(v))
		return refuse(err, key, "is not true or false");
	*out = json_is_true(v);
	return 1;
}

int json_get_obj(json_t *o, const char *key, unsigned flags, json_t **out, struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);

	if (!v)
		return r;
	if (!json_is_object(v))
		return refuse(err, key, "is not an object");
	*out = v;
	return 1;
}

int json_get_list(json_t *o, const char *key, unsigned flags, size_t max, json_t **out,
                  struct buf *err)
{
	int r;
	json_t *v = member(o, key, flags, &r, err);

	if (!v)
		return r;
	if (!json_is_array(v))
		return refuse(err, key, "is not a list");
	if (json_array_size(v) > max) {
		buf_addf(err, "'%s' has over %zu elements", key, max);
		return -EINVAL;
	}
	*out = v;
	return 1;
}

void json_error_why(const json_error_t *e, struct buf *out)
{
	size_t start = out->len;

	buf_addf(out, "line %d: %.*s", e->line, (int)sizeof(e->text), e->text);
	printable_ascii(out->buf + start, out->len - start, 0);
}

/* 1 when p[0..n) may hold more than max values (json_get.h, json_vm_loadb()). */
static int values_over(const char *p, size_t n, size_t max)
{
	size_t values = 1;
	int in_string = 0;

	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (in_string) {
			if (c == '\\')
				i++; /* the escaped byte, whatever it is */
			else if (c == '"')
				in_string = 0;
		} else if (c == '"') {
			in_string = 1;
		} else if ((c == '[' || c == '{' || c == ',' || c == ':') && ++values > max) {
			return 1;
		}
	}
	return 0;
}

int json_vm_loadb(const char *p, size_t n, size_t flags, size_t max, json_t **out, json_error_t *e)
{
	*out = NULL;
	if (values_over(p, n, max))
		return -E2BIG;
	*out = json_loadb(p, n, flags, e);
	return *out ? 0 : -EINVAL;
}
