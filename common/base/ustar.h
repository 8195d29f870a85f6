/*
 * The ustar layout of the results stream (docs/internals.md, "The results
 * tar"), one description for its writer, the guest init's
 * (image/init/tar_out.c), and its reader, the host's (common/git/tar_in.c).
 * A header is one USTAR_BLOCK; each field is at its _OFF, _LEN bytes long;
 * numbers are octal.
 */
#ifndef AIBOX_USTAR_H
#define AIBOX_USTAR_H

#include <stddef.h>

#define USTAR_BLOCK 512

enum {
	USTAR_NAME_OFF = 0,
	USTAR_NAME_LEN = 100,
	USTAR_MODE_OFF = 100,
	USTAR_MODE_LEN = 8,
	USTAR_UID_OFF = 108,
	USTAR_UID_LEN = 8,
	USTAR_GID_OFF = 116,
	USTAR_GID_LEN = 8,
	USTAR_SIZE_OFF = 124,
	USTAR_SIZE_LEN = 12,
	USTAR_MTIME_OFF = 136,
	USTAR_MTIME_LEN = 12,
	USTAR_CHKSUM_OFF = 148,
	USTAR_CHKSUM_LEN = 8,
	USTAR_TYPE_OFF = 156,
	USTAR_MAGIC_OFF = 257, /* the magic and the version: USTAR_MAGIC_LEN bytes */
	USTAR_MAGIC_LEN = 8,
	USTAR_UNAME_OFF = 265,
	USTAR_UNAME_LEN = 32,
	USTAR_GNAME_OFF = 297,
	USTAR_GNAME_LEN = 32,
	USTAR_PREFIX_OFF = 345,
	USTAR_PREFIX_LEN = 155,
};

/* POSIX's magic and version (what the writer writes), and GNU's (also read). */
#define USTAR_MAGIC_NAME "ustar"
#define USTAR_MAGIC                                                                                \
	USTAR_MAGIC_NAME "\0"                                                                      \
	                 "00"
#define USTAR_MAGIC_GNU USTAR_MAGIC_NAME "  \0"

/* The typeflag of a regular file (an old archive's '\0' means the same). */
#define USTAR_TYPE_REG '0'

/*
 * The checksum of the header h: the sum of its bytes, the checksum field
 * counted as spaces.
 */
unsigned long ustar_checksum(const unsigned char h[USTAR_BLOCK]);

#endif
