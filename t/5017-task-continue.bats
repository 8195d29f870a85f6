#!/usr/bin/env bats
# aibox task --continue, the host's side without a VM: an ended task made by
# hand (its settings.json, result.json, changes.bundle and session.jsonl as a
# task leaves them) is checked, fetched and handed to the new task, or refused
# with the reason; the new task stops at the boot (no_vm).  t/5110 continues a
# real task in real VMs.
load lib-common
bats_require_minimum_version 1.5.0

SID=0b6c3f8e-1d2a-4c5b-9e7f-8a9b0c1d2e3f

setup() {
	common_setup
	no_vm_project
	printf 'env:\n  - CLAUDE_CODE_OAUTH_TOKEN\n' >"$AIBOX_HOME/projects/repo/config.yaml"
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	unset ANTHROPIC_API_KEY
	TASKS=$AIBOX_HOME/projects/repo/tasks
	mkdir -p "$TASKS"
}

# ended_task ID [changes]: an ended task's folder, $OLD, started at HEAD; with
# "changes" its aibox/task has one commit more (END) in changes.bundle, else
# it ended with no changes.  Its session.jsonl names $SID.
ended_task() {
	local start end=
	start=$(git rev-parse HEAD)
	OLD=$TASKS/20260101-100000-$1
	mkdir "$OLD"
	: >"$OLD.lock"
	printf '{"version": 1, "id": "%s", "start_commit": "%s"}\n' "$1" "$start" >"$OLD/settings.json"
	: >"$OLD/changes.bundle"
	if [ "${2:-}" = changes ]; then
		git clone -q . "$T/vm-clone"
		git -C "$T/vm-clone" checkout -q -b aibox/task
		echo "from the vm" >"$T/vm-clone/vm.txt"
		git -C "$T/vm-clone" add vm.txt
		git -C "$T/vm-clone" commit -q -m "vm commit"
		git -C "$T/vm-clone" bundle create -q "$OLD/changes.bundle" aibox/task "^$start"
		END=$(git -C "$T/vm-clone" rev-parse HEAD)
		end=$END
	fi
	printf '{"version": 1, "steps": [], "failed_step": null, "claude": null, "start_commit": "%s", "end_commit": "%s", "changes": %s}\n' \
		"$start" "${end:-$start}" "$([ -n "$end" ] && echo true || echo false)" >"$OLD/result.json"
	printf '{"type":"user","sessionId":"%s","message":{"role":"user","content":"first prompt"}}\n{"type":"assistant","sessionId":"%s","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}\n' \
		"$SID" "$SID" >"$OLD/session.jsonl"
}

# only_old: no new task folder was made.
only_old() {
	run ls "$TASKS"
	assert_output "$(printf '%s\n%s' "${OLD##*/}" "${OLD##*/}.lock")"
}

@test "task continue: a task with changes: its end fetched into its branch, its conversation to the VM, the folder says what it continues" {
	ended_task a1b2c3 changes
	run --separate-stderr aibox task --continue a1b2c3 "now add tests"
	assert_stopped_at_boot
	dir=$(echo "$TASKS"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] | tr ' ' '\n' | grep -v a1b2c3)
	[ -n "$dir" ]
	id=${dir: -6}
	[[ "$stderr" == *"aibox[$id]: task $id starts from $END"* ]]
	[[ "$stderr" == *"aibox[$id]: it continues task 20260101-100000-a1b2c3 and resumes its conversation; fetched its changes (git fetch ... aibox/task:aibox/task-20260101-100000-a1b2c3)"* ]]
	assert_equal "$(git rev-parse aibox/task-20260101-100000-a1b2c3)" "$END"
	# the fetch is in the audit record, before the new task's start
	run jq -c 'select(.event == "fetch") | [.task, .commit, .refspec, .by, .project]' "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_output "[\"20260101-100000-a1b2c3\",\"$END\",\"aibox/task:aibox/task-20260101-100000-a1b2c3\",\"aibox task --continue\",\"repo\"]"
	cmp "$OLD/session.jsonl" "$dir/resume.jsonl"
	assert_equal "$(cat "$dir/continues")" "20260101-100000-a1b2c3 $END"
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["start_commit"], s["resume_session"])' "$dir/settings.json"
	assert_output "$END $SID"
	# Once fetched, the next continue fetches nothing; the folder path works too.
	run --separate-stderr aibox task --continue "$OLD" "more"
	assert_stopped_at_boot
	[[ "$stderr" == *"resumes its conversation"* ]]
	[[ "$stderr" != *"fetched"* ]]
	run jq -r .event "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_output $'fetch\nstart\nend\nstart\nend'
}

