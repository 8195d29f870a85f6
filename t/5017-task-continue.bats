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
	dir=$(echo "$TASKS"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] | tr ' ' '\n' | grep -v a1b2c3)
	[ -n "$dir" ]
	id=${dir: -6}
	[[ "$stderr" == *"aibox[$id]: task $id starts from $END"* ]]
	[[ "$stderr" == *"aibox[$id]: it continues task 20260101-100000-a1b2c3 and resumes its conversation; fetched its changes (git fetch ... aibox/task:aibox/task-20260101-100000-a1b2c3)"* ]]
	assert_equal "$(git rev-parse aibox/task-20260101-100000-a1b2c3)" "$END"
	cmp "$OLD/session.jsonl" "$dir/resume.jsonl"
	assert_equal "$(cat "$dir/continues")" "20260101-100000-a1b2c3 $END"
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["start_commit"], s["resume_session"])' "$dir/settings.json"
	assert_output "$END $SID"
	# Once fetched, the next continue fetches nothing; the folder path works too.
	run --separate-stderr aibox task --continue "$OLD" "more"
	[[ "$stderr" == *"resumes its conversation"* ]]
	[[ "$stderr" != *"fetched"* ]]
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
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233' is still running: continue it once it has ended"
	exec 9>&-
	run aibox task --continue 112233 --from HEAD x
	assert_output "aibox-task: --continue and --from: a continued task starts where the earlier one ended"
	cp "$OLD/session.jsonl" "$T/session"
	printf 'not json\n' >>"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233''s session.jsonl is refused: line 3 is not a JSON object"
	printf '{"sessionId":"../../etc/passwd"}\n' >"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_output --partial "line 1 has a malformed \"sessionId\""
	: >"$OLD/session.jsonl"
	run aibox task --continue 112233 x
	assert_output "aibox-task: cannot continue: task '20260101-100000-112233' kept no Claude Code conversation to resume"
	cp "$T/session" "$OLD/session.jsonl"
	printf 'garbage' >"$OLD/changes.bundle"
	run aibox task --continue 112233 x
	assert_output --partial "aibox-task: cannot continue: task '20260101-100000-112233': changes.bundle refused: "
	run aibox task --continue "$T" x
	assert_output "aibox-task: cannot continue: '$T' is no task id, task folder name or task folder of this project"
	assert_failure 2
	only_old
	run git rev-parse --verify --quiet aibox/task-20260101-100000-112233
	assert_failure
}
