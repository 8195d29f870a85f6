/*
 * The dependency cache in the proxy (docs/cache.md): on an intercepted host
 * whose allow rule has a cache kind, the metadata passing through (an npm
 * package document, a PyPI index page, a crates sparse index file, a Debian
 * Packages index) is read for its digests, and an
 * artifact whose digest this task learnt is answered from the store
 * (common/net/dep_cache.h), or forwarded and checked as it passes, and
 * stored when it matches.
 *
 * Everything runs in the event loop: the store's lock is taken without
 * waiting (another filler holding it: the request is forwarded and not
 * stored), and the file I/O is one header read per lookup, one write per
 * chunk of the answer (at most SCRATCH_SIZE), one read per chunk of a hit,
 * and one fsync and rename per entry stored.  No step reads much at once: a
 * Debian index is read as its bytes come, and a Go module zip's h1 is worked
 * out from its fill a step a turn of the loop (px_cache_zip_step()).
 *
 * A stored artifact's key is its URL and the digest it was checked against
 * ("URL#sha512=HEX"): a hit is always an artifact checked against the
 * digest this task's own metadata gives.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/blake2b.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/hex.h"
#include "config/config.h"
#include "net/allow.h"
#include "net/dep_cache.h"
#include "net/go_sum.h"
#include "net/http.h"
#include "proxy/dep_debian.h"
#include "proxy/dep_go.h"
#include "proxy/dep_pypi.h"
#include "proxy/dep_rules.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_report.h"
#include "proxy/proxy_secrets.h"
#include "base/banned.h"

const struct config_rule *px_cache_rule(const struct conn *c)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	if (!c->px->cfg->cache || !ps)
		return NULL;
	for (size_t i = 0; i < ps->nr_rules; i++)
		if (ps->rules[i].cache && allow_match(&ps->rule_hosts[i], c->host, c->port))
			return &ps->rules[i];
	return NULL;
}

/* The cache kind of c's host: its cached rule's. */
static int host_kind(const struct conn *c)
{
	const struct config_rule *r = px_cache_rule(c);

	return r ? (int)r->cache : CONFIG_CACHE_NONE;
}

/* Whether t (tl bytes) is "/@..." with one '%' and no other '/': a scoped npm document. */
static int npm_scoped_doc(const char *t, size_t tl)
{
	size_t pct = 0;

	if (tl < 3 || t[1] != '@' || memchr(t + 1, '/', tl - 1))
		return 0;
	for (size_t i = 0; i < tl; i++)
		pct += t[i] == '%';
	return pct == 1;
}

/* The fill under way, if any, given up: nothing of it is stored. */
static void fill_drop(struct conn *c)
{
	if (!c->fill)
		return;
	dep_cache_fill_abort(c->fill);
	free(c->fill);
	c->fill = NULL;
}

/* The artifact's digests under way, if any, let go. */
static void digest_drop(struct conn *c)
{
	EVP_MD_CTX_free(c->cmd);
	c->cmd = NULL;
	free(c->b2);
	c->b2 = NULL;
}

/* Forget c's metadata answer (its bytes leave the proxy's total). */
static void drop_meta(struct conn *c)
{
	if (c->deb) {
		c->px->meta_bytes -= c->deb_held;
		dep_deb_reader_free(c->deb);
		c->deb = NULL;
		c->deb_held = 0;
	}
	if (!c->meta)
		return;
	c->px->meta_bytes -= c->meta->len;
	buf_release(c->meta);
	free(c->meta);
	c->meta = NULL;
}

/* Whether c reads its answer for digests. */
static int reading(const struct conn *c)
{
	return c->meta || c->deb;
}

/*
 * Read c's answer for digests, from the store key ckey: a Debian index as
 * it comes (no index is held whole, and none is read in one step), any other
 * metadata kept whole.  A reader for a key with no dists/ reads nothing.
 */
static void meta_start(struct conn *c)
{
	if (c->cache_kind == CONFIG_CACHE_DEBIAN) {
		c->deb = dep_deb_reader_new(c->ckey, NULL);
		return;
	}
	c->meta = xcalloc(1, sizeof(*c->meta));
	buf_init(c->meta, 0);
}

