#!/usr/bin/env bats
# aibox tasks list, show and log of a real task (the real image, Claude Code
# and t/fake-api, as in t/5100): one task, booted once in setup_file and
# shared by the tests, which run in order: while it runs (log -f sees its
# tool call before it ends), once it finished, once it is cleaned.  The not
# finished and failed states, and hostile folders, are in t/1060 (no VM).
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup_file() {
	task_setup
	export T HOME AIBOX_HOME ANTHROPIC_API_KEY
	api '{"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "sleep 8 && echo done > done.txt && git add done.txt && git commit -q -m done", "description": "wait"}}},
	  {"text": "I waited and committed done.txt."}], "require_key": "'"$KEY"'"}'
	export FAKE_API_PID AIBOX_API_UPSTREAM AIBOX_API_CA
	# fd 3 is bats' own: the task must not hold it.
	aibox task --json "Wait, then commit done.txt." >"$T/out" 2>"$T/err" 3>&- &
	export TASK_PID=$!
}

teardown_file() {
	task_teardown
}

setup() {
	cd "$T/repo" || return 1
}

teardown() {
	true
}

has_folder() { [ -n "$(task_dir)" ]; }
follow_saw_tool() { grep -q 'Bash: sleep 8 && echo done' "$T/follow" 2>/dev/null; }
task_ended() { ! kill -0 "$TASK_PID" 2>/dev/null; }
follow_ended() { ! kill -0 "$FOLLOW_PID" 2>/dev/null; }

@test "tasks view vm: log -f of a running task shows its tool call before the task ends, and follows it to its end" {
	wait_until 300 has_folder || { show; false; }
	dir=$(task_dir)
	id=${dir: -6}
	aibox tasks log -f "$id" >"$T/follow" 2>&1 3>&- &
	FOLLOW_PID=$!
	wait_until 900 follow_saw_tool || { kill "$FOLLOW_PID"; show; cat "$T/follow"; false; }
	# Seen while the task still runs (its Bash call sleeps 8 s).
	kill -0 "$TASK_PID"
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r '.[0].state')" running
	run aibox tasks log "$id"
	assert_success
	assert_line --regexp '^[0-9:]{8} Bash: sleep 8 && echo done > done.txt && git add done.txt && git commit -q -m done$'
	wait_until 900 follow_ended || { kill "$FOLLOW_PID"; show; false; }
	wait "$FOLLOW_PID"
	run cat "$T/follow"
	assert_line --regexp '^[0-9:]{8} claude started$'
	assert_line --regexp '^= success, 2 turns, '
	assert_line "the task ended: finished"
	# aibox task showed it on stderr and kept it in aibox.log.
	wait_until 300 task_ended || { show; false; }
	assert_equal "$(jq -r .exit "$T/out")" 0
	grep -q "^[0-9:]\{8\} vm\[$id\]: Bash: sleep 8 && echo done" "$T/err"
	grep -q "^[0-9:]\{8\} vm\[$id\]: Bash: sleep 8 && echo done" "$dir/aibox.log"
}

@test "tasks view vm: list, show and log of the finished task; aibox task --json's object is summary.json" {
	dir=$(task_dir)
	id=${dir: -6}
	# aibox task --json: one object on stdout, the folder among its keys.
	assert_equal "$(jq -r '[.folder, .state, .exit, .result.claude.num_turns] | map(tostring) | join(" ")' "$T/out")" \
		"$dir finished 0 2"
	assert_equal "$(cat "$T/out")" "$(cat "$dir/summary.json")"
	end=$(jq -r .end_commit "$T/out")
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r '.[0] | [.id, .state, .exit, .turns, .end_commit, .fetched, .prompt] | map(tostring) | join("|")')" \
		"$id|finished|0|2|$end|false|Wait, then commit done.txt."
	# show: the start line and the summary as aibox task printed them, times and all.
	run aibox tasks show "$id"
	assert_success
	assert_line --index 0 "task $id, ${dir##*/}: finished"
	assert_line --index 4 "$(grep -m 1 " aibox\[$id\]: task $id starts from " "$T/err")"
	n=$((${#lines[@]} - 5))
	[ "$n" -ge 5 ]
	assert_equal "$(printf '%s\n' "${lines[@]:5}")" "$(tail -n "$n" "$T/err")"
	assert_line --regexp "aibox\\[$id\\]: the VM connected to localhost:3129\$"
	assert_line --regexp "vm\\[$id\\]: \\| I waited and committed done.txt.\$"
	# The fetch command it prints works, and the list then says fetched.
	fetch=$(printf '%s\n' "${lines[@]}" | grep -o 'git fetch .*')
	eval "$fetch"
	assert_equal "$(git rev-parse "aibox/task-${dir##*/}")" "$end"
	run aibox tasks list
	assert_success
	assert_line --index 1 --regexp "^$id  finished .* yes +Wait, then commit done.txt.\$"
	# log: the transcript.
	run aibox tasks log "$id"
	assert_success
	assert_line "> Bash: sleep 8 && echo done > done.txt && git add done.txt && git commit -q -m done"
	assert_line "I waited and committed done.txt."
	assert_line --regexp '^= success, 2 turns, '
}

@test "tasks view vm: a cleaned task is listed as it ended, marked cleaned, and can still be shown and read" {
	dir=$(task_dir)
	id=${dir: -6}
	run aibox tasks clean
	assert_success
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r '.[0] | [.state, .finished, .cleaned] | map(tostring) | join(" ")')" "finished true true"
	run aibox tasks show "$id"
	assert_success
	assert_line --index 0 "task $id, ${dir##*/}: finished"
	assert_line --regexp "the changes end at "
	run aibox tasks log "$id"
	assert_success
	assert_line "I waited and committed done.txt."
}