@test "task continue: a task that ended with no changes says so, and nothing starts" {
	ended_task d4e5f6
	run aibox task --continue d4e5f6 "go on"
	assert_failure 2
	assert_output "aibox-task: cannot continue: task '20260101-100000-d4e5f6' ended with no changes: there is no commit to continue from"
	only_old
}

@test "task continue: a cleaned task says why it cannot be continued" {
	ended_task 0a0b0c changes
	run aibox tasks clean --all
	assert_success
	run aibox task --continue 0a0b0c "go on"
	assert_failure 2
	assert_output "aibox-task: cannot continue: task '0a0b0c': no such task in this project (aibox tasks clean --all removes ended tasks' folders)"
	run aibox task --continue 20260101-100000-0a0b0c "go on"
	assert_failure 2
	assert_output --partial "no such task in this project"
}

@test "task continue: a running task, a missing or hostile conversation, a bad bundle and --from are refused" {
	ended_task 112233 changes
	exec 9>"$OLD.lock"
	flock 9
	run aibox task --continue 112233 x
	assert_failure 2
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233' is still running: continue it once it has ended"
	exec 9>&-
	run aibox task --continue 112233 --from HEAD x
	assert_failure 2
	assert_output "aibox-task: --continue and --from: a continued task starts where the earlier one ended"
	cp "$OLD/session.jsonl" "$T/session"
	printf 'not json\n' >>"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_failure 2
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233''s session.jsonl is refused: line 3 is not a JSON object"
	printf '{"sessionId":"../../etc/passwd"}\n' >"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_failure 2
	assert_output --partial "line 1 has a malformed \"sessionId\""
	: >"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_failure 2
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233' kept no Claude Code conversation to resume"
	cp "$T/session" "$OLD/session.jsonl"
	printf 'garbage' >"$OLD/changes.bundle"
	run aibox task --continue 112233 x
	assert_failure 2
	assert_output --partial "aibox-task: cannot continue: task '20260101-100000-112233': changes.bundle refused: "
	run aibox task --continue "$T" x
	assert_output "aibox-task: cannot continue: '$T' is no task id, task folder name or task folder of this project"
	assert_failure 2
	only_old
	run git rev-parse --verify --quiet aibox/task-20260101-100000-112233
	assert_failure
}

@test "task continue: a session.jsonl line of more JSON values than the bound is refused before it is parsed" {
	ended_task 556677 changes
	# 12 MiB of empty objects, under the line's cap: four million values,
	# which jansson would hold in about 900 MB.
	python3 -c 'import sys; sys.stdout.write("{\"pad\":[" + "{}," * (4 << 20) + "{}]}\n")' \
		>>"$OLD/session.jsonl"
	run --separate-stderr max_rss "$T/rss" aibox task --continue 556677 x
	assert_failure 2
	assert_output ''
	assert_equal "$stderr" "aibox-task: cannot continue: task '20260101-100000-556677''s session.jsonl is refused: line 3 has over 1048576 JSON values"
	echo "# peak RSS: $(cat "$T/rss") KiB" >&3
	[ "$(cat "$T/rss")" -lt $((300 * 1024)) ]
	only_old
}

U1=11111111-1111-4111-8111-111111111111
U2=22222222-2222-4222-8222-222222222222
U3=33333333-3333-4333-8333-333333333333
U4=44444444-4444-4444-8444-444444444444
U5=55555555-5555-4555-8555-555555555555
U8=88888888-8888-4888-8888-888888888888
U9=99999999-9999-4999-8999-999999999999
TOOL='{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"x"}}]}'
RESULT='{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}'
LAST='{"role":"assistant","content":[{"type":"text","text":"I added one.txt."}]}'

