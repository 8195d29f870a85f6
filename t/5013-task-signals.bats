#!/usr/bin/env bats
# Signals to aibox-task (docs/reliability.md): SIGINT, SIGTERM, SIGHUP, its
# terminal closing, and SIGSTOP then SIGCONT (Ctrl-Z and fg, or a paused
# job).  No VM: a fake QEMU sends an SSH banner and sleeps, which holds the
# task in its session (its SSH greeting never ends).
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
	printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\nprintf "SSH-2.0-fake\\r\\n" >&4\nexec sleep 300\n' \
		>"$T/fake-bin/qemu-system-x86_64"
}

# ended PID: PID has ended (gone, or a zombie until it is waited for).
ended() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# in_session PID: aibox task PID is in its session ($dir, $qemu, $proxy).
in_session() {
	wait_until 60 pgrep -P "$1" -x sleep >/dev/null || fail "no QEMU: $(cat err)"
	dir=$(cat out)
	wait_until 60 grep -q '^boot ' "$dir/aibox.log" || fail "no session: $(cat err)"
	qemu=$(pgrep -P "$1" -x sleep)
	proxy=$(pgrep -P "$1" -x aibox-proxy)
	[ -n "$proxy" ] || fail "no proxy"
}

# ended_with WHY STATE: the task ended saying it did not finish for WHY,
# with no fetch; nothing is left running, tasks list says STATE, the spend
# ledger holds no count and no reservation (no answer came), clean cleans.
ended_with() {
	local id=${dir: -6} p
	run grep -F "aibox[$id]: the task did not finish: $1" err
	assert_success
	run grep -F "fetch them with" err
	assert_failure
	for p in $qemu $proxy; do
		wait_until 10 ended "$p" || fail "$(ps -o pid,args -p "$p") is left running"
	done
	run aibox tasks list
	assert_success
	assert_line --regexp "^$id +$2 "
	ledger_untouched
	run aibox tasks clean --all
	assert_success
	assert_line --partial "removed $dir/ and $(basename "$dir").lock"
}

# stopped_by SIG: the task ended as one stopped by SIG (exit 1 checked by
# the caller), tasks list says killed; as ended_with.
stopped_by() {
	ended_with "the VM was stopped by $1" killed
}

@test "signals: SIGINT, SIGTERM and SIGHUP in the session stop the task at once, each named; nothing is left" {
	for sig in INT TERM HUP; do
		ANTHROPIC_API_KEY=k aibox task "Do it." >out 2>err &
		pid=$!
		in_session "$pid"
		SECONDS=0
		kill -"$sig" "$pid"
		st=0
		wait "$pid" || st=$?
		[ "$st" -eq 1 ] || fail "SIG$sig: exit $st: $(cat err)"
		[ "$SECONDS" -le 10 ] || fail "SIG$sig: it took $SECONDS s"
		stopped_by "SIG$sig"
	done
}

@test "signals: SIGTERM to the task's whole process group (kill -TERM -PGID) in its boot, a snapshot being saved, and in its session ends it at once, once; nothing is left" {
	# the boot: an image that has snapshots and none saved yet, so the
	# first task saves one; the saving QEMU sleeps (no monitor greeting),
	# which holds the boot for up to 300 s
	{
		printf 'image default\nsnapshot 1\n'
		for f in vmlinuz initramfs rootfs.ext4; do
			printf 'sha256 %s %s\n' "$(sha256sum <"$AIBOX_IMAGES/default/$f" | cut -c1-64)" "$f"
		done
	} >"$AIBOX_IMAGES/default/manifest"
	printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\nexec sleep 300\n' \
		>"$T/fake-bin/qemu-system-x86_64"
	for phase in boot session; do
		if [ "$phase" = session ]; then
			# a cold boot into the session (setup's QEMU)
			echo x >"$AIBOX_IMAGES/default/manifest"
			printf '#!/bin/sh\n[ "$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }\nprintf "SSH-2.0-fake\\r\\n" >&4\nexec sleep 300\n' \
				>"$T/fake-bin/qemu-system-x86_64"
		fi
		# a process group of its own, as a shell's job or a bench's
		AIBOX_SNAPSHOT=1 ANTHROPIC_API_KEY=k setsid aibox task "Do it." >out 2>err &
		pid=$!
		if [ "$phase" = boot ]; then
			wait_until 30 pgrep -P "$pid" -x sleep >/dev/null || fail "no saving QEMU: $(cat err)"
			dir=$(cat out)
			qemu=$(pgrep -P "$pid" -x sleep)
			proxy=$(pgrep -P "$pid" -x aibox-proxy)
			run grep -q '^boot ' "$dir/aibox.log"
			assert_failure
			# the saving QEMU, not a cold boot's
			run grep -F "booting cold" err
			assert_failure
		else
			in_session "$pid"
		fi
		SECONDS=0
		kill -TERM -- -"$pid"
		wait_until 20 ended "$pid" || kill -KILL "$pid"
		st=0
		wait "$pid" || st=$?
		[ "$st" -eq 1 ] || fail "$phase: exit $st: $(cat err)"
		[ "$SECONDS" -le 10 ] || fail "$phase: it took $SECONDS s"
		# said once
		run grep -c "did not finish" err
		assert_output 1
		stopped_by SIGTERM
		if [ "$phase" = boot ]; then
			# the stop did not turn into a cold boot, and no snapshot,
			# whole or half, was left by the saving
			run grep -F "booting cold" err
			assert_failure
			run compgen -G "$AIBOX_IMAGES/default/snapshot-*"
			assert_failure
		fi
	done
}

