#!/usr/bin/env bats
# aibox-init's task mode, run natively through build/test-init-task with
# t/fake-claude as Claude Code (the VM runs are in t/4600-init-task-vm.bats).
# Natively the steps run as the test user and in process groups, not cgroups.
load lib-common

setup() {
	common_setup
	mkdir share state aibox-home res
	task_source "$T/share/start.bundle"
	TIMEOUT=60
	ENV_NAMES='[]'
	API=forward
	SYSTEM_PROMPT='Commit your work.'
}

teardown() {
	# A child the fake Claude Code started must be gone already; never leave one.
	if [ -f aibox-home/child.pid ]; then
		kill "$(cat aibox-home/child.pid)" 2>/dev/null || true
	fi
	common_teardown
}

write_settings() {
	local ph=${PLACEHOLDERS:-'{}'}
	cat >share/settings.json <<EOF
{
  "version": 1, "id": "259e07", "mode": "task", "model": null,
  "timeout_s": $TIMEOUT, "max_budget_usd": ${BUDGET:-null},
  "git": { "name": "Task Person", "email": "task@example.com" },
  "start_commit": "$START", "branch": "aibox/task",
  "env_names": $ENV_NAMES, "placeholders": $ph, "api": "$API",
  "proxy": "http://10.0.2.100:3128", "path": "$T/project", "mounts": [],
  "system_prompt": "$SYSTEM_PROMPT", "check": ${CHECK:-null},
  "check_timeout_ms": ${CHECK_TIMEOUT_MS:-null}
}
EOF
}

# init_task ARGS...: test-init-task with this test's share, state and home,
# t/fake-claude as Claude Code
init_task() {
	AIBOX_TEST_TASK_SHARE="$T/share" AIBOX_TEST_TASK_STATE="$T/state" \
		AIBOX_TEST_TASK_HOME="$T/aibox-home" AIBOX_TEST_TASK_CLAUDE="$TOP/t/fake-claude" \
		test-init-task "$@"
}

# run_task PROMPT [SECRETS]: the task's results in out.tar (unpacked in res/),
# progress in progress.txt, the exit code in $status; PROMPT - keeps
# share/prompt.txt as the test wrote it
run_task() {
	[ "$1" = - ] || printf '%s\n' "$1" >share/prompt.txt
	[ -f share/settings.json ] || write_settings
	printf '%s' "${2:-}" >secrets.json
	status=0
	init_task <secrets.json >out.tar 2>progress.txt || status=$?
	output=$(cat progress.txt)
	tar -xf out.tar -C res
}

# The members of out.tar, in order, as "name size file|other ustar-ok"; the
# stream must end with the two zero blocks and nothing after them.
members() {
	python3 - "$T/out.tar" <<'EOF'
import sys, tarfile
data = open(sys.argv[1], "rb").read()
with tarfile.open(sys.argv[1]) as tf:
    for m in tf:
        h = data[m.offset:m.offset + 512]
        ok = h[257:265] == b"ustar\x0000" and m.mode & 0o777 == 0o644
        print(m.name, m.size, "file" if m.isreg() else "other", ok)
    end = tf.offset
assert data[end:] == bytes(1024), "no clean end of archive"
EOF
}

names() { members | cut -d' ' -f1 | tr '\n' ' '; }

# jget PATH: a value of res/result.json, e.g. "claude.ended_by" or "steps.1.status"
jget() {
	python3 - "$T/res/result.json" "$1" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)
EOF
}

@test "init task: as root's login shell, aibox-init runs the forced command itself, anything else through bash" {
	# (docs/image.md, "The guest"): sshd runs a command as `SHELL -c CMD`.
	# The forced command reaches the session, which on the host finds no VM's mode.
	run aibox-init -c '/usr/lib/aibox/aibox-init session'
	assert_failure
	assert_output "aibox-init: no mode on the kernel command line"
	# Only that exact string: anything else is bash's, as when bash was root's shell.
	for cmd in '/usr/lib/aibox/aibox-init session ' '/usr/lib/aibox/aibox-init  session'; do
		run -127 aibox-init -c "$cmd"
		assert_output "bash: line 1: /usr/lib/aibox/aibox-init: No such file or directory"
	done
	run aibox-init -c '/usr/lib/aibox/aibox-init session; echo "$0 ${BASH_VERSION:+bash}"'
	assert_success
	assert_output "bash: line 1: /usr/lib/aibox/aibox-init: No such file or directory
bash bash"
	run aibox-init -c 'echo "$0 ${BASH_VERSION:+bash}"'
	assert_success
	assert_output "bash bash"
	run aibox-init -c 'echo "$0:$1"' x y
	assert_success
	assert_output "x:y"
	run -127 aibox-init -c '/usr/lib/aibox/aibox-init session' x
	assert_output "x: line 1: /usr/lib/aibox/aibox-init: No such file or directory"
	# A login (argv[0] "-aibox-init", as sshd runs a shell with no command) is bash's.
	run bash -c 'echo "echo \$0 \${BASH_VERSION:+bash}" | exec -a -aibox-init aibox-init'
	assert_success
	assert_output "-bash bash"
}

@test "init task: a commit by Claude Code comes back as a bundle of the start commit plus it" {
	run_task "commit hello.txt hi there"
	assert_success
	assert_equal "$(names)" "transcript.jsonl changes.bundle vm.log result.json "
	run members
	assert_success
	assert_line --index 0 --regexp '^transcript.jsonl [0-9]+ file True$'
	refute_output --partial "other"
	refute_output --partial "False"
	assert_equal "$(jget failed_step)" null
	for i in 0 1 2 3; do assert_equal "$(jget steps.$i.status)" ok; done
	assert_equal "$(jget steps.0.name) $(jget steps.1.name) $(jget steps.2.name) $(jget steps.3.name)" \
		"clone claude commit bundle"
	assert_equal "$(jget claude.ended_by)" completed
	assert_equal "$(jget claude.exit_code)" 0
	assert_equal "$(jget claude.num_turns)" 1
	assert_equal "$(jget claude.total_cost_usd)" 0.0123
	assert_equal "$(jget changes)" true
	assert_equal "$(jget start_commit)" "$START"
	# The bundle: aibox/task only, the start commit its only prerequisite.
	run git -C src bundle verify "$T/res/changes.bundle"
	assert_success
	assert_output --partial "$START"
	assert_equal "$(git bundle list-heads res/changes.bundle | cut -d' ' -f2)" refs/heads/aibox/task
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-parse got)" "$(jget end_commit)"
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
	assert_equal "$(git -C src log -1 --format='%an <%ae>' got)" "Task Person <task@example.com>"
	assert_equal "$(git -C src show got:hello.txt)" "hi there"
	# The transcript is Claude Code's stream-json, whole.
	assert_equal "$(head -1 res/transcript.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["subtype"])')" init
	assert_equal "$(tail -1 res/transcript.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["type"])')" result
	run cat progress.txt
	assert_line cloning
	assert_line "claude started"
	assert_line "claude exited with 0"
	assert_line bundling
	grep -q "claude started" res/vm.log
	# A branch past the start, counted by git status against refs/aibox/start: the init
	# writes the header and runs pack-objects alone, no bundle create, no rev-list.
	grep -q "git .*--no-optional-locks status .*--ahead-behind" res/vm.log
	grep -q "git pack-objects --revs --stdout --thin --delta-base-offset" res/vm.log
	run ! grep -q -e "git rev-list" -e "git bundle create" res/vm.log
	assert_equal "$(head -3 res/changes.bundle)" \
		"$(printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task' "$START" "$(jget end_commit)")"
	run aibox-bundle-check --pack --repo src --base "$START" res/changes.bundle
	assert_success
	# The project is a clone on aibox/task without a remote.
	assert_equal "$(git -C project symbolic-ref HEAD)" refs/heads/aibox/task
	assert_equal "$(git -C project remote)" ""
}

