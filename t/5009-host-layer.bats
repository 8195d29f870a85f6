#!/usr/bin/env bats
# The host layer aibox task and aibox run share (docs/internals.md, "The
# host layer"), without a VM: a stand-in QEMU records its argv and the
# helpers its parent started, then exits, so both stop at the boot.
load lib-common
load lib-lock

teardown() { lock_teardown; }

setup() {
	common_setup
	no_vm_project
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	export ANTHROPIC_API_KEY=sk-ant-api03-test-key
	export GIT_TOKEN=tok-123
	mkdir -p "$HOME/.claude/skills" "$T/data"
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_API_KEY]\nallow: [example.com]\nmounts:\n  - host: %s\n    vm: /data\ngit:\n  - url: https://127.0.0.1/o/r.git\n    token: GIT_TOKEN\n' \
		"$T/data" >"$cfg"
	# The stand-in QEMU (which gets HOME, not our environment): its argv in
	# ~/qemu.args, its parent's other children in ~/qemu.args.helpers, the
	# shared folder's settings.json in ~/qemu.args.settings.
	cat >"$T/fake-bin/qemu-system-x86_64" <<-'EOS'
		#!/bin/sh
		printf '%s\n' "$@" >"$HOME/qemu.args"
		ps -o args= --ppid "$PPID" | grep -e /aibox-proxy -e /aibox-broker >"$HOME/qemu.args.helpers"
		share=$(printf '%s\n' "$@" | sed -n 's/^local,path=\(.*\),mount_tag=aibox.task,.*/\1/p')
		cp "$share/settings.json" "$HOME/qemu.args.settings"
		exit 1
	EOS
}

# boot NAME CMD...: run CMD, which stops at the boot; keep what QEMU saw as $T/NAME.args.
boot() {
	local name=$1
	shift
	run "$@"
	mv "$HOME/qemu.args" "$T/$name.args"
	mv "$HOME/qemu.args.helpers" "$T/$name.args.helpers"
	mv "$HOME/qemu.args.settings" "$T/$name.args.settings"
}

# helpers FILE: the recorded helpers' argv, the build folder named BUILD.
helpers() {
	sed -e "s|$BUILD|BUILD|g" -e 's/--max-task-nano [0-9]* //' "$1.helpers" | sort
}

@test "host layer: aibox task and aibox run start aibox-proxy and aibox-broker with the same fds and options" {
	boot task aibox task hello
	assert_failure
	boot run aibox run -- true
	assert_failure 125
	run helpers "$T/task.args"
	assert_output "BUILD/aibox-broker --remote https://127.0.0.1/o/r.git --token-env GIT_TOKEN --auth-user x-access-token --fetch --handoff-fd 3 --log-fd 4 --ready-fd 5 --token-fd 6
BUILD/aibox-proxy --listen-fd 3 --log-fd 4 --ready-fd 5 --report-fd 7 --allow example.com --key-fd 8 --ledger-fd 9 --broker-fd 6"
	task=$output
	# aibox run does not read the proxy's record.
	run helpers "$T/run.args"
	assert_output "${task/ --report-fd 7/}"
}

@test "host layer: aibox task and aibox run share the config's mounts (one tag scheme) and ~/.claude read-only; run adds the project and its home read-write" {
	boot task aibox task hello
	boot run aibox run -- true
	run grep -e '^local,' "$T/task.args"
	assert_line --index 1 "local,path=$T/data,mount_tag=aibox.m0,security_model=none,readonly=on"
	assert_line --index 2 "local,path=$HOME/.claude/skills,mount_tag=aibox.skills,security_model=none,readonly=on"
	assert_equal "${#lines[@]}" 3
	run grep -e '^local,' "$T/run.args"
	assert_line --index 1 "local,path=$T/data,mount_tag=aibox.m0,security_model=none,readonly=on"
	assert_line --index 2 "local,path=$HOME/.claude/skills,mount_tag=aibox.skills,security_model=none,readonly=on"
	assert_line --index 3 "local,path=$T/repo,mount_tag=aibox.project,security_model=none"
	assert_line --index 4 "local,path=$AIBOX_HOME/projects/repo/home,mount_tag=aibox.home,security_model=none"
	assert_equal "${#lines[@]}" 5
}

