#!/usr/bin/env bats
# aibox tasks list, show and log on task folders written by hand (the VM
# runs are in t/5300-tasks-view-vm.bats): every state, the resolver of TASK,
# --json checked with jq, and folders whose files are corrupt or hostile.
bats_require_minimum_version 1.5.0
load lib-common
load lib-lock

setup() {
	task_project_setup || return 1
	mkdir -p "$TK"
	C1=$(git rev-parse HEAD~1)
	C2=$(git rev-parse HEAD)
}
teardown() { lock_teardown; }

# mk_task NAME PROMPT: a task folder as a task's start leaves it, its lock beside it.
mk_task() {
	mkdir "$TK/$1"
	printf '%s' "$2" >"$TK/$1/prompt.txt"
	echo bundle >"$TK/$1/start.bundle"
	printf 'start 1.000s\n' >"$TK/$1/aibox.log"
	: >"$TK/$1.lock"
}

# record NAME STATE EXIT [END_COMMIT]: the summary.json an ended task leaves.
# $WHY is its why when not finished, $ENDED Claude Code's ended_by.
record() {
	local end=${4:-} e=null why=null body
	[ -n "$end" ] && e="\"$end\""
	[ "$2" = finished ] || why="\"${WHY:-the step claude failed}\""
	# read, not cat: no process per task (t/1060 makes hundreds)
	IFS= read -r -d '' body <<EOF || true
{"version":1,"folder":"$TK/$1","name":"$1","id":"${1: -6}","state":"$2","exit":$3,"why":$why,
 "seconds":83.4,"start_commit":"$C1","end_commit":$e,"branch":"aibox/task-$1","fetch":null,
 "no_changes":false,
 "result":{"version":1,"steps":[],"failed_step":null,
   "claude":{"exit_code":0,"num_turns":4,"duration_ms":8321,"total_cost_usd":0.05,
             "ended_by":"${ENDED:-completed}","last_message":"I fixed the test.\nIt passes."},
   "start_commit":"$C1","end_commit":"$C2","changes":true},
 "hosts":{"version":1,"hosts":[{"host":"localhost:3129","allowed":3,"sent":5,"received":6}],
   "more_hosts":0,"more_hosts_at_least":false,"more_allowed":0,"allowed":3,"refused":0,
   "failed":0,"log_left_out":0},
 "hosts_why":null}
EOF
	printf '%s' "$body" >"$TK/$1/summary.json"
	printf 'total 83.400s exit %s\n' "$3" >>"$TK/$1/aibox.log"
}

# Five tasks, one in each state.
five() {
	mk_task 20260101-100000-aaaaaa $'fix the flaky test\nin internal/proxy'
	record 20260101-100000-aaaaaa finished 0 "$C2"
	mk_task 20260101-110000-bbbbbb 'not finished one'
	record 20260101-110000-bbbbbb "not finished" 1
	mk_task 20260101-120000-cccccc 'failed to start one'
	rm "$TK/20260101-120000-cccccc/start.bundle"
	printf 'total 0.500s exit 2\n' >>"$TK/20260101-120000-cccccc/aibox.log"
	mk_task 20260101-130000-dddddd 'cleaned one'
	record 20260101-130000-dddddd finished 0
	rm "$TK/20260101-130000-dddddd/start.bundle"
	mk_task 20260101-140000-eeeeee 'running one'
	hold_lock "$TK/20260101-140000-eeeeee.lock"
}

@test "tasks list: newest first, each state, time, turns, cost, fetched and the prompt's first line" {
	five
	run aibox tasks list
	assert_success
	assert_line --index 0 --regexp '^ID +STATE +STARTED +TIME +TURNS +COST +FETCHED +PROMPT$'
	assert_line --index 1 --regexp '^eeeeee  running          2026-01-01 14:00 +[0-9hms]+ +- +- +- +running one$'
	assert_line --index 2 --regexp '^dddddd  finished         2026-01-01 13:00 +1m23s +4 +0.05 +- +cleaned one$'
	assert_line --index 3 --regexp '^cccccc  failed to start  2026-01-01 12:00 +1s +- +- +- +failed to start one$'
	assert_line --index 4 --regexp '^bbbbbb  not finished     2026-01-01 11:00 +1m23s +4 +0.05 +- +not finished one$'
	assert_line --index 5 --regexp '^aaaaaa  finished         2026-01-01 10:00 +1m23s +4 +0.05 +no +fix the flaky test$'
	assert_equal "${#lines[@]}" 6
	# Fetched once the branch is in the checkout.
	git branch aibox/task-20260101-100000-aaaaaa "$C2"
	run aibox tasks list
	assert_success
	assert_line --index 5 --regexp '^aaaaaa  finished .* 0.05 +yes +fix the flaky test$'
}

@test "tasks list: how each task ended (finished, timed out, killed, not finished) stays after tasks clean" {
	mk_task 20260101-100000-aaaaaa 'finished one'
	record 20260101-100000-aaaaaa finished 0 "$C2"
	mk_task 20260101-110000-bbbbbb 'timed out one'
	ENDED=timeout WHY="Claude Code ran out of time" record 20260101-110000-bbbbbb "not finished" 1
	mk_task 20260101-120000-cccccc 'stopped one'
	WHY="the VM was stopped by SIGINT" record 20260101-120000-cccccc "not finished" 1
	# aibox task killed with SIGKILL: summary.json as it made it, empty; no "total" line.
	mk_task 20260101-130000-dddddd 'killed one'
	: >"$TK/20260101-130000-dddddd/summary.json"
	mk_task 20260101-140000-eeeeee 'failed one'
	record 20260101-140000-eeeeee "not finished" 1
	local want="not finished,killed,killed,timed out,finished"
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r 'map(.state) | join(",")')" "$want"
	assert_equal "$(echo "$output" | jq -c 'map(.cleaned)')" '[false,false,false,false,false]'
	run aibox tasks clean
	assert_success
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -r 'map(.state) | join(",")')" "$want"
	assert_equal "$(echo "$output" | jq -c 'map(.cleaned)')" '[true,true,true,true,true]'
	assert_equal "$(echo "$output" | jq -c 'map(.finished)')" '[false,false,false,false,true]'
	# The killed task's empty record is how it ended, not a problem.
	assert_equal "$(echo "$output" | jq -c 'map(.problem)')" '[null,null,null,null,null]'
	run aibox tasks list
	assert_success
	assert_line --index 1 --regexp '^eeeeee  not finished  '
	assert_line --index 2 --regexp '^dddddd  killed  '
	assert_line --index 3 --regexp '^cccccc  killed  '
	assert_line --index 4 --regexp '^bbbbbb  timed out  '
	assert_line --index 5 --regexp '^aaaaaa  finished  '
	run --separate-stderr aibox tasks show dddddd
	assert_success
	assert_line --index 0 "task dddddd, 20260101-130000-dddddd: killed"
	refute_output --partial "not JSON"
	run --separate-stderr aibox tasks show --json dddddd
	assert_success
	assert_equal "$(echo "$output" | jq -c '[.state, .finished, .cleaned, .problem, .record]')" \
		'["killed",false,true,null,null]'
}