/* n more bytes of c's metadata answer, kept under one answer's cap and all answers'. */
static void meta_add(struct conn *c, const char *p, size_t n)
{
	struct proxy *px = c->px;
	size_t held;

	if (c->deb) {
		/* What the reader holds (its table so far) counts as kept bytes do. */
		if (dep_deb_reader_feed(c->deb, p, n, NULL) < 0 ||
		    (held = dep_deb_reader_size(c->deb)) > DEP_META_MAX ||
		    px->meta_bytes - c->deb_held + held > PX_META_TOTAL) {
			drop_meta(c);
			return;
		}
		px->meta_bytes += held - c->deb_held;
		c->deb_held = held;
		return;
	}
	/* One answer's cap, and all the answers' together (the VM opens connections). */
	if (c->meta->len + n > DEP_META_MAX || px->meta_bytes + n > PX_META_TOTAL) {
		drop_meta(c);
		return;
	}
	buf_add(c->meta, p, n);
	px->meta_bytes += n;
}

/*
 * A checksum database's lookup answer is whole: learn its h1 lines if its
 * note verifies with sum.golang.org's key or a cached host's sumdb-key.
 */
static void go_lookup(struct conn *c)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	struct go_vkey *keys = xcalloc(ps->nr_rules + 1, sizeof(*keys));
	struct buf why = BUF_INIT;
	size_t nr = 0;

	if (go_vkey_parse(GO_SUMDB_KEY, &keys[nr++], &why) < 0)
		BUG("sum.golang.org's key: %s", why.buf);
	for (size_t i = 0; i < ps->nr_rules; i++)
		if (ps->rules[i].sumdb_key &&
		    go_vkey_parse(ps->rules[i].sumdb_key, &keys[nr], NULL) == 0)
			nr++;
	dep_go_lookup(&c->px->digests, c->ckey, c->meta->buf, c->meta->len, keys, nr, &why);
	free(keys);
	buf_release(&why);
}

/* The metadata answer is whole: learn its digests. */
static void learn(struct conn *c)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;

	if (c->cache_kind == CONFIG_CACHE_NPM)
		dep_npm_document(&px->digests, c->ckey, c->meta->buf, c->meta->len, &why);
	else if (c->cache_kind == CONFIG_CACHE_PYPI)
		dep_pypi_index(&px->digests, c->ckey, c->meta->buf, c->meta->len, &why);
	else if (c->cache_kind == CONFIG_CACHE_CRATES)
		dep_crates_index(&px->digests, c->ckey, c->meta->buf, c->meta->len, &why);
	else if (c->cache_kind == CONFIG_CACHE_GO)
		go_lookup(c);
	else
		dep_deb_reader_end(c->deb, &px->digests, &why);
	buf_release(&why);
}

void px_cache_end(struct conn *c)
{
	fill_drop(c);
	if (c->hit) {
		dep_cache_entry_clear(c->hit);
		free(c->hit);
		c->hit = NULL;
	}
	digest_drop(c);
	drop_meta(c);
	free(c->ckey);
	c->ckey = NULL;
	free(c->cscope);
	c->cscope = NULL;
	c->cdig = NULL;
	c->cdig_seen = 0;
	c->hit_left = 0;
	c->cache_kind = 0;
	c->cache_note = NULL;
	c->cache_why = NULL;
	c->go_zip = 0;
	go_zip_check_free(c->zipck);
	c->zipck = NULL;
	if (c->zip_tail) {
		buf_release(c->zip_tail);
		free(c->zip_tail);
		c->zip_tail = NULL;
	}
	if (c->own && c->dead)
		px_fetch_end(c);
	if (c->dead)
		px_fetch_unwait(c);
}

