#!/usr/bin/env bats
# aibox task --attempts N without a VM (docs/tasks.md, "Several attempts"):
# the count's checks, the group's folders, ids and line, the prompt made
# once, a stop passed on to every attempt.  Each attempt stops at the boot
# (no_vm).
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
	printf 'env:\n  - CLAUDE_CODE_OAUTH_TOKEN\n' >"$cfg"
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	unset ANTHROPIC_API_KEY
}

task_dirs() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

@test "attempts: a count out of 1 to 8, or not a number, is refused before anything starts" {
	for v in 0 9 -1 99999999999999999999; do
		run --separate-stderr aibox task --attempts "$v" "fix it"
		assert_failure 2
		[[ "$stderr" == *"--attempts: '$v' is out of range (1 to 8)"* ]] || fail "$v: $stderr"
	done
	for v in x 2x ''; do
		run --separate-stderr aibox task --attempts "$v" "fix it"
		assert_failure 2
		[[ "$stderr" == *"--attempts: '$v' is not a whole number"* ]] || fail "$v: $stderr"
	done
	run --separate-stderr aibox task --attempt-of 12345g "fix it"
	assert_failure 2
	[[ "$stderr" == *"--attempt-of: '12345g' is not a group id"* ]] || fail "$stderr"
	run task_dirs
	assert_output ""
}

@test "attempts: the config's attempts: is checked like --attempts" {
	printf 'attempts: 9\n' >>"$cfg"
	run --separate-stderr aibox task "fix it"
	assert_failure 2
	[[ "$stderr" == *"attempts: '9' is out of range (1 to 8)"* ]] || fail "$stderr"
	printf 'env:\n  - CLAUDE_CODE_OAUTH_TOKEN\nattempts: two\n' >"$cfg"
	run --separate-stderr aibox task "fix it"
	assert_failure 2
	[[ "$stderr" == *"attempts: '"*"two"*"is not a whole number"* ]] || fail "$stderr"
}

# The checks of one group of 2 that stopped at the boot: its output in $output/$stderr.
assert_group_of_2() {
	local dirs gid
	assert_failure 1
	dirs=$(task_dirs | sort)
	[ "$(echo "$dirs" | wc -l)" -eq 2 ] || fail "not 2 folders: $dirs"
	assert_equal "$(echo "$output" | sort)" "$dirs"
	gid=$(cat "$(echo "$dirs" | head -1)/group")
	[[ "$gid" =~ ^[0-9a-f]{6}$ ]] || fail "group '$gid'"
	for d in $dirs; do
		assert_equal "$(cat "$d/group")" "$gid"
		run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["group"], r["state"])' "$d/summary.json"
		assert_success
		assert_output "$gid not finished"
	done
	[[ "$stderr" == *"aibox[$gid]: group $gid: 0 of 2 attempts finished; aibox counted 0.000000 USD for them all"* ]] || fail "$stderr"
}

@test "attempts: --attempts 2 makes two folders of one group, one line each on stdout" {
	run --separate-stderr aibox task --attempts 2 "fix the flaky test"
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "$stderr"
	assert_group_of_2
	for d in $(task_dirs); do
		run cat "$d/prompt.txt"
		assert_output "fix the flaky test"
	done
	# The tasks commands: the group names its attempts; list gives each one's group.
	gid=$(cat "$(task_dirs | head -1)/group")
	run --separate-stderr aibox tasks show "$gid"
	assert_failure 2
	[[ "$stderr" == *"'$gid' is the group of 2 attempts, give one of them:"* ]] || fail "$stderr"
	for d in $(task_dirs); do
		[[ "$stderr" == *"  $d"* ]] || fail "$d not named: $stderr"
	done
	run --separate-stderr aibox tasks list --json
	assert_success
	run python3 -c 'import json,sys; print(sorted(t["group"] for t in json.load(sys.stdin)))' <<<"$output"
	assert_success
	assert_output "['$gid', '$gid']"
	# A group of one attempt left (the other removed) names it.
	rm -rf "$(task_dirs | head -1)"
	run --separate-stderr aibox tasks show "$gid"
	assert_success
	assert_line "folder: $(task_dirs)"
}

@test "attempts: the config's attempts: 2, and a prompt from stdin read once for both" {
	printf 'attempts: 2\n' >>"$cfg"
	run --separate-stderr aibox task <<<"the prompt from stdin"
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "$stderr"
	assert_group_of_2
	for d in $(task_dirs); do
		run cat "$d/prompt.txt"
		assert_output "the prompt from stdin"
	done
}

@test "attempts: --attempts 1 over the config's attempts: 2 is one ordinary task" {
	printf 'attempts: 2\n' >>"$cfg"
	run --separate-stderr aibox task --attempts 1 "fix it"
	assert_stopped_at_boot
	assert_equal "$(task_dirs | wc -l)" 1
	assert_file_not_exists "$(task_dirs)/group"
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["group"])' "$(task_dirs)/summary.json"
	assert_success
	assert_output "None"
}