@test "tasks list: --json is one array with the documented keys, checked with jq" {
	five
	git branch aibox/task-20260101-100000-aaaaaa "$C2"
	run aibox tasks list --json
	assert_success
	echo "$output" >"$T/list.json"
	assert_equal "$(jq -r 'map(.id) | join(" ")' "$T/list.json")" "eeeeee dddddd cccccc bbbbbb aaaaaa"
	assert_equal "$(jq -r 'map(.state) | join(",")' "$T/list.json")" \
		"running,finished,failed to start,not finished,finished"
	assert_equal "$(jq -c 'map(.cleaned)' "$T/list.json")" '[false,true,true,false,false]'
	assert_equal "$(jq -c 'map(.finished)' "$T/list.json")" '[null,true,false,false,true]'
	assert_equal "$(jq -c 'map(.exit)' "$T/list.json")" '[null,0,2,1,0]'
	assert_equal "$(jq -r '.[4] | [.name, .project, .folder, .started, .seconds, .turns, .cost_usd, .end_commit, .branch, .fetched, .prompt, .problem] | map(tostring) | join("|")' "$T/list.json")" \
		"20260101-100000-aaaaaa|repo|$TK/20260101-100000-aaaaaa|$(date -d '2026-01-01 10:00:00' +%Y-%m-%dT%H:%M:%S%z)|83.4|4|0.05|$C2|aibox/task-20260101-100000-aaaaaa|true|fix the flaky test|null"
	assert_equal "$(jq -r '.[0].fetched, .[3].fetched' "$T/list.json")" $'null\nnull'
	# No tasks: an empty array; and the text says so.
	cd "$T" && make_repo other && cd other || return 1
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -c .)" '[]'
	run aibox tasks list
	assert_success
	assert_output "no tasks in this checkout's project"
}

@test "tasks list: hundreds of tasks are listed at once from what their folders hold" {
	local i name
	for ((i = 100; i < 400; i++)); do
		printf -v name '20260101-10%02d%02d-%06x' $((i / 60)) $((i % 60)) "$i"
		mk_task "$name" "task $i"
		record "$name" finished 0 "$C2"
	done
	mk_task 20260102-100000-eeeeee 'running one'
	hold_lock "$TK/20260102-100000-eeeeee.lock"
	start=$SECONDS
	run timeout 60 aibox tasks list
	assert_success
	[ $((SECONDS - start)) -le 10 ]
	assert_equal "${#lines[@]}" 302
	assert_line --index 1 --regexp '^eeeeee  running '
	assert_line --index 301 --regexp '^000064  finished .* task 100$'
	run timeout 60 aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq length)" 301
}

@test "tasks list: --all lists every project's tasks with the project's name" {
	mk_task 20260101-100000-aaaaaa 'in repo'
	record 20260101-100000-aaaaaa finished 0
	cd "$T" && make_repo other && cd other || return 1
	P2=$(aibox projects path 2>/dev/null)
	mkdir -p "$P2/tasks/20260102-100000-ffffff"
	echo 'in other' >"$P2/tasks/20260102-100000-ffffff/prompt.txt"
	run aibox tasks list
	assert_success
	assert_line --index 1 --regexp '^ffffff .* in other$'
	assert_equal "${#lines[@]}" 2
	run aibox tasks list --all
	assert_success
	assert_line --index 0 --regexp '^ID +PROJECT +STATE'
	# A folder without start.bundle, record or aibox.log: ended, nothing says it finished.
	assert_output --regexp 'ffffff  other +not finished .* in other'
	assert_output --regexp 'aaaaaa  repo +finished .* in repo'
	run aibox tasks list --all --json
	assert_success
	assert_equal "$(echo "$output" | jq -r 'map(.project + ":" + .id) | sort | join(" ")')" \
		"other:ffffff repo:aaaaaa"
}

@test "tasks list: corrupt and hostile files cannot break the list, and nothing from them reaches the terminal raw" {
	mk_task 20260101-100000-aaaaaa $'\e]0;pwned\a\e[31mred\e[0m \xff prompt\r\nsecond'
	printf '{"version":1,"state":"finished"' >"$TK/20260101-100000-aaaaaa/summary.json"
	mk_task 20260101-110000-bbbbbb 'big record'
	head -c 3000000 /dev/zero | tr '\0' ' ' >"$TK/20260101-110000-bbbbbb/summary.json"
	mk_task 20260101-120000-cccccc 'link'
	ln -s /etc/passwd "$TK/20260101-120000-cccccc/result.json"
	ln -sf /etc/shadow "$TK/20260101-120000-cccccc/prompt.txt"
	mk_task 20260101-130000-dddddd 'fifo'
	rm "$TK/20260101-130000-dddddd/aibox.log"
	mkfifo "$TK/20260101-130000-dddddd/summary.json" "$TK/20260101-130000-dddddd/aibox.log"
	mk_task 20260101-140000-eeeeee 'wrong types'
	echo '{"version":1,"steps":"no","claude":{"num_turns":"4"}}' >"$TK/20260101-140000-eeeeee/result.json"
	printf 'total 1.0s exit 0\n\e[2Jtotal 9s exit 7\n' >>"$TK/20260101-140000-eeeeee/aibox.log"
	mk_task 20260101-150000-ffffff "$(head -c 100000 /dev/zero | tr '\0' x)"
	# Not tasks: another name, a file, a link to a folder.
	mkdir "$TK/not-a-task" "$T/elsewhere"
	touch "$TK/20260101-160000-abcdef"
	ln -s "$T/elsewhere" "$TK/20260101-170000-fedcba"
	run timeout 20 aibox tasks list
	assert_success
	refute_output --partial $'\e'
	refute_output --partial $'\r'
	refute_output --partial $'\a'
	refute_output --partial 'abcdef'
	refute_output --partial 'fedcba'
	assert_line --regexp '^aaaaaa  not finished .* red � prompt$'
	assert_line --regexp '^bbbbbb  not finished .* big record$'
	assert_line --regexp '^cccccc  not finished +[^ ]+ [^ ]+ +- +- +- +- +$'
	assert_line --regexp '^dddddd  not finished .* fifo$'
	assert_line --regexp '^eeeeee  finished +[^ ]+ [^ ]+ +1s +- +- +- +wrong types$'
	assert_line --regexp "^ffffff .* x{57}\\.\\.\\.\$"
	assert_equal "${#lines[@]}" 7
	run aibox tasks list --json
	assert_success
	echo "$output" >"$T/list.json"
	assert_equal "$(jq length "$T/list.json")" 6
	assert_equal "$(jq -r '.[] | select(.id == "aaaaaa") | .problem' "$T/list.json")" \
		"summary.json: not JSON (line 1: '}' expected near end of file)"
	assert_equal "$(jq -r '.[] | select(.id == "bbbbbb") | .problem' "$T/list.json")" "summary.json: File too large"
	assert_equal "$(jq -r '.[] | select(.id == "cccccc") | .problem' "$T/list.json")" "prompt.txt: Invalid argument"
	assert_equal "$(jq -r '.[] | select(.id == "aaaaaa") | .prompt' "$T/list.json")" "red � prompt"
	assert_equal "$(jq -r '.[] | select(.id == "ffffff") | .prompt | length' "$T/list.json")" 203
}

