#!/usr/bin/env bats
# The day's spend ledger (common/config/usage.c, docs/budget.md) against a
# kill at any point of its write, and on the disk once a cost is added
# (docs/reliability.md).  test-common ledger-add adds 1 nano-USD at a time
# through usage_ledger_sync(), as the proxy does, printing each total; each
# call is given the moment setup read (its day's ledger), so that a test that
# runs across midnight adds to one ledger still.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	mkdir project
	now=$(date +%s)
	ledger=$T/project/spend/$(date -d "@$now" +%F)
}

@test "ledger: kill -9 in the middle of its writes leaves it valid, each add counted exactly once" {
	for i in $(seq 8); do
		test-common ledger-add "$T/project" 0 "$now" >"out.$i" &
		pid=$!
		wait_until 10 test -s "out.$i"
		sleep "0.0$((RANDOM % 10))"
		kill -KILL "$pid"
		wait "$pid" || true
		# the last whole line it printed: an add that returned
		if [ -z "$(tail -c1 "out.$i")" ]; then
			printed=$(tail -n1 "out.$i")
		else
			printed=$(tail -n2 "out.$i" | head -n1)
		fi
		[ -n "$printed" ] || fail "round $i printed nothing whole: $(tail -c 100 "out.$i")"
		total=$((10#$(head -1 "$ledger")))
		# the add it was killed in is in the total whole, or not at all
		[ "$total" -eq "$printed" ] || [ "$total" -eq $((printed + 1)) ] ||
			fail "round $i: the ledger says $total, the last add returned $printed"
		# whole lines only, and the next add reads it
		size=$(stat -c %s "$ledger")
		[ $(((size - 21) % 59)) -eq 0 ] || fail "round $i: a ledger of $size bytes"
		run test-common ledger-add "$T/project" 1 "$now"
		assert_success
		assert_output "$((total + 1))"
	done
}

@test "ledger: each added cost is fdatasync'ed before the call returns, and a new day's file has its folder fsynced" {
	command -v strace >/dev/null || skip "strace is not installed"
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=fsync,fdatasync,openat test-common ledger-add "$T/project" 3 "$now"
	# the day's file made, then its folder synced
	run grep -cE '^fsync\(' trace
	assert_output 1
	run grep -cE '^fdatasync\(' trace
	assert_output 3
	# the file there already: no folder sync
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=fsync,fdatasync test-common ledger-add "$T/project" 1 "$now"
	run grep -cE '^fsync\(' trace
	assert_output 0
	run grep -cE '^fdatasync\(' trace
	assert_output 1
	[ "$(head -1 "$ledger")" = "$(printf '%020d' 4)" ]
}

@test "ledger: the day's price flags are a line of their own, fdatasync'ed when they change" {
	command -v strace >/dev/null || skip "strace is not installed"
	# 7 adds; from the 4th the flags say US-only inference, from the 6th the Priority Tier too
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=fdatasync test-common ledger-add "$T/project" 7 "$now"
	run grep -cE '^fdatasync\(' trace
	assert_output 9
	run tail -n +2 "$ledger"
	assert_line 'ffffffffffff0003 00000000000000000000 18446744073709551615'
	size=$(stat -c %s "$ledger")
	[ $(((size - 21) % 59)) -eq 0 ]
}

@test "ledger: the user's total is raised to the projects' sum only when below it, synced, and a bad ledger is not reset" {
	command -v strace >/dev/null || skip "strace is not installed"
	test-common ledger-add "$T/project" 2 "$now" >/dev/null
	# below: raised, and on the disk before the call returns
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=fdatasync test-common ledger-raise "$T/project" 1000 "$now" >out
	[ "$(cat out)" = 1000 ]
	run grep -cE '^fdatasync\(' trace
	assert_output 1
	# above (a project's spend removed since): kept, nothing written
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=fdatasync,pwrite64 test-common ledger-raise "$T/project" 10 "$now" >out
	[ "$(cat out)" = 1000 ]
	run grep -cE '^(fdatasync|pwrite64)\(' trace
	assert_output 0
	# its reservation line is kept as it was
	[ "$(head -1 "$ledger")" = "$(printf '%020d' 1000)" ]
	[ $((($(stat -c %s "$ledger") - 21) % 59)) -eq 0 ]
	printf 'garbage\n' >"$ledger"
	run test-common ledger-raise "$T/project" 10 "$now"
	assert_failure 1
	assert_output "error: Invalid argument"
	[ "$(cat "$ledger")" = garbage ]
}