@test "init task: each tool call of Claude Code is a progress line, its input on one line and cut short" {
	long=$(printf 'x%.0s' $(seq 150))
	run_task "tool Bash npm test
tool Read $long
commit hello.txt hi"
	assert_success
	run cat progress.txt
	assert_line "Bash: npm test"
	assert_line "Read: $(printf 'x%.0s' $(seq 100))..."
	# In order, between the start and the end of Claude Code.
	assert_equal "$(grep -n -e '^claude started$' -e '^Bash: ' -e '^claude exited' progress.txt | cut -d: -f2 | tr '\n' ' ')" \
		"claude started Bash claude exited with 0 "
	grep -q "Bash: npm test" res/vm.log
}

@test "init task: Claude Code gets print mode, stream-json, bypassPermissions and the system prompt" {
	BUDGET=2.5
	SYSTEM_PROMPT='-p is not an option here'
	write_settings
	sed -i 's/"model": null/"model": "sonnet"/' share/settings.json
	run_task "args"
	assert_success
	run jget claude.last_message
	assert_line "args: --print --verbose --output-format stream-json --permission-mode bypassPermissions --model=sonnet --max-budget-usd=2.5 --append-system-prompt=<24 bytes>"
	assert_line "system prompt: -p is not an option here"
	assert_equal "$(head -1 res/transcript.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["cwd"])')" "$T/project"
}

@test "init task: the config's check runs after the bundle, its exit, time and output tail in result.json" {
	# It sees the committed work, writes on both streams, changes a file (which stays
	# out of the bundle) and exits 3; its output is cut to its last 4096 bytes, ASCII.
	CHECK='"cat hello.txt; echo changed >hello.txt; printf %06000d 0 | tr 0 x; echo \u00e9 err >&2; exit 3"'
	run_task "commit hello.txt hi there"
	assert_success
	assert_equal "$(jget check.exit_code)" 3
	assert_equal "$(jget check.timed_out)" false
	run python3 -c 'import json; c=json.load(open("res/result.json"))["check"]; t=c["tail"]; print(len(t), t.startswith("x"), repr(t[-8:]), 0 <= c["seconds"] < 60)'
	assert_success
	assert_output "4096 True 'x?? err\\n' True"
	run cat progress.txt
	assert_line "check started"
	assert_line "the check exited with 3"
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src show got:hello.txt)" "hi there"
	# Without a check, result.json's check is null.
	CHECK=null
	rm -rf res share/settings.json
	mkdir res
	run_task "commit hello.txt hi there"
	assert_success
	assert_equal "$(jget check)" null
}

@test "init task: a check past its time limit (check_timeout_ms) is stopped with its children, the results still come" {
	CHECK='"echo started; sleep 30 & sleep 30; echo never"'
	CHECK_TIMEOUT_MS=1500
	run_task "commit hello.txt hi there"
	assert_success
	assert_equal "$(jget check.timed_out)" true
	assert_equal "$(jget check.exit_code)" null
	run python3 -c 'import json; c=json.load(open("res/result.json"))["check"]; print(repr(c["tail"]), 1.4 < c["seconds"] < 15)'
	assert_success
	assert_output "'started\\n' True"
	run cat progress.txt
	assert_line "the check timed out after 1.5 s and was stopped"
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src show got:hello.txt)" "hi there"
}

@test "init task: the commit step's git status leaves the index as Claude Code left it" {
	# A tracked file touched after the commit: a status that refreshes the index writes it back.
	run_task "$(printf 'commit hello.txt hi there\ntouch hello.txt\ninode .git/index')"
	assert_success
	assert_equal "$(jget steps.2.status) $(jget changes)" "ok true"
	assert_equal "$(stat -c %i project/.git/index)" "$(cat aibox-home/inode)"
}

