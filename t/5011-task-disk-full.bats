#!/usr/bin/env bats
# A task whose folder's disk fills up (docs/reliability.md), without a VM:
# the tasks folder is a small tmpfs (t/lib-common.bash on_small_disk) while
# start.bundle is written, and results coming back are written onto a full
# one.  A VM stopped by QEMU on a full disk: t/5001-ssh.bats.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
}

@test "disk full: start.bundle on a full disk says the disk is full; no bundle or temporary is left, tasks list and clean see a task that failed to start" {
	head -c 400000 /dev/urandom >big
	git add big
	git commit -qm big
	tasks=$AIBOX_HOME/projects/repo/tasks
	mkdir -p "$tasks"
	# everything runs while the tmpfs is there; the markers split its output
	ANTHROPIC_API_KEY=k run --separate-stderr on_small_disk 262144 "$tasks" sh -c '
		aibox task "Do it." 2>&1
		echo "== status $?"
		ls -A "$1"/*/
		echo "== list"
		aibox tasks list 2>&1
		echo "== clean"
		aibox tasks clean --all 2>&1
		echo "== status $?"
		ls -A "$1"' sh "$tasks"
	assert_success
	out=$output
	dir=$(sed -n 1p <<<"$out")
	[[ "$dir" == "$tasks"/20*-?????? ]] || fail "no task folder first: $out"
	id=${dir: -6}
	grep -qF "aibox[$id]: cannot write '$dir/start.bundle': the disk of '$dir' is full (" <<<"$out" ||
		fail "no line saying the disk is full: $out"
	assert_line "== status 2"
	# nothing half-written: no start.bundle, start.idx or git's temporary
	# folder; the result files are empty
	run sed -n '/^== status 2$/,/^== list$/p' <<<"$out"
	assert_success
	refute_line --partial "start.bundle"
	refute_line --partial "start.idx"
	refute_line --partial ".start-bundle"
	assert_line "changes.bundle"
	run grep -E "^$id +failed to start " <<<"$out"
	assert_success
	assert_line --partial "Do it."
	run sed -n '/^== clean$/,$p' <<<"$out"
	assert_success
	assert_line --index 1 --partial "removed $dir/ and $(basename "$dir").lock ("
	assert_line --index 3 "== status 0"
	# the tasks folder is empty after it
	[ "${#lines[@]}" -eq 4 ] || fail "tasks clean --all left: $output"
}

@test "disk full: results written onto a full disk are refused with the disk's error, not waited for" {
	"$TOP/t/mktar" changes.bundle:size=300000 result.json:size=2 >results.tar
	mkdir out
	run --separate-stderr on_small_disk 131072 out sh -c 'test-task tar-in "$1" <"$2"' sh out results.tar
	assert_failure
	assert_output "refused: cannot write 'changes.bundle': No space left on device"
}
