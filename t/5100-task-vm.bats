#!/usr/bin/env bats
# aibox task end to end with real parts: the real image (built by t/4000 into
# the test user's cache), the real Claude Code in the VM, aibox-proxy with the
# host's key, and t/fake-api as the API upstream (TLS with t/lib-tls's CA)
# through AIBOX_API_UPSTREAM and AIBOX_API_CA.  Each VM boots under TCG, so
# there are few: one task, booted in setup_file, serves every test that only
# reads what a task that went well left ("task vm: the task ..."); the others
# boot their own, as the boot is what they check.
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

# The shared task, in $S (its stdout $S/out, stderr $S/err, exit code
# $S/status, "yes" in $S/seccomp once aibox-task ran locked down with QEMU
# as its child): it starts from the tag v1 with its prompt from --file, with
# skills in ~/.claude, `commands: none` and a real env value in the config's
# env; Claude Code commits hello.txt, what it saw of ~/.claude and the env
# value, then holds 70 connections to the proxy at once
# until at least the 6 past the cap of 64 are closed (read -t 0: readable at
# their end), 15 s at most.
setup_file() {
	task_setup
	export S=$T
	mkdir -p "$HOME/.claude/skills/hello" "$HOME/.claude/commands"
	echo "a skill for the vm" >"$HOME/.claude/skills/hello/SKILL.md"
	echo "a command" >"$HOME/.claude/commands/hi.md"
	# a real env value: it comes with the go message, not over the session
	printf '  - AIBOX_T_VALUE\ncommands: none\n' >>"$AIBOX_HOME/projects/repo/config.yaml"
	export AIBOX_T_VALUE="a host value, with spaces"
	local commit conns
	commit='echo hello from the vm > hello.txt && cp ~/.claude/skills/hello/SKILL.md skill.txt && { { echo x >> ~/.claude/skills/hello/SKILL.md && echo writable; } 2>/dev/null || echo read-only; } > skill-rw.txt && { ls -A ~/.claude/commands > commands.txt 2>&1 || echo absent > commands.txt; } && printf "%s\\n" "$AIBOX_T_VALUE" > env-value.txt && git add hello.txt skill.txt skill-rw.txt commands.txt env-value.txt && git commit -q -m "Add hello.txt"'
	conns='for i in $(seq 70); do eval "exec $((i + 20))<>/dev/tcp/10.0.2.100/3128" || echo failed-$i; done; for t in $(seq 150); do n=0; for i in $(seq 70); do read -t 0 -u $((i + 20)) && n=$((n + 1)); done; [ $n -ge 6 ] && break; sleep 0.1; done; echo held, $n closed'
	api "$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "commit"}}},
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[2], "description": "connect"}}},
	  {"text": "I added hello.txt and committed it."}], "require_key": sys.argv[3]}))' \
		"$commit" "$conns" "$KEY")"
	echo "$FAKE_API_PID" >"$S/api.pid"
	git tag v1 HEAD~1
	printf 'Add a file hello.txt\nand commit it.\n' >"$T/plan.md"
	aibox task --from v1 --file "$T/plan.md" >"$S/out" 2>"$S/err" &
	TASK_PID=$!
	echo "$TASK_PID" >"$S/task.pid"
	# aibox execs aibox-task: the same pid, locked down while the VM runs
	wait_until 600 lockdown_seen "$TASK_PID" || true
	local status=0
	wait "$TASK_PID" || status=$?
	TASK_PID=
	rm "$S/task.pid"
	echo "$status" >"$S/status"
	stop_fake_api
	rm "$S/api.pid"
}

# teardown_file: what setup_file started, should it have stopped half-way.
teardown_file() {
	local f
	for f in "$S/task.pid" "$S/api.pid"; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	T=$S common_teardown
}

setup() {
	task_setup
}

teardown() {
	task_teardown
}

# lockdown_seen PID: true once PID runs under seccomp with QEMU as its child
# (then "yes" in $S/seccomp), or has ended.
lockdown_seen() {
	if grep -q '^Seccomp:[[:space:]]*2$' "/proc/$1/status" 2>/dev/null &&
		pgrep -P "$1" -f "$QEMU_VM" >/dev/null; then
		echo yes >"$S/seccomp"
		return 0
	fi
	gone "$1"
}

