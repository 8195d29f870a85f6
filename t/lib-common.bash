# Shared by every t/*.bats: load with `load lib-common`.
#
# Each test runs in its own folder, $T, removed afterwards; $AIBOX_HOME and
# $HOME point inside it, so no test sees another's projects or caches
# (except the image cache, which is shared on purpose: see lib-vm.bash).

bats_load_library bats-support 2>/dev/null || load /usr/lib/bats/bats-support/load.bash
bats_load_library bats-assert 2>/dev/null || load /usr/lib/bats/bats-assert/load.bash
bats_load_library bats-file 2>/dev/null || load /usr/lib/bats/bats-file/load.bash
# `run !` (an assertion that the command fails) needs bats 1.5.
bats_require_minimum_version 1.5.0
# The helpers that need no bats (wait_until, gone, make_repo...), which the
# benches source too.
load lib-base

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
BUILD=$TOP/build
# A VM's QEMU for pgrep -f (common/vm/vm.c's vm_base_args()): not the
# `qemu-system-x86_64 --version` that the snapshot code runs before it.
QEMU_VM='qemu-system[^ ]* -nodefaults'
export PATH="$BUILD:$PATH"

common_setup() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/aibox-t.XXXXXX")
	export REAL_HOME=${REAL_HOME:-$HOME}
	export HOME=$T/home
	export AIBOX_HOME=$T/home/.aibox
	mkdir -p "$HOME"
	export GIT_CONFIG_NOSYSTEM=1
	git config --global user.name "Test User"
	git config --global user.email "test@example.com"
	git config --global init.defaultBranch main
	cd "$T" || return 1
}

common_teardown() {
	cd /
	small_disk_end
	[ -n "${T:-}" ] && chmod -R u+rwX "$T" 2>/dev/null
	[ -n "${T:-}" ] && rm -rf "$T"
	return 0
}

setup() { common_setup; }
teardown() { common_teardown; }

# no_vm_project: no_vm, and the project of a new repository $T/repo, cd'd
# into; cfg is its config.yaml (not written yet).
no_vm_project() {
	make_repo repo
	cd repo || return 1
	no_vm
	aibox projects path >/dev/null
	cfg=$AIBOX_HOME/projects/repo/config.yaml
}

# no_vm: a made-up image "default" in $T/fake-images (AIBOX_IMAGES) and a
# qemu-system-x86_64 first on PATH that exits at once, so that aibox task and
# aibox run get through all their start-up checks and stop at the boot
# ("QEMU exited before ..."), in a fraction of a second and without a VM.
no_vm() {
	export AIBOX_IMAGES=$T/fake-images
	mkdir -p "$AIBOX_IMAGES/default" "$T/fake-bin"
	for f in manifest vmlinuz initramfs rootfs.ext4; do echo x >"$AIBOX_IMAGES/default/$f"; done
	printf '#!/bin/sh\necho "no VM in this test" >&2\nexit 1\n' >"$T/fake-bin/qemu-system-x86_64"
	chmod +x "$T/fake-bin/qemu-system-x86_64"
	export PATH="$T/fake-bin:$PATH"
}

# on_one_day CMD...: CMD, and CMD again when the local date changed while it
# ran.  For a test that writes today's spend ledger (spend/$(date +%F)) and
# runs the tool that reads it: across midnight the tool read the next day's,
# which the test did not write; the second time, all is on the new day.  CMD
# writes the ledger itself and may `run`; what it leaves is checked after.
on_one_day() {
	local day
	day=$(date +%F)
	"$@"
	[ "$(date +%F)" = "$day" ] || "$@"
}

# assert_stopped_at_boot: the `run --separate-stderr` just before, of aibox
# task or aibox run under no_vm, got through every start-up check and stopped
# at the boot: exit 1 and no_vm's QEMU's failure on stderr.
assert_stopped_at_boot() {
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "not stopped at the boot: $stderr"
}

