/* The task's system prompt (system_prompt.h). */
#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/paths.h"
#include "task/system_prompt.h"
#include "base/banned.h"

#define PART_MAX (256 * 1024)

/* When aibox's data has no system prompt parts (a build tree without them). */
static const char default_system_prompt[] =
    "You run unattended in a throwaway VM on a clone of the user's project, with no one to "
    "answer questions.  Do the task in the prompt, commit your work on the current branch "
    "with clear messages, and end with a short summary of what you did.\n";

int system_prompt_read(enum host_system sys, struct buf *out, struct strvec *missing,
                       struct buf *err)
{
	struct buf path = BUF_INIT, host = BUF_INIT;
	const char *parts[] = {"image/task.md", NULL};
	int ret = 0;

	buf_addf(&host, "image/host/%s.md", host_system_name(sys));
	parts[1] = host.buf;
	for (size_t i = 0; i < ARRAY_SIZE(parts) && !ret; i++) {
		ssize_t n;

		buf_reset(&path);
		buf_addf(&path, "%s/%s", data_dir(), parts[i]);
		if (out->len)
			buf_addstr(out, "\n");
		n = buf_read_file(out, path.buf, PART_MAX);
		if (n == -ENOENT) {
			strvec_push(missing, path.buf);
		} else if (n < 0) {
			ret = (int)n;
			buf_addf(err, "cannot read '%s': %s", path.buf, strerror(-ret));
		}
	}
	if (!ret && (!out->len || out->len == 1))
		buf_addstr(out, default_system_prompt);
	buf_release(&path);
	buf_release(&host);
	return ret;
}
