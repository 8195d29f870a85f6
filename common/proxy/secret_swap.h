/*
 * What the proxy does to a request on an intercepted connection
 * (docs/proxy.md, "Secrets" and "Rules"): the secrets' placeholders swapped
 * for their values toward the hosts they name, refused toward any other,
 * and an allow rule's methods and paths checked.  Pure functions on one
 * request head: no I/O, for the proxy and its tests.
 */
#ifndef AIBOX_SECRET_SWAP_H
#define AIBOX_SECRET_SWAP_H

#include <stddef.h>

#include "net/allow.h"
#include "base/buf.h"
#include "base/scrub.h"

struct buf;
struct strvec;

/* A secret as the proxy holds it. */
struct swap_secret {
	const char *name;        /* the variable's name, for the log */
	const char *placeholder; /* what the VM holds (secret_placeholder()) */
	const char *value;       /* the real value, printable ASCII */
	struct allow_list hosts; /* where the value may go */
	/* The API forward's bearer token (docs/proxy.md, "The OAuth login"): no
	   hosts; the proxy adds it to the requests it forwards to the API. */
	int api;
};

#define SWAP_MAX_HEAD (64 * 1024)

/*
 * Swap in head (a request head: "METHOD TARGET HTTP/1.x\r\n", header lines,
 * "\r\n") the placeholders of secrets[0..n) for their values, for a request
 * to host:port (lowercase; an IP literal without brackets): anywhere in a
 * header's value, inside a Basic credential's base64 (decoded, swapped,
 * encoded again) and in the target's query string (the value
 * percent-encoded).  A placeholder in the path is left as it is.
 *
 * Returns the number of placeholders swapped (0: head untouched), with the
 * names of the secrets used appended to used (once each); or -EPERM when a
 * placeholder stands in a request to a host its secret does not name (head
 * untouched, "NAME to HOST" in why), or -EINVAL for a head that is not one
 * (no request line, a line without CRLF, over SWAP_MAX_HEAD).
 */
int swap_request_head(const struct swap_secret *secrets, size_t n, const char *host, int port,
                      struct buf *head, struct strvec *used, struct buf *err);

/*
 * The first of secrets[0..n) whose placeholder the request head (len bytes)
 * holds anywhere, as it is or inside a header's Basic credential: its
 * index, or -1.  For a request that no placeholder may be in at all (plain
 * http://, docs/proxy.md).
 */
int swap_head_placeholder(const struct swap_secret *secrets, size_t n, const char *head,
                          size_t len);

/*
 * The path of target (origin form, "/..." with an optional query) as a rule
 * matches it: the query dropped, every %XX decoded and "//" folded, into
 * out.  0, or -EINVAL for a target that is not in origin form, a bad or
 * NUL/control escape, or a backslash; and for the paths a server may read
 * elsewhere (the comments in the code say where): a leading "//", a "." or
 * ".." segment in any spelling (with a path parameter too), an encoded '?'
 * or '#', a raw '#', and an escape once decoded ("%252e").
 */
int swap_normalize_path(const char *target, struct buf *out);

/*
 * Whether an allow rule (config.h's struct config_rule: methods, paths;
 * empty: any) lets method and target through: 1, or 0 with the reason in
 * why ("method DELETE is not allowed", "path /x is not allowed" with the
 * path decoded and then escaped by log_escape(), "the path is not one the
 * rules can read").  A rule without paths never reads the path.
 */
struct config_rule;
int swap_rule_allows(const struct config_rule *r, const char *method, const char *target,
                     struct buf *err);

/* What a request body is to a form parser, by its Content-Type (NULL: none). */
enum swap_form {
	SWAP_FORM_NONE, /* not a form: text, octets, ... */
	/*
	 * application/x-www-form-urlencoded (the type ends at ';', ',' or a
	 * space, as Rack's media_type splits it), or no or an empty type (Rack)
	 */
	SWAP_FORM_URLENCODED,
	SWAP_FORM_MULTIPART, /* multipart/anything */
	SWAP_FORM_JSON, /* a type with "/json" or "+json" in it, as Laravel's isJson() reads it */
};
enum swap_form swap_form_kind(const char *ctype, size_t len);

