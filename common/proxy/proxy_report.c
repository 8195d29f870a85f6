#include "proxy/proxy_report.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/json_get.h"
#include "base/banned.h"

/* FNV-1a; 0 marks an empty slot, so no name hashes to it. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

/* Count a host past the list once: 1 when it is new. */
static int seen_add(struct proxy_report *r, const char *name)
{
	uint64_t h = name_hash(name);
	size_t i;

	if (!r->seen) {
		r->seen_slots = 2 * PROXY_REPORT_MORE; /* at most half full */
		r->seen = xcalloc(r->seen_slots, sizeof(*r->seen));
	}
	for (i = h % r->seen_slots; r->seen[i]; i = (i + 1) % r->seen_slots)
		if (r->seen[i] == h)
			return 0;
	if (r->more_hosts >= PROXY_REPORT_MORE) {
		r->more_hosts_at_least = 1;
		return 0;
	}
	r->seen[i] = h;
	return 1;
}

void proxy_report_count(struct proxy_report *r, enum proxy_verdict v, const char *name,
                        uint64_t sent, uint64_t received)
{
	struct proxy_report_host *hp = NULL;

	if (v == PROXY_REFUSED) {
		r->refused++;
		return;
	}
	if (v == PROXY_FAILED) {
		r->failed++;
		return;
	}
	r->allowed++;
	if (!name || strlen(name) > PROXY_REPORT_HOST_MAX)
		return;
	for (size_t i = 0; i < r->nhosts && !hp; i++)
		if (!strcmp(r->hosts[i].name, name))
			hp = &r->hosts[i];
	if (!hp && r->nhosts < PROXY_REPORT_HOSTS) {
		if (!r->hosts)
			r->hosts = xcalloc(PROXY_REPORT_HOSTS, sizeof(*r->hosts));
		hp = &r->hosts[r->nhosts++];
		memcpy(hp->name, name, strlen(name) + 1);
	}
	if (!hp) {
		r->more_hosts += seen_add(r, name);
		r->more_allowed++;
		return;
	}
	hp->allowed++;
	hp->sent += sent;
	hp->received += received;
}

void proxy_report_secret(struct proxy_report *r, const char *name, const char *host, int refused)
{
	struct proxy_report_secret *sp = NULL;
	char nm[PROXY_REPORT_SECRET_NAME + 1];

	snprintf(nm, sizeof(nm), "%s", name);
	for (size_t i = 0; i < r->nsecrets && !sp; i++)
		if (!strcmp(r->secrets[i].name, nm) && !strcmp(r->secrets[i].host, host))
			sp = &r->secrets[i];
	if (!sp && r->nsecrets < PROXY_REPORT_SECRETS) {
		if (!r->secrets)
			r->secrets = xcalloc(PROXY_REPORT_SECRETS, sizeof(*r->secrets));
		sp = &r->secrets[r->nsecrets++];
		memcpy(sp->name, nm, strlen(nm) + 1);
		snprintf(sp->host, sizeof(sp->host), "%s", host);
	}
	if (!sp)
		r->more_secrets++;
	else if (refused)
		sp->refused++;
	else
		sp->sent++;
}

static json_t *count(uint64_t n)
{
	return json_integer((json_int_t)(n > INT64_MAX ? INT64_MAX : n));
}

