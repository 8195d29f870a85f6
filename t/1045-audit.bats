#!/usr/bin/env bats
# The audit record (common/task/audit.h, docs/security.md "The audit record"):
# every task's and every aibox run's start and end in $AIBOX_HOME/audit.jsonl,
# hash-chained; aibox audit verify finds an edited, removed, moved or forged
# entry and names its line; aibox audit list reads it, and (--syslog) the
# system log's copy in a syslog file the test writes.  No VM: the tasks and
# the run stop at no_vm's boot, which ends them ("not finished").  The system
# log's copy is read back from log daemons in t/9310-audit-syslog.bats (they
# need root); the policy's refusals are in t/9300-policy.bats.
load lib-common

setup() {
	common_setup
	export ANTHROPIC_API_KEY=sk-ant-test-key
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	log=$AIBOX_HOME/audit.jsonl
	run --separate-stderr aibox task "first prompt"
	assert_stopped_at_boot
	run --separate-stderr aibox task "second prompt"
	assert_stopped_at_boot
}

@test "audit: each task's and each run's start and end are recorded, chained, with who, what and how it ended" {
	run aibox audit verify
	assert_success
	assert_output "$log: 4 entries, the chain is whole"
	run jq -sc '[.[] | [.seq, .event, .uid, .project]]' "$log"
	assert_success
	assert_output "[[1,\"start\",$(id -u),\"repo\"],[2,\"end\",$(id -u),\"repo\"],[3,\"start\",$(id -u),\"repo\"],[4,\"end\",$(id -u),\"repo\"]]"
	# the user's name in each, the end's too (after the lockdown)
	run jq -r .user "$log"
	assert_success
	assert_output "$(printf '%s\n' "$(id -un)" "$(id -un)" "$(id -un)" "$(id -un)")"
	run jq -r 'select(.seq == 1) | [.prompt_sha256, .secrets, .image, .memory_mib, .timeout_s] | @tsv' "$log"
	assert_success
	sum=$(printf 'first prompt' | sha256sum | cut -d' ' -f1)
	assert_output "$sum	ANTHROPIC_API_KEY	default	4096	3600"
	run jq -r 'select(.seq == 2) | [.result, .exit, .commit, has("fetched")] | @tsv' "$log"
	assert_success
	assert_output "not finished	1		false"
	run jq -r 'select(.seq == 1) | .policy' "$log"
	assert_success
	assert_output ""
	# each entry's task is the task folder's name
	# (two tasks started in one second: their folder names differ only in the random part)
	run jq -r 'select(.event == "start") | .task' "$log"
	assert_success
	assert_equal "$(sort <<<"$output")" "$(ls "$AIBOX_HOME/projects/repo/tasks" | grep -v lock | sort)"
	# the first entry follows nothing; each next one the hash of the one before
	run jq -r '.prev' "$log"
	assert_success
	assert_equal "$(sed -n 1p <<<"$output")" "$(printf '0%.0s' {1..64})"
	assert_equal "$(sed -n 2p <<<"$output")" "$(jq -r 'select(.seq == 1) | .hash' "$log")"
	# the file is the user's alone
	assert_equal "$(stat -c %a "$log")" 600
	# aibox run: the command by its program and a digest, the options, the secrets by name
	run --separate-stderr aibox run --memory 1G -- sh -c 'echo hi'
	[ "$status" -eq 125 ] || fail "$stderr"
	[[ "$stderr" == *"QEMU exited"* ]] || fail "not stopped at the boot: $stderr"
	run jq -c 'select(.seq > 4) | [.event, .uid, .project, .command, .memory_mib, .image, .secrets, .policy, .result, .exit]' "$log"
	assert_success
	assert_equal "${lines[0]}" "[\"run-start\",$(id -u),\"repo\",\"sh\",1024,\"default\",\"ANTHROPIC_API_KEY\",\"\",null,null]"
	assert_equal "${lines[1]}" "[\"run-end\",$(id -u),\"repo\",null,null,null,null,null,\"failed\",125]"
	assert_equal "${#lines[@]}" 2
	run jq -r 'select(.seq == 5) | .command_sha256' "$log"
	assert_success
	assert_output "$(printf 'sh\0-c\0echo hi\0' | sha256sum | cut -d' ' -f1)"
	# both name the run, whose folder is gone
	run jq -r 'select(.seq > 4) | .run' "$log"
	assert_success
	[[ "${lines[0]}" =~ ^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$ ]] || fail "${lines[0]}"
	assert_equal "${lines[1]}" "${lines[0]}"
	run aibox audit verify
	assert_success
	assert_output "$log: 6 entries, the chain is whole"
}

