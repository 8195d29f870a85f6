#!/usr/bin/env bats
# common/results: result.json from the VM is checked field by field, and the
# summary lines say what docs/tasks.md's "Results" shows.
load lib-common
bats_require_minimum_version 1.5.0

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
aibox:   git fetch /home/u/.aibox/projects/p/tasks/20261007-170916-259e07/changes.bundle aibox/task:aibox/task-20261007-170916-259e07'
}

@test "results: a cost of -0 is 0, not printed with a sign" {
	printf '{"version":1,"steps":[],"claude":{"exit_code":0,"num_turns":1,"duration_ms":1000,"total_cost_usd":-0.0,"ended_by":"completed"}}' >result.json
	run test-task results result.json
	assert_success
	assert_line 'aibox: 1 turn in 1.000s, about 0.00 USD at API prices, ended by completed'
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

@test "results: a message's lone CR, U+2028 and U+2029 break its lines where the printer breaks them, each line marked" {
	# the sanitizer starts a new line at each: every one of them is a line of the message
	printf '{"version":1,"steps":[],"claude":{"last_message":"a\\rb\\u2028c\\u2029Bash: git push\\u2028"}}' >result.json
	run test-task results result.json --no-changes 1
	assert_output "$(printf 'vm: | a\nvm: | b\nvm: | c\nvm: | Bash: git push\naibox: no changes')"
}

@test "results: fields of the wrong type, range or value refuse the file" {
	refused() {
		printf '%s' "$1" >result.json
		run test-task results result.json
		assert_failure
		assert_output "refused: result.json: $2"
	}
	refused '[]' "not an object"
	refused '{"steps":[]}' "'version' is missing"
	refused '{"version":2,"steps":[]}' "'version' is out of range"
	refused '{"version":"1","steps":[]}' "'version' is not an integer"
	refused '{"version":1}' "'steps' is missing"
	refused '{"version":1,"steps":[1]}' "a step is not an object"
	refused '{"version":1,"steps":[{"name":"rm -rf","status":"ok"}]}' "a step has no known 'name'"
	refused '{"version":1,"steps":[{"name":"clone","status":"fine"}]}' "step 'clone' has no known 'status'"
	refused '{"version":1,"steps":[{"name":"clone","status":"ok","seconds":-1}]}' "'seconds' is out of range"
	refused '{"version":1,"steps":[{"name":"clone","status":"ok","exit_code":256}]}' "'exit_code' is out of range"
	refused '{"version":1,"steps":[1,2,3,4,5,6,7,8,9]}' "'steps' has over 8 elements"
	refused '{"version":1,"steps":{}}' "'steps' is not a list"
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

@test "results: a parse error quotes at most 20 bytes of the VM's token, so no terminal row is the VM's text" {
	# a key that would read as an aibox line if a narrow terminal wrapped
	# the reason right before it: jansson quotes no token over 20 bytes
	local key='12:00:00 aibox[a1b2c3]: no changes; all good'
	printf '{"version":1,"%s":1,"%s":2}' "$key" "$key" >result.json
	run test-task results result.json
	assert_failure
	assert_output "refused: result.json: not JSON (line 1: duplicate object key)"
	# one of 20 bytes (its quotes with it) is quoted whole, non-ASCII as '?'
	printf '{"version":1,"%s":1,"%s":2}' $'ab\u2028cdefghijklmno' $'ab\u2028cdefghijklmno' >result.json
	run test-task results result.json
	assert_failure
	assert_output "refused: result.json: not JSON (line 1: duplicate object key near '\"ab???cdefghijklmno\"')"
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
	assert_output "test-task: cannot read 'result.json': File too large"
}

@test "results: a result.json of more JSON values than the bound is refused before it is parsed" {
	# list ITEM N: result.json with a list of N ITEMs
	list() {
		python3 -c 'import sys; sys.stdout.write("{\"version\":1,\"steps\":[],\"x\":[" + (sys.argv[1] + ",")*(int(sys.argv[2]) - 1) + sys.argv[1] + "]}")' "$@" >result.json
		run test-task results result.json
	}
	# 1 MiB of empty objects: jansson would make about 80 MB of them
	list '{}' 349501
	[ "$(stat -c %s result.json)" -le 1048576 ]
	assert_failure
	assert_output "refused: result.json: over 65536 JSON values"
	# at the bound it is read (json_vm_loadb()'s count: one, and one for
	# each '{', '[', ':' and ','), one value more is not
	list 1 65528
	assert_success
	list 1 65529
	assert_failure
	assert_output "refused: result.json: over 65536 JSON values"
}

@test "results: the fetch command is quoted for a POSIX shell when the path needs it" {
	good
	for dir in "with space" "it's" 'a$HOME' 'back`tick`' "$(printf 'new\nline')" 'semi;colon' 'star*' '~tilde' '!bang' 'quo"te'; do
		mkdir -p "$dir"
		run test-task results result.json --end $C40 --bundle "$T/$dir/changes.bundle" --branch aibox/task-x
		cmd=$(printf '%s\n' "$output" | sed -n 's/^aibox:   //p; /^line/p')
		# The shell must see exactly the path, whatever is in it.
		got=$(sh -c "set -- ${cmd#git fetch }; printf '%s' \"\$1\"")
		[ "$got" = "$T/$dir/changes.bundle" ] || { echo "dir: $dir -> $got"; false; }
	done
}

# winq PATH EXPECTED: windows_quote() of PATH is EXPECTED.
winq() {
	run test-task windows-quote "$1"
	assert_success
	assert_output "$2"
}

@test "results: windows-quote: forward slashes, quotes all three shells read, else PowerShell's" {
	# Nothing to quote: as is, with forward slashes.
	winq 'C:\Users\me\.aibox\projects\r\tasks\20261007-170916-259e07\changes.bundle' \
		'C:/Users/me/.aibox/projects/r/tasks/20261007-170916-259e07/changes.bundle'
	winq 'C:/a_b-1.2/c+d:e' 'C:/a_b-1.2/c+d:e'
	winq 'aibox/task:aibox/task-20261007-170916-259e07' 'aibox/task:aibox/task-20261007-170916-259e07'
	# Double quotes, which PowerShell, cmd.exe and Git Bash all read alike.
	winq 'C:\Program Files\x\changes.bundle' '"C:/Program Files/x/changes.bundle"'
	winq "C:\\it's\\x" "\"C:/it's/x\""
	winq 'C:/a&b(c)^d;e,f@g=h~i#j{k}[l]' '"C:/a&b(c)^d;e,f@g=h~i#j{k}[l]"'
	winq 'C:/Users/José/x' '"C:/Users/José/x"'
	winq 'C:/a‘b’c' '"C:/a‘b’c"'
	winq '' '""'
	# $, `, % or !, or a double quote PowerShell reads as one: PowerShell's single
	# quotes, each ' (and its look-alikes U+2018..U+201B) doubled.
	winq 'C:\a$b\x' "'C:/a\$b/x'"
	winq 'C:/a`b' "'C:/a\`b'"
	winq 'C:\100%\x' "'C:/100%/x'"
	winq 'C:/a!b' "'C:/a!b'"
	winq "C:/it's 100%" "'C:/it''s 100%'"
	winq 'C:/“x”/y' "'C:/“x”/y'"
	winq 'C:/„x‟' "'C:/„x‟'"
	winq 'C:/‘$x’‚‛' "'C:/‘‘\$x’’‚‚‛‛'"
	# No Windows path holds a control character or bytes that are not UTF-8.
	for bad in "$(printf 'a\tb')" "$(printf 'a\nb')" "$(printf 'a\177b')" "$(printf 'a\377b')"; do
		run test-task windows-quote "$bad"
		assert_failure
		assert_output "error: Invalid argument"
	done
	# Git Bash reads the plain and the double-quoted forms as the path.
	for p in 'C:\Program Files\x' "C:/it's/x" 'C:/a&b(c)^d;e,f@g=h~i#j' 'C:/Users/José/x' 'C:/plain'; do
		run test-task windows-quote "$p"
		got=$(bash -c "printf '%s' $output")
		assert_equal "$got" "${p//\\//}"
	done
}

@test "results: on Windows (AIBOX_HOST_SYSTEM=windows) the fetch command is quoted with windows-quote" {
	good
	for dir in "with space" 'a$b' "it's"; do
		mkdir -p "$dir"
		AIBOX_HOST_SYSTEM=windows run test-task results result.json --end $C40 \
			--bundle "$T/$dir/changes.bundle" --branch aibox/task-x
		assert_success
		want=$(test-task windows-quote "$T/$dir/changes.bundle")
		assert_line "aibox:   git fetch $want aibox/task:aibox/task-x"
	done
	assert_line "aibox:   git fetch \"$T/it's/changes.bundle\" aibox/task:aibox/task-x"
	AIBOX_HOST_SYSTEM=linux run test-task results result.json --end $C40 \
		--bundle "$T/it's/changes.bundle" --branch aibox/task-x
	assert_line "aibox:   git fetch '$T/it'\\''s/changes.bundle' aibox/task:aibox/task-x"
}

# record [HOSTS-JSON [EXTRA-FIELDS]]: the proxy's record (docs/proxy.md, "The record") in record.json
record() {
	cat >record.json <<-JSON
		{"version": 1, "hosts": ${1:-[]}, "more_hosts": 0, "more_hosts_at_least": false,
		 "more_allowed": 0, "allowed": 3, "refused": 1, "failed": 0, "log_left_out": 0${2:-}}
	JSON
}

@test "results: the hosts the VM connected to come from the proxy's record, in its order" {
	good
	record '[{"host": "api.anthropic.com:443", "allowed": 2, "sent": 10, "received": 20},
		{"host": "localhost:3129", "allowed": 1, "sent": 1, "received": 2},
		{"host": "[2001:db8::1]:8443", "allowed": 1, "sent": 1, "received": 2}]'
	run test-task results result.json --report record.json
	assert_success
	assert_line --index 0 "aibox: the VM connected to api.anthropic.com:443"
	assert_line --index 1 "aibox: the VM connected to localhost:3129"
	assert_line --index 2 "aibox: the VM connected to [2001:db8::1]:8443"
	assert_line --index 3 "aibox: Claude Code exited with 0"
	refute_output --partial "partial"
	refute_output --partial "not known"
}

@test "results: hosts past the record's list are counted and the list is said to be partial" {
	good
	record '[{"host": "a.example:443", "allowed": 1, "sent": 1, "received": 1}]' \
		', "spend": {"future": "fields are ignored"}'
	sed -i 's/"more_hosts": 0/"more_hosts": 37/; s/"more_allowed": 0/"more_allowed": 412/' record.json
	run test-task results result.json --report record.json
	assert_line --index 0 "aibox: the VM connected to a.example:443"
	assert_line --index 1 "aibox: the VM connected to 37 more hosts (412 requests), not listed: the proxy names the first 256, so the list above is partial"
	sed -i 's/"more_hosts_at_least": false/"more_hosts_at_least": true/; s/"log_left_out": 0/"log_left_out": 99/' record.json
	run test-task results - --report record.json
	assert_line --index 1 "aibox: the VM connected to at least 37 more hosts (412 requests), not listed: the proxy names the first 256, so the list above is partial"
	assert_line --index 2 "aibox: proxy.log left out 99 lines past its cap (the hosts above are counted in full)"
}

@test "results: the proxy's record names 256 hosts, counts 16384 more exactly, then says at least" {
	run test-task report-count 3
	assert_output '{"version":1,"hosts":[{"host":"h0.example:443","allowed":2,"sent":20,"received":40},{"host":"h1.example:443","allowed":2,"sent":20,"received":40},{"host":"h2.example:443","allowed":2,"sent":20,"received":40}],"more_hosts":0,"more_hosts_at_least":false,"more_allowed":0,"allowed":6,"refused":1,"failed":1,"log_left_out":0}'
	test-task report-count 300 >rec.json
	[ "$(jq '.hosts | length' rec.json)" = 256 ]
	[ "$(jq -r '.hosts[255].host' rec.json)" = h255.example:443 ]
	[ "$(jq '[.more_hosts, .more_hosts_at_least, .more_allowed, .allowed]' -c rec.json)" = '[44,false,88,600]' ]
	test-task report-count $((256 + 16384)) >rec.json
	[ "$(jq '[.more_hosts, .more_hosts_at_least, .more_allowed]' -c rec.json)" = '[16384,false,32768]' ]
	test-task report-count $((256 + 16384 + 1)) >rec.json
	[ "$(jq '[.more_hosts, .more_hosts_at_least, .more_allowed]' -c rec.json)" = '[16384,true,32770]' ]
}

@test "results: without a usable record the summary says the hosts are not known" {
	good
	run test-task results result.json --no-report "aibox-proxy gave no record within 5 s"
	assert_line --index 0 "aibox: the hosts the VM connected to are not known: aibox-proxy gave no record within 5 s (see proxy.log)"
	assert_line --index 1 "aibox: Claude Code exited with 0"
	record '[]'
	sed -i 's/"version": 1/"version": 2/' record.json
	run test-task results - --report record.json
	assert_line --index 0 "aibox: the hosts the VM connected to are not known: the proxy's record: 'version' is out of range (see proxy.log)"
	record '[{"host": "a b:443", "allowed": 1, "sent": 1, "received": 1}]'
	run test-task results - --report record.json
	assert_output --partial "not known: the proxy's record: a host without a proper name"
	record '[{"host": "a:443", "allowed": -1, "sent": 1, "received": 1}]'
	run test-task results - --report record.json
	assert_output --partial "not known: the proxy's record: 'allowed' is out of range"
	record "$(python3 -c 'import json; print(json.dumps([{"host": "h%d:443" % i, "allowed": 1, "sent": 1, "received": 1} for i in range(257)]))')"
	run test-task results - --report record.json
	assert_output --partial "not known: the proxy's record: 'hosts' has over 256 elements"
	echo '{"version": 1' >record.json
	run test-task results - --report record.json
	assert_output --partial "not known: the proxy's record: not a JSON object"
	head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >record.json
	run test-task results - --report record.json
	assert_output --partial "not known: the proxy's record: too large"
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

@test "results: changes.bundle whose tip is not in its pack is refused; the start commit as tip is no change" {
	F=$TOP/t/fixtures/bundles
	base=$(sed -n 's/^base //p' "$F/oids")
	root=$(sed -n 's/^root //p' "$F/oids")
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo" >/dev/null
	check_bundle tip-not-in-pack --repo "$T/repo" "$base"
	assert_failure 1
	assert_output "changes.bundle refused: pack: does not hold $root, a ref's tip"
	{
		printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$base" "$base"
		printf 'PACK\0\0\0\2\0\0\0\0'
		printf 'PACK\0\0\0\2\0\0\0\0' | sha1sum | cut -c1-40 | xxd -r -p
	} >"$T/none.bundle"
	run test-task check-bundle --repo "$T/repo" "$base" "$T/none.bundle"
	assert_success
	assert_output "ok $base"
}

@test "results: changes.bundle whose aibox/task is not a commit is refused, naming what it is" {
	F=$TOP/t/fixtures/bundles
	base=$(sed -n 's/^base //p' "$F/oids")
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo" >/dev/null
	# aibox/task at the task's tree: git would refuse to fetch it into a branch
	tree=$(git -C "$T/repo" rev-parse 'aibox/task^{tree}')
	{
		printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$base" "$tree"
		git -C "$T/repo" rev-parse "$tree" 'aibox/task:README' 'aibox/task:numbers.txt' |
			git -C "$T/repo" pack-objects -q --stdout
	} >"$T/tree.bundle"
	run test-task check-bundle --repo "$T/repo" "$base" "$T/tree.bundle"
	assert_failure 1
	assert_output "changes.bundle refused: pack: ref 'refs/heads/aibox/task' names a tree, not a commit ($tree)"
	run --separate-stderr test-task check-bundle --child --repo "$T/repo" "$base" "$T/tree.bundle"
	assert_failure 1
	assert_output "changes.bundle refused: pack: ref 'refs/heads/aibox/task' names a tree, not a commit ($tree)"
}

@test "results: the task's check runs in a child under its limits, which AIBOX_BUNDLE_LIMITS changes" {
	F=$TOP/t/fixtures/bundles
	base=$(sed -n 's/^base //p' "$F/oids")
	task=$(sed -n 's/^task //p' "$F/oids")
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo" >/dev/null
	mkdir -p "$T/tmp"
	cp "$F/good-v2-base.bundle" "$T/good.bundle"
	TMPDIR=$T/tmp run --separate-stderr test-task check-bundle --child --repo "$T/repo" "$base" "$T/good.bundle"
	assert_success
	assert_output "ok $task"
	# a bomb: refused with the limit named, the child's peak memory and CPU in bounds
	"$TOP/t/make-bundle-fixtures" --bomb ofs-delta 512 "$T/bomb.bundle"
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 TMPDIR=$T/tmp \
		run --separate-stderr test-task check-bundle --child --repo "$T/repo" "$base" "$T/bomb.bundle"
	assert_failure 1
	assert_output "changes.bundle refused: pack: object 0: 536870912 bytes inflated, over the limit of 16777216 for one object (max-object)"
	echo "$stderr"
	read -r _ _ cpu _ peak <<<"$stderr"
	[ "$peak" -gt 0 ]
	[ "$peak" -lt $((64 * 1024)) ]
	awk -v c="$cpu" 'BEGIN { exit !(c < 10) }'
	# the limits from the environment
	AIBOX_BUNDLE_LIMITS=max-inflated=100,cpu=5 TMPDIR=$T/tmp \
		run --separate-stderr test-task check-bundle --child --repo "$T/repo" "$base" "$T/good.bundle"
	assert_failure 1
	[[ "$output" =~ ^"changes.bundle refused: pack: more than 100 bytes inflated in all (max-inflated), at object "[0-9]+$ ]]
	AIBOX_BUNDLE_LIMITS=cpu=soon run test-task check-bundle --child "$base" "$T/good.bundle"
	assert_failure
	assert_output --partial "cpu: 'soon' is not a number of seconds"
	# the indexer's folders were made in TMPDIR and are gone
	assert_equal "$(ls -A "$T/tmp")" ""
}

@test "results: the summary puts aibox's count of the spend beside Claude Code's, and says when a cap ended the task" {
	good
	u='"requests":3,"usd":91.513872,"nano_usd":91513872000,"models":[
		{"model":"claude-sonnet-4-5","input":1234,"output":567,"cache_write_5m":100,"cache_write_1h":200,"cache_read":300,"requests":2,"usd":0.013872,"nano_usd":13872000,"priced":true,"priority":false},
		{"model":"mystery-9","input":1000000,"output":1000000,"cache_write_5m":0,"cache_write_1h":0,"cache_read":1000000,"requests":1,"usd":91.5,"nano_usd":91500000000,"priced":false}],
		"uncounted":1,"skipped":0,"refused":2,"caps":{"task_usd":5,"day_usd":null},"cap_task_nano":5000000000,"cap_day_nano":0,"day_nano_usd":91513872000,"ended_by_cap":"task"'
	record '[]' ", \"usage\": {$u}"
	run test-task results result.json --report record.json
	assert_success
	assert_line "aibox: aibox counted 91.513872 USD for 3 API requests (Claude Code's own estimate: about 0.05 USD)"
	assert_line "aibox: the model mystery-9 is not in aibox's price table: charged at the highest price in it"
	refute_output --partial "Priority Tier"
	assert_line "aibox: 1 answer could not be counted (encoded or of an unknown type; docs/budget.md)"
	assert_line "aibox: ended by budget: the task cap of 5.000000 USD was reached (2 requests refused)"
	# without a cap reached, no such line; a record without usage, no count at all
	record '[]' ", \"usage\": {${u/\"task\"/null}}"
	run test-task results result.json --report record.json
	assert_line "aibox: aibox counted 91.513872 USD for 3 API requests (Claude Code's own estimate: about 0.05 USD)"
	refute_output --partial "ended by budget"
	record '[]'
	run test-task results result.json --report record.json
	refute_output --partial "aibox counted"
	# no request made: no count of nothing, but a cap still says so
	record '[]' ", \"usage\": {${u/\"requests\":3,\"usd\":91.513872,\"nano_usd\":91513872000/\"requests\":0,\"usd\":0,\"nano_usd\":0}}"
	run test-task results result.json --report record.json
	assert_success
	refute_output --partial "aibox counted"
	assert_line "aibox: ended by budget: the task cap of 5.000000 USD was reached (2 requests refused)"
	# a broken usage object makes the record unusable, as any other broken field
	record '[]' ', "usage": {"requests": -1}'
	run test-task results - --report record.json
	assert_output --partial "not known: usage: 'requests' is out of range"
}

@test "results: a model the Priority Tier served is named as such in the summary, not as one the price table lacks" {
	good
	record '[]' ', "usage": {"requests":1,"usd":285,"nano_usd":285000000000,"models":[
		{"model":"claude-sonnet-4-6","input":1000000,"output":1000000,"cache_write_5m":0,"cache_write_1h":0,"cache_read":0,"requests":1,"usd":285,"nano_usd":285000000000,"priced":true,"priority":true}],
		"uncounted":0,"skipped":0,"refused":0,"caps":{"task_usd":null,"day_usd":null},"cap_task_nano":0,"cap_day_nano":0,"day_nano_usd":285000000000,"ended_by_cap":null}'
	run test-task results result.json --report record.json
	assert_success
	assert_line "aibox: the Priority Tier served answers of claude-sonnet-4-6: charged at the highest price in aibox's price table (docs/budget.md)"
	refute_output --partial "is not in aibox's price table"
	# "priority" is a boolean, as "priced"
	record '[]' ', "usage": {"requests":1,"usd":1,"nano_usd":1000000000,"models":[
		{"model":"claude-sonnet-4-6","input":1,"output":1,"cache_write_5m":0,"cache_write_1h":0,"cache_read":0,"requests":1,"usd":1,"nano_usd":1000000000,"priority":"yes"}],
		"uncounted":0,"skipped":0,"refused":0,"caps":{"task_usd":null,"day_usd":null},"cap_task_nano":0,"cap_day_nano":0,"day_nano_usd":0,"ended_by_cap":null}'
	run test-task results - --report record.json
	assert_output --partial "not known: usage:"
	assert_output --partial "priority"
}
