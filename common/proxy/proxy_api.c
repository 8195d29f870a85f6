/*
 * Key forwarding: the requests for the API the proxy answers itself, and
 * spend (docs/budget.md):
 * the caps, and the usage read from each answer through http.c's body
 * hook (struct http_body's content callback).
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "proxy/api_paths.h"
#include "base/buf.h"
#include "base/err.h"
#include "net/http.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_report.h"
#include "config/usage.h"
#include "base/banned.h"

int px_is_api_authority(const char *host, int port)
{
	return port == PROXY_API_PORT && (!strcmp(host, "127.0.0.1") || !strcmp(host, "localhost"));
}

/* The methods the API uses (PROXY_API_METHODS); the rest get a 405. */
static int api_method_ok(const char *m, size_t n)
{
	return (n == 3 && !memcmp(m, "GET", 3)) || (n == 4 && !memcmp(m, "POST", 4)) ||
	       (n == 6 && !memcmp(m, "DELETE", 6));
}

/* This proxy's name in the ledger's reservations: random, never 0 or a flags line's. */
static uint64_t ledger_id(struct proxy *px)
{
	while (!px->ledger_id || px->ledger_id >= USAGE_LEDGER_WAIT_MIN)
		if (RAND_bytes((unsigned char *)&px->ledger_id, sizeof(px->ledger_id)) != 1)
			px->ledger_id = ((uint64_t)getpid() << 32) ^ (uint64_t)px->now_ms;
	return px->ledger_id;
}

/* The wall clock in ms: the ledgers' waiting lines are compared across processes. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Since when c waits in turn: from its first look, or its proxy's last
 * admission or stall's pause's end when later; never after now, so that a
 * clock set back leaves it no later than a request that comes now.
 */
static uint64_t wait_since(struct conn *c)
{
	int64_t now = wall_ms(), since;

	if (!c->wait_since)
		c->wait_since = now;
	since = c->wait_since > c->px->wait_floor ? c->wait_since : c->px->wait_floor;
	return (uint64_t)(since < now ? since : now);
}

/*
 * The input the paid request c's prompt may hold, as far as its body tells
 * (docs/budget.md, "Requests in flight: reservations"): its bytes and the
 * API's own USAGE_PROMPT_OVERHEAD, or, for a body that does not bound it
 * (usage_req_unbounded()) or is not read yet, `unbounded`.
 */
static uint64_t prompt_bound(const struct conn *c, uint64_t unbounded)
{
	uint64_t in;

	if (!c->req_done || usage_req_unbounded(&c->rq))
		return unbounded;
	in = c->rq.bytes + USAGE_PROMPT_OVERHEAD;
	return in > USAGE_TOKENS_MAX ? USAGE_TOKENS_MAX : in;
}

/*
 * The cost of the tokens t with each input-like kind (input, cache write 5
 * minutes or 1 hour) raised to at least in, whichever usage_cost() prices
 * highest at the prices p; in *worst_t, those tokens when it is not NULL.
 */
static uint64_t cost_with_input(const struct usage_price *p, const struct usage_tokens *t,
                                uint64_t in, struct usage_tokens *worst_t)
{
	static const int input_like[] = {USAGE_INPUT, USAGE_CACHE_5M, USAGE_CACHE_1H};
	uint64_t worst = 0;

	if (worst_t)
		*worst_t = *t;
	for (size_t i = 0; i < ARRAY_SIZE(input_like); i++) {
		struct usage_tokens w = *t;
		uint64_t cost;

		if (w.n[input_like[i]] < in)
			w.n[input_like[i]] = in;
		cost = usage_cost(p, &w);
		if (cost > worst) {
			worst = cost;
			if (worst_t)
				*worst_t = w;
		}
	}
	return worst;
}

/*
 * The name c's answer of model is counted and priced under: model, or for a
 * request that may ask for fast mode, usage_fast_model()'s (docs/budget.md,
 * "Fast mode").
 */
static const char *count_model(struct conn *c, const char *model)
{
	if (!model || !model[0] || !c->req_done || !usage_req_fast(&c->rq))
		return model;
	usage_fast_model(c->px->cfg->prices, model, c->fast_model);
	return c->fast_model;
}

