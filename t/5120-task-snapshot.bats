#!/usr/bin/env bats
# aibox task with its VM restored from the image's snapshot (the default) and
# booted cold (AIBOX_SNAPSHOT=0): docs/image.md, "Snapshots".
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup() {
	task_setup
	# This file tests the snapshot itself: it is on here even in make check-cold.
	unset AIBOX_SNAPSHOT
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

# image_copy [SED]: the image in $T/images (AIBOX_IMAGES), its files the
# store's, its manifest a copy (through sed SED when given), with a copy of
# the store's snapshot for the task's size when the store has one; cpus and
# snap name that size, img the folder.
image_copy() {
	cpus=$(($(nproc) < 2 ? $(nproc) : 2))
	snap=snapshot-4096m-${cpus}c
	img=$T/images/default
	mkdir -p "$img"
	for f in vmlinuz initramfs rootfs.ext4; do
		ln -s "$IMAGE/$f" "$img/$f"
	done
	sed "${1:-}" "$IMAGE/manifest" >"$img/manifest"
	cp -p "$IMAGE/$snap.vmstate" "$IMAGE/$snap.ram" "$IMAGE/$snap.manifest" "$img/" 2>/dev/null || true
	export AIBOX_IMAGES=$T/images
}

@test "task snapshot: a corrupt snapshot is not used: the task boots cold, says why, and succeeds" {
	# the store's snapshot copied (made here by a first task when the store has none)
	image_copy
	api '{"turns": [{"text": "Nothing to change."}], "require_key": "'"$KEY"'"}'
	first=
	if [ ! -e "$img/$snap.vmstate" ]; then
		run --separate-stderr aibox task --memory 4G --cpus "$cpus" "Change nothing."
		echo "$stderr" >"$T/err"
		[ "$status" -eq 0 ] || show
		assert_success
		first=$(task_dir)
	fi
	f=$img/$snap.vmstate
	[ -f "$f" ]
	[ -f "$img/$snap.manifest" ]
	# one byte changed in the middle
	chmod u+w "$f"
	flip_byte "$f" $(($(stat -c %s "$f") / 2))
	chmod 0444 "$f"
	run --separate-stderr aibox task --memory 4G --cpus "$cpus" "Change nothing."
	echo "$stderr" >"$T/err"
	[ "$status" -eq 0 ] || show
	assert_success
	grep -q " aibox\[.*\]: booting cold: the snapshot does not match its manifest's digest; it is removed" "$T/err" ||
		fail "no line saying why it booted cold in: $(cat "$T/err")"
	[[ "$stderr" == *"Claude Code exited with 0"* ]]
	dir=$(task_dir | grep -vxF "$first")
	[ -n "$dir" ]
	grep -q 'aibox-init: started' "$dir/console.log"
	run ! grep -q 'aibox-init: resumed' "$dir/console.log"
}

@test "task snapshot: an image whose init is not this aibox's gets the env values over the session, not with its go message" {
	# its manifest naming another init (docs/init-task.md, "Secrets with the go message")
	image_copy "s/^init [0-9a-f]*$/init $(printf '%064d' 0)/"
	run ! cmp -s "$IMAGE/manifest" "$img/manifest"
	printf '  - AIBOX_T_VALUE\n' >>"$AIBOX_HOME/projects/repo/config.yaml"
	export AIBOX_T_VALUE="over the session"
	api "$(python3 -c 'import json; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "printf \"%s\\n\" \"$AIBOX_T_VALUE\" > v.txt && git add v.txt && git commit -q -m v", "description": "commit"}}},
	  {"text": "Done."}], "require_key": "'"$KEY"'"}))')"
	run --separate-stderr aibox task --memory 4G --cpus "$cpus" "Commit the value."
	echo "$stderr" >"$T/err"
	[ "$status" -eq 0 ] || show
	assert_success
	dir=$(task_dir | tail -1)
	grep -q 'aibox-init: resumed' "$dir/console.log"
	# the session brought them: the early clone, then the task in the session
	grep -q "the clone was made while the session was set up" "$dir/vm.log"
	run ! grep -q "the go message carried the secrets" "$dir/vm.log"
	git fetch -q "$dir/changes.bundle" "aibox/task:got"
	assert_equal "$(git show got:v.txt)" "over the session"
}
