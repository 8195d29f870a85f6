#!/usr/bin/env bats
# aibox task end to end with a git: remote: the real image, the real Claude
# Code in the VM (scripted by t/fake-api, as in t/5100), aibox-proxy handing
# git.aibox.internal to the aibox-broker that aibox task started, and
# t/git-https-upstream as the remote.  The VM pushes its branch to the
# configured URL; the token stays on the host.  One VM under TCG, booted in
# setup_file; each test reads one thing of what it left.
load lib-common
load lib-vm
load lib-tls
load lib-claude
load lib-broker
bats_require_minimum_version 1.5.0

KEY=sk-ant-host-key-6100

# The shared task, in $S: its output in $S/out and $S/err, exit code in
# $S/status; what it saw of the processes while it ran in $S/environ (a line
# for each process with a secret in its environment), $S/pids (the broker,
# aibox-task, the proxy, QEMU, the aibox-connect of a guest connection) and
# $S/qemu-cmdline.
setup_file() {
	common_setup
	export S=$T
	vm_image
	broker_setup
	start_upstream
	echo "${BROKER_PIDS[*]}" >"$S/helper.pids"
	make_test_ca "$T/ca"
	make_repo repo
	cd repo
	aibox projects path >/dev/null
	export ANTHROPIC_API_KEY=$KEY
	unset CLAUDE_CODE_OAUTH_TOKEN
	# The broker trusts the upstream's test CA (docs/broker.md, "TLS").
	export AIBOX_BROKER_CA=$T/tls/ca.pem
	cat >"$AIBOX_HOME/projects/repo/config.yaml" <<-EOF
	env:
	  - ANTHROPIC_API_KEY
	  - AIBOX_T_SECRET
	git:
	  - url: $UP_URL
	    token: GIT_TOKEN
	    push:
	      - aibox/*
	EOF
	# One tool call: commit, push the allowed branch, then force main (refused by
	# the broker; the project's history is not the upstream's, so without
	# --force git itself would stop before asking), then push an allowed branch
	# with push options (the remote would take them; the broker does not offer
	# them, so git refuses to send them).
	# First the guest holds a connection to the proxy for a while: its
	# aibox-connect is one of the processes checked below.
	git -C "$T/up/repo.git" config receive.advertisePushOptions true
	cmd="{ exec 3<>/dev/tcp/10.0.2.100/3128; sleep 6; exec 3<&-; } && git commit -q --allow-empty -m 'From the VM' && git push $UP_URL HEAD:aibox/from-vm && { git push --force $UP_URL HEAD:main 2>&1 | sed -n 's/.*\\(remote rejected\\).*/REJ-\\1/p'; true; } && { git push -o merge_request.create -o ci.variable=X=1 $UP_URL HEAD:aibox/opts 2>&1 | sed -n 's/.*\\(does not support push options\\).*/OPT-\\1/p'; true; }"
	script=$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "push"}}},
	  {"text": "I pushed aibox/from-vm."}], "require_key": sys.argv[2]}))' "$cmd" "$KEY")
	printf '%s\n' "$script" >"$T/script.json"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	echo "$FAKE_API_PID" >>"$S/helper.pids"
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT
	export AIBOX_API_CA=$T/ca/ca.pem
	git -C "$T/up/repo.git" rev-parse main >"$S/main-before"

	# (UPSTREAM_TOKEN is the test upstream's copy of the token: not the user's.)
	# A value of env (it goes into the VM over SSH) and a subscription token
	# in the shell that env does not list.
	export AIBOX_T_SECRET=env-secret-6100 CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-unlisted-6100
	env -u UPSTREAM_TOKEN aibox task "Push a branch." >"$T/out" 2>"$T/err" &
	TASK_PID=$!
	echo "$TASK_PID" >"$S/task.pid"
	# Once QEMU runs, the broker is ready (aibox-task waits for it before the
	# proxy and the VM start): it holds the token in memory only, the proxy
	# the key.  Neither they nor aibox-task, QEMU or the aibox-connect of a
	# guest connection show a secret in their environment (/proc/PID/environ
	# is the initial block: aibox-task wipes what it inherited).
	local broker= qemu= connect= proxy p n status=0
	# The guest connects only in the agent's tool call, after the boot and
	# Claude Code's start: under TCG on a loaded machine, with a cold boot
	# (make check-cold), more than 5 minutes.  The wait ends with the task.
	wait_until 900 helpers_up_or_gone || true
	proxy=$(pgrep -P "$TASK_PID" -f aibox-proxy) || true
	echo "$broker $TASK_PID $proxy $qemu $connect" >"$S/pids"
	: >"$S/environ"
	for p in $broker $TASK_PID $proxy $qemu $connect; do
		n=$(grep -caF -e "$GIT_TOKEN" -e "$KEY" -e env-secret-6100 -e unlisted-6100 \
			"/proc/$p/environ" 2>&1) || true
		# a process that ended since it was found (a guest connection closing)
		# has no environment left to show; one still there that cannot be read
		# is reported with grep's reason
		[ -e "/proc/$p" ] || continue
		[ "$n" = 0 ] ||
			echo "$n: a secret is in the environment of $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)" >>"$S/environ"
	done
	[ -z "$qemu" ] || tr '\0' ' ' <"/proc/$qemu/cmdline" >"$S/qemu-cmdline"
	wait "$TASK_PID" || status=$?
	TASK_PID=
	rm "$S/task.pid"
	echo "$status" >"$S/status"
	echo "$GIT_TOKEN" >"$S/token"
	task_dir >"$S/dir"
}

