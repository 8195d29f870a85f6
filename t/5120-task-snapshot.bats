#!/usr/bin/env bats
# aibox task with its VM restored from the image's snapshot (the default) and
# booted cold (AIBOX_SNAPSHOT=0): docs/image.md, "Snapshots".
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup() {
	task_setup
}

teardown() {
	task_teardown
}

@test "task snapshot: a task's VM is restored from the image's snapshot and the task succeeds; AIBOX_SNAPSHOT=0 boots it cold" {
	api '{"turns": [{"text": "Nothing to change."}], "require_key": "'"$KEY"'"}'
	run --separate-stderr aibox task "Change nothing."
	echo "$stderr" >"$T/err"
	[ "$status" -eq 0 ] || show
	assert_success
	dir=$(task_dir)
	[[ "$stderr" != *"booting cold"* ]] || show
	[[ "$stderr" != *"booting cold"* ]]
	grep -q 'aibox-init: resumed' "$dir/console.log"
	[[ "$stderr" == *"Claude Code exited with 0"* ]]
	first=$dir
	AIBOX_SNAPSHOT=0 run --separate-stderr aibox task "Change nothing."
	echo "$stderr" >"$T/err"
	[ "$status" -eq 0 ] || show
	assert_success
	dir=$(task_dir | grep -vxF "$first")
	[ -n "$dir" ]
	run ! grep -q 'aibox-init: resumed' "$dir/console.log"
	grep -q 'aibox-init: started' "$dir/console.log"
}
