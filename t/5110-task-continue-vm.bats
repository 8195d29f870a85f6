#!/usr/bin/env bats
# aibox task --continue end to end: a first task in a real VM (the real image,
# the real Claude Code, t/fake-api as the API upstream), then a second task
# that continues it in another VM.  The two boots happen once, in setup_file;
# each test reads what they left.  t/5017 has the refusals (no VM).
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

# The fake API picks its answer by the number of assistant messages in the
# request: the continued task, which sends the first task's two turns again,
# gets turns 2 and 3; a task that had forgotten them would get turn 0 again.
SCRIPT='{"turns": [
  {"tool_use": {"name": "Bash", "input": {"command": "echo one > one.txt && git add one.txt && git commit -q -m one", "description": "commit"}}},
  {"text": "I added one.txt."},
  {"tool_use": {"name": "Bash", "input": {"command": "git log --format=%s > seen.txt && echo two > two.txt && git add seen.txt two.txt && git commit -q -m two", "description": "commit"}}},
  {"text": "I added two.txt."}], "require_key": "KEY"}'

setup_file() {
	task_setup
	export T HOME AIBOX_HOME GIT_CONFIG_NOSYSTEM ANTHROPIC_API_KEY
	api "${SCRIPT/KEY/$KEY}"
	echo "$FAKE_API_PID" >"$T/fake-api.pid"
	aibox task "Remember the word PELICAN, then add one.txt." >"$T/out1" 2>"$T/err1"
	echo $? >"$T/status1"
	FIRST=$(cat "$T/out1")
	# Claude Code's exit can cut short the write of its session file's last
	# lines (common/task/session_mend.h); a slow VM makes that happen at times.
	# Here it happens every time: the first task's last answer is taken out
	# of the session.jsonl it sent (kept as it came in $T/session1).
	if [ -f "$FIRST/session.jsonl" ]; then
		cp "$FIRST/session.jsonl" "$T/session1"
		grep -vF '"I added one.txt."' "$T/session1" >"$FIRST/session.jsonl" || true
	fi
	aibox task --continue "${FIRST: -6}" "Now add two.txt." >"$T/out2" 2>"$T/err2"
	echo $? >"$T/status2"
	stop_fake_api
}

teardown_file() {
	local pid
	pid=$(cat "$T/fake-api.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	common_teardown
}

setup() {
	cd "$T/repo" || return 1
	FIRST=$(cat "$T/out1")
	SECOND=$(cat "$T/out2")
	[ "$(cat "$T/status1")" = 0 ] || { show "$T/err1"; return 1; }
	[ "$(cat "$T/status2")" = 0 ] || { show "$T/err1" "$T/err2"; return 1; }
}

teardown() { :; }

@test "task continue vm: the first task sends its conversation back as session.jsonl; what it lacks is added from the transcript" {
	grep -q PELICAN "$T/session1"
	n=$(wc -l <"$FIRST/session.jsonl")
	[ "$n" -gt 0 ]
	cmp "$FIRST/session.jsonl" <(head -n "$n" "$SECOND/resume.jsonl")
	run tail -n +$((n + 1)) "$SECOND/resume.jsonl"
	assert_output --partial '"I added one.txt."'
	# (1 message, or more should Claude Code have lost more itself)
	grep -qE "resumes its conversation; added [0-9]+ messages? its session.jsonl lacked from its transcript.jsonl" "$T/err2"
}

@test "task continue vm: the continued task starts from the first task's tip, fetched into its branch" {
	branch1=aibox/task-$(basename "$FIRST")
	tip1=$(git rev-parse "$branch1")
	assert_equal "$(git show "$branch1:one.txt")" "one"
	id=${SECOND: -6}
	grep -qF "aibox[$id]: task $id starts from $tip1" "$T/err2"
	grep -qF "aibox[$id]: it continues task $(basename "$FIRST") and resumes its conversation" "$T/err2"
	assert_equal "$(cat "$SECOND/continues")" "$(basename "$FIRST") $tip1"
	fetch=$(grep -A1 'fetch them with' "$T/err2" | tail -1 | sed 's/^.*]:  *//')
	eval "$fetch"
	branch2=aibox/task-$(basename "$SECOND")
	assert_equal "$(git rev-parse "$branch2^")" "$tip1"
	# What git log said in the second VM: the first task's commit was there.
	assert_equal "$(git show "$branch2:seen.txt")" "$(printf 'one\nsecond\nfirst')"
}

@test "task continue vm: the fake API sees the first task's turns in the continued conversation" {
	grep -qF "vm[${SECOND: -6}]: | I added two.txt." "$T/err2"
	# Every request of the continued task carries the first task's prompt and
	# last answer, and no stand-in of Claude Code's for a lost answer.
	run python3 - "$T/rec" <<-'PY'
		import glob, json, sys
		found = 0
		for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
		    body = json.load(open(f)).get("body") or {}
		    msgs = json.dumps(body.get("messages", []))
		    if "Now add two.txt." in msgs and body.get("tools"):
		        assert "PELICAN" in msgs, f
		        assert "I added one.txt." in msgs, f
		        assert "No response requested." not in msgs, f
		        found += 1
		print("requests of the continued task:", found)
		assert found > 0
	PY
	assert_success
}