# teardown_file: the task, should setup_file have stopped half-way, and the
# upstream and the fake API.
teardown_file() {
	local p
	[ -s "$S/task.pid" ] && kill "$(cat "$S/task.pid")" 2>/dev/null
	for p in $(cat "$S/helper.pids" 2>/dev/null); do
		kill "$p" 2>/dev/null
	done
	T=$S common_teardown
}

task_dir() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

show() {
	echo "--- stderr"; cat "$S/err"
	local d
	d=$(cat "$S/dir") || return 0
	echo "--- console"; tail -40 "$d/console.log"
	echo "--- proxy.log"; cat "$d/proxy.log"
	echo "--- broker.log"; cat "$d/broker.log"
	echo "--- vm.log"; tail -40 "$d/vm.log"
	echo "--- fake-api"; tail -20 "$S/fake-api.log"
}

# helpers_up_or_gone: set broker, qemu and connect (the aibox-connect of a
# guest connection) as they appear; true once all three are there, or the
# task (TASK_PID) has ended.
helpers_up_or_gone() {
	gone "$TASK_PID" && return 0
	[ -n "$broker" ] || broker=$(pgrep -P "$TASK_PID" -f aibox-broker) || true
	# (A QEMU that ended was the one that saved the image's snapshot: the
	# task's own comes after it, docs/image.md "Snapshots".)
	{ [ -n "$qemu" ] && [ -e "/proc/$qemu" ]; } || qemu=$(pgrep -P "$TASK_PID" -f "$QEMU_VM") || true
	connect=$(pgrep -f "^[^ ]*/aibox-connect .*$AIBOX_HOME" | head -1) || true
	[ -n "$broker" ] && [ -n "$qemu" ] && [ -n "$connect" ]
}

# shared: the shared task ended with 0; DIR is its folder.  On failure it
# shows what the task printed and logged.
shared() {
	DIR=$(cat "$S/dir")
	[ "$(cat "$S/status")" = 0 ] || { show; false; }
}

@test "broker task vm: the task with a git remote exits 0" {
	shared
	[ -n "$DIR" ]
}

@test "broker task vm: no secret is in the environment of aibox-task, the broker, the proxy, QEMU or a guest's aibox-connect" {
	shared
	# all five were seen while the task ran
	[ "$(wc -w <"$S/pids")" = 5 ] || { cat "$S/pids"; show; false; }
	run cat "$S/environ"
	assert_output ''
}

@test "broker task vm: QEMU runs aibox-connect with the cap of 64 connections" {
	shared
	# (docs/task-host.md)
	grep -qF -- "--max 64 --log" "$S/qemu-cmdline"
}

@test "broker task vm: the VM pushes its aibox/ branch through the broker; main upstream does not move" {
	shared
	git -C "$S/up/repo.git" rev-parse --verify -q aibox/from-vm
	assert_equal "$(git -C "$S/up/repo.git" log -1 --format=%s aibox/from-vm)" "From the VM"
	assert_equal "$(git -C "$S/up/repo.git" rev-parse main)" "$(cat "$S/main-before")"
}

@test "broker task vm: the VM's git gets the broker's refusal of a push to main" {
	shared
	grep -q 'REJ-remote rejected' "$DIR/transcript.jsonl" || { show; false; }
	grep -q 'refs=refs/heads/main result=refused' "$DIR/broker.log"
}

@test "broker task vm: a push with push options is refused, and nothing of it lands upstream" {
	shared
	grep -q 'OPT-does not support push options' "$DIR/transcript.jsonl" || { show; false; }
	run git -C "$S/up/repo.git" rev-parse --verify -q aibox/opts
	assert_failure
}

@test "broker task vm: proxy.log shows the hand-off, broker.log the forwarded push" {
	shared
	grep -q 'allowed git.aibox.internal:80 POST remote=0 (handed to aibox-broker)' "$DIR/proxy.log"
	grep -q 'refs=refs/heads/aibox/from-vm(create) result=allowed' "$DIR/broker.log"
}

@test "broker task vm: the token, plain or as the Basic credential, and the key are nowhere in the task folder" {
	shared
	token=$(cat "$S/token")
	cred=$(printf 'x-access-token:%s' "$token" | base64 -w0)
	run grep -rlaF -e "$token" -e "$cred" "$DIR"
	assert_output ''
	run grep -rlaF "$KEY" "$DIR"
	assert_output ''
}

@test "broker task vm: nothing of the task is left running, the broker included" {
	shared
	run alive "$(cut -d' ' -f1 "$S/pids")"
	assert_failure
	run pgrep -f "$DIR"
	assert_failure
}