/* c's model as its answer or, before that, its body names it (NULL: unknown). */
static const char *conn_model(struct conn *c)
{
	return count_model(c, c->us && c->us->model[0] ? c->us->model
	                      : c->req_done            ? usage_req_model(&c->rq)
	                                               : NULL);
}

/*
 * The USAGE_PRICE_* c's answer is priced at: what its body may ask for (US-only
 * inference) and what its answer's usage said so far (docs/budget.md, "US-only
 * inference and the Priority Tier").
 */
static unsigned answer_flags(struct conn *c)
{
	unsigned f = (c->us ? usage_stream_flags(c->us) : 0) | c->unread_flags;

	if (!c->req_done || usage_req_geo(&c->rq))
		f |= USAGE_PRICE_GEO;
	return f;
}

/*
 * The USAGE_PRICE_* c is reserved at: its answer's, and what an earlier
 * answer of this proxy asked for that the body does not rule out (a
 * workspace's default geo; the Priority Tier, unless it says "standard_only").
 */
static unsigned reserve_flags(struct conn *c)
{
	unsigned f = answer_flags(c) | (c->px->flags_seen & USAGE_PRICE_GEO);

	if ((c->px->flags_seen & USAGE_PRICE_TOP) &&
	    (!c->req_done || !usage_req_standard_only(&c->rq)))
		f |= USAGE_PRICE_TOP;
	return f;
}

/*
 * The most the paid request c may cost in all (docs/budget.md, "Caps"):
 * its tokens so far, its output raised to its max_tokens, at reserve_flags(), and its input:
 * once its answer reported it (message_start), as reported; until then, its
 * body's bytes and USAGE_PROMPT_OVERHEAD (prompt_bound()) at the highest
 * input-like price of its model.  PX_RESV_ALONE before its body has been
 * read, and for a body that does not bound its prompt (an answer's input,
 * iterations and cache kinds can each be up to USAGE_TOKENS_MAX then, at
 * other models' prices), until its answer ends: nothing bounds its cost.
 */
static uint64_t worst_cost(struct conn *c)
{
	struct usage_price p;
	struct usage_tokens t = c->req_tokens;
	uint64_t out;

	if (!c->req_done || usage_req_unbounded(&c->rq))
		return PX_RESV_ALONE;
	out = usage_req_max_tokens(&c->rq);
	usage_price_for(c->px->cfg->prices, conn_model(c), reserve_flags(c), &p);
	if (t.n[USAGE_OUTPUT] < out)
		t.n[USAGE_OUTPUT] = out;
	if (c->us_counted)
		return usage_cost(&p, &t);
	return cost_with_input(&p, &t, prompt_bound(c, USAGE_TOKENS_MAX), NULL);
}

/* What this proxy's requests in flight may still cost: PX_RESV_ALONE when one runs alone. */
static uint64_t px_reserved(const struct proxy *px)
{
	return px->resv_alone || px->resv_sum >= PX_RESV_ALONE ? PX_RESV_ALONE
	                                                       : (uint64_t)px->resv_sum;
}

/* Set c's reservation to resv, in px's too. */
static void resv_set(struct conn *c, uint64_t resv)
{
	struct proxy *px = c->px;

	if (c->resv == PX_RESV_ALONE && resv != PX_RESV_ALONE &&
	    ((c->req_done && usage_req_unbounded(&c->rq)) ||
	     px->now_ms - c->admitted_ms >= PX_TURN_MS)) {
		/*
		 * it ran alone (its body did not bound its prompt, or came slowly): this
		 * proxy's turn was taken, its requests wait in turn from now
		 */
		int64_t t = wall_ms();

		if (t > px->wait_floor)
			px->wait_floor = t;
	}
	if (c->resv == PX_RESV_ALONE)
		px->resv_alone--;
	else
		px->resv_sum -= c->resv;
	if (resv == PX_RESV_ALONE)
		px->resv_alone++;
	else
		px->resv_sum += resv;
	c->resv = resv;
}

