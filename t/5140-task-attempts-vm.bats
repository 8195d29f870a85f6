#!/usr/bin/env bats
# aibox task --attempts 4 end to end (docs/tasks.md, "Several attempts"):
# four VMs under TCG, the real Claude Code in each, t/fake-api scripted per
# attempt (its "attempts": each conversation its own script, in the order
# they come).  One group, booted once in setup_file, serves every test: they
# only read what it left.  One attempt commits two files in two commits,
# passes the config's check and spends 30 USD in its first turn; one commits
# a .gitmodules whose URL git would run as an option, which the host's
# bundle check refuses; the third is held at its first turn (the fake API's
# wait_file) until the other two have ended, then spends 30 USD more: the
# project's day cap of 50 USD, reached by the group and by no attempt alone,
# stops it at its next request.  The fourth is held at its first turn for
# good: once the other three have ended, the group gets Ctrl-C as a terminal
# sends it (SIGINT to its process group), which stops that one alone.  Which
# attempt got which script is told from what each did, not from the order of
# the folders.
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup_file() {
	task_setup
	export S=$T
	printf 'memory: 1G\ncpus: 1\ncheck: {run: "test -f a.txt", timeout: 30s}\nbudget:\n  day: 50\n' \
		>>"$AIBOX_HOME/projects/repo/config.yaml"
	local good hostile n d
	good='printf "one\ntwo\nthree\n" > a.txt && echo first > b.txt && git add a.txt b.txt && git commit -q -m "Add a and b" && echo four >> a.txt && git commit -q -am "More a"'
	hostile='printf "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch\${IFS}pwned\n" > .gitmodules && git add .gitmodules && git commit -q -m "Add a submodule"'
	# claude-opus-4-8: 5 USD a million input tokens, so 6 million are 30 USD
	api "$(python3 -c 'import json, sys; print(json.dumps({"attempts": [
	  {"turns": [{"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "commit"}},
	              "usage": {"input_tokens": 6000000, "output_tokens": 2000}},
	             {"text": "Attempt A: two commits."}],
	   "usage": {"input_tokens": 1000, "output_tokens": 2000}},
	  {"turns": [{"tool_use": {"name": "Bash", "input": {"command": sys.argv[2], "description": "commit"}}},
	             {"text": "Attempt B: a submodule."}],
	   "usage": {"input_tokens": 3000, "output_tokens": 500}},
	  {"turns": [{"tool_use": {"name": "Bash", "input": {"command": "echo c > c.txt", "description": "write"}},
	              "wait_file": sys.argv[4], "usage": {"input_tokens": 6000000, "output_tokens": 100}},
	             {"text": "Attempt C: past the cap."}],
	   "usage": {"input_tokens": 2000, "output_tokens": 300}},
	  {"turns": [{"text": "Attempt D: never answered.", "wait_file": sys.argv[5]}],
	   "usage": {"input_tokens": 700, "output_tokens": 100}}],
	  "require_key": sys.argv[3]}))' "$good" "$hostile" "$KEY" "$S/gate" "$S/never")"
	echo "$FAKE_API_PID" >"$S/api.pid"
	# In a process group of its own, as a terminal's foreground job is.
	setsid aibox task --attempts 4 --model claude-opus-4-8 --timeout 20m "Make the change" >"$S/out" 2>"$S/err" &
	echo $! >"$S/task.pid"
	# The gate opens once two attempts have written their record and the
	# fourth is held (before the cap, which would refuse its first turn).
	until_records 2 "$S/never"
	touch "$S/gate"
	# Ctrl-C once three have ended and the fourth is still held.
	until_records 3 "$S/never"
	for _ in $(seq 120); do
		[ "$(pgrep -c -P "$(cat "$S/task.pid")")" -gt 1 ] || break
		sleep 0.5
	done
	descendants "$(cat "$S/task.pid")" >"$S/procs-before-int"
	kill -INT -- "-$(cat "$S/task.pid")"
	local status=0
	wait "$(cat "$S/task.pid")" || status=$?
	rm "$S/task.pid"
	echo "$status" >"$S/status"
	stop_fake_api
	rm "$S/api.pid"
}

# until_records N FILE: at least N attempts have written their record and
# the fake API holds a turn for FILE (at most 15 minutes).
until_records() {
	local n d
	for _ in $(seq 1800); do
		n=0
		for d in $(task_dir); do
			[ -s "$d/summary.json" ] && n=$((n + 1))
		done
		[ "$n" -lt "$1" ] || ! grep -qF "waiting for $2" "$S/fake-api.log" || break
		sleep 0.5
	done
}

# descendants PID: each process under PID, "pid program-and-arguments" a line.
descendants() {
	local p
	for p in $(pgrep -P "$1"); do
		echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		descendants "$p"
	done
}

teardown_file() {
	[ -s "$S/task.pid" ] && kill "$(cat "$S/task.pid")" 2>/dev/null
	[ -s "$S/api.pid" ] && kill "$(cat "$S/api.pid")" 2>/dev/null
	T=$S common_teardown
}