@test "tasks list: a VM line cut at the start of the end of aibox.log read is not taken for aibox's total line" {
	mk_task 20260101-100000-aaaaaa 'x'
	# The last 4096 bytes start with "total ..." in the middle of a vm line.
	python3 - "$TK/20260101-100000-aaaaaa/aibox.log" <<'PY'
import sys
tail = "total 9.000s exit 0\n" + "10:00:02 vm[aaaaaa]: filler\n" * 200
tail = tail[:4096 - 1] + "\n"
with open(sys.argv[1], "a") as f:
    f.write("10:00:01 vm[aaaaaa]: says " + tail)
PY
	run aibox tasks list --json
	assert_success
	assert_equal "$(echo "$output" | jq -c '.[0] | [.state, .exit, .seconds]')" '["not finished",null,null]'
}

@test "tasks show: by id, folder name or path, the summary as printed at the end with the fetch command" {
	five
	for arg in aaaaaa 20260101-100000-aaaaaa "$TK/20260101-100000-aaaaaa" "$TK/20260101-100000-aaaaaa/"; do
		run aibox tasks show "$arg"
		assert_success
		assert_line --index 0 "task aaaaaa, 20260101-100000-aaaaaa: finished"
		assert_line --index 1 "folder: $TK/20260101-100000-aaaaaa"
		assert_line --index 2 "started 2026-01-01 10:00:00, for 1m23s"
		assert_line --index 3 "prompt: fix the flaky test"
		# the lines as aibox task printed them, at their own times: a record without
		# its times (an older aibox's) has them from the name and its seconds
		assert_line --index 4 "10:00:00 aibox[aaaaaa]: task aaaaaa starts from $C1"
		assert_line --index 5 '10:01:23 aibox[aaaaaa]: the VM connected to localhost:3129'
		assert_line --index 6 '10:01:23 aibox[aaaaaa]: Claude Code exited with 0'
		assert_line --index 7 '10:01:23 aibox[aaaaaa]: 4 turns in 8.321s, about 0.05 USD at API prices, ended by completed'
		assert_line --index 8 '10:01:23 vm[aaaaaa]: | I fixed the test.'
		assert_line --index 9 '10:01:23 vm[aaaaaa]: | It passes.'
		assert_line --index 10 "10:01:23 aibox[aaaaaa]: the changes end at ${C2:0:12}, fetch them with"
		assert_line --index 11 "10:01:23 aibox[aaaaaa]:   git fetch $TK/20260101-100000-aaaaaa/changes.bundle aibox/task:aibox/task-20260101-100000-aaaaaa"
		assert_equal "${#lines[@]}" 12
	done
	# a record with its times: those
	start=$(date -d '2026-01-01 10:00:02' +%s)
	sed -i "s/\"start_commit\":/\"start_time\":$start,\"end_time\":$((start + 3600 + 62)),\"start_commit\":/" \
		"$TK/20260101-100000-aaaaaa/summary.json"
	run aibox tasks show aaaaaa
	assert_success
	assert_line --index 4 "10:00:02 aibox[aaaaaa]: task aaaaaa starts from $C1"
	assert_line --index 5 '11:01:04 aibox[aaaaaa]: the VM connected to localhost:3129'
	assert_line --index 11 --regexp '^11:01:04 aibox\[aaaaaa\]:   git '
	# a time that is not one refuses the record, as any field of the wrong type
	sed -i "s/\"end_time\":[0-9]*/\"end_time\":-5/" "$TK/20260101-100000-aaaaaa/summary.json"
	run aibox tasks show aaaaaa
	assert_success
	assert_line "cannot read all of it: summary.json: 'end_time' is out of range"
	run aibox tasks show bbbbbb
	assert_success
	assert_line --regexp '^[0-9:]{8} aibox\[bbbbbb\]: the task did not finish: the step claude failed$'
	run aibox tasks show eeeeee
	assert_success
	assert_line --index 0 "task eeeeee, 20260101-140000-eeeeee: running"
	assert_line --index 4 "it has no summary yet: 'aibox tasks log -f eeeeee' follows it"
	assert_equal "${#lines[@]}" 5
	# No record: result.json alone, and says the hosts are not known.
	run aibox tasks show cccccc
	assert_success
	assert_line --index 0 "task cccccc, 20260101-120000-cccccc: failed to start"
	assert_line --regexp 'aibox\[cccccc\]: the task did not finish$'
}

@test "tasks show: what TASK names is looked up here, then in every project; ambiguous and unknown ones are refused" {
	mk_task 20260101-100000-aaaaaa 'here'
	cd "$T" && make_repo other && cd other || return 1
	P2=$(aibox projects path 2>/dev/null)
	mkdir -p "$P2/tasks/20260102-100000-aaaaaa" "$P2/tasks/20260103-100000-bbbbbb"
	# From the other checkout: its own aaaaaa first.
	run aibox tasks show aaaaaa
	assert_success
	assert_line --index 1 "folder: $P2/tasks/20260102-100000-aaaaaa"
	# From outside any checkout: two tasks have the id.
	cd "$T" || return 1
	run aibox tasks show aaaaaa
	assert_failure 2
	assert_output --partial "aibox-tasks-show: 'aaaaaa' names 2 tasks, give the folder's path:"
	assert_output --partial "$TK/20260101-100000-aaaaaa"
	assert_output --partial "$P2/tasks/20260102-100000-aaaaaa"
	run aibox tasks show bbbbbb
	assert_success
	assert_line --index 0 "task bbbbbb, 20260103-100000-bbbbbb: not finished"
	run aibox tasks show 123456
	assert_failure 2
	assert_output "aibox-tasks-show: no task '123456' in any project"
	run aibox tasks show 'ABC'
	assert_failure 2
	assert_output "aibox-tasks-show: 'ABC' is not a task: give its id (6 hex), its folder's name or its path"
	run aibox tasks show "$T/repo"
	assert_failure 2
	assert_output "aibox-tasks-show: '$T/repo' is not a task folder"
	run aibox tasks show
	assert_failure 2
	assert_line --index 0 "aibox-tasks-show: which task? give its id, its folder's name or its path"
	run aibox tasks show bbbbbb aaaaaa
	assert_failure 2
	assert_line --index 0 "aibox-tasks-show: give one task"
	run aibox tasks log --frob bbbbbb
	assert_failure 2
	assert_line --index 0 "aibox-tasks-log: unknown option '--frob'"
}

