/*
 * Pieces of git's wire protocol that a gatekeeper must read itself
 * (git's pkt-line.c and the receive-pack command list of
 * Documentation/gitprotocol-pack.txt).
 *
 * Everything here works on bytes that came from an untrusted client: every
 * length is checked against the data and against the caps below, and a
 * malformed input is rejected, never guessed at.
 */
#ifndef AIBOX_GITPROTO_H
#define AIBOX_GITPROTO_H

#include <stddef.h>

#include "base/buf.h"
#include "base/oid.h"

/* The largest pkt-line git writes or reads, its 4 length bytes included. */
#define PKT_MAX 65520

/* The most bytes a receive-pack command list may take, up to its flush. */
#define PUSH_COMMANDS_MAX (1024 * 1024)

/* The most commands (ref updates) one push may carry. */
#define PUSH_REFS_MAX 1000

enum pkt_kind {
	PKT_DATA,
	PKT_FLUSH,       /* 0000 */
	PKT_DELIM,       /* 0001 (protocol v2) */
	PKT_RESPONSE_END /* 0002 (protocol v2) */
};

/*
 * Read one pkt-line from data[0..len).  Returns the number of bytes it takes
 * (> 0) with *kind set and, for PKT_DATA, *payload and *plen pointing into
 * data; 0 when data holds only part of a pkt-line (read more); -EBADMSG
 * when the length is not 4 hex digits, is 3 (reserved) or 4 (empty data,
 * which git never sends), or exceeds PKT_MAX.
 */
int pkt_parse(const char *data, size_t len, enum pkt_kind *kind, const char **payload,
              size_t *plen);

/* Whether data[0..len) is one or more whole, well-formed pkt-lines, nothing else. */
int pkt_stream_ok(const char *data, size_t len);

/* Append a data pkt-line holding `n` bytes (n <= PKT_MAX - 4). */
void pkt_add(struct buf *out, const void *data, size_t n);

/* Append a data pkt-line holding a formatted string, cut at PKT_MAX - 4 bytes. */
__attribute__((format(printf, 2, 3))) void pkt_addf(struct buf *out, const char *fmt, ...);

/* Append a flush-pkt, 0000. */
void pkt_flush(struct buf *out);

/*
 * Append `n` bytes as side-band `band` (1 data, 2 progress, 3 error), split
 * into pkt-lines of at most `max` bytes (1000 for side-band, 65520 for
 * side-band-64k).
 */
void pkt_add_sideband(struct buf *out, int band, const void *data, size_t n, size_t max);

/* One ref update of a push: "<old-oid> SP <new-oid> SP <refname>". */
struct push_cmd {
	char old_oid[OID_HEX_MAX + 1];
	char new_oid[OID_HEX_MAX + 1];
	char *ref;
};

struct push_commands {
	struct push_cmd *cmds;
	size_t nr, alloc;
	char *caps;      /* the capability list after the first command's NUL, or "" */
	size_t consumed; /* bytes of the body up to and including the flush */
};

#define PUSH_COMMANDS_INIT                                                                         \
	{                                                                                          \
		NULL, 0, 0, NULL, 0                                                                \
	}

/*
 * Parse the command list at the start of a receive-pack request body: lines
 * "shallow <oid>" (skipped), then one command per pkt-line (the first with
 * NUL and capabilities), then a flush.  Returns 0 with pc filled when the
 * flush was found, -EAGAIN when data ends before it (read more, as long as
 * len < PUSH_COMMANDS_MAX), -EFBIG when the list would exceed
 * PUSH_COMMANDS_MAX or PUSH_REFS_MAX, -EBADMSG for a malformed pkt-line or
 * command (object ids must be 40 or 64 lowercase hex digits of one length,
 * a push certificate is refused as malformed), -ENODATA for a flush with no
 * command before it.  pc must be fresh (PUSH_COMMANDS_INIT); on failure it
 * may hold part of the list and must still be released.
 */
int push_commands_parse(struct push_commands *pc, const char *data, size_t len);

