#!/usr/bin/env bats
# aibox task --attempts 2 end to end (docs/tasks.md, "Several attempts"): two
# VMs under TCG, the real Claude Code in each, t/fake-api scripted per attempt
# (its "attempts": each conversation its own script, in the order they come).
# One group, booted once in setup_file, serves every test: they only read
# what it left.  One attempt commits two files in two commits and passes the
# config's check; the other commits a .gitmodules whose URL git would run as
# an option, which the host's bundle check refuses.  Which attempt got which
# script is told from what each did, not from the order of the folders.
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup_file() {
	task_setup
	export S=$T
	printf 'memory: 1G\ncpus: 1\ncheck: {run: "test -f a.txt", timeout: 30s}\n' \
		>>"$AIBOX_HOME/projects/repo/config.yaml"
	local good hostile
	good='printf "one\ntwo\nthree\n" > a.txt && echo first > b.txt && git add a.txt b.txt && git commit -q -m "Add a and b" && echo four >> a.txt && git commit -q -am "More a"'
	hostile='printf "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch\${IFS}pwned\n" > .gitmodules && git add .gitmodules && git commit -q -m "Add a submodule"'
	api "$(python3 -c 'import json, sys; print(json.dumps({"attempts": [
	  {"turns": [{"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "commit"}}},
	             {"text": "Attempt A: two commits."}],
	   "usage": {"input_tokens": 1000, "output_tokens": 2000}},
	  {"turns": [{"tool_use": {"name": "Bash", "input": {"command": sys.argv[2], "description": "commit"}}},
	             {"text": "Attempt B: a submodule."}],
	   "usage": {"input_tokens": 3000, "output_tokens": 500}}],
	  "require_key": sys.argv[3]}))' "$good" "$hostile" "$KEY")"
	echo "$FAKE_API_PID" >"$S/api.pid"
	local status=0
	aibox task --attempts 2 --timeout 10m "Make the change" >"$S/out" 2>"$S/err" || status=$?
	echo "$status" >"$S/status"
	stop_fake_api
	rm "$S/api.pid"
}

teardown_file() {
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

# group: the group ran; GID is its id, GOOD and BAD the folders of the attempt
# that committed a.txt and of the one whose bundle was refused.
group() {
	local d
	[ "$(wc -l <"$S/out")" -eq 2 ] || { (T=$S; show "$S/err"); false; }
	GID=$(cat "$(head -1 "$S/out")/group")
	GOOD= BAD=
	for d in $(cat "$S/out"); do
		if grep -qF "aibox[${d: -6}]: the task did not finish: changes.bundle refused" "$S/err"; then
			BAD=$d
		else
			GOOD=$d
		fi
	done
	[ -n "$GOOD" ] && [ -n "$BAD" ] || { (T=$S; show "$S/err"); false; }
}

@test "attempts vm: each attempt ran its own script; the group exits 0 with one attempt finished" {
	group
	assert_equal "$(cat "$S/status")" 0
	run grep -c "conversation .* gets attempts\[[01]\]" "$S/fake-api.log"
	assert_output 2
	grep -qF "vm[${GOOD: -6}]: | Attempt A: two commits." "$S/err"
	grep -qF "vm[${BAD: -6}]: | Attempt B: a submodule." "$S/err"
	grep -qF "aibox[$GID]: group $GID: 1 of 2 attempts finished" "$S/err"
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

@test "attempts vm: the group's line gives the total aibox counted, the sum of each attempt's spend" {
	group
	run python3 -c '
import json, sys
nano = [json.load(open(d + "/summary.json"))["hosts"]["usage"]["nano_usd"] for d in sys.argv[1:]]
assert all(n > 0 for n in nano) and nano[0] != nano[1], nano
t = sum(nano)
print("%d.%06d" % (t // 10**9, t % 10**9 // 1000))' "$GOOD" "$BAD"
	assert_success
	grep -qF "aibox[$GID]: group $GID: 1 of 2 attempts finished; aibox counted $output USD for them all" "$S/err" ||
		fail "$(grep -F "group $GID" "$S/err")"
}