/* c's reservation: what it may still cost, beyond what is counted already. */
static void spend_update(struct conn *c)
{
	uint64_t worst, resv;

	if (!c->admitted)
		return;
	worst = worst_cost(c);
	resv = worst == PX_RESV_ALONE ? worst : worst > c->req_nano ? worst - c->req_nano : 0;
	if (resv < c->resv)
		c->px->budget_changed = 1;
	resv_set(c, resv);
}

/*
 * Prices f (USAGE_PRICE_*) an answer reported, this proxy's or, through the
 * day's ledger, another's: every request is reserved at them from now on,
 * those in flight too (reserve_flags()).
 */
static void flags_learn(struct proxy *px, unsigned f)
{
	if (!(f & ~px->flags_seen))
		return;
	px->flags_seen |= f;
	for (struct conn *c = px->conns; c; c = c->next)
		spend_update(c);
}

/*
 * The ledgers this proxy adds to and reserves in, each with its cap, into l
 * (USAGE_LEDGERS of them): the project's day ledger, then the user's under a
 * policy (usage_ledgers_admit() locks them in that order).  How many.
 */
static size_t px_ledgers(const struct proxy *px, struct usage_ledger *l)
{
	const struct proxy_config *cfg = px->cfg;
	size_t n = 0;

	if (cfg->ledger_fd >= 0)
		l[n++] =
		    (struct usage_ledger){.fd = cfg->ledger_fd, .cap = cfg->report->usage.cap_day};
	if (cfg->user_ledger_fd >= 0)
		l[n++] = (struct usage_ledger){.fd = cfg->user_ledger_fd,
		                               .cap = cfg->report->usage.cap_user};
	return n;
}

/* The prices the ledgers l[0..n) hold (an answer of the day reported them). */
static unsigned ledgers_flags(const struct usage_ledger *l, size_t n)
{
	unsigned f = 0;

	for (size_t i = 0; i < n; i++)
		f |= l[i].v.flags;
	return f;
}

/*
 * What the ledgers said (l[0..n)): their totals, and the prices to learn;
 * this proxy's own are taken as written there (with no line free for them,
 * each admission adds them again).
 */
static void ledgers_seen(struct proxy *px, const struct usage_ledger *l, size_t n)
{
	struct usage_count *u = &px->cfg->report->usage;
	unsigned f = ledgers_flags(l, n);

	for (size_t i = 0; i < n; i++)
		if (l[i].fd == px->cfg->user_ledger_fd)
			u->user_nano = l[i].v.total;
		else
			u->day_nano = l[i].v.total;
	px->ledger_flags = f | px->flags_seen;
	flags_learn(px, f);
}

/*
 * The refusal of a paid request by a cap, in the API's own error shape, so
 * that the client reports it and stops.  which: the cap; total: what was
 * spent against it; r: the ledger's error, if that is why.
 */
static void budget_refuse(struct conn *c, enum usage_capped which, uint64_t total, int r)
{
	struct usage_count *u = &c->px->cfg->report->usage;
	struct buf msg = BUF_INIT, spent = BUF_INIT, cap = BUF_INIT, why = BUF_INIT;
	json_t *body;
	char *text;

	usage_format_usd(&cap, which == USAGE_CAPPED_TASK   ? u->cap_task
	                       : which == USAGE_CAPPED_USER ? u->cap_user
	                                                    : u->cap_day);
	usage_format_usd(&spent, total);
	if (which == USAGE_CAPPED_TASK)
		buf_addf(&msg,
		         "aibox: this task's budget of %s USD is spent (%s USD by aibox's "
		         "count); aibox-proxy refuses further API requests",
		         cap.buf, spent.buf);
	else if (which == USAGE_CAPPED_USER && r < 0)
		buf_addf(&msg,
		         "aibox: the ledger of today's spend cannot be read (%s), so your daily "
		         "budget under the policy of %s USD cannot be kept; aibox-proxy refuses "
		         "further API requests",
		         strerror(-r), cap.buf);
	else if (which == USAGE_CAPPED_USER)
		buf_addf(
		    &msg,
		    "aibox: your daily budget under the policy of %s USD is spent (%s USD today "
		    "across your projects by aibox's count); aibox-proxy refuses further API "
		    "requests",
		    cap.buf, spent.buf);
	else if (r < 0)
		buf_addf(&msg,
		         "aibox: the project's ledger of today's spend cannot be read (%s), so its "
		         "daily budget of %s USD cannot be kept; aibox-proxy refuses further API "
		         "requests",
		         strerror(-r), cap.buf);
	else
		buf_addf(&msg,
		         "aibox: the project's daily budget of %s USD is spent (%s USD today by "
		         "aibox's count); aibox-proxy refuses further API requests",
		         cap.buf, spent.buf);
	u->refused++;
	if (!u->capped)
		u->capped = which;
	body = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
	                 PROXY_BUDGET_ERROR, "message", msg.buf);
	text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (!text)
		die_oom();
	if (r < 0)
		buf_addf(
		    &why,
		    "budget: the ledger of today's spend cannot be read (%s): the %s cap of %s "
		    "USD cannot be kept",
		    strerror(-r), usage_capped_name(which), cap.buf);
	else
		buf_addf(&why, "budget: the %s cap of %s USD is reached", usage_capped_name(which),
		         cap.buf);
	px_respond_with(c, 400, "refused", why.buf, text);
	free(text);
	json_decref(body);
	buf_release(&msg);
	buf_release(&spent);
	buf_release(&cap);
	buf_release(&why);
}

