#include "proxy/api_paths.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/hex.h"
#include "net/http.h"
#include "base/banned.h"

#define SEGS_MAX 6

/* One listed path: its method and segments ("*": one identifier). */
struct api_path {
	const char *method;
	const char *segs[SEGS_MAX + 1];
	enum api_path_kind kind;
};

static const struct api_path api_paths[] = {
    {"POST", {"v1", "messages", NULL}, API_PATH_PAID},
    {"POST", {"v1", "messages", "count_tokens", NULL}, API_PATH_FREE},
    {"GET", {"v1", "models", NULL}, API_PATH_FREE},
    {"GET", {"v1", "models", "*", NULL}, API_PATH_FREE},
    {"GET", {"api", "hello", NULL}, API_PATH_FREE},
};

/* Paid endpoints whose spend the proxy cannot read, with the reason they are refused. */
static const struct {
	const char *segs[SEGS_MAX + 1];
	const char *why;
} api_refused[] = {
    {{"v1", "messages", "batches", NULL},
     "the Message Batches API is not forwarded: its spend cannot be counted"},
    {{"v1", "chat", "completions", NULL},
     "the OpenAI-compatible API is not forwarded: its spend is not counted"},
    {{"v1", "complete", NULL},
     "the Text Completions API is not forwarded: its spend is not counted"},
};

struct seg {
	const char *raw; /* as it came */
	size_t raw_len;
	char dec[128]; /* decoded, lowercase */
	size_t dec_len;
};

/* 1 when the decoded segment s is the listed segment name. */
static int seg_is(const struct seg *s, const char *name)
{
	return s->dec_len == strlen(name) && !memcmp(s->dec, name, s->dec_len);
}

/* 1 when the segments start with (all of, when whole) the listed ones. */
static int segs_match(const struct seg *s, int n, const char *const *want, int whole)
{
	int i;

	for (i = 0; want[i]; i++)
		if (i >= n || (strcmp(want[i], "*") ? !seg_is(&s[i], want[i]) : !s[i].dec_len))
			return 0;
	return !whole || i == n;
}

int api_path_classify(const char *m, size_t ml, const char *t, size_t tl, struct buf *canon,
                      struct buf *err)
{
	const char *q = memchr(t, '?', tl);
	size_t pl = q ? (size_t)(q - t) : tl;
	struct seg s[SEGS_MAX];
	int n = 0;

	if (http_api_path_ok(t, tl, err) < 0)
		return -EINVAL;
	/* http_api_path_ok(): t starts with '/', no empty or dot segment but a last empty one. */
	for (size_t i = 1; i < pl;) {
		const char *e = memchr(t + i, '/', pl - i);
		size_t sl = e ? (size_t)(e - (t + i)) : pl - i;

		if (!sl)
			break; /* the trailing '/' */
		if (n == SEGS_MAX)
			return buf_refuse(err, -EINVAL, "path not forwarded to the API");
		s[n].raw = t + i;
		s[n].raw_len = sl;
		s[n].dec_len = 0;
		for (size_t k = 0; k < sl; k++) {
			int c = (unsigned char)t[i + k];

			if (c == '%') { /* http_api_path_ok() checked the two hex digits */
				c = hex_digit(t[i + k + 1]) * 16 + hex_digit(t[i + k + 2]);
				k += 2;
			}
			if (s[n].dec_len == sizeof(s[n].dec))
				return buf_refuse(err, -EINVAL, "path not forwarded to the API");
			s[n].dec[s[n].dec_len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		n++;
		i += sl + 1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(api_refused); i++)
		if (segs_match(s, n, api_refused[i].segs, 0))
			return buf_refuse(err, -EINVAL, api_refused[i].why);
	for (size_t i = 0; i < ARRAY_SIZE(api_paths); i++) {
		const struct api_path *p = &api_paths[i];

		if (!segs_match(s, n, p->segs, 1))
			continue;
		if (strlen(p->method) != ml || memcmp(p->method, m, ml))
			return buf_refuse(err, -EINVAL, "method not forwarded for this API path");
		for (int k = 0; k < n; k++) {
			buf_addch(canon, '/');
			if (strcmp(p->segs[k], "*"))
				buf_addstr(canon, p->segs[k]);
			else
				buf_add(canon, s[k].raw, s[k].raw_len);
		}
		if (q)
			buf_add(canon, q, tl - pl);
		return p->kind;
	}
	return buf_refuse(err, -EINVAL, "path not forwarded to the API");
}