@test "init task: vm.log says when the SSH session started, from the sshd above the init" {
	# No sshd above: no line.
	run_task "say nothing to do"
	assert_success
	run ! grep -q "session: sshd" res/vm.log
	# Under a process named sshd that forks the init (as sshd forks the session), then sleeps.
	mkdir bin
	cp "$(command -v bash)" bin/sshd
	rm -rf res/* project
	printf '%s\n' "say nothing to do" >share/prompt.txt
	: >secrets.json
	SHELL=/bin/bash AIBOX_TEST_TASK_SHARE="$T/share" AIBOX_TEST_TASK_STATE="$T/state" \
		AIBOX_TEST_TASK_HOME="$T/aibox-home" AIBOX_TEST_TASK_CLAUDE="$TOP/t/fake-claude" \
		bin/sshd -c 'sleep 1; test-init-task; exit $?' <secrets.json >out.tar 2>progress.txt
	tar -xf out.tar -C res
	# the line is written beside Claude Code's start: the clone before it went well
	assert_equal "$(grep -c '^claude started$' progress.txt)" 1
	run grep "session: sshd" res/vm.log
	assert_success
	# at least the second slept (less a clock tick), and the init's start after it;
	# the shell that ran the forced command is sshd's SHELL (docs/init-task.md)
	assert_output --regexp 'session: sshd started (0\.9[0-9]|[1-9][0-9]*\.[0-9][0-9]) s before this process .* which started the task [0-9]+\.[0-9][0-9] s later \(root.s shell /bin/bash, then the init\)$'
	rm -rf res/* project
	SHELL=/usr/lib/aibox/aibox-init AIBOX_TEST_TASK_SHARE="$T/share" AIBOX_TEST_TASK_STATE="$T/state" \
		AIBOX_TEST_TASK_HOME="$T/aibox-home" AIBOX_TEST_TASK_CLAUDE="$TOP/t/fake-claude" \
		bin/sshd -c 'test-init-task; exit $?' <secrets.json >out.tar 2>progress.txt
	tar -xf out.tar -C res
	run grep "session: sshd" res/vm.log
	assert_output --regexp 's later \(no shell: the init is root.s shell\)$'
}

@test "init task: changes left uncommitted go into one aibox commit, ignored files stay out" {
	run_task "$(printf 'write new.txt fresh\nwrite README.md rewritten\nwrite build.log noise\nwrite sub/deep.txt deep')"
	assert_success
	assert_equal "$(names)" "transcript.jsonl changes.bundle vm.log result.json "
	assert_equal "$(jget steps.2.status)" ok
	run cat progress.txt
	assert_line "committing leftover changes"
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
	assert_equal "$(git -C src log -1 --format='%an <%ae> %cn <%ce>' got)" \
		"aibox <aibox@localhost> aibox <aibox@localhost>"
	run git -C src diff --name-only "$START" got
	assert_output "$(printf 'README.md\nnew.txt\nsub/deep.txt')"
	assert_equal "$(git -C src show got:README.md)" rewritten
}

@test "init task: an untracked file alone is committed, whatever the repository's status config says" {
	run_task "$(printf 'gitconfig status.showUntrackedFiles no\nwrite only-new.txt fresh')"
	assert_success
	assert_equal "$(jget steps.2.status)" ok
	run cat progress.txt
	assert_line "committing leftover changes"
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src diff --name-only "$START" got)" only-new.txt
	assert_equal "$(git -C src rev-parse got)" "$(jget end_commit)"
}

@test "init task: the clone has the host's git name and email however they are spelled, and no automatic maintenance" {
	for idx in no yes; do
		rm -rf project res src share/start.bundle share/start.idx share/settings.json
		mkdir res
		if [ "$idx" = yes ]; then
			make_repo src
			START=$(git -C src rev-parse HEAD)
			test-bundle write --idx share/start.idx src HEAD share/start.bundle >/dev/null
		else
			task_source "$T/share/start.bundle"
		fi
		write_settings
		python3 - "$T/share/settings.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["git"] = {"name": 'Ann "Q" \\ O\'Neil [x]', "email": "ann+x@example.com"}
json.dump(s, open(sys.argv[1], "w"))
EOF
		run_task "commit a.txt hi"
		assert_success
		assert_equal "$(git -C project config user.name)" 'Ann "Q" \ O'"'"'Neil [x]'
		assert_equal "$(git -C project config user.email)" "ann+x@example.com"
		# no git maintenance process after each commit, in either clone
		assert_equal "$(git -C project config maintenance.auto)" "false"
		git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
		assert_equal "$(git -C src log -1 --format='%an <%ae>' got)" 'Ann "Q" \ O'"'"'Neil [x] <ann+x@example.com>'
		assert_equal "$(git -C project remote)" ""
		assert_equal "$(git -C project config --get-regexp '^branch\.')" ""
	done
	# the second run was the prepared clone
	grep -q "prepared clone: pack-" res/vm.log
}

@test "init task: a bundle of HEAD alone, not as aibox-task writes it, still lands on aibox/task" {
	git -C empty symbolic-ref --delete HEAD 2>/dev/null || true
	git -C empty update-ref -d refs/heads/aibox/task
	git -C empty update-ref --no-deref HEAD "$START"
	rm share/start.bundle
	git -C empty bundle create -q "$T/share/start.bundle" HEAD
	run_task "commit a.txt hi"
	assert_success
	assert_equal "$(jget failed_step)" null
	assert_equal "$(git -C project symbolic-ref HEAD)" refs/heads/aibox/task
	grep -q "the clone is not on aibox/task at $START: checking it out" res/vm.log
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
}

@test "init task: refs/aibox/start moved or deleted by Claude Code: the bundle is made the longer way, the same" {
	for move in "setref refs/aibox/start HEAD" "setref refs/aibox/start" \
		"gitconfig branch.aibox/task.merge refs/heads/aibox/task"; do
		rm -rf res/* project state/aibox-results
		mkdir project
		run_task "$(printf 'commit a.txt hi\n%s\n' "$move")"
		assert_success
		assert_equal "$(jget failed_step) $(jget changes)" "null true"
		# the pack beside the status is thrown away, and no other pack runs
		grep -q "the pack beside git status is thrown away: not new commits on the start" res/vm.log
		assert_equal "$(grep -c "git pack-objects" res/vm.log)" 1
		grep -q "git bundle create" res/vm.log
		assert_equal "$(sed -n 2p res/changes.bundle | cut -c1-41)" "-$START"
		git -C src fetch -q "$T/res/changes.bundle" "+aibox/task:got"
		assert_equal "$(git -C src rev-parse got)" "$(jget end_commit)"
		assert_equal "$(git -C src rev-list --count "$START..got")" 1
	done
}

# same_as_today: res/changes.bundle holds aibox/task as the project has it now, the start
# its only prerequisite, and exactly the objects of start..aibox/task
same_as_today() {
	local tip
	tip=$(git -C project rev-parse refs/heads/aibox/task)
	assert_equal "$(jget end_commit)" "$tip"
	assert_equal "$(sed -n 1p res/changes.bundle)" "# v2 git bundle"
	assert_equal "$(sed -n 2p res/changes.bundle | cut -c1-41)" "-$START"
	assert_equal "$(sed -n 3p res/changes.bundle)" "$tip refs/heads/aibox/task"
	rm -rf got.git
	git clone -q --bare src got.git
	git -C got.git fetch -q "$T/res/changes.bundle" "+aibox/task:refs/got"
	assert_equal "$(git -C got.git rev-parse refs/got)" "$tip"
	git -C project rev-list --objects "$START..$tip" | sort >want.objects
	git -C got.git rev-list --objects "$START..refs/got" | sort >got.objects
	run diff want.objects got.objects
	assert_success
	run aibox-bundle-check --pack --repo src --base "$START" res/changes.bundle
	assert_success
}

@test "init task: the bundle's pack runs beside the commit step's git status and is the bundle" {
	run_task "$(printf 'commit a.txt one\ncommit sub/b.txt two')"
	assert_success
	assert_equal "$(jget failed_step) $(jget changes)" "null true"
	assert_equal "$(jget steps.2.status) $(jget steps.3.status)" "ok ok"
	local tip
	tip=$(git -C project rev-parse aibox/task)
	# started from the ref read as a file, before the status, in a group of its own;
	# what Claude Code left is sent while both run
	run grep -n -e "packing $tip beside git status" -e "--no-optional-locks status" \
		-e "git pack-objects" -e "what Claude Code left is sent" \
		-e "the pack beside git status is the bundle" res/vm.log
	assert_equal "${#lines[@]}" 5
	assert_line --index 0 --partial "packing $tip beside git status"
	assert_line --index 1 --partial "git pack-objects --revs --stdout --thin --delta-base-offset -q"
	assert_line --index 2 --partial "--no-optional-locks status"
	assert_line --index 3 --partial "what Claude Code left is sent"
	assert_line --index 4 --partial "the pack beside git status is the bundle"
	run ! grep -q -e "thrown away" -e "git rev-list" -e "git bundle create" res/vm.log
	assert_equal "$(grep -c '^bundling$' progress.txt)" 1
	same_as_today
	# the same bytes as the bundle made on the host by git, but for the pack's own order
	git -C project bundle create -q "$T/host.bundle" aibox/task "^$START"
	assert_equal "$(git bundle list-heads res/changes.bundle)" "$(git bundle list-heads host.bundle)"
}

@test "init task: a process started without waiting for its exec reports a failed exec at its end" {
	# as the pack beside git status is started (step_start(), image/init/step.h)
	run test-init-task step "$T/no-such-program"
	assert_success
	assert_output "$(printf 'started\nerror: No such file or directory')"
	run test-init-task step /bin/sh -c 'exit 3'
	assert_success
	assert_output "$(printf 'started\nexit 3')"
}

@test "init task: the pack beside git status is thrown away when the status disagrees, the bundle made as before" {
	# a leftover change: committed, the bundle holds that commit
	run_task "$(printf 'commit a.txt one\nwrite b.txt loose')"
	assert_success
	grep -q "packing .* beside git status" res/vm.log
	grep -q "the pack beside git status is thrown away: changes were left" res/vm.log
	run ! grep -q "the pack beside git status is the bundle" res/vm.log
	assert_equal "$(git -C project log -1 --format=%an aibox/task)" aibox
	assert_equal "$(git -C project show aibox/task:b.txt)" loose
	same_as_today
	assert_equal "$(grep -c '^bundling$' progress.txt)" 1

	# git's refs from another common folder (.git/commondir): the loose ref is not
	# the tip git status sees, a commit of the same tree on the first
	rm -rf res/* project state/aibox-results ../common.git
	mkdir project
	run_task "$(printf '%s\n' 'commit a.txt one' 'commit b.txt two' \
		'sh cp -a .git ../common.git && git --git-dir=../common.git update-ref refs/heads/aibox/task $(git --git-dir=../common.git commit-tree HEAD^{tree} -p HEAD~1 -m other) && echo ../../common.git >.git/commondir')"
	assert_success
	grep -q "the pack beside git status is thrown away: git status saw another tip" res/vm.log
	assert_equal "$(jget failed_step) $(jget changes)" "null true"
	local other
	other=$(git --git-dir=common.git rev-parse refs/heads/aibox/task)
	assert_equal "$(jget end_commit)" "$other"
	run ! grep -q "$(jget end_commit)" project/.git/refs/heads/aibox/task
	assert_equal "$(sed -n 3p res/changes.bundle)" "$other refs/heads/aibox/task"
	git -C src fetch -q "$T/res/changes.bundle" "+aibox/task:got"
	assert_equal "$(git -C src log -1 --format=%s got)" other
	rm -rf common.git
}

@test "init task: a bundle that cannot be written whole fails the bundle step, never sent cut short" {
	# two commits of random bytes, each object under the file size limit, the
	# bundle past it: its write fails with EFBIG part way into the pack
	printf '%s\n' 'sh head -c 150000 /dev/urandom >a.bin && git add a.bin && git commit -qm a' \
		'sh head -c 150000 /dev/urandom >b.bin && git add b.bin && git commit -qm b' \
		>share/prompt.txt
	write_settings
	: >secrets.json
	# out.tar through cat, outside the limit; the init's own exit status kept
	(
		ulimit -f 200
		trap '' XFSZ
		init_task <secrets.json 2>progress.txt
		echo $? >init.status
	) | cat >out.tar
	tar -xf out.tar -C res
	assert_equal "$(cat init.status)" 0
	assert_equal "$(git -C project rev-list --count "$START..aibox/task")" 2
	run grep -c "^cannot write the bundle: File too large$" progress.txt
	assert_output 1
	assert_equal "$(jget failed_step) $(jget changes)" "bundle false"
	assert_equal "$(jget steps.2.status) $(jget steps.3.status)" "ok failed"
	assert_equal "$(names)" "transcript.jsonl vm.log result.json "
	# one way tried, not the others after it
	run ! grep -q -e "git bundle create" -e "git rev-list" res/vm.log
}

@test "init task: a ref the init cannot simply read costs only the pack beside git status" {
	local how
	for how in 'git pack-refs --all' \
		'mv .git/refs/heads/aibox/task .git/task-ref && ln -s ../../../task-ref .git/refs/heads/aibox/task' \
		'mv .git/refs/heads/aibox .git/aibox-refs && ln -s ../../aibox-refs .git/refs/heads/aibox' \
		'sed -i "s/\$/ trailing/" .git/refs/heads/aibox/task' \
		'head -c 4096 /dev/zero | tr "\\0" "\\n" >>.git/refs/heads/aibox/task' \
		'git checkout -q --detach'; do
		rm -rf res/* project state/aibox-results
		mkdir project
		run_task "$(printf 'commit a.txt one\ncommit b.txt two\nsh %s\n' "$how")"
		assert_success
		assert_equal "$how: $(jget failed_step) $(jget changes)" "$how: null true"
		# git still reads the ref (HEAD detached: the commit step is skipped); the init
		# does not, and makes the bundle as before
		run ! grep -q "beside git status" res/vm.log
		case $how in
		*--detach) grep -q "git bundle create" res/vm.log ;;
		*) assert_equal "$(grep -c "git pack-objects" res/vm.log)" 1 ;;
		esac
		same_as_today
	done
}

@test "init task: aibox/task reset behind the start commit sends nothing and says why" {
	run_task "$(printf 'commit a.txt hi\nresetback\n')"
	assert_success
	assert_equal "$(jget failed_step)" bundle
	assert_equal "$(jget end_commit)" "$(git -C src rev-parse "$START~1")"
	run cat progress.txt
	assert_line "aibox/task does not descend from the start commit"
}

@test "init task: aibox/task moved to an unrelated history sends nothing and says why" {
	run_task "$(printf 'commit a.txt hi\nunrelated\n')"
	assert_success
	assert_equal "$(jget failed_step)" bundle
	assert_equal "$(jget changes)" false
	assert_equal "$(names)" "transcript.jsonl vm.log result.json "
	# The bundle made at once lacks the start as a prerequisite; rev-list says why.
	grep -q "the bundle is not one of new commits on the start (0): checking aibox/task" res/vm.log
	grep -q "git rev-list" res/vm.log
	run cat progress.txt
	assert_line "aibox/task does not descend from the start commit"
}

@test "init task: aibox/task deleted sends nothing and says so" {
	run_task "$(printf 'commit a.txt hi\ndropbranch\n')"
	assert_success
	assert_equal "$(jget failed_step)" bundle
	assert_equal "$(jget end_commit)" null
	assert_equal "$(jget changes)" false
	run cat progress.txt
	assert_line "the branch aibox/task is gone"
}

@test "init task: no changes sends no bundle, and leaves saying so to the host's summary" {
	run_task "say nothing to do"
	assert_success
	assert_equal "$(names)" "transcript.jsonl vm.log result.json "
	assert_equal "$(jget changes)" false
	assert_equal "$(jget end_commit)" "$START"
	assert_equal "$(jget failed_step)" null
	assert_equal "$(jget steps.3.status)" ok
	assert_equal "$(jget claude.last_message)" "nothing to do"
	run cat progress.txt
	assert_success
	refute_line "no changes"
	refute_line bundling
	# status saw aibox/task at the start: no rev-list, no bundle
	run ! grep -q -e "git rev-list" -e "git bundle" res/vm.log
}

@test "init task: Claude Code past its time limit is killed with its children, results still come" {
	TIMEOUT=2
	write_settings
	SECONDS=0
	run_task "$(printf 'write partial.txt half done\nsleep 120')"
	assert_success
	[ "$SECONDS" -lt 30 ]
	assert_equal "$(names)" "transcript.jsonl changes.bundle vm.log result.json "
	assert_equal "$(jget steps.1.status)" timeout
	assert_equal "$(jget claude.ended_by)" timeout
	assert_equal "$(jget claude.exit_code)" null
	assert_equal "$(jget failed_step)" claude
	# The sleep the fake Claude Code started went with it.
	child=$(cat aibox-home/child.pid)
	run kill -0 "$child"
	assert_failure
	run cat progress.txt
	assert_line "claude timed out after 2 s and was stopped"
	# What it wrote before is committed by aibox and sent.
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src show got:partial.txt)" "half done"
}

@test "init task: Claude Code failing ends as error, with its exit code and last message" {
	run_task "$(printf 'say it broke\nfail')"
	assert_success
	assert_equal "$(jget claude.ended_by)" error
	assert_equal "$(jget claude.exit_code)" 1
	assert_equal "$(jget steps.1.status)" failed
	assert_equal "$(jget steps.1.exit_code)" 1
	assert_equal "$(jget failed_step)" claude
	assert_equal "$(jget claude.last_message)" "it broke"
	assert_equal "$(names)" "transcript.jsonl vm.log result.json "
	run cat progress.txt
	assert_line "claude exited with 1"
}

@test "init task: over the budget ends as budget; no result line ends as error" {
	run_task "budget"
	assert_success
	assert_equal "$(jget claude.ended_by)" budget
	assert_equal "$(jget claude.subtype)" error_max_budget_usd
	rm -rf project res state/aibox-results
	mkdir res
	run_task "noresult"
	assert_success
	assert_equal "$(jget claude.ended_by)" error
	assert_equal "$(jget claude.exit_code)" 0
	assert_equal "$(jget claude.num_turns)" null
	assert_equal "$(jget failed_step)" claude
}

@test "init task: secrets reach Claude Code's environment only, never the disk" {
	ENV_NAMES='["MY_TOKEN", "HOME", "NO_PROXY"]'
	write_settings
	run_task "$(printf 'envhash MY_TOKEN\nenv HOME\nenv NO_PROXY\nenv ANTHROPIC_BASE_URL\nenv ANTHROPIC_API_KEY\nenv HTTPS_PROXY\nenv CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\nenv CLAUDE_CODE_MAX_RETRIES')" \
		'{"env": {"MY_TOKEN": "s3cret-xyz-42", "HOME": "/elsewhere", "NO_PROXY": "*"}}'
	assert_success
	hash=$(printf '%s' s3cret-xyz-42 | sha256sum | cut -d' ' -f1)
	run jget claude.last_message
	assert_line "MY_TOKEN#$hash"
	assert_line "HOME=$T/aibox-home"
	assert_line "NO_PROXY=<unset>"
	assert_line "ANTHROPIC_BASE_URL=http://127.0.0.1:3129"
	assert_line --regexp '^ANTHROPIC_API_KEY=sk-ant-aibox-placeholder'
	assert_line "HTTPS_PROXY=http://10.0.2.100:3128"
	assert_line "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
	assert_line "CLAUDE_CODE_MAX_RETRIES=4"
	run grep -r -l s3cret-xyz state project aibox-home out.tar progress.txt
	assert_failure
}

@test "init task: oauth passes the token's placeholder and sets the base URL to the forward, no key" {
	API=oauth
	PLACEHOLDERS='{"CLAUDE_CODE_OAUTH_TOKEN": "aibox-secret-00112233445566778899aabbccddeeff"}'
	write_settings
	run_task "$(printf 'env CLAUDE_CODE_OAUTH_TOKEN\nenv ANTHROPIC_BASE_URL\nenv ANTHROPIC_API_KEY')"
	assert_success
	run jget claude.last_message
	assert_line "CLAUDE_CODE_OAUTH_TOKEN=aibox-secret-00112233445566778899aabbccddeeff"
	assert_line "ANTHROPIC_BASE_URL=http://127.0.0.1:3129"
	assert_line "ANTHROPIC_API_KEY=<unset>"
}

# make_ca FILE: a CA certificate as the proxy's task CA writes it (PEM, 64-column lines)
make_ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=aibox-task-ca \
		-days 1 -keyout /dev/null -out "$1" 2>/dev/null
}

ca_env='env SSL_CERT_FILE
env NODE_EXTRA_CA_CERTS
env REQUESTS_CA_BUNDLE
env CURL_CA_BUNDLE
env GIT_SSL_CAINFO
env PIP_CERT
env CARGO_HTTP_CAINFO
env NODE_USE_ENV_PROXY'

@test "init task: the task CA goes into the system bundle once and Claude Code's CA variables point there" {
	make_ca share/task_ca.pem
	printf 'system bundle without a final newline' >bundle.crt
	export AIBOX_TEST_TASK_CA_BUNDLE="$T/bundle.crt"
	run_task "$ca_env"
	assert_success
	assert_equal "$(jget failed_step)" null
	run jget claude.last_message
	assert_success
	for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO \
		PIP_CERT CARGO_HTTP_CAINFO; do
		assert_line "$v=/etc/ssl/certs/ca-certificates.crt"
	done
	assert_line "NODE_USE_ENV_PROXY=1"
	# The system's certificates stay, the task CA follows on a line of its own.
	{ printf 'system bundle without a final newline\n'; cat share/task_ca.pem; } >want.crt
	cmp bundle.crt want.crt
	run openssl x509 -in bundle.crt -noout -subject
	assert_success
	assert_output --partial aibox-task-ca
	# A second session of the same boot does not add it again.
	rm -rf res state/aibox-results project
	mkdir res
	run_task "say hi"
	assert_success
	cmp bundle.crt want.crt
}

@test "init task: without a task CA the bundle is left alone and no CA variable is set; Node is still told to use the proxy" {
	printf 'system bundle\n' >bundle.crt
	export AIBOX_TEST_TASK_CA_BUNDLE="$T/bundle.crt"
	run_task "$ca_env"
	assert_success
	run jget claude.last_message
	assert_success
	assert_line "SSL_CERT_FILE=<unset>"
	assert_line "NODE_EXTRA_CA_CERTS=<unset>"
	# Node's fetch has no other way out of the VM than the proxy (docs/image.md).
	assert_line "NODE_USE_ENV_PROXY=1"
	assert_equal "$(cat bundle.crt)" "system bundle"
}

@test "init task: a task CA over the cap, not one PEM certificate or a link fails the clone step, the bundle untouched" {
	make_ca good.pem
	export AIBOX_TEST_TASK_CA_BUNDLE="$T/bundle.crt"
	# name|what the file holds
	python3 - "$T" <<-'EOF'
	import os, sys
	t = sys.argv[1]
	good = open(t + "/good.pem").read()
	lines = good.splitlines(True)
	body = "".join(lines[1:-1])
	cases = {
	    "big": "-----BEGIN CERTIFICATE-----\n" + ("A" * 64 + "\n") * 600 + "-----END CERTIFICATE-----\n",
	    "two": good + good,
	    "key": good.replace("CERTIFICATE", "PRIVATE KEY"),
	    "crlf": good.replace("\n", "\r\n"),
	    "nul": good.replace("\n", "\n\0", 1),
	    "noend": good[:-1],
	    "text": "hello\n",
	    "empty": "",
	    "long": "-----BEGIN CERTIFICATE-----\n" + "A" * 77 + "\n-----END CERTIFICATE-----\n",
	    "pad": lines[0] + "QUJD=\n" + body + lines[-1],
	    "badchar": lines[0] + "QU JD\n" + body + lines[-1],
	    "blank": lines[0] + "\n" + body + lines[-1],
	    "before": "x\n" + good,
	    "after": good + "x\n",
	}
	os.mkdir(t + "/cases")
	for k, v in cases.items():
	    open(t + "/cases/" + k, "w", newline="").write(v)
	EOF
	for f in cases/* link fifo; do
		rm -rf res state/aibox-results project share/task_ca.pem
		mkdir res
		case $f in
		link) ln -s "$T/good.pem" share/task_ca.pem ;;
		fifo) mkfifo share/task_ca.pem ;;
		*) cp "$f" share/task_ca.pem ;;
		esac
		printf 'system bundle\n' >bundle.crt
		run_task "say hi"
		assert_success
		[ "$(jget failed_step)" = clone ] || { echo "accepted: $f"; false; }
		run cat progress.txt
		assert_success
		case $f in
		cases/big) assert_line "task_ca.pem is over 32768 bytes" ;;
		link) assert_line --partial "Too many levels of symbolic links" ;;
		*) assert_line "task_ca.pem is not one PEM certificate" ;;
		esac
		assert_equal "$(cat bundle.crt)" "system bundle"
	done
}

@test "init task: a secret not named in env_names fails the clone step, results still come" {
	run_task "say hi" '{"env": {"SNEAKY": "x"}}'
	assert_success
	assert_equal "$(names)" "vm.log result.json "
	assert_equal "$(jget failed_step)" clone
	assert_equal "$(jget steps.0.status)" failed
	assert_equal "$(jget steps.1.status)" skipped
	assert_equal "$(jget claude)" null
	run cat progress.txt
	assert_line "secret 'SNEAKY' is not in env_names"
}

@test "init task: a git step past its time limit is killed, results still come" {
	# The task's own clean filter hangs aibox's git status (the commit step's first).
	export AIBOX_TEST_TASK_GIT_LIMIT_MS=3000
	SECONDS=0
	run_task "$(printf 'gitconfig filter.slow.clean sleep 67.25\nwrite .gitattributes * filter=slow\nwrite new.txt x')"
	assert_success
	[ "$SECONDS" -lt 30 ]
	assert_equal "$(jget steps.2.status)" timeout
	assert_equal "$(jget steps.3.status)" skipped
	assert_equal "$(jget failed_step)" commit
	assert_equal "$(jget changes)" false
	assert_equal "$(names)" "transcript.jsonl vm.log result.json "
	run cat progress.txt
	assert_line "git status: out of time"
	run pgrep -u "$(id -u)" -f "sleep 67.25"
	assert_failure
}

@test "init task: a long last message is cut at a character boundary and says so" {
	run_task "bigsay 200001"
	assert_success
	run python3 -c '
import json, sys
m = json.load(open("res/result.json"))["claude"]["last_message"]
body, note = m.rsplit("\n", 1)
print(len(body.encode()), body[0], set(body[1:]) == {"\u00e9"}, note)'
	assert_output "65535 a True [cut by aibox-init at 65536 bytes]"
}

@test "init task: a prompt of exactly 1 MiB runs Claude Code, one byte more does not (the host's cap)" {
	# "say hi", then blank lines (fake-claude skips them) up to 1048576 bytes.
	{ printf 'say hi\n'; head -c $((1048576 - 7)) /dev/zero | tr '\0' '\n'; } >share/prompt.txt
	[ "$(stat -c %s share/prompt.txt)" -eq 1048576 ]
	run_task -
	assert_success
	assert_equal "$(jget steps.1.status)" ok
	assert_equal "$(jget failed_step)" null

	printf '\n' >>share/prompt.txt
	rm -rf res state aibox-home project
	mkdir res state aibox-home
	run_task -
	assert_success
	assert_equal "$(jget steps.1.status)" failed
	assert_equal "$(jget failed_step)" claude
	run cat progress.txt
	assert_line "cannot use '$T/share/prompt.txt': not a plain file of at most 1 MiB"
}

@test "init task: the clone does not wait for the secrets, which Claude Code's start does" {
	ENV_NAMES='["LATE"]'
	write_settings
	printf '%s\n' "envhash LATE" >share/prompt.txt
	status=0
	# the secrets come three seconds after the session's start, as from a slow host
	(sleep 3 && printf '{"env": {"LATE": "v"}}') | init_task >out.tar 2>progress.txt ||
		status=$?
	tar -xf out.tar -C res
	assert_equal "$status" 0
	assert_equal "$(jget failed_step)" null
	# the clone's git ran before the secrets came, Claude Code after (vm.log's
	# seconds, from the init's start, which is less than two after the writer's)
	local clone_s claude_s
	clone_s=$(sed -nE 's/^\[ *([0-9]+)\.[0-9]+\] git clone .*/\1/p' res/vm.log)
	claude_s=$(sed -nE 's/^\[ *([0-9]+)\.[0-9]+\] claude started$/\1/p' res/vm.log)
	assert_equal "$clone_s" 0
	[ "$claude_s" -ge 1 ] || fail "Claude Code started at second $claude_s, before the secrets"
	grep -q "LATE#$(printf v | sha256sum | cut -d" " -f1)" res/transcript.jsonl
}