setup() {
	common_setup
	export AIBOX_HOME=$S/home/.aibox
	cd "$S/repo" || return 1
}

teardown() {
	common_teardown
}

# group: the group ran; GID is its id, GOOD, BAD, CAP and STOP the folders
# of the attempt that committed a.txt, of the one whose bundle was refused,
# of the one the day cap ended and of the one Ctrl-C stopped.
group() {
	local d
	[ "$(wc -l <"$S/out")" -eq 4 ] || { (T=$S; show "$S/err"); false; }
	GID=$(cat "$(head -1 "$S/out")/group")
	GOOD= BAD= CAP= STOP=
	for d in $(cat "$S/out"); do
		if grep -qF "aibox[${d: -6}]: the task did not finish: changes.bundle refused" "$S/err"; then
			BAD=$d
		elif grep -qF "aibox[${d: -6}]: ended by budget: the day cap" "$S/err"; then
			CAP=$d
		elif grep -qF "aibox[${d: -6}]: the task did not finish: the VM was stopped by SIGINT" "$S/err"; then
			STOP=$d
		else
			GOOD=$d
		fi
	done
	[ -n "$GOOD" ] && [ -n "$BAD" ] && [ -n "$CAP" ] && [ -n "$STOP" ] || { (T=$S; show "$S/err"); false; }
}

@test "attempts vm: each attempt ran its own script; the group exits 0 with one attempt finished" {
	group
	assert_equal "$(cat "$S/status")" 0
	run grep -c "conversation .* gets attempts\[[0123]\]" "$S/fake-api.log"
	assert_output 4
	grep -qF "vm[${GOOD: -6}]: | Attempt A: two commits." "$S/err"
	grep -qF "vm[${BAD: -6}]: | Attempt B: a submodule." "$S/err"
	run grep -F "vm[${CAP: -6}]: | Attempt C: past the cap." "$S/err"
	assert_failure
	grep -qF "aibox[$GID]: group $GID: 1 of 4 attempts finished" "$S/err"
}

@test "attempts vm: compare shows the good attempt's real figures from its checked bundle, and its check" {
	group
	run --separate-stderr aibox tasks compare --json "$GID"
	assert_success
	run jq -c --arg g "${GOOD: -6}" '.[] | select(.id == $g) | [.state, .commits, .files, .added, .removed, .check.exit_code, .check.timed_out]' <<<"$output"
	assert_success
	assert_output '["finished",2,2,5,0,0,false]'
	# the figures are the bundle's: the fetched branch has those two commits
	git fetch -q "$GOOD/changes.bundle" "aibox/task:got"
	assert_equal "$(git rev-list --count HEAD..got)" 2
	assert_equal "$(git show got:a.txt)" "one
two
three
four"
	run --separate-stderr aibox tasks compare "$GID"
	assert_success
	[[ "$output" == *"${GOOD: -6}  finished"*"check passed"*"2 commits, 2 files, +5 -0"* ]] || fail "$output"
}

@test "attempts vm: the hostile attempt's bundle is refused, and only its own" {
	group
	grep -qF "aibox[${BAD: -6}]: the task did not finish: changes.bundle refused: " "$S/err"
	grep -qF "(gitmodulesUrl)" "$S/err"
	run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"], r["group"])' "$BAD/summary.json"
	assert_success
	assert_output "not finished $GID"
	run --separate-stderr aibox tasks show "${BAD: -6}"
	assert_success
	refute_output --partial "fetch them with"
	# the other attempt's record, bundle and fetch command are whole
	run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"], r["group"])' "$GOOD/summary.json"
	assert_success
	assert_output "finished $GID"
	grep -qE "aibox\[${GOOD: -6}\]: the changes end at [0-9a-f]{12}, fetch them with$" "$S/err"
	[ ! -e "$S/repo/pwned" ] || fail "the hostile URL ran"
}

