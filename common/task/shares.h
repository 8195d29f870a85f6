/*
 * The 9p shares of a task's or a run's VM, planned once for both
 * (docs/internals.md, "The host layer"): the config's mounts, in config
 * order, then ~/.claude's skills, agents and commands (claude_share.h), all
 * read-only; for aibox run then the project's checkout and its home,
 * read-write.  The same list gives the VM launcher its mounts (vm.h) and
 * settings.json its read-only ones (the init mounts those; aibox run's init
 * mounts the two read-write ones itself).
 */
#ifndef AIBOX_SHARES_H
#define AIBOX_SHARES_H

#include <stddef.h>

#include "base/buf.h"
#include "base/strvec.h"

struct config;
struct vm_mount;
struct task_mount;

struct shares {
	struct vm_mount *vm;         /* nr of them, for vm_config.mounts */
	struct task_mount *settings; /* the read-only ones: nr_settings */
	size_t nr, nr_settings;
	struct strvec strs; /* owns every path and tag above */
};

#define SHARES_INIT                                                                                \
	{                                                                                          \
		NULL, NULL, 0, 0, STRVEC_INIT                                                      \
	}

/*
 * The read-only shares of cfg, with home as the user's home for ~/.claude
 * (NULL: none of the default ones); the config's mount n gets the tag
 * guest_mount_tag(n) (guest_abi.h).  0, or a negative errno with the reason in err
 * (claude_shares_plan()'s); s is then empty.
 */
int shares_plan(struct shares *s, const struct config *cfg, const char *home, struct buf *err);

/*
 * Add a read-write share (aibox run's project and home), which is not in
 * settings: the run's init knows where those two go (docs/internals.md).
 */
void shares_add_writable(struct shares *s, const char *host, const char *tag);

void shares_release(struct shares *s);

#endif