# Ways to make a thing aibox cannot remove or check, that hold for root too
# (root ignores a chmod, so t/run's root family would pass through them).
#
# too_deep DIR: a chain of folders DIR/d/d/... deeper than common/base/rmtree.h's
# RMTREE_MAX_DEPTH, which the removal does not go down (it names the folder
# with ELOOP, "Too many levels of symbolic links").
too_deep() {
	mkdir -p "$1/$(printf 'd/%.0s' $(seq 260))"
}

# flip_byte FILE OFFSET: FILE's byte at OFFSET changed to its bits inverted,
# so the file differs there whatever it held (writing a fixed byte leaves a
# random file unchanged once in 256 runs).  Fails if FILE has no such byte.
flip_byte() {
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$b" ] || return 1
	# shellcheck disable=SC2059
	printf "\\$(printf '%03o' $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# busy FILE CMD...: run CMD where FILE is a mount point (bound onto itself in a
# mount namespace of CMD's own, in a user namespace when not root), so that
# removing it fails with EBUSY, "Device or resource busy".  Skips the test
# where namespaces are not allowed.
busy() {
	unshare -rm true 2>/dev/null || skip "needs user and mount namespaces (unshare -rm)"
	unshare -rm sh -c 'mount --bind "$1" "$1" && shift && exec "$@"' sh "$@"
}

# small_disk SIZE [FILL]: a tmpfs of SIZE bytes with a file of FILL bytes in
# it (default: as much as fits, leaving it full), mounted in a mount namespace
# of its own (a user namespace too when not root) by a process that holds it
# until the test ends (common_teardown).  DISK is its path as seen from here,
# through that process's /proc/PID/root.  Skips the test where namespaces are
# not allowed.
small_disk() {
	unshare -rm true 2>/dev/null || skip "needs user and mount namespaces (unshare -rm)"
	mkdir -p "$T/disk"
	unshare -rm sh -c 'mount -t tmpfs -o size="$1" tmpfs "$2" || exit 1
		head -c "$3" /dev/zero >"$2/fill" 2>/dev/null
		echo ready >"$2.ready"
		exec sleep 900' sh "$1" "$T/disk" "${2:-$1}" 3>&- &
	SMALL_DISK_PID=$!
	wait_until 10 test -s "$T/disk.ready" || fail "cannot mount a tmpfs"
	DISK=/proc/$SMALL_DISK_PID/root$T/disk
}

# on_small_disk SIZE DIR CMD...: run CMD with DIR (a folder) a fresh tmpfs of
# SIZE bytes, in a mount namespace of CMD's own (a user namespace too, as
# root there, when not root): the tmpfs goes when CMD ends.  Skips the test
# where namespaces are not allowed.
on_small_disk() {
	unshare -rm true 2>/dev/null || skip "needs user and mount namespaces (unshare -rm)"
	unshare -rm sh -c 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"' \
		sh "$@"
}

small_disk_end() {
	[ -n "${SMALL_DISK_PID:-}" ] || return 0
	kill "$SMALL_DISK_PID" 2>/dev/null
	wait "$SMALL_DISK_PID" 2>/dev/null
	SMALL_DISK_PID=
}

# max_rss FILE CMD...: run CMD; the peak resident memory, in KiB, of the
# largest of it and the children it waited for goes to FILE.  CMD's status.
max_rss() {
	python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$@"
}

# not_a_lock FILE: FILE made a named pipe, which no lock can be: a task with
# such a lock cannot be checked (EINVAL, "Invalid argument").
not_a_lock() {
	rm -f "$1"
	mkfifo "$1"
}

# ledger_untouched [PROJECT]: PROJECT's spend ledger (default repo) holds no
# count and no reservation: each day's file is empty (no total written yet)
# or a zero total.
ledger_untouched() {
	local f
	for f in "$AIBOX_HOME/projects/${1:-repo}/spend"/*; do
		[ -f "$f" ] || continue
		run cat "$f"
		assert_success
		if [ -n "$output" ]; then
			assert_line --index 0 00000000000000000000
			refute_line --regexp '^[0-9a-f]{16} 0*[1-9]'
		fi
	done
}
