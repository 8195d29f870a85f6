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

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
BUILD=$TOP/build
# A VM's QEMU for pgrep -f (common/vm.c's vm_base_args()): not the
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
	[ -n "${T:-}" ] && chmod -R u+rwX "$T" 2>/dev/null
	[ -n "${T:-}" ] && rm -rf "$T"
	return 0
}

setup() { common_setup; }
teardown() { common_teardown; }

# wait_until SECONDS CMD...: run CMD (a command or a function) until it
# succeeds; return 1, which fails the test, with a line on stderr naming CMD,
# once SECONDS (a whole number) have passed without.  It polls every 0.02 s
# at first, then every 0.2 s.  The suite's one way to wait for something: no
# fixed sleeps and no loops of its own.  (The suite has no factor for slow
# machines: the deadlines are generous for TCG under load.)
wait_until() {
	local secs=$1 start n=0
	shift
	start=${EPOCHREALTIME/./}
	until "$@"; do
		if ((${EPOCHREALTIME/./} - start >= secs * 1000000)); then
			echo "wait_until: '$*' did not succeed within $secs s" >&2
			return 1
		fi
		((n++ < 25)) && sleep 0.02 || sleep 0.2
	done
}

# ready_or_gone FILE PID: FILE has its "ready ..." line, or PID has ended
# (what a helper started with --ready-fd does first).
ready_or_gone() {
	grep -q '^ready ' "$1" 2>/dev/null || gone "$2"
}

# file_or_gone FILE PID: FILE is not empty, or PID has ended.
file_or_gone() {
	[ -s "$1" ] || gone "$2"
}

# gone PID...: none of the PIDs is running (for wait_until; a zombie counts
# as running until it is reaped, which bash does at once for its children).
gone() {
	local p
	for p; do
		kill -0 "$p" 2>/dev/null && return 1
	done
	return 0
}

# task_source BUNDLE: $T/src, a repository of three commits with *.log ignored,
# START its HEAD, and BUNDLE made from it as aibox-task makes start.bundle: HEAD
# a symref to aibox/task, both at START, written from a bare repository
# ($T/empty) that borrows src's objects.
task_source() {
	make_repo src
	printf '*.log\n' >src/.gitignore
	git -C src add .gitignore
	git -C src commit -q -m "ignore logs"
	START=$(git -C src rev-parse HEAD)
	git init -q --bare empty
	echo "$T/src/.git/objects" >empty/objects/info/alternates
	git -C empty update-ref refs/heads/aibox/task "$START"
	git -C empty symbolic-ref HEAD refs/heads/aibox/task
	git -C empty bundle create -q "$1" HEAD refs/heads/aibox/task
}

# make_repo DIR: a git repository with two commits.
make_repo() {
	local dir=$1
	git init -q "$dir"
	(
		cd "$dir" || exit 1
		echo "hello" >README.md
		git add README.md
		git commit -q -m "first"
		echo "world" >>README.md
		git commit -q -am "second"
	)
}

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
