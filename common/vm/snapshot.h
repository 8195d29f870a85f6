/*
 * Starting a task's VM from a saved snapshot of the image's VM instead of a
 * cold boot (docs/image.md, "Snapshots").
 *
 * The snapshot is a VM booted with "aibox.snapshot=1" up to the point where
 * aibox-init waits on the virtio-serial port SNAP_PORT: kernel up, modules
 * loaded, the root disk mounted read-only, nothing of any task.  Its guest
 * RAM is a file (.ram, written through a shared file backend) and the rest
 * QEMU's migration stream (.vmstate, with x-ignore-shared: no RAM in it).  A
 * task's QEMU maps the RAM file private (copy on write: every VM restored
 * from one snapshot shares the pages it only reads), loads the stream
 * (`-incoming defer`, then migrate-incoming), gets the task's state disk to
 * its size (QMP block_resize), and
 * sends the go message below; only then does the guest mount the task's
 * share, read its settings and keys, format its state disk and start sshd.
 *
 * The go message is the one contract both sides share (this header is
 * included by aibox-init too).  Lines, host to guest, at most SNAP_GO_MAX
 * bytes in all, in this order:
 *
 *	aibox-go 1
 *	time <seconds> <nanoseconds>     the host's CLOCK_REALTIME
 *	seed <128 hex digits>            64 fresh bytes for the kernel's pool
 *	disk <bytes>                     the state disk's size once resized
 *	share <tag> <slot tag>           0 to SNAP_SHARES times
 *	secrets <bytes>                  at most once, 1 to GUEST_SECRETS_MAX
 *	end
 *
 * and, with a secrets line, exactly that many bytes right after "end\n":
 * vm_config's secrets (sent only to an image whose manifest's init is this
 * aibox's own aibox-init), the task's env values in the framing the session's
 * stdin has without it (common/base/guest_secrets.h, GUEST_SECRETS_STDIN),
 * so that a restored VM's task need not wait for the session to have them
 * (docs/init-task.md, "The early task").  Besides those the message carries
 * nothing secret but the seed, and the port is private to the VM's QEMU.
 * Before it, the guest writes SNAP_WAITING on the port: the host saves the
 * snapshot only after that line.
 */
#ifndef AIBOX_SNAPSHOT_H
#define AIBOX_SNAPSHOT_H

#include "base/guest_abi.h" /* SNAP_CMDLINE */

#define SNAP_PORT       "aibox.ctl" /* the virtio-serial port of the go message */
#define SNAP_WAITING    "aibox-init: waiting\n"
#define SNAP_GO_MAX     4096
#define SNAP_SEED_BYTES 64
/* The spare 9p devices of a snapshot's VM: tags aibox.s0 .. aibox.s7. */
#define SNAP_SHARES   8
#define SNAP_SLOT_TAG "aibox.s"

struct buf;
struct vm;
struct vm_config;

/*
 * Start cfg's VM (task mode) from the image's snapshot for its memory size
 * and CPU count, saving one first when there is none (made once per image,
 * see snapshot_save()).  0 with *vm running the restored guest, which has
 * had its go message; or a negative errno with the reason appended to err,
 * one clause a user reads ("the snapshot is truncated"), nothing left
 * running: the caller boots cold.
 */
int snapshot_start(const struct vm_config *cfg, struct vm *vm, struct buf *err);

/*
 * Start a task VM from the image's snapshot (snapshot_start(), which saves
 * it first when there is none), or cold with vm_start() when that cannot be,
 * saying why in vm->note.  Returns as vm_start() does.
 */
int snapshot_boot(const struct vm_config *cfg, struct vm *vm);

/*
 * Save the snapshot for cfg's image, memory size and CPU count unless a good
 * one is there: boot the image with SNAP_CMDLINE, wait for SNAP_WAITING,
 * stop it and migrate it to a temporary file in the image's folder (its RAM
 * already in another, the RAM file), then make the stream read-only (0444)
 * and the RAM file writable only by its owner (QEMU 7.2 must open it so:
 * docs/image.md, "What restored VMs share"), rename both, and write the
 * manifest the same way.  1 when one was saved, 0 when a good one was there, or a negative
 * errno with the reason appended to err (-EBUSY: another process is saving
 * it).
 */
int snapshot_save(const struct vm_config *cfg, struct buf *err);

#endif