@test "init task: secrets over 1 MiB are refused, results still come" {
	ENV_NAMES='["BIG"]'
	write_settings
	run_task "say hi" "{\"env\": {\"BIG\": \"$(head -c 1100000 /dev/zero | tr '\0' a)\"}}"
	assert_success
	assert_equal "$(jget failed_step)" clone
	run cat progress.txt
	assert_line "cannot read the secrets from stdin: File too large"
}

@test "init task: bad settings fail the clone step, results still come" {
	printf '{"version": 1, "mode": "task"' >share/settings.json
	run_task "say hi"
	assert_success
	assert_equal "$(names)" "vm.log result.json "
	assert_equal "$(jget failed_step)" clone
	for bad in '"timeout_s": 0' '"path": "relative"' '"path": "/a/../b"' '"start_commit": "xyz"' \
		'"branch": "main"' '"api": "other"' '"env_names": ["1BAD"]' '"proxy": "socks5://x"'; do
		rm -rf res state/aibox-results
		mkdir res
		write_settings
		python3 - "$bad" <<-'EOF'
		import json, sys
		s = json.load(open("share/settings.json"))
		s.update(json.loads("{" + sys.argv[1] + "}"))
		json.dump(s, open("share/settings.json", "w"))
		EOF
		run_task "say hi"
		assert_success
		[ "$(jget failed_step)" = clone ] || { echo "accepted: $bad"; false; }
	done
}

