#!/usr/bin/env bats
# aibox tasks compare on attempts' folders written by hand (docs/tasks.md,
# "Comparing attempts"): one row an attempt with its state, spend, time and
# the diff of its checked changes.bundle against the start commit, computed
# on the host without writing to the checkout or the folders; --json; the
# group found by its id or by any attempt; hostile records.
bats_require_minimum_version 1.5.0
load lib-common
load lib-lock

setup() {
	task_project_setup || return 1
	mkdir -p "$TK"
	C1=$(git rev-parse HEAD~1)
	# An attempt's branch: two commits on C1 (3 lines added, 1 removed, a new file).
	git clone -q "$T/repo" "$T/work"
	(
		cd "$T/work" || exit 1
		git checkout -q -b aibox/task "$C1"
		printf 'a\nb\n' >>README.md
		git commit -q -am one
		sed -i 1d README.md
		echo new >new.txt
		git add new.txt
		git commit -q -am two
		git bundle create -q "$T/changes.bundle" aibox/task "^$C1"
	)
	END=$(git -C "$T/work" rev-parse aibox/task)
	rm -rf "$T/work"
}
teardown() { lock_teardown; }

# attempt NAME STATE [END] [NANO]: an ended attempt of group 0a1b2c, its record;
# $CHECK the result's "check" (null by default); $CAP the usage's ended_by_cap
# ("day" or "task": a cap of 2 USD, 1 request refused).
attempt() {
	local d=$TK/$1 e=null u='' r=null refused=0 caps=null capn=0 ebc=null
	[ -z "${CAP:-}" ] || { refused=1 caps=2 capn=2000000000 ebc="\"$CAP\""; }
	mkdir "$d"
	touch "$TK/$1.lock"
	echo 0a1b2c >"$d/group"
	printf 'fix it' >"$d/prompt.txt"
	[ -n "${3:-}" ] && e="\"$3\""
	[ -n "${3:-}" ] && cp "$T/changes.bundle" "$d/changes.bundle"
	[ -n "${CHECK:-}" ] && r='{"version":1,"steps":[],"failed_step":null,"claude":null,"start_commit":null,"end_commit":null,"changes":false,"check":'"$CHECK"'}'
	[ -n "${4:-}" ] && u=",\"usage\":{\"requests\":3,\"usd\":0,\"nano_usd\":$4,\"models\":[],\"uncounted\":0,\"skipped\":0,\"refused\":$refused,\"caps\":{\"task_usd\":$caps,\"day_usd\":$caps},\"cap_task_nano\":$capn,\"cap_day_nano\":$capn,\"day_nano_usd\":0,\"ended_by_cap\":$ebc}"
	cat >"$d/summary.json" <<JSON
{"version":1,"folder":"$d","name":"$1","id":"${1: -6}","group":"0a1b2c","state":"$2","exit":0,"why":null,
 "seconds":83.4,"start_commit":"$C1","end_commit":$e,"branch":"aibox/task-$1","fetch":null,
 "no_changes":false,"result":$r,
 "hosts":{"version":1,"hosts":[],"more_hosts":0,"more_hosts_at_least":false,"more_allowed":0,"allowed":3,"refused":0,"failed":0,"log_left_out":0$u},
 "hosts_why":null}
JSON
	printf 'total 83.400s exit 0\n' >>"$d/aibox.log"
}

three() {
	CHECK='{"exit_code":0,"timed_out":false,"seconds":12.5,"tail":"ok 3 tests\n"}' \
		attempt 20260101-100000-aaaaaa finished "$END" 1500000000
	CAP=day CHECK='{"exit_code":null,"timed_out":true,"seconds":600.2,"tail":"\u001b]0;x\u0007stuck"}' \
		attempt 20260101-100001-bbbbbb "not finished" "" 250000000
	attempt 20260101-100002-cccccc finished "$END"
}