/*
 * May the paid request c start?  Refused (answered, 0) once a cap is
 * reached; waits (2) while the requests in flight, at what they may still
 * cost, would reach it; else admitted (1) with its reservation, which the
 * ledger records in the same lock as the decision.
 */
static int budget_check(struct conn *c)
{
	struct proxy *px = c->px;
	struct usage_count *u = &px->cfg->report->usage;
	struct usage_ledger l[USAGE_LEDGERS];
	size_t n = px_ledgers(px, l), which = 0;
	uint64_t resv, held;
	int r = USAGE_ADMIT;

	c->ledger_wait = 0;
again:
	held = px_reserved(px);
	if (u->cap_task && u->nano >= u->cap_task) {
		budget_refuse(c, USAGE_CAPPED_TASK, u->nano, 0);
		return 0;
	}
	if (u->cap_task && held && (held >= u->cap_task || u->nano + held >= u->cap_task))
		return 2;
	if (n && px->now_ms < px->paid_pause_until)
		return 2;
	resv = worst_cost(c);
	if (n) {
		uint64_t want = held > UINT64_MAX - resv ? UINT64_MAX : held + resv;

		r = usage_ledgers_admit(l, n, ledger_id(px), held, want, px->flags_seen,
		                        px->wait_line, wait_since(c), time(NULL), &which);
		if (r == USAGE_AGAIN) {
			/* another proxy's answer said a dearer price: reserve at it */
			flags_learn(px, ledgers_flags(l, n));
			goto again;
		}
		if (r >= 0) {
			ledgers_seen(px, l, n);
			px->ledger_reserved = want;
			px->ledger_synced_ms = px->now_ms;
		}
		if (r < 0 && (u->cap_day || u->cap_user)) {
			/* the ledgers are decided as one: either may be the one not read */
			budget_refuse(c, u->cap_user ? USAGE_CAPPED_USER : USAGE_CAPPED_DAY, 0, r);
			return 0;
		}
	}
	if (r == USAGE_REFUSE) {
		budget_refuse(c,
		              l[which].fd == px->cfg->user_ledger_fd ? USAGE_CAPPED_USER
		                                                     : USAGE_CAPPED_DAY,
		              l[which].v.total, 0);
		return 0;
	}
	if (r == USAGE_WAIT) {
		c->ledger_wait = 1;
		return 2;
	}
	c->admitted = 1;
	c->admitted_ms = px->now_ms;
	c->resv = 0;
	resv_set(c, resv);
	return 1;
}

/*
 * This proxy's waiting line in the ledgers l[0..n) (docs/budget.md, "Waiting
 * in turn"): since its oldest request the ledgers made wait, rewritten each
 * second while one waits; none while a stall's pause holds its requests back.
 */