# session_as_left: $OLD/session.jsonl as Claude Code can leave it when its
# exit cuts its last write short: the prompt, a tool call and its result, a
# subagent's entry (the latest time), but not the last answer.
session_as_left() {
	cat >"$OLD/session.jsonl" <<-EOF
		{"type":"user","uuid":"$U1","parentUuid":null,"isSidechain":false,"timestamp":"2026-01-01T10:00:01.000Z","sessionId":"$SID","message":{"role":"user","content":"first prompt"}}
		{"type":"assistant","uuid":"$U2","parentUuid":"$U1","isSidechain":false,"timestamp":"2026-01-01T10:00:05.000Z","sessionId":"$SID","message":$TOOL}
		{"type":"user","uuid":"$U3","parentUuid":"$U2","isSidechain":false,"timestamp":"2026-01-01T10:00:09.000Z","sessionId":"$SID","message":$RESULT}
		{"type":"assistant","uuid":"$U9","parentUuid":null,"isSidechain":true,"timestamp":"2026-01-01T10:00:10.000Z","sessionId":"$SID","message":$LAST}
	EOF
}

@test "task continue: the messages the transcript has and the session file lacks are added to the conversation the VM gets" {
	ended_task 445566 changes
	session_as_left
	# What Claude Code printed: all of it, with a subagent's line, lines of
	# other kinds or with a bad uuid (skipped), and after a line that is no
	# JSON one that must not be taken.
	cat >"$OLD/transcript.jsonl" <<-EOF
		{"type":"system","subtype":"init","session_id":"$SID"}
		{"type":"assistant","message":$TOOL,"parent_tool_use_id":null,"session_id":"$SID","uuid":"$U2"}
		{"type":"user","message":$RESULT,"parent_tool_use_id":null,"session_id":"$SID","uuid":"$U3","timestamp":"2026-01-01T10:00:09.000Z"}
		{"type":"assistant","message":{"role":"assistant","content":"sub"},"parent_tool_use_id":"t1","session_id":"$SID","uuid":"$U8"}
		{"type":"assistant","message":$LAST,"parent_tool_use_id":null,"session_id":"$SID","uuid":"$U4"}
		{"type":"assistant","message":$LAST,"session_id":"$SID","uuid":"../../x"}
		{"type":"result","subtype":"success","session_id":"$SID","uuid":"$U5"}
		not JSON
		{"type":"assistant","message":$LAST,"session_id":"$SID","uuid":"$U5"}
	EOF
	run --separate-stderr aibox task --continue 445566 "now add tests"
	assert_stopped_at_boot
	dir=$(echo "$TASKS"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] | tr ' ' '\n' | grep -v 445566)
	[ -n "$dir" ]
	[[ "$stderr" == *"resumes its conversation; added 1 message its session.jsonl lacked from its transcript.jsonl; fetched its changes"* ]]
	assert_equal "$(head -4 "$dir/resume.jsonl")" "$(cat "$OLD/session.jsonl")"
	assert_equal "$(tail -n +5 "$dir/resume.jsonl")" \
		"{\"parentUuid\":\"$U3\",\"isSidechain\":false,\"type\":\"assistant\",\"message\":$LAST,\"uuid\":\"$U4\",\"timestamp\":\"2026-01-01T10:00:10.000Z\",\"sessionId\":\"$SID\"}"
}

@test "task continue: a session file that lacks nothing, or a transcript that is no file, is given to the VM as it is" {
	ended_task 778899 changes
	session_as_left
	printf '{"type":"user","message":%s,"parent_tool_use_id":null,"session_id":"%s","uuid":"%s"}\n' \
		"$RESULT" "$SID" "$U3" >"$OLD/transcript.jsonl"
	run --separate-stderr aibox task --continue 778899 "go on"
	assert_stopped_at_boot
	[[ "$stderr" != *"added"* ]]
	dir=$(ls -d "$TASKS"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] | grep -v 778899)
	cmp "$OLD/session.jsonl" "$dir/resume.jsonl"
	rm -rf "$dir" "$dir.lock"
	printf '{"type":"assistant","message":%s,"session_id":"%s","uuid":"%s"}\n' "$LAST" "$SID" "$U4" >"$T/elsewhere"
	rm "$OLD/transcript.jsonl"
	ln -s "$T/elsewhere" "$OLD/transcript.jsonl"
	run --separate-stderr aibox task --continue 778899 "go on"
	assert_stopped_at_boot
	[[ "$stderr" != *"added"* ]]
	dir=$(ls -d "$TASKS"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] | grep -v 778899)
	cmp "$OLD/session.jsonl" "$dir/resume.jsonl"
}