/* Start serving the entry e (taken over) as the answer to c's request h. */
static void serve_hit(struct conn *c, const struct http_head *h, struct dep_cache_entry *e)
{
	struct proxy *px = c->px;
	struct buf b = BUF_INIT;

	c->hit = xmalloc(sizeof(*c->hit));
	*c->hit = *e;
	c->hit_left = e->size;
	c->cache_note = "hit";
	c->status = 200;
	c->client_close = h->conn_close;
	c->close_after = h->conn_close;
	c->req_done = 1;
	c->resp_head_done = 1;
	c->rechunk = 1;
	/* The same shape as a forwarded intercepted answer: chunked. */
	buf_addf(&b,
	         "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
	         "Transfer-Encoding: chunked\r\nConnection: %s\r\n\r\n",
	         c->close_after ? "close" : "keep-alive");
	px_spill_add(&c->to_client, b.buf, b.len);
	buf_release(&b);
	c->state = ST_FWD;
	c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
}

void px_cache_step(struct conn *c)
{
	struct proxy *px = c->px;

	for (int rounds = 0; rounds < 16; rounds++) {
		int f = px_flush_spill(c, &c->to_client, 1);
		ssize_t n;
		size_t want;

		if (f < 0) {
			px_abort_forward(c, "client write failed");
			return;
		}
		if (!f)
			return;
		c->deadline_ms = px->now_ms + px->cfg->idle_timeout_ms;
		if (c->rechunk == 2) {
			if (px->cfg->report)
				px->cfg->report->cache_bytes += c->hit->size;
			px_finish_request(c);
			return;
		}
		want =
		    c->hit_left < sizeof(px->scratch) ? (size_t)c->hit_left : sizeof(px->scratch);
		n = want ? read(c->hit->fd, px->scratch, want) : 0;
		if (n < 0 || (want && n == 0)) {
			/* The entry shrank under us: the client never gets the answer's end. */
			c->cache_note = "bad";
			px_abort_forward(c, "the cache entry was cut short");
			return;
		}
		c->hit_left -= (uint64_t)n;
		c->received += (uint64_t)n;
		if (reading(c)) {
			/* A by-hash index from the store: checked against its URL when stored. */
			meta_add(c, px->scratch, (size_t)n);
			if (reading(c) && !c->hit_left) {
				learn(c);
				drop_meta(c);
			}
		}
		px_intercept_body(c, px->scratch, (size_t)n, c->hit_left == 0);
	}
}

/* The store key of an artifact: its URL and the digest it is checked against. */
static void store_key(const char *key, const struct dep_digest *d, struct buf *out)
{
	char hex[129];

	hex_encode(hex, d->md, d->len);
	buf_addf(out, "%s#%s=%s", key, d->algo, hex);
}

/*
 * Whether what c's request h gets may hang on a credential: a secret swapped
 * into it; its own Authorization or Cookie (a session cookie a request with
 * a secret was given); or a host a secret goes to, where the host may have
 * tied what an earlier request with the secret proved to the connection, or
 * to anything else the VM kept.  What such a request fetches is the
 * project's (docs/cache.md, "Scopes").
 */
static int credentialed(const struct conn *c, const struct http_head *h)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;

	if (c->used[0] || http_header(h, "authorization", NULL) || http_header(h, "cookie", NULL))
		return 1;
	for (size_t i = 0; i < ps->nr; i++)
		if (!ps->secrets[i].api && allow_match(&ps->secrets[i].hosts, c->host, c->port))
			return 1;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct swap_secret *x = *(const struct swap_secret *const *)a;
	const struct swap_secret *y = *(const struct swap_secret *const *)b;

	return strcmp(x->name, y->name);
}

/*
 * The scope c's request is kept under (docs/cache.md, "Scopes"): "" without
 * a credential; with one, the project's, or with the secrets that go to its
 * host, the scope of their values (dep_cache_secret_scope(), by their names'
 * order), so that an artifact stays reachable only while the project has the
 * same secrets for that host.  NULL when the project keeps no such artifact.
 */