# shared: the shared task went well; DIR is its folder, ID its id.  On
# failure it shows what the task printed and logged.
shared() {
	DIR=$(cat "$S/out")
	ID=${DIR: -6}
	[ "$(cat "$S/status")" = 0 ] || { (T=$S AIBOX_HOME=$S/home/.aibox show); false; }
}

# fetch_shared: in a copy of the shared task's repository ($T/fetched, cd'd
# into), the fetch command the task printed, run as printed; BRANCH is the
# branch it fetched.
fetch_shared() {
	local fetch
	cp -a "$S/repo" "$T/fetched"
	cd "$T/fetched" || return 1
	fetch=$(grep -A1 'fetch them with' "$S/err" | tail -1 | sed 's/^.*]:  *//')
	[[ "$fetch" == "git fetch "* ]] || return 1
	eval "$fetch"
	BRANCH=aibox/task-$(basename "$DIR")
}

@test "task vm: the task exits 0 and prints its folder" {
	shared
	assert_equal "$DIR" "$(ls -d "$S"/home/.aibox/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
	run cat "$S/err"
	assert_output --partial "aibox[$ID]: the VM connected to localhost:3129"
	assert_output --partial "aibox[$ID]: Claude Code exited with 0"
	assert_output --partial "vm[$ID]: | I added hello.txt and committed it."
}

@test "task vm: the task starts from the tag of --from, with its prompt from --file" {
	shared
	run cat "$S/err"
	assert_output --partial "aibox[$ID]: task $ID starts from $(git -C "$S/repo" rev-parse v1)"
	assert_equal "$(cat "$DIR/prompt.txt")" "Add a file hello.txt
and commit it."
}

@test "task vm: the task's printed fetch command, run as printed, brings its one commit in" {
	shared
	fetch_shared
	assert_equal "$(git rev-list --count "v1..$BRANCH")" 1
	assert_equal "$(git show "$BRANCH:hello.txt")" "hello from the vm"
	assert_equal "$(git log -1 --format=%s "$BRANCH")" "Add hello.txt"
}

@test "task vm: the task saw ~/.claude's skills read-only, and commands: none left its commands out" {
	shared
	fetch_shared
	assert_equal "$(git show "$BRANCH:skill.txt")" "a skill for the vm"
	assert_equal "$(git show "$BRANCH:skill-rw.txt")" "read-only"
	assert_equal "$(git show "$BRANCH:commands.txt")" "absent"
	assert_equal "$(cat "$S/home/.claude/skills/hello/SKILL.md")" "a skill for the vm"
}

@test "task vm: the task's API requests carried the host's key; the VM never had it" {
	shared
	grep -rqF "\"x-api-key\": \"$KEY\"" "$S/rec"
	run grep -rlF "$KEY" "$DIR"
	assert_failure
}

@test "task vm: the task's aibox-task ran under seccomp while the VM ran" {
	shared
	assert_equal "$(cat "$S/seccomp" 2>/dev/null)" yes
}

@test "task vm: the task's guest clone placed the bundle's pack beside the host's start.idx, before the session" {
	shared
	# (docs/init-task.md, "The prepared clone")
	[ -f "$DIR/start.idx" ]
	grep -q "prepared clone: pack-" "$DIR/vm.log"
	# its env value came with the go message: PID 1's child ran the task
	# before the host connected (docs/init-task.md, "The early task")
	grep -qE '^\[ *[0-9.]+\] started by the init before the session \(the go message carried the secrets' "$DIR/vm.log"
}

@test "task vm: the task's env value came with the go message, Claude Code had it, and the session's stdin brought none" {
	shared
	fetch_shared
	assert_equal "$(git show "$BRANCH:env-value.txt")" "a host value, with spaces"
	run jq -r '.env_names | join(",")' "$DIR/settings.json"
	assert_output AIBOX_T_VALUE
	run ! grep -q "nothing of them was used" "$DIR/vm.log" "$S/err"
}

