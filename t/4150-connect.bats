#!/usr/bin/env bats
# aibox-connect, which QEMU runs for each connection the guest makes to the
# proxy forward: its cap on the copies that run at once (--max), held as
# locks on bytes of SOCKET.slots, and the refusal's line in proxy.log.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	aibox-proxy --listen "unix:$T/p.sock" --log "$T/proxy.log" --ready-fd 3 3>"$T/ready" \
		2>"$T/proxy.err" &
	PROXY_PID=$!
	wait_until 5 ready_or_gone "$T/ready" "$PROXY_PID"
	grep -q '^ready' "$T/ready"
	HOLDERS=()
}

teardown() {
	local p
	for p in "${HOLDERS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	kill "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
	common_teardown
}

# hold N: aibox-connect --max 2 on the proxy with stdin a fifo that stays open
# (the guest's connection, idle), its pid in HOLDERS.
hold() {
	mkfifo "$T/in$1"
	aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" <"$T/in$1" >/dev/null &
	HOLDERS+=($!)
	eval "exec $((5 + $1))>\"\$T/in$1\""
}

# both_held: the two holders each hold their slot (a lock in /proc/locks).
both_held() {
	[ "$(grep -cE "POSIX +ADVISORY +WRITE +(${HOLDERS[0]}|${HOLDERS[1]}) " /proc/locks)" -eq 2 ]
}

@test "connect: --max caps the copies at once; one more closes at once and says so in proxy.log" {
	hold 1
	hold 2
	# once both hold their slot, a third is refused
	wait_until 10 both_held
	run timeout 10 aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" </dev/null
	assert_failure 1
	assert_output ''
	assert_file_exists "$T/p.sock.slots"
	run grep -c 'too many connections' "$T/proxy.log"
	[ "$output" -ge 1 ]
	run tail -1 "$T/proxy.log"
	assert_output --regexp '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z refused - \(too many connections from the VM: 2 at once; 1 refused so far, logged at powers of two\) sent=0 received=0 duration=0\.000s$'
	# a copy killed with SIGKILL frees its slot: the next one gets through
	kill -KILL "${HOLDERS[0]}"
	wait "${HOLDERS[0]}" 2>/dev/null || true
	run --separate-stderr timeout 10 aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" \
		< <(printf 'GET http://not-allowed.example/ HTTP/1.1\r\nHost: x\r\n\r\n')
	assert_success
	[[ "$output" == "HTTP/1.1 403"* ]]
	# without --max there is no cap
	run timeout 10 aibox-connect "$T/p.sock" </dev/null
	assert_success
}

@test "connect: a guest that keeps trying adds one line to proxy.log per doubling of its refusals" {
	hold 1
	hold 2
	wait_until 10 both_held
	for i in $(seq 40); do
		run timeout 10 aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" </dev/null
		assert_failure 1
		assert_output ''
	done
	# refusals 1, 2, 4, 8, 16 and 32 are logged, each with the count so far
	run grep -o '; [0-9]* refused so far' "$T/proxy.log"
	assert_output "$(printf '; %s refused so far\n' 1 2 4 8 16 32)"
}

@test "connect: a refusal's line honours proxy.log's cap, counting what the file holds" {
	hold 1
	hold 2
	wait_until 10 both_held
	# The log just under the proxy's cap (16 MiB) less its reserve: a line still fits.
	truncate -s $((16 * 1024 * 1024 - 512 - 300)) "$T/proxy.log"
	run timeout 10 aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" </dev/null
	assert_failure 1
	assert_output '' # its words go to proxy.log, read below
	run tail -c 300 "$T/proxy.log"
	assert_success
	assert_output --partial "; 1 refused so far"
	# At the cap: the next logged refusal (the 2nd) is left out.
	truncate -s $((16 * 1024 * 1024 - 512)) "$T/proxy.log"
	run timeout 10 aibox-connect --max 2 --log "$T/proxy.log" "$T/p.sock" </dev/null
	assert_failure 1
	assert_output '' # its words go to proxy.log, read below
	run stat -c %s "$T/proxy.log"
	assert_success
	assert_output $((16 * 1024 * 1024 - 512))
}

@test "connect: a guest that keeps its connection open after the proxy closed it costs no CPU" {
	# connect-guest's own proxy (not the setup's) closes at once; the guest's end stays open
	run "$BATS_TEST_DIRNAME/connect-guest" proxy-closes "$T/own.sock" "$(command -v aibox-connect)"
	assert_success
	[[ $output == "running "* || $output == "ended "* ]]
	[ "${output#* }" -lt 200 ] # ms of CPU in 2 s; a busy loop takes about 2000
}

@test "connect: a guest that leaves before the proxy answers costs no CPU" {
	run "$BATS_TEST_DIRNAME/connect-guest" guest-leaves "$T/own.sock" "$(command -v aibox-connect)"
	assert_success
	# its copy ends, and with it the connection to the proxy (docs/task-host.md)
	[[ $output == "ended "* ]]
	[ "${output#* }" -lt 200 ] # ms of CPU in 2 s; a busy loop takes about 2000
}

@test "connect: bad options are usage errors" {
	for args in "--max 0 s" "--max x s" "--log f s" "--max 1" ""; do
		run aibox-connect $args
		assert_failure 2
		[[ $output == "aibox-connect: --max: '"* || $output == "usage: aibox-connect "* ]]
	done
	run aibox-connect --bogus 1 s
	assert_failure 2
	assert_line --index 0 "aibox-connect: unknown option '--bogus'"
	assert_line --index 1 --partial "usage: aibox-connect "
	run aibox-connect --max 100001 s
	assert_failure 2
	assert_output "aibox-connect: --max: '100001' is not a number from 1 to 100000"
}

@test "connect: an error of its own never reaches the guest, whose connection is its stderr too" {
	# QEMU's guestfwd gives the copy one socket as stdin, stdout and stderr:
	# "cannot connect to '<the host's path>'" would tell the guest that path
	run "$BATS_TEST_DIRNAME/connect-guest" no-proxy "$T/none.sock" "$(command -v aibox-connect)"
	assert_success
	assert_line --index 0 "got 0 b''"
	assert_line --index 1 --regexp "^exit [1-9][0-9]*\$"
	refute_output --partial "$T"
}
