#!/usr/bin/env bats
# common/results: result.json from the VM is checked field by field, and the
# summary lines say what the product description's "Results" shows.
load lib-common

C40=f3572af8c6df0123456789abcdef0123456789ab
S40=0123456789abcdef0123456789abcdef01234567

good() {
	cat >result.json <<-JSON
		{
		  "version": 1,
		  "steps": [ { "name": "clone", "status": "ok", "seconds": 1.25, "exit_code": 0 },
		             { "name": "claude", "status": "ok", "seconds": 9 },
		             { "name": "commit", "status": "skipped", "seconds": 0 },
		             { "name": "bundle", "status": "ok", "seconds": 0.5, "exit_code": 0 } ],
		  "failed_step": null,
		  "claude": { "exit_code": 0, "num_turns": 4, "duration_ms": 8321,
		              "total_cost_usd": 0.0512, "ended_by": "completed",
		              "last_message": "I added a \"Purpose\" section to the README and committed it as f3572af.\nSecond line.\n",
		              "something_new": [1, 2] },
		  "start_commit": "$S40", "end_commit": "$C40", "changes": true,
		  "future_field": {"x": 1}
		}
	JSON
}

@test "results: the summary of a task that made changes" {
	good
	run test-task results result.json --end $C40 --bundle /home/u/.aibox/projects/p/tasks/20261007-170916-259e07/changes.bundle \
		--branch aibox/task-20261007-170916-259e07
	assert_success
	assert_output 'aibox: Claude Code exited with 0
aibox: 4 turns in 8.321s, about 0.05 USD at API prices, ended by completed
vm: | I added a "Purpose" section to the README and committed it as f3572af.
vm: | Second line.
aibox: the changes end at f3572af8c6df, fetch them with
aibox:   git -c transfer.fsckObjects=true fetch /home/u/.aibox/projects/p/tasks/20261007-170916-259e07/changes.bundle aibox/task:aibox/task-20261007-170916-259e07'
}

@test "results: no changes, a failed step, a missing result" {
	cat >result.json <<-JSON
		{ "version": 1, "steps": [ { "name": "clone", "status": "timeout", "seconds": 600 } ],
		  "failed_step": "clone", "claude": null, "start_commit": "$S40", "end_commit": null,
		  "changes": false }
	JSON
	run test-task results result.json --no-changes 1
	assert_success
	assert_output 'aibox: the step clone timed out
aibox: Claude Code did not run
aibox: no changes'
	run test-task results - --no-changes 1
	assert_output 'aibox: no changes'
}

@test "results: no 'no changes' unless the session says so (a failed boot, a stop, refused results)" {
	printf '{"version":1,"steps":[],"claude":null,"changes":false}' >result.json
	run test-task results result.json
	assert_success
	refute_line "aibox: no changes"
	run test-task results -
	assert_success
	assert_output ''
}

@test "results: the end commit printed is the checked bundle's, not result.json's" {
	good
	run test-task results result.json --end 1111111111111111111111111111111111111111
	assert_line "aibox: the changes end at 111111111111, fetch them with"
}

@test "results: changes the host did not accept are not called no changes" {
	good
	run test-task results result.json
	assert_success
	assert_line "aibox: nothing to fetch"
	refute_line "aibox: no changes"
	refute_line --partial "fetch them with"
}

@test "results: Claude Code's parts that are missing are left out" {
	printf '{"version":1,"steps":[],"claude":{"exit_code":1,"ended_by":"error"}}' >result.json
	run test-task results result.json --no-changes 1
	assert_output 'aibox: Claude Code exited with 1
aibox: ended by error
aibox: no changes'
	printf '{"version":1,"steps":[],"claude":{"num_turns":1,"duration_ms":5,"last_message":"\\n\\n"}}' >result.json
	run test-task results result.json --no-changes 1
	assert_output 'aibox: 1 turn in 0.005s
aibox: no changes'
}

@test "results: a multi-line message keeps its empty lines and carries its control bytes to the printer" {
	printf '{"version":1,"steps":[],"claude":{"last_message":"a\\r\\n\\nb\\u001b[2Jc"}}' >result.json
	run test-task results result.json --no-changes 1
	assert_output "$(printf 'vm: | a\nvm: |\nvm: | b\033[2Jc\naibox: no changes')"
}