static char *request_scope(const struct conn *c, const struct http_head *h)
{
	const struct proxy_secrets *ps = c->px->cfg->secrets;
	const char *base = c->px->cfg->cache_scope;
	const struct swap_secret **v;
	const char **values;
	struct buf scope = BUF_INIT;
	size_t n = 0;

	if (!credentialed(c, h))
		return xstrdup("");
	if (!base)
		return NULL;
	v = xcalloc(ps->nr + 1, sizeof(*v));
	values = xcalloc(ps->nr + 1, sizeof(*values));
	for (size_t i = 0; i < ps->nr; i++)
		if (!ps->secrets[i].api && allow_match(&ps->secrets[i].hosts, c->host, c->port))
			v[n++] = &ps->secrets[i];
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 0; i < n; i++)
		values[i] = v[i]->value;
	if (n)
		dep_cache_secret_scope(c->px->cfg->cache, base, values, n, &scope);
	else
		buf_addstr(&scope, base);
	free(v);
	free(values);
	if (scope.len)
		return buf_detach(&scope, NULL);
	buf_release(&scope); /* a scope the store does not take: not kept */
	return NULL;
}

/*
 * Whether the other filler of skey, whose lock c found held, has written
 * nothing for PX_FILL_STALL_MS since c began to wait: its client (another
 * task's VM) may have stopped reading to hold the lock.
 */
static int filler_stalled(struct conn *c, const char *skey)
{
	struct proxy *px = c->px;
	uint64_t size = 0;

	if (dep_cache_fill_size(px->cfg->cache, skey, c->cscope, &size) < 0)
		size = 0;
	if (!c->cwait_moved_ms || size != c->cwait_size) {
		c->cwait_size = size;
		c->cwait_moved_ms = px->now_ms;
		return 0;
	}
	return px->now_ms - c->cwait_moved_ms >= PX_FILL_STALL_MS;
}

/*
 * Another filler holds the artifact's lock: c waits (ST_CWAIT), its head
 * left unread, and the sweep reads it again at its next round, until the
 * lock is free (the entry is then a hit), or the fill wait (the idle timeout
 * when shorter) passed or the fill stalled (filler_stalled()); then it is
 * forwarded and not stored, and c->cache_why says why.  1 when c waits.
 */
static int wait_for_filler(struct conn *c, const struct http_head *h)
{
	struct proxy *px = c->px;
	int wait = px->cfg->fill_wait_ms < px->cfg->idle_timeout_ms ? px->cfg->fill_wait_ms
	                                                            : px->cfg->idle_timeout_ms;

	if (!c->cwait_until)
		c->cwait_until = px->now_ms + wait;
	if (px->now_ms >= c->cwait_until) {
		c->cwait_until = 0;
		c->cache_why = "another filler of it took longer than the fill wait";
		return 0;
	}
	px_cache_end(c);
	c->in_off -= h->head_len;
	c->state = ST_CWAIT;
	c->deadline_ms = px->now_ms;
	return 1;
}

