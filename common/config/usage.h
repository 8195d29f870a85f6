/*
 * What a task spends on the Claude API, counted where the key is used:
 * aibox-proxy reads the usage the API reports in each answer it forwards
 * with the key, prices it with the table in share/prices (and the user's
 * prices file over it), and keeps the
 * task's and the project's daily count (docs/budget.md).
 *
 * Four parts, each usable alone:
 *   - usage_stream: the parser of one answer as it streams past (SSE for a
 *     streamed /v1/messages, one JSON body otherwise), with bounded buffers;
 *     it never holds bytes back, it only reads copies of what is forwarded;
 *   - usage_prices: the price table;
 *   - usage_count: tokens by kind and model, requests and cost, and its JSON
 *     form (in aibox-proxy's record, and usage.json in the task folder);
 *   - the daily ledger: one small file per project and local day, updated
 *     under an exclusive flock(2) by every task and aibox run of the project.
 *
 * Money is counted in nano-USD (1e-9 USD) in 64-bit integers: a price of
 * X USD per million tokens is X * 1000 nano-USD per token.  Every sum and
 * product saturates at UINT64_MAX instead of wrapping.
 */
#ifndef AIBOX_USAGE_H
#define AIBOX_USAGE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/buf.h"

enum usage_kind {
	USAGE_INPUT,
	USAGE_OUTPUT,
	USAGE_CACHE_5M,   /* cache writes kept 5 minutes */
	USAGE_CACHE_1H,   /* cache writes kept 1 hour */
	USAGE_CACHE_READ, /* cache hits */
	USAGE_KINDS
};

/* "input", "output", "cache_write_5m", "cache_write_1h", "cache_read". */
extern const char *const usage_kind_names[USAGE_KINDS];

/* One answer's tokens of one kind above this are counted as this (not refused). */
#define USAGE_TOKENS_MAX 1000000000ULL
/* One SSE event's data; a longer event is skipped for counting (and counted in skipped). */
#define USAGE_EVENT_MAX (256 * 1024)
/* A non-streamed answer's body; a longer one is skipped for counting likewise. */
#define USAGE_BODY_MAX (4 * 1024 * 1024)
/* A model name longer than this is counted under USAGE_MODEL_OTHER. */
#define USAGE_MODEL_MAX 64
/* Models counted by name; the rest are counted together under USAGE_MODEL_OTHER. */
#define USAGE_MODELS       32
#define USAGE_MODEL_OTHER  "(other)"
#define USAGE_NANO_PER_USD 1000000000ULL
/* A cap is at most this many USD (config and options refuse more). */
#define USAGE_CAP_MAX_USD 1000000

struct usage_tokens {
	uint64_t n[USAGE_KINDS];
	uint64_t searches; /* web searches (server_tool_use.web_search_requests) */
};

/* ---- one answer ---- */

enum usage_mode { USAGE_OFF, USAGE_SSE, USAGE_JSON };

/*
 * The inferences an answer reports in its usage's "iterations" beside the
 * model's own ("type": "message", which the usage's top level holds): an
 * advisor's ("advisor_message", at its "model"), a compaction's (at the
 * answer's model) and any other, each counted on top of the top level
 * (docs/budget.md, "Counting").  The first USAGE_ITERATIONS - 1 by their
 * place in the array; the rest added up in the last, at the top price.
 */
#define USAGE_ITERATIONS 16

struct usage_iteration {
	char model[USAGE_MODEL_MAX + 1]; /* "" for the answer's own model */
	struct usage_tokens seen;        /* the highest of each kind it reported */
	struct usage_tokens delta;       /* what seen grew by, not yet taken */
};

struct usage_stream {
	enum usage_mode mode;
	struct buf line;                 /* SSE: the line being read; JSON: the body */
	struct buf data;                 /* SSE: the data lines of the event being read */
	int line_over;                   /* the line or body passed its cap: skipped */
	int data_over;                   /* the event's data passed its cap: skipped */
	int after_cr;                    /* the last byte was a CR (a CR LF is one line end) */
	struct usage_tokens seen;        /* the highest of each kind this answer reported */
	char model[USAGE_MODEL_MAX + 1]; /* "" until the answer names one */
	uint64_t skipped;                /* events or bodies not counted: too large or not JSON */
	int final; /* the final usage came: a message_delta's, or the body's (JSON) */
	int geo;   /* its usage said an inference_geo other than "global" (usage_stream_flags()) */
	int tier;  /* its usage said a service_tier other than "standard" */
	struct usage_iteration it[USAGE_ITERATIONS]; /* see USAGE_ITERATIONS */
};