@test "tasks show: --wait of a group reads no attempt's summary.json through a link, nor waits on a FIFO" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	mk_task 20260101-110000-bbbbbb 'x'
	printf 'total 1.000s exit 1\n' >>"$TK/20260101-110000-bbbbbb/aibox.log"
	ln -s ../20260101-100000-aaaaaa/summary.json "$TK/20260101-110000-bbbbbb/summary.json"
	mk_task 20260101-120000-cccccc 'x'
	printf 'total 1.000s exit 1\n' >>"$TK/20260101-120000-cccccc/aibox.log"
	mkfifo "$TK/20260101-120000-cccccc/summary.json"
	for t in 100000-aaaaaa 110000-bbbbbb 120000-cccccc; do echo 0a1b2c >"$TK/20260101-$t/group"; done
	run timeout 20 aibox tasks show --wait 0a1b2c
	assert_success
	assert_line "group 0a1b2c: 1 of 3 attempts finished; aibox counted 0.000000 USD for them all"
}

@test "tasks show: --json is the task's facts and its record, checked with jq" {
	five
	run aibox tasks show --json aaaaaa
	assert_success
	echo "$output" >"$T/show.json"
	assert_equal "$(jq -r '[.id, .state, .record.state, .record.exit, .record.end_commit, .record.result.claude.num_turns, .record.hosts.hosts[0].host] | map(tostring) | join(" ")' "$T/show.json")" \
		"aaaaaa finished finished 0 $C2 4 localhost:3129"
	# Options may stand after the task, as for aibox task.
	run aibox tasks show cccccc --json
	assert_success
	assert_equal "$(echo "$output" | jq -r '[.state, .record] | map(tostring) | join(" ")')" "failed to start null"
}

@test "tasks show: a corrupt or hostile record or result cannot break show" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0 "$C2"
	sed -i 's/I fixed the test./\\u001b]0;pwned\\u0007\\u001b[2Jfixed\\u202e/' "$TK/20260101-100000-aaaaaa/summary.json"
	run aibox tasks show aaaaaa
	assert_success
	refute_output --partial $'\e'
	refute_output --partial $'\a'
	assert_line --regexp 'vm\[aaaaaa\]: \| fixed<U\+202E>$'
	# A field of the wrong type: the record is refused whole, said so, and result.json used.
	sed -i 's/"exit":0/"exit":"0"/' "$TK/20260101-100000-aaaaaa/summary.json"
	echo '{"version":1,"steps":[],"claude":{"num_turns":2,"last_message":"from result.json"}}' \
		>"$TK/20260101-100000-aaaaaa/result.json"
	run aibox tasks show aaaaaa
	assert_success
	assert_line "cannot read all of it: summary.json: 'exit' is not an integer"
	assert_line --regexp 'vm\[aaaaaa\]: \| from result.json$'
	# Both gone bad.
	head -c 2000000 /dev/urandom >"$TK/20260101-100000-aaaaaa/result.json"
	run aibox tasks show aaaaaa
	assert_success
	refute_output --partial $'\e'
}

# HIDE: one of each kind of character that hides or moves text: a zero-width
# space, a line separator, a byte order mark, the language tag and a tag
# letter, a right-to-left override (JSON escapes); SHOWN: how each shows.
HIDE='a\u200bb\u2028c\ufeffd\udb40\udc01\udb40\udc41e\u202ef'
SHOWN=$'a<U+200B>b\nc<U+FEFF>d<U+E0001><U+E0041>e<U+202E>f'

# no_hidden FILE: no format character, U+2028 or U+2029 in FILE (UTF-8)
no_hidden() {
	python3 - "$1" <<-'PY'
		import sys, unicodedata
		text = open(sys.argv[1], encoding="utf-8").read()
		bad = [hex(ord(c)) for c in text if unicodedata.category(c) == "Cf" or c in "\u2028\u2029"]
		sys.exit("hidden: " + " ".join(bad) if bad else 0)
	PY
}

@test "tasks list, show and log: format characters and line separators from the folder are shown, never passed" {
	raw=$(printf '%s' "$HIDE" | python3 -c 'import json,sys; sys.stdout.write(json.loads("\"" + sys.stdin.read() + "\""))')
	mk_task 20260101-100000-aaaaaa "$raw"
	record 20260101-100000-aaaaaa "not finished" 1 "$C2"
	python3 - "$TK/20260101-100000-aaaaaa/summary.json" "$HIDE" <<-'PY'
		import sys
		text = open(sys.argv[1]).read()
		text = text.replace("I fixed the test.", sys.argv[2]).replace("the step claude failed", "why " + sys.argv[2])
		open(sys.argv[1], "w").write(text)
	PY
	printf '{"type":"assistant","message":{"content":[{"type":"text","text":"%s"},{"type":"tool_use","name":"Bash","input":{"command":"%s"}}]}}\n' \
		"$HIDE" "$HIDE" >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	# the VM's lines in aibox.log, as an older aibox wrote them (raw)
	mk_task 20260101-110000-bbbbbb 'live'
	printf '10:00:01 vm[bbbbbb]: %s\n' "$raw" >>"$TK/20260101-110000-bbbbbb/aibox.log"
	hold_lock "$TK/20260101-110000-bbbbbb.lock"
	# no record: result.json alone
	mk_task 20260101-120000-cccccc 'result only'
	printf '{"version":1,"steps":[],"claude":{"last_message":"%s"}}' "$HIDE" >"$TK/20260101-120000-cccccc/result.json"

	run aibox tasks list
	assert_success
	printf '%s\n' "$output" >"$T/out"
	no_hidden "$T/out"
	assert_line --regexp '^aaaaaa  not finished .* a<U\+200B>b$'
	run aibox tasks list --json
	assert_success
	assert_equal "$(jq -r '.[] | select(.id == "aaaaaa") | .prompt' <<<"$output")" 'a<U+200B>b'

	run aibox tasks show aaaaaa
	assert_success
	printf '%s\n' "$output" >"$T/out"
	no_hidden "$T/out"
	assert_line "prompt: a<U+200B>b"
	assert_line --regexp '^[0-9:]{8} vm\[aaaaaa\]: \| a<U\+200B>b$'
	# the message's line separator starts a line of the message, marked as its others
	assert_line --regexp '^[0-9:]{8} vm\[aaaaaa\]: \| c<U\+FEFF>d<U\+E0001><U\+E0041>e<U\+202E>f$'
	assert_line --regexp '^[0-9:]{8} aibox\[aaaaaa\]: the task did not finish: why a<U\+200B>b$'
	# the why's own line break continues it indented, never as a line of aibox's
	assert_line '                        c<U+FEFF>d<U+E0001><U+E0041>e<U+202E>f'
	run aibox tasks show cccccc
	assert_success
	printf '%s\n' "$output" >"$T/out"
	no_hidden "$T/out"
	assert_line --regexp '^[0-9:]{8} vm\[cccccc\]: \| c<U\+FEFF>d<U\+E0001><U\+E0041>e<U\+202E>f$'

	run aibox tasks log aaaaaa
	assert_success
	printf '%s\n' "$output" >"$T/out"
	no_hidden "$T/out"
	assert_output "$SHOWN"$'\n> Bash: a<U+200B>b c<U+FEFF>d<U+E0001><U+E0041>e<U+202E>f'
	run aibox tasks log bbbbbb
	assert_success
	printf '%s\n' "$output" >"$T/out"
	no_hidden "$T/out"
	assert_output $'10:00:01 a<U+200B>b\n10:00:01 c<U+FEFF>d<U+E0001><U+E0041>e<U+202E>f'
	# and the check itself catches each kind
	for c in '\u200b' '\u2028' '\u2029' '\ufeff' '\U000e0001' '\U000e0041' '\u202e' '\u00ad'; do
		printf "x$c" >"$T/bad"
		run ! no_hidden "$T/bad"
		assert_output --partial 'hidden: 0x'
	done
}

