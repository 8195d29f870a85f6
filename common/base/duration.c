#include "base/duration.h"

#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/banned.h"

struct unit {
	const char *name;
	int64_t ms;
};

/* Longest name first, so "ms" is not read as "m" followed by "s". */
static const struct unit units[] = {
    {"ms", 1},
    {"h", 3600 * 1000},
    {"m", 60 * 1000},
    {"s", 1000},
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int duration_parse(const char *s, int64_t *ms, struct buf *err)
{
	int64_t total = 0;

	if (!s || !*s)
		return buf_refuse(err, -EINVAL, "empty duration");
	if (*s == '-')
		return buf_refuse(err, -EINVAL, "a duration cannot be negative");
	if (*s == '+')
		return buf_refuse(err, -EINVAL, "a duration takes no sign");
	if (!strcmp(s, "0")) {
		*ms = 0;
		return 0;
	}
	while (*s) {
		int64_t whole = 0, frac = 0, scale = 1, part;
		const struct unit *u = NULL;
		int digits = 0;

		if (!is_digit(*s) && *s != '.') {
			if (err)
				buf_addf(err, "expected a number at '%.16s'", s);
			return -EINVAL;
		}
		for (; is_digit(*s); s++, digits++) {
			if (whole > (INT64_MAX - 9) / 10)
				return buf_refuse(err, -ERANGE,
				                  "too large (the limit is about 292 years)");
			whole = whole * 10 + (*s - '0');
		}
		if (*s == '.') {
			s++;
			for (; is_digit(*s); s++, digits++) {
				/* 18 fraction digits always fit; more cannot be exact in ms. */
				if (scale > INT64_MAX / 100)
					return buf_refuse(err, -EINVAL,
					                  "too many digits after the point");
				frac = frac * 10 + (*s - '0');
				scale *= 10;
			}
		}
		if (!digits)
			return buf_refuse(err, -EINVAL, "a point needs digits");
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t n = strlen(units[i].name);

			if (!strncmp(s, units[i].name, n)) {
				u = &units[i];
				s += n;
				break;
			}
		}
		if (!u) {
			if (!*s)
				return buf_refuse(err, -EINVAL, "missing unit (use h, m, s or ms)");
			if (err) {
				size_t n = 0;

				while (s[n] && !is_digit(s[n]) && s[n] != '.' && n < 8)
					n++;
				buf_addf(err, "unknown unit '%.*s' (use h, m, s or ms)", (int)n, s);
			}
			return -EINVAL;
		}
		if (whole > INT64_MAX / u->ms)
			return buf_refuse(err, -ERANGE, "too large (the limit is about 292 years)");
		part = whole * u->ms;
		if (frac) {
			/* frac/scale of a unit, exact to the millisecond or refused. */
			__int128 f = (__int128)frac * u->ms;

			if (f % scale)
				return buf_refuse(err, -EINVAL, "finer than a millisecond");
			if (part > INT64_MAX - (int64_t)(f / scale))
				return buf_refuse(err, -ERANGE,
				                  "too large (the limit is about 292 years)");
			part += (int64_t)(f / scale);
		}
		if (total > INT64_MAX - part)
			return buf_refuse(err, -ERANGE, "too large (the limit is about 292 years)");
		total += part;
	}
	if (total > DURATION_MAX_MS)
		return buf_refuse(err, -ERANGE, "too large (the limit is about 292 years)");
	*ms = total;
	return 0;
}

void duration_format(struct buf *out, int64_t ms)
{
	int64_t h, m, s;

	if (ms <= 0) {
		buf_addstr(out, "0s");
		return;
	}
	if (ms < 1000) {
		buf_addf(out, "%lldms", (long long)ms);
		return;
	}
	h = ms / 3600000;
	m = ms / 60000 % 60;
	s = ms / 1000 % 60;
	ms %= 1000;
	if (h)
		buf_addf(out, "%lldh", (long long)h);
	if (h || m)
		buf_addf(out, "%lldm", (long long)m);
	if (ms) {
		char frac[4] = {(char)('0' + ms / 100), (char)('0' + ms / 10 % 10),
		                (char)('0' + ms % 10), 0};

		for (int i = 2; i > 0 && frac[i] == '0'; i--)
			frac[i] = 0;
		buf_addf(out, "%lld.%ss", (long long)s, frac);
	} else
		buf_addf(out, "%llds", (long long)s);
}

/* duration_format() without the zero parts after the first: "24h", "1m30s". */
static void format_short(struct buf *out, int64_t ms)
{
	size_t at = out->len;

	duration_format(out, ms);
	while (out->len - at > 2) {
		const char *end = out->buf + out->len;

		if (end[-1] == 's' && end[-2] == '0' && (end[-3] == 'm' || end[-3] == 'h'))
			buf_setlen(out, out->len - 2);
		else if (end[-1] == 'm' && end[-2] == '0' && end[-3] == 'h')
			buf_setlen(out, out->len - 2);
		else
			break;
	}
}

int duration_arg(const char *name, const char *v, int64_t min_ms, int64_t max_ms, int64_t *ms,
                 struct buf *err)
{
	struct buf why = BUF_INIT;
	int ret = duration_in(v, min_ms, max_ms, ms, &why);

	if (ret < 0)
		buf_addf(err, "--%s: %s", name, why.buf);
	buf_release(&why);
	return ret;
}

int duration_in(const char *v, int64_t min_ms, int64_t max_ms, int64_t *ms, struct buf *err)
{
	struct buf reason = BUF_INIT;
	int64_t d;
	int ret = duration_parse(v, &d, &reason);

	if (ret < 0) {
		buf_addf(err, "'%s' is not a duration: %s", v, reason.buf);
	} else if (d < min_ms || d > max_ms) {
		buf_addf(err, "'%s' is not between ", v);
		format_short(err, min_ms);
		buf_addstr(err, " and ");
		format_short(err, max_ms);
		ret = -EINVAL;
	} else {
		*ms = d;
	}
	buf_release(&reason);
	return ret;
}