void usage_stream_init(struct usage_stream *s, enum usage_mode mode);

/*
 * Read the next n bytes of the answer's body (without the chunked framing).
 * What the answer's usage grew by is added to *delta (never less than 0 per
 * kind: usage that goes down changes nothing; each kind is taken as the
 * highest value seen, at most USAGE_TOKENS_MAX); what its iterations grew
 * by, to each s->it[i].delta, for the caller to take.  Never fails; memory
 * stays within USAGE_EVENT_MAX (SSE) or USAGE_BODY_MAX (JSON) per buffer.
 */
void usage_stream_feed(struct usage_stream *s, const char *p, size_t n, struct usage_tokens *delta);

/* The body ended: a JSON body is read now (an SSE event left open is dropped). */
void usage_stream_end(struct usage_stream *s, struct usage_tokens *delta);

/*
 * What changes the prices of an answer and of the inferences it ran
 * (docs/budget.md, "US-only inference and the Priority Tier"); usage_price_for().
 */
enum {
	USAGE_PRICE_GEO = 1, /* US-only inference: the row's prices times its geo multiplier */
	USAGE_PRICE_TOP = 2, /* the Priority Tier: the table's top price */
};

/*
 * The USAGE_PRICE_* the answer's usage asked for so far: GEO once any event's
 * usage had an "inference_geo" other than "global" (any other value, or one
 * not a string, but null), TOP once one had a "service_tier" other than
 * "standard" likewise.  They never go back.
 */
unsigned usage_stream_flags(const struct usage_stream *s);

void usage_stream_release(struct usage_stream *s);

/* 1 when any kind in t is non-zero. */
int usage_tokens_any(const struct usage_tokens *t);

/* Add d to t, each count saturating at UINT64_MAX. */
void usage_tokens_add(struct usage_tokens *t, const struct usage_tokens *d);

/* ---- a request's body ---- */

/*
 * The output charged for a paid request whose body has no readable
 * max_tokens, and whose answer's final usage never came (docs/budget.md).
 */
#define USAGE_MAX_TOKENS_UNREAD 128000ULL

/*
 * The input tokens a request's prompt may hold beyond its body's bytes: what
 * the API adds of its own (the tool use system prompt is a few hundred
 * tokens), so that a body of 100 bytes is not reserved as 100 tokens
 * (docs/budget.md, "Requests in flight: reservations").
 */
#define USAGE_PROMPT_OVERHEAD 4096ULL

/*
 * The input charged for a paid request whose answer never said what its
 * input was and whose body cannot bound it (usage_req_unbounded()): the
 * largest context window of any model.
 */
#define USAGE_PROMPT_UNREAD 1000000ULL

/* How deep the scanner follows a body's nesting; deeper is unbounded. */
#define USAGE_REQ_DEPTH 64

/*
 * A scanner of a paid request's JSON body as it is forwarded: the top-level
 * "max_tokens" and "model", and whether the body bounds its prompt, with a
 * few bytes of state (no copy of the body).  Where it cannot read what the
 * API would, it says "unreadable", which charges more, never less: a
 * top-level key or a model spelled with an escape, a key that a JSON reader
 * matching keys without case may read as one the scanner reads (another
 * case; U+017F or U+212A, which fold to s and k; '_' and '-' left out or
 * added, which Go's encoding/json/v2 ignores then): as an escape, a max_tokens that is not
 * plain digits, a field given twice with different values (max_tokens: the
 * largest counts).  A body that is not one UTF-8 JSON object (a control
 * byte JSON has no place for, as UTF-16 and UTF-32 have; a byte order mark;
 * anything else at the top) is unreadable whole: no max_tokens or model,
 * unbounded and fast.
 */
