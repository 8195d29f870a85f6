#!/usr/bin/env bats
# aibox task, its first steps: flags, prompt, config, start commit, locks, the
# task folder and what the host writes into it before the VM starts.
load lib-common
load lib-dns
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	# No VM: each task stops (exit 1) at the boot, after what these tests
	# look at; t/5100 runs tasks with the real image.
	no_vm_project
	# A login (docs/config.md, "env"): without one a task does not start.
	printf 'env:\n  - CLAUDE_CODE_OAUTH_TOKEN\n' >"$cfg"
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	unset ANTHROPIC_API_KEY
}

task_dir() {
	ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

@test "task: the task folder's path alone goes to stdout, with the inputs in it" {
	run --separate-stderr aibox task --model sonnet --timeout 90m --max-budget-usd 2.5 "fix the flaky test"
	assert_stopped_at_boot
	dir=$(task_dir)
	[ -n "$dir" ]
	assert_output "$dir"
	[[ "$stderr" == *"aibox[${dir: -6}]: task ${dir: -6} starts from $(git rev-parse HEAD)"* ]]
	run cat "$dir/prompt.txt"
	assert_output "fix the flaky test"
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["id"], s["model"], s["timeout_s"], s["max_budget_usd"], s["start_commit"], s["git"]["name"], s["api"])' "$dir/settings.json"
	assert_output "${dir: -6} sonnet 5400 2.5 $(git rev-parse HEAD) Test User oauth"
	assert_file_exists "$dir/ssh/authorized_keys"
	assert_file_exists "$dir/ssh/ssh_host_ecdsa_key"
	for f in changes.bundle transcript.jsonl vm.log result.json; do
		assert_file_exists "$dir/$f"
	done
	assert_file_exists "$dir.lock"
}

@test "task: an ended task's folder keeps no proxy.sock, also when aibox task was killed" {
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	dir=$(task_dir)
	assert_file_exists "$dir/summary.json"
	# Removed by a helper that outlives the task, just after its end.
	wait_until 10 test ! -e "$dir/proxy.sock"
	run ls -A "$dir"
	assert_success
	refute_line --regexp '^proxy\.sock'
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	# Killed while its VM runs: the socket goes all the same.
	printf '#!/bin/sh\n[ "$1" = --version ] && exit 1\necho $$ >"%s"\nexec sleep 60\n' \
		"$T/qemu.pid" >"$T/fake-bin/qemu-system-x86_64"
	aibox task x >"$T/out" 2>"$T/err" &
	pid=$!
	wait_until 20 test -s "$T/qemu.pid"
	dir=$(task_dir)
	[ -S "$dir/proxy.sock" ]
	kill -9 "$pid"
	wait "$pid" || true
	wait_until 10 test ! -e "$dir/proxy.sock"
	# The fake QEMU dies with aibox task (its parent-death signal).
	wait_until 10 gone "$(cat "$T/qemu.pid")"
}

