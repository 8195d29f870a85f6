/*
 * aibox-init's run mode: the guest side of `aibox run` (docs/internals.md,
 * "aibox run").
 *
 * PID 1 calls run_setup() after the state disk and before the config's
 * mounts (which may sit in the home, e.g. ~/.claude/skills): it gives the
 * user aibox the host user's uid and gid (settings.json "uid", "gid"), so
 * the user can write what the host user can in the shares (9p hands the
 * host's owners through and the guest checks them); a host uid of 0 makes
 * the VM's user root itself (docs/run.md).  It mounts the read-write shares,
 * the project at the
 * settings' path (9p tag aibox.project) and the project's home at
 * /home/aibox (tag aibox.home).  It sets gs's user ids to the ones it
 * gave the user, for the mount points mount_extra() makes in the home.
 *
 * The host runs the SSH command `run`, with or without a pty; the session
 * code calls run_session() with stdin, stdout and stderr being the channel
 * (or the pty).  It runs settings.json's "command" (default: claude) as the
 * user in the project folder (as root, with IS_SANDBOX=1, which Claude Code
 * wants before it takes bypassPermissions from root), with the proxy and key
 * forwarding env and the
 * config's env values, which come in the SSH environment variable AIBOX_ENV
 * (a JSON object of strings, never on disk), and returns its exit status
 * (128 + the signal's number when a signal ended it; 127 when it was not
 * found, 126 when it could not start otherwise).  The program runs in a
 * process group of its own in the terminal's foreground and is never left
 * stopped: a stop is continued at once (Ctrl-Z stops a shell's jobs, not a
 * program run directly; see run_session()).
 */
#ifndef AIBOX_INIT_RUN_H
#define AIBOX_INIT_RUN_H

#include "base/guest_abi.h"

struct guest_settings;

#define RUN_ENV_VAR GUEST_RUN_ENV_VAR

int run_setup(struct guest_settings *gs);
int run_session(void);

#endif