struct usage_req {
	uint64_t bytes;      /* the body's bytes so far */
	uint64_t max_tokens; /* when mt_state is 1 (at most USAGE_TOKENS_MAX) */
	char model[USAGE_MODEL_MAX + 1];
	int mt_state, model_state; /* 0 not seen, 1 read, -1 unreadable */
	int unbounded;             /* see usage_req_unbounded() */
	int fast;                  /* see usage_req_fast() */
	int geo;                   /* see usage_req_geo() */
	int tier_std, tier_any;    /* see usage_req_standard_only() */
	/* the scanner's state */
	int depth, in_str, esc, st, field, top_bad, top_seen;
	char tok[USAGE_MODEL_MAX + 1];
	size_t tok_len;
	int tok_over, tok_esc;
	/* keys below the top level: is each open container an object, is a key next */
	unsigned char is_obj[USAGE_REQ_DEPTH + 1];
	int key_next, sect, dk_on, dk_esc;
	char dk[24]; /* holds "context_management" whole */
	size_t dk_len;
	/* the key being read (at any depth) without '_' and '-': holds any key read, folded */
	char lk[24];
	size_t lk_len;
	int lk_over;
	/* a context_management edit's "type" value: wanted next, being read */
	int dv_want, dv_on, dv_esc;
	char dv[32];
	size_t dv_len;
};

void usage_req_init(struct usage_req *r);
void usage_req_feed(struct usage_req *r, const char *p, size_t n);
/* The body's max_tokens, or USAGE_MAX_TOKENS_UNREAD when it has none that can be read. */
uint64_t usage_req_max_tokens(const struct usage_req *r);
/* The body's model, or NULL when it has none that can be read. */
const char *usage_req_model(const struct usage_req *r);
/*
 * 1 when the body does not bound its prompt: the API may count more input
 * than the body's bytes and USAGE_PROMPT_OVERHEAD, or more than its answer's
 * message_start reports.  That is a body with a "source" key anywhere (an
 * image, a document, a search result: by URL or file the API fetches, or
 * base64 a page of which may count more than its bytes), "mcp_servers" or
 * "container" anywhere, a "context_management" anywhere but at the top, and
 * a top-level one that is not an object of "edits" whose every "type" is a
 * clearing edit ("clear_thinking_DATE", "clear_tool_uses_DATE": another
 * edit type, a compaction, runs another inference of the whole prompt), a
 * "type" in a tool of the top-level "tools" (a server tool, whose
 * results add input as the answer goes, or the advisor), each of those
 * keys as a reader matching keys without case may take it (struct
 * usage_req), a key spelled with an escape, or nesting deeper than
 * USAGE_REQ_DEPTH.
 */
int usage_req_unbounded(const struct usage_req *r);
/*
 * 1 when the body may ask for a speed other than the standard one (fast
 * mode, billed at a multiple of the standard prices): a top-level "speed"
 * that is not the plain string "standard", or a top-level key spelled with
 * an escape (docs/budget.md, "Fast mode").
 */
int usage_req_fast(const struct usage_req *r);
/*
 * 1 when the body may ask for US-only inference (docs/budget.md): a
 * top-level "inference_geo" that is not the plain string "global", given
 * any number of times, or a top-level key spelled with an escape.
 */
int usage_req_geo(const struct usage_req *r);
/*
 * 1 when the body keeps its answer out of the Priority Tier: a top-level
 * "service_tier" that is the plain string "standard_only", every time it is
 * given, and no top-level key spelled with an escape.
 */
int usage_req_standard_only(const struct usage_req *r);

/* ---- prices ---- */

/* Price bands of one row: its first, and up to 3 above prompt-length thresholds. */
#define USAGE_BANDS 4

struct usage_band {
	uint64_t above;             /* the prompt tokens this band starts above; 0 for the first */
	uint64_t nano[USAGE_KINDS]; /* nano-USD per token */
};

struct usage_price {
	char family[USAGE_MODEL_MAX + 1]; /* a model's name, without its date or variant */
	char date[11];                    /* YYYY-MM-DD: the row's, else its file's */
	size_t nband;                     /* 1 to USAGE_BANDS, thresholds rising */
	struct usage_band band[USAGE_BANDS];
	int file;             /* where the row comes from: its index in usage_prices.files */
	int line;             /* and its line there */
	uint64_t search_nano; /* a web search, in nano-USD: the table's (usage_prices.search) */
	uint64_t geo_milli; /* US-only inference: its prices times this / 1000 (the row's "geo") */
};

