/*
 * The aibox commands: the programs aibox-<words> in libexec_dir() (common/base/paths.h)
 * that the front command runs (bin/aibox.c) and shell completion offers
 * (common/task/complete.h).
 */
#ifndef AIBOX_COMMANDS_H
#define AIBOX_COMMANDS_H

struct buf;
struct strvec;

/*
 * 1 when libexec_dir()/name is a regular executable file, with its path in
 * path (reset first); else 0.
 */
int command_path(const char *name, struct buf *path);

/*
 * The commands' program names ("aibox-task", "aibox-tasks-clean", ...),
 * sorted: every executable aibox-* without a '.' in libexec_dir(), except
 * the programs that live there but are no commands (aibox-init, aibox-connect).
 * Nothing is added when the folder cannot be read.
 */
void commands_list(struct strvec *out);

#endif
