#!/usr/bin/env bats
# aibox task end to end with real parts: the real image (built by t/4000 into
# the test user's cache), the real Claude Code in the VM, aibox-proxy with the
# host's key, and t/fake-api as the API upstream (TLS with t/lib-tls's CA)
# through AIBOX_API_UPSTREAM and AIBOX_API_CA.  Each test boots one VM under
# TCG, so there are few of them.
load lib-common
load lib-vm
load lib-tls
load lib-claude
load lib-task
bats_require_minimum_version 1.5.0

setup() {
	task_setup
}

teardown() {
	task_teardown
}

@test "task vm: one commit end to end, from a tag, prompt from --file, key kept on the host, seccomp in force, ~/.claude shared read-only" {
	# the test user's ~/.claude (HOME is under $T): skills shared, commands: none
	mkdir -p "$HOME/.claude/skills/hello" "$HOME/.claude/commands"
	echo "a skill for the vm" >"$HOME/.claude/skills/hello/SKILL.md"
	echo "a command" >"$HOME/.claude/commands/hi.md"
	printf 'commands: none\n' >>"$AIBOX_HOME/projects/repo/config.yaml"
	api '{"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "echo hello from the vm > hello.txt && cp ~/.claude/skills/hello/SKILL.md skill.txt && { { echo x >> ~/.claude/skills/hello/SKILL.md && echo writable; } 2>/dev/null || echo read-only; } > skill-rw.txt && { ls -A ~/.claude/commands > commands.txt 2>&1 || echo absent > commands.txt; } && git add hello.txt skill.txt skill-rw.txt commands.txt && git commit -q -m \"Add hello.txt\"", "description": "commit"}}},
	  {"text": "I added hello.txt and committed it."}], "require_key": "'"$KEY"'"}'
	git tag v1 HEAD~1
	printf 'Add a file hello.txt\nand commit it.\n' >"$T/plan.md"
	aibox task --from v1 --file "$T/plan.md" >"$T/out" 2>"$T/err" &
	TASK_PID=$!
	# aibox execs aibox-task: the same pid, locked down while the VM runs
	seccomp=
	for i in $(seq 600); do
		kill -0 "$TASK_PID" 2>/dev/null || break
		if grep -q '^Seccomp:[[:space:]]*2$' "/proc/$TASK_PID/status" 2>/dev/null &&
			pgrep -P "$TASK_PID" -f qemu-system >/dev/null; then
			seccomp=yes
			break
		fi
		sleep 0.5
	done
	wait "$TASK_PID" && status=0 || status=$?
	TASK_PID=
	[ "$status" -eq 0 ] || show
	[ "$status" -eq 0 ]
	[ "$seccomp" = yes ]
	dir=$(task_dir)
	assert_equal "$(cat "$T/out")" "$dir"
	id=${dir: -6}
	run cat "$T/err"
	assert_output --partial "aibox[$id]: task $id starts from $(git rev-parse v1)"
	assert_output --partial "aibox[$id]: the VM connected to localhost:3129"
	assert_output --partial "aibox[$id]: Claude Code exited with 0"
	assert_output --partial "vm[$id]: | I added hello.txt and committed it."
	assert_equal "$(cat "$dir/prompt.txt")" "Add a file hello.txt
and commit it."
	# the printed fetch command, run as printed, brings the commit in
	fetch=$(grep -A1 'fetch them with' "$T/err" | tail -1 | sed 's/^.*]:  *//')
	[[ "$fetch" == "git -c transfer.fsckObjects=true fetch "* ]]
	eval "$fetch"
	branch=aibox/task-$(basename "$dir")
	assert_equal "$(git rev-list --count "v1..$branch")" 1
	assert_equal "$(git show "$branch:hello.txt")" "hello from the vm"
	assert_equal "$(git log -1 --format=%s "$branch")" "Add hello.txt"
	# the skill was readable in the VM and not writable; commands: none left it out
	assert_equal "$(git show "$branch:skill.txt")" "a skill for the vm"
	assert_equal "$(git show "$branch:skill-rw.txt")" "read-only"
	assert_equal "$(git show "$branch:commands.txt")" "absent"
	assert_equal "$(cat "$HOME/.claude/skills/hello/SKILL.md")" "a skill for the vm"
	# the fake saw the host's key; the VM never had it
	grep -rqF "\"x-api-key\": \"$KEY\"" "$T/rec"
	run grep -rlF "$KEY" "$dir"
	assert_failure
	# the guest's clone placed the bundle's pack beside the host's start.idx
	# (docs/init-task.md, "The prepared clone")
	[ -f "$dir/start.idx" ]
	grep -q "prepared clone: pack-" "$dir/vm.log"
	# every phase has its time in aibox.log (docs/task-host.md)
	for p in start bundle proxy boot session stop clone agent results check total overhead; do
		grep -qE "^$p [0-9]+\.[0-9]{3}s" "$dir/aibox.log"
	done
	# no QEMU or proxy left, the task's lock is free
	run pgrep -f "$dir"
	assert_failure
	flock -n "$dir.lock" true
}