@test "init task: git_remotes become insteadOf rewrites to the broker, through the proxy" {
	write_settings
	python3 - <<-'EOF'
	import json
	s = json.load(open("share/settings.json"))
	s["git_remotes"] = ["https://github.com/o/r.git", "https://git.example.org:8443/team/tools/"]
	json.dump(s, open("share/settings.json", "w"))
	EOF
	export AIBOX_TEST_TASK_GITCONFIG=$T/gitconfig
	run_task "say hi"
	assert_success
	assert_equal "$(jget failed_step)" null
	export GIT_CONFIG_GLOBAL=$T/gitconfig
	for pair in https://github.com/o/r.git=0/ https://github.com/o/r=0/ \
		https://git.example.org:8443/team/tools=1/ https://git.example.org:8443/team/tools.git=1/; do
		run git ls-remote --get-url "${pair%%=*}"
		assert_output "http://git.aibox.internal/${pair#*=}"
	done
	run git ls-remote --get-url https://github.com/other/repo.git
	assert_output https://github.com/other/repo.git
	run git config --get-urlmatch http.proxy http://git.aibox.internal/0/info/refs
	assert_output http://10.0.2.100:3128
	run git config --get-urlmatch http.proxy https://github.com/o/r.git
	assert_failure
	# No remotes: nothing is written.
	rm -f "$T/gitconfig"
	rm -rf res state/aibox-results
	mkdir res
	write_settings
	run_task "say hi"
	assert_file_not_exists "$T/gitconfig"
	# A URL git's config could not hold plainly fails the clone step, with the
	# one settings parser's reason.
	for bad in '"http://x/y"' '"https://x/a b"' '"https://x/a\"b"' '"https://x/a\\\\b"' '7'; do
		rm -rf res state/aibox-results
		mkdir res
		python3 - "$bad" <<-'EOF'
		import json, sys
		s = json.load(open("share/settings.json"))
		s["git_remotes"] = [json.loads(sys.argv[1])]
		json.dump(s, open("share/settings.json", "w"))
		EOF
		run_task "say hi"
		[ "$(jget failed_step)" = clone ] || { echo "accepted: $bad"; false; }
		if [ "$bad" = 7 ]; then
			assert_output --partial "'git_remotes'[0] is not a string"
		else
			assert_output --partial "the git remote '"
			assert_output --regexp "(must be an https:// URL|may hold no spaces, query, fragment or special characters in its path)"
		fi
	done
	assert_file_not_exists "$T/gitconfig"
}

