/*
 * The user's Claude Code skills, agents and commands, shared into the VM
 * read-only by aibox task and aibox run alike (docs/tasks.md: "Your
 * skills, agents and commands in ~/.claude are mounted read-only, like with
 * aibox run, unless the config says none for them"; docs/config.md).
 *
 * Each of the three config keys (struct config_claude) gives at most one
 * share, in the order skills, agents, commands:
 *   default  ~/.claude/<key> of the home given, when it is a folder (a key
 *            whose folder does not exist, or no home, gives nothing);
 *   none     nothing;
 *   a path   that folder, which must exist and be a folder.
 * Each share goes to /home/aibox/.claude/<key> in the VM under the 9p tag
 * aibox.<key>; the caller hands host and tag to the VM launcher (vm.h, never
 * writable) and tag and guest path to the init (settings.json "mounts";
 * image/init/mounts.c mounts them read-only, making the folders under the
 * home as the guest user's).
 */
#ifndef AIBOX_CLAUDE_SHARE_H
#define AIBOX_CLAUDE_SHARE_H

#include <stddef.h>

#include "base/buf.h"
#include "config/config.h"
#include "base/guest_abi.h"

#define CLAUDE_SHARE_MAX 3

struct claude_share {
	const char *key; /* "skills", "agents" or "commands" (static) */
	char *host;      /* the host folder */
	char *guest;     /* /home/aibox/.claude/<key> */
	char *tag;       /* aibox.<key> */
};

struct claude_shares {
	struct claude_share v[CLAUDE_SHARE_MAX];
	size_t nr;
};

#define CLAUDE_SHARES_INIT                                                                         \
	{                                                                                          \
		.nr = 0                                                                            \
	}

/*
 * Fill out from cfg's skills, agents and commands, with home as the user's
 * home (NULL or "": no default shares).  0, or -ENOTDIR (a configured path
 * that is not a folder) or another negative errno from stat(), with the
 * reason in err ("skills: '/x' is not a folder"); out is then empty.
 */
int claude_shares_plan(const struct config *cfg, const char *home, struct claude_shares *out,
                       struct buf *err);

void claude_shares_release(struct claude_shares *s);

#endif
