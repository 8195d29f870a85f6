/*
 * The proxy's own metadata fetches (docs/cache.md, "Installs from a lock
 * file"): an artifact asked for on a cached host whose digest this task has
 * not learnt (npm ci, or go with a go.sum, asks for no metadata) makes the
 * proxy fetch the metadata that names it, one fetch of a key at a time,
 * shared by every request that waits for it; one that failed for a cause
 * that may pass is started again by a later request after a backoff, a
 * few times a key at most (PX_FETCH_TRIES).  A task begins at most
 * cfg->own_fetch_max of them in all; PX_FETCH_LIVE are in flight at once,
 * the others begun wait in a queue (px->fetch_q) and start in turn, or are
 * dropped then when no request waits for them any more (f->waiters).
 *
 * A fetch is a connection of the proxy's own, without a client (cfd -1,
 * c->own): its request head, made here, goes through the same path as a
 * request the VM sends on an intercepted connection (the rules, the swap,
 * px_cache_request() reading the answer for its digests, the upstream over
 * verified TLS, the log line), and what would go to a client is dropped.
 * The request waiting for it sits in ST_CWAIT, its head unread, and reads
 * it again when the fetch ends (px_fetch_wake()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "config/config.h"
#include "net/allow.h"
#include "net/http.h"
#include "proxy/dep_go.h"
#include "proxy/dep_rules.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_secrets.h"
#include "base/banned.h"

/* npm's Accept for the abbreviated package document (what npm itself sends). */
#define NPM_ACCEPT "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"

/* The slot of key in the table (its record, or the empty slot where it goes). */
static struct px_fetch **slot(struct proxy *px, const char *key)
{
	size_t mask = px->fetches_cap - 1, i = (size_t)dep_key_hash(px->fetches_seed, key) & mask;

	while (px->fetches[i] && strcmp(px->fetches[i]->key, key))
		i = (i + 1) & mask;
	return &px->fetches[i];
}

/* Room for one more record: the table at most half full. */
static void grow(struct proxy *px)
{
	struct px_fetch **old = px->fetches;
	size_t n = px->fetches_cap;

	if (px->fetches_cap && (px->fetches_nr + 1) * 2 <= px->fetches_cap)
		return;
	if (!n)
		px->fetches_seed = dep_key_seed(px);
	px->fetches_cap = n ? n * 2 : 256;
	px->fetches = xcalloc(px->fetches_cap, sizeof(*px->fetches));
	for (size_t i = 0; i < n; i++)
		if (old[i])
			*slot(px, old[i]->key) = old[i];
	free(old);
}

/* Whether c's host serves its own checksum database: a cached rule on it with a sumdb-key. */
static int own_sumdb(const struct conn *c)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	for (size_t i = 0; i < ps->nr_rules; i++)
		if (ps->rules[i].cache && ps->rules[i].sumdb_key &&
		    allow_match(&ps->rule_hosts[i], c->host, c->port))
			return 1;
	return 0;
}

/*
 * The lookup of the Go download t (tl bytes) into path: relative to the
 * prefix of c's rule, which t must begin with, byte for byte, then a '/'
 * (docs/cache.md, "go").  0, or -EINVAL.
 */
static int go_lookup_path(const struct conn *c, const char *t, size_t tl, struct buf *path)
{
	const struct config_rule *rule = px_cache_rule(c);
	const char *pre = rule ? rule->prefix : NULL;
	size_t pl = pre ? strlen(pre) : 0;
	struct buf rel = BUF_INIT;
	int r;

	if (tl <= pl || memcmp(t, pre ? pre : "", pl) || t[pl] != '/')
		return -EINVAL;
	r = dep_go_lookup_path(t + pl, tl - pl, own_sumdb(c), &rel);
	if (!r) {
		buf_reset(path);
		buf_add(path, t, pl);
		buf_add(path, rel.buf, rel.len);
	}
	buf_release(&rel);
	return r;
}

/*
 * Keep in f what its start needs from c's request h: c's host, port and
 * cache kind, the lookup path, and h's Authorization (the VM's, placeholder
 * and all: the swap's rules decide what goes), nothing else of the VM's.
 */
static void keep(struct px_fetch *f, const struct conn *c, const struct http_head *h,
                 const char *path)
{
	snprintf(f->host, sizeof(f->host), "%s", c->host);
	f->port = c->port;
	f->kind = c->cache_kind;
	free(f->path);
	free(f->auth);
	f->path = xstrdup(path);
	f->auth = NULL;
	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], "authorization")) {
			f->auth = xstrndup(h->hdr[i].value, h->hdr[i].value_len);
			break;
		}
}