@test "task vm: Claude Code exiting with an error gives exit 1" {
	api '{"turns": [{"error": {"status": 400, "type": "invalid_request_error", "message": "scripted failure"}}], "require_key": "'"$KEY"'"}'
	run --separate-stderr aibox task "Do something."
	[ "$status" -eq 1 ] || { echo "$stderr" >"$T/err"; show; }
	assert_failure 1
	[[ "$stderr" == *"Claude Code exited with 1"* ]]
	[[ "$stderr" == *"the task did not finish"* ]]
}

@test "task vm: a config task cap (not passed to Claude Code) ends the task after the turn that crossed it" {
	# The first turn reports a million input tokens: 3 USD or more at any price.
	api '{"turns": [{"tool_use": {"name": "Bash", "input": {"command": "echo one > one.txt", "description": "one"}}, "usage": {"input_tokens": 1000000}},
	  {"tool_use": {"name": "Bash", "input": {"command": "echo two > two.txt", "description": "two"}}},
	  {"text": "done"}], "require_key": "'"$KEY"'"}'
	printf 'budget:\n  task: 1.00\n' >>"$AIBOX_HOME/projects/repo/config.yaml"
	run --separate-stderr aibox task "Do two things."
	[ "$status" -eq 1 ] || { echo "$stderr" >"$T/err"; show; }
	assert_failure 1
	dir=$(task_dir)
	[[ "$stderr" == *"ended by budget: the task cap of 1.000000 USD was reached"* ]]
	[[ "$stderr" == *"aibox counted "* ]]
	[ "$(jq -r '.ended_by_cap' "$dir/usage.json")" = task ]
	[ "$(jq -r '.caps.task_usd' "$dir/usage.json")" = 1 ]
	[ "$(jq -r '.refused >= 1' "$dir/usage.json")" = true ]
	# Claude Code was not told the cap: the proxy's refusal is what it saw
	[ "$(jq -r .max_budget_usd "$dir/settings.json")" = null ]
	grep -q "budget of 1.000000 USD is spent" "$dir/transcript.jsonl"
	# the turn that crossed the cap ran; the request after it never reached the API
	for f in "$T"/rec/*.json; do
		[ "$(jq '[select((.body.tools // []) | length > 0) | .body.messages[] | select(.role == "assistant")] | length' "$f")" -eq 0 ]
	done
}

@test "task vm: SIGTERM mid-run stops the VM, keeps what came back, releases the locks, exit 1" {
	api '{"turns": [{"stall": 300}], "require_key": "'"$KEY"'"}'
	aibox task "Wait." >"$T/out" 2>"$T/err" &
	TASK_PID=$!
	qemu=
	for i in $(seq 600); do
		qemu=$(pgrep -P "$TASK_PID" -f qemu-system) && break
		kill -0 "$TASK_PID" 2>/dev/null || break
		sleep 0.2
	done
	[ -n "$qemu" ]
	proxy=$(pgrep -P "$TASK_PID" -f aibox-proxy)
	[ -n "$proxy" ]
	sleep 2
	kill -TERM "$TASK_PID"
	wait "$TASK_PID" && status=0 || status=$?
	TASK_PID=
	[ "$status" -eq 1 ] || show
	[ "$status" -eq 1 ]
	grep -q "the VM was stopped" "$T/err"
	run ! kill -0 "$qemu" 2>/dev/null
	run ! kill -0 "$proxy" 2>/dev/null
	dir=$(task_dir)
	[ -f "$dir/aibox.log" ]
	flock -n "$dir.lock" true
	# aibox tasks clean sees the task as ended: it removes its start.bundle
	[ -f "$dir/start.bundle" ]
	run aibox tasks clean
	assert_success
	[ ! -e "$dir/start.bundle" ]
}

@test "task vm: a shallow clone is refused before any VM starts" {
	cd "$T"
	git clone -q --depth 1 "file://$T/repo" shallow
	cd shallow
	run aibox task x
	assert_failure 2
	assert_output --partial "is a shallow clone"
	run pgrep -f qemu-system.*shallow
	assert_failure
}

@test "task vm: the guest's connections at once are capped at 64; the rest are closed and logged in proxy.log" {
	# 70 connections to the proxy forward held open at once, then closed.
	cmd='for i in $(seq 70); do eval "exec $((i + 20))<>/dev/tcp/10.0.2.100/3128" || echo failed-$i; done; sleep 5; echo held'
	api "$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "connect"}}},
	  {"text": "Done."}], "require_key": sys.argv[2]}))' "$cmd" "$KEY")"
	run --separate-stderr aibox task "Open connections."
	[ "$status" -eq 0 ] || { echo "$stderr" >"$T/err"; show; }
	assert_success
	dir=$(task_dir)
	# Claude Code's own connection holds a slot too: at least 6 of the 70 found
	# none; the last line logged (at a power of two) counts them.
	n=$(grep -o ' refused - (too many connections from the VM: 64 at once; [0-9]* refused so far' \
		"$dir/proxy.log" | tail -1 | grep -o '[0-9]* refused so far' | cut -d' ' -f1)
	[ "${n:-0}" -ge 4 ] || { cat "$dir/proxy.log"; false; }
	[ "$n" -lt 70 ]
	run pgrep -f "$dir"
	assert_failure
}
