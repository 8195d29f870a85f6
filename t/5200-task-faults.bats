#!/usr/bin/env bats
# aibox task's fault paths end to end, in real VMs (docs/task-host.md).  A
# guest that sends results aibox must refuse, or floods stderr:
# a test image (t/lib-task.bash's fault_image, the real image whose SSH
# session runs a script of the test instead of the init's task command).  A
# task that times out: the real image, real Claude Code, t/fake-api stalling.
# aibox-task killed with SIGKILL.  Two tasks of one project at once with
# `aibox tasks clean` meanwhile: the init's real task with t/fake-claude as
# Claude Code.  Every test runs VMs under TCG: few tests, short VMs, each
# restored from a snapshot (the boot is not what they check).
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

# The test image of every test but the timeout's, made once: its SSH session
# runs the test's own script, $T/fault/session, which the task mounts at
# /fault (start_fault), or else the init's task as ever; its Claude Code is
# t/fake-claude.  Its snapshot is saved here, so that each test's VM is
# restored from it as a task's on the real image is.
setup_file() {
	common_setup
	export FAULT_T=$T FAULT_STORE=$T/images
	vm_image
	mkdir "$T/shared"
	cat >"$T/shared/session" <<'EOF'
#!/bin/bash
if [ -f /fault/session ]; then
	exec /bin/bash /fault/session
fi
exec /usr/lib/aibox/aibox-init session
EOF
	cp "$BATS_TEST_DIRNAME/fake-claude" "$T/shared/claude"
	fault_image "$T/shared" "$FAULT_STORE"
	# make check-cold's tasks boot cold: nothing to save
	[ "${AIBOX_SNAPSHOT:-}" = 0 ] || fault_snapshot "$FAULT_STORE"
}

teardown_file() {
	T=$FAULT_T common_teardown
}

setup() {
	task_setup
	START=$(git rev-parse HEAD)
}

teardown() {
	# a failed test shows what the task printed and logged
	[ -n "${BATS_TEST_COMPLETED:-}" ] || [ -z "${T:-}" ] || show "$T"/err*
	if [ -n "${PORTS_PID:-}" ]; then
		kill "$PORTS_PID" 2>/dev/null
		wait "$PORTS_PID" 2>/dev/null
	fi
	task_teardown
}

# start_task ARGS...: aibox task in the background, its output in $T/out and
# $T/err; TASK_PID (aibox execs aibox-task: the same pid), QEMU and PROXY.
# With ERR_PIPE=1 its stderr is a pipe that cat copies to $T/err (a regular
# file as stderr keeps only 16 MiB of the VM's lines: docs/task-host.md),
# CAT_PID that cat, which finish_task waits for.
start_task() {
	if [ -n "${ERR_PIPE:-}" ]; then
		mkfifo "$T/err.fifo"
		cat "$T/err.fifo" >"$T/err" &
		CAT_PID=$!
		aibox task "$@" >"$T/out" 2>"$T/err.fifo" &
	else
		aibox task "$@" >"$T/out" 2>"$T/err" &
	fi
	TASK_PID=$!
	QEMU=$(wait_child "$TASK_PID" "$QEMU_VM") || QEMU=
	PROXY=$(pgrep -P "$TASK_PID" -f aibox-proxy) || PROXY=
}

# finish_task SECONDS: wait for the task at most SECONDS (then SIGKILL it, and
# the test fails); its exit code in status, its folder in DIR, its id in ID.
finish_task() {
	wait_until "$1" gone "$TASK_PID" || kill -KILL "$TASK_PID"
	wait "$TASK_PID" && status=0 || status=$?
	TASK_PID=
	if [ -n "${CAT_PID:-}" ]; then
		wait "$CAT_PID" || true
		CAT_PID=
	fi
	DIR=$(task_dir)
	ID=${DIR: -6}
}

# start_fault PROMPT: start_task on the test image, $T/fault (the test's
# session script and files) mounted at /fault.
start_fault() {
	printf 'mounts:\n  - host: %s\n    vm: /fault\n' "$T/fault" >>"$AIBOX_HOME/projects/repo/config.yaml"
	AIBOX_IMAGES=$FAULT_STORE start_task "$1"
}

