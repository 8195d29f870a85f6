/*
 * PLACEHOLDER owned by the `init` helper (issue 5, task mode): it replaces
 * this file and task.c with the real task steps.
 *
 * The base of aibox-init calls task_session() when sshd runs the forced
 * command `/usr/lib/aibox/aibox-init session` with SSH_ORIGINAL_COMMAND=task
 * in a VM booted in task mode.  stdin, stdout and stderr are the SSH channel
 * (stdin: the secrets JSON then EOF; stdout: the results tar; stderr:
 * progress lines).  Returns the exit code of the session command.
 */
#ifndef AIBOX_INIT_TASK_H
#define AIBOX_INIT_TASK_H

int task_session(void);

#endif
