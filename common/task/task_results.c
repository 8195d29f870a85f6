#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "git/bundle_check.h"
#include "git/bundle_read.h"
#include "base/err.h"
#include "base/json_get.h"
#include "git/gitproto.h"
#include "base/out.h"
#include "task/task_results.h"
#include "base/shell_quote.h"
#include "base/utf8.h"
#include "base/banned.h"

static const char *const step_names[] = {"clone", "claude", "commit", "bundle"};
static const char *const status_names[] = {"ok", "failed", "timeout", "skipped"};
static const char *const ended_names[] = {"completed", "timeout", "budget", "error"};

const char *result_status_name(enum result_status s)
{
	return status_names[s];
}

const char *result_ended_name(enum result_ended e)
{
	return ended_names[e];
}

__attribute__((format(printf, 2, 3))) static int refuse(struct buf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(err, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Index of the string value v in names, or -1 (also for a non-string). */
static int pick(json_t *v, const char *const *names, size_t n)
{
	const char *s = json_str_checked(v, 64);

	if (!s)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -1;
}

/* get_int() for a long; 1 set, 0 missing (optional), <0 refused. */
static int get_long(json_t *obj, const char *key, long min, long max, long *out, struct buf *err)
{
	int64_t i;
	int r = json_get_int(obj, key, JSON_OPTIONAL, min, max, &i, err);

	if (r > 0)
		*out = (long)i;
	return r;
}

int result_commit_get(json_t *o, const char *key, char out[OID_HEX_MAX + 1])
{
	struct buf why = BUF_INIT;
	const char *s = NULL;
	int r = json_get_str(o, key, JSON_OPTIONAL, OID_HEX_MAX, &s, &why);

	buf_release(&why);
	out[0] = '\0';
	if (r <= 0)
		return r;
	if (!oid_hex_valid(s, strlen(s)))
		return -EINVAL;
	memcpy(out, s, strlen(s) + 1);
	return 1;
}

static int get_commit(json_t *obj, const char *key, char out[OID_HEX_MAX + 1], struct buf *err)
{
	int r = result_commit_get(obj, key, out);

	if (r < 0)
		buf_addf(err, "'%s' is not a commit id", key);
	return r;
}

static int parse_steps(json_t *root, struct task_result *r, struct buf *err)
{
	json_t *steps = NULL, *st;
	size_t i;
	long l;
	int ret;

	if ((ret = json_get_list(root, "steps", 0, RESULT_STEPS_MAX, &steps, err)) < 0)
		return ret;
	json_array_foreach(steps, i, st)
	{
		struct result_step *s = &r->steps[i];
		int k;

		if (!json_is_object(st))
			return refuse(err, "a step is not an object");
		if ((k = pick(json_object_get(st, "name"), step_names, ARRAY_SIZE(step_names))) < 0)
			return refuse(err, "a step has no known 'name'");
		s->name = step_names[k];
		if ((k = pick(json_object_get(st, "status"), status_names,
		              ARRAY_SIZE(status_names))) < 0)
			return refuse(err, "step '%s' has no known 'status'", s->name);
		s->status = (enum result_status)k;
		if ((ret = json_get_real(st, "start_s", JSON_OPTIONAL, 0, 1e7, &s->start_s, err)) <
		        0 ||
		    (ret = json_get_real(st, "seconds", JSON_OPTIONAL, 0, 1e7, &s->seconds, err)) <
		        0)
			return ret;
		if ((ret = get_long(st, "exit_code", 0, 255, &l, err)) < 0)
			return ret;
		s->has_exit_code = ret;
		s->exit_code = ret ? (int)l : 0;
		r->nsteps = i + 1;
	}
	return 0;
}

static int parse_claude(json_t *root, struct task_result *r, struct buf *err)
{
	json_t *c = NULL;
	const char *s = NULL;
	long l;
	int ret, k;

	if ((ret = json_get_obj(root, "claude", JSON_OPTIONAL, &c, err)) <= 0)
		return ret;
	r->has_claude = 1;
	if ((ret = get_long(c, "exit_code", 0, 255, &l, err)) < 0)
		return ret;
	r->claude.has_exit_code = ret;
	r->claude.exit_code = ret ? (int)l : 0;
	if ((ret = get_long(c, "num_turns", 0, 1000000, &r->claude.num_turns, err)) < 0)
		return ret;
	r->claude.has_turns = ret;
	if ((ret = get_long(c, "duration_ms", 0, 100L * 24 * 3600 * 1000, &r->claude.duration_ms,
	                    err)) < 0)
		return ret;
	r->claude.has_duration = ret;
	if ((ret = json_get_real(c, "total_cost_usd", JSON_OPTIONAL, 0, 1e6, &r->claude.cost_usd,
	                         err)) < 0)
		return ret;
	r->claude.has_cost = ret;
	if ((ret = json_get_str(c, "ended_by", JSON_OPTIONAL, 64, &s, err)) < 0)
		return ret;
	if (ret) {
		if ((k = pick(json_object_get(c, "ended_by"), ended_names,
		              ARRAY_SIZE(ended_names))) < 0)
			return refuse(err, "'ended_by' is not a known reason");
		r->claude.ended_by = (enum result_ended)k;
		r->claude.has_ended_by = 1;
	}
	if ((ret = json_get_str(c, "last_message", JSON_OPTIONAL, RESULT_MESSAGE_MAX, &s, err)) < 0)
		return ret;
	if (ret)
		r->claude.last_message = xstrdup(s);
	return 0;
}

/* "check": null or absent when no check ran; else exit_code (null: timed out), timed_out, seconds,
 * tail. */
static int parse_check(json_t *root, struct task_result *r, struct buf *err)
{
	struct buf tail = BUF_INIT;
	size_t cut;
	json_t *c = NULL;
	const char *s = NULL;
	long l;
	int ret;

	if ((ret = json_get_obj(root, "check", JSON_OPTIONAL, &c, err)) <= 0)
		return ret;
	r->has_check = 1;
	if ((ret = json_get_bool(c, "timed_out", 0, &r->check.timed_out, err)) < 0)
		return ret;
	if ((ret = get_long(c, "exit_code", 0, 255, &l, err)) < 0)
		return ret;
	r->check.has_exit_code = ret;
	r->check.exit_code = ret ? (int)l : 0;
	if (ret == r->check.timed_out)
		return refuse(err, "'check' has %s",
		              ret ? "an exit code and timed out"
		                  : "no exit code and did not time out");
	if ((ret = json_get_real(c, "seconds", 0, 0, GUEST_CHECK_TIMEOUT_MAX_MS / 1000 + 60,
	                         &r->check.seconds, err)) < 0)
		return ret;
	/*
	 * Kept sanitized (common/base/out.h), its last GUEST_CHECK_TAIL_MAX
	 * bytes from a character's start: what a record holds reads back the
	 * same, though the sanitizer may have made it longer.
	 */
	if ((ret = json_get_str(c, "tail", 0, 4 * GUEST_CHECK_TAIL_MAX, &s, err)) < 0)
		return ret;
	out_sanitize(&tail, s, strlen(s));
	cut = tail.len > GUEST_CHECK_TAIL_MAX ? tail.len - GUEST_CHECK_TAIL_MAX : 0;
	while (cut < tail.len && (tail.buf[cut] & 0xc0) == 0x80)
		cut++;
	r->check.tail = xstrdup(tail.buf + cut);
	buf_release(&tail);
	return 0;
}

int result_parse(const char *data, size_t len, struct task_result *r, struct buf *err)
{
	struct buf why = BUF_INIT;
	json_t *root = NULL;
	json_error_t jerr;
	const char *s = NULL;
	int64_t version;
	int ret, k;

	memset(r, 0, sizeof(*r));
	if (len > RESULT_JSON_MAX) {
		buf_addf(err, "result.json: over %d bytes", RESULT_JSON_MAX);
		return -EFBIG;
	}
	/* jansson refuses \u0000 in strings unless told otherwise: good. */
	ret = json_vm_loadb(data, len, JSON_REJECT_DUPLICATES, JSON_VM_VALUES_MAX, &root, &jerr);
	if (ret == -E2BIG) {
		ret = refuse(&why, "over %d JSON values", JSON_VM_VALUES_MAX);
		goto out;
	}
	if (!root) {
		/* jansson's reason quotes the VM's token: json_error_why() bounds it */
		buf_addstr(&why, "not JSON (");
		json_error_why(&jerr, &why);
		buf_addch(&why, ')');
		ret = -EINVAL;
		goto out;
	}
	if (!json_is_object(root)) {
		ret = refuse(&why, "not an object");
		goto out;
	}
	if ((ret = json_get_int(root, "version", 0, 1, 1, &version, &why)) < 0)
		goto out;
	r->version = (int)version;
	if ((ret = parse_steps(root, r, &why)) < 0 ||
	    (ret = json_get_real(root, "session_s", JSON_OPTIONAL, 0, 1e7, &r->session_s, &why)) <
	        0 ||
	    (ret = json_get_real(root, "session_fork_s", JSON_OPTIONAL, 0, 1e7, &r->session_fork_s,
	                         &why)) < 0)
		goto out;
	r->has_session_fork = ret > 0;
	if ((ret = json_get_str(root, "failed_step", JSON_OPTIONAL, 64, &s, &why)) < 0)
		goto out;
	if (ret) {
		if ((k = pick(json_object_get(root, "failed_step"), step_names,
		              ARRAY_SIZE(step_names))) < 0) {
			ret = refuse(&why, "'failed_step' is not a known step");
			goto out;
		}
		r->failed_step = step_names[k];
	}
	if ((ret = parse_claude(root, r, &why)) < 0)
		goto out;
	if ((ret = get_commit(root, "start_commit", r->start_commit, &why)) < 0 ||
	    (ret = get_commit(root, "end_commit", r->end_commit, &why)) < 0)
		goto out;
	if ((ret = json_get_bool(root, "changes", JSON_OPTIONAL, &r->changes, &why)) < 0)
		goto out;
	if ((ret = parse_check(root, r, &why)) < 0)
		goto out;
	ret = 0;
out:
	json_decref(root);
	if (ret < 0) {
		buf_addf(err, "result.json: %s", why.buf);
		result_release(r);
	}
	buf_release(&why);
	return ret;
}

void result_release(struct task_result *r)
{
	free(r->claude.last_message);
	free(r->check.tail);
	memset(r, 0, sizeof(*r));
}

static void add_line(struct summary *s, int vm, struct buf *text)
{
	ALLOC_GROW(s->v, s->nr + 1, s->alloc);
	s->v[s->nr].vm = vm;
	s->v[s->nr].text = buf_detach(text, NULL);
	s->nr++;
}

__attribute__((format(printf, 3, 4))) static void addf(struct summary *s, int vm, const char *fmt,
                                                       ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	add_line(s, vm, &b);
}

/* One argument of the fetch command, for the host system's shells (task_results.h). */
static void quote_arg(struct buf *b, const char *s, int windows)
{
	if (!windows || windows_quote(b, s) < 0)
		shell_quote(b, s);
}

void summary_fetch_command(const struct summary_in *in, struct buf *out)
{
	struct buf refspec = BUF_INIT;

	buf_addstr(out, "git fetch ");
	quote_arg(out, in->bundle_path, in->windows);
	buf_addstr(out, " ");
	buf_addf(&refspec, "aibox/task:%s", in->branch);
	quote_arg(out, refspec.buf, in->windows);
	buf_release(&refspec);
}

/* aibox's count of the spend beside Claude Code's own estimate (docs/budget.md). */
static void summary_usage(struct summary *s, const struct usage_count *u,
                          const struct task_result *r)
{
	struct buf b = BUF_INIT;

	/* A task that made no API request (it stopped before Claude Code asked) has no count to
	 * give. */
	if (u->requests || u->nano) {
		buf_addstr(&b, "aibox counted ");
		usage_format_usd(&b, u->nano);
		buf_addf(&b, " USD for %llu API request%s", (unsigned long long)u->requests,
		         u->requests == 1 ? "" : "s");
		if (r)
			buf_addf(&b, " (Claude Code's own estimate: about %.2f USD)",
			         r->claude.cost_usd);
		add_line(s, 0, &b);
	}
	for (size_t i = 0; i < u->nr; i++) {
		if (u->m[i].unpriced)
			addf(s, 0,
			     "the model %s is not in aibox's price table: charged at the highest "
			     "price in it",
			     u->m[i].name);
		else if (u->m[i].priority)
			addf(s, 0,
			     "the Priority Tier served answers of %s: charged at the highest price "
			     "in "
			     "aibox's price table (docs/budget.md)",
			     u->m[i].name);
	}
	if (u->uncounted)
		addf(s, 0,
		     "%llu answer%s could not be counted (encoded or of an unknown type; "
		     "docs/budget.md)",
		     (unsigned long long)u->uncounted, u->uncounted == 1 ? "" : "s");
	if (u->capped) {
		buf_reset(&b);
		usage_capped_line(&b, u);
		add_line(s, 0, &b);
	}
	buf_release(&b);
}

void summary_make(const struct summary_in *in, struct summary *s)
{
	const struct task_result *r = in->result;

	const struct proxy_report *rep = in->report;

	if (rep) {
		for (size_t i = 0; i < rep->nhosts; i++)
			addf(s, 0, "the VM connected to %s", rep->hosts[i].name);
		/* Never a partial list without saying so. */
		if (rep->more_hosts || rep->more_allowed)
			addf(s, 0,
			     "the VM connected to %s%llu more hosts (%llu requests), not listed: "
			     "the proxy names the first %d, so the list above is partial",
			     rep->more_hosts_at_least ? "at least " : "",
			     (unsigned long long)rep->more_hosts,
			     (unsigned long long)rep->more_allowed, PROXY_REPORT_HOSTS);
		for (size_t i = 0; i < rep->nsecrets; i++) {
			const struct proxy_report_secret *sp = &rep->secrets[i];

			if (sp->sent)
				addf(s, 0, "the secret %s was sent to %s (%llu request%s)",
				     sp->name, sp->host, (unsigned long long)sp->sent,
				     sp->sent == 1 ? "" : "s");
			if (sp->refused)
				addf(
				    s, 0,
				    "the secret %s was refused toward %s: its placeholder was sent "
				    "there (%llu request%s, see proxy.log)",
				    sp->name, sp->host, (unsigned long long)sp->refused,
				    sp->refused == 1 ? "" : "s");
		}
		if (rep->more_secrets)
			addf(s, 0, "%llu more requests with a secret, not listed",
			     (unsigned long long)rep->more_secrets);
		if (rep->cache_hits || rep->cache_misses || rep->cache_bad)
			addf(s, 0,
			     "the dependency cache served %llu artifact%s (%llu bytes); %llu came "
			     "from upstream (%llu bytes)%s",
			     (unsigned long long)rep->cache_hits, rep->cache_hits == 1 ? "" : "s",
			     (unsigned long long)rep->cache_bytes,
			     (unsigned long long)rep->cache_misses,
			     (unsigned long long)rep->cache_upstream,
			     rep->cache_bad ? ", some refused for their digest (see proxy.log)"
			                    : "");
		/* Not the VM's requests, so not in the hosts' counts above (docs/cache.md). */
		if (rep->own_fetches)
			addf(s, 0, "the proxy fetched %llu metadata document%s itself (%llu bytes)",
			     (unsigned long long)rep->own_fetches, rep->own_fetches == 1 ? "" : "s",
			     (unsigned long long)rep->own_fetch_bytes);
		if (rep->log_left_out)
			addf(s, 0,
			     "proxy.log left out %llu lines past its cap (the hosts above are "
			     "counted in full)",
			     (unsigned long long)rep->log_left_out);
	} else {
		addf(s, 0, "the hosts the VM connected to are not known: %s (see proxy.log)",
		     in->report_why ? in->report_why : "aibox-proxy gave no record");
	}
	if (rep && rep->usage.present)
		summary_usage(s, &rep->usage, r && r->has_claude && r->claude.has_cost ? r : NULL);
	if (r && r->failed_step) {
		const char *how = "failed";

		for (size_t i = 0; i < r->nsteps; i++)
			if (r->steps[i].name == r->failed_step &&
			    r->steps[i].status == RESULT_TIMEOUT)
				how = "timed out";
		addf(s, 0, "the step %s %s", r->failed_step, how);
	}
	if (r && r->has_claude) {
		struct buf b = BUF_INIT;

		if (r->claude.has_exit_code)
			addf(s, 0, "Claude Code exited with %d", r->claude.exit_code);
		if (r->claude.has_turns)
			buf_addf(&b, "%ld turn%s", r->claude.num_turns,
			         r->claude.num_turns == 1 ? "" : "s");
		if (r->claude.has_duration)
			buf_addf(&b, "%s%ld.%03lds", b.len ? " in " : "",
			         r->claude.duration_ms / 1000, r->claude.duration_ms % 1000);
		if (r->claude.has_cost)
			buf_addf(&b, "%sabout %.2f USD at API prices", b.len ? ", " : "",
			         r->claude.cost_usd);
		if (r->claude.has_ended_by)
			buf_addf(&b, "%sended by %s", b.len ? ", " : "",
			         ended_names[r->claude.ended_by]);
		if (b.len)
			add_line(s, 0, &b);
		buf_release(&b);
		if (r->claude.last_message) {
			const char *p = r->claude.last_message, *end = p + strlen(p);

			/* Trailing line breaks would only make empty "|" lines. */
			while (end > p) {
				if (end[-1] == '\n' || end[-1] == '\r')
					end--;
				else if (end - p >= 3 && out_line_break_len(end - 3, 3) == 3)
					end -= 3;
				else
					break;
			}
			/* a line at each break the printer's sanitizer makes, each marked */
			while (p < end) {
				size_t n = 0, br = 0;

				while (p + n < end &&
				       !(br = out_line_break_len(p + n, (size_t)(end - p - n))))
					n++;
				addf(s, 1, "|%s%.*s", n ? " " : "", (int)n, p);
				p += n + br;
			}
		}
	} else if (r) {
		addf(s, 0, "Claude Code did not run");
	}
	if (in->end_commit) {
		struct buf b = BUF_INIT;

		addf(s, 0, "the changes end at %.12s, fetch them with", in->end_commit);
		buf_addstr(&b, "  ");
		summary_fetch_command(in, &b);
		add_line(s, 0, &b);
	} else if (r && r->changes) {
		/* The VM says it changed something, but nothing was checked: not "no changes". */
		addf(s, 0, "nothing to fetch");
	} else if (in->no_changes) {
		addf(s, 0, "no changes");
	}
}

void summary_release(struct summary *s)
{
	for (size_t i = 0; i < s->nr; i++)
		free(s->v[i].text);
	free(s->v);
	s->v = NULL;
	s->nr = s->alloc = 0;
}

/* p starts one of U+2018..U+201E (E2 80 98..9E) whose last byte is lo..hi. */
static int smart_quote(const unsigned char *p, unsigned char lo, unsigned char hi)
{
	return p[0] == 0xe2 && p[1] == 0x80 && p[2] >= lo && p[2] <= hi;
}

int windows_quote(struct buf *out, const char *path)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                           "0123456789_./:+-\\";
	const unsigned char *p;
	size_t n = strlen(path);
	int powershell = 0;

	if (!utf8_valid(path, n, NULL))
		return -EINVAL;
	for (p = (const unsigned char *)path; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return -EINVAL;
		if (strchr("$`%!\"", *p) || smart_quote(p, 0x9c, 0x9e))
			powershell = 1;
	}
	if (n && strspn(path, safe) == n) {
		for (p = (const unsigned char *)path; *p; p++)
			buf_addch(out, *p == '\\' ? '/' : (char)*p);
		return 0;
	}
	buf_addch(out, powershell ? '\'' : '"');
	for (p = (const unsigned char *)path; *p; p++) {
		if (powershell && (*p == '\'' || smart_quote(p, 0x98, 0x9b))) {
			/* Doubled: the quote itself (one byte, or three for U+2018..U+201B). */
			buf_add(out, (const char *)p, *p == '\'' ? 1 : 3);
			buf_add(out, (const char *)p, *p == '\'' ? 1 : 3);
			p += *p == '\'' ? 0 : 2;
		} else {
			buf_addch(out, *p == '\\' ? '/' : (char)*p);
		}
	}
	buf_addch(out, powershell ? '\'' : '"');
	return 0;
}

static void check_init(struct bundle_check *c, int fd, const char *start_commit,
                       const char *repo_dir, const char *tmp_parent)
{
	c->fd = fd;
	strvec_push(&c->refs, GUEST_BRANCH_REF);
	strvec_push(&c->bases, start_commit);
	c->repo_dir = repo_dir;
	c->tmp_parent = tmp_parent;
	c->max_bytes = RESULT_BUNDLE_CHECK_MAX;
}

int result_bundle_check_start(struct bundle_check *c, int fd, const char *start_commit,
                              const char *repo_dir, const char *tmp_parent, const char *limits,
                              struct buf *err)
{
	int ret;

	check_init(c, fd, start_commit, repo_dir, tmp_parent);
	if (limits && (ret = bundle_limits_parse(&c->lim, limits, err)) < 0)
		return ret;
	if ((ret = bundle_check_fork(c)) < 0)
		buf_addf(err, "cannot start the check of changes.bundle: %s", strerror(-ret));
	return ret;
}

int result_bundle_verdict(const struct bundle_verdict *v, char end[OID_HEX_MAX + 1],
                          struct buf *err)
{
	if (v->m.ret == 0)
		memcpy(end, v->m.tip, sizeof(v->m.tip));
	else if (v->m.ret > 0)
		buf_addf(err, "changes.bundle refused: %s", v->err.buf);
	else
		buf_addf(err, "cannot check changes.bundle: %s", v->err.buf);
	return v->m.ret;
}

int result_check_bundle(int fd, const char *start_commit, const char *repo_dir,
                        const char *tmp_parent, uint64_t max_bytes, const struct bundle_limits *lim,
                        char end[OID_HEX_MAX + 1], struct buf *err)
{
	struct bundle_check c = BUNDLE_CHECK_INIT;
	struct bundle_verdict v;
	int ret;

	check_init(&c, fd, start_commit, repo_dir, tmp_parent);
	c.max_bytes = max_bytes;
	if (lim)
		c.lim = *lim;
	bundle_check_here(&c, &v);
	ret = result_bundle_verdict(&v, end, err);
	bundle_verdict_clear(&v);
	bundle_check_clear(&c);
	return ret;
}