static void wait_line_sync(struct proxy *px, struct usage_ledger *l, size_t n)
{
	uint64_t since = UINT64_MAX, want = 0;
	int r;

	if (px->now_ms >= px->paid_pause_until)
		for (struct conn *c = px->conns; c; c = c->next) {
			uint64_t s;

			if (c->state == ST_WAIT && c->ledger_wait && (s = wait_since(c)) < since)
				since = s;
		}
	if (since != UINT64_MAX)
		want = usage_ledger_wait_id(since, ledger_id(px));
	if (want == px->wait_line && (!want || px->now_ms - px->wait_line_ms < 1000))
		return;
	r = usage_ledgers_wait(l, n, px->wait_line, want, time(NULL));
	if (r == 0 || r == -ENOSPC) {
		px->wait_line = want;
		px->wait_line_ms = px->now_ms;
	}
}

void px_spend_round(struct proxy *px, int tick)
{
	struct usage_ledger l[USAGE_LEDGERS];
	size_t n = px_ledgers(px, l);
	uint64_t held = px_reserved(px);
	int waiting = 0;

	if (n &&
	    ((px->ledger_id &&
	      (held != px->ledger_reserved ||
	       (held && px->now_ms - px->ledger_synced_ms >= USAGE_LEDGER_TTL * 1000 / 4))) ||
	     (px->flags_seen & ~px->ledger_flags)) &&
	    usage_ledgers_sync(l, n, px->ledger_id, 0, held, px->flags_seen, time(NULL)) == 0) {
		if (px->ledger_id) {
			px->ledger_reserved = held;
			px->ledger_synced_ms = px->now_ms;
		}
		ledgers_seen(px, l, n);
	}
	if (px->budget_changed || (tick && n)) {
		px->budget_changed = 0;
		for (struct conn *c = px->conns; c && !waiting; c = c->next)
			waiting = c->state == ST_WAIT;
		for (struct conn *c = px->conns, *next; waiting && c; c = next) {
			next = c->next;
			if (c->state != ST_WAIT)
				continue;
			c->state = ST_HEAD;
			px_pump(c);
		}
	}
	if (n)
		wait_line_sync(px, l, n);
}

int px_api_request(struct conn *c, const struct http_head *h, const char *t, size_t tl,
                   struct buf *path)
{
	struct proxy *px = c->px;
	struct buf why = BUF_INIT;
	int kind;

	snprintf(c->host, sizeof(c->host), "localhost");
	c->port = PROXY_API_PORT;
	px_set_what(c, h->method, h->method_len, t, tl);
	if (!px->cfg->api_key) {
		px_refuse(c, "key forwarding is off");
		return 0;
	}
	if (!api_method_ok(h->method, h->method_len)) {
		/* TRACE and the like could echo the key back. */
		px_respond(c, 405, "refused", "method not forwarded to the API");
		return 0;
	}
	kind = api_path_classify(h->method, h->method_len, t, tl, path, &why);
	if (kind < 0) {
		px_refuse(c, why.buf);
		buf_release(&why);
		return 0;
	}
	c->paid = px->cfg->prices && kind == API_PATH_PAID;
	return c->paid ? budget_check(c) : 1;
}

/*
 * nano more counted: to the day's ledger (and the user's) at once, so that a killed task's
 * spend is still there, with the prices answers reported (flags_learn()).
 */
static void ledger_add(struct proxy *px, uint64_t nano)
{
	struct usage_ledger l[USAGE_LEDGERS];
	size_t n = px_ledgers(px, l);

	if (n && (nano || (px->flags_seen & ~px->ledger_flags)) &&
	    usage_ledgers_sync(l, n, 0, nano, 0, px->flags_seen, time(NULL)) == 0)
		ledgers_seen(px, l, n);
}

/*
 * Count what one answer's usage grew by, for model, at answer_flags(); what it
 * counted before at fewer, the difference too.
 */
static void usage_apply(struct conn *c, const char *model, const struct usage_tokens *d)
{
	struct proxy *px = c->px;
	struct usage_count *u = &px->cfg->report->usage;
	unsigned flags = answer_flags(c);
	uint64_t nano;

	if (c->us)
		flags_learn(px, usage_stream_flags(c->us));
	if (!usage_tokens_any(d) && (flags == c->price_flags || !c->us_counted)) {
		c->price_flags = flags;
		return;
	}
	usage_count_add(u, px->cfg->prices, model, c->price_flags, flags, &c->req_tokens, d,
	                !c->us_counted, &nano);
	c->price_flags = flags;
	if (!c->us_counted)
		snprintf(c->req_model, sizeof(c->req_model), "%s", model ? model : "");
	c->us_counted = 1;
	usage_tokens_add(&c->req_tokens, d);
	c->req_nano += nano;
	ledger_add(px, nano);
	spend_update(c);
}