/*
 * Start the queued fetch f: a connection of the proxy's own, its request
 * head carrying npm's Accept and the Authorization f kept.  0, or -1 when
 * it could not start (no room for a connection, a head too long).
 */
static int start(struct proxy *px, struct px_fetch *f)
{
	struct buf head = BUF_INIT;
	struct conn *g;
	int v6 = strchr(f->host, ':') != NULL;

	buf_addf(&head, "GET %s HTTP/1.1\r\nHost: %s%s%s", f->path, v6 ? "[" : "", f->host,
	         v6 ? "]" : "");
	if (f->port != 443)
		buf_addf(&head, ":%d", f->port);
	buf_addstr(&head, "\r\n");
	if (f->kind == CONFIG_CACHE_NPM)
		buf_addstr(&head, "Accept: " NPM_ACCEPT "\r\n");
	if (f->auth)
		buf_addf(&head, "Authorization: %s\r\n", f->auth);
	buf_addstr(&head, "\r\n");
	if (head.len > HTTP_MAX_HEAD || px->nconns >= px->cfg->max_conns ||
	    !(g = px_conn_new(px, -1))) {
		buf_release(&head);
		return -1;
	}
	g->own = f;
	g->intercept = 1;
	snprintf(g->ihost, sizeof(g->ihost), "%s", f->host);
	g->iport = f->port;
	g->in = xmalloc(HTTP_MAX_HEAD);
	memcpy(g->in, head.buf, head.len);
	g->in_len = head.len;
	buf_release(&head);
	f->state = PX_FETCH_PENDING;
	f->got = 0;
	px->fetches_live++;
	px_enter_head(g);
	/* The rules, the swap and the forward, as for the VM's own request; it may end here. */
	px_read_head(g);
	if (!g->dead)
		px_pump(g);
	return 0;
}

/*
 * Whether an own fetch that ended with status (its upstream's, or the
 * proxy's own answer; 0 for none) failed for a cause that may pass: no
 * answer or a cut one (a reset, a closed connection), a 5xx, 408 or 429.
 * Any other answer (a 404, a 401, the rules' 403) is the upstream's word.
 */
static int may_pass(int status)
{
	return status == 0 || status == 200 || status >= 500 || status == 408 || status == 429;
}

/*
 * The fetch f ended (status as may_pass() takes it): done when its answer
 * taught, else failed, and due again after its backoff while it has tries
 * left and the cause may pass.
 */
_Static_assert(PX_FETCH_TRIES >= 1 && PX_FETCH_TRIES <= 16, "the backoff's shift stays small");

static void ended(struct proxy *px, struct px_fetch *f, int status)
{
	if (f->ok) {
		f->state = PX_FETCH_DONE;
		return;
	}
	f->state = PX_FETCH_FAILED;
	f->retry_at = 0;
	/* Too large will not pass: it stands at once, like a 404. */
	if (may_pass(status) && !f->too_big && f->tries >= 1 && f->tries < PX_FETCH_TRIES)
		f->retry_at = px->now_ms + ((int64_t)PX_FETCH_BACKOFF_MS << (f->tries - 1));
}

/*
 * The queued fetch f that nobody waits for: as if never begun (not
 * counted; the next request for its key begins it again at once).
 */
static void drop(struct proxy *px, struct px_fetch *f)
{
	f->tries--;
	px->fetches_begun--;
	f->state = PX_FETCH_FAILED;
	f->retry_at = px->now_ms;
}

/*
 * The queued fetches there is room in flight for, started oldest first;
 * those no request waits for any more are dropped.
 */
static void drain(struct proxy *px)
{
	struct px_fetch *f;

	while (px->fetch_q && px->fetches_live < PX_FETCH_LIVE) {
		f = px->fetch_q;
		px->fetch_q = f->qnext;
		if (!px->fetch_q)
			px->fetch_q_end = &px->fetch_q;
		f->qnext = NULL;
		if (!f->waiters) {
			drop(px, f);
		} else if (start(px, f) < 0) {
			ended(px, f, 0);
			px->fetch_wake = 1;
		}
		free(f->path);
		free(f->auth);
		f->path = f->auth = NULL;
	}
}

/*
 * Whether the task may begin one more own fetch; the first time it may
 * not, the log says so.
 */
static int may_begin(struct proxy *px)
{
	int max = px->cfg->own_fetch_max > 0 ? px->cfg->own_fetch_max : PROXY_OWN_FETCH_DEFAULT;
	char what[160];

	if (max > PROXY_OWN_FETCH_CEILING)
		max = PROXY_OWN_FETCH_CEILING;
	if (px->fetches_begun < max)
		return 1;
	if (!px->fetch_max_said) {
		px->fetch_max_said = 1;
		snprintf(what, sizeof(what),
		         "the proxy's own metadata fetches reached this task's limit of %d", max);
		px_log_note(px, what, 0);
	}
	return 0;
}