/* The table's "web-search" line: what one web search costs. */
struct usage_search {
	uint64_t nano; /* nano-USD a search (the line gives USD per 1,000) */
	char date[11]; /* the line's, else its file's */
	int file;      /* its index in usage_prices.files */
	int line;      /* its line there; 0 while no table has given one */
};

/* A file a table was read from. */
struct usage_prices_file {
	char *path;
	char date[11]; /* its "date" line */
};

#define USAGE_PRICES_FILES 2 /* the installed table, and the user's over it */

struct usage_prices {
	struct usage_price *v;
	size_t nr;
	struct usage_prices_file files[USAGE_PRICES_FILES];
	size_t nfiles;
	struct usage_price top; /* one band: the highest price of each kind, for models not in v */
	struct usage_search search;
};

#define USAGE_PRICES_INIT                                                                          \
	{                                                                                          \
		0                                                                                  \
	}
#define USAGE_PRICES_MAX 256 /* families in a table */
/*
 * US-only inference's multiplier, in thousandths, of a row that does not give
 * its own ("geo X"): 1.1, the pricing page's for Claude Opus 4.6 and later.
 */
#define USAGE_GEO_MILLI       1100
#define USAGE_PRICES_FILE_MAX (64 * 1024)

/*
 * Read a price table (the format is in share/prices and docs/budget.md):
 * "date YYYY-MM-DD", then one row a line,
 *	FAMILY IN OUT CW5M CW1H CR [above TOKENS IN OUT CW5M CW1H CR]... [geo X] [date YYYY-MM-DD]
 * in USD per million tokens (at most 3 decimals, at most 1000000), each band
 * above a higher threshold and no cheaper, kind by kind, than the one below;
 * "geo X", US-only inference's multiplier (1 to 1000, at most 3 decimals;
 * USAGE_GEO_MILLI without it);
 * at most one "web-search USD [date YYYY-MM-DD]" line, USD per 1,000 web
 * searches (t->search; its line 0 when there is none); '#' comments.  Each
 * family once.  0, or -EINVAL with "line N: why" in err.  The rows' file is
 * 0 and t->files[0] has the date (no path).
 */
int usage_prices_parse(const char *p, size_t n, struct usage_prices *t, struct buf *err);

/*
 * Add the table at path (at most USAGE_PRICES_FILE_MAX bytes) to t, which is
 * empty or holds what earlier calls added: its rows replace t's rows of the
 * same family and add the others, its web-search line t's.  The first table
 * must have a web-search line (a later one may leave it out).  t is left as
 * it was on failure.  0; or a
 * negative errno with "the price table 'PATH', line N: why" (or "cannot
 * read the price table 'PATH': why") in err; -ENOENT for a missing file.
 */
int usage_prices_load(const char *path, struct usage_prices *t, struct buf *err);

/*
 * The price table in use (docs/budget.md): the installed one (prices_file(),
 * common/base/paths.h), then the user's (user_prices_file()) over it when that
 * file exists.  0, or a negative errno with the reason in err.
 */
int usage_prices_load_in_use(struct usage_prices *t, struct buf *err);

/*
 * The row that prices model: the longest family that is the model's name,
 * or its name followed by a date ("-20250929"), a form such as
 * "@20250805", or a variant ("[1m]"), in that order; never a family of
 * another version ("claude-opus-4" does not price "claude-opus-4-8").  1
 * when found; 0 when not (NULL model too), *out then the table's top price.
 */
int usage_price_of(const struct usage_prices *t, const char *model, const struct usage_price **out);

/*
 * The name a fast-mode answer of model is counted and priced under
 * (docs/budget.md, "Fast mode"): "-fast" after the family of the row that
 * prices model ("claude-opus-5-5-20261101" gives
 * "claude-opus-5-5-fast-20261101", priced by a row "claude-opus-5-5-fast"
 * when the table has one), or after the whole name when no row prices it; so
 * a model without a fast row is charged the table's top price.  Written to
 * out (USAGE_MODEL_MAX + 1 bytes); "" (counted under USAGE_MODEL_OTHER, at
 * the top price) when it would be longer.
 */
void usage_fast_model(const struct usage_prices *t, const char *model, char *out);