# fault_task: run a task on the test image with $T/fault (its session
# script and files), bounded to 240 s.
fault_task() {
	start_fault "Misbehave."
	[ -n "$QEMU" ]
	[ -n "$PROXY" ]
	finish_task 240
}

# session SCRIPT: the test image's session: the common head, then SCRIPT.
session() {
	mkdir -p "$T/fault"
	printf '%s%s\n' "$FAULT_SESSION_HEAD" "$1" >"$T/fault/session"
}

# mktar ENTRY...: t/mktar into $T/fault/results.tar.
mktar() {
	mkdir -p "$T/fault"
	"$BATS_TEST_DIRNAME/mktar" "$@" >"$T/fault/results.tar"
}

# A session that sends results.tar and then hangs: only aibox can end it.
# sshd sends a command's stdout and stderr as it reads them, so a line the
# guest sends a second before its results arrives before them; aibox must
# still print it.
SEND_AND_HANG='echo "fault: sending the crafted results" >&2
sleep 1
cat "$F/results.tar"
sleep 600'

# assert_refused REASON: the task ended with exit 1 saying the task did not
# finish for REASON (a fixed string), printed no fetch command, and left
# nothing running: QEMU, the proxy, anything naming the task folder; its lock is free.
assert_refused() {
	[ "$status" -eq 1 ]
	grep -qF "aibox[$ID]: the task did not finish: $1" "$T/err"
	grep -qF "vm[$ID]: fault: sending the crafted results" "$T/err"
	run grep -F "fetch them with" "$T/err"
	assert_failure
	run kill -0 "$QEMU"
	assert_failure
	run kill -0 "$PROXY"
	assert_failure
	run pgrep -f "$DIR"
	assert_failure
	flock -n "$DIR.lock" true
	grep -q '^total .* exit 1$' "$DIR/aibox.log"
}

# A valid result.json for START..END with changes.
result_json() {
	cat <<EOF
{"version": 1,
 "steps": [{"name": "clone", "status": "ok", "seconds": 1.0, "exit_code": null},
           {"name": "claude", "status": "ok", "seconds": 2.0, "exit_code": 0},
           {"name": "commit", "status": "ok", "seconds": 0.5, "exit_code": null},
           {"name": "bundle", "status": "ok", "seconds": 0.5, "exit_code": null}],
 "failed_step": null,
 "claude": {"exit_code": 0, "num_turns": 2, "duration_ms": 2000, "total_cost_usd": 0.01,
            "ended_by": "completed", "last_message": "I committed it."},
 "start_commit": "$1", "end_commit": "$2", "changes": true}
EOF
}

@test "task faults: an extra file after a good one is refused, the good one kept; a stderr flood keeps memory bounded" {
	printf '{"type":"system"}\n{"type":"result"}\n' >"$T/transcript"
	mktar "transcript.jsonl:file=$T/transcript" notes.txt:size=10
	# 24 MiB in one line, then 24 MiB of short lines, then the results
	session 'head -c 24M /dev/zero | tr "\0" x >&2
echo >&2
yes "$(head -c 100 /dev/zero | tr "\0" y)" | head -c 24M >&2
echo >&2
echo "fault: flood done" >&2
'"$SEND_AND_HANG"
	# A sanitizer build keeps freed memory in quarantine (256 MiB by
	# default): a small one, so what is measured is aibox-task's own.  Its
	# stderr a pipe, which gets every line of the flood.
	ERR_PIPE=1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4 \
		start_fault "Misbehave."
	[ -n "$QEMU" ]
	# aibox-task's peak memory once the flood has begun, and at the end
	hwm0= hwm=0
	for i in $(seq 480); do
		h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$TASK_PID/status" 2>/dev/null) || break
		[ -n "$h" ] && hwm=$h
		if [ -z "$hwm0" ] && grep -q "vm\[.*\]: xxxxxxxxxx" "$T/err"; then
			hwm0=$hwm
		fi
		sleep 0.5
	done
	finish_task 60
	assert_refused "unexpected file 'notes.txt'"
	cmp "$T/transcript" "$DIR/transcript.jsonl"
	# the flood came through as vm lines, the long line in pieces; all of
	# it, though aibox stopped reading on the refused results, which came
	# after it (behind megabytes of error output libssh2 had queued)
	grep -qF "vm[$ID]: fault: flood done" "$T/err"
	[ "$(grep -c "vm\[$ID\]: y\{100\}$" "$T/err")" -gt 100000 ]
	[ "$(grep -c "vm\[$ID\]: x\{2000\}$" "$T/err")" -gt 10000 ]
	# 48 MiB went through; aibox-task's memory grew by far less than that
	echo "# aibox-task's VmHWM: ${hwm0:-?} kB as the flood began, ${hwm} kB at the end" >&3
	[ -n "$hwm0" ]
	[ "$hwm" -gt 0 ]
	[ $((hwm - hwm0)) -lt $((24 * 1024)) ]
}