@test "results: fields of the wrong type, range or value refuse the file" {
	refused() {
		printf '%s' "$1" >result.json
		run test-task results result.json
		assert_failure
		assert_output "refused: result.json: $2"
	}
	refused '[]' "not an object"
	refused '{"steps":[]}' "no 'version'"
	refused '{"version":2,"steps":[]}' "'version' is out of range"
	refused '{"version":"1","steps":[]}' "'version' is not an integer"
	refused '{"version":1}' "'steps' is not an array"
	refused '{"version":1,"steps":[1]}' "a step is not an object"
	refused '{"version":1,"steps":[{"name":"rm -rf","status":"ok"}]}' "a step has no known 'name'"
	refused '{"version":1,"steps":[{"name":"clone","status":"fine"}]}' "step 'clone' has no known 'status'"
	refused '{"version":1,"steps":[{"name":"clone","status":"ok","seconds":-1}]}' "'seconds' is out of range"
	refused '{"version":1,"steps":[{"name":"clone","status":"ok","exit_code":256}]}' "'exit_code' is out of range"
	refused '{"version":1,"steps":[1,2,3,4,5,6,7,8,9]}' "'steps' has more than 8 steps"
	refused '{"version":1,"steps":[],"failed_step":"other"}' "'failed_step' is not a known step"
	refused '{"version":1,"steps":[],"claude":[]}' "'claude' is not an object"
	refused '{"version":1,"steps":[],"claude":{"num_turns":-1}}' "'num_turns' is out of range"
	refused '{"version":1,"steps":[],"claude":{"num_turns":1.5}}' "'num_turns' is not an integer"
	refused '{"version":1,"steps":[],"claude":{"total_cost_usd":"0.1"}}' "'total_cost_usd' is not a number"
	refused '{"version":1,"steps":[],"claude":{"total_cost_usd":1e300}}' "'total_cost_usd' is out of range"
	refused '{"version":1,"steps":[],"claude":{"ended_by":"magic"}}' "'ended_by' is not a known reason"
	refused '{"version":1,"steps":[],"claude":{"last_message":5}}' "'last_message' is not a string"
	refused '{"version":1,"steps":[],"end_commit":"F3572AF8C6DF0123456789ABCDEF0123456789AB"}' "'end_commit' is not a commit id"
	refused '{"version":1,"steps":[],"end_commit":"f3572af"}' "'end_commit' is not a commit id"
	refused '{"version":1,"steps":[],"start_commit":"g3572af8c6df0123456789abcdef0123456789ab"}' "'start_commit' is not a commit id"
	refused '{"version":1,"steps":[],"changes":"yes"}' "'changes' is not true or false"
	refused '{"version":1,"version":1,"steps":[]}' "not JSON (line 1: duplicate object key near '\"version\"')"
	printf '{"version":1,"steps":[],"claude":{"last_message":"a\\u0000b"}}' >result.json
	run test-task results result.json
	assert_failure
	assert_output --partial "refused: result.json: not JSON (line 1: \\u0000 is not allowed"
}

@test "results: a sha256 commit is accepted; a huge message or file is refused" {
	printf '{"version":1,"steps":[],"end_commit":"%s"}' "$(printf 'a%.0s' $(seq 64))" >result.json
	run test-task results result.json
	assert_success
	python3 -c 'import json; print(json.dumps({"version":1,"steps":[],"claude":{"last_message":"x"*66561}}))' >result.json
	run test-task results result.json
	assert_output "refused: result.json: 'last_message' is over 66560 bytes"
	# The init's cut: 64 KiB and a line that says so.
	python3 -c 'import json; print(json.dumps({"version":1,"steps":[],"claude":{"last_message":"x"*65536 + "\n[cut by aibox-init at 65536 bytes]"}}))' >result.json
	run test-task results result.json
	assert_success
	assert_line "vm: | [cut by aibox-init at 65536 bytes]"
	python3 -c 'import json; print(json.dumps({"version":1,"steps":[],"pad":"x"*1048576}))' >result.json
	run test-task results result.json
	assert_failure
}

@test "results: the fetch command is quoted for a POSIX shell when the path needs it" {
	good
	for dir in "with space" "it's" 'a$HOME' 'back`tick`' "$(printf 'new\nline')" 'semi;colon' 'star*' '~tilde' '!bang' 'quo"te'; do
		mkdir -p "$dir"
		run test-task results result.json --end $C40 --bundle "$T/$dir/changes.bundle" --branch aibox/task-x
		cmd=$(printf '%s\n' "$output" | sed -n 's/^aibox:   //p; /^line/p')
		# The shell must see exactly the path, whatever is in it.
		got=$(sh -c "set -- ${cmd#git -c transfer.fsckObjects=true fetch }; printf '%s' \"\$1\"")
		[ "$got" = "$T/$dir/changes.bundle" ] || { echo "dir: $dir -> $got"; false; }
	done
}

@test "results: shell-quote leaves safe strings alone and quotes the rest" {
	run test-task shell-quote /a/b_c-1.2/d@e:f,g+h=i%
	assert_output "/a/b_c-1.2/d@e:f,g+h=i%"
	run test-task shell-quote ""
	assert_output "''"
	run test-task shell-quote "it's"
	assert_output "'it'\\''s'"
	run test-task shell-quote 'a $b `c` "d"'
	assert_output "'a \$b \`c\` \"d\"'"
}