# transcript NAME: a transcript.jsonl of the shapes Claude Code writes, with hostile text.
transcript() {
	cat >"$TK/$1/transcript.jsonl" <<'EOF'
{"type":"system","subtype":"init","model":"x","tools":["Bash"]}
{"type":"assistant","message":{"content":[{"type":"text","text":"I will run the tests.\nThen fix them."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"npm test\n  --verbose","description":"run"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok 1\nok 2\nok 3\n"}]}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Edit","input":{"file_path":"/project/a.js","old_string":"x","new_string":"y"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"no such file \u001b[31m/project/a.js\u001b[0m"}],"is_error":true}]}}
this line is not JSON
{"type":"assistant","message":{"content":[{"type":"text","text":"Done \u001b]0;pwned\u0007\u001b[2J."}]}}
{"type":"result","subtype":"success","is_error":false,"num_turns":4,"duration_ms":8321,"total_cost_usd":0.05,"result":"Done."}
EOF
}

@test "tasks log: the transcript as a person reads it: text, tool calls cut short, results abbreviated, errors marked" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	transcript 20260101-100000-aaaaaa
	python3 -c 'import json; print(json.dumps({"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"y"*300}}]}}))' \
		>>"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	run aibox tasks log aaaaaa
	assert_success
	assert_line --index 0 "I will run the tests."
	assert_line --index 1 "Then fix them."
	assert_line --index 2 "> Bash: npm test   --verbose"
	assert_line --index 3 "  < 3 lines: ok 1"
	assert_line --index 4 "> Edit: /project/a.js"
	assert_line --index 5 "  ! error: no such file /project/a.js"
	assert_line --index 6 "[a line that is not a transcript entry, 21 bytes]"
	assert_line --index 7 "Done ."
	assert_line --index 8 "= success, 4 turns, 8.3 s, 0.05 USD"
	assert_line --index 9 "> Bash: $(printf 'y%.0s' $(seq 100))..."
	assert_equal "${#lines[@]}" 10
	refute_output --partial $'\e'
}

@test "tasks log: a corrupt or hostile transcript cannot break log" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	{
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"before"}]}}\n'
		# a line of 2 MiB, over the parse bound
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"'
		head -c 2097152 /dev/zero | tr '\0' a
		printf '"}]}}\n'
		# wrong types everywhere
		printf '{"type":5}\n{"type":"assistant","message":{"content":"just a string"}}\n'
		printf '{"type":"assistant","message":{"content":[{"type":"tool_use","name":7,"input":[1]}]}}\n'
		printf '{"type":"user","message":{"content":[{"type":"tool_result","content":{"a":1}}]}}\n'
		printf '{"type":"result","num_turns":"x","total_cost_usd":-1,"duration_ms":1e300}\n'
		# binary and raw escapes
		head -c 3000 /dev/urandom
		printf '\n\e]0;pwned\a\e[2J\n'
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"after"}]}}'
	} >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	run timeout 20 aibox tasks log aaaaaa
	assert_success
	refute_output --partial $'\e'
	refute_output --partial $'\a'
	assert_line --index 0 "before"
	assert_line --index 1 --regexp '^\[a line of 20972[0-9]{2} bytes, not shown\]$'
	assert_line --index 2 "[a line that is not a transcript entry, 10 bytes]"
	assert_line --index 3 "just a string"
	assert_line --index 4 "> (a tool)"
	assert_line --index 5 "  < 0 lines"
	assert_line --index 6 "= the end"
	assert_line "after"
	# A transcript that is a link or a folder is no transcript.
	rm "$TK/20260101-100000-aaaaaa/transcript.jsonl"
	ln -s /etc/passwd "$TK/20260101-100000-aaaaaa/transcript.jsonl"
	run aibox tasks log aaaaaa
	assert_success
	refute_output --partial root
}

@test "tasks log: a transcript line of more JSON values than the bound is named, not parsed, memory within a bound" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	# lines of 1 MiB of empty objects: jansson would make about 80 MB of each
	python3 -c '
import sys
line = "{\"type\":\"assistant\",\"message\":{\"content\":[" + "{},"*349500 + "{}]}}"
sys.stdout.write("{\"type\":\"assistant\",\"message\":{\"content\":\"before\"}}\n")
sys.stdout.write((line + "\n") * 3)
sys.stdout.write("{\"type\":\"result\",\"subtype\":\"success\",\"num_turns\":2," + "\"x\":[" + "{},"*349500 + "{}]}\n")
sys.stdout.write("{\"type\":\"assistant\",\"message\":{\"content\":\"after\"}}\n")
' >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	run /usr/bin/time -f 'peak %M KiB' -o "$T/time" aibox tasks log aaaaaa
	assert_success
	peak=$(sed -n 's/^peak \([0-9]*\) KiB$/\1/p' "$T/time")
	[ -n "$peak" ] || fail "no peak: $(cat "$T/time")"
	[ "$peak" -lt 40000 ] || fail "aibox tasks log grew to $peak KiB"
	assert_line --index 0 "before"
	assert_line --index 1 "[a line of 1048547 bytes of over 65536 JSON values, not shown]"
	assert_line --index 4 "[a line of 1048560 bytes of over 65536 JSON values, not shown]"
	assert_line --index 5 "after"
	assert_equal "${#lines[@]}" 6
}

