/*
 * The one quoter for a POSIX shell: every command line the tree hands to
 * /bin/sh or prints for a user to paste (QEMU's guestfwd command, the
 * snapshot's exec: migration, the fetch command, the Slurm wrapper).
 */
#ifndef AIBOX_SHELL_QUOTE_H
#define AIBOX_SHELL_QUOTE_H

#include "base/buf.h"

/*
 * Append s quoted for a POSIX shell: as is when it is non-empty and only has
 * [A-Za-z0-9_@%+=:,./-], else in single quotes with each ' as '\''.  The
 * shell reads back exactly s, whatever bytes it holds.
 */
void shell_quote(struct buf *out, const char *s);

#endif
