#!/usr/bin/env bats
# Go-style durations; task ids, folder names and lock names.
load lib-common

@test "duration: Go's forms are read to the millisecond" {
	for pair in "720h 2592000000 720h0m0s" "90m 5400000 1h30m0s" "1h30m 5400000 1h30m0s" \
		"45s 45000 45s" "1h0m30s 3630000 1h0m30s" "500ms 500 500ms" "1.5h 5400000 1h30m0s" \
		"2m0.25s 120250 2m0.25s" "0 0 0s" "0s 0 0s" "1h1h 7200000 2h0m0s"; do
		set -- $pair
		run test-found duration "$1"
		assert_success
		assert_output "$2 $3"
	done
}

@test "duration: empty, negative, unitless, unknown units and overflow are refused" {
	run test-found duration ""
	assert_failure 1
	assert_output "error empty duration (EINVAL)"
	run test-found duration -5m
	assert_output "error a duration cannot be negative (EINVAL)"
	run test-found duration +5m
	assert_output "error a duration takes no sign (EINVAL)"
	run test-found duration 30
	assert_output "error missing unit (use h, m, s or ms) (EINVAL)"
	run test-found duration 1h30
	assert_output "error missing unit (use h, m, s or ms) (EINVAL)"
	run test-found duration 7d
	assert_output "error unknown unit 'd' (use h, m, s or ms) (EINVAL)"
	run test-found duration 5us
	assert_output "error unknown unit 'us' (use h, m, s or ms) (EINVAL)"
	run test-found duration "1 h"
	assert_output --partial "unknown unit ' h'"
	run test-found duration 0.0001s
	assert_output "error finer than a millisecond (EINVAL)"
	run test-found duration h
	assert_output "error expected a number at 'h' (EINVAL)"
	run test-found duration .h
	assert_output "error a point needs digits (EINVAL)"
	run test-found duration 99999999999999999999h
	assert_output --partial "(ERANGE)"
	run test-found duration 2562048h
	assert_output --partial "(ERANGE)"
	run test-found duration 2562047h
	assert_success
}

@test "task id: 6 lowercase hex digits, different each time" {
	run test-found task-id
	assert_output --regexp '^[0-9a-f]{6}$'
	a=$output
	ids=$(for i in 1 2 3 4 5 6 7 8; do test-found task-id; done | sort -u | wc -l)
	[ "$ids" -ge 7 ] || fail "ids repeat: $ids distinct of 8"
	[ "$a" != "" ]
}

@test "task name: local start time and id, parsed back to the same time" {
	run env TZ=UTC test-found task-name 1791392956 259e07
	assert_output "20261007-170916-259e07"
	run env TZ='CET-1CEST,M3.5.0,M10.5.0/3' test-found task-name 1791392956 259e07
	assert_output "20261007-190916-259e07"
	run env TZ='CET-1CEST,M3.5.0,M10.5.0/3' test-found task-parse 20261007-190916-259e07
	assert_output "1791392956 259e07"
	run env TZ=UTC test-found task-parse 20261007-170916-259e07
	assert_output "1791392956 259e07"
	run test-found task-name 1791392956 259E07
	assert_failure
	assert_output "error Invalid argument"
}

@test "task name: anything but YYYYMMDD-HHMMSS-<6 hex> is not a task" {
	for bad in 20261007-170916-259E07 20261007-170916-259e0 20261007-170916-259e077 \
		20261307-170916-259e07 20261000-170916-259e07 20260230-170916-259e07 \
		20261007-240000-259e07 20261007-176000-259e07 2026100-1170916-259e07 \
		20261007_170916-259e07 x0261007-170916-259e07 ../../../etc-passwd \
		"20261007-170916-259e07 " "" .lock 20261007-170916-259e07.lock; do
		run test-found task-parse "$bad"
		assert_failure
		assert_output "invalid"
	done
	run test-found task-parse 20240229-000000-abcdef
	assert_success
	run test-found task-parse 20230229-000000-abcdef
	assert_failure
	assert_output invalid
}

@test "task lock names: <folder>.lock only" {
	run test-found task-lock-name 20261007-170916-259e07.lock
	assert_output "20261007-170916-259e07"
	run test-found task-lock-name 20261007-170916-259e07
	assert_failure
	assert_output invalid
	run test-found task-lock-name 20261007-170916-259e07.lock.lock
	assert_failure
	assert_output invalid
	run test-found task-lock-name x.lock
	assert_failure
	assert_output invalid
}

@test "task create: lock first, then the folder, both named for now" {
	mkdir tasks
	run test-found task-create tasks
	assert_success
	assert_output --regexp '^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$'
	assert_dir_exists "tasks/$output"
	assert_file_exists "tasks/$output.lock"
	[ "$(stat -c %a "tasks/$output")" = 700 ]
}

@test "format_bytes: people's units" {
	run test-found bytes 0
	assert_output "0 B"
	run test-found bytes 1023
	assert_output "1023 B"
	run test-found bytes 1536
	assert_output "1.5 KiB"
	run test-found bytes 20971520
	assert_output "20.0 MiB"
}