int px_cache_request(struct conn *c, const struct http_head *h, const char *t, size_t tl)
{
	struct proxy *px = c->px;
	struct buf key = BUF_INIT, skey = BUF_INIT, id = BUF_INIT, why = BUF_INIT, dec = BUF_INIT;
	struct dep_cache_entry e = DEP_CACHE_ENTRY_INIT;
	const struct dep_digest *d;
	struct dep_digest byhash;
	enum dep_deb_path deb = DEP_DEB_OTHER;
	int r, ret = 0, crate = 0, pyfile = 0, go = 0;

	c->cache_kind = host_kind(c);
	if (!c->cache_kind)
		return 0;
	if (c->cache_kind == CONFIG_CACHE_GO) {
		/* Go's "%21" is a '!' (docs/cache.md, "go"); the request goes as it came. */
		dep_unescape_one(t, tl, '!', &dec);
		t = dec.buf;
		tl = dec.len;
	} else if (c->cache_kind == CONFIG_CACHE_NPM && npm_scoped_doc(t, tl)) {
		/* A scoped package's document, "/@SCOPE%2fNAME" (one escape): read as
		 * "/@SCOPE/NAME". */
		dep_unescape_one(t, tl, '/', &dec);
		t = dec.buf;
		tl = dec.len;
	} else if (c->cache_kind == CONFIG_CACHE_DEBIAN) {
		/* apt's "%7e" is a '~' (docs/cache.md, "debian"); the request goes as it came. */
		dep_unescape_one(t, tl, '~', &dec);
		t = dec.buf;
		tl = dec.len;
	}
	if (dep_key(c->host, c->port, t, tl, &key, &why) < 0) {
		c->cache_note = "bypass";
		goto out;
	}
	if (c->cache_kind == CONFIG_CACHE_CRATES) {
		/* A crate file: by name and version, learnt on whichever index host. */
		crate = !dep_crate_download(t, tl, &id, NULL);
		d = crate ? dep_digests_find(&px->digests, id.buf) : NULL;
	} else if (c->cache_kind == CONFIG_CACHE_GO) {
		/* A module's zip or .mod, by the h1 its checksum database lookup gave. */
		go = dep_go_download(&px->digests, t, tl, &d, &c->go_zip);
		crate = go || !dep_go_is_lookup(t, tl);
	} else if (c->cache_kind == CONFIG_CACHE_DEBIAN) {
		/* A by-hash file's digest is its URL's; a package's, its Packages index's. */
		deb = dep_deb_path(t, tl, &byhash);
		d = deb == DEP_DEB_BY_HASH   ? &byhash
		    : deb == DEP_DEB_PACKAGE ? dep_digests_find(&px->digests, key.buf)
		                             : NULL;
	} else {
		/* Only a path shaped as an artifact: metadata may name a document or a page
		 * with its digest of today, and it is mutable (docs/cache.md, step 2). */
		d = (c->cache_kind == CONFIG_CACHE_NPM ? dep_npm_tarball(t, tl)
		                                       : dep_pypi_dist(t, tl))
		        ? dep_digests_find(&px->digests, key.buf)
		        : NULL;
		/* A PyPI file names its own BLAKE2b-256: checked, whatever the index says.  Not
		 * its siblings (a wheel's PEP 658 "FILE.whl.metadata"): they are other bytes. */
		pyfile = c->cache_kind == CONFIG_CACHE_PYPI && dep_pypi_dist(t, tl) &&
		         !dep_pypi_file(t, tl, c->b2md, NULL);
	}
	if (!d && !c->own && (c->cache_kind == CONFIG_CACHE_NPM || go) && h->method_len == 3 &&
	    !memcmp(h->method, "GET", 3)) {
		/* No metadata named it yet (a lock file's install): the proxy fetches it itself. */
		r = px_fetch_meta(c, h, t, tl);
		if (r == 1 && wait_for_filler(c, h)) {
			ret = 1;
			goto out;
		}
		if (r) {
			/* Forwarded: it waits no more (a queued fetch with no waiter is dropped).
			 */
			px_fetch_unwait(c);
			c->cache_note = "bypass";
			if (r == 1)
				c->cache_why = "the proxy's own metadata fetch took too long";
			goto out;
		}
	}
	if (!d && pyfile) {
		/* No index named it: the path's digest is the one it is checked and kept by. */
		c->cdig_v = (struct dep_digest){NULL, "blake2b256", {0}, DEP_PYPI_B2_LEN};
		memcpy(c->cdig_v.md, c->b2md, DEP_PYPI_B2_LEN);
		d = &c->cdig_v;
	}
	if (deb == DEP_DEB_BY_HASH && dep_deb_in_dists(key.buf) && h->method_len == 3 &&
	    !memcmp(h->method, "GET", 3)) {
		/* A by-hash index: read too, from upstream or the store, once its digest matched.
		 */
		c->ckey = xstrdup(key.buf);
		meta_start(c);
	}
	if (!d) {
		/* Metadata, or an artifact this task's metadata did not name: never from the store.
		 */
		if (!crate && (c->cache_kind != CONFIG_CACHE_DEBIAN || deb == DEP_DEB_INDEX) &&
		    h->method_len == 3 && !memcmp(h->method, "GET", 3)) {
			c->ckey = buf_detach(&key, NULL);
			meta_start(c);
		}
		/* The proxy's own fetch says so in its log line, whatever its answer. */
		if (c->own)
			c->cache_note = "fetch";
		goto out;
	}
	if (!dep_request_cacheable(h, &why)) {
		c->cache_note = "bypass";
		drop_meta(c); /* a by-hash index unchecked teaches nothing */
		goto out;
	}
	/* Checked as it comes from upstream, whether stored or not. */
	/* A copy: another connection's metadata may grow the table while this one streams. */
	if (d != &c->cdig_v) {
		c->cdig_v = *d;
		c->cdig_v.key = NULL;
	}
	c->cdig = &c->cdig_v;
	c->cdig_seen = 1;
	/* h1 (Go): the .mod's sha256 as it comes; the zip's files once it is whole. */
	if (strcmp(d->algo, "blake2b256")) {
		c->cmd = EVP_MD_CTX_new();
		if (!c->cmd ||
		    !EVP_DigestInit_ex(c->cmd, EVP_get_digestbyname(go ? "sha256" : d->algo), NULL))
			BUG("cannot start a %s digest", d->algo);
	}
	if (pyfile) {
		c->b2 = xmalloc(sizeof(*c->b2));
		blake2b_init(c->b2, DEP_PYPI_B2_LEN);
	}
	c->cache_note = "miss";
	/* With a credential: kept for this project only, or not at all. */
	free(c->cscope);
	c->cscope = request_scope(c, h);
	if (!c->cscope)
		goto out;
	store_key(key.buf, d, &skey);
	if (!dep_cache_key_ok(skey.buf) || !dep_cache_scope_ok(c->cscope))
		goto out;
	r = dep_cache_lookup(px->cfg->cache, skey.buf, c->cscope, &e, &why);
	if (r == -EBADMSG) {
		/* Cut short or not this key's: never served, filled anew (docs/cache.md). */
		px_log_note(px, "the dependency cache failed", EBADMSG);
		r = 0;
	}
	if (r == 0) {
		c->fill = xmalloc(sizeof(*c->fill));
		*c->fill = (struct dep_cache_fill)DEP_CACHE_FILL_INIT;
		r = dep_cache_fill_begin(px->cfg->cache, skey.buf, c->cscope, NULL, 0, c->fill, &e,
		                         &why);
		if (r != 0) {
			free(c->fill);
			c->fill = NULL;
		}
		if (r == -EAGAIN && filler_stalled(c, skey.buf)) {
			c->cache_why = "another filler of it has written nothing for a while";
		} else if (r == -EAGAIN && wait_for_filler(c, h)) {
			ret = 1;
			goto out;
		}
		if (r == -EAGAIN)
			c->cache_note = "busy";
	}
	c->cwait_until = 0;
	c->cwait_moved_ms = 0;
	if (r == 1) {
		serve_hit(c, h, &e);
		ret = 1;
	} else if (r < 0 && r != -EAGAIN && r != -EFBIG) {
		/* -EFBIG: no room under the cap for its header; a miss like any. */
		px_log_note(px, "the dependency cache failed", -r);
	}
out:
	buf_release(&key);
	buf_release(&skey);
	buf_release(&id);
	buf_release(&why);
	buf_release(&dec);
	return ret;
}

