# Shared by the tests that run whole tasks in VMs (t/51xx, t/52xx): load
# after lib-common; it loads lib-vm, lib-tls and lib-claude.
#
# task_setup makes a sample repository (cd'd into) whose project passes the
# host's key (ANTHROPIC_API_KEY=$KEY) to the proxy; api starts t/fake-api over
# TLS as the upstream; fault_image makes a test image whose guest misbehaves.

load lib-vm
load lib-tls
load lib-claude

KEY=sk-ant-host-key-6006

task_setup() {
	common_setup
	vm_image
	make_test_ca "$T/ca"
	make_repo repo
	cd repo || return 1
	aibox projects path >/dev/null
	printf 'env:\n  - ANTHROPIC_API_KEY\n' >"$AIBOX_HOME/projects/repo/config.yaml"
	export ANTHROPIC_API_KEY=$KEY
	unset CLAUDE_CODE_OAUTH_TOKEN
}

# task_teardown: end the task started in the background (TASK_PID) and the fake API.
task_teardown() {
	local p
	for p in ${TASK_PID:-} ${TASK_PIDS:-}; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	stop_fake_api
	common_teardown
}

# api SCRIPT_JSON: t/fake-api over TLS, requiring the host's key.
api() {
	printf '%s\n' "$1" >"$T/script.json"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT
	export AIBOX_API_CA=$T/ca/ca.pem
}

# task_dir: the task folders of the project, one a line.
task_dir() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

# show [ERRFILE...]: what a failed test needs to see: each task's stderr
# (default $T/err; its aibox lines, then its last lines), console and logs.
show() {
	local f d
	for f in "${@:-$T/err}"; do
		echo "--- $f (aibox lines, then the last 10 lines, cut at 300 bytes)"
		grep -a ' aibox\[' "$f" | head -50
		tail -n 10 "$f" | cut -c1-300
	done
	for d in $(task_dir); do
		echo "--- $d"
		echo "--- console"; tail -40 "$d/console.log"
		echo "--- proxy.log"; cat "$d/proxy.log"
		echo "--- aibox.log"; cat "$d/aibox.log"
	done
	echo "--- fake-api"; tail -20 "$T/fake-api.log" 2>/dev/null
	true
}

# wait_child PARENT PATTERN: the pid of PARENT's child whose command line
# matches PATTERN, once there is one; fails when PARENT ends first.  The pid
# is the one the check found: a short-lived child (QEMU's --version, which the
# snapshot code runs first) is never looked up twice.
wait_child() {
	local pid
	pid=$(wait_until 300 child_or_gone "$1" "$2") && [ -n "$pid" ] && echo "$pid"
}

# child_or_gone PARENT PATTERN: PARENT has a child matching PATTERN, or has ended.
child_or_gone() {
	pgrep -P "$1" -f "$2" || gone "$1"
}

# fault_image FOLDER [STORE]: a test image in STORE/default (default
# $T/images; use it with AIBOX_IMAGES=STORE) that is the real image with
# FOLDER copied to /usr/lib/aibox-fault/ in the guest and one or both of
# these changes:
#   FOLDER/session  the SSH session runs it (a script, as root) instead of
#                   the init's task command
#   FOLDER/claude   replaces Claude Code (/usr/local/bin/claude): the init's
#                   task runs as ever, with this program as Claude Code
#
# The kernel and the root disk are the real ones (symlinks).  The initramfs is
# the real one with a second cpio appended (the kernel unpacks concatenated
# archives, a later file replacing an earlier one): it holds FOLDER, and the
# real /init with one line added before its switch_root, which copies FOLDER
# into the new root and adds `ForceCommand` to the overlay's sshd_config
# (ForceCommand wins over the key's forced command) or puts the test's
# claude in place.  PID 1 is the real aibox-init.  The manifest is the
# real one with the initramfs's checksum made right.  It has no snapshot
# until fault_snapshot saves one: an image of one test is best booted cold
# (AIBOX_SNAPSHOT=0), as a snapshot saved for one task costs more than the
# cold boot it saves (docs/image.md).
fault_image() {
	local src=$1 img=${2:-$T/images}/default cp=$T/fault-cpio sum
	mkdir -p "$img" "$cp/fault"
	ln -s "$IMAGE/vmlinuz" "$img/vmlinuz"
	ln -s "$IMAGE/rootfs.ext4" "$img/rootfs.ext4"
	(cd "$cp" && cpio -i --quiet init <"$IMAGE/initramfs") || return 1
	grep -q '^exec switch_root ' "$cp/init" || {
		echo "fault_image: the image's /init has no 'exec switch_root' line" >&2
		return 1
	}
	sed -i 's|^exec switch_root |. /fault-hook\n&|' "$cp/init"
	cat >"$cp/fault-hook" <<'EOF'
# t/lib-task.bash's test image: the test's session or Claude Code.
mkdir -p /root/usr/lib/aibox-fault
cp -a /fault/. /root/usr/lib/aibox-fault/ || fail "cannot install the test's session"
if [ -f /fault/session ]; then
	echo 'ForceCommand /usr/lib/aibox-fault/session' >>/root/etc/ssh/sshd_config
fi
if [ -f /fault/claude ]; then
	cp /fault/claude /root/usr/local/bin/claude || fail "cannot install the test's claude"
fi
EOF
	cp -a "$src/." "$cp/fault/"
	chmod 755 "$cp/fault"/*
	(cd "$cp" && find init fault-hook fault | cpio -o --quiet -H newc -R 0:0) >"$T/fault.cpio" ||
		return 1
	cat "$IMAGE/initramfs" "$T/fault.cpio" >"$img/initramfs"
	sum=$(sha256sum "$img/initramfs" | cut -d' ' -f1)
	sed "s/^sha256 [0-9a-f]* initramfs\$/sha256 $sum initramfs/" "$IMAGE/manifest" >"$img/manifest"
	grep -qx "sha256 $sum initramfs" "$img/manifest"
}

# fault_snapshot STORE: save the snapshot of STORE's test image (fault_image)
# for a task of the default size (4096 MiB; 2 CPUs, or this machine's count
# if fewer: docs/config.md), with test-vm (which then restores it once and
# stops), for an image that a file's tests share: each of their tasks then
# restores it as a task on the real image does, and none saves it (a task
# that saved it would have two QEMUs, the saving one first).
fault_snapshot() {
	local cpus
	cpus=$(getconf _NPROCESSORS_ONLN)
	[ "$cpus" -lt 2 ] || cpus=2
	vm_share "$T/fault-snap"
	test-vm --image "$1/default" --share "$T/fault-snap" --proxy "$T/none.sock" \
		--memory 4096 --cpus "$cpus" --log "$T/fault-snap.log" --snapshot 1 \
		--start-only 1 2>"$T/fault-snap.err" && grep -qx 'test-vm: restored' "$T/fault-snap.err" || {
		cat "$T/fault-snap.err" "$T/fault-snap.log" >&2
		return 1
	}
}

# The start of a test image's session script: it marks the session as the
# task's (so the VM powers off when it ends, as with the real init) and takes
# the secrets off stdin, as the init does.  F is the folder of the test's
# files: the task's mount /fault (t/5200-task-faults.bats).
FAULT_SESSION_HEAD='#!/bin/bash
: >/run/aibox/session-started
cat >/dev/null
F=/fault
'