void px_fetch_unwait(struct conn *c)
{
	if (!c->waits)
		return;
	c->waits->waiters--;
	c->waits = NULL;
}

/* c waits for f. */
static void wait_on(struct conn *c, struct px_fetch *f)
{
	px_fetch_unwait(c);
	c->waits = f;
	f->waiters++;
}

int px_fetch_meta(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	struct proxy *px = c->px;
	struct buf path = BUF_INIT, key = BUF_INIT;
	struct px_fetch **sp, *f;
	int r;

	px_fetch_unwait(c);
	if (c->cache_kind == CONFIG_CACHE_NPM)
		r = dep_npm_doc_path(t, tl, &path);
	else if (c->cache_kind == CONFIG_CACHE_GO)
		r = go_lookup_path(c, t, tl, &path);
	else
		r = -EINVAL;
	if (r < 0) {
		buf_release(&path);
		return 0;
	}
	buf_addf(&key, "%s:%d %s", c->host, c->port, path.buf);
	grow(px);
	sp = slot(px, key.buf);
	f = *sp;
	if (!f && px->fetches_nr >= PX_FETCH_MAX) {
		c->cache_why = "no room for the proxy's own metadata fetch";
		r = 2;
		goto out;
	}
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->key = buf_detach(&key, NULL);
		*sp = f;
		px->fetches_nr++;
	}
	if (!f->tries ||
	    (f->state == PX_FETCH_FAILED && f->retry_at && px->now_ms >= f->retry_at)) {
		if (!may_begin(px)) {
			c->cache_why = "the proxy's own metadata fetches reached their limit";
			r = 2;
			goto out;
		}
		px->fetches_begun++;
		f->tries++;
		f->ok = f->too_big = 0;
		f->retry_at = 0;
		keep(f, c, h, path.buf);
		f->state = PX_FETCH_QUEUED;
		if (!px->fetch_q)
			px->fetch_q_end = &px->fetch_q;
		*px->fetch_q_end = f;
		px->fetch_q_end = &f->qnext;
		wait_on(c, f); /* before drain(): a queued fetch with no waiter is dropped */
		drain(px);
		/*
		 * c waits, even for a fetch already ended (on a kept connection
		 * the answer can come before start() returns, or none could
		 * start): its end woke the waiting requests, and c looks up what
		 * it taught then.
		 */
		r = 1;
		goto out;
	}
	r = f->state == PX_FETCH_PENDING || f->state == PX_FETCH_QUEUED ? 1 : 2;
	if (r == 1)
		wait_on(c, f);
	if (f->state == PX_FETCH_FAILED && f->too_big)
		c->cache_why = "the metadata the proxy fetched is over its cap";
	else if (f->state == PX_FETCH_FAILED)
		c->cache_why = "the proxy's own metadata fetch failed";
	else if (f->state == PX_FETCH_DONE)
		c->cache_why = "the metadata the proxy fetched does not name it";
out:
	buf_release(&path);
	buf_release(&key);
	return r;
}

void px_fetch_learnt(struct conn *c)
{
	c->own->ok = 1;
}

int px_fetch_body(struct conn *c, size_t n)
{
	struct px_fetch *f = c->own;

	f->got += n;
	if (f->got <= DEP_META_MAX)
		return 0;
	f->too_big = 1;
	px_abort_forward(c, "the metadata the proxy fetched is over its cap");
	return 1;
}

void px_fetch_end(struct conn *c)
{
	c->px->fetches_live--;
	ended(c->px, c->own, c->status);
	c->own = NULL;
	c->px->fetch_wake = 1;
}

void px_fetch_wake(struct proxy *px)
{
	px->fetch_wake = 0;
	drain(px);
	for (struct conn *c = px->conns, *next; c; c = next) {
		next = c->next;
		if (c->dead || c->state != ST_CWAIT)
			continue;
		px_fetch_unwait(c);
		c->state = ST_HEAD;
		px_pump(c);
	}
}

void px_fetch_free(struct proxy *px)
{
	for (size_t i = 0; i < px->fetches_cap; i++)
		if (px->fetches[i]) {
			free(px->fetches[i]->key);
			free(px->fetches[i]->path);
			free(px->fetches[i]->auth);
			free(px->fetches[i]);
		}
	free(px->fetches);
	px->fetches = NULL;
	px->fetches_cap = px->fetches_nr = 0;
}
