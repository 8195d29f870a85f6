/*
 * The system prompt a task's Claude Code gets appended (settings.json
 * "system_prompt"): image/task.md, then image/host/<system>.md for the
 * system aibox runs on, from aibox's data (paths.h data_dir()).
 */
#ifndef AIBOX_SYSTEM_PROMPT_H
#define AIBOX_SYSTEM_PROMPT_H

#include "base/buf.h"
#include "vm/host_system.h"
#include "base/strvec.h"

/*
 * The two parts joined by a newline into out; a built-in text when neither
 * is there (a build tree without them).  A part that does not exist is left
 * out, its path appended to missing for the caller to warn about.  0, or a
 * negative errno with "cannot read 'PATH': reason" in err.
 */
int system_prompt_read(enum host_system sys, struct buf *out, struct strvec *missing,
                       struct buf *err);

#endif