@test "host layer: an empty CLAUDE_CODE_OAUTH_TOKEN is not set, for aibox run as for aibox task" {
	export CLAUDE_CODE_OAUTH_TOKEN= FOO=bar
	unset ANTHROPIC_API_KEY
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN, FOO]\n' >"$cfg"
	run --separate-stderr aibox task hello
	assert_failure 2
	[[ "$stderr" == *"CLAUDE_CODE_OAUTH_TOKEN"*"not set"* ]] || fail "$stderr"
	boot run aibox run -- true
	assert_failure 125
	run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["env_names"])' "$T/run.args.settings"
	assert_output "['FOO']"
}

@test "host layer: the VM's size: the config's memory and cpus, --memory and --cpus winning, the same for task and run" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nmemory: 3G\ncpus: 1\n' >"$cfg"
	boot task aibox task hello
	boot run aibox run -- true
	for m in task run; do
		run grep -A1 -e '^-m$' -e '^-smp$' "$T/$m.args"
		assert_output "-m
3072
-smp
1"
	done
	boot task aibox task --memory 1G hello
	boot run aibox run --memory 1G -- true
	for m in task run; do
		run grep -A1 -e '^-m$' "$T/$m.args"
		assert_output "-m
1024"
	done
}

@test "host layer: a project being removed is refused by aibox run as by aibox task, not waited for" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\n' >"$cfg"
	hold_lock "$AIBOX_HOME/projects/repo/lock" ex
	run --separate-stderr timeout 20 aibox task hello
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the project 'repo' is being removed"
	run --separate-stderr timeout 20 aibox run -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: the project 'repo' is being removed"
}

@test "host layer: the env values are written one way: the task's stdin, and aibox run's AIBOX_ENV its inner object" {
	run test-host env-json A=b 'C=d"e'
	assert_success
	assert_output '{"env": {"A": "b", "C": "d\"e"}}'
	run test-host env-json --object A=b 'C=d"e'
	assert_output '{"A": "b", "C": "d\"e"}'
	run test-host env-json --object
	assert_output '{}'
	run test-host env-json --object "A=$(printf '\xff')"
	assert_failure 1
	assert_output "error: the value of A is not valid UTF-8"
}

@test "host layer: a worker keeps only the fds it is given, stdin on /dev/null; a detached one has its own session" {
	run test-host worker pdeath
	assert_success
	[[ "${lines[0]}" =~ ^kept:\ ([0-9]+)\ extra:\ [0-9]+$ ]] || fail "${lines[0]}"
	kept=${BASH_REMATCH[1]}
	assert_line "fds: 0 1 2 $kept"
	assert_line "stdin: /dev/null"
	assert_line "session: ours"
	run test-host worker detach
	assert_line "fds: 0 1 2 $kept"
	assert_line "session: own"
}