@test "compare: one row an attempt, the diff counted from its bundle against the start commit" {
	three
	before=$(git for-each-ref; git count-objects -v; find "$TK" -newer "$TK" -o -print | sort | xargs ls -ld --time-style=+%s.%N)
	mkdir "$T/tmp"
	TMPDIR=$T/tmp run --separate-stderr aibox tasks compare 0a1b2c
	assert_success
	assert_line --index 0 "group 0a1b2c: 3 attempts"
	[[ "${lines[1]}" =~ ^aaaaaa\ +finished\ +check\ passed\ +1\.500000\ USD\ +1m23s\ +2\ commits,\ 2\ files,\ \+3\ -1$ ]] || fail "${lines[1]}"
	assert_line --index 2 "        git fetch $TK/20260101-100000-aaaaaa/changes.bundle aibox/task:aibox/task-20260101-100000-aaaaaa"
	[[ "${lines[3]}" =~ ^bbbbbb\ +not\ finished\ +check\ timed\ out\ +0\.250000\ USD\ +1m23s\ +nothing\ to\ fetch$ ]] || fail "${lines[3]}"
	# the cap that ended it, in the summary's words
	assert_line --index 4 "        ended by budget: the day cap of 2.000000 USD was reached (1 request refused)"
	[[ "${lines[5]}" =~ ^cccccc\ +finished\ +check\ -\ +-\ +1m23s\ +2\ commits ]] || fail "${lines[5]}"
	# Read only: the checkout and the folders are as they were, no temporary repository left.
	after=$(git for-each-ref; git count-objects -v; find "$TK" -newer "$TK" -o -print | sort | xargs ls -ld --time-style=+%s.%N)
	assert_equal "$after" "$before"
	run ! git cat-file -e "$END"
	assert_equal "$(ls -A "$T/tmp")" ""
	# Any attempt names its group, by id, name or path; --json gives one object each.
	for arg in bbbbbb 20260101-100002-cccccc "$TK/20260101-100000-aaaaaa"; do
		run --separate-stderr aibox tasks compare --json "$arg"
		assert_success
		run jq -c '[.[] | [.id, .state, .spend_usd, .commits, .files, .added, .removed, .end_commit == "'"$END"'", .problem, .check, .ended_by_cap]]' <<<"$output"
		assert_success
		assert_output '[["aaaaaa","finished",1.5,2,2,3,1,true,null,{"exit_code":0,"timed_out":false,"seconds":12.5,"tail":"ok 3 tests\n"},null],["bbbbbb","not finished",0.25,null,null,null,null,false,null,{"exit_code":null,"timed_out":true,"seconds":600.2,"tail":"stuck"},"day"],["cccccc","finished",null,2,2,3,1,true,null,null,null]]'
	done
}

@test "compare: an attempt whose folder is removed while compare runs is gone, not running" {
	three
	# the first git command compare runs (the first row's) removes the last attempt's folder
	mkdir "$T/bin"
	cat >"$T/bin/git" <<-EOF
		#!/bin/sh
		rm -rf "$TK/20260101-100002-cccccc" "$TK/20260101-100002-cccccc.lock"
		exec $(command -v git) "\$@"
	EOF
	chmod +x "$T/bin/git"
	PATH=$T/bin:$PATH run --separate-stderr aibox tasks compare 0a1b2c
	assert_success
	[[ "${lines[5]}" =~ ^cccccc\ +gone\ +check\ -\ +-\ +-\ +nothing\ to\ fetch$ ]] || fail "${lines[5]}"
	assert_line --index 6 "        not read: its folder is gone: it was removed"
	rm -r "$TK/20260101-100000-aaaaaa" "$TK/20260101-100001-bbbbbb"
	three
	PATH=$T/bin:$PATH run --separate-stderr aibox tasks compare --json 0a1b2c
	assert_success
	run jq -c '.[2] | [.id, .state, .seconds, .problem]' <<<"$output"
	assert_output '["cccccc","gone",null,"its folder is gone: it was removed"]'
}

@test "compare: an id that a task and a group both have names the task, as show and log take it" {
	three
	# the task 0a1b2c, an attempt of the group 0d0d0d, whose id is also the group of three()
	attempt 20260101-120000-0a1b2c finished
	attempt 20260101-120001-dddddd finished
	for t in 120000-0a1b2c 120001-dddddd; do echo 0d0d0d >"$TK/20260101-$t/group"; done
	run --separate-stderr aibox tasks show 0a1b2c
	assert_success
	assert_line --index 0 "task 0a1b2c, 20260101-120000-0a1b2c: finished"
	run --separate-stderr aibox tasks compare 0a1b2c
	assert_success
	assert_line --index 0 "group 0d0d0d: 2 attempts"
	# the group's other attempts name it, as before
	run --separate-stderr aibox tasks compare aaaaaa
	assert_success
	assert_line --index 0 "group 0a1b2c: 3 attempts"
}

@test "compare: a task of no group, an unknown id and a word too many are refused in words" {
	three
	mkdir "$TK/20260101-110000-dddddd"
	touch "$TK/20260101-110000-dddddd.lock"
	run --separate-stderr aibox tasks compare dddddd
	assert_failure 2
	assert_equal "$stderr" "aibox-tasks-compare: 'dddddd' is not an attempt of a group (aibox task --attempts N)"
	run --separate-stderr aibox tasks compare 999999
	assert_failure 2
	assert_equal "$stderr" "aibox-tasks-compare: no task '999999' in any project"
	run --separate-stderr aibox tasks compare 0a1b2c aaaaaa
	assert_failure 2
	[[ "$stderr" == *"unexpected argument 'aaaaaa'"* ]] || fail "$stderr"
	run --separate-stderr aibox tasks compare --help
	assert_success
	assert_line --index 0 "usage: aibox tasks compare [--json] GROUP"
}