@test "audit: aibox audit verify names the line of an edited, removed, moved or forged entry" {
	cp "$log" "$T/good"
	# edited: the hash no longer matches
	sed '2s/"not finished"/"finished"/' "$T/good" >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:2: its hash does not match it: the entry was edited"
	# removed
	sed '2d' "$T/good" >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:2: entry 3 where entry 2 belongs: an entry was removed or moved before it"
	# the first removed
	sed '1d' "$T/good" >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:1: entry 2 where entry 1 belongs: an entry was removed or moved before it"
	# moved: lines 2 and 3 swapped
	for n in 1 3 2 4; do sed -n "${n}p" "$T/good"; done >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:2: entry 3 where entry 2 belongs: an entry was removed or moved before it"
	# forged: line 2 edited and its hash made again; line 3 no longer follows it
	line2=$(sed -n 2p "$T/good" | jq -c '.result = "finished" | del(.hash)')
	hash=$(jq -cS . <<<"$line2" | tr -d '\n' | sha256sum | cut -d' ' -f1)
	{
		sed -n 1p "$T/good"
		jq -c --arg h "$hash" '.hash = $h' <<<"$line2"
		sed -n '3,$p' "$T/good"
	} >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:3: it does not follow the line before it: an entry was removed, moved or edited before it"
	# not an entry, cut short
	{ sed -n 1p "$T/good"; echo '{"seq": 2}'; } >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:2: not an audit entry (no seq, prev or hash)"
	{ cat "$T/good"; printf '{"seq":5'; } >"$log"
	run --separate-stderr aibox audit verify
	assert_failure 1
	assert_equal "$stderr" "aibox-audit-verify: $log:5: the line is cut short (no newline)"
	# a file of its own, named
	run aibox audit verify "$T/good"
	assert_success
	assert_output "$T/good: 4 entries, the chain is whole"
}

@test "audit: a task does not start on a chain that is not whole, and says why" {
	sed -i '2s/"not finished"/"finished"/' "$log"
	run --separate-stderr aibox task "third prompt"
	[ "$status" -eq 2 ] || fail "$stderr"
	assert_failure 2
	[[ "$stderr" == *"cannot write the audit record: '$log' is not a whole chain (aibox audit verify): 2: its hash does not match it: the entry was edited"* ]] || fail "$stderr"
	assert_equal "$(wc -l <"$log")" 4
}

@test "audit: aibox audit list shows the entries, --json as they are, --since from a date or a duration; --syslog from a syslog file" {
	run --separate-stderr aibox audit list
	assert_success
	assert_equal "$(wc -l <<<"$output")" 4
	assert_line --index 0 --regexp "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} event=start uid=$(id -u) .* project=repo .*secrets=ANTHROPIC_API_KEY seq=1$"
	assert_line --index 1 --regexp " event=end .* result=not finished exit=1 .* seq=2$"
	run --separate-stderr aibox audit list --json
	assert_success
	assert_equal "$(jq -c . <<<"$output")" "$(jq -sc . "$log")"
	# the local dates of the first entry and of the day after the last (from
	# the entries' own times, not today's: setup may have run before midnight)
	day1=$(date -d "@$(jq -s '.[0].time' "$log")" +%F)
	after=$(date -d "$(date -d "@$(jq -s '.[-1].time' "$log")" +%F) 12:00 1 day" +%F)
	run --separate-stderr aibox audit list --json --since "$day1"
	assert_success
	assert_equal "$(jq length <<<"$output")" 4
	run --separate-stderr aibox audit list --json --since "$after"
	assert_success
	assert_equal "$(jq length <<<"$output")" 0
	run --separate-stderr aibox audit list --json --since 1h
	assert_success
	assert_equal "$(jq length <<<"$output")" 4
	run --separate-stderr aibox audit list --since soon
	assert_failure 2
	assert_equal "$stderr" "aibox-audit-list: --since: 'soon' is not a date like 2026-12-04 or a duration like 2h"
	# --syslog: the system log's copy from a syslog file, said on stderr
	# the entries as rsyslog writes them to auth.log, among other lines
	{
		echo "Dec  4 10:00:00 host sshd[41]: Accepted publickey for u"
		while read -r line; do
			echo "2026-12-04T10:00:00.000000+00:00 host aibox[4242]: aibox-audit: $line"
		done <"$log"
		echo "Dec  4 10:00:01 host notaibox[43]: aibox-audit: {\"time\": 1, \"event\": \"forged\"}"
		echo "Dec  4 10:00:02 host aibox[44]: aibox-audit: [\"not an entry\"]"
		echo "Dec  4 10:00:03 host aibox[]: aibox-audit: {\"time\": 1, \"event\": \"no pid\"}"
		printf 'Dec  4 10:00:04 host aibox[45]: aibox-audit: {"time": 1, "event": "cut'
	} >"$T/auth.log"
	run --separate-stderr aibox audit list --json --syslog "$T/auth.log"
	assert_success
	assert_equal "$(jq -c . <<<"$output")" "$(jq -sc . "$log")"
	assert_equal "$stderr" "aibox-audit-list: the system log's copy, from the syslog file '$T/auth.log'
aibox-audit-list: warning: $T/auth.log:7: an aibox-audit line that is not an entry, skipped"
	run --separate-stderr aibox audit list --syslog "$T/auth.log" --since "$after"
	assert_success
	assert_output ""
	run --separate-stderr aibox audit list --syslog "$T/auth.log"
	assert_success
	assert_equal "${#lines[@]}" 4
	assert_line --index 3 --regexp " event=end .* result=not finished exit=1 .* seq=4$"
	# the user's file says so too
	run --separate-stderr aibox audit list --json
	assert_success
	assert_equal "$stderr" "aibox-audit-list: the audit file '$log'"
	# one source at a time; a syslog file that cannot be read stops
	run --separate-stderr aibox audit list --syslog "$T/auth.log" "$log"
	assert_failure 2
	[[ "$stderr" == "aibox-audit-list: --log and --syslog read the system log, not a FILE"* ]] || fail "$stderr"
	run --separate-stderr aibox audit list --syslog "$T/none"
	assert_failure 2
	assert_equal "$stderr" "aibox-audit-list: the system log's copy, from the syslog file '$T/none'
aibox-audit-list: cannot open '$T/none': No such file or directory"
}