void proxy_report_json(const struct proxy_report *r, struct buf *out)
{
	json_t *root = json_object(), *hosts = json_array();
	char *text;

	for (size_t i = 0; i < r->nhosts; i++) {
		json_t *h = json_object();

		json_object_set_new(h, "host", json_string(r->hosts[i].name));
		json_object_set_new(h, "allowed", count(r->hosts[i].allowed));
		json_object_set_new(h, "sent", count(r->hosts[i].sent));
		json_object_set_new(h, "received", count(r->hosts[i].received));
		json_array_append_new(hosts, h);
	}
	json_object_set_new(root, "version", json_integer(PROXY_REPORT_VERSION));
	json_object_set_new(root, "hosts", hosts);
	json_object_set_new(root, "more_hosts", count(r->more_hosts));
	json_object_set_new(root, "more_hosts_at_least", json_boolean(r->more_hosts_at_least));
	json_object_set_new(root, "more_allowed", count(r->more_allowed));
	json_object_set_new(root, "allowed", count(r->allowed));
	json_object_set_new(root, "refused", count(r->refused));
	json_object_set_new(root, "failed", count(r->failed));
	json_object_set_new(root, "log_left_out", count(r->log_left_out));
	if (r->usage.present)
		json_object_set_new(root, "usage", usage_count_to_json(&r->usage));
	if (r->nsecrets || r->more_secrets) {
		json_t *secrets = json_array();

		for (size_t i = 0; i < r->nsecrets; i++)
			json_array_append_new(
			    secrets,
			    json_pack("{s:s, s:s, s:o, s:o}", "name", r->secrets[i].name, "host",
			              r->secrets[i].host, "sent", count(r->secrets[i].sent),
			              "refused", count(r->secrets[i].refused)));
		json_object_set_new(root, "secrets", secrets);
		json_object_set_new(root, "more_secrets", count(r->more_secrets));
	}
	if (r->cache_hits || r->cache_misses || r->cache_bytes || r->cache_upstream ||
	    r->cache_bad || r->own_fetches)
		json_object_set_new(
		    root, "cache",
		    json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "hits", count(r->cache_hits),
		              "misses", count(r->cache_misses), "bytes_from_cache",
		              count(r->cache_bytes), "bytes_from_upstream",
		              count(r->cache_upstream), "refused", count(r->cache_bad),
		              "own_fetches", count(r->own_fetches), "own_fetch_bytes",
		              count(r->own_fetch_bytes)));
	text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text)
		die_oom();
	buf_addstr(out, text);
	buf_addch(out, '\n');
	free(text);
	json_decref(root);
}

static int bad(struct buf *err, const char *what)
{
	buf_addf(err, "the proxy's record: %s", what);
	return -EINVAL;
}

/*
 * A count, key of o: an integer from 0 to 2^63 - 1, into *out (with
 * JSON_OPTIONAL in flags, an absent one leaves *out).  0, or -EINVAL.
 */
static int get_count_flags(json_t *o, const char *key, unsigned flags, uint64_t *out,
                           struct buf *err)
{
	struct buf why = BUF_INIT;
	int64_t n;
	int r = json_get_int(o, key, flags, 0, INT64_MAX, &n, &why);

	if (r > 0)
		*out = (uint64_t)n;
	else if (r < 0)
		bad(err, why.buf);
	buf_release(&why);
	return r < 0 ? r : 0;
}

static int get_count(json_t *o, const char *key, uint64_t *out, struct buf *err)
{
	return get_count_flags(o, key, 0, out, err);
}

static int get_count_opt(json_t *o, const char *key, uint64_t *out, struct buf *err)
{
	return get_count_flags(o, key, JSON_OPTIONAL, out, err);
}

static int host_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > PROXY_REPORT_HOST_MAX)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

static int parse_secrets(json_t *root, struct proxy_report *r, struct buf *err)
{
	struct buf why = BUF_INIT;
	json_t *list = NULL;
	int ret = json_get_list(root, "secrets", JSON_OPTIONAL, PROXY_REPORT_SECRETS, &list, &why);

	if (ret < 0)
		bad(err, why.buf);
	buf_release(&why);
	if (ret <= 0)
		return ret;
	if (get_count(root, "more_secrets", &r->more_secrets, err))
		return -EINVAL;
	if (json_array_size(list))
		r->secrets = xcalloc(json_array_size(list), sizeof(*r->secrets));
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *e = json_array_get(list, i);
		const char *name = json_str_checked(json_object_get(e, "name"),
		                                    PROXY_REPORT_SECRET_NAME),
		           *host =
		               json_str_checked(json_object_get(e, "host"), PROXY_REPORT_HOST_MAX);
		struct proxy_report_secret *sp = &r->secrets[i];

		if (!name || !host_name_ok(name) || !host || !host_name_ok(host))
			return bad(err, "a secret without a proper name or host");
		memcpy(sp->name, name, strlen(name) + 1);
		memcpy(sp->host, host, strlen(host) + 1);
		if (get_count(e, "sent", &sp->sent, err) ||
		    get_count(e, "refused", &sp->refused, err))
			return -EINVAL;
		r->nsecrets++;
	}
	return 0;
}