@test "init task: a bundle whose HEAD is not the start commit fails the clone step" {
	START=$(git -C src rev-parse HEAD~1)
	write_settings
	run_task "say hi"
	assert_success
	assert_equal "$(jget failed_step)" clone
	run cat progress.txt
	assert_line --partial "not the start commit $START"
}

@test "init task: Claude Code leaving aibox/task keeps its uncommitted changes out" {
	run_task "$(printf 'commit a.txt on task\nbranch elsewhere\ncommit b.txt elsewhere\nwrite c.txt loose')"
	assert_success
	assert_equal "$(jget steps.2.status)" skipped
	assert_equal "$(jget failed_step)" null
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
	run cat progress.txt
	assert_line "HEAD is not on aibox/task: changes left uncommitted stay out"
}

@test "init task: the task's git hooks and fsmonitor do not run for aibox's git calls" {
	run_task "$(printf 'hook %s\nwrite leftover.txt x' "$T/hook-ran")"
	assert_success
	assert_equal "$(jget steps.2.status)" ok
	assert_equal "$(jget failed_step)" null
	assert_file_exists project/.git/hooks/pre-commit
	assert_equal "$(git -C project config core.fsmonitor)" "$T/project/.git/hooks/pre-commit"
	assert_file_not_exists hook-ran
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src show got:leftover.txt)" x
}

# prepared_share [REPO_ARGS]: share/start.bundle and share/start.idx as aibox-task
# writes them (test-bundle write --idx), of a repository made by t/make-repo
# (default: 60 files, 4 KiB, 12 commits), with a symlink, an executable and a
# file in a deep folder added; START its last commit.  plain/ is today's clone
# of the same bundle, for comparison.
prepared_share() {
	rm -rf src share/start.bundle share/start.idx share/settings.json
	"$TOP/t/make-repo" src ${1:-60 4 12} >/dev/null
	(
		cd src
		mkdir -p deep/a/b/c
		echo deep >deep/a/b/c/file.txt
		printf '#!/bin/sh\necho run\n' >run.sh
		chmod +x run.sh
		ln -s deep/a/b/c/file.txt link
		git add -A
		git commit -q -m "links and modes"
	)
	START=$(git -C src rev-parse HEAD)
	test-bundle write --idx share/start.idx src HEAD share/start.bundle >/dev/null
	git clone -q share/start.bundle plain
	git -C plain remote remove origin
	git -C plain update-ref refs/aibox/start "$START"
}

# other_idx: share/start.idx is an index of another pack (another repository's start.idx).
other_idx() {
	"$TOP/t/make-repo" other 5 1 2 7 >/dev/null
	test-bundle write --idx other.idx other HEAD other.bundle >/dev/null
	cp other.idx share/start.idx
}

# same_as_plain: project/ holds what today's clone holds: branch, history,
# objects, index, files, no remote; the prepared pack is the bundle's.
same_as_plain() {
	assert_equal "$(git -C project symbolic-ref HEAD)" refs/heads/aibox/task
	assert_equal "$(git -C project rev-parse HEAD)" "$START"
	assert_equal "$(git -C project remote)" ""
	assert_equal "$(git -C project for-each-ref)" "$(git -C plain for-each-ref)"
	assert_equal "$(git -C project rev-list --all --objects | sort)" \
		"$(git -C plain rev-list --all --objects | sort)"
	assert_equal "$(git -C project ls-files -s --debug | grep -v -e ctime -e mtime -e dev: -e uid:)" \
		"$(git -C plain ls-files -s --debug | grep -v -e ctime -e mtime -e dev: -e uid:)"
	assert_equal "$(git -C project status --porcelain --ignored)" ""
	assert_equal "$(git -C project config user.name) $(git -C project config user.email)" \
		"Task Person task@example.com"
	git -C project fsck --full --strict --no-dangling
	diff -r --no-dereference -x .git project plain
	assert_equal "$(stat -c %A project/run.sh)" "$(stat -c %A plain/run.sh)"
	assert_equal "$(readlink project/link)" deep/a/b/c/file.txt
}