/*
 * Count what the answer's iterations (an advisor's, a compaction's: struct
 * usage_iteration) grew by, each at its own model, on top of the answer's
 * own usage.
 */
static void iterations_apply(struct conn *c)
{
	struct proxy *px = c->px;
	unsigned flags = answer_flags(c);

	for (int i = 0; i < USAGE_ITERATIONS; i++) {
		struct usage_iteration *x = &c->us->it[i];
		struct usage_tokens before = x->seen;
		uint64_t nano;

		if (!usage_tokens_any(&x->delta) &&
		    (flags == c->it_flags[i] || !usage_tokens_any(&x->seen)))
			continue;
		for (int k = 0; k < USAGE_KINDS; k++)
			before.n[k] -= x->delta.n[k];
		before.searches -= x->delta.searches;
		usage_count_add(&px->cfg->report->usage, px->cfg->prices,
		                x->model[0] ? x->model : count_model(c, c->us->model),
		                c->it_flags[i], flags, &before, &x->delta, 0, &nano);
		c->it_flags[i] = flags;
		memset(&x->delta, 0, sizeof(x->delta));
		c->iter_nano += nano;
		ledger_add(px, nano);
	}
}

static void usage_content(void *ctx, const char *p, size_t n)
{
	struct conn *c = ctx;
	struct usage_tokens d = {{0}};

	if (!c->us)
		return;
	usage_stream_feed(c->us, p, n, &d);
	c->us_final = c->us->final;
	usage_apply(c, count_model(c, c->us->model), &d);
	iterations_apply(c);
}

static void req_content(void *ctx, const char *p, size_t n)
{
	struct conn *c = ctx;

	usage_req_feed(&c->rq, p, n);
}

void px_spend_body_begin(struct conn *c)
{
	usage_req_init(&c->rq);
	c->reqb.content = req_content;
	c->reqb.content_ctx = c;
}

void px_spend_body_done(struct conn *c)
{
	c->cl_waiting = 0; /* its body's waits end with it */
	spend_update(c);
}

void px_spend_client_wait(struct conn *c, int answer, int waiting)
{
	const struct usage_count *u = &c->px->cfg->report->usage;
	int64_t now = c->px->now_ms;

	/*
	 * with no day cap, a slow client holds back no other proxy (a task cap
	 * is its proxy's own: it holds back only its own VM's requests)
	 */
	if (!c->admitted || answer != c->req_done || waiting == c->cl_waiting ||
	    !(u->cap_day || u->cap_user))
		return;
	if (waiting) {
		c->cl_since = now;
		c->cl_answer = answer;
	} else if (c->cl_answer) {
		c->answer_waited += now - c->cl_since;
	} else {
		c->body_waited += now - c->cl_since;
	}
	c->cl_waiting = waiting;
}

int px_spend_client_late(struct conn *c)
{
	struct buf why = BUF_INIT;
	int64_t waited;

	if (!c->admitted || !c->cl_waiting || c->draining)
		return 0;
	waited = c->px->now_ms - c->cl_since + (c->cl_answer ? c->answer_waited : c->body_waited);
	if (waited < (c->cl_answer ? PX_ANSWER_WAIT_MS : PX_BODY_WAIT_MS))
		return 0;
	c->cl_waiting = 0;
	if (c->cl_answer) {
		c->drain_why = "budget: the client did not read its answer for " TOSTR(
		    PX_ANSWER_WAIT_S) " s in all; it was read to the end";
		if (px_client_gone(c, c->drain_why) == 0)
			px_pump(c);
		return 1;
	}
	c->px->paid_pause_until = c->px->now_ms + PX_STALL_PAUSE_MS;
	c->px->wait_floor = wall_ms() + PX_STALL_PAUSE_MS;
	buf_addf(&why, "budget: the request body stalled %d s in all", PX_BODY_WAIT_MS / 1000);
	px_respond(c, 408, "refused", why.buf);
	buf_release(&why);
	px_pump(c);
	return 1;
}