void push_commands_release(struct push_commands *pc);

/*
 * Whether the capability list `caps` (a C string: git reads one up to a
 * NUL) names `cap` as git finds a capability (connect.c
 * parse_feature_value(), which receive-pack and send-pack use): `cap` at
 * the start or after a space, TAB, LF or CR, and followed by the end, one
 * of those, or '=' and a value.  So "push-options", "push-options=1" and
 * "report-status\tpush-options" all name push-options;
 * "xpush-options" and "push-optionsx" do not.
 */
int caps_have(const char *caps, const char *cap);

/* Whether caps is printable ASCII and spaces only, as git writes a capability list. */
int caps_printable(const char *caps);

/*
 * Append caps to out without any capability named `name` (alone or
 * "name=value"): split where caps_have() splits, joined again by single
 * spaces.  caps_have() finds no `name` in what it appends.
 */
void caps_drop(const char *caps, const char *name, struct buf *out);

/*
 * Find the first ref line of a smart HTTP ref advertisement for `service`
 * in data[0..len), where git's client reads it (remote-curl.c
 * check_smart_http(), connect.c discover_version() and
 * get_remote_heads()): after a "# service=<service>" line, any lines up to
 * a flush, and maybe "version 1".  That line's capabilities follow its
 * first NUL.  Returns 1 with the pkt-line (its 4 length bytes included) at
 * data[*at..*at + *pktlen); 2 when there is no ref line (a flush where it
 * would be); 0 when data ends first (read more); -EBADMSG for what git's
 * client would not read as such an advertisement, or a version but 1.
 */
int advert_find_caps(const char *data, size_t len, const char *service, size_t *at, size_t *pktlen);

/*
 * Append the ref line whose payload is p[0..n) to out as a pkt-line, with
 * `name` dropped from its capabilities (caps_drop()); bytes after a second
 * NUL, which git does not read, are left out.  Never longer than n.
 */
void advert_caps_rewrite(const char *p, size_t n, const char *name, struct buf *out);

/*
 * One ref line of a v0 advertisement, its pkt-line payload p[0..n): "<oid> SP
 * <name>", then NUL and the capabilities (the first line) or nothing, then an
 * optional LF.  The oid is copied into oid (OID_HEX_MAX + 1 bytes, 40 or 64
 * lowercase hex digits), *name and *name_len point at the name in p.  0, or
 * -EBADMSG for a line that is not one (a "version 1" line, "# service=...").
 */
int advert_ref_parse(const char *p, size_t n, char *oid, const char **name, size_t *name_len);

/* Whether oid is all zeros (a ref that does not exist: creation or deletion). */
int oid_is_null(const char *oid);

/* Whether the n bytes at s are a full object id: 40 or 64 lowercase hex digits. */
int oid_hex_valid(const char *s, size_t n);

/*
 * Whether `name` is a well-formed ref name by git's check-ref-format rules
 * that matter here: printable ASCII without space, ~ ^ : ? * [ \ or DEL; no
 * "..", "@{", "//"; no component starting with '.' or ending in ".lock";
 * not ending in '/' or '.'; not "@"; at most 1024 bytes.
 */
int refname_ok(const char *name);

/*
 * Whether branch name `branch` (the part after refs/heads/) matches
 * `pattern`, glob-style: '*' and '?' never match '/', so "aibox/<star>" matches
 * "aibox/x" but neither "aibox/x/y" nor "aibox"; '[' has no special meaning
 * (git forbids it in ref names); anything else matches itself.
 */
int branch_pattern_match(const char *pattern, const char *branch);

/* The longest push pattern (and branch name) a config or --push may give. */
#define BRANCH_PATTERN_MAX 255

/*
 * Whether a push pattern is usable, the one rule for the config's git: push
 * lists and aibox-broker's --push: at most BRANCH_PATTERN_MAX bytes, not
 * starting with "refs/" or '-', not "HEAD", and a ref name (refname_ok) once
 * each '*' and '?' is read as a letter.
 */
int branch_pattern_ok(const char *pattern);

#endif
