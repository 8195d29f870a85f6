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
	wait_until 30 pgrep -P "$1" -x sleep >/dev/null || fail "no QEMU: $(cat err)"
	dir=$(cat out)
	wait_until 30 grep -q '^boot ' "$dir/aibox.log" || fail "no session: $(cat err)"
	qemu=$(pgrep -P "$1" -x sleep)
	proxy=$(pgrep -P "$1" -x aibox-proxy)
	[ -n "$proxy" ] || fail "no proxy"
}

# stopped_by SIG: the task ended as one stopped by SIG: its line, exit 1,
# nothing left running, tasks list says killed, no fetch, clean cleans.
stopped_by() {
	local id=${dir: -6} p
	run grep -F "aibox[$id]: the task did not finish: the VM was stopped by $1" err
	assert_success
	run grep -F "fetch them with" err
	assert_failure
	for p in $qemu $proxy; do
		wait_until 10 ended "$p" || fail "$(ps -o pid,args -p "$p") is left running"
	done
	run aibox tasks list
	assert_success
	assert_line --regexp "^$id +killed "
	run aibox tasks clean --all
	assert_success
	assert_line --partial "removed $dir/ and $(basename "$dir").lock"
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
	wait_until 10 test -s "$T/task.pid"
	in_session "$(cat "$T/task.pid")"
	echo >"$T/hangup"
	wait_until 20 test -s "$T/task.status" || fail "aibox task did not end: $(cat err)"
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
