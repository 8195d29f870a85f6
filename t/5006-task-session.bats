#!/usr/bin/env bats
# common/task_session: the whole host side of the session against a real
# sshd whose forced command plays the guest init: secrets in on stdin, the
# results tar out on stdout, progress on stderr.
load lib-common
load lib-sshd
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	sshd_setup
	mkdir out
	MKTAR=$TOP/t/mktar
}

session() {
	# shellcheck disable=SC2046
	test-task session --user "$(id -un)" --timeout-ms 60000 --idle-ms 10000 "$@" keys out -- $(SSHD_ARGV)
}

@test "session: the results arrive in the files, the secrets on stdin, progress as vm lines" {
	printf 'bundle bytes' >bundle
	printf '{"version": 1, "steps": []}\n' >result.json
	$MKTAR changes.bundle:file=$T/bundle vm.log:size=3 result.json:file=$T/result.json >results.tar
	forced "cat >$T/stdin; printf 'cloning\033[2J\\n' >&2; printf 'step 2\\n' >&2; cat $T/results.tar"
	run --separate-stderr session --env GITHUB_TOKEN=ghp-x
	assert_success
	assert_output "ok exit 0 changes.bundle 12 vm.log 3 result.json 28"
	cmp bundle out/changes.bundle
	cmp result.json out/result.json
	run cat stdin
	assert_output '{"env": {"GITHUB_TOKEN": "ghp-x"}}'
	# Escape sequences stripped, each line with the time, vm and the id.
	[[ "$stderr" =~ ^[0-9]{2}:[0-9]{2}:[0-9]{2}\ vm\[259e07\]:\ cloning$'\n'[0-9:]{8}\ vm\[259e07\]:\ step\ 2$ ]] || {
		echo "stderr: $stderr"
		false
	}
}

@test "session: format characters and line separators in the VM's progress are shown, never passed" {
	printf '{"version": 1, "steps": []}\n' >result.json
	$MKTAR result.json:file=$T/result.json >results.tar
	# a zero-width space, a line separator, a byte order mark, a tag, a right-to-left override
	printf 'a\xe2\x80\x8bb\xe2\x80\xa8aibox[259e07]: c\xef\xbb\xbfd\xf3\xa0\x80\x81e\xe2\x80\xaef\n' >progress
	forced "cat >/dev/null; cat $T/progress >&2; cat $T/results.tar"
	run --separate-stderr session
	assert_success
	assert_output "ok exit 0 result.json 28"
	[[ "$stderr" =~ ^[0-9:]{8}\ vm\[259e07\]:\ a\<U\+200B\>b$'\n'[0-9:]{8}\ vm\[259e07\]:\ aibox\[259e07\]:\ c\<U\+FEFF\>d\<U\+E0001\>e\<U\+202E\>f$ ]] || {
		echo "stderr: $stderr"
		false
	}
}

@test "session: an extra file stops the session with the reason" {
	$MKTAR vm.log:size=3 evil.sh:size=10 result.json:size=2 >results.tar
	forced "cat >/dev/null; cat $T/results.tar; sleep 20"
	SECONDS=0
	run session
	assert_failure
	assert_output "failed: unexpected file 'evil.sh' (Protocol error)"
	[ "$SECONDS" -lt 15 ]
}