@test "tasks log: a last transcript line over the bound without its newline is named, not dropped" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	{
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"before"}]}}\n'
		# 2 MiB and no newline: the file ends inside the line (the results' cap cut it)
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"'
		head -c 2097152 /dev/zero | tr '\0' a
	} >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	run timeout 20 aibox tasks log aaaaaa
	assert_success
	assert_line --index 0 "before"
	assert_line --index 1 "[a line of $((65 + 2097152)) bytes without its end, not shown]"
	[ "${#lines[@]}" -eq 2 ]
}

@test "tasks log: a running task shows its live lines from aibox.log; -f follows them until it ends" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	log=$TK/20260101-100000-aaaaaa/aibox.log
	printf '10:00:01 vm[aaaaaa]: cloning\n10:00:02 vm[aaaaaa]: claude started\nboot 3.000s\n' >>"$log"
	printf '10:00:03 vm[aaaaaa]: Bash: npm test\n10:00:04 vm[bbbbbb]: not this task\n' >>"$log"
	run aibox tasks log aaaaaa
	assert_success
	assert_output $'10:00:01 cloning\n10:00:02 claude started\n10:00:03 Bash: npm test'
	# -f: what is there, then what comes, until the lock is free.
	aibox tasks log -f aaaaaa >"$T/follow" 2>&1 &
	follow=$!
	wait_until 10 grep -q 'Bash: npm test' "$T/follow"
	printf '10:00:05 vm[aaaaaa]: Edit: /project/a.js \e[31mred\n10:00:06 vm[aaaaaa]: claude exi' >>"$log"
	wait_until 10 grep -q 'Edit: ' "$T/follow"
	run cat "$T/follow"
	assert_line "10:00:05 Edit: /project/a.js red"
	kill -0 "$follow"
	printf 'ted with 0\ntotal 9.000s exit 0\n' >>"$log"
	echo '{"type":"result","subtype":"success","num_turns":2}' >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	run cat "$T/follow"
	assert_output $'10:00:01 cloning\n10:00:02 claude started\n10:00:03 Bash: npm test\n10:00:05 Edit: /project/a.js red\n10:00:06 claude exited with 0\n= success, 2 turns\nthe task ended: finished'
}

@test "tasks log: an empty VM line is shown while the task runs, with -f, and once it ended, the same" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	log=$TK/20260101-100000-aaaaaa/aibox.log
	# as aibox task writes an empty line of the VM's: the prefix and nothing after it
	printf '10:00:01 vm[aaaaaa]: before\n10:00:02 vm[aaaaaa]: \n10:00:03 vm[aaaaaa]: after\n' >>"$log"
	want=$'10:00:01 before\n10:00:02 \n10:00:03 after'
	run aibox tasks log aaaaaa
	assert_success
	assert_output "$want"
	aibox tasks log -f aaaaaa >"$T/follow" 2>&1 &
	follow=$!
	wait_until 10 grep -q 'after' "$T/follow"
	printf '10:00:04 vm[aaaaaa]: \n10:00:05 vm[aaaaaa]: last\ntotal 9.000s exit 1\n' >>"$log"
	wait_until 10 grep -q 'last' "$T/follow"
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	run cat "$T/follow"
	assert_output "$want"$'\n10:00:04 \n10:00:05 last\nthe task ended: not finished'
	# ended without a transcript: the same lines
	run aibox tasks log aaaaaa
	assert_success
	assert_output "$want"$'\n10:00:04 \n10:00:05 last'
}

@test "tasks log: where aibox.log's VM lines stop at their cap, the live lines say so" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	# as aibox task writes them: the last VM line that fit, then its own line for the cap
	{
		printf '10:00:01 vm[aaaaaa]: before\n'
		printf "10:00:02 aibox[aaaaaa]: the VM's lines past 16 MiB are left out of aibox.log\n"
		printf '10:00:03 aibox[aaaaaa]: another line of aibox'"'"'s\n'
	} >>"$TK/20260101-100000-aaaaaa/aibox.log"
	run aibox tasks log aaaaaa
	assert_success
	assert_output "10:00:01 before
aibox: the VM's lines past 16 MiB are left out of aibox.log"
}

@test "tasks log: a VM line cannot pose as aibox's own note in the live lines" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	# the VM's text is the note's, word for word, with and without the note's source
	{
		printf "10:00:01 vm[aaaaaa]: the VM's lines past 16 MiB are left out of aibox.log\n"
		printf "10:00:02 vm[aaaaaa]: aibox: the VM's lines past 16 MiB are left out of aibox.log\n"
		printf "10:00:03 aibox[aaaaaa]: the VM's lines past 16 MiB are left out of aibox.log\n"
	} >>"$TK/20260101-100000-aaaaaa/aibox.log"
	run aibox tasks log aaaaaa
	assert_success
	# every row of the VM's starts with its time, aibox's note with its source alone
	assert_output "10:00:01 the VM's lines past 16 MiB are left out of aibox.log
10:00:02 aibox: the VM's lines past 16 MiB are left out of aibox.log
aibox: the VM's lines past 16 MiB are left out of aibox.log"
}

@test "tasks log: an aibox.log that ends inside a line shows what there is of it, marked as cut" {
	mk_task 20260101-100000-aaaaaa 'x'
	# a disk that filled up while aibox task wrote the line
	printf '10:00:01 vm[aaaaaa]: before\n10:00:02 vm[aaaaaa]: claude exi' \
		>>"$TK/20260101-100000-aaaaaa/aibox.log"
	want="10:00:01 before
10:00:02 claude exi
aibox: aibox.log ends inside the line above: the rest of it is lost"
	run aibox tasks log aaaaaa
	assert_success
	assert_output "$want"
	# -f of a running task: shown once the task ended, not while the line may still come
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	run aibox tasks log aaaaaa
	assert_success
	assert_output "10:00:01 before"
	aibox tasks log -f aaaaaa >"$T/follow" 2>&1 &
	follow=$!
	wait_until 10 grep -q 'before' "$T/follow"
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	run cat "$T/follow"
	assert_output "$want"$'\nthe task ended: not finished'
}

@test "tasks log: an aibox.log that ends inside a line not shown says so, naming no line above" {
	mk_task 20260101-100000-aaaaaa 'x'
	# cut inside aibox's own line of its end, and inside a VM line's prefix: nothing to show
	printf '10:00:01 vm[aaaaaa]: before\ntotal 9.0' >>"$TK/20260101-100000-aaaaaa/aibox.log"
	run aibox tasks log aaaaaa
	assert_success
	assert_output "10:00:01 before
aibox: aibox.log ends inside a line: the rest of it is lost"
	printf '00s exit 1\n10:00:02 vm[aa' >>"$TK/20260101-100000-aaaaaa/aibox.log"
	run aibox tasks log aaaaaa
	assert_success
	assert_output "10:00:01 before
aibox: aibox.log ends inside a line: the rest of it is lost"
}