void px_cache_head(struct conn *c, const struct http_head *h)
{
	int plain = 1;

	if (!c->cache_kind)
		return;
	for (int i = 0; i < h->nhdr; i++)
		if (http_name_is(&h->hdr[i], "content-encoding") &&
		    !(h->hdr[i].value_len == 8 && !strncasecmp(h->hdr[i].value, "identity", 8)))
			plain = 0;
	if (h->status == 200 && plain && c->respb.kind != BODY_NONE)
		return;
	/* Not the artifact's bytes (or not plain): nothing is checked, stored or read. */
	if (c->cdig)
		c->cache_note = "miss";
	fill_drop(c);
	digest_drop(c);
	c->cdig = NULL;
	drop_meta(c);
}

/*
 * The answer is whole and its digest, if it has one, is md (len bytes):
 * both digests there may be (the metadata's and a PyPI path's) must agree.
 * -1 when not (c is cut: the client never gets the answer's end), else 0
 * with what it taught learnt and its fill stored.
 */
static int verdict(struct conn *c, const unsigned char *md, unsigned int len)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;
	unsigned char b2[DEP_PYPI_B2_LEN];
	const char *bad = NULL;
	int r;

	if (c->cmd && (len != c->cdig->len || CRYPTO_memcmp(md, c->cdig->md, len)))
		bad = "the artifact does not match the digest its metadata gives";
	if (c->b2) {
		blake2b_final(c->b2, b2);
		if (CRYPTO_memcmp(b2, c->b2md, DEP_PYPI_B2_LEN))
			bad = "the file does not match the blake2b-256 its URL gives";
	}
	digest_drop(c);
	if (bad) {
		/* Nothing stored, and the client never sees the answer's end. */
		c->cache_note = "bad";
		if (px->cfg->report)
			px->cfg->report->cache_bad++;
		px_abort_forward(c, bad);
		return -1;
	}
	if (reading(c)) {
		learn(c);
		drop_meta(c);
	}
	if (c->fill) {
		r = dep_cache_fill_commit(c->fill, NULL, 0, &why);
		free(c->fill);
		c->fill = NULL;
		if (r < 0)
			px_log_note(px, "the dependency cache failed", -r);
		else
			c->cache_note = "fill";
		buf_release(&why);
	}
	return 0;
}