@test "init task: with the host's start.idx the clone places the bundle's pack and equals a plain clone" {
	prepared_share
	run_task "say nothing to do"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	assert_equal "$(jget failed_step)" null
	grep -q "prepared clone: pack-" res/vm.log
	run grep -c "git clone" res/vm.log
	assert_output 0
	# one git process: the init writes the repository, git only checks it out
	run ! grep -q "git init" res/vm.log
	same_as_plain
	# The pack is the bundle's, byte for byte, beside the host's index.
	pack=$(ls project/.git/objects/pack/*.pack)
	off=$(python3 -c 'import sys; print(open(sys.argv[1], "rb").read(65536).index(b"\n\n") + 2)' \
		share/start.bundle)
	tail -c +$((off + 1)) share/start.bundle >bundle.pack
	cmp "$pack" bundle.pack
	cmp "${pack%.pack}.idx" share/start.idx
}

@test "init task: the early clone (PID 1's, before the session) is taken by the step clone, which runs no git" {
	prepared_share
	export AIBOX_TEST_TASK_EARLY=$T/early
	# A secret named: the task waits for the session (no early task), the clone does not.
	ENV_NAMES='["MY_SECRET"]'
	run_task "say nothing to do"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	assert_equal "$(jget failed_step)" null
	grep -qx cloning progress.txt
	grep -qE '^\[ *[0-9.]+\] the clone was made while the session was set up \(it ran from [-+][0-9.]+ s to [-+][0-9.]+ s of this log, waited [0-9]+ ms for it\); its lines, timed from its start:$' res/vm.log
	grep -q "prepared clone: pack-" res/vm.log
	# One checkout in all: the early clone's, its lines carried over.
	run grep -c "git read-tree" res/vm.log
	assert_output 1
	run grep -c "git clone" res/vm.log
	assert_output 0
	run cat early/result
	assert_output --regexp '^ok [0-9]+ [0-9]+$'
	same_as_plain
}

@test "init task: an early clone that fails, or left a result not its own, is undone and the session clones" {
	prepared_share
	export AIBOX_TEST_TASK_EARLY=$T/early
	ENV_NAMES='["MY_SECRET"]'
	other_idx
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" ok
	grep -q "the early clone failed; its lines" res/vm.log
	grep -q "the clone runs again in the session" res/vm.log
	run grep -c "the prepared clone is not used: start.idx counts another number" res/vm.log
	assert_output 2
	grep -q "git clone" res/vm.log
	same_as_plain
	# A folder left with a lock, a result that is not one of ours and files
	# in the project (no start.idx: no early clone is started over it).
	rm -rf project res early share/start.idx
	mkdir res early project
	: >early/lock
	echo 'ok 5 3' >early/result
	echo junk >project/junk
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" ok
	grep -q "the early clone left no result (not one of ours)" res/vm.log
	grep -q "git clone" res/vm.log
	same_as_plain
}

@test "init task: without start.idx the bundle is cloned as before" {
	prepared_share
	rm share/start.idx
	run_task "say nothing to do"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	grep -q "no start.idx" res/vm.log
	grep -q "git clone" res/vm.log
	same_as_plain
}

@test "init task: a start.idx that does not match the bundle falls back to cloning the bundle" {
	prepared_share
	cp share/start.idx good.idx
	other_idx
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" ok
	grep -q "the prepared clone is not used: start.idx counts another number of objects" res/vm.log
	same_as_plain
	# One changed byte in the middle of the index: an object name or offset.
	for at in 2000 $(( $(stat -c %s good.idx) - 200 )); do
		rm -rf project res
		mkdir res
		cp good.idx share/start.idx
		flip_byte share/start.idx "$at"
		run_task "say nothing to do"
		assert_equal "$(jget steps.0.status)" ok
		grep -q "the prepared clone is not used: start.idx" res/vm.log
		same_as_plain
	done
	# A cut index.
	rm -rf project res
	mkdir res
	head -c 3000 good.idx >share/start.idx
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" ok
	grep -q "the prepared clone is not used: start.idx" res/vm.log
	same_as_plain
}

@test "init task: a damaged pack with the host's index is refused, never checked out" {
	prepared_share
	cp share/start.bundle good.bundle
	# Cut short: the pack's trailer is not the one the index names.
	head -c $(( $(stat -c %s good.bundle) - 1000 )) good.bundle >share/start.bundle
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" failed
	assert_equal "$(jget failed_step)" clone
	grep -q "the prepared clone is not used: start.idx belongs to another pack" res/vm.log
	# Damaged inside, its trailer kept: git cannot check it out, the plain
	# clone (which indexes the pack) refuses it, and the folder is left empty.
	rm -rf project res
	mkdir res
	cp good.bundle share/start.bundle
	size=$(stat -c %s good.bundle)
	head -c 20000 /dev/zero | dd of=share/start.bundle bs=1 seek=$((size / 2)) conv=notrunc status=none
	run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" failed
	grep -q "prepared clone: pack-" res/vm.log
	grep -q "git read-tree failed" res/vm.log
	grep -q "git clone failed" progress.txt
	run ls -A project
	assert_output ""
}

# hostile_share KIND: src/ whose last commit holds a file with a name too long
# for the file system (long) or a folder .git with a hook (dotgit), written
# with git mktree; its start.bundle and start.idx in share/.
hostile_share() {
	rm -rf src && make_repo src
	local blob tree sub
	blob=$(git -C src rev-parse HEAD:README.md)
	case $1 in
	long)
		tree=$(printf "100644 blob %s\tREADME.md\n100644 blob %s\t%s\n" "$blob" "$blob" \
			"$(printf 'n%.0s' $(seq 300))" | git -C src mktree) ;;
	dotgit)
		sub=$(printf "100755 blob %s\tpost-checkout\n" "$blob" | git -C src mktree)
		sub=$(printf "040000 tree %s\thooks\n" "$sub" | git -C src mktree)
		tree=$(printf "040000 tree %s\t.git\n100644 blob %s\tREADME.md\n" "$sub" "$blob" |
			git -C src mktree) ;;
	esac
	START=$(git -C src commit-tree -p HEAD -m hostile "$tree")
	git -C src update-ref refs/heads/main "$START"
	rm -f share/start.bundle share/start.idx share/settings.json
	test-bundle write --idx share/start.idx src HEAD share/start.bundle >/dev/null
}

@test "init task: names a plain clone cannot check out fail the prepared clone the same way" {
	for kind in long dotgit; do
		rm -rf project res
		mkdir res
		hostile_share "$kind"
		# Today's clone of the same bundle fails in its checkout.
		run ! git clone -q share/start.bundle "plain-$kind"
		run_task "say nothing to do"
		assert_equal "$(jget steps.0.status)" failed
		assert_equal "$(jget failed_step)" clone
		grep -q "prepared clone: pack-" res/vm.log
		grep -q "git read-tree failed" res/vm.log
		grep -q "git clone failed" progress.txt
	done
	# The same when the early clone checks it out first.
	rm -rf project res share/settings.json
	mkdir res
	ENV_NAMES='["MY_SECRET"]'
	AIBOX_TEST_TASK_EARLY=$T/early run_task "say nothing to do"
	assert_equal "$(jget steps.0.status)" failed
	grep -q "the early clone failed; its lines" res/vm.log
	run grep -c "git read-tree failed" res/vm.log
	assert_output 2
	grep -q "git clone failed" progress.txt
}

# result.json's NAME as a number, "none" when absent
jnum() {
	python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k) if isinstance(v, dict) else None
print("none" if v is None else v)' "$T/res/result.json" "$1"
}

@test "init task: with no secrets named, PID 1's child runs the task before the session comes, and the session relays it" {
	prepared_share
	# the session attaches 1.5 s after PID 1 started the task
	export AIBOX_TEST_TASK_EARLY=$T/early AIBOX_TEST_TASK_ATTACH_MS=1500
	run_task "commit hello.txt hi there"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	assert_equal "$(jget steps.1.status)" ok
	assert_equal "$(jget changes)" true
	grep -qx cloning progress.txt
	grep -qx "claude started" progress.txt
	grep -q "started by the init before the session (settings.json names no secrets" res/vm.log
	# The task's own prepared clone: no early clone beside it.
	run grep -c "git read-tree" res/vm.log
	assert_output 1
	run ! grep -q "the clone was made while the session was set up" res/vm.log
	# Claude Code started before the session attached.
	run python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["session_s"] >= 1.4, 0 < r["steps"][1]["start_s"] < r["session_s"])' res/result.json
	assert_output "True True"
	# What came through the session is whole: the commit, in a bundle git reads.
	git clone -q share/start.bundle check
	git -C check fetch -q "$T/res/changes.bundle" "aibox/task:got"
	run git -C check show got:hello.txt
	assert_output "hi there"
	run members
	assert_line --regexp '^result.json [0-9]+ file True$'
}

@test "init task: placeholders in settings.json still give the early task, and Claude Code gets them" {
	prepared_share
	API=oauth
	ENV_NAMES='[]'
	PLACEHOLDERS='{"CLAUDE_CODE_OAUTH_TOKEN": "aibox-secret-00112233445566778899aabbccddeeff",
	  "NPM_TOKEN": "aibox-secret-ffeeddccbbaa99887766554433221100", "PATH": "aibox-secret-0123456789abcdef0123456789abcdef"}'
	write_settings
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "$(printf 'env CLAUDE_CODE_OAUTH_TOKEN\nenv NPM_TOKEN\nenv PATH')"
	assert_success
	grep -q "started by the init before the session (settings.json names no secrets" res/vm.log
	run jget claude.last_message
	assert_line "CLAUDE_CODE_OAUTH_TOKEN=aibox-secret-00112233445566778899aabbccddeeff"
	assert_line "NPM_TOKEN=aibox-secret-ffeeddccbbaa99887766554433221100"
	# what the init sets itself wins over a placeholder of the same name
	refute_line --partial "PATH=aibox-secret-"
	assert_line --regexp "^PATH=/"
}

@test "init task: a session that attaches at once to an early task gets the same results" {
	prepared_share
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "say nothing to do"
	assert_success
	assert_equal "$(jget failed_step)" null
	grep -q "started by the init before the session" res/vm.log
	same_as_plain
	# the step times are whole and in order
	run python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["steps"]
print(all(s[i]["start_s"] + s[i]["seconds"] <= s[i + 1]["start_s"] + 0.002 for i in range(3)))' res/result.json
	assert_output True
}

@test "init task: secrets sent to an early task whose settings name none are said, never used" {
	prepared_share
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "env SNEAKY" '{"env": {"SNEAKY": "sneaky-value"}}'
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	assert_equal "$(jget steps.1.status)" ok
	grep -q "secret 'SNEAKY' is not in env_names (nothing of them was used: settings.json names none)" progress.txt
	run jget claude.last_message
	refute_output --partial sneaky-value
}

# go_secrets TEXT: the go message's secrets where a restored VM's init leaves
# them (root's /run/aibox/go-secrets in a VM), for the task to take
go_secrets() {
	printf '%s\n' "$1" >go-secrets
	chmod 600 go-secrets
	export AIBOX_TEST_TASK_GO_SECRETS=$T/go-secrets
}

@test "init task: secrets the go message carried give the early task, Claude Code has them, and their file is gone" {
	prepared_share
	ENV_NAMES='["MY_VAR", "OTHER"]'
	write_settings
	go_secrets '{"env": {"MY_VAR": "from the go message", "OTHER": "x=y"}}'
	# the session attaches 1.5 s after PID 1 started the task, bringing none
	export AIBOX_TEST_TASK_EARLY=$T/early AIBOX_TEST_TASK_ATTACH_MS=1500
	run_task "$(printf 'env MY_VAR\nenv OTHER')"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	grep -q "started by the init before the session (the go message carried the secrets" res/vm.log
	run jget claude.last_message
	assert_line "MY_VAR=from the go message"
	assert_line "OTHER=x=y"
	run python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["session_s"] >= 1.4, 0 < r["steps"][1]["start_s"] < r["session_s"])' res/result.json
	assert_output "True True"
	[ ! -e go-secrets ]
	run ! grep -q "nothing of them was used" progress.txt
}

@test "init task: the session's task takes the go message's secrets too, when no early task runs" {
	prepared_share
	ENV_NAMES='["MY_VAR"]'
	write_settings
	go_secrets '{"env": {"MY_VAR": "from the go message"}}'
	run_task "env MY_VAR"
	assert_success
	run jget claude.last_message
	assert_line "MY_VAR=from the go message"
	[ ! -e go-secrets ]
}

@test "init task: secrets both from the go message and on stdin fail the clone step; none is used" {
	prepared_share
	ENV_NAMES='["MY_VAR"]'
	write_settings
	go_secrets '{"env": {"MY_VAR": "from the go message"}}'
	run_task "env MY_VAR" '{"env": {"MY_VAR": "from stdin"}}'
	assert_success
	assert_equal "$(jget failed_step)" clone
	assert_equal "$(jget steps.0.status)" failed
	assert_equal "$(jget steps.1.status)" skipped
	assert_equal "$(jget claude)" null
	grep -q "the secrets came both with the go message and on stdin" progress.txt
}

@test "init task: an early task's session that sends secrets after the go message's is said, never used" {
	prepared_share
	ENV_NAMES='["MY_VAR"]'
	write_settings
	go_secrets '{"env": {"MY_VAR": "from the go message"}}'
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "env MY_VAR" '{"env": {"MY_VAR": "from stdin"}}'
	assert_success
	grep -q "the session sent secrets too (nothing of them was used: the go message carried them)" progress.txt
	run jget claude.last_message
	assert_line "MY_VAR=from the go message"
	refute_output --partial "from stdin"
}

@test "init task: the go message's secrets are held to env_names, and must be a regular file" {
	prepared_share
	ENV_NAMES='["MY_VAR"]'
	write_settings
	go_secrets '{"env": {"MY_VAR": "v", "SNEAKY": "s"}}'
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "env SNEAKY"
	assert_success
	assert_equal "$(jget failed_step)" clone
	assert_equal "$(jget claude)" null
	grep -q "secret 'SNEAKY' is not in env_names" progress.txt
	# not JSON of the framing
	rm -rf res early
	mkdir res
	go_secrets '{"MY_VAR": "v"}'
	run_task "env MY_VAR"
	assert_equal "$(jget failed_step)" clone
	assert_equal "$(jget claude)" null
	grep -q "the go message's secrets: not {\"env\": {...}}" progress.txt
	# a link is not followed, and left where it is
	rm -rf res early go-secrets
	mkdir res
	printf '{"env": {"MY_VAR": "via a link"}}\n' >elsewhere
	ln -s "$T/elsewhere" go-secrets
	run_task "env MY_VAR"
	assert_equal "$(jget failed_step)" clone
	assert_equal "$(jget claude)" null
	grep -q "cannot read the secrets of the go message" progress.txt
	[ -L go-secrets ]
}

# early_socket MODE: a stand-in for the early task's socket in early/ (made
# first, so no early task or clone is started): it accepts one session and
# answers "junk" with a message not ours, or "none" by closing.
early_socket() {
	mkdir early
	python3 - "$T/early/sock" "$1" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(1)
open(sys.argv[1] + ".ready", "w").close()
s.settimeout(60)
c, _ = s.accept()
if sys.argv[2] == "junk":
    c.send(b"exit 0\n")
    c.settimeout(60)
    c.recv(1)
c.close()
PY
	SOCK_PID=$!
	wait_until 10 test -e "$T/early/sock.ready"
}

@test "init task: an early task's answer that is not one of ours ends the session with exit 2, no task run" {
	prepared_share
	early_socket junk
	export AIBOX_TEST_TASK_EARLY=$T/early
	echo "commit hello.txt hi there" >share/prompt.txt
	write_settings
	run init_task </dev/null
	wait "$SOCK_PID"
	assert_equal "$status" 2
	assert_output --partial "the early task's answer is not one of ours"
	assert_dir_not_exists "$T/project/.git"
}

@test "init task: an early socket that closes without a message leaves the task to the session" {
	prepared_share
	early_socket none
	export AIBOX_TEST_TASK_EARLY=$T/early
	run_task "commit hello.txt hi there"
	wait "$SOCK_PID"
	assert_success
	assert_equal "$(jget steps.0.status)" ok
	assert_equal "$(jget changes)" true
	run ! grep -q "started by the init before the session" res/vm.log
	assert_equal "$(jnum session_s)" 0.0
}
