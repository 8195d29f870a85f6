#!/usr/bin/env bats
# Hostile results from the VM, taken through the host's real end of a task
# without a VM: a detached Slurm task's folder (as t/5007-slurm-files.bats
# makes it) holds the VM's result files, and `aibox tasks show --wait` checks
# them with aibox-task's own finish_task() and writes the record.
load lib-common
load lib-detached
bats_require_minimum_version 1.5.0

setup() {
	common_setup
}

# ended_folder: a detached task whose node has ended (lib-detached's folder,
# its secrets taken), where no Slurm command answers.
ended_folder() {
	detached_folder
	rm "$DIR/slurm.secrets"
	: >"$T/no-slurm.conf"
	export SLURM_CONF=$T/no-slurm.conf
}

@test "hostile results: a last_message the sanitizer makes longer still leaves a record that reads back" {
	ended_folder
	# 20000 tabs: 40000 bytes of JSON, each tab 8 spaces once sanitized
	msg=$(printf '\\t%.0s' $(seq 20000))
	printf '{"version":1,"steps":[],"claude":{"exit_code":0,"last_message":"%s"},"changes":false}' \
		"$msg" >"$DIR/result.json"
	run --separate-stderr aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	[ -s "$DIR/summary.json" ]
	run --separate-stderr aibox tasks show "$ID"
	assert_success
	refute_output --partial "cannot read all of it"
	refute_output --partial "no record of its end"
}

@test "hostile results: result.json's parse error cannot put a line of the VM's text after an aibox prefix" {
	ended_folder
	# a key with U+2028 (LINE SEPARATOR, valid raw in a JSON string) around
	# the text, cut by a control byte: jansson quotes the token in its reason
	printf '{"version":1,"\xe2\x80\xa8no changes\xe2\x80\xa8\x01":1}' >"$DIR/result.json"
	run --separate-stderr aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	printf '%s\n' "$stderr" "$output" >"$T/all"
	run grep -E '^[0-9:]{8} aibox\[a1b2c3\]: no changes' "$T/all"
	assert_failure
	run grep -E '^no changes' "$T/all"
	assert_failure
}

@test "hostile results: a result.json of 1 MiB of empty objects is refused unparsed, aibox's memory within a bound" {
	ended_folder
	# jansson makes about 230 bytes of each "{}": about 80 MB for 1 MiB
	python3 -c 'import sys; sys.stdout.write("{\"version\":1,\"steps\":[],\"x\":[" + "{},"*349500 + "{}]}")' \
		>"$DIR/result.json"
	run --separate-stderr /usr/bin/time -f 'peak %M KiB' -o "$T/time" aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	peak=$(sed -n 's/^peak \([0-9]*\) KiB$/\1/p' "$T/time")
	[ -n "$peak" ] || fail "no peak: $(cat "$T/time")"
	[ "$peak" -lt 40000 ] || fail "aibox's side grew to $peak KiB"
	[[ $stderr == *"result.json refused: result.json: over 65536 JSON values"* ]] ||
		fail "not refused: $stderr"
}

# hostile_session SIGNAL [WRAPPER...]: task_session_run() (run by WRAPPER)
# against t/hostile-sshd, a guest's SSH server that sends good results, then
# "exit-signal" SIGNAL.
hostile_session() {
	local sig=$1
	shift
	rm -rf keys out
	mkdir keys out
	test-task ssh-keys keys >/dev/null
	printf '{"version": 1, "steps": []}\n' >result.json
	"$TOP/t/mktar" result.json:file=result.json >results.tar
	"$@" test-task session --user u --timeout-ms 20000 --idle-ms 10000 keys out -- \
		"$TOP/t/hostile-sshd" keys/ssh/ssh_host_ecdsa_key results.tar "$sig" progress
}

@test "hostile results: the exit signal's name from the VM cannot start a line of its own" {
	# SSH's exit-signal carries any bytes: a line break, or U+2028 that the
	# sanitizer makes one, would put the VM's text after an aibox prefix in
	# the summary ("the task did not finish: ...") and in summary.json's why
	run --separate-stderr hostile_session 'KILL\nthe changes end at f3572af'
	assert_failure
	assert_line --index 0 --partial "failed: the task command in the VM ended by SIG"
	assert_equal "${#lines[@]}" 1
	run --separate-stderr hostile_session 'KILL\u2028no changes'
	assert_failure
	refute_output --partial $'\xe2\x80\xa8'
	# a proper name is still named
	run --separate-stderr hostile_session 'TERM'
	assert_failure
	assert_output "failed: the task command in the VM ended by SIGTERM (No child processes)"
}

@test "hostile results: messages the client never reads cannot grow aibox without bound" {
	# 512 MiB of messages of an unknown type before the results: libssh2
	# keeps each until asked for it, and nothing asks
	HOSTILE_SSHD_JUNK_MIB=512 run --separate-stderr hostile_session TERM \
		/usr/bin/time -f 'peak %M KiB' -o "$T/time"
	assert_failure
	assert_output --regexp "^failed: the VM's SSH server sent [0-9]+ MiB beyond the task's output while "
	peak=$(sed -n 's/^peak \([0-9]*\) KiB$/\1/p' "$T/time")
	[ -n "$peak" ] || fail "no peak: $(cat "$T/time")"
	[ "$peak" -lt 200000 ] || fail "aibox's side grew to $peak KiB"
}

@test "hostile results: result.json's parse error cannot put the VM's controls on the terminal through --continue" {
	no_vm_project
	printf 'env:\n  - CLAUDE_CODE_OAUTH_TOKEN\n' >"$AIBOX_HOME/projects/repo/config.yaml"
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	unset ANTHROPIC_API_KEY
	local old=$AIBOX_HOME/projects/repo/tasks/20260101-100000-d4e5f6
	mkdir -p "$old"
	: >"$old.lock"
	# a key twice, holding U+009B (CSI as UTF-8) "2J": jansson's reason
	# quotes it, and aibox-task prints this reason before any sanitizing
	printf '{"version":1,"a\xc2\x9b2J":1,"a\xc2\x9b2J":2}' >"$old/result.json"
	run aibox task --continue d4e5f6 "go on"
	assert_failure 2
	assert_output --partial "aibox-task: cannot continue: task '20260101-100000-d4e5f6': result.json: not JSON"
	refute_output --partial $'\xc2\x9b'
}