int proxy_report_parse(const char *p, size_t n, struct proxy_report *r, struct buf *err)
{
	struct buf why = BUF_INIT;
	json_t *root = NULL, *hosts = NULL, *v;
	json_error_t jerr;
	int64_t version;
	int ret = -EINVAL;

	memset(r, 0, sizeof(*r));
	if (n > PROXY_REPORT_MAX)
		return bad(err, "too large");
	root = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!root || !json_is_object(root)) {
		ret = bad(err, "not a JSON object");
		goto out;
	}
	if (json_get_int(root, "version", 0, PROXY_REPORT_VERSION, PROXY_REPORT_VERSION, &version,
	                 &why) < 0) {
		ret = bad(err, why.buf);
		goto out;
	}
	if (get_count(root, "more_hosts", &r->more_hosts, err) ||
	    get_count(root, "more_allowed", &r->more_allowed, err) ||
	    get_count(root, "allowed", &r->allowed, err) ||
	    get_count(root, "refused", &r->refused, err) ||
	    get_count(root, "failed", &r->failed, err) ||
	    get_count(root, "log_left_out", &r->log_left_out, err))
		goto out;
	if (json_get_bool(root, "more_hosts_at_least", 0, &r->more_hosts_at_least, &why) < 0) {
		ret = bad(err, why.buf);
		goto out;
	}
	/* Older records have no usage: then usage.present stays 0. */
	v = json_object_get(root, "usage");
	if (v && !json_is_null(v) && usage_count_from_json(v, &r->usage, err) < 0) {
		ret = -EINVAL;
		goto out;
	}
	/* Older records, and records of tasks without secrets, have none. */
	if (parse_secrets(root, r, err) < 0)
		goto out;
	/* The same for the dependency cache. */
	v = json_object_get(root, "cache");
	if (v && !json_is_null(v) &&
	    (!json_is_object(v) || get_count(v, "hits", &r->cache_hits, err) ||
	     get_count(v, "misses", &r->cache_misses, err) ||
	     get_count(v, "bytes_from_cache", &r->cache_bytes, err) ||
	     get_count(v, "bytes_from_upstream", &r->cache_upstream, err) ||
	     get_count(v, "refused", &r->cache_bad, err) ||
	     /* Records written before the own fetches were counted apart have neither. */
	     get_count_opt(v, "own_fetches", &r->own_fetches, err) ||
	     get_count_opt(v, "own_fetch_bytes", &r->own_fetch_bytes, err))) {
		if (!err->len)
			bad(err, "'cache' is not an object");
		goto out;
	}
	if (json_get_list(root, "hosts", 0, PROXY_REPORT_HOSTS, &hosts, &why) < 0) {
		ret = bad(err, why.buf);
		goto out;
	}
	if (json_array_size(hosts))
		r->hosts = xcalloc(json_array_size(hosts), sizeof(*r->hosts));
	for (size_t i = 0; i < json_array_size(hosts); i++) {
		json_t *h = json_array_get(hosts, i);
		const char *name =
		    json_str_checked(json_object_get(h, "host"), PROXY_REPORT_HOST_MAX);
		struct proxy_report_host *hp = &r->hosts[i];

		if (!name || !host_name_ok(name)) {
			ret = bad(err, "a host without a proper name");
			goto out;
		}
		memcpy(hp->name, name, strlen(name) + 1);
		if (get_count(h, "allowed", &hp->allowed, err) ||
		    get_count(h, "sent", &hp->sent, err) ||
		    get_count(h, "received", &hp->received, err))
			goto out;
		r->nhosts++;
	}
	ret = 0;
out:
	buf_release(&why);
	json_decref(root);
	if (ret < 0)
		proxy_report_release(r);
	return ret;
}

void proxy_report_release(struct proxy_report *r)
{
	free(r->hosts);
	free(r->secrets);
	free(r->seen);
	memset(r, 0, sizeof(*r));
}