@test "task vm: the task's Claude Code started before the session attached, and aibox.log says how much of it came before" {
	shared
	# (docs/init-task.md, "The early task"; docs/task-host.md, "aibox.log")
	run python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(0 < r["steps"][1]["start_s"] < r["session_s"], r["session_fork_s"] <= r["session_s"])' "$DIR/result.json"
	assert_output "True True"
	grep -qE '^agent [0-9.]+s \(guest\), [0-9.]+s of it before the session, [0-9.]+s before the banner$' "$DIR/aibox.log"
	grep -qE '^results [0-9.]+s \(session - clone - agent, their parts in the session\)$' "$DIR/aibox.log"
}

@test "task vm: sshd ran the task's forced command with the init as root's shell, no shell between" {
	shared
	# (docs/image.md, "The guest"; docs/init-task.md, "What happens")
	grep -qE '^\[ *[0-9.]+\] session: sshd started .* which attached to the task the init started [0-9.]+ s later \(no shell: the init is root.s shell\) \(at [0-9.]+ s of this log\)$' "$DIR/vm.log"
}

@test "task vm: the task's aibox.log has the time of every phase" {
	shared
	# (docs/task-host.md)
	for p in start bundle proxy boot session stop clone agent results check total overhead; do
		grep -qE "^$p [0-9]+\.[0-9]{3}s" "$DIR/aibox.log" || { echo "no time for $p" >&2; false; }
	done
}

@test "task vm: the task's aibox.log times the SSH session's own parts: key exchange, authentication, the command's start, the close" {
	shared
	# (docs/task-host.md, "aibox.log")
	grep -qE '^ssh: key exchange [0-9]+\.[0-9]{3}s, authentication [0-9]+\.[0-9]{3}s, command started [0-9]+\.[0-9]{3}s, end to close [0-9]+\.[0-9]{3}s$' "$DIR/aibox.log"
}

@test "task vm: the task left no QEMU or proxy running, and its lock free" {
	shared
	run pgrep -f "$DIR"
	assert_failure
	flock -n "$DIR.lock" true
}

@test "task vm: the task's connections at once were capped at 64; the rest closed and logged in proxy.log" {
	shared
	# Claude Code's own connection holds a slot too: at least 6 of the 70 found
	# none; the last line logged (at a power of two) counts them.
	n=$(grep -o ' refused - (too many connections from the VM: 64 at once; [0-9]* refused so far' \
		"$DIR/proxy.log" | tail -1 | grep -o '[0-9]* refused so far' | cut -d' ' -f1)
	[ "${n:-0}" -ge 4 ] || { cat "$DIR/proxy.log"; false; }
	[ "$n" -lt 70 ]
}

@test "task vm: Claude Code exiting with an error gives exit 1" {
	api '{"turns": [{"error": {"status": 400, "type": "invalid_request_error", "message": "scripted failure"}}], "require_key": "'"$KEY"'"}'
	run --separate-stderr aibox task "Do something."
	[ "$status" -eq 1 ] || { echo "$stderr" >"$T/err"; show; }
	assert_failure 1
	[[ "$stderr" == *"Claude Code exited with 1"* ]]
	[[ "$stderr" == *"the task did not finish"* ]]
	# Listed, shown and read as not finished.
	dir=$(task_dir)
	id=${dir: -6}
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r '.[0] | [.id, .state, .finished, .exit] | map(tostring) | join(" ")')" \
		"$id not finished false 1"
	run aibox tasks show --json "$id"
	assert_success
	assert_equal "$(echo "$output" | jq -r '[.state, .record.state, .record.exit] | map(tostring) | join(" ")')" \
		"not finished not finished 1"
	run aibox tasks show "$id"
	assert_success
	assert_line --index 0 "task $id, ${dir##*/}: not finished"
	assert_line --regexp "aibox\\[$id\\]: the task did not finish"
	run aibox tasks log "$id"
	assert_success
	assert_output --partial "scripted failure"
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
	qemu=$(wait_child "$TASK_PID" "$QEMU_VM") || qemu=
	[ -n "$qemu" ]
	proxy=$(pgrep -P "$TASK_PID" -f aibox-proxy)
	[ -n "$proxy" ]
	# any moment of the run will do: this one is 2 s into the boot
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
