#!/usr/bin/env bats
# aibox-init's task mode and Claude Code's conversation (docs/init-task.md,
# "Resuming a conversation"), natively through build/test-init-task: a fake
# Claude Code ($T/claude) that does with its session file what the real one
# does, and records what it found.  t/5110 does the same with the real one.
load lib-common

SID=0b6c3f8e-1d2a-4c5b-9e7f-8a9b0c1d2e3f

setup() {
	common_setup
	mkdir share state aibox-home res
	task_source "$T/share/start.bundle"
	RESUME=null
	# The fake: its argv in ~/argv.txt; the session file it resumes (found by
	# --resume=ID where Claude Code looks) copied to ~/seen.jsonl with the
	# modes of it and its folder; then one more line in it and a result line
	# naming the session (ID, else ~/sid's).
	cat >claude <<-'EOF'
		#!/bin/bash
		printf '%s\n' "$@" >"$HOME/argv.txt"
		cat >/dev/null
		id=$(cat "$HOME/sid" 2>/dev/null)
		for a; do case $a in --resume=*) id=${a#--resume=} ;; esac; done
		dir=$HOME/.claude/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')
		if [ -f "$dir/$id.jsonl" ]; then
			cp "$dir/$id.jsonl" "$HOME/seen.jsonl"
			stat -c '%a %U' "$dir/$id.jsonl" "$dir" "$HOME/.claude/projects" >"$HOME/modes"
		fi
		[ -e "$HOME/no-file" ] || {
			mkdir -p "$dir"
			printf '{"type":"user","sessionId":"%s","message":"new turn"}\n' "$id" >>"$dir/$id.jsonl"
		}
		printf '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok","session_id":"%s"}\n' "$id"
	EOF
	chmod +x claude
}

write_settings() {
	cat >share/settings.json <<-EOF
		{
		  "version": 1, "id": "259e07", "mode": "task", "model": null,
		  "timeout_s": 60, "max_budget_usd": null,
		  "git": { "name": "Task Person", "email": "task@example.com" },
		  "start_commit": "$START", "branch": "aibox/task",
		  "env_names": [], "api": "forward", "proxy": "http://10.0.2.100:3128",
		  "path": "$T/project", "mounts": [], "system_prompt": "Commit your work.",
		  "resume_session": $RESUME
		}
	EOF
}

# run_task: the task's results in out.tar, unpacked in res/; progress in progress.txt.
run_task() {
	printf 'go on\n' >share/prompt.txt
	write_settings
	status=0
	AIBOX_TEST_TASK_SHARE="$T/share" AIBOX_TEST_TASK_STATE="$T/state" \
		AIBOX_TEST_TASK_HOME="$T/aibox-home" AIBOX_TEST_TASK_CLAUDE="$T/claude" \
		test-init-task </dev/null >out.tar 2>progress.txt || status=$?
	tar -xf out.tar -C res
	names=$(tar -tf out.tar | tr '\n' ' ')
}

@test "init resume: resume.jsonl is placed where Claude Code finds the session, it runs with --resume, the session goes back" {
	RESUME="\"$SID\""
	printf '{"type":"user","sessionId":"%s","message":"first prompt"}\n' "$SID" >share/resume.jsonl
	run_task
	[ "$status" -eq 0 ] || cat progress.txt
	grep -qx -- "--resume=$SID" aibox-home/argv.txt
	cmp share/resume.jsonl aibox-home/seen.jsonl
	me=$(id -un)
	assert_equal "$(cat aibox-home/modes)" "$(printf '600 %s\n700 %s\n700 %s' "$me" "$me" "$me")"
	assert_equal "$names" "transcript.jsonl session.jsonl vm.log result.json "
	assert_equal "$(head -1 res/session.jsonl)" "$(cat share/resume.jsonl)"
	grep -q '"new turn"' res/session.jsonl
}

@test "init resume: a new conversation goes back too; none without its file or its id" {
	echo "$SID" >aibox-home/sid
	run_task
	assert_equal "$status" 0
	run ! grep -q -- --resume aibox-home/argv.txt
	assert_equal "$names" "transcript.jsonl session.jsonl vm.log result.json "
	grep -q '"new turn"' res/session.jsonl

	rm -rf res out.tar project aibox-home/.claude
	mkdir res
	touch aibox-home/no-file
	run_task
	assert_equal "$names" "transcript.jsonl vm.log result.json "
	grep -q "no session file to send" state/aibox-results/vm.log

	rm -rf res out.tar project aibox-home/no-file
	mkdir res
	echo "../../../etc/x" >aibox-home/sid
	run_task
	assert_equal "$names" "transcript.jsonl vm.log result.json "
}

@test "init resume: a resume_session that is no session id, or a home folder that is a link, fails" {
	RESUME='"../../x"'
	printf '{}\n' >share/resume.jsonl
	run_task
	assert_equal "$(python3 -c 'import json; print(json.load(open("res/result.json"))["failed_step"])')" clone
	grep -q 'the session to resume is not a session id' progress.txt

	rm -rf res out.tar project
	mkdir res
	RESUME="\"$SID\""
	mkdir -p aibox-home/.claude "$T/elsewhere"
	ln -s "$T/elsewhere" aibox-home/.claude/projects
	run_task
	assert_equal "$(python3 -c 'import json; print(json.load(open("res/result.json"))["failed_step"])')" claude
	grep -q "cannot make '$T/aibox-home/.claude/projects': Not a directory" progress.txt
	[ -z "$(ls -A "$T/elsewhere")" ]
}