@test "results: the hosts the VM connected to come from proxy.log, each once, allowed only" {
	good
	cat >proxy.log <<-'LOG'
		2026-10-07T17:09:20.001Z allowed api.anthropic.com:443 CONNECT sent=10 received=20 duration=1.000s
		2026-10-07T17:09:20.101Z allowed localhost:3129 POST /v1/messages (key forwarding) status=200 sent=10 received=20 duration=1.000s
		2026-10-07T17:09:21.001Z refused evil.example:443 CONNECT (not on the allow list) sent=0 received=0 duration=0.000s
		2026-10-07T17:09:21.002Z failed github.com:443 CONNECT (connect: Connection refused) sent=0 received=0 duration=0.000s
		2026-10-07T17:09:22.001Z allowed api.anthropic.com:443 CONNECT sent=10 received=20 duration=1.000s
		2026-10-07T17:09:22.501Z refused - (bad request line) sent=0 received=0 duration=0.000s
		2026-10-07T17:09:23.001Z allowed registry.npmjs.org:443 sent=1 received=2 duration=0.100s
		garbage
		2026-10-07T17:09:23.001Z refused [::1]:8080 GET /allowed sent=1 received=2 duration=0.100s
		2026-10-07T17:09:24.001Z refused evil2.example:80 allowed sent=1 received=2 duration=0.100s
		2026-10-07T17:09:24.002Z refused evil3.example:80 allowed (not on the allow list) status=403 sent=0 received=0 duration=0.000s
		2026-10-07T17:09:24.003Z refused evil4.example:80 allowed sent=0
	LOG
	run test-task results result.json --proxy-log proxy.log
	assert_success
	assert_line --index 0 "aibox: the VM connected to api.anthropic.com:443"
	assert_line --index 1 "aibox: the VM connected to localhost:3129"
	assert_line --index 2 "aibox: the VM connected to registry.npmjs.org:443"
	assert_line --index 3 "aibox: Claude Code exited with 0"
	refute_output --partial evil
	refute_output --partial github
	refute_output --partial "::1"
	for i in 1 2 3 4 5; do
		echo "2026-10-07T17:09:23.001Z allowed h$i.example:443 CONNECT sent=1 received=2 duration=0.100s" >>proxy.log
	done
	run test-task results - --proxy-log proxy.log
	assert_line --index 0 "(5 more hosts)"
}

# check_bundle NAME [ARGS...]: result_check_bundle() on a fixture, as aibox-task runs it.
check_bundle() {
	local name=$1
	shift
	cp "$TOP/t/fixtures/bundles/$name.bundle" "$T/$name.bundle"
	mkdir -p "$T/tmp"
	run env TMPDIR="$T/tmp" test-task check-bundle "$@" "$T/$name.bundle"
}

@test "results: changes.bundle is checked beyond its header: refs, prerequisites and the pack" {
	F=$TOP/t/fixtures/bundles
	base=$(sed -n 's/^base //p' "$F/oids")
	root=$(sed -n 's/^root //p' "$F/oids")
	task=$(sed -n 's/^task //p' "$F/oids")
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo" >/dev/null
	# a thin pack on the start commit, its bases from the project
	check_bundle good-v2-base --repo "$T/repo" "$base"
	assert_success
	assert_output "ok $task"
	check_bundle good-v3-base --repo "$T/repo" "$base"
	assert_output "ok $task"
	# no prerequisite at all is fine too
	check_bundle good-v2 --repo "$T/repo" "$base"
	assert_output "ok $task"
	# the header: only aibox/task, no prerequisite but the start commit
	check_bundle two-refs --repo "$T/repo" "$base"
	assert_failure 1
	assert_output "changes.bundle refused: unexpected ref 'refs/heads/main'"
	check_bundle good-v2-base --repo "$T/repo" "$root"
	assert_failure 1
	assert_output "changes.bundle refused: prerequisite $base is not a given base"
	check_bundle other-prereq --repo "$T/repo" "$base"
	assert_failure 1
	assert_output "changes.bundle refused: prerequisite $root is not a given base"
	# the pack: a header that passes does not make a sound pack
	for f in bad-delta bad-checksum truncated-pack bad-size bad-zlib wrong-count missing-base; do
		check_bundle "$f" --repo "$T/repo" "$base"
		assert_failure 1
		[[ "$output" == "changes.bundle refused: pack: "* ]]
	done
	check_bundle bad-size --repo "$T/repo" "$base"
	assert_output "changes.bundle refused: pack: object 0: inflates to 14 bytes, not 17"
	# without the project the thin pack's bases are missing; a cap holds
	check_bundle good-v2-base "$base"
	assert_failure 1
	assert_output "changes.bundle refused: pack: a delta's base is not in the pack (a thin pack: give --repo)"
	check_bundle good-v2-base --max 100 --repo "$T/repo" "$base"
	assert_output "changes.bundle refused: pack: larger than 100 bytes"
	# an empty file (a VM that sent no bundle but said there were changes)
	: >"$T/empty.bundle"
	run test-task check-bundle --repo "$T/repo" "$base" "$T/empty.bundle"
	assert_failure 1
	[[ "$output" == "changes.bundle refused: "* ]]
	# the indexer's folders were made in TMPDIR and are gone
	assert_equal "$(ls -A "$T/tmp")" ""
}
