#!/usr/bin/env bats
# kill -9 of a task's parts (docs/reliability.md): QEMU, the broker and
# aibox-task itself, while the VM boots and while the session runs.  No VM:
# a fake QEMU that sleeps holds the task in its boot wait, or one that sends
# an SSH banner first holds it in the session (its SSH greeting never ends).
# Each case ends with the same checks: what died is named, nothing of the
# task runs on, tasks list says how it ended, tasks show offers no fetch and
# tasks clean cleans it.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
	# a git remote, so that the broker runs too
	printf 'env: [ANTHROPIC_API_KEY]\ngit:\n  - url: https://localhost:1/public.git\n    fetch: no\n' >"$cfg"
}

# ended PID: PID has ended (gone, or a zombie until it is waited for).
ended() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# start PHASE [KEEP]: aibox task in the background ($pid), held in PHASE
# (boot or session) by a fake QEMU (with KEEP, the one there already); $qemu, $proxy, $broker, $workers (aibox-task's
# own children) and $dir.
start() {
	local banner=
	[ "$1" = boot ] || banner='printf "SSH-2.0-fake\\r\\n" >&4\n'
	[ -n "$2" ] ||
		printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\n'"$banner"'exec sleep 300\n' \
			>"$T/fake-bin/qemu-system-x86_64"
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	ANTHROPIC_API_KEY=k aibox task "Do it." >out 2>err &
	pid=$!
	# Bounds for a task that never gets there, not for one that is slow: on a machine
	# loaded by VMs under TCG (load average 20 on 2 cores) aibox task took 16 s to start
	# QEMU and 2 s more to its session.
	wait_until 120 pgrep -P "$pid" -x sleep >/dev/null || fail "no QEMU: $(cat err)"
	dir=$(cat out)
	if [ "$1" = session ]; then
		# the boot's phase line is written when the session starts
		wait_until 120 grep -q '^boot ' "$dir/aibox.log" || fail "no session: $(cat err)"
	fi
	qemu=$(pgrep -P "$pid" -x sleep)
	proxy=$(pgrep -P "$pid" -x aibox-proxy)
	broker=$(pgrep -P "$pid" -x aibox-broker)
	workers=$(pgrep -P "$pid" -x aibox-task | tr '\n' ' ')
	[ -n "$proxy" ] || fail "no proxy"
	[ -n "$broker" ] || fail "no broker"
}

# all_ended: QEMU, the proxy, the broker and aibox-task's own children have
# all ended, within 10 s.
all_ended() {
	local p
	for p in $qemu $proxy $broker $workers; do
		wait_until 10 ended "$p" || fail "$(ps -o pid,args -p "$p") is left running"
	done
}

# after STATE: tasks list says STATE, tasks show offers no fetch, tasks
# clean --all removes the folder and its lock.
after() {
	local id=${dir: -6}
	run aibox tasks list
	assert_success
	assert_line --regexp "^$id +$1 "
	run aibox tasks show "$id"
	assert_success
	refute_output --partial "fetch them with"
	run aibox tasks clean --all
	assert_success
	assert_line --partial "removed $dir/ and $(basename "$dir").lock"
	assert_dir_not_exists "$dir"
}

# killed VICTIM NAME WHEN: kill -9 of VICTIM's pid ends the task at once,
# naming NAME and WHEN; nothing is left.
killed() {
	SECONDS=0
	kill -KILL "$1"
	wait_until 20 ended "$pid" || kill -KILL "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 1 ] || fail "exit $st: $(cat err)"
	[ "$SECONDS" -le 10 ] || fail "it took $SECONDS s"
	run grep -F "aibox[${dir: -6}]: the task did not finish: $2 was killed by SIGKILL $3" err
	assert_success
	run grep -F "fetch them with" err
	assert_failure
	all_ended
	after "not finished"
}

@test "kill -9 of QEMU while the VM boots, and while the session runs: the task ends at once saying QEMU was killed" {
	start boot
	killed "$qemu" QEMU "before the VM's SSH server answered (see $dir/console.log)"
	start session
	killed "$qemu" QEMU "while the task ran"
}

@test "kill -9 of the broker while the VM boots, and of aibox-proxy while the session runs: the task ends at once saying so" {
	start boot
	killed "$broker" aibox-broker "while the task ran"
	start session
	killed "$proxy" aibox-proxy "while the task ran"
}

@test "kill -9 of aibox-task while the session runs: QEMU, the proxy and the broker die with it; tasks list says killed" {
	# while the VM boots: t/5005-task-start.bats
	start session
	kill -KILL "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 137 ] || fail "exit $st"
	all_ended
	run flock -n "$dir.lock" true
	assert_success
	after killed
}

@test "image store: the image removed while a task runs: the task keeps the files it opened and goes on; the next task finds no image" {
	# as QEMU does: the kernel, the initramfs and the root disk opened by
	# their paths at its start, held open for the VM's life
	cat >"$T/fake-bin/qemu-system-x86_64" <<-'SH'
		#!/bin/bash
		[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }
		while [ $# -gt 0 ]; do
			case $1 in
			-kernel) exec 5<"$2" ;;
			-initrd) exec 6<"$2" ;;
			*rootfs.ext4,*) f=${1#file=}; exec 7<"${f%%,*}" ;;
			esac
			shift
		done
		printf "SSH-2.0-fake\r\n" >&4
		exec sleep 300
	SH
	printf 'the old root disk\n' >"$AIBOX_IMAGES/default/rootfs.ext4"
	start session keep
	run aibox image remove default
	assert_success
	assert_dir_not_exists "$AIBOX_IMAGES/default"
	# the VM's files are still there for it, as they were
	run cat "/proc/$qemu/fd/7"
	assert_success
	assert_output "the old root disk"
	run cat "/proc/$qemu/fd/5" "/proc/$qemu/fd/6"
	assert_success
	assert_output "x
x"
	run kill -0 "$pid" "$qemu" "$proxy" "$broker"
	assert_success
	run aibox tasks list
	assert_success
	assert_line --regexp "^${dir: -6} +running "
	# a new task does not start on half an image
	ANTHROPIC_API_KEY=k run --separate-stderr aibox task "Again."
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the image 'default' is not built: run 'aibox image build default'"
	kill -INT "$pid"
	wait "$pid" || true
	all_ended
}