@test "host layer: one builder makes every guest environment: ours wins, NO_PROXY and bad names are left out" {
	run test-host guest-env --proxy=http://10.0.2.100:3128 --forward --claude --retries \
		MY_TOKEN=s3cret HOME=/elsewhere NO_PROXY='*' no_proxy='*' '1BAD=x' MY_TOKEN=again \
		ANTHROPIC_API_KEY=real HTTPS_PROXY=http://evil:1 'NOEQUALS'
	assert_success
	assert_line "MY_TOKEN=s3cret"
	assert_line "HOME=/home/aibox"
	assert_line "HTTPS_PROXY=http://10.0.2.100:3128"
	assert_line "ANTHROPIC_API_KEY=sk-ant-aibox-placeholder-the-host-adds-the-key"
	assert_line "CLAUDE_CODE_MAX_RETRIES=4"
	assert_line "DISABLE_AUTOUPDATER=1"
	assert_line "DISABLE_INSTALLATION_CHECKS=1"
	assert_line "TERM=dumb"
	refute_line --partial "NO_PROXY"
	refute_line --partial "no_proxy"
	refute_line --partial "BAD"
	refute_line "MY_TOKEN=again"
	refute_line "ANTHROPIC_API_KEY=real"
	refute_line "HTTPS_PROXY=http://evil:1"
	refute_line --partial "SSL_CERT_FILE"
	run test-host guest-env --root --term="$(printf 'x\033[2J')"
	assert_success
	assert_line "IS_SANDBOX=1"
	assert_line "TERM=dumb"
	refute_line --partial "HTTPS_PROXY"
	run test-host guest-env --term=xterm-256color --git
	assert_success
	assert_line "TERM=xterm-256color"
	assert_line "GIT_CONFIG_NOSYSTEM=1"
	refute_line --partial "IS_SANDBOX"
	refute_line --partial "DISABLE_AUTOUPDATER"
	# aibox run's: Claude Code's switches without the task's retry count
	run test-host guest-env --claude
	assert_success
	assert_line "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
	assert_line "DISABLE_AUTOUPDATER=1"
	assert_line "DISABLE_INSTALLATION_CHECKS=1"
	refute_line --partial "CLAUDE_CODE_MAX_RETRIES"
}

@test "host layer: with the task's CA every tool's bundle variable names the guest's bundle, and Node's fetch uses the proxy" {
	run test-host guest-env --ca --proxy=http://10.0.2.100:3128
	assert_success
	for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO PIP_CERT CARGO_HTTP_CAINFO; do
		assert_line "$v=/etc/ssl/certs/ca-certificates.crt"
	done
	assert_line "NODE_USE_ENV_PROXY=1"
}

@test "host layer: a secret not set in the shell stops aibox task (2) and aibox run (125) with the config's path and line" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nallow: [example.com]\nsecrets:\n  - {env: NPM_TOKEN, hosts: [example.com]}\n' >"$cfg"
	unset NPM_TOKEN
	run --separate-stderr aibox task hello
	assert_failure 2
	assert_equal "$stderr" "aibox-task: $cfg:4: secrets[0].env: NPM_TOKEN is not set in your shell"
	run --separate-stderr aibox run -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: $cfg:4: secrets[0].env: NPM_TOKEN is not set in your shell"
	NPM_TOKEN= run --separate-stderr aibox task hello
	assert_failure 2
	assert_equal "$stderr" "aibox-task: $cfg:4: secrets[0].env: NPM_TOKEN is not set in your shell"
	assert_not_exist "$HOME/qemu.args"
}

@test "host layer: a secret whose value the proxy cannot swap in (a control character, over 4096 bytes) stops aibox task (2) with the config's path and line" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nallow: [example.com]\nsecrets:\n  - {env: NPM_TOKEN, hosts: [example.com]}\n' >"$cfg"
	NPM_TOKEN=$'a\tb' run --separate-stderr aibox task hello
	assert_failure 2
	assert_equal "$stderr" "aibox-task: $cfg:4: secrets[0].env: NPM_TOKEN holds a value the proxy cannot swap in (1 to 4096 printable ASCII characters)"
	NPM_TOKEN=$(head -c 4097 /dev/zero | tr '\0' a) run --separate-stderr aibox run -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: $cfg:4: secrets[0].env: NPM_TOKEN holds a value the proxy cannot swap in (1 to 4096 printable ASCII characters)"
	assert_not_exist "$HOME/qemu.args"
}