@test "signals: SIGTERM to the task's whole process group keeps QEMU's last console bytes; no console worker is left" {
	# QEMU's console pipe is held past QEMU's own end by a child of its that
	# ignores SIGTERM (as QEMU's guestfwd commands hold its stderr), whose
	# last bytes come once the group's SIGTERM has been sent
	cat >"$T/fake-bin/qemu-system-x86_64" <<-EOF
		#!/bin/sh
		[ "\$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }
		( trap '' TERM; exec 4>&-; while [ ! -e "$T/go" ]; do sleep 0.1; done; echo "the console's last bytes" ) &
		printf "SSH-2.0-fake\\r\\n" >&4
		exec sleep 300
	EOF
	ANTHROPIC_API_KEY=k setsid aibox task "Do it." >out 2>err &
	pid=$!
	in_session "$pid"
	kill -TERM -- -"$pid"
	touch "$T/go"
	wait_until 20 ended "$pid" || kill -KILL "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 1 ] || fail "exit $st: $(cat err)"
	run grep -c "the console's last bytes" "$dir/console.log"
	assert_output 1
	# nothing of the task's process group is left (the console worker is one)
	wait_until 10 sh -c "! pgrep -g $pid >/dev/null" || fail "left: $(pgrep -a -g "$pid")"
	stopped_by SIGTERM
}

@test "signals: its terminal closing (SIGHUP from the hangup) stops the task as SIGHUP does; nothing is left" {
	# aibox task on a pseudo-terminal of its own; closing the master hangs it up
	mkfifo "$T/hangup"
	python3 - "$T" <<-'PY' &
		import os, pty, sys
		t = sys.argv[1]
		pid, master = pty.fork()
		if pid == 0:
		    os.environ["ANTHROPIC_API_KEY"] = "k"
		    os.execlp("sh", "sh", "-c", 'exec aibox task "Do it." >out 2>err')
		open(t + "/task.pid", "w").write(str(pid))
		open(t + "/hangup").read()
		os.close(master)
		_, st = os.waitpid(pid, 0)
		open(t + "/task.status", "w").write(str(os.waitstatus_to_exitcode(st)))
	PY
	py=$!
	# Python's start and its fork take seconds on a loaded machine: the
	# waits are long, and cost nothing when it is quick
	wait_until 60 file_or_gone "$T/task.pid" "$py"
	[ -s "$T/task.pid" ] || fail "Python's pseudo-terminal did not start"
	in_session "$(cat "$T/task.pid")"
	echo >"$T/hangup"
	wait_until 60 file_or_gone "$T/task.status" "$py"
	[ -s "$T/task.status" ] || fail "aibox task did not end: $(cat err)"
	wait "$py"
	run cat "$T/task.status"
	assert_output 1
	stopped_by SIGHUP
}

@test "signals: SIGSTOP then SIGCONT of the task (its process group, as Ctrl-Z and fg) pauses it; it goes on, and ends as it would" {
	# a process group of its own, as a shell's job
	ANTHROPIC_API_KEY=k setsid aibox task "Do it." >out 2>err &
	pid=$!
	in_session "$pid"
	kill -STOP -- -"$pid"
	sleep 2
	grep -q '^State:.*T' "/proc/$pid/status"
	kill -CONT -- -"$pid"
	sleep 0.5
	# still in its session, QEMU and the proxy too, and nothing said
	run kill -0 "$pid" "$qemu" "$proxy"
	assert_success
	run grep -F "did not finish" err
	assert_failure
	kill -INT "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 1 ] || fail "exit $st: $(cat err)"
	stopped_by SIGINT
}

@test "signals: SIGSTOP of the whole task past its silence limit, then SIGCONT (the host suspended): it ends at once by that limit; nothing is left" {
	# the silence limit made 5 s (test-only), not 300 s; the stop lasts 6 s
	AIBOX_SESSION_IDLE=5s ANTHROPIC_API_KEY=k setsid aibox task "Do it." >out 2>err &
	pid=$!
	in_session "$pid"
	# the whole task: its process group (aibox-task, QEMU) and the proxy, in a session of its own
	kill -STOP -- -"$pid"
	kill -STOP "$proxy"
	SECONDS=0
	sleep 6
	run grep -F "did not finish" err
	assert_failure
	kill -CONT "$proxy"
	kill -CONT -- -"$pid"
	wait_until 5 ended "$pid" || kill -KILL "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 1 ] || fail "exit $st: $(cat err)"
	# at once on the SIGCONT (within 3 s), not a new 5 s later (11 s)
	[ "$SECONDS" -le 9 ] || fail "it took $SECONDS s"
	ended_with "the VM sent nothing for 5 s" "not finished"
}

@test "signals: AIBOX_SESSION_IDLE that is not a duration of 1s to 5m is refused in words" {
	for v in 3 6m; do
		AIBOX_SESSION_IDLE=$v ANTHROPIC_API_KEY=k run --separate-stderr aibox task "Do it."
		assert_failure 2
		case $v in
		3) assert_equal "$stderr" "aibox-task: AIBOX_SESSION_IDLE: '3' is not a duration: missing unit (use h, m, s or ms)" ;;
		*) assert_equal "$stderr" "aibox-task: AIBOX_SESSION_IDLE: '$v' is not between 1s and 5m" ;;
		esac
	done
	# refused before any task folder is made
	run ls "$AIBOX_HOME/projects/repo/tasks"
	assert_success
	assert_output ""
}