@test "attempts: --json gives one record a line, the folders not printed" {
	run --separate-stderr aibox task --attempts 2 --json "fix it"
	assert_failure 1
	assert_equal "$(echo "$output" | wc -l)" 2
	run python3 -c '
import json,sys
rs=[json.loads(l) for l in sys.stdin]
print(len({r["group"] for r in rs}), sorted(r["folder"] for r in rs) == sorted(sys.argv[1:]))' $(task_dirs) <<<"$output"
	assert_success
	assert_output "1 True"
}

@test "attempts: SIGINT to aibox stops every attempt" {
	# A QEMU that waits: each attempt is in its boot when the stop comes.
	printf '#!/bin/sh\n[ "$1" = --version ] && exit 1\ntouch "%s/qemu.$$"\nexec sleep 60\n' "$T" >"$T/fake-bin/qemu-system-x86_64"
	aibox task --attempts 2 "fix it" >"$T/out" 2>"$T/err" &
	pid=$!
	wait_until 60 qemus_started 2
	kill -INT "$pid"
	rc=0
	wait "$pid" || rc=$?
	assert_equal "$rc" 1
	[ "$(wc -l <"$T/out")" -eq 2 ] || fail "$(cat "$T/out")"
	for d in $(cat "$T/out"); do
		run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"], r["why"])' "$d/summary.json"
		assert_success
		assert_output --partial "not finished the VM was stopped by SIGINT"
	done
	# the group's line names the ones stopped
	a=$(sed -n 1p "$T/out") b=$(sed -n 2p "$T/out")
	gid=$(cat "$a/group")
	grep -qE "aibox\[$gid\]: group $gid: 0 of 2 attempts finished \(none\), 2 stopped \((${a: -6}, ${b: -6}|${b: -6}, ${a: -6})\); aibox counted 0.000000 USD for them all$" "$T/err" ||
		fail "$(cat "$T/err")"
}

@test "attempts: one start bundle for the group, its commit pinned while the branch moves" {
	head=$(git rev-parse HEAD)
	# Each attempt's QEMU notes the inode of its start.bundle; the first also commits.
	cat >"$T/fake-bin/qemu-system-x86_64" <<QEMU
#!/bin/sh
[ "\$1" = --version ] && exit 1
for a; do case \$a in local,path=*) d=\${a#local,path=}; d=\${d%%,mount_tag=*};; esac; done
stat -c %i "\$d/start.bundle" >"$T/ino.\$\$"
mkdir "$T/committed" 2>/dev/null && git -C "$T/repo" commit -q --allow-empty -m moved
exit 1
QEMU
	run --separate-stderr aibox task --attempts 3 "fix it"
	assert_failure 1
	[[ "$stderr" == *"0 of 3 attempts finished"* ]] || fail "$stderr"
	[ "$(git rev-parse HEAD)" != "$head" ] || fail "the branch did not move"
	run sort -u "$T"/ino.*
	assert_success
	[ "${#lines[@]}" -eq 1 ] || fail "not one start.bundle: $output"
	[ "$(ls "$T"/ino.* | wc -l)" -eq 3 ] || fail "$(ls "$T")"
	for d in $(task_dirs); do
		run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_commit"])' "$d/settings.json"
		assert_success
		assert_output "$head"
	done
	# The group's own folder is gone once its attempts ended.
	run ls -A "$AIBOX_HOME/projects/repo/tasks"
	assert_success
	refute_output --partial ".group-"
	# A second group starts from the moved branch, --from names another start.
	rm -rf "$T/committed" "$T"/ino.* "$AIBOX_HOME/projects/repo/tasks"
	from=$(git rev-parse HEAD~2)
	run --separate-stderr aibox task --attempts 2 --from HEAD~2 "fix it"
	assert_failure 1
	[[ "$stderr" == *"0 of 2 attempts finished"* ]] || fail "$stderr"
	[ "$(task_dirs | wc -l)" -eq 2 ] || fail "$(task_dirs)"
	for d in $(task_dirs); do
		run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_commit"])' "$d/settings.json"
		assert_success
		assert_output "$from"
	done
}

@test "attempts: an attempt starts from its group's commit, not HEAD; a group start missing or forged is refused" {
	first=$(git rev-parse HEAD~1)
	gdir=$AIBOX_HOME/projects/repo/tasks/.group-abcdef
	mkdir -p "$gdir"
	echo bundle >"$gdir/start.bundle"
	echo idx >"$gdir/start.idx"
	echo "$first" >"$gdir/start_commit"
	run --separate-stderr aibox task --attempt-of abcdef <<<"fix it"
	assert_stopped_at_boot
	d=$(task_dirs)
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_commit"])' "$d/settings.json"
	assert_success
	assert_output "$first"
	assert_equal "$(cat "$d/start.idx")" idx
	assert_equal "$(stat -c %i "$d/start.idx")" "$(stat -c %i "$gdir/start.idx")"
	for forged in "${first}x" "${first:0:39}" "$(echo "$first" | tr a-f A-F)" "../$first" ""; do
		printf '%s\n' "$forged" >"$gdir/start_commit"
		run --separate-stderr aibox task --attempt-of abcdef <<<"fix it"
		assert_failure 2
		[[ "$stderr" == *"the group's start bundle '$gdir' has no commit in 'start_commit'"* ]] || fail "'$forged': $stderr"
	done
	printf '%s' "$first" >"$gdir/start_commit" # no newline
	run --separate-stderr aibox task --attempt-of abcdef <<<"fix it"
	assert_failure 2
	[[ "$stderr" == *"has no commit in 'start_commit'"* ]] || fail "$stderr"
	rm -rf "$gdir"
	run --separate-stderr aibox task --attempt-of abcdef <<<"fix it"
	assert_failure 2
	[[ "$stderr" == *"the group's start bundle '$gdir' cannot be read: No such file or directory"* ]] || fail "$stderr"
}