/*
 * A form read as it comes, piece by piece, for a parameter that a framework
 * takes for the method (Rails' Rack::MethodOverride, Laravel, Express's
 * method-override).  Urlencoded: a parameter named "_method" once '+' and
 * every %XX are decoded, in any case, or ".method" or "[method" (PHP turns
 * those into "_method"), leading spaces dropped (PHP drops them), or one
 * that goes on after a NUL ("_method%00x": PHP reads a name up to a NUL),
 * or in brackets ("[_method]", "]_method", "_method]": Rack 2 drops them),
 * or made an array ("_method[]", "_method[0]": qs, which Express reads the
 * query and a form with, makes ["x"] of it, and method-override takes x);
 * parameters split at '&' and ';'.  Multipart: a line with
 * "Content-Disposition:" anywhere in it (any case; Rack's regex is not
 * anchored) with a "method" in any case that begins a name of its own with
 * '_', '.', '[' or "%5F" (name="_method", name=_method,
 * name*=utf-8''%5Fmethod, a file named so too; not "payment_method"), the
 * line's backslashes not read (Rack 2 unescapes a quoted name); one with
 * "Content-ID:" so too (Rack names a part without a name by it).  JSON
 * (Laravel's request input, Express's method-override over a JSON body
 * parser): a string "_method" (escapes decoded, any case) followed by ':',
 * a key, at any depth.  kinds has a bit (1 <<
 * SWAP_FORM_...) for each kind the body is read as.  The state is a few
 * numbers whatever the size: pieces split anywhere read as the whole.
 * found is set by feed(), or by end() for the last parameter (nothing
 * after it says where it ends), which returns it.
 */
struct swap_form_scan {
	unsigned kinds;
	int found;
	int name, k, pct, hexc; /* urlencoded: where in a name, "method" matched, an escape */
	int line, mk, cid;      /* multipart: where in a line, "method", "content-id:" matched, */
	unsigned hist, pre;     /* the line's last four bytes, and those before "m" */
	int js, jk, ju,
	    jkey; /* JSON: in a string or escape, "_method" matched, \u, a match ended */
};
void swap_form_scan_init(struct swap_form_scan *f, unsigned kinds);
void swap_form_scan_feed(struct swap_form_scan *f, const char *p, size_t n);
int swap_form_scan_end(struct swap_form_scan *f);

/* Whether s (len bytes: a query string without its '?') has such a parameter: 1 or 0. */
int swap_method_param(const char *s, size_t len);

/*
 * An intercepted answer on its way to the VM (headers and body alike): each
 * secret's value, where it comes back, is replaced, also when it is split
 * across reads.  Looked for (docs/proxy.md, "Secrets and interception"):
 * the value, and for a value of 8 bytes or more the part of its base64 that
 * only its bytes make, at each of the three offsets a Basic credential may
 * put it at, in base64's alphabet and in base64url's (the swap sends the
 * value in base64 inside a Basic credential, and a host that reflects that
 * header would hand it back; the base64 character on either side still
 * carries at most 4 bits of the value's first or last byte); each byte of
 * them in any spelling common/base/scrub.h scrub_find() reads (%XX, '+' for
 * a space, JSON and HTML escapes, in any mix).  A run of text that spells
 * one value, whole, becomes its placeholder; any other (a base64 core,
 * spellings that overlap) as many '*'.  feed() appends to out what can be
 * passed now, keeping back from where a spelling may go on in what follows
 * (at most twice SCRUB_SPELLING_MAX times the longest form's length, and
 * nothing when the text ends in no part of one); what comes out does not
 * depend on how the answer was cut, and each read costs its own bytes, not
 * what is kept (the matcher resumes: scrub_match_feed()).  end() appends
 * the rest.  release()
 * wipes what is kept and the forms.
 */
struct swap_echo {
	struct buf *forms; /* the forms looked for (wiped) */
	const char **to;   /* for each, the placeholder that replaces it whole, or NULL: '*' */
	size_t nforms;
	size_t span;             /* the longest a form's spelling can be */
	struct buf held;         /* the answer's bytes not passed on yet, as they came */
	size_t base;             /* where held starts in the answer */
	size_t done;             /* held's first bytes, already passed on as '*' */
	struct scrub_match m;    /* the matcher, resumed from read to read */
	struct scrub_runs found; /* what it found, and scrub_find()'s for swap_echo_mask() */
};
void swap_echo_init(struct swap_echo *e, const struct swap_secret *secrets, size_t n);
void swap_echo_feed(struct swap_echo *e, const char *in, size_t len, struct buf *out);
void swap_echo_end(struct swap_echo *e, struct buf *out);
void swap_echo_release(struct swap_echo *e);

/*
 * The same spellings as swap_echo_feed() looks for (e made by
 * swap_echo_init()), for bytes whose length must not change (a WebSocket
 * frame's payload: docs/proxy.md): each one found in orig[0..len) has the
 * same bytes of out (len bytes, orig's copy or already masked by an
 * earlier call over the same bytes) set to '*', overlapping ones too.
 * Returns how many of the len bytes may be passed on: all of them, or with
 * more (bytes may follow orig), up to where scrub_find() cuts: where a
 * spelling that what follows may complete starts.
 */
size_t swap_echo_mask(struct swap_echo *e, const char *orig, char *out, size_t len, int more);

#endif