@test "signals: SIGINT, SIGTERM and SIGHUP while the start bundle is written end aibox-task and git with it; nothing is left, tasks list says not finished, clean cleans" {
	# git's pack-objects held before it starts, by a bash builtin (no child
	# of its own to leave behind), until the fifo is written or 60 s pass
	mkfifo "$T/go"
	real_git=$(command -v git)
	cat >"$T/fake-bin/git" <<-SH
		#!/bin/bash
		case " \$* " in
		*" pack-objects "*) echo \$\$ >"$T/packing"; read -r -t 60 _ <>"$T/go" ;;
		esac
		exec "$real_git" "\$@"
	SH
	chmod +x "$T/fake-bin/git"
	for sig in INT TERM HUP; do
		rm -f "$T/packing"
		# a background job of a script starts with SIGINT ignored; a
		# terminal's job does not
		AIBOX_SESSION_IDLE=3s ANTHROPIC_API_KEY=k env --default-signal=INT aibox task "Do it." >out 2>err &
		pid=$!
		wait_until 30 test -s "$T/packing" || fail "no pack-objects: $(cat err)"
		git_pid=$(cat "$T/packing")
		dir=$(cat out)
		kill -"$sig" "$pid"
		st=0
		wait "$pid" || st=$?
		# the bundle writer stops git, removes its temporary folder and
		# lets the signal's default action end aibox-task
		case $sig in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; esac
		[ "$st" -eq "$want" ] || fail "SIG$sig: exit $st: $(cat err)"
		# git, its child, was stopped (and would die with it: its parent-death signal)
		wait_until 10 ended "$git_pid" || fail "SIG$sig: $(ps -o pid,args -p "$git_pid") is left running"
		run pgrep -P "$pid"
		assert_failure
		local id=${dir: -6}
		# no start bundle, whole or half, no temporary pack, no fetch
		assert_file_not_exists "$dir/start.bundle"
		run compgen -G "$dir/.start-bundle.*"
		assert_failure
		run grep -F "fetch them with" err
		assert_failure
		# it died before its record was opened: not finished (not "killed",
		# which needs the empty record of a task killed once it started)
		run aibox tasks list
		assert_success
		assert_line --regexp "^$id +not finished "
		run aibox tasks show "$id"
		assert_success
		refute_output --partial "fetch them with"
		run aibox tasks clean --all
		assert_success
		assert_line --partial "removed $dir/ and $(basename "$dir").lock"
		assert_dir_not_exists "$dir"
	done
}