@test "task: README's first task: a new checkout and a key in the shell get a task past every check" {
	# As README.md, "Your first task", has it after make install: no project
	# yet, only ANTHROPIC_API_KEY in the shell.
	unset CLAUDE_CODE_OAUTH_TOKEN
	cd "$T"
	make_repo fresh
	cd fresh
	[ ! -e "$AIBOX_HOME/projects/fresh" ]
	ANTHROPIC_API_KEY=sk-ant-first-1 run --separate-stderr aibox task "add a Purpose section to the README"
	assert_stopped_at_boot
	[[ "$stderr" != *"would not be logged in"* ]] || fail "stopped at the login: $stderr"
	dir=$(ls -d "$AIBOX_HOME"/projects/fresh/tasks/*-??????)
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["api"])' "$dir/settings.json"
	assert_output "forward"
	# The README's words are what this test runs.
	run grep -c -e '^    export ANTHROPIC_API_KEY=' -e '^    aibox task "add a Purpose section to the README"' \
		-e '^    aibox image build ' "$TOP/README.md"
	assert_output 3
}

@test "task: the prompt comes from --file and from stdin" {
	printf 'step 1\nstep 2\n' >plan.md
	run --separate-stderr aibox task --file plan.md "do only step 2"
	assert_stopped_at_boot
	run cat "$(task_dir)/prompt.txt"
	assert_output "do only step 2

step 1
step 2"
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	run --separate-stderr bash -c 'echo "from stdin" | aibox task'
	assert_stopped_at_boot
	run cat "$(task_dir)/prompt.txt"
	assert_output "from stdin"
}

@test "task: --from a tag and a stash" {
	git tag v1 HEAD~1
	run --separate-stderr aibox task --from v1 x
	assert_stopped_at_boot
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_commit"])' "$(task_dir)/settings.json"
	assert_output "$(git rev-parse HEAD~1)"
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	echo dirty >>README.md
	git stash -q
	run --separate-stderr aibox task --from stash@{0} x
	assert_stopped_at_boot
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_commit"])' "$(task_dir)/settings.json"
	assert_output "$(git rev-parse 'stash@{0}')"
}

@test "task: a shallow clone is refused before anything starts" {
	cd "$T"
	git clone -q --depth 1 "file://$T/repo" shallow
	cd shallow
	run aibox task x
	assert_failure 2
	assert_output --partial "is a shallow clone: a task needs the full history"
	[ ! -d "$AIBOX_HOME/projects/shallow/tasks" ] || [ -z "$(ls "$AIBOX_HOME/projects/shallow/tasks")" ]
}

@test "task: the identity the VM commits as is git's last user.name and user.email, spelled any way" {
	git config --global user.name "Global Name"
	git config --global user.email global@example.com
	# the repository's own values come last, whatever the case of their names
	printf '[User]\n\tNAME = Repo Name\n' >>.git/config
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["git"]["name"] + "|" + s["git"]["email"])' "$(task_dir)/settings.json"
	assert_output "Repo Name|global@example.com"
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	git config --unset-all user.name
	git config --global --unset user.name
	run aibox task x
	assert_failure 2
	assert_output "aibox-task: git has no user.name: set it with git config --global user.name 'Your Name'"
	git config user.name "Repo Name"
	git config --global --unset user.email
	run aibox task x
	assert_failure 2
	assert_output "aibox-task: git has no user.email: set it with git config --global user.email you@example.com"
	[ -z "$(task_dir)" ]
}

@test "task: bad flags and revisions are refused with exit 2 and no folder" {
	for args in "--timeout 5d x" "--timeout 0s x" "--max-budget-usd -1 x" "--max-budget-usd abc x" \
		"--memory 1M x" "--cpus 0 x" "--image ../x x" "--from nope x" "--bogus x" "--model"; do
		run aibox task $args
		assert_failure 2
		[[ ${lines[0]} == "aibox-task: "*"${args%% *}"* ]]
	done
	run aibox task --from nope x
	assert_failure 2
	assert_output "aibox-task: --from: 'nope' names no commit in '$T/repo'"
	[ -z "$(task_dir)" ]
}

@test "task: --help says what it does and exits 0" {
	run aibox task --help
	assert_success
	assert_output --partial "usage: aibox task [options] [prompt...]"
}

@test "task: a secret from env goes nowhere on disk; the API key makes the proxy forward" {
	assert_file_exists "$cfg"
	printf 'env:\n  - GITHUB_TOKEN\n  - ANTHROPIC_API_KEY\n' >"$cfg"
	GITHUB_TOKEN=ghp-secret-4f9a ANTHROPIC_API_KEY=sk-ant-secret-77 run --separate-stderr aibox task x
	assert_stopped_at_boot
	dir=$(task_dir)
	run grep -rl -e ghp-secret-4f9a -e sk-ant-secret-77 "$dir"
	assert_output ""
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["env_names"], s["api"])' "$dir/settings.json"
	assert_output "['GITHUB_TOKEN'] forward"
	printf 'env:\n  - ANTHROPIC_BASE_URL\n  - ANTHROPIC_API_KEY\n' >"$cfg"
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	ANTHROPIC_BASE_URL=http://evil ANTHROPIC_API_KEY=k run aibox task x
	assert_failure 2
	assert_output --partial "ANTHROPIC_BASE_URL cannot be set next to ANTHROPIC_API_KEY"
	[ -z "$(task_dir)" ]
}

@test "task: ~/.claude's skills, agents and commands are shared read-only unless the config says none" {
	mkdir -p "$HOME/.claude/skills/hello" "$HOME/.claude/agents" "$HOME/.claude/commands"
	echo "a skill" >"$HOME/.claude/skills/hello/SKILL.md"
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	dir=$(task_dir)
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mounts"])' "$dir/settings.json"
	assert_output "[{'tag': 'aibox.skills', 'path': '/home/aibox/.claude/skills'}, {'tag': 'aibox.agents', 'path': '/home/aibox/.claude/agents'}, {'tag': 'aibox.commands', 'path': '/home/aibox/.claude/commands'}]"

	# none leaves a key out; a folder that does not exist is no share; a
	# configured folder goes under the key's name
	rm -rf "$AIBOX_HOME/projects/repo/tasks" "$HOME/.claude/commands"
	mkdir -p "$T/team-agents"
	printf 'skills: none\nagents: %s\nenv: [CLAUDE_CODE_OAUTH_TOKEN]\n' "$T/team-agents" >"$cfg"
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	dir=$(task_dir)
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mounts"])' "$dir/settings.json"
	assert_output "[{'tag': 'aibox.agents', 'path': '/home/aibox/.claude/agents'}]"

	# a configured folder that is not one is refused before anything starts
	rm -rf "$AIBOX_HOME/projects/repo/tasks" "$T/team-agents"
	touch "$T/team-agents"
	run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: agents: '$T/team-agents' is not a folder"
	[ -z "$(task_dir)" ]
}

@test "task: the system prompt ends with the host system's part of image/host (AIBOX_HOST_SYSTEM for tests)" {
	for sys in linux macos windows; do
		rm -rf "$AIBOX_HOME/projects/repo/tasks"
		AIBOX_HOST_SYSTEM=$sys run --separate-stderr aibox task x
		assert_stopped_at_boot
		python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["system_prompt"], end="")' \
			"$(task_dir)/settings.json" >"$T/prompt-$sys"
		# task.md, a blank line, then the host's part, whole.
		assert_equal "$(cat "$T/prompt-$sys")" "$(cat "$TOP/image/task.md"; echo; cat "$TOP/image/host/$sys.md")"
	done
	grep -q '^# The user.s machine runs Linux$' "$T/prompt-linux"
	grep -q '^# The user.s machine runs macOS$' "$T/prompt-macos"
	grep -q 'Unicode normalization' "$T/prompt-macos"
	grep -q '^# The user.s machine runs Windows$' "$T/prompt-windows"
	grep -q 'COM1. to .COM9' "$T/prompt-windows"
	run ! grep -q 'Windows' "$T/prompt-linux"
	# Anything else is refused, not taken for linux.
	for bad in '' Linux win32 'linux '; do
		AIBOX_HOST_SYSTEM=$bad run --separate-stderr aibox task x
		assert_equal "$status" 2
		[[ "$stderr" == *"AIBOX_HOST_SYSTEM='$bad' is not linux, macos or windows"* ]]
	done
}

@test "task: no login in the config stops the task before anything starts, with the lines to add" {
	unset CLAUDE_CODE_OAUTH_TOKEN
	printf 'allow: []\n' >"$cfg"
	run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: Claude Code in the VM would not be logged in: '$cfg' lists no login under env; add these two lines to it:
    env:
      - ANTHROPIC_API_KEY
and set ANTHROPIC_API_KEY in your shell to an API key; for a claude.ai subscription, CLAUDE_CODE_OAUTH_TOKEN instead (made by claude setup-token)"
	[ -z "$(task_dir)" ]

	# set in the shell, not listed: said so; env already lists other names
	printf 'env: [NPM_TOKEN]\n' >"$cfg"
	NPM_TOKEN=n CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: Claude Code in the VM would not be logged in: CLAUDE_CODE_OAUTH_TOKEN is set in your shell, but '$cfg' does not list it under env; add these two lines to it:
    env:
      - CLAUDE_CODE_OAUTH_TOKEN
(its env already lists names: add '- CLAUDE_CODE_OAUTH_TOKEN' to that list)"
	ANTHROPIC_API_KEY=sk-ant-x run --separate-stderr aibox task x
	assert_failure 2
	[[ "$stderr" == *"ANTHROPIC_API_KEY is set in your shell, but '$cfg' does not list it under env"* ]]

	# listed, not set
	printf 'env: [ANTHROPIC_API_KEY]\n' >"$cfg"
	run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: Claude Code in the VM would not be logged in: '$cfg' lists ANTHROPIC_API_KEY under env, but it is not set in your shell; set it and start the task again"
	CLAUDE_CODE_OAUTH_TOKEN=t run --separate-stderr aibox task x
	assert_failure 2
	[[ "$stderr" == *"set it and start the task again (CLAUDE_CODE_OAUTH_TOKEN is set in your shell, but not listed)" ]]
	[ -z "$(task_dir)" ]
}

@test "task: with both the key and the token listed, it says the token is not used; the VM holds its placeholder only" {
	printf 'env: [ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN]\n' >"$cfg"
	ANTHROPIC_API_KEY=sk-ant-x run --separate-stderr aibox task x
	# it goes on, up to the VM (no_vm: QEMU exits at once)
	assert_failure 1
	[[ "$stderr" == *"aibox-task: warning: ANTHROPIC_API_KEY is forwarded and CLAUDE_CODE_OAUTH_TOKEN is in the env of '$cfg': Claude Code's requests get the key, which stays on the host, and the token is not used (the VM holds only its placeholder); remove one of them from env"* ]]
	[[ "$stderr" == *"QEMU exited"* ]]
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["env_names"], list(s["placeholders"]), s["api"])' "$(task_dir)/settings.json"
	assert_output "[] ['CLAUDE_CODE_OAUTH_TOKEN'] forward"
	# another of Claude Code's logins counts as one
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	printf 'env: [ANTHROPIC_AUTH_TOKEN]\n' >"$cfg"
	ANTHROPIC_AUTH_TOKEN=t run --separate-stderr aibox task x
	assert_failure 1
	[[ "$stderr" == *"QEMU exited"* ]]
}

@test "task: options stand anywhere among the prompt's words, as with git; -- ends them" {
	run --separate-stderr aibox task "fix the test" --model sonnet --timeout 5m
	assert_stopped_at_boot
	dir=$(task_dir)
	run cat "$dir/prompt.txt"
	assert_output "fix the test"
	run python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["model"], s["timeout_s"])' "$dir/settings.json"
	assert_output "sonnet 300"

	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	printf 'step 1\n' >plan.md
	POSIXLY_CORRECT=1 run --separate-stderr aibox task do --file plan.md it
	assert_stopped_at_boot
	run cat "$(task_dir)/prompt.txt"
	assert_output "do it

step 1"

	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	run --separate-stderr aibox task --model opus -- --model sonnet -x -
	assert_stopped_at_boot
	dir=$(task_dir)
	run cat "$dir/prompt.txt"
	assert_output "--model sonnet -x -"
	run python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$dir/settings.json"
	assert_output "opus"

	# an unknown option is refused wherever it stands
	rm -rf "$AIBOX_HOME/projects/repo/tasks"
	run aibox task "fix it" --modle sonnet
	assert_failure 2
	assert_line --index 0 "aibox-task: unknown option '--modle'"
	run aibox task "fix it" --timeout
	assert_failure 2
	assert_line --index 0 "aibox-task: --timeout needs a value"
	[ -z "$(task_dir)" ]
}

@test "task: the image, mounts, presets and git remotes are checked before the folder is made" {
	run --separate-stderr aibox task --image nosuch x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the image 'nosuch' is not built: run 'aibox image build nosuch'"
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nmounts:\n  - host: %s\n    vm: /data\n' "$T/nowhere" >"$cfg"
	run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: mounts[0].host: '$T/nowhere' is not a folder: No such file or directory"
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\nallow:\n  - preset:nosuch\n' >"$cfg"
	run --separate-stderr aibox task x
	assert_failure 2
	[[ "$stderr" == "aibox-task: allow: unknown preset 'nosuch': cannot read "* ]]
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\ngit:\n  - url: https://nosuch.invalid/o/r.git\n' >"$cfg"
	run --separate-stderr aibox task x
	assert_failure 2
	[[ "$stderr" == "aibox-task: the git remote 'https://nosuch.invalid/o/r.git': cannot resolve 'nosuch.invalid': "* ]]
	[ -z "$(task_dir)" ]
	[ -z "$(ls "$AIBOX_HOME/projects/repo/tasks" 2>/dev/null)" ]
}

@test "task: a git remote's host is looked up as the broker and the proxy look names up, never under the machine's search domains" {
	printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\ngit:\n  - url: https://nx.example.test/o/r.git\n' >"$cfg"
	# shellcheck disable=SC2016
	run in_dns_ns 'aibox task x 2>&1 >/dev/null; echo "exit $?"'
	# not as nx.example.test.corp.test, which DNS has (t/lib-dns.bash)
	assert_line --index 0 "aibox-task: the git remote 'https://nx.example.test/o/r.git': cannot resolve 'nx.example.test': no such host name"
	assert_line --index 1 "exit 2"
	run cat "$T/dns.log"
	assert_line "nx.example.test 1"
	refute_output --partial "corp.test"
	[ -z "$(task_dir)" ]
}

@test "task: a failure after the folder is made: an aibox[id] line, aibox.log's end, an ended task's folder" {
	printf 'env:\n  - ANTHROPIC_API_KEY\n' >"$cfg"
	# aibox-proxy refuses this upstream: the task fails once its folder exists
	ANTHROPIC_API_KEY=k AIBOX_API_UPSTREAM=garbage run --separate-stderr aibox task x
	assert_failure 2
	dir=$(task_dir)
	[ -n "$dir" ]
	assert_output "$dir"
	[[ "$stderr" =~ (^|$'\n')[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\ aibox\[${dir: -6}\]:\ aibox-proxy\ did\ not\ start ]] || fail "$stderr"
	[[ "$stderr" != *"aibox-task: "* ]] || fail "$stderr"
	# the proxy's own words too have the time, the source and the id, before the line that points at them
	[[ "$stderr" =~ [0-9:]{8}\ aibox\[${dir: -6}\]:\ aibox-proxy:\ [^$'\n']*garbage[^$'\n']*$'\n'[0-9:]{8}\ aibox\[${dir: -6}\]:\ aibox-proxy\ did\ not\ start ]] || fail "$stderr"
	printf '%s\n' "$stderr" >"$T/stderr"
	run grep -cvE "^[0-9]{2}:[0-9]{2}:[0-9]{2} aibox\[${dir: -6}\]: " "$T/stderr"
	assert_failure 1
	assert_output 0
	[[ "$stderr" != *"no changes"* ]] || fail "$stderr"
	run tail -n 1 "$dir/aibox.log"
	assert_output --regexp '^total [0-9.]+s exit 2$'
	assert_file_not_exists "$dir/start.bundle"
	assert_file_not_exists "$dir/proxy.sock"
	assert_file_exists "$dir/prompt.txt"
	# an ended task: nothing to clean but its folder, which --all removes with its lock
	run aibox tasks clean
	assert_success
	assert_dir_exists "$dir"
	run aibox tasks clean --all
	assert_success
	assert_dir_not_exists "$dir"
	assert_file_not_exists "$dir.lock"
}

@test "task: a boot that fails does not say 'no changes', and points at console.log" {
	run --separate-stderr aibox task x
	assert_failure 1
	[[ "$stderr" == *"the task did not finish: QEMU exited"* ]] || fail "$stderr"
	[[ "$stderr" != *"no changes"* ]] || fail "$stderr"
	# the line points at what QEMU and the kernel said
	dir=$(task_dir)
	[[ "$stderr" == *"aibox[${dir: -6}]: the task did not finish: QEMU exited with 1 before the VM's SSH server answered (see $dir/console.log)"* ]] || fail "$stderr"
	assert_file_exists "$dir/console.log"
}

@test "task: its warnings, once the folder is made, are aibox[id] lines too" {
	run --separate-stderr aibox task --no-sandbox x
	assert_failure 1
	dir=$(task_dir)
	[[ "$stderr" =~ (^|$'\n')[0-9:]{8}\ aibox\[${dir: -6}\]:\ warning:\ --no-sandbox:\ aibox-task\ runs\ without\ its\ own\ lockdown$'\n' ]] || fail "$stderr"
	[[ "$stderr" != *"aibox-task: "* ]] || fail "$stderr"
}

@test "task: AIBOX_MEM_MERGE=0 keeps guest RAM out of KSM (QEMU's mem-merge off)" {
	# Without it, QEMU's default (mergeable): t/4010's whole argv has no mem-merge.
	printf '#!/bin/sh\n[ "$1" = --version ] && exit 1\nprintf "%%s\\n" "$@" >>"%s"\necho "no VM in this test" >&2\nexit 1\n' \
		"$T/qemu.args" >"$T/fake-bin/qemu-system-x86_64"
	AIBOX_MEM_MERGE=0 run --separate-stderr aibox task x
	assert_stopped_at_boot
	run grep -A1 -x -- -machine "$T/qemu.args"
	assert_success
	assert_line mem-merge=off
}