int px_cache_zip_step(struct conn *c)
{
	struct buf why = BUF_INIT;
	unsigned char h1[32];
	int r = go_zip_check_step(c->zipck, PX_ZIP_STEP, h1, &why);

	buf_release(&why);
	if (r == 1)
		return 1;
	if (r < 0)
		memset(h1, 0, sizeof(h1)); /* not a zip we read: a mismatch */
	go_zip_check_free(c->zipck);
	c->zipck = NULL;
	return verdict(c, h1, sizeof(h1));
}

int px_cache_body(struct conn *c, const char *p, size_t n, int done)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	int r;

	/* An own fetch's answer past one answer's cap: cut here, not read on. */
	if (c->own && px_fetch_body(c, n))
		return -1;
	if (reading(c)) {
		meta_add(c, p, n);
		/* An artifact's bytes (a by-hash index) are learnt from once they match. */
		if (done && reading(c) && !c->cmd) {
			c->cache_note = c->own ? "fetch" : "meta";
			if (c->own)
				px_fetch_learnt(c);
			learn(c);
			drop_meta(c);
		}
	}
	if (!c->cmd && !c->b2)
		return 0;
	if (c->cmd)
		EVP_DigestUpdate(c->cmd, p, n);
	if (c->b2)
		blake2b_update(c->b2, p, n);
	if (px->cfg->report)
		px->cfg->report->cache_upstream += n;
	if (c->fill && n && (r = dep_cache_fill_write(c->fill, p, n, &why)) < 0) {
		/* Too big for the cap (a miss like any), or the disk: served, not stored. */
		if (r != -EFBIG)
			px_log_note(px, "the dependency cache failed", -r);
		fill_drop(c);
	}
	buf_release(&why);
	if (!done)
		return 0;
	if (c->cmd) {
		EVP_DigestFinal_ex(c->cmd, md, &len);
		if (!strcmp(c->cdig->algo, "h1") && c->go_zip) {
			if (!c->fill) {
				/* A zip stored nowhere is not read back: the go command checks its
				 * own. */
				digest_drop(c);
				c->cache_note = "miss";
				return 0;
			}
			/* Its h1 is its files', read back from the fill in steps. */
			r = go_zip_check_begin(c->fill->fd, DEP_CACHE_HEADER, c->fill->size,
			                       &c->zipck, &why);
			buf_release(&why);
			if (!r)
				return 1;
			memset(md, 0, 32); /* not a zip we read: a mismatch */
			len = 32;
		} else if (!strcmp(c->cdig->algo, "h1")) {
			unsigned char sum[32];

			/* A .mod's h1 is its sha256's. */
			memcpy(sum, md, 32);
			go_h1_mod(sum, md);
			len = 32;
		}
	}
	return verdict(c, md, len);
}