@test "task faults: every host the VM connected to is printed, past 64, from the proxy's record" {
	# 70 ports of the host machine, each accepting and closing: 70 allowed hosts
	"$BATS_TEST_DIRNAME/accept-close" 70 "$T/ports" &
	PORTS_PID=$!
	wait_until 10 test -s "$T/ports"
	{ echo "allow:"; sed 's/^/  - localhost:/' "$T/ports"; } >>"$AIBOX_HOME/projects/repo/config.yaml"
	mkdir -p "$T/fault"
	cp "$T/ports" "$T/fault/ports"
	result_json "$START" "$START" | sed 's/"changes": true/"changes": false/' >"$T/result.json"
	mktar "result.json:file=$T/result.json"
	# through the proxy: a CONNECT to each port, and refusals in between
	session 'python3 - "$F/ports" <<PY
import socket, sys
for i, p in enumerate(open(sys.argv[1]).read().split()):
    for req in (b"CONNECT localhost:%s HTTP/1.1\r\n\r\n" % p.encode(),
                b"GET http://evil%d.test/ HTTP/1.1\r\nHost: evil%d.test\r\n\r\n" % (i, i)):
        s = socket.create_connection(("10.0.2.100", 3128), timeout=30)
        s.sendall(req)
        while s.recv(65536):
            pass
        s.close()
PY
echo "fault: connections done" >&2
cat "$F/results.tar"'
	fault_task
	kill "$PORTS_PID"
	wait "$PORTS_PID" || true
	grep -qF "vm[$ID]: fault: connections done" "$T/err"
	[ "$(grep -c "^[^ ]* refused evil[0-9]*.test:80 " "$DIR/proxy.log")" = 70 ]
	for p in $(cat "$T/ports"); do
		grep -qF "aibox[$ID]: the VM connected to localhost:$p" "$T/err" ||
			{ echo "localhost:$p is missing" >&2; false; }
	done
	[ "$(grep -c "aibox\[$ID\]: the VM connected to " "$T/err")" = 70 ]
	run grep -F "evil" "$T/err"
	assert_failure
	run grep -F "not known" "$T/err"
	assert_failure
}

@test "task faults: a symbolic link is refused" {
	echo "log line" >"$T/log"
	mktar "vm.log:file=$T/log" "changes.bundle:type=2,link=/etc/passwd"
	session "$SEND_AND_HANG"
	fault_task
	assert_refused "'changes.bundle' is a "
	cmp "$T/log" "$DIR/vm.log"
	[ ! -s "$DIR/changes.bundle" ]
	[ ! -L "$DIR/changes.bundle" ]
}

@test "task faults: a file sent twice is refused, the first copy kept" {
	echo "first" >"$T/first"
	echo "second" >"$T/second"
	mktar "vm.log:file=$T/first" "vm.log:file=$T/second"
	session "$SEND_AND_HANG"
	fault_task
	assert_refused "'vm.log' sent twice"
	cmp "$T/first" "$DIR/vm.log"
}

@test "task faults: a file over its size cap is refused" {
	echo "log line" >"$T/log"
	mktar "vm.log:file=$T/log" result.json:size=$((1024 * 1024 + 1))
	session "$SEND_AND_HANG"
	fault_task
	assert_refused "'result.json' over its size limit of 1048576 bytes"
	cmp "$T/log" "$DIR/vm.log"
	[ ! -s "$DIR/result.json" ]
}