@test "compare: hostile attempts are named and never stop the others' rows" {
	three
	# A record that is not JSON; a bundle that is not one; a bundle of another history.
	printf '{"version":1,' >"$TK/20260101-100001-bbbbbb/summary.json"
	echo 'not a bundle' >"$TK/20260101-100002-cccccc/changes.bundle"
	attempt 20260101-100003-eeeeee finished "$C1$C1"
	attempt 20260101-100004-ffffff finished "$(printf 'e%.0s' $(seq 40))"
	printf '\033]0;x\007' >"$TK/20260101-100004-ffffff/changes.bundle"
	# A check the VM reported beyond its rules makes the record unreadable, no other.
	CHECK='{"exit_code":1,"timed_out":true,"seconds":1,"tail":""}' attempt 20260101-100005-a00001 finished
	CHECK='{"exit_code":256,"timed_out":false,"seconds":1,"tail":""}' attempt 20260101-100006-a00002 finished
	CHECK='{"exit_code":0,"timed_out":false,"seconds":1,"tail":"a\u0000b"}' attempt 20260101-100007-a00003 finished
	CHECK='{"exit_code":0,"timed_out":false,"seconds":-1,"tail":""}' attempt 20260101-100008-a00004 finished
	run --separate-stderr aibox tasks compare --json 0a1b2c
	assert_success
	run jq -r '.[5:] | .[] | .problem' <<<"$output"
	assert_success
	assert_line --index 0 --partial "'check' has an exit code and timed out"
	assert_line --index 1 --partial "exit_code"
	assert_line --index 2 --partial "is not allowed"
	assert_line --index 3 --partial "seconds"
	run --separate-stderr aibox tasks compare --json 0a1b2c
	assert_success
	run jq -c '[.[0:5] | .[] | [.id, .commits, (.problem // "" | .[0:40])]]' <<<"$output"
	assert_success
	[[ "$output" == '[["aaaaaa",2,""],["bbbbbb",null,"'* ]] || fail "$output"
	run --separate-stderr aibox tasks compare 0a1b2c
	assert_success
	[[ "$output" == *"aaaaaa  finished"*"2 commits"* ]] || fail "$output"
	[[ "$output" == *"cccccc  finished"*"changes not counted"*"not read: git fetch: it failed"* ]] || fail "$output"
	[[ "$output" != *$'\033'* ]] || fail "an escape printed"
}

# tree_attempt NAME BUILD: attempt dddddd, whose bundle $T/NAME.bundle is one
# commit on C1 that adds the folder NAME: the tree the function BUILD prints,
# run in a clone of the project ($T/work); the bundle check accepts it.
tree_attempt() {
	local name=$1 build=$2
	git clone -q "$T/repo" "$T/work"
	(
		cd "$T/work" || exit 1
		tree=$("$build") || exit 1
		top=$( (git ls-tree "$C1" && printf '040000 tree %s\t%s\n' "$tree" "$name") | git mktree)
		git update-ref refs/heads/aibox/task "$(git commit-tree "$top" -p "$C1" -m "$name")"
		git bundle create -q "$T/$name.bundle" aibox/task "^$C1"
	)
	run aibox-bundle-check --ref aibox/task --base "$C1" --pack --repo "$T/work" "$T/$name.bundle"
	assert_success
	attempt 20260101-100003-dddddd finished "$(git -C "$T/work" rev-parse aibox/task)"
	cp "$T/$name.bundle" "$TK/20260101-100003-dddddd/changes.bundle"
}

# mktree_of MODE TYPE OBJECT PREFIX COUNT: a tree of COUNT entries PREFIX000...
# (seq -w 0 COUNT-1), each OBJECT; its id
mktree_of() {
	for i in $(seq -w 0 $(($5 - 1))); do printf '%s %s %s\t%s%s\n' "$1" "$2" "$3" "$4" "$i"; done | git mktree
}

# Trees that name each other: 100 x 1000 x 1000 files of one blob.
hundred_million_files() {
	local t
	t=$(mktree_of 100644 blob "$(echo x | git hash-object -w --stdin)" f 1000)
	t=$(mktree_of 040000 tree "$t" d 1000)
	mktree_of 040000 tree "$t" e 100
}

# 1000 x 1000 x 1000 empty trees, no file.
billion_empty_trees() {
	local t
	t=$(mktree_of 040000 tree "$(git mktree </dev/null)" f 1000)
	t=$(mktree_of 040000 tree "$t" d 1000)
	mktree_of 040000 tree "$t" e 1000
}

# 100 files of one blob of 16 million empty lines.
hundred_long_files() {
	mktree_of 100644 blob "$(head -c 16000000 /dev/zero | tr '\0' '\n' | git hash-object -w --stdin)" f 100
}

