/*
 * The one cap on a log file the VM fills on the host (docs/security.md,
 * "Limits", "The logs the VM fills"): whatever rate the VM writes at, each of
 * these files takes at most LOG_CAP_BYTES of what it sends, then one line
 * says the rest is left out:
 *
 *   console.log  the guest's serial console and QEMU's stderr
 *                (common/vm/vm.c console_copy())
 *   proxy.log    the default of aibox-proxy's --log-max, and aibox-connect's
 *                lines in it (common/proxy/log_line.h)
 *   broker.log   counted across the broker's children (common/broker/broker.h)
 *   aibox.log    the VM's stderr lines, and aibox task's stderr when it is a
 *                regular file (common/task/task_session.c capped_line())
 *
 * Not this contract: SESSION_LINE_MAX (common/base/session_file.h) is the
 * most one line of a result file may hold for the host to parse it, a limit
 * on input, refused whole when passed, never a point where writing stops.
 */
#ifndef AIBOX_LOG_CAP_H
#define AIBOX_LOG_CAP_H

/* The MiB of the VM's lines a log file takes, at most; its bytes; its words. */
#define LOG_CAP_MIB      16
#define LOG_CAP_BYTES    ((long long)LOG_CAP_MIB << 20)
#define LOG_CAP_STR_(x)  #x
#define LOG_CAP_STR(x)   LOG_CAP_STR_(x)
#define LOG_CAP_MIB_TEXT LOG_CAP_STR(LOG_CAP_MIB) " MiB"
/*
 * For the logs whose notes about the cap count in it (proxy.log,
 * broker.log): the bytes of LOG_CAP_BYTES kept for those notes, so that the
 * file, notes and all, stays within the cap.
 */
#define LOG_CAP_RESERVE 512

#endif