@test "tasks log: on a terminal each live line is cut to its width, each piece with its time, so no row poses as the end line" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	# padded so that an 80-column terminal's wrap would start a row with "the task ended: finished"
	printf '10:00:01 vm[aaaaaa]: %sthe task ended: finished%s\n' "$(head -c 71 /dev/zero | tr '\0' x)" "$(printf 'é日%.0s' {1..30})" \
		>>"$TK/20260101-100000-aaaaaa/aibox.log"
	script -qc 'stty cols 80; aibox tasks log aaaaaa' /dev/null </dev/null | tr -d '\r' >rows
	# every row starts with the line's time and is at most 80 columns (é one, 日 two)
	run python3 - rows 80 <<-'PY'
		import re, sys, unicodedata
		for row in open(sys.argv[1], encoding="utf-8").read().splitlines():
		    cols = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in row)
		    if not row.startswith("10:00:01 ") or cols > int(sys.argv[2]):
		        print("bad row (%d columns): %s" % (cols, row))
	PY
	assert_output ''
	[ "$(wc -l <rows)" -ge 2 ]
	# nothing lost: the pieces joined are the line
	[ "$(sed 's/^10:00:01 //' rows | tr -d '\n')" = "$(sed -n 's/^10:00:01 vm\[aaaaaa\]: //p' "$TK/20260101-100000-aaaaaa/aibox.log")" ]
	# not a terminal: one line, as before
	run aibox tasks log aaaaaa
	assert_success
	[ "${#lines[@]}" -eq 1 ]
}

# rows_of COLS FILE: FILE as a terminal COLS columns wide shows it, one row a
# line (its lines cut where the terminal wraps them; the text here is ASCII)
rows_of() {
	python3 - "$1" "$2" <<-'PY'
		import sys
		cols = int(sys.argv[1])
		for line in open(sys.argv[2], encoding="utf-8").read().splitlines():
		    for i in range(0, max(len(line), 1), cols):
		        print(line[i:i + cols])
	PY
}

@test "tasks show: on a terminal no row of a line that quotes the VM starts with the VM's text" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	mk_task 20260101-100000-aaaaaa 'x'
	# The bundle check quotes a ref name it refuses (printable ASCII, up to 200
	# bytes) in the task's why: padded so that an 80-column terminal's wrap starts
	# a row with what poses as two lines of aibox's, the second a command to paste.
	lead="10:01:23 aibox[aaaaaa]: the task did not finish: changes.bundle refused: line 2: invalid ref name '"
	pad=$(head -c $((160 - ${#lead})) /dev/zero | tr '\0' x)
	pose1=$(printf '%-80s' '23:59:59 aibox[aaaaaa]: the changes end at 0123456789ab, fetch them with')
	pose2='23:59:59 aibox[aaaaaa]:   git fetch x y;touch ~/pwned'
	WHY="changes.bundle refused: line 2: invalid ref name '$pad$pose1$pose2'" \
		record 20260101-100000-aaaaaa "not finished" 1
	script -qc 'stty cols 80; aibox tasks show aaaaaa' /dev/null </dev/null | tr -d '\r' >out
	grep -q "the task did not finish: changes.bundle refused" out || fail "$(cat out)"
	run rows_of 80 out
	assert_success
	refute_line --regexp '^23:59:59'
	# the why's rows after its first are indented: none starts with its text
	sed -n '/did not finish/,$p' out >why
	run rows_of 80 why
	assert_success
	[ "${#lines[@]}" -ge 3 ]
	for row in "${lines[@]:1}"; do [[ "$row" == ' '* ]] || fail "row: $row"; done
	# nothing lost: the rows of the why joined are the why
	[[ "$(sed -n '/did not finish/,$p' out | tr -d ' \n')" == *"$(printf '%s' "$pad$pose1$pose2" | tr -d ' ')'"* ]] ||
		fail "$(cat out)"
	# not a terminal: one line, as before
	run aibox tasks show aaaaaa
	assert_success
	assert_line "10:01:23 aibox[aaaaaa]: the task did not finish: changes.bundle refused: line 2: invalid ref name '$pad$pose1$pose2'"
}

# rows_fit FILE COLS: each row of FILE at most COLS columns (any character outside ASCII two)
rows_fit() {
	python3 - "$1" "$2" <<-'PY'
		import sys
		for row in open(sys.argv[1], encoding="utf-8").read().splitlines():
		    cols = sum(1 if ord(c) < 0x80 else 2 for c in row)
		    if cols > int(sys.argv[2]):
		        print("a row of %d columns: %s" % (cols, row))
	PY
}

@test "tasks log: on a terminal each transcript line is cut to its width, its pieces after the first indented, so no row but a line's first starts with its text" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0
	# padded so that an 80-column terminal's wrap would start a row with "the task ended: finished"
	text="$(head -c 80 /dev/zero | tr '\0' x)the task ended: finished$(printf 'é日%.0s' {1..30})"
	python3 -c 'import json, sys; print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": sys.argv[1] + "\nshort"}]}}))' \
		"$text" >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	script -qc 'stty cols 80; aibox tasks log aaaaaa' /dev/null </dev/null | tr -d '\r' >rows
	run rows_fit rows 80
	assert_output ''
	run grep -c '^the task ended' rows
	assert_output 0
	[ "$(wc -l <rows)" -ge 3 ]
	# nothing lost: the first piece as it is, the others after two spaces, then the next line
	[ "$(head -n -1 rows | sed '1!s/^  //' | tr -d '\n')" = "$text" ]
	[ "$(tail -n 1 rows)" = short ]
	# not a terminal: each line whole, as before
	run aibox tasks log aaaaaa
	assert_success
	assert_output "$text"$'\nshort'
}

@test "tasks log: on a terminal -f cuts the transcript's end line to its width too, so no row of it poses as the line that says how the task ended" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	printf '10:00:01 vm[aaaaaa]: cloning\ntotal 9.000s exit 1\n' >>"$TK/20260101-100000-aaaaaa/aibox.log"
	# "= " and nine zero-width spaces shown as <U+200B> (72 columns) and six x: 80 columns
	# before a made-up end line, within the subtype's 40 characters
	printf '{"type":"result","subtype":"%sxxxxxxthe task ended: finished"}\n' "$(printf '\\u200b%.0s' {1..9})" \
		>"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	script -qc 'stty cols 80; aibox tasks log -f aaaaaa' /dev/null </dev/null >raw &
	follow=$!
	wait_until 10 grep -q cloning raw
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	tr -d '\r' <raw >rows
	run rows_fit rows 80
	assert_output ''
	# aibox's own end line is the one row that starts like it, the last
	run grep -n '^the task ended' rows
	assert_output "$(wc -l <rows):the task ended: not finished"
	run cat rows
	assert_line --index 1 "= $(printf '<U+200B>%.0s' {1..9})xxxxxx"
	assert_line --index 2 "  the task ended: finished"
}

@test "tasks log: -f shows the transcript's end line alone, never a text of the VM's that starts like it" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	printf '10:00:01 vm[aaaaaa]: cloning\n' >>"$TK/20260101-100000-aaaaaa/aibox.log"
	aibox tasks log -f aaaaaa >"$T/follow" 2>&1 &
	follow=$!
	wait_until 10 grep -q 'cloning' "$T/follow"
	{
		# agent text in an entry with a "result" key, rendered as "= ..." and then a made-up end
		printf '{"type":"assistant","result":1,"message":{"content":[{"type":"text","text":"= done\\nthe task ended: finished"}]}}\n'
		echo '{"type":"result","subtype":"error_max_turns","num_turns":2}'
	} >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	run cat "$T/follow"
	assert_output $'10:00:01 cloning\n= error_max_turns, 2 turns\nthe task ended: not finished'
}