/*
 * The prices of model (usage_price_of()) with flags (USAGE_PRICE_*) applied,
 * into *out: TOP the table's top price; GEO each price times the row's
 * geo_milli / 1000, rounded up.  1 when the table has a row for model, else
 * 0 (whatever flags say: a TOP answer of a model in the table is priced).
 */
int usage_price_for(const struct usage_prices *t, const char *model, unsigned flags,
                    struct usage_price *out);

/* The prompt tokens of t: input, cache writes and cache reads (saturating). */
uint64_t usage_prompt(const struct usage_tokens *t);

/*
 * What t costs at p, in nano-USD (saturating), t being ONE request's
 * cumulative tokens: the band is chosen by t's own prompt (usage_prompt()).
 */
uint64_t usage_cost(const struct usage_price *p, const struct usage_tokens *t);

void usage_prices_release(struct usage_prices *t);

/* ---- a task's count ---- */

struct usage_model {
	char name[USAGE_MODEL_MAX + 1]; /* USAGE_MODEL_OTHER for the rest */
	struct usage_tokens t;
	uint64_t requests; /* answers that reported usage for this model */
	uint64_t nano;     /* their cost */
	int unpriced;      /* not in the price table: charged at its top price */
	int priority;      /* an answer the Priority Tier served (USAGE_PRICE_TOP):
	                      charged at the table's top price too */
};

/* Which cap ended the task, if one did. */
/* USAGE_CAPPED_USER: the policy's budget.day, the user's across all projects (docs/config.md). */
enum usage_capped { USAGE_CAPPED_NONE, USAGE_CAPPED_TASK, USAGE_CAPPED_DAY, USAGE_CAPPED_USER };

/* "task", "day" or "user", the name the record and --json give a cap; NULL for none. */
const char *usage_capped_name(enum usage_capped c);

struct usage_count {
	struct usage_model m[USAGE_MODELS + 1];
	size_t nr;
	uint64_t requests;  /* answers to paid endpoints forwarded */
	uint64_t nano;      /* their cost by aibox's count */
	uint64_t uncounted; /* answers whose usage could not be read (docs/budget.md) */
	uint64_t skipped;   /* events or bodies skipped (too large, not JSON) */
	uint64_t refused;   /* requests refused because a cap was reached */
	uint64_t cap_task;  /* nano-USD, 0: none */
	uint64_t cap_day;   /* nano-USD, 0: none */
	uint64_t day_nano;  /* the project's day total, as last seen in the ledger */
	uint64_t cap_user;  /* nano-USD, 0: none: the policy's day cap of the user */
	uint64_t user_nano; /* the user's day total, as last seen in the user's ledger */
	enum usage_capped capped;
	int present; /* counting is on (the proxy), or the record had usage (its reader) */
};

/*
 * Add one answer's growth d for model (NULL or "" for unknown) at the
 * prices in t with flags (USAGE_PRICE_*); before: the answer's tokens before
 * d (cumulative), counted so far at was_flags.  new_answer: the first growth
 * of this answer (counts a request for the model).  *nano gets d's cost:
 * usage_cost(before + d) at flags - usage_cost(before) at was_flags, so an
 * answer is priced by its whole prompt, whatever its growths were, and at
 * its flags, whichever event set them (flags only add: never less than 0).
 * d may be empty when the flags grew.
 */
void usage_count_add(struct usage_count *c, const struct usage_prices *t, const char *model,
                     unsigned was_flags, unsigned flags, const struct usage_tokens *before,
                     const struct usage_tokens *d, int new_answer, uint64_t *nano);

/* Append c as one JSON object (no newline): the "usage" of the record and usage.json. */
void usage_count_json(const struct usage_count *c, struct buf *out);

/* The same object as a new jansson json_t (void * so that this header needs no jansson). */
void *usage_count_to_json(const struct usage_count *c);

/*
 * Read the object usage_count_json() wrote, from a jansson json_t (passed as
 * void * so that this header needs no jansson).  0, or -EINVAL with the
 * reason in err.
 */
int usage_count_from_json(const void *json, struct usage_count *c, struct buf *err);

/* "12.345678" USD from nano-USD, into out. */
void usage_format_usd(struct buf *out, uint64_t nano);

