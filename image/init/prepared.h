/*
 * The host's prepared clone: start.idx, the index of start.bundle's pack,
 * which aibox-task writes beside the bundle so that the guest's clone need
 * not index the pack under emulation (docs/init-task.md, "The prepared
 * clone").  This module only checks; task.c places the files.
 */
#ifndef AIBOX_INIT_PREPARED_H
#define AIBOX_INIT_PREPARED_H

#include <stddef.h>
#include <stdint.h>

struct buf;

/* start.idx is read whole: a larger one (about 9 million objects) is not used. */
#define PREPARED_IDX_MAX (256U << 20)

struct prepared {
	uint64_t pack_off; /* where the pack starts in the bundle */
	uint64_t pack_len; /* to the end of the bundle */
	uint32_t objects;
	unsigned char pack_sum[20]; /* the pack's trailing checksum */
	char pack_hex[41];          /* the same in hex, its name: pack-<hex>.pack */
};

/*
 * Check that the bundle open at bundle_fd is exactly as aibox-task writes it
 * for start (40 lowercase hex): the v2 header with `<start> HEAD` and
 * `<start> refs/heads/<branch>`, nothing else, then a version 2 pack; and
 * that idx[0..idx_len) is a whole version 2 index of that pack: its own
 * SHA-1 trailer matches its content, it names the pack's trailing checksum,
 * counts the pack's objects, and its fan-out, object names (sorted, no
 * duplicates) and offsets (inside the pack) are consistent.  The pack's
 * body is not read.  0 with *p filled in, -EINVAL when something does not
 * match, or -errno of a read; the reason in err.
 */
int prepared_check(int bundle_fd, const char *start, const char *branch, const unsigned char *idx,
                   size_t idx_len, struct prepared *p, struct buf *err);

#endif
