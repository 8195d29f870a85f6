/*
 * PLACEHOLDER owned by the `init` helper: the task steps (clone, claude,
 * commit, bundle, results tar) replace this file.  Until then a task
 * session is an error.
 */
#include <stdio.h>

#include "task.h"
#include "banned.h"

int task_session(void)
{
	fprintf(stderr, "aibox-init: task mode is not built yet\n");
	return 2;
}