/*
 * Append, for a count a cap ended (c->capped), "ended by budget: the day cap
 * of 50.000000 USD was reached (1 request refused)" (docs/budget.md); for
 * one no cap ended, nothing.
 */
void usage_capped_line(struct buf *out, const struct usage_count *c);

/*
 * A cap in USD from text ("5", "5.00", "0.5"): more than 0, at most
 * USAGE_CAP_MAX_USD, at most 6 decimals.  0 with *nano set, or -EINVAL.
 */
int usage_parse_usd(const char *s, uint64_t *nano);

/* ---- the project's daily ledger ---- */

/*
 * Open (creating them) DIR/spend/ and DIR/spend/YYYY-MM-DD for the local day
 * of now, read-write, close-on-exec; when it makes the day's file, it
 * fsyncs the folder (its name survives a power cut).  The fd, or a
 * negative errno with the path in err.
 */
int usage_ledger_open(const char *project_dir, time_t now, struct buf *err);

/*
 * Under an exclusive flock(2) on fd: read the day's total (an empty file is
 * 0), add nano (saturating), write it back in place (one pwrite of one
 * line, so a kill at any point leaves the old total or the new one), and
 * set *total.  A total that grew is fdatasync'ed before the lock is
 * released (usage_ledger_sync() and usage_ledger_admit() too): an added cost
 * survives a power cut once the call returns.  A ledger that is not as
 * usage_ledger_sync() writes it is an error (-EINVAL), never reset.  0, or a
 * negative errno.
 */
int usage_ledger_add(int fd, uint64_t nano, uint64_t *total);

/*
 * Reservations: what the paid requests in flight of each proxy may still
 * cost, kept in the ledger beside the total so that every proxy of the
 * project sees them (docs/budget.md, "The day's ledger").  A proxy names
 * its own by an id (not 0, below USAGE_LEDGER_ID_MAX, unique per proxy); a
 * reservation lapses USAGE_LEDGER_TTL seconds after its proxy last set it,
 * so that one of a proxy that died blocks no one for longer; the ledger
 * holds at most USAGE_LEDGER_SLOTS lines of reservations at once (-ENOSPC
 * past them), the line of the day's price flags among them.
 */
#define USAGE_LEDGER_TTL   60
#define USAGE_LEDGER_SLOTS 64
/* The ids from this one up name the line of the day's price flags, not a proxy. */
#define USAGE_LEDGER_ID_MAX 0xffffffffffff0000ULL
/*
 * The ids from this one to USAGE_LEDGER_ID_MAX, on a line that reserves
 * nothing, name a waiting line (usage_ledgers_wait()); a proxy's own id is
 * below it.
 */
#define USAGE_LEDGER_WAIT_MIN 0xfff0000000000000ULL
/* A waiting line lapses this long after it was last written (its proxy rewrites it each second). */
#define USAGE_LEDGER_WAIT_TTL 5
/*
 * A waiting line goes first only before requests that began waiting this
 * much later (ms): more than the second a proxy takes to look again, so a
 * request held back only while another's body was read holds no one back.
 */
#define USAGE_LEDGER_WAIT_AGE_MS 1500
/* At most this many live waiting lines in a ledger at once: the rest of its lines stay for
 * reservations. */
#define USAGE_LEDGER_WAITERS 16

struct usage_ledger_view {
	uint64_t total;  /* the day's spend */
	uint64_t others; /* the reservations of the other proxies, not lapsed */
	unsigned flags;  /* the USAGE_PRICE_* an answer of the day reported (a workspace's
	                    default geo, the Priority Tier): every proxy reserves at them */
};

/* The verdicts of usage_ledger_admit(). */
enum { USAGE_ADMIT, USAGE_WAIT, USAGE_REFUSE, USAGE_AGAIN };

/*
 * Under the exclusive lock: add nano to the total, set the reservation of
 * proxy id to reserve (0 removes it; id 0: none) lapsing at now +
 * USAGE_LEDGER_TTL, add flags (USAGE_PRICE_*) to the day's (a line of
 * their own, fdatasync'ed when they grow; they never go back), and read
 * the view.  0, or a negative errno.
 */
int usage_ledger_sync(int fd, uint64_t id, uint64_t add, uint64_t reserve, unsigned flags,
                      time_t now, struct usage_ledger_view *v);

