/*
 * The digests learnt in one task, a hash table: see dep_rules.h.  The keys
 * are URLs from upstream metadata whose names a package's author chooses, so
 * the hash is seeded at random per table: no one can aim keys at one slot.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/err.h"
#include "proxy/dep_rules.h"
#include "base/banned.h"

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t dep_key_hash(unsigned long long seed, const char *key)
{
	uint64_t h = seed;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return mix(h);
}

unsigned long long dep_key_seed(const void *salt)
{
	unsigned long long seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = (unsigned long long)(uintptr_t)salt ^ 0x9e3779b97f4a7c15ULL;
	return seed;
}

/* The slot of key: the one holding it, or the empty one it would go in. */
static size_t slot_of(const struct dep_digests *d, const char *key)
{
	size_t mask = d->nslot - 1, i = (size_t)dep_key_hash(d->seed, key) & mask;

	while (d->slot[i] && strcmp(d->v[d->slot[i] - 1].key, key))
		i = (i + 1) & mask;
	return i;
}

/* Twice the slots (or the first 128), every entry put again. */
static void grow(struct dep_digests *d)
{
	size_t n = d->nslot ? 2 * d->nslot : 128;

	if (!d->nslot)
		d->seed = dep_key_seed(d);
	free(d->slot);
	d->slot = xcalloc(n, sizeof(*d->slot));
	d->nslot = n;
	for (size_t i = 0; i < d->nr; i++)
		d->slot[slot_of(d, d->v[i].key)] = i + 1;
}

void dep_digests_clear(struct dep_digests *d)
{
	for (size_t i = 0; i < d->nr; i++)
		free(d->v[i].key);
	free(d->v);
	free(d->slot);
	*d = (struct dep_digests)DEP_DIGESTS_INIT;
}

const struct dep_digest *dep_digests_find(const struct dep_digests *d, const char *key)
{
	size_t s;

	if (!d->nr)
		return NULL;
	s = d->slot[slot_of(d, key)];
	return s && d->v[s - 1].len ? &d->v[s - 1] : NULL;
}

int dep_digests_learn(struct dep_digests *d, const char *key, const char *algo,
                      const unsigned char *md, size_t len)
{
	size_t s, kl = strlen(key);
	struct dep_digest *e;

	if (len > sizeof(e->md))
		BUG("dep_digests_learn: a digest of %zu bytes", len);
	if (d->nr) {
		s = d->slot[slot_of(d, key)];
		if (s) {
			e = &d->v[s - 1];
			if (e->len &&
			    (strcmp(e->algo, algo) || e->len != len || memcmp(e->md, md, len)))
				e->len = 0;
			return 0;
		}
	}
	if (d->nr >= DEP_DIGESTS_MAX || d->bytes + kl + 1 > DEP_DIGESTS_BYTES)
		return 0;
	if (2 * (d->nr + 1) > d->nslot)
		grow(d);
	if (d->nr == d->alloc) {
		d->alloc = d->alloc ? 2 * d->alloc : 64;
		d->v = realloc(d->v, d->alloc * sizeof(*d->v));
		if (!d->v)
			die_oom();
	}
	d->v[d->nr] = (struct dep_digest){xstrdup(key), algo, {0}, len};
	memcpy(d->v[d->nr].md, md, len);
	s = slot_of(d, key);
	d->slot[s] = ++d->nr;
	d->bytes += kl + 1;
	return 1;
}