@test "compare: trees that name a hundred million files are not counted, within a bound; the other rows are" {
	three
	# Trees that name each other, 100 x 1000 x 1000 files under bomb/, in a
	# bundle of a few KiB that the bundle check accepts: git diff would hold
	# every file's pair in memory before it prints one (20 GiB and more).
	tree_attempt bomb hundred_million_files
	[ "$(stat -c %s "$T/bomb.bundle")" -lt 16384 ]
	# Should the bound fail, git stops at 4 GiB here rather than take the machine's memory.
	mkdir "$T/bin"
	printf '#!/bin/sh\nulimit -v 4194304\nexec %s "$@"\n' "$(command -v git)" >"$T/bin/git"
	chmod +x "$T/bin/git"
	PATH=$T/bin:$PATH run --separate-stderr timeout 120 aibox tasks compare --json 0a1b2c
	assert_success
	run jq -c '[.[] | [.id, .commits, .files, .added, .problem]]' <<<"$output"
	assert_success
	assert_output '[["aaaaaa",2,2,3,null],["bbbbbb",null,null,null,null],["cccccc",2,2,3,null],["dddddd",null,null,null,"more than 100000 files changed: not counted"]]'
	PATH=$T/bin:$PATH run --separate-stderr timeout 120 aibox tasks compare 0a1b2c
	assert_success
	[[ "$output" == *"dddddd  finished"*"changes not counted"*"not read: more than 100000 files changed: not counted"* ]] || fail "$output"
}

# slow_attempt: attempt dddddd, whose bundle has 100 files of one blob of 16
# million empty lines (within the bundle check's 16 MiB for one object, a few
# KiB packed): git diff counts each file's lines anew, seconds a file.
slow_attempt() {
	tree_attempt lines hundred_long_files
}

@test "compare: git's work on one attempt ends at AIBOX_COMPARE_SECONDS; the other rows are counted" {
	three
	slow_attempt
	start=$SECONDS
	AIBOX_COMPARE_SECONDS=2 run --separate-stderr timeout 60 aibox tasks compare --json 0a1b2c
	assert_success
	[ $((SECONDS - start)) -lt 30 ] || fail "$((SECONDS - start)) s"
	run jq -c '[.[] | [.id, .commits, .files, .added, .problem]]' <<<"$output"
	assert_success
	assert_output '[["aaaaaa",2,2,3,null],["bbbbbb",null,null,null,null],["cccccc",2,2,3,null],["dddddd",null,null,null,"git diff: not done within 2 s: not counted"]]'
	# A value that is no whole number of seconds from 1 to 3600 is refused.
	for v in 0 3601 x 1.5 -1; do
		AIBOX_COMPARE_SECONDS=$v run --separate-stderr aibox tasks compare 0a1b2c
		assert_failure 2
		assert_equal "$stderr" "aibox-tasks-compare: AIBOX_COMPARE_SECONDS: '$v' is not a whole number of seconds from 1 to 3600"
	done
}

@test "compare: ended by a signal, it leaves no temporary repository behind" {
	three
	slow_attempt
	mkdir "$T/tmp"
	for sig in TERM HUP INT; do
		# INT as Ctrl-C sends it: to the whole process group (setsid gives it
		# one), not ignored as bash has it for a background job
		TMPDIR=$T/tmp setsid env --default-signal=INT aibox tasks compare 0a1b2c >/dev/null 2>"$T/err" &
		pid=$!
		# until the slow row's repository is there (the other rows' come and go)
		wait_until 30 bash -c "find '$T/tmp' -path '*/objects/pack/*.pack' | grep -q ."
		if [ "$sig" = INT ]; then kill -INT -- "-$pid"; else kill "-$sig" "$pid"; fi
		st=0
		wait "$pid" || st=$?
		assert_equal "$st" "$((128 + $(kill -l "$sig")))"
		run ls -A "$T/tmp"
		assert_output ''
	done
}

@test "compare: trees that name a billion empty trees, no file, are walked within AIBOX_COMPARE_SECONDS" {
	three
	# No file for the count to stop at: only the time bound ends libgit2's walk
	# (some 4 minutes here unbounded).
	tree_attempt bomb billion_empty_trees
	start=$SECONDS
	AIBOX_COMPARE_SECONDS=2 run --separate-stderr timeout 60 aibox tasks compare --json 0a1b2c
	assert_success
	[ $((SECONDS - start)) -lt 30 ] || fail "$((SECONDS - start)) s"
	run jq -c '[.[] | [.id, .commits, .files, .problem]]' <<<"$output"
	assert_success
	assert_output '[["aaaaaa",2,2,null],["bbbbbb",null,null,null],["cccccc",2,2,null],["dddddd",null,null,"the files changed: not counted within 2 s"]]'
}