/*
 * Whether proxy id, whose requests in flight hold mine, priced at flags
 * (USAGE_PRICE_*), may start a paid request under the day's cap (0: no cap,
 * always admitted), decided and recorded under one exclusive lock:
 * USAGE_AGAIN when the day's flags hold one that flags lacks (nothing is
 * decided: v->flags has them, for the caller to price its reservations at
 * and ask again); USAGE_REFUSE when the total reached cap; USAGE_WAIT when
 * some reservation is held (mine or another proxy's) and the total with
 * all of them reaches cap; else USAGE_ADMIT, and the proxy's reservation
 * becomes want.  flags are added to the day's.  The verdict with the view,
 * or a negative errno.
 */
int usage_ledger_admit(int fd, uint64_t id, uint64_t cap, uint64_t mine, uint64_t want,
                       unsigned flags, time_t now, struct usage_ledger_view *v);

/*
 * The user's ledger: under a policy's budget.day (docs/config.md), one more
 * ledger of the same format for the user's day across all projects,
 * $AIBOX_HOME/spend/YYYY-MM-DD (usage_ledger_open() of $AIBOX_HOME), which
 * every proxy of the user adds to and reserves in as it does in its
 * project's (docs/budget.md, "The user's day under a policy").  These
 * operate on several ledgers as one: each locked in the order given (every
 * caller gives the project's first, then the user's, so that none waits on
 * a lock another holds while it waits on one of its), all read, then all
 * written, then unlocked.
 */
#define USAGE_LEDGERS 2

struct usage_ledger {
	int fd;
	uint64_t cap;               /* its cap in nano-USD, 0: none */
	struct usage_ledger_view v; /* set by each call that returns no error */
};

/* usage_ledger_sync() on each of l[0..n), under all their locks at once. */
int usage_ledgers_sync(struct usage_ledger *l, size_t n, uint64_t id, uint64_t add,
                       uint64_t reserve, unsigned flags, time_t now);

/*
 * usage_ledger_admit() on each of l[0..n) with its own cap, decided under all
 * their locks at once: the verdict is USAGE_ADMIT only when every ledger's
 * is (only then is the reservation want written, to each), else the first
 * of USAGE_AGAIN, USAGE_REFUSE (any ledger's), USAGE_WAIT, with *which
 * the ledger that gave it.  Under a cap it is USAGE_WAIT too when a ledger
 * has no line free for the reservation, and when another proxy's live
 * waiting line began USAGE_LEDGER_WAIT_AGE_MS or more before since_ms
 * (wall-clock ms the request began waiting, or now) and the total with every reservation and want
 * reaches the cap: the older waiter goes first (docs/budget.md, "Waiting in turn").  wait_id: this
 * proxy's own waiting line (0: none), never older. The verdict, or a negative errno.
 */
int usage_ledgers_admit(struct usage_ledger *l, size_t n, uint64_t id, uint64_t mine, uint64_t want,
                        unsigned flags, uint64_t wait_id, uint64_t since_ms, time_t now,
                        size_t *which);

/*
 * The id of a waiting line of a proxy whose oldest waiting request began
 * waiting at since_ms (wall-clock ms), tag: the proxy's (its low 8 bits).
 */
uint64_t usage_ledger_wait_id(uint64_t since_ms, uint64_t tag);

/*
 * Under all the locks of l[0..n): remove the waiting line old (0: none), and
 * write wait_id's (0: none) lapsing at now + USAGE_LEDGER_WAIT_TTL, nothing
 * reserved, in a free line and only while fewer than USAGE_LEDGER_WAITERS
 * live waiting lines are there.  0, -ENOSPC when wait_id has no line in some
 * ledger (the rest is done), or another negative errno.
 */
int usage_ledgers_wait(struct usage_ledger *l, size_t n, uint64_t old, uint64_t wait_id,
                       time_t now);

/*
 * Under the lock: raise the total to floor when it is below (a day whose
 * spend the projects' ledgers hold and the user's does not yet: begun by an
 * older aibox, or before the policy had budget.day), fdatasync'ed as an
 * added cost is; *total gets it.  0, or a negative errno (-EINVAL for a
 * ledger that is not well-formed, never reset).
 */
int usage_ledger_raise(int fd, uint64_t floor, uint64_t *total);

#endif
