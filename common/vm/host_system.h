/*
 * The system aibox runs on: it picks the part of image/host/ that follows
 * image/task.md in a task's system prompt, and how the summary quotes the
 * fetch command (docs/platforms.md).
 *
 * The build's own system decides (_WIN32: windows, __APPLE__: macos, else
 * linux).  AIBOX_HOST_SYSTEM overrides it, for tests only: one of the names
 * below, anything else is an error, so a typo never passes as linux.
 */
#ifndef AIBOX_HOST_SYSTEM_H
#define AIBOX_HOST_SYSTEM_H

enum host_system {
	HOST_LINUX,
	HOST_MACOS,
	HOST_WINDOWS,
};

#define HOST_SYSTEM_ENV "AIBOX_HOST_SYSTEM"

/*
 * The system aibox runs on, or the one AIBOX_HOST_SYSTEM names.  Returns 0
 * with *out set, or -EINVAL (*out untouched) when AIBOX_HOST_SYSTEM is set
 * to anything but "linux", "macos" or "windows" (the empty string included).
 */
int host_system_get(enum host_system *out);

/* "linux", "macos" or "windows" (s one of the above): image/host/<name>.md. */
const char *host_system_name(enum host_system s);

#endif
