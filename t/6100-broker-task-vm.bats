#!/usr/bin/env bats
# aibox task end to end with a git: remote: the real image, the real Claude
# Code in the VM (scripted by t/fake-api, as in t/5100), aibox-proxy handing
# git.aibox.internal to the aibox-broker that aibox task started, and
# t/git-https-upstream as the remote.  The VM pushes its branch to the
# configured URL; the token stays on the host.  One VM under TCG.
load lib-common
load lib-vm
load lib-tls
load lib-claude
load lib-broker
bats_require_minimum_version 1.5.0

KEY=sk-ant-host-key-6100

setup() {
	common_setup
	vm_image
	broker_setup
	start_upstream
	make_test_ca "$T/ca"
	make_repo repo
	cd repo
	aibox projects path >/dev/null
	export ANTHROPIC_API_KEY=$KEY
	unset CLAUDE_CODE_OAUTH_TOKEN
	# The broker trusts the upstream's test CA (docs/broker.md, "TLS").
	export AIBOX_BROKER_CA=$T/tls/ca.pem
}

teardown() {
	if [ -n "${TASK_PID:-}" ]; then
		kill "$TASK_PID" 2>/dev/null
		wait "$TASK_PID" 2>/dev/null
	fi
	stop_fake_api
	broker_teardown
	common_teardown
}

task_dir() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

show() {
	echo "--- stderr"; cat "$T/err"
	local d
	d=$(task_dir) || return 0
	echo "--- console"; tail -40 "$d/console.log"
	echo "--- proxy.log"; cat "$d/proxy.log"
	echo "--- broker.log"; cat "$d/broker.log"
	echo "--- vm.log"; tail -40 "$d/vm.log"
	echo "--- fake-api"; tail -20 "$T/fake-api.log"
}

# helpers_up_or_gone: set broker, qemu and connect (the aibox-connect of a
# guest connection) as they appear; true once all three are there, or the
# task (TASK_PID) has ended.
helpers_up_or_gone() {
	gone "$TASK_PID" && return 0
	[ -n "$broker" ] || broker=$(pgrep -P "$TASK_PID" -f aibox-broker) || true
	[ -n "$qemu" ] || qemu=$(pgrep -P "$TASK_PID" -f qemu-system) || true
	connect=$(pgrep -f "^[^ ]*/aibox-connect .*$AIBOX_HOME" | head -1) || true
	[ -n "$broker" ] && [ -n "$qemu" ] && [ -n "$connect" ]
}

@test "broker task vm: Claude Code pushes its branch through the broker, the token stays on the host" {
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
	cmd="{ exec 3<>/dev/tcp/10.0.2.100/3128; sleep 15; exec 3<&-; } && git commit -q --allow-empty -m 'From the VM' && git push $UP_URL HEAD:aibox/from-vm && { git push --force $UP_URL HEAD:main 2>&1 | sed -n 's/.*\\(remote rejected\\).*/REJ-\\1/p'; true; } && { git push -o merge_request.create -o ci.variable=X=1 $UP_URL HEAD:aibox/opts 2>&1 | sed -n 's/.*\\(does not support push options\\).*/OPT-\\1/p'; true; }"
	script=$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "push"}}},
	  {"text": "I pushed aibox/from-vm."}], "require_key": sys.argv[2]}))' "$cmd" "$KEY")
	printf '%s\n' "$script" >"$T/script.json"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT
	export AIBOX_API_CA=$T/ca/ca.pem
	main_before=$(git -C "$T/up/repo.git" rev-parse main)

	# (UPSTREAM_TOKEN is the test upstream's copy of the token: not the user's.)
	# A value of env (it goes into the VM over SSH) and a subscription token
	# in the shell that env does not list.
	export AIBOX_T_SECRET=env-secret-6100 CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-unlisted-6100
	env -u UPSTREAM_TOKEN aibox task "Push a branch." >"$T/out" 2>"$T/err" &
	TASK_PID=$!
	# Once QEMU runs, the broker is ready (aibox-task waits for it before the
	# proxy and the VM start): it holds the token in memory only, the proxy
	# the key.  Neither they nor aibox-task, QEMU or the aibox-connect of a
	# guest connection show a secret in their environment (/proc/PID/environ
	# is the initial block: aibox-task wipes what it inherited).
	broker= qemu= connect=
	wait_until 300 helpers_up_or_gone
	[ -n "$broker" ] && [ -n "$qemu" ] && [ -n "$connect" ] || { show; false; }
	proxy=$(pgrep -P "$TASK_PID" -f aibox-proxy)
	for p in "$broker" "$TASK_PID" "$proxy" "$qemu" "$connect"; do
		run grep -caF -e "$GIT_TOKEN" -e "$KEY" -e env-secret-6100 -e unlisted-6100 "/proc/$p/environ"
		[ "$output" = 0 ] || { echo "a secret is in the environment of $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)"; false; }
	done
	# QEMU's runs aibox-connect with the cap (docs/task-host.md).
	grep -qaF -- "--max 64 --log" "/proc/$qemu/cmdline"
	wait "$TASK_PID" && status=0 || status=$?
	TASK_PID=
	[ "$status" -eq 0 ] || show
	[ "$status" -eq 0 ]
	dir=$(task_dir)

	# The branch landed upstream, main did not move.
	git -C "$T/up/repo.git" rev-parse --verify -q aibox/from-vm
	assert_equal "$(git -C "$T/up/repo.git" log -1 --format=%s aibox/from-vm)" "From the VM"
	assert_equal "$(git -C "$T/up/repo.git" rev-parse main)" "$main_before"
	# The VM's git got the broker's refusal for main.
	grep -q 'REJ-remote rejected' "$dir/transcript.jsonl" || { show; false; }
	# And the push with options was refused: nothing of it upstream.
	grep -q 'OPT-does not support push options' "$dir/transcript.jsonl" || { show; false; }
	run git -C "$T/up/repo.git" rev-parse --verify -q aibox/opts
	assert_failure
	# The logs: the proxy handed the requests over, the broker forwarded and refused.
	grep -q 'allowed git.aibox.internal:80 POST remote=0 (handed to aibox-broker)' "$dir/proxy.log"
	grep -q 'refs=refs/heads/aibox/from-vm(create) result=allowed' "$dir/broker.log"
	grep -q 'refs=refs/heads/main result=refused' "$dir/broker.log"
	# The token, plain or as the Basic credential, is nowhere in the task folder.
	cred=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -rlaF -e "$GIT_TOKEN" -e "$cred" "$dir"
	assert_output ''
	run grep -rlaF "$KEY" "$dir"
	assert_output ''
	# Nothing left running.
	run alive "$broker"
	assert_failure
	run pgrep -f "$dir"
	assert_failure
}