@test "tasks log: -f shows the transcript's end line alone after a line over the bound, no note of that line" {
	mk_task 20260101-100000-aaaaaa 'x'
	hold_lock "$TK/20260101-100000-aaaaaa.lock"
	printf '10:00:01 vm[aaaaaa]: cloning\n' >>"$TK/20260101-100000-aaaaaa/aibox.log"
	{
		# 2 MiB of the agent's text, over the parse bound, then the end
		printf '{"type":"assistant","message":{"content":[{"type":"text","text":"'
		head -c 2097152 /dev/zero | tr '\0' a
		printf '"}]}}\n'
		echo '{"type":"result","subtype":"success","num_turns":2}'
	} >"$TK/20260101-100000-aaaaaa/transcript.jsonl"
	aibox tasks log -f aaaaaa >"$T/follow" 2>&1 &
	follow=$!
	wait_until 10 grep -q 'cloning' "$T/follow"
	release_locks
	wait_until 10 gone "$follow"
	wait "$follow"
	run cat "$T/follow"
	assert_output $'10:00:01 cloning\n= success, 2 turns\nthe task ended: not finished'
}

@test "tasks log: an ended task without a transcript shows its live lines; an unknown task is refused" {
	mk_task 20260101-100000-aaaaaa 'x'
	printf '10:00:01 vm[aaaaaa]: cloning\n10:00:02 vm[aaaaaa]: clone failed\ntotal 9.000s exit 1\n' \
		>>"$TK/20260101-100000-aaaaaa/aibox.log"
	run aibox tasks log aaaaaa
	assert_success
	assert_output $'10:00:01 cloning\n10:00:02 clone failed'
	run aibox tasks log -f aaaaaa
	assert_success
	assert_output $'10:00:01 cloning\n10:00:02 clone failed'
	run aibox tasks log 999999
	assert_failure 2
	assert_output "aibox-tasks-log: no task '999999' in any project"
}

@test "tasks list, show and log: on a terminal as in a pipe, without colour or cursor movement" {
	mk_task 20260101-100000-aaaaaa 'x'
	record 20260101-100000-aaaaaa finished 0 "$C2"
	transcript 20260101-100000-aaaaaa
	mk_task 20260101-110000-bbbbbb 'not finished one'
	record 20260101-110000-bbbbbb "not finished" 1
	# docs/internals.md: aibox writes no colour and moves no cursor, so NO_COLOR
	# and the terminal change nothing.
	run env -u NO_COLOR TERM=xterm-256color python3 - aibox tasks <<-'PY'
		import os, pty, re, subprocess, sys
		cmd = sys.argv[1:]
		# show stamps its lines with the time it prints them
		untimed = lambda b: re.sub(rb"(?m)^[0-9:]{8} ", b"", b)
		for args in (["list"], ["list", "--all"], ["show", "aaaaaa"], ["log", "aaaaaa"],
		             ["show", "bbbbbb"]):
		    m, s = pty.openpty()
		    p = subprocess.Popen(cmd + args, stdin=s, stdout=s, stderr=s)
		    os.close(s)
		    out = b""
		    while True:
		        try:
		            b = os.read(m, 65536)
		        except OSError:
		            break
		        if not b:
		            break
		        out += b
		    assert p.wait(timeout=20) == 0, args
		    os.close(m)
		    piped = subprocess.run(cmd + args, capture_output=True, timeout=20).stdout
		    assert b"\x1b" not in out, (args, out)
		    assert untimed(out.replace(b"\r\n", b"\n")) == untimed(piped), (args, out, piped)
		    print(" ".join(args), len(piped.splitlines()))
	PY
	assert_success
	assert_line "log aaaaaa 9"
}

@test "aibox task --json: one JSON object on stdout at the end instead of the folder, the same in summary.json" {
	no_vm
	printf 'env:\n  - ANTHROPIC_API_KEY\n' >"$P/config.yaml"
	ANTHROPIC_API_KEY=sk-test run --separate-stderr aibox task --json "do it"
	assert_failure 1
	dir=$(ls -d "$TK"/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])
	assert_equal "$(echo "$output" | jq -r '[.folder, .state, .exit, .start_commit] | join(" ")')" \
		"$dir not finished 1 $C2"
	assert_equal "$(echo "$output" | jq -r .why)" "$(jq -r .why "$dir/summary.json")"
	[ -n "$(echo "$output" | jq -r .why)" ]
	assert_equal "$(echo "$output" | jq -c 'keys_unsorted')" \
		'["version","folder","name","id","group","state","exit","why","seconds","start_commit","start_time","end_time","end_commit","branch","fetch","no_changes","result","hosts","hosts_why"]'
	assert_equal "$output" "$(cat "$dir/summary.json")"
	# the times of its start line and its end, which aibox tasks show prints them at
	start=$(echo "$output" | jq .start_time)
	end=$(echo "$output" | jq .end_time)
	[ "$end" -ge "$start" ]
	[[ "$stderr" == *"$(date -d "@$start" +%T) aibox[${dir: -6}]: task ${dir: -6} starts from $C2"* ]] || fail "$stderr"
	[[ "$stderr" == *"$(date -d "@$end" +%T) aibox[${dir: -6}]: the task did not finish: "* ]] || fail "$stderr"
	run aibox tasks show "${dir: -6}"
	assert_success
	assert_line "$(date -d "@$start" +%T) aibox[${dir: -6}]: task ${dir: -6} starts from $C2"
	assert_line --regexp "^$(date -d "@$end" +%T) aibox\[${dir: -6}\]: the task did not finish: "
	run aibox tasks list
	assert_success
	assert_line --index 1 --regexp "^${dir: -6}  not finished .* do it\$"
}