@test "attempts: --continue with --attempts is refused before anything starts" {
	run --separate-stderr aibox task --attempts 2 --continue abcdef "go on"
	assert_failure 2
	[[ "$stderr" == *"--continue and --attempts: a task is continued by one attempt at a time (--attempts 1)"* ]] || fail "$stderr"
	run task_dirs
	assert_output ""
}

@test "attempts: a group's folder left by a SIGKILLed aibox is removed by tasks clean once unlocked and a minute old" {
	# A QEMU that waits: the group's folder is there while its attempts boot.
	printf '#!/bin/sh\n[ "$1" = --version ] && exit 1\ntouch "%s/qemu.$$"\nexec sleep 60\n' "$T" >"$T/fake-bin/qemu-system-x86_64"
	aibox task --attempts 2 "fix it" >"$T/out" 2>"$T/err" &
	pid=$!
	wait_until 60 qemus_started 2
	tasks=$AIBOX_HOME/projects/repo/tasks
	gdir=$(ls -d "$tasks"/.group-*)
	# Alive and locked: left alone, however old.
	touch -d '2 minutes ago' "$gdir"
	run aibox tasks clean
	assert_success
	refute_output --partial ".group-"
	assert_dir_exists "$gdir"
	kill -KILL "$pid"
	wait "$pid" || true
	# Its attempts end with it (their parent-death signal).
	wait_until 30 gone_attempts
	assert_dir_exists "$gdir"
	# Unlocked but younger than a minute: a group between its mkdir and its lock looks so.
	touch "$gdir"
	run aibox tasks clean
	assert_success
	refute_output --partial ".group-"
	assert_dir_exists "$gdir"
	touch -d '2 minutes ago' "$gdir"
	run aibox tasks clean
	assert_success
	assert_line --regexp "^removed $tasks/\.group-[0-9a-f]{6}/ \(.*\)$"
	assert_dir_not_exists "$gdir"
	# The attempts' own folders were cleaned as usual, their links to the bundle with them.
	for d in $(task_dirs); do
		assert_file_not_exists "$d/start.bundle"
	done
}

# qemus_started N: the fake QEMU that touches $T/qemu.PID started N times or more.
qemus_started() {
	[ "$(ls "$T" | grep -c '^qemu\.')" -ge "$1" ]
}

# gone_attempts: no attempt of the test runs any more.
gone_attempts() {
	run aibox tasks list
	[ "$status" -eq 0 ] && [[ "$output" != *running* ]]
}

# smp_seen: the -smp of each VM the fake QEMU was asked for, sorted, one a line.
smp_seen() {
	sed -n 's/.* -smp \([0-9]*\) .*/\1/p' "$T/qemu.args" | sort
}

@test "attempts: the attempts share this host's cores: each gets cores / N vCPUs, at least 1, unless --cpus or the config's cpus chose" {
	# the fake QEMU writes down its arguments, one VM a line
	printf '#!/bin/sh\necho " $* " >>"%s"\necho "no VM in this test" >&2\nexit 1\n' "$T/qemu.args" \
		>"$T/fake-bin/qemu-system-x86_64"
	local cores def share want
	cores=$(nproc)
	def=$((cores < 2 ? cores : 2))
	share=$((cores / 4 < 1 ? 1 : cores / 4))
	want=$((share < def ? share : def))
	run --separate-stderr aibox task --attempts 4 "fix it"
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "$stderr"
	assert_equal "$(smp_seen)" "$(printf '%s\n' "$want" "$want" "$want" "$want")"
	# one task alone keeps the default
	: >"$T/qemu.args"
	run --separate-stderr aibox task "fix it"
	assert_stopped_at_boot
	assert_equal "$(smp_seen)" "$def"
	[ "$cores" -ge 2 ] || skip "the rest needs 2 cores (cpus: 2)"
	# --cpus, or cpus in the config, is the user's choice: each attempt keeps it
	: >"$T/qemu.args"
	run --separate-stderr aibox task --attempts 4 --cpus 2 "fix it"
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "$stderr"
	assert_equal "$(smp_seen)" "$(printf '2\n2\n2\n2')"
	: >"$T/qemu.args"
	printf 'cpus: 2\n' >>"$cfg"
	run --separate-stderr aibox task --attempts 2 "fix it"
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]] || fail "$stderr"
	assert_equal "$(smp_seen)" "$(printf '2\n2')"
}
