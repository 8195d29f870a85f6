/*
 * The secrets' framing between the host and the guest init, one writer and
 * one reader for both modes (docs/internals.md, "The host-guest contract"):
 * the config's env values travel as JSON, in aibox task as the task
 * command's stdin, {"env": {"NAME": "value", ...}} and a newline, in aibox
 * run as the value of the SSH environment variable GUEST_RUN_ENV_VAR
 * (common/base/guest_abi.h), {"NAME": "value", ...}.
 */
#ifndef AIBOX_GUEST_SECRETS_H
#define AIBOX_GUEST_SECRETS_H

#include <stddef.h>

#include "base/buf.h"
#include "base/strvec.h"

/* The most either framing's text may hold, in bytes, and names in it. */
#define GUEST_SECRETS_MAX       (1 << 20)
#define GUEST_SECRETS_NAMES_MAX 256

enum guest_secrets_framing {
	GUEST_SECRETS_STDIN,   /* aibox task: {"env": {...}} and a newline */
	GUEST_SECRETS_ENV_VAR, /* aibox run: {...} */
	GUEST_SECRETS_GO,      /* aibox task's, sent with a restored VM's go message instead */
};

struct guest_secret {
	const char *name;
	const char *value;
};

/*
 * Append the n secrets of v to out in framing f.  Written by hand rather
 * than through jansson so that the values are copied into no memory but out
 * (grown once; the caller wipes it with buf_wipe_release()).  0, or -EINVAL
 * with the reason in err (a bad name, a value that is not UTF-8, a name
 * twice, more than GUEST_SECRETS_NAMES_MAX).
 */
int guest_secrets_write(const struct guest_secret *v, size_t n, enum guest_secrets_framing f,
                        struct buf *out, struct buf *err);

/*
 * Read the len bytes of text, untrusted, as framing f: empty text is no
 * secrets; else at most GUEST_SECRETS_MAX bytes of one JSON object as above,
 * no name twice, at most GUEST_SECRETS_NAMES_MAX names, each an env name
 * (guest_env_name_valid()) with a string value without NUL.  Appends
 * "NAME=value" to out for each, in the text's order (the caller wipes out
 * with strvec_wipe_clear()); jansson's copies are wiped before they are
 * freed.  0, or -EINVAL (-EFBIG: too long) with the reason in err, out then
 * as it was.
 */
int guest_secrets_read(const char *text, size_t len, enum guest_secrets_framing f,
                       struct strvec *out, struct buf *err);

#endif