@test "session: a symlink, a duplicate, an oversize file are refused" {
	$MKTAR vm.log:type=2,link=/etc/shadow >results.tar
	forced "cat >/dev/null; cat $T/results.tar"
	run session
	assert_output "failed: 'vm.log' is a symbolic link (Protocol error)"
	rm out/*
	$MKTAR vm.log:size=1 vm.log:size=1 >results.tar
	run session
	assert_output "failed: 'vm.log' sent twice (Protocol error)"
	rm out/*
	$MKTAR result.json:sizefield=00004000001 --no-end >results.tar
	run session
	assert_output "failed: 'result.json' over its size limit of 1048576 bytes (File too large)"
}

@test "session: a tar that stops short, or a command that fails, does not count as finished" {
	$MKTAR vm.log:size=3000 --no-end --cut 100 >results.tar
	forced "cat >/dev/null; cat $T/results.tar"
	run session
	assert_output "failed: the results end in the middle of 'vm.log' (Protocol error)"
	rm out/*
	$MKTAR result.json:size=2 >results.tar
	forced "cat >/dev/null; cat $T/results.tar; exit 4"
	run session
	assert_output "failed: the task command in the VM exited with 4 (No child processes)"
}

@test "session: the VM's lines into a file (nohup.out, a detached Slurm job's slurm.out) stop at 16 MiB, saying so" {
	$MKTAR result.json:size=2 >results.tar
	# 24 MiB of short lines, then the results
	forced "cat >/dev/null; yes \"\$(head -c 100 /dev/zero | tr '\\0' y)\" | head -c 24M >&2; cat $T/results.tar"
	session >"$T/out.txt" 2>"$T/err.txt"
	run cat "$T/out.txt"
	assert_output "ok exit 0 result.json 2"
	size=$(stat -c %s "$T/err.txt")
	[ "$size" -le $(((16 << 20) + 4096)) ] || fail "the file has $size bytes"
	[ "$size" -ge $((15 << 20)) ] || fail "the file has $size bytes"
	run tail -n 1 "$T/err.txt"
	assert_output --regexp '^[0-9:]{8} aibox\[259e07\]: the VM'"'"'s lines past 16 MiB are left out of this output \(a file\)$'
	# on a pipe its reader is there: all of them
	rm out/*
	session 2>&1 >/dev/null | wc -c >"$T/count"
	[ "$(cat "$T/count")" -gt $((24 << 20)) ] || fail "the pipe got $(cat "$T/count") bytes"
}

@test "session: attempts sharing one file keep 16 MiB of the VM's lines in it together, not 16 MiB each" {
	$MKTAR result.json:size=2 >results.tar
	forced "cat >/dev/null; yes \"\$(head -c 100 /dev/zero | tr '\\0' y)\" | head -c 24M >&2; cat $T/results.tar"
	mkdir out2 out3
	# two at once, one open file between them as the attempts of a group have (nohup.out)
	{
		# shellcheck disable=SC2046
		test-task session --user "$(id -un)" --timeout-ms 60000 --idle-ms 10000 keys out -- $(SSHD_ARGV) >out1.txt &
		# shellcheck disable=SC2046
		test-task session --user "$(id -un)" --timeout-ms 60000 --idle-ms 10000 keys out2 -- $(SSHD_ARGV) >out2.txt &
		wait
	} 2>"$T/err.txt"
	run cat out1.txt out2.txt
	assert_output "$(printf 'ok exit 0 result.json 2\nok exit 0 result.json 2')"
	size=$(stat -c %s "$T/err.txt")
	[ "$size" -le $(((16 << 20) + 8192)) ] || fail "the file has $size bytes"
	[ "$(grep -c "lines past 16 MiB are left out of this output" "$T/err.txt")" -eq 2 ]
	# one that starts later, given the group's start (0 bytes), adds only its line
	# shellcheck disable=SC2046
	test-task session --user "$(id -un)" --timeout-ms 60000 --idle-ms 10000 --err-base 0 keys out3 -- $(SSHD_ARGV) >/dev/null 2>>"$T/err.txt"
	[ "$(stat -c %s "$T/err.txt")" -le $((size + 200)) ] || fail "the file has $(stat -c %s "$T/err.txt") bytes"
	run tail -n 1 "$T/err.txt"
	assert_output --regexp '^[0-9:]{8} aibox\[259e07\]: the VM'"'"'s lines past 16 MiB are left out of this output \(a file\)$'
}

@test "session: a guest that goes silent ends in the idle timeout" {
	forced "cat >/dev/null; echo started >&2; sleep 1; echo \$PPID >$T/stalled.pid; echo \$\$ >$T/script.pid; kill -STOP \$PPID; sleep 30"
	run test-task session --user "$(id -un)" --timeout-ms 60000 --idle-ms 3000 keys out -- $(SSHD_ARGV)
	kill -KILL "$(cat stalled.pid)" "$(cat script.pid)" 2>/dev/null || true
	assert_failure
	assert_line "failed: the VM sent nothing for 3 s (Connection timed out)"
}
