#!/usr/bin/env bats
# A task's faults that need no VM (docs/reliability.md).  Its folder's disk
# fills up: the tasks folder is a small tmpfs (t/lib-common.bash
# on_small_disk) while start.bundle is written, and results coming back are
# written onto a full one (a VM stopped by QEMU on a full disk:
# t/5001-ssh.bats).  A helper killed while the VM boots: a QEMU that never
# boots (it sleeps) holds the task in its boot wait.
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

# ended PID: PID has ended (gone, or a zombie until it is waited for).
ended() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

@test "helpers: aibox-proxy killed while the VM boots ends the task at once, saying so; nothing is left running" {
	# answers aibox's probe of its version, then never boots
	printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\nexec sleep 300\n' \
		>"$T/fake-bin/qemu-system-x86_64"
	ANTHROPIC_API_KEY=k aibox task "Do it." >out 2>err &
	pid=$!
	wait_until 30 pgrep -P "$pid" -x sleep >/dev/null || fail "no QEMU: $(cat err)"
	qemu=$(pgrep -P "$pid" -x sleep)
	proxy=$(pgrep -P "$pid" -f aibox-proxy)
	SECONDS=0
	kill -KILL "$proxy"
	wait_until 20 ended "$pid" || kill -KILL "$pid"
	run wait "$pid"
	assert_failure 1
	[ "$SECONDS" -le 15 ] || fail "it took $SECONDS s"
	dir=$(cat out)
	id=${dir: -6}
	run grep -F "aibox[$id]: the task did not finish: aibox-proxy was killed by SIGKILL while the task ran" err
	assert_success
	run grep -F "fetch them with" err
	assert_failure
	run kill -0 "$qemu"
	assert_failure
	run pgrep -f "$dir"
	assert_failure
	run aibox tasks list
	assert_success
	assert_line --regexp "^$id +not finished "
	run aibox tasks clean --all
	assert_success
	assert_line --partial "removed $dir/"
}

@test "console: a VM that floods its serial console fills console.log only to its cap, which says so" {
	# The guest's console is QEMU's stdout: this QEMU writes 64 MiB there, a
	# last line on its stderr, and fails (its --version probe fails too).
	printf '#!/bin/sh\n[ "$1" != --version ] || exit 1\nhead -c %d /dev/zero | tr "\\0" x\necho "QEMU: the end" >&2\nexit 1\n' \
		$((64 << 20)) >"$T/fake-bin/qemu-system-x86_64"
	ANTHROPIC_API_KEY=k run --separate-stderr aibox task "Do it."
	assert_stopped_at_boot
	dir=$output
	size=$(stat -c %s "$dir/console.log")
	[ "$size" -le $(((16 << 20) + 4096)) ] || fail "console.log has $size bytes"
	[ "$size" -ge $((16 << 20)) ] || fail "console.log has $size bytes"
	run tail -n 1 "$dir/console.log"
	assert_output "aibox: the VM's console past 16 MiB is left out of console.log"
}

@test "qemu: a QEMU whose --version probe hangs is killed after 5 s and the task boots cold, saying so" {
	# the probe records its pid and hangs; QEMU itself fails at once
	printf '#!/bin/sh\n[ "$1" != --version ] || { echo $$ >"%s"; exec sleep 300; }\nexit 1\n' "$T/probe.pid" \
		>"$T/fake-bin/qemu-system-x86_64"
	SECONDS=0
	ANTHROPIC_API_KEY=k run --separate-stderr aibox task "Do it."
	assert_stopped_at_boot
	[ "$SECONDS" -le 12 ] || fail "it took $SECONDS s"
	[[ "$stderr" == *"booting cold: cannot read QEMU's version: 'qemu-system-x86_64 --version' did not end within 5 s"* ]] ||
		fail "$stderr"
	run ended "$(cat "$T/probe.pid")"
	assert_success
}

@test "snapshot: a save of one size holds back tasks of that size only; a task of another size saves its own" {
	# an image that has snapshots; a QEMU that records its arguments and never boots
	{
		printf "built 2026-12-01\nsnapshot 1\n"
		for f in vmlinuz initramfs rootfs.ext4; do echo "sha256 $(sha256sum <"$AIBOX_IMAGES/default/$f" | cut -c1-64) $f"; done
	} >"$AIBOX_IMAGES/default/manifest"
	printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\necho "$*" >"%s/qemu.$$"\nexec sleep 300\n' "$T" \
		>"$T/fake-bin/qemu-system-x86_64"
	pids=
	# saving: how many QEMUs were started to save a snapshot
	saving() { cat "$T"/qemu.* 2>/dev/null | grep -c "aibox.snapshot=1"; }
	# saving (the snapshot's boot waits), with the 4 GiB and 2 CPUs snapshot's lock
	ANTHROPIC_API_KEY=k aibox task --memory 4G --cpus 2 "Do it." >/dev/null 2>"$T/err.4g" &
	pids="$pids $!"
	wait_until 30 eval 'test "$(saving)" -eq 1' || fail "no save: $(cat "$T/err.4g")"
	# another of that size boots cold at once, saying why
	ANTHROPIC_API_KEY=k aibox task --memory 4G --cpus 2 "Do it." >/dev/null 2>"$T/err.4g2" &
	pids="$pids $!"
	wait_until 30 grep -q "booting cold: another task is saving the snapshot" "$T/err.4g2" || fail "$(cat "$T/err.4g2")"
	# one of 1 GiB and 1 CPU saves its own meanwhile
	ANTHROPIC_API_KEY=k aibox task --memory 1G --cpus 1 "Do it." >/dev/null 2>"$T/err.1g" &
	pids="$pids $!"
	wait_until 30 eval 'test "$(saving)" -eq 2' || fail "$(cat "$T/err.1g")"
	run grep -F "another task is saving" "$T/err.1g"
	assert_failure
	ls -A "$AIBOX_IMAGES/default" >"$T/files"
	# the fake QEMUs first: a save waits for its QEMU, not for a stop
	for f in "$T"/qemu.*; do kill "${f##*.}"; done
	for p in $pids; do kill "$p"; done
	for p in $pids; do wait "$p" || true; done
	# each size's lock and temporary files are its own
	run grep -c '^\.snapshot-4096m-2c-......$' "$T/files"
	assert_output 2
	run grep -c '^\.snapshot-1024m-1c-......$' "$T/files"
	assert_output 2
	run grep -c '^\.snapshot-\(4096m-2\|1024m-1\)c\.lock$' "$T/files"
	assert_output 2
}
