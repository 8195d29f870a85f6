/*
 * A NULL-terminated vector of owned strings, for argv and envp (git's strvec).
 * `v` is never NULL: an empty vector is a valid empty argv.
 */
#ifndef AIBOX_STRVEC_H
#define AIBOX_STRVEC_H

#include <stddef.h>

struct strvec {
	const char **v;
	size_t nr;
	size_t alloc;
};

extern const char *strvec_empty[];
#define STRVEC_INIT                                                                                \
	{                                                                                          \
		strvec_empty, 0, 0                                                                 \
	}

void strvec_init(struct strvec *sv);

/* Append a copy of s; returns the copy. */
const char *strvec_push(struct strvec *sv, const char *s);
__attribute__((format(printf, 2, 3))) const char *strvec_pushf(struct strvec *sv, const char *fmt,
                                                               ...);

/* Append copies of each argument up to a NULL. */
__attribute__((sentinel)) void strvec_pushl(struct strvec *sv, ...);

/* Append copies of a NULL-terminated array. */
void strvec_pushv(struct strvec *sv, const char *const *items);

/* Drop the last element. */
void strvec_pop(struct strvec *sv);

/* Free everything and return to STRVEC_INIT. */
void strvec_clear(struct strvec *sv);

/* strvec_clear() for strings that held secrets: each is overwritten with zeros first. */
void strvec_wipe_clear(struct strvec *sv);

#endif