# craft_bundle NAME REVS...: a bundle made by git in a clone of the repo with
# one commit on aibox/task (END) and the branch extra at the same commit.
craft_bundle() {
	local name=$1
	shift
	git clone -q "$T/repo" "$T/craft"
	git -C "$T/craft" checkout -q -b aibox/task
	echo change >"$T/craft/change.txt"
	git -C "$T/craft" add change.txt
	git -C "$T/craft" commit -q -m change
	git -C "$T/craft" branch extra
	END=$(git -C "$T/craft" rev-parse HEAD)
	git -C "$T/craft" bundle create -q "$T/$name" "$@"
}

# good_results BUNDLE: a well-formed results tar with BUNDLE, and a session
# that sends it and ends properly.
good_results() {
	result_json "$START" "$END" >"$T/result.json"
	echo "log line" >"$T/log"
	mktar "changes.bundle:file=$1" "vm.log:file=$T/log" "result.json:file=$T/result.json"
	session 'echo "fault: sending the crafted results" >&2
cat "$F/results.tar"'
}

@test "task faults: a changes.bundle with a second ref is refused, no fetch command" {
	craft_bundle two.bundle aibox/task extra "^$START"
	good_results "$T/two.bundle"
	fault_task
	assert_refused "changes.bundle refused: unexpected ref 'refs/heads/extra'"
	# what came back stays, as it came
	cmp "$T/two.bundle" "$DIR/changes.bundle"
	cmp "$T/result.json" "$DIR/result.json"
	grep -qF "aibox[$ID]: Claude Code exited with 0" "$T/err"
	# the VM's word that there are changes is not taken for none
	grep -qF "aibox[$ID]: nothing to fetch" "$T/err"
	run grep -F "no changes" "$T/err"
	assert_failure
}

@test "task faults: a changes.bundle that inflates to far more than its size is refused within the bound" {
	# 510 KiB: a blob of 512 MiB of zeros and an OFS_DELTA on it
	"$BATS_TEST_DIRNAME/make-bundle-fixtures" --bomb ofs-delta 512 "$T/bomb.bundle"
	END=1111111111111111111111111111111111111111
	good_results "$T/bomb.bundle"
	# a small sanitizer quarantine: what is measured is the checker's own memory
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1
	fault_task
	assert_refused "changes.bundle refused: pack: object 0: 536870912 bytes inflated, over the limit of 16777216 for one object (max-object)"
	cmp "$T/bomb.bundle" "$DIR/changes.bundle"
	# the checker's cost, as aibox-task logged it: within 64 MiB and 10 s
	line=$(grep '^checker: ' "$DIR/aibox.log")
	echo "# $line" >&3
	[[ "$line" =~ ^"checker: cpu "([0-9.]+)"s, peak "([0-9]+)" KiB"$ ]]
	awk -v c="${BASH_REMATCH[1]}" 'BEGIN { exit !(c < 10) }'
	[ "${BASH_REMATCH[2]}" -gt 0 ]
	[ "${BASH_REMATCH[2]}" -lt $((64 * 1024)) ]
}

@test "task faults: a changes.bundle that needs another commit than the start is refused" {
	craft_bundle other.bundle aibox/task "^$START~1"
	good_results "$T/other.bundle"
	fault_task
	assert_refused "changes.bundle refused: prerequisite $(git rev-parse "$START~1") is not a given base"
	cmp "$T/other.bundle" "$DIR/changes.bundle"
}

