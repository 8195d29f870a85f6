#include "base/strvec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/banned.h"

const char *strvec_empty[] = {NULL};

void strvec_init(struct strvec *sv)
{
	sv->v = strvec_empty;
	sv->nr = 0;
	sv->alloc = 0;
}

static const char *push_owned(struct strvec *sv, char *s)
{
	if (sv->v == strvec_empty)
		sv->v = NULL;
	ALLOC_GROW(sv->v, sv->nr + 2, sv->alloc);
	sv->v[sv->nr++] = s;
	sv->v[sv->nr] = NULL;
	return s;
}

const char *strvec_push(struct strvec *sv, const char *s)
{
	return push_owned(sv, xstrdup(s));
}

const char *strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	return push_owned(sv, buf_detach(&b, NULL));
}

void strvec_pushl(struct strvec *sv, ...)
{
	const char *s;
	va_list ap;

	va_start(ap, sv);
	while ((s = va_arg(ap, const char *)))
		strvec_push(sv, s);
	va_end(ap);
}

void strvec_pushv(struct strvec *sv, const char *const *items)
{
	for (; *items; items++)
		strvec_push(sv, *items);
}

void strvec_pop(struct strvec *sv)
{
	if (!sv->nr)
		return;
	free((char *)sv->v[--sv->nr]);
	sv->v[sv->nr] = NULL;
}

void strvec_clear(struct strvec *sv)
{
	if (sv->v != strvec_empty) {
		for (size_t i = 0; i < sv->nr; i++)
			free((char *)sv->v[i]);
		free(sv->v);
	}
	strvec_init(sv);
}

void strvec_wipe_clear(struct strvec *sv)
{
	for (size_t i = 0; i < sv->nr; i++)
		explicit_bzero((char *)sv->v[i], strlen(sv->v[i]));
	strvec_clear(sv);
}
