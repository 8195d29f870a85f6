#!/usr/bin/env bats
# aibox task with git: entries, up to the VM: the token check before anything
# starts, aibox-broker started with its log in the task folder, settings.json's
# git_remotes, the token in no file and no other process.  No VM here (no_vm),
# so each task stops (exit 1) at the boot; t/6100 runs one with the real image.
load lib-common
load lib-tls
load lib-broker
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	broker_setup
	make_repo repo
	cd repo
	aibox projects path >/dev/null
	no_vm
	export AIBOX_BROKER_CA=$T/tls/ca.pem
	unset ANTHROPIC_API_KEY
	# A login (a task without one does not start), in every config below.
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	config </dev/null
}

teardown() {
	broker_teardown
	common_teardown
}

task_dir() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

config() {
	{ cat; printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\n'; } >"$AIBOX_HOME/projects/repo/config.yaml"
}

@test "broker task: a token variable that is not set stops the task before anything starts" {
	config <<-'EOF'
	git:
	  - url: https://github.com/o/r.git
	    token: NO_SUCH_TOKEN_VAR
	    push: [aibox/*]
	EOF
	run --separate-stderr aibox task "Push."
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the git remote 'https://github.com/o/r.git' takes its token from NO_SUCH_TOKEN_VAR, which is not set"
	run task_dir
	assert_output ''
	export NO_SUCH_TOKEN_VAR=
	run --separate-stderr aibox task "Push."
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the git remote 'https://github.com/o/r.git' takes its token from NO_SUCH_TOKEN_VAR, which is not set"
	export NO_SUCH_TOKEN_VAR='a b'
	run --separate-stderr aibox task "Push."
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the token in NO_SUCH_TOKEN_VAR (for the git remote 'https://github.com/o/r.git') holds a space or control character"
	run task_dir
	assert_output ''
}

@test "broker task: the broker starts with the task, its log in the task folder, the token in no file" {
	start_upstream
	config <<-EOF
	git:
	  - url: $UP_URL
	    token: GIT_TOKEN
	    push: [aibox/*]
	  - url: https://localhost:1/public.git
	    fetch: no
	EOF
	run --separate-stderr aibox task "Push."
	# No VM: the task stops at the boot, after the broker and the proxy started.
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]]
	dir=$(task_dir)
	[ -n "$dir" ]
	run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["git_remotes"])' "$dir/settings.json"
	assert_output "['$UP_URL', 'https://localhost:1/public.git']"
	# The broker started (a start line per remote, in config order) and died with aibox-task.
	run grep -o ' start remote=[0-9]* url=[^ ]*' "$dir/broker.log"
	assert_output " start remote=0 url=$UP_URL
 start remote=1 url=https://localhost:1/public.git"
	run pgrep -f "aibox-broker --remote $UP_URL"
	assert_failure
	# The token, plain or as the Basic credential, is in no file of the project.
	cred=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -rlaF -e "$GIT_TOKEN" -e "$cred" "$AIBOX_HOME"
	assert_output ''
}

@test "broker task: without git: entries no broker starts and settings.json has no remotes" {
	run --separate-stderr aibox task "Push."
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]]
	dir=$(task_dir)
	assert_file_not_exists "$dir/broker.log"
	run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["git_remotes"])' "$dir/settings.json"
	assert_output "[]"
}

@test "broker run: aibox run checks the tokens and starts the broker too" {
	start_upstream
	config <<-EOF
	git:
	  - url: $UP_URL
	    token: RUN_TOKEN
	    push: [aibox/*]
	EOF
	run --separate-stderr aibox run -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: the git remote '$UP_URL' takes its token from RUN_TOKEN, which is not set"
	assert_file_not_exists "$AIBOX_HOME/projects/repo/broker.log"
	export RUN_TOKEN=$GIT_TOKEN
	run --separate-stderr aibox run -- true
	# No VM: the run stops at the boot, after the broker and the proxy started.
	assert_failure 125
	[[ "$stderr" == *"the VM did not come up"* ]]
	run grep -o ' start remote=[0-9]* url=[^ ]*' "$AIBOX_HOME/projects/repo/broker.log"
	assert_output " start remote=0 url=$UP_URL"
	run pgrep -f "aibox-broker --remote $UP_URL"
	assert_failure
	cred=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -rlaF -e "$GIT_TOKEN" -e "$cred" "$AIBOX_HOME"
	assert_output ''
}