@test "host layer: a secret's value stays on the host: settings.json holds its placeholder, QEMU and the task folder never see the value" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN, FOO]\nallow: [example.com]\nsecrets:\n  - {env: NPM_TOKEN, hosts: [example.com]}\n' >"$cfg"
	export NPM_TOKEN=npm_s3cretvalue-4711 FOO=foo-value-4712
	boot task aibox task hello
	assert_failure
	# the placeholders are in the file: the early task needs nothing from the session
	run jq -c '[.env_names, (.placeholders | keys_unsorted)]' "$T/task.args.settings"
	assert_success
	assert_output '[["FOO"],["CLAUDE_CODE_OAUTH_TOKEN","NPM_TOKEN"]]'
	run jq -r '.placeholders[]' "$T/task.args.settings"
	assert_line --index 0 --regexp '^aibox-secret-[0-9a-f]{32}$'
	assert_line --index 1 --regexp '^aibox-secret-[0-9a-f]{32}$'
	boot run aibox run -- true
	run jq -c '[.env_names, (.placeholders | keys_unsorted)]' "$T/run.args.settings"
	assert_output '[["FOO"],["CLAUDE_CODE_OAUTH_TOKEN","NPM_TOKEN"]]'
	# an env value is the session's alone, never in the file
	run grep -rl foo-value-4712 "$T/task.args.settings" "$T/run.args.settings" "$AIBOX_HOME"
	assert_failure 1
	run grep -rl npm_s3cretvalue-4711 "$T/task.args" "$T/task.args.settings" "$AIBOX_HOME"
	assert_failure 1
	assert_output ""
}

@test "host layer: the subscription's token stays on the host: the VM gets a placeholder under its name and the API forward, the proxy the token over a pipe" {
	unset ANTHROPIC_API_KEY
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nallow: [example.com]\n' >"$cfg"
	run test-host env-take "$cfg"
	assert_success
	assert_output --regexp '^placeholder CLAUDE_CODE_OAUTH_TOKEN=aibox-secret-[0-9a-f]{32}$'
	boot task aibox task hello
	assert_failure
	run jq -r '.api + " " + (.env_names | join(",")) + " " + (.placeholders | keys | join(","))' "$T/task.args.settings"
	assert_output "oauth  CLAUDE_CODE_OAUTH_TOKEN"
	# the token on --secrets-fd, as the API's bearer; nothing to intercept, no CA
	run cat "$T/task.args.helpers"
	assert_output --partial "--secrets-fd"
	refute_output --partial "--ca-fd"
	refute_output --partial "--key-fd"
	boot run aibox run -- true
	run jq -r .api "$T/run.args.settings"
	assert_output oauth
	run grep -rl sk-ant-oat01-test-token "$T/task.args" "$T/task.args.helpers" "$T/task.args.settings" \
		"$T/run.args" "$T/run.args.helpers" "$AIBOX_HOME"
	assert_failure 1
	assert_output ""
	# the guest: ANTHROPIC_BASE_URL to the forward, no key placeholder next to the token's
	run test-host guest-env --oauth "CLAUDE_CODE_OAUTH_TOKEN=aibox-secret-00112233445566778899aabbccddeeff"
	assert_success
	assert_line "ANTHROPIC_BASE_URL=http://127.0.0.1:3129"
	assert_line "CLAUDE_CODE_OAUTH_TOKEN=aibox-secret-00112233445566778899aabbccddeeff"
	refute_line --partial ANTHROPIC_API_KEY
}

@test "host layer: a secret's placeholder is new for each task, with the fixed prefix, and the value is never written" {
	printf 'allow: [example.com]\nsecrets:\n  - {env: NPM_TOKEN, hosts: [example.com]}\n  - {env: GH_TOKEN, hosts: [example.com]}\n' >"$T/c.yaml"
	NPM_TOKEN=npm_s3cret GH_TOKEN=gh_s3cret run test-host env-take "$T/c.yaml"
	assert_success
	assert_equal "${#lines[@]}" 2
	[[ "${lines[0]}" =~ ^placeholder\ NPM_TOKEN=aibox-secret-[0-9a-f]{32}$ ]] || fail "${lines[0]}"
	[[ "${lines[1]}" =~ ^placeholder\ GH_TOKEN=aibox-secret-[0-9a-f]{32}$ ]] || fail "${lines[1]}"
	first=${lines[0]}
	refute_output --partial s3cret
	NPM_TOKEN=npm_s3cret GH_TOKEN=gh_s3cret run test-host env-take "$T/c.yaml"
	assert_success
	[[ "${lines[0]}" != "$first" ]] || fail "the same placeholder twice: $first"
}