/*
 * The request was sent whole and its answer's final usage never came (cut,
 * a bound hit, or a body too large to read; an answer other than 2xx costs
 * nothing): its output is charged as its max_tokens, and its input, when no
 * usage of it was read at all, as prompt_bound(), all of it then at the
 * price it was reserved at (reserve_flags()); for a body that does not bound
 * its prompt, as USAGE_PROMPT_UNREAD even when message_start reported some
 * (a server tool's results add input that only the final usage reports).
 * Then its reservation ends.
 */
static void settle(struct conn *c)
{
	struct proxy *px = c->px;
	struct usage_tokens d = {{0}}, t = c->req_tokens, w;
	uint64_t max = usage_req_max_tokens(&c->rq);

	if (!c->admitted)
		return;
	if (c->req_done && !c->us_final &&
	    (!c->resp_head_done || (c->status >= 200 && c->status <= 299))) {
		const char *model = conn_model(c);
		int prompt = !c->us_counted || usage_req_unbounded(&c->rq);
		struct usage_price p;

		if (t.n[USAGE_OUTPUT] < max)
			t.n[USAGE_OUTPUT] = max;
		w = t;
		if (!c->us_counted) /* nothing of its usage came: at the price it was reserved at */
			c->unread_flags = reserve_flags(c);
		if (prompt) {
			usage_price_for(px->cfg->prices, model, answer_flags(c), &p);
			cost_with_input(&p, &t, prompt_bound(c, USAGE_PROMPT_UNREAD), &w);
		}
		for (int k = 0; k < USAGE_KINDS; k++)
			d.n[k] = w.n[k] - c->req_tokens.n[k];
		if (usage_tokens_any(&d)) {
			c->charged_max = prompt ? 2 : 1;
			usage_apply(c, model, &d);
		}
	}
	resv_set(c, 0);
	c->admitted = 0;
	px->budget_changed = 1;
}

/* Only an answer the API reports usage in is read. */
void px_usage_begin(struct conn *c, const struct http_head *h)
{
	struct proxy *px = c->px;
	struct usage_count *u = &px->cfg->report->usage;
	enum usage_mode mode = USAGE_OFF;
	int encoded = 0;

	if (!c->paid || h->status < 200 || h->status > 299)
		return;
	u->requests++;
	for (int i = 0; i < h->nhdr; i++) {
		const struct http_header *hd = &h->hdr[i];

		if (http_name_is(hd, "content-type")) {
			if (hd->value_len >= 17 && !strncasecmp(hd->value, "text/event-stream", 17))
				mode = USAGE_SSE;
			else if (hd->value_len >= 16 &&
			         !strncasecmp(hd->value, "application/json", 16))
				mode = USAGE_JSON;
		} else if (http_name_is(hd, "content-encoding") &&
		           !(hd->value_len == 8 && !strncasecmp(hd->value, "identity", 8))) {
			encoded = 1;
		}
	}
	if (mode == USAGE_OFF || encoded || c->respb.kind == BODY_NONE) {
		u->uncounted++;
		return;
	}
	c->us = xmalloc(sizeof(*c->us));
	usage_stream_init(c->us, mode);
	c->respb.content = usage_content;
	c->respb.content_ctx = c;
}

void px_usage_done(struct conn *c)
{
	struct proxy *px = c->px;
	struct usage_tokens d = {{0}};

	if (!c->us) {
		settle(c);
		return;
	}
	if (c->respb.done)
		usage_stream_end(c->us, &d);
	c->us_final = c->us->final;
	usage_apply(c, count_model(c, c->us->model), &d);
	iterations_apply(c);
	settle(c);
	px->cfg->report->usage.skipped += c->us->skipped;
	if (c->us->mode == USAGE_JSON && !c->respb.done)
		px->cfg->report->usage.uncounted++; /* cut short: its body was never read */
	usage_stream_release(c->us);
	free(c->us);
	c->us = NULL;
	c->respb.content = NULL;
}