@test "task faults: SIGKILL to aibox-task takes QEMU, the proxy and the guest's connections with it; tasks clean then sees it ended" {
	# the session holds a connection to the proxy open, then hangs.  QEMU's
	# slirp starts aibox-connect for the connection double-forked (GLib's
	# g_spawn_async): its parent is init, not QEMU, so no death signal
	# reaches it; it must end when its two sides, QEMU and the proxy, do.
	session 'exec 3<>/dev/tcp/10.0.2.100/3128
echo "fault: connected" >&2
sleep 600'
	start_fault "Hang."
	[ -n "$QEMU" ]
	[ -n "$PROXY" ]
	dir=$(task_dir)
	wait_until 120 pgrep -f "aibox-connect .*$dir/proxy.sock" >/dev/null
	connect=$(pgrep -f "aibox-connect .*$dir/proxy.sock")
	run flock -n "$dir.lock" true
	assert_failure
	kill -KILL "$TASK_PID"
	wait "$TASK_PID" || true
	TASK_PID=
	wait_until 5 gone "$QEMU" "$PROXY" "$connect" || { ps -f -p "$QEMU,$PROXY,$connect" || true; false; }
	run pgrep -f "$dir"
	assert_failure
	flock -n "$dir.lock" true
	# the task has ended for aibox tasks clean: its start.bundle goes
	[ -f "$dir/start.bundle" ]
	run aibox tasks clean
	assert_success
	assert_line --partial "removed $dir/start.bundle"
	[ ! -e "$dir/start.bundle" ]
	[ -f "$dir/prompt.txt" ]
}

@test "task faults: a task that times out ends by timeout with exit 1 and its VM stopped" {
	api '{"turns": [{"stall": 600}], "require_key": "'"$KEY"'"}'
	t0=$(date +%s)
	# the limit only has to pass (it bounds the claude step alone): the
	# stop and the results after it are the same at 2 s as at 60
	start_task --timeout 2s "Wait."
	[ -n "$QEMU" ]
	finish_task 300
	[ "$status" -eq 1 ]
	run cat "$T/err"
	assert_output --partial "aibox[$ID]: the step claude timed out"
	assert_output --partial "ended by timeout"
	assert_output --partial "aibox[$ID]: the task did not finish"
	# the init stopped Claude Code: the VM ended long before the host's limit
	# (the timeout and 25 minutes), with the results sent
	[ $(($(date +%s) - t0)) -lt 300 ]
	grep -q '"ended_by": *"timeout"' "$DIR/result.json"
	run kill -0 "$QEMU"
	assert_failure
	run pgrep -f "$DIR"
	assert_failure
}

@test "task faults: two tasks of one project at once each end with their own commit; tasks clean meanwhile leaves both" {
	# the test image without a session of the test's: the init's task as
	# ever, with t/fake-claude as Claude Code (real Claude Code runs in
	# t/5100; two at once under TCG take minutes)
	export AIBOX_IMAGES=$FAULT_STORE
	aibox task "commit task.txt one" >"$T/out1" 2>"$T/err1" &
	p1=$!
	aibox task "commit task.txt two" >"$T/out2" 2>"$T/err2" &
	p2=$!
	TASK_PIDS="$p1 $p2"
	q1=$(wait_child "$p1" "$QEMU_VM")
	q2=$(wait_child "$p2" "$QEMU_VM")
	run aibox tasks clean --all
	assert_success
	assert_output --partial "left 2 running tasks alone"
	d1=$(cat "$T/out1")
	d2=$(cat "$T/out2")
	[ "$d1" != "$d2" ]
	[ -f "$d1/start.bundle" ]
	[ -f "$d2/start.bundle" ]
	wait "$p1" && s1=0 || s1=$?
	wait "$p2" && s2=0 || s2=$?
	TASK_PIDS=
	[ "$s1" -eq 0 ]
	[ "$s2" -eq 0 ]
	# each fetch command brings its own task's commit
	for n in 1 2; do
		dir=$(cat "$T/out$n")
		fetch=$(grep -A1 'fetch them with' "$T/err$n" | tail -1 | sed 's/^.*]:  *//')
		eval "$fetch"
		branch=aibox/task-$(basename "$dir")
		assert_equal "$(git rev-list --count "HEAD..$branch")" 1
		assert_equal "$(git show "$branch:task.txt")" "$([ $n = 1 ] && echo one || echo two)"
	done
	run kill -0 "$q1"
	assert_failure
	run kill -0 "$q2"
	assert_failure
	run aibox tasks clean
	assert_success
	[ ! -e "$d1/start.bundle" ]
	[ ! -e "$d2/start.bundle" ]
}