@test "attempts vm: the group's line gives the total aibox counted, the sum of each attempt's spend, which the day's ledger counted once" {
	group
	run python3 -c '
import json, sys
nano = [json.load(open(d + "/summary.json"))["hosts"]["usage"]["nano_usd"] for d in sys.argv[2:]]
assert all(n > 0 for n in nano[:3]) and len(set(nano[:3])) == 3, nano
t = sum(nano)
ledger = open(sys.argv[1]).readline()
assert int(ledger) == t, (ledger, nano)
print("%d.%06d" % (t // 10**9, t % 10**9 // 1000))' "$(ls -d "$AIBOX_HOME"/projects/repo/spend/2*)" "$GOOD" "$BAD" "$CAP" "$STOP"
	assert_success
	grep -qF "aibox[$GID]: group $GID: 1 of 4 attempts finished (${GOOD: -6}), 1 stopped (${STOP: -6}); aibox counted $output USD for them all" "$S/err" ||
		fail "$(grep -F "group $GID" "$S/err")"
}

@test "attempts vm: the day cap, reached by the group and by no attempt alone, stops the attempt that crossed it; the others are whole" {
	group
	# 30 USD each from the attempt that finished and the one that crossed, both below the cap of 50
	run python3 -c '
import json, sys
u = [json.load(open(d + "/summary.json"))["hosts"]["usage"] for d in sys.argv[1:]]
good, cap = u
assert 30 * 10**9 <= good["nano_usd"] < 31 * 10**9, good
assert 30 * 10**9 <= cap["nano_usd"] < 31 * 10**9, cap
assert good["ended_by_cap"] is None and cap["ended_by_cap"] == "day" and cap["refused"] >= 1, u
print(cap["refused"])' "$GOOD" "$CAP"
	assert_success
	refused=$output
	# its own words, in the summary and to Claude Code
	run grep -F "aibox[${CAP: -6}]: ended by budget: the day cap of 50.000000 USD was reached ($refused request" "$S/err"
	assert_success
	run grep -F "aibox[${CAP: -6}]: the task did not finish" "$S/err"
	assert_success
	run grep -c "the project's daily budget of 50.000000 USD is spent" "$CAP/transcript.jsonl"
	assert_success
	# compare shows it as ended by the cap, the others as they ended
	run --separate-stderr aibox tasks compare --json "$GID"
	assert_success
	run jq -c --arg g "${GOOD: -6}" --arg b "${BAD: -6}" --arg c "${CAP: -6}" \
		'[(.[] | select(.id == $g) | [.state, .ended_by_cap, .commits]), (.[] | select(.id == $b) | [.state, .ended_by_cap]), (.[] | select(.id == $c) | [.state, .ended_by_cap])]' <<<"$output"
	assert_success
	assert_output '[["finished",null,2],["not finished",null],["not finished","day"]]'
	run --separate-stderr aibox tasks compare "$GID"
	assert_success
	[[ "$output" == *"${CAP: -6}  not finished"*"
        ended by budget: the day cap of 50.000000 USD was reached ($refused request"* ]] || fail "$output"
	# the finished attempt's record, bundle and fetch command are whole
	run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"], r["group"])' "$GOOD/summary.json"
	assert_success
	assert_output "finished $GID"
	grep -qE "aibox\[${GOOD: -6}\]: the changes end at [0-9a-f]{12}, fetch them with$" "$S/err"
	git bundle verify -q "$GOOD/changes.bundle"
}

@test "attempts vm: Ctrl-C with one attempt finished stops the one still running, marked as stopped; the finished one stays whole and usable" {
	group
	# it was running when the Ctrl-C came: the fake API held its turn, never let go
	run grep -F "waiting for $S/never" "$S/fake-api.log"
	assert_success
	run grep -F "$S/never is there" "$S/fake-api.log"
	assert_failure
	run --separate-stderr jq -r '[.state, .why, .group, .exit] | @tsv' "$STOP/summary.json"
	assert_success
	assert_output "$(printf 'not finished\tthe VM was stopped by SIGINT\t%s\t1' "$GID")"
	run --separate-stderr aibox tasks list
	assert_success
	assert_line --regexp "^${STOP: -6} +killed "
	assert_line --regexp "^${GOOD: -6} +finished "
	run --separate-stderr aibox tasks compare --json "$GID"
	assert_success
	run jq -c --arg g "${GOOD: -6}" --arg s "${STOP: -6}" \
		'[(.[] | select(.id == $g) | [.state, .commits]), (.[] | select(.id == $s) | [.state, .commits, .fetch])]' <<<"$output"
	assert_success
	assert_output '[["finished",2],["killed",null,null]]'
	# the finished attempt: its record, and the fetch command its show prints, as before the Ctrl-C
	run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"], r["exit"], r["group"])' "$GOOD/summary.json"
	assert_success
	assert_output "finished 0 $GID"
	run --separate-stderr aibox tasks show "${GOOD: -6}"
	assert_success
	fetch=$(sed -n "s/^.* aibox\[${GOOD: -6}\]:   \(git fetch .*\)\$/\1/p" <<<"$output")
	[[ "$fetch" == "git fetch $GOOD/changes.bundle "* ]] || fail "$output"
	eval "$fetch"
	assert_equal "$(git rev-list --count "HEAD..aibox/task-$(basename "$GOOD")")" 2
	# nothing of the group is left: its attempt, QEMU and proxy ran before the Ctrl-C
	grep -qF -- "--attempt-of $GID" "$S/procs-before-int" || fail "$(cat "$S/procs-before-int")"
	grep -q "^[0-9]* [^ ]*qemu-system-x86_64 .*$STOP" "$S/procs-before-int" || fail "$(cat "$S/procs-before-int")"
	grep -q "^[0-9]* [^ ]*aibox-proxy " "$S/procs-before-int" || fail "$(cat "$S/procs-before-int")"
	while read -r pid args; do
		wait_until 10 ended "$pid" || fail "left running: $pid $args"
	done <"$S/procs-before-int"
	run flock -n "$STOP.lock" true
	assert_success
}

# ended PID: PID has ended (gone, or a zombie not yet reaped).
ended() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}
