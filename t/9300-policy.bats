#!/usr/bin/env bats
# The administrator's policy (docs/config.md, "The administrator's policy";
# common/task/policy.h): a config or an option asking beyond it is refused before
# anything starts, naming both lines; a policy file of the wrong owner or
# mode, or with a bad line, is refused loudly.  In the root family (t/run runs
# t/9*.bats as root) because the policy must be owned by root: the tests make
# their policies in $T (root's, mode 0700) and name them with AIBOX_POLICY,
# which is read only when /etc/aibox/policy.yaml does not exist.  No VM: the
# tasks stop at no_vm's boot.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: the policy must be owned by root (t/run runs t/9*.bats as root)"
	[ ! -e /etc/aibox/policy.yaml ] || skip "/etc/aibox/policy.yaml exists: AIBOX_POLICY is not read"
	common_setup
	export AIBOX_POLICY=$T/policy.yaml
	export ANTHROPIC_API_KEY=sk-ant-test-key
	pol=$AIBOX_POLICY
}

teardown() { common_teardown; }

# policy TEXT: write TEXT as the policy, root's and mode 0644.
policy() {
	printf '%s\n' "$1" >"$pol"
	chmod 644 "$pol"
}

# refused_task ARGS...: `aibox task ARGS... x` is refused with exit 2; its stderr in $stderr.
refused_task() {
	run --separate-stderr aibox task "$@" x
	assert_failure 2
}

@test "policy: each kind of thing a config asks beyond the policy is refused, naming the config's line and the policy's" {
	no_vm_project
	mkdir -p "$T/data/in" "$T/other"
	policy "allow:
  - api.anthropic.com
  - \"*.example.com\"
env: [ANTHROPIC_API_KEY]
memory: 2G
cpus: 1
disk: 10G
budget:
  task: 2.00
mounts: [$T/data]
git:
  - url: https://127.0.0.1/team/repo.git
    push: [aibox/*]
attempts: 2"
	# check CONFIG WHERE POLICY'S: CONFIG (with the login's env unless it has env)
	# refused at WHERE of the config and at POLICY'S of the policy
	check() {
		printf '%s\n' "$1" >"$cfg"
		[[ "$1" == *env:* ]] || printf 'env: [ANTHROPIC_API_KEY]\n' >>"$cfg"
		refused_task
		assert_equal "$stderr" "aibox-task: $cfg:$2 is beyond the policy ($pol:$3)"
	}
	check "allow: [api.anthropic.com, evil.example.org]" "1: allow[1]: 'evil.example.org'" "1: allow"
	check $'allow:\n  - api.anthropic.com\n  - example.com' "3: allow[1]: 'example.com'" "1: allow"
	check "allow: [\"*.org\"]" "1: allow[0]: '*.org'" "1: allow"
	check "allow: [\"api.example.com:8443\"]" "1: allow[0]: 'api.example.com:8443'" "1: allow"
	check "env: [ANTHROPIC_API_KEY, NPM_TOKEN]" "1: env[1]: the secret NPM_TOKEN" "4: env"
	NPM_TOKEN=npm-value check $'env: [ANTHROPIC_API_KEY]\nallow: [api.anthropic.com, api.example.com]\nsecrets:\n  - env: NPM_TOKEN\n    hosts: [api.example.com]' "4: secrets[0].env: the secret NPM_TOKEN" "4: env"
	check "memory: 4G" "1: memory: 4G" "5: memory: 2G"
	check "cpus: 2" "1: cpus: 2" "6: cpus: 1"
	check "disk: 20G" "1: disk: 20G" "7: disk: 10G"
	check "attempts: 3" "1: attempts: 3" "14: attempts: 2"
	check $'budget:\n  task: 5' "2: budget.task: 5.000000" "9: budget.task: 2.000000"
	check $'mounts:\n  - host: '"$T/other"$'\n    vm: /data' "2: mounts[0].host: '$T/other'" "10: mounts"
	# a prefix is a folder, not a string: $T/data-x is not inside $T/data
	mkdir "$T/data-x"
	check $'mounts:\n  - host: '"$T/data-x"$'\n    vm: /data' "2: mounts[0].host: '$T/data-x'" "10: mounts"
	check $'git:\n  - url: https://127.0.0.1/team/other.git' "2: git[0].url: 'https://127.0.0.1/team/other.git'" "11: git"
	check $'git:\n  - url: https://127.0.0.1/team/repo.git\n    push: [main]' "2: git[0].push: 'main'" "12: git"
	check $'git:\n  - url: https://127.0.0.1/team/repo.git\n    push: ["*"]' "2: git[0].push: '*'" "12: git"
	check $'git:\n  - url: https://127.0.0.1/team/repo.git\n    token: GITHUB_TOKEN' "2: git[0].token: the secret GITHUB_TOKEN" "4: env"
	# nothing was made
	run find "$AIBOX_HOME/projects/repo/tasks" -mindepth 1 -maxdepth 1 -type d
	assert_success
	assert_output ""
}

@test "policy: pushes and aibox run can be forbidden outright" {
	no_vm_project
	policy $'push: no\nrun: no'
	printf 'env: [ANTHROPIC_API_KEY]\ngit:\n  - url: https://127.0.0.1/team/repo.git\n    push: [aibox/*]\n' >"$cfg"
	refused_task
	assert_equal "$stderr" "aibox-task: $cfg:3: git[0].push: pushes are beyond the policy ($pol:1: push: no)"
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	run --separate-stderr aibox run -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: aibox run is beyond the policy ($pol:2: run: no)"
	# a remote without push is fine under push: no
	printf 'env: [ANTHROPIC_API_KEY]\ngit:\n  - url: https://127.0.0.1/team/repo.git\n' >"$cfg"
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	# the refusals are in the audit record, and the task that started names the policy
	run jq -c '[.event, .command, .project, .policy, .why]' "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_equal "${lines[0]}" "[\"refused\",\"task\",\"repo\",\"$pol\",\"$cfg:3: git[0].push: pushes are beyond the policy ($pol:1: push: no)\"]"
	assert_equal "${lines[1]}" "[\"refused\",\"run\",\"repo\",\"$pol\",\"aibox run is beyond the policy ($pol:2: run: no)\"]"
	assert_equal "${lines[2]}" "[\"start\",null,\"repo\",\"$pol\",null]"
	assert_equal "${#lines[@]}" 4
	run aibox audit verify
	assert_success
}

@test "policy: an option asking beyond the policy is refused, naming the option and the policy's line" {
	no_vm_project
	policy $'memory: 2G\ncpus: 1\ntimeout: 30m\nbudget: {task: 2}\nimages: [default]\nattempts: 2'
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	refused_task --memory 3G
	assert_equal "$stderr" "aibox-task: --memory: 3G is beyond the policy ($pol:1: memory: 2G)"
	refused_task --cpus 2
	assert_equal "$stderr" "aibox-task: --cpus: 2 is beyond the policy ($pol:2: cpus: 1)"
	refused_task --timeout 2h
	assert_equal "$stderr" "aibox-task: --timeout: 2h0m0s is beyond the policy ($pol:3: timeout: 30m0s)"
	refused_task --max-budget-usd 3
	assert_equal "$stderr" "aibox-task: --max-budget-usd: 3.000000 is beyond the policy ($pol:4: budget.task: 2.000000)"
	refused_task --image big
	assert_equal "$stderr" "aibox-task: --image: 'big' is beyond the policy ($pol:5: images)"
	refused_task --attempts 3
	assert_equal "$stderr" "aibox-task: --attempts: 3 is beyond the policy ($pol:6: attempts: 2)"
	# the config's attempts: is refused even when --attempts 1 asks for one
	printf 'env: [ANTHROPIC_API_KEY]\nattempts: 3\n' >"$cfg"
	refused_task --attempts 1
	assert_equal "$stderr" "aibox-task: $cfg:2: attempts: 3 is beyond the policy ($pol:6: attempts: 2)"
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	# as many as the policy allows start, each to the boot
	run --separate-stderr aibox task --attempts 2 x
	assert_stopped_at_boot
	[[ "$stderr" == *": 0 of 2 attempts finished; "* ]] || fail "$stderr"
	run --separate-stderr aibox run --memory 3G -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: --memory: 3G is beyond the policy ($pol:1: memory: 2G)"
	run --separate-stderr aibox run --image big -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: --image: 'big' is beyond the policy ($pol:5: images)"
	# within it: through every check to the boot
	run --separate-stderr aibox task --memory 2G --cpus 1 --timeout 10m --max-budget-usd 1 x
	assert_stopped_at_boot
}

@test "policy: a config within the policy starts, and what it leaves to defaults is brought within the policy" {
	no_vm_project
	mkdir -p "$T/data/in"
	policy "allow: [\"*.example.com\", api.anthropic.com, \"localhost:5432\"]
env: [ANTHROPIC_API_KEY, NPM_TOKEN]
memory: 1G
cpus: 1
disk: 2G
mounts: [$T/data/]
git:
  - url: https://127.0.0.1/team/repo.git
    token: GITHUB_TOKEN
    push: [aibox/*, docs]"
	printf '%s\n' "allow: [api.anthropic.com, a.example.com, \"*.b.example.com\", \"localhost:5432\"]" \
		"env: [ANTHROPIC_API_KEY, NPM_TOKEN]" "mounts:" "  - host: $T/data/in" "    vm: /data" \
		"git:" "  - url: https://127.0.0.1/team/repo.git/" "    token: GITHUB_TOKEN" \
		"    push: [aibox/*, docs]" >"$cfg"
	# QEMU's command line, to see the size the VM would get
	printf '#!/bin/sh\necho "$@" >"%s/qemu-args"\necho "no VM in this test" >&2\nexit 1\n' "$T" \
		>"$T/fake-bin/qemu-system-x86_64"
	export GITHUB_TOKEN=ghp-test NPM_TOKEN=npm-test
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	# memory 4G and the host's CPUs by default: 1G and 1 under the policy
	run grep -Eo -- '-m [0-9]+' "$T/qemu-args"
	assert_success
	assert_output "-m 1024"
	run grep -Eo -- '-smp [0-9]+' "$T/qemu-args"
	assert_success
	assert_output "-smp 1"
}

@test "policy: a policy file owned by another user, writable by group or others, or in such a folder, is refused loudly" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	policy 'memory: 2G'
	chown 65534 "$pol"
	refused_task
	assert_equal "$stderr" "aibox-task: the policy '$pol' is refused: it must be owned by root and not writable by group or others (it is owned by uid 65534, mode 0644)"
	chown 0 "$pol"
	for mode in 0664 0646 0666; do
		chmod "$mode" "$pol"
		refused_task
		assert_equal "$stderr" "aibox-task: the policy '$pol' is refused: it must be owned by root and not writable by group or others (it is owned by uid 0, mode $mode)"
	done
	mkdir -m 0777 "$T/open"
	printf 'memory: 2G\n' >"$T/open/policy.yaml"
	AIBOX_POLICY=$T/open/policy.yaml run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the policy '$T/open/policy.yaml' is refused: its folder '$T/open/' must be owned by root and not writable by group or others (it is owned by uid 0, mode 0777)"
	# named but missing, or not a file: refused, not taken for no policy
	AIBOX_POLICY=$T/none.yaml run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the policy '$T/none.yaml' cannot be read: No such file or directory"
	AIBOX_POLICY=$T run --separate-stderr aibox task x
	assert_failure 2
	assert_equal "$stderr" "aibox-task: the policy '$T' is not a regular file"
	run --separate-stderr aibox policy
	assert_failure 2
	assert_equal "$stderr" "aibox-policy: the policy '$pol' is refused: it must be owned by root and not writable by group or others (it is owned by uid 0, mode 0666)"
}

@test "policy: a bad policy line is refused with the policy's file, line and key" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	bad() {
		policy "$1"
		refused_task
		assert_equal "$stderr" "aibox-task: $pol:$2"
		run --separate-stderr aibox policy
		assert_failure 2
		assert_equal "$stderr" "aibox-policy: $pol:$2"
	}
	bad $'memory: 2G\nmemroy: 3G' "2:1: unknown key 'memroy' (known keys: allow, mounts, skills, agents, commands, path, env, git, memory, cpus, disk, budget, slurm, secrets, attempts, check)"
	bad $'memory: 2g' "1:9: memory: '2g' is not a size like 512M, 4G or 1T"
	bad $'run: maybe' "1: run: must be yes or no"
	bad $'push: [no]' "1: push: must be yes or no"
	bad $'timeout: soon' "1: timeout: must be a duration like 30m or 2h: expected a number at 'soon'"
	bad $'mounts: [srv]' "1: mounts: 'srv' must be an absolute folder, in a list"
	bad $'mounts: /srv' "1: mounts: '/srv' must be an absolute folder, in a list"
	bad $'images: ["../x"]' "1: images: '../x' is not an image name, in a list"
	bad $'images: [{a: b}]' "1:10: images: entries must be strings, not a mapping"
	bad $'allow: [a.com]\nallow: [b.com]' "2:1: duplicate key 'allow' (first at line 1)"
}

@test "policy: aibox policy shows the policy in force, and what a project may do under it (--json)" {
	no_vm_project
	AIBOX_POLICY= run --separate-stderr aibox policy
	assert_success
	assert_output "No policy: /etc/aibox/policy.yaml does not exist, and nothing is bounded."
	policy $'allow: [api.anthropic.com]\nmemory: 2G\nrun: no\nimages: [default]'
	run --separate-stderr aibox policy
	assert_success
	assert_equal "$output" "The policy in force, $pol, bounds:
  allow: [\"api.anthropic.com\"]
  memory: 2G
  images: [\"default\"]
  push: true
  run: false"
	printf 'allow: [api.anthropic.com]\n' >"$cfg"
	run --separate-stderr aibox policy --json repo
	assert_success
	assert_equal "$(jq -c '[.path, .bounds.memory, .bounds.run, .project.name, .project.within, .project.allowed.memory, .project.allowed.allow]' <<<"$output")" \
		"[\"$pol\",\"2G\",false,\"repo\",true,\"2G\",[\"api.anthropic.com\"]]"
	printf 'allow: [api.anthropic.com, example.com]\n' >"$cfg"
	run --separate-stderr aibox policy repo
	assert_failure 1
	assert_output --partial "Project repo: its config asks beyond the policy:
  $cfg:1: allow[1]: 'example.com' is beyond the policy ($pol:1: allow)"
	run --separate-stderr aibox policy --json repo
	assert_failure 1
	assert_equal "$(jq -r '.project.refusal' <<<"$output")" "$cfg:1: allow[1]: 'example.com' is beyond the policy ($pol:1: allow)"
	run --separate-stderr aibox policy nosuch
	assert_failure 2
	assert_equal "$stderr" "aibox-policy: no project 'nosuch' (aibox projects list names them)"
}

@test "policy: budget.day caps the user's spend across all projects, and a task starts only while some is left" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	policy $'budget:\n  day: 3.00'
	mkdir -p "$AIBOX_HOME/projects/other/spend" "$AIBOX_HOME/projects/repo/spend"
	# spent NANO: today 2 USD spent by the other project and NANO by this one, then a task
	spent() {
		printf '%020d\n' 2000000000 >"$AIBOX_HOME/projects/other/spend/$(date +%F)"
		printf '%020d\n' "$1" >"$AIBOX_HOME/projects/repo/spend/$(date +%F)"
		# the user's ledger, which the first task raised to the projects' sum, made anew
		rm -f "$AIBOX_HOME/spend/$(date +%F)"
		run --separate-stderr aibox task x
	}
	on_one_day spent 1000000000
	assert_failure 2
	assert_equal "$stderr" "aibox-task: your daily budget under the policy is spent (3.000000 USD today across your projects, by aibox's count; $pol:2: budget.day: 3.000000): nothing starts before tomorrow (local time)"
	on_one_day spent 999999999
	assert_stopped_at_boot
}

@test "policy: budget.day goes to the task's proxy with the user's ledger, raised to the projects' sum; usage.json records it" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	policy $'budget:\n  day: 3.00'
	mkdir -p "$AIBOX_HOME/projects/other/spend"
	# started: today 2 USD spent by the other project (an older aibox's: no user's ledger yet)
	started() {
		rm -rf "$AIBOX_HOME/projects/repo/tasks" "$AIBOX_HOME/spend"
		printf '%020d\n' 2000000000 >"$AIBOX_HOME/projects/other/spend/$(date +%F)"
		run --separate-stderr aibox task x
	}
	on_one_day started
	assert_stopped_at_boot
	dir=$(ls -d "$AIBOX_HOME"/projects/repo/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])
	[ "$(jq -c '[.caps.user_day_usd, .cap_user_nano, .user_nano_usd, .caps.task_usd]' "$dir/usage.json")" = \
		'[3,3000000000,2000000000,null]' ]
	run cat "$AIBOX_HOME"/spend/*
	assert_output "$(printf '%020d' 2000000000)"
}

@test "policy: the Slurm node reads the policy again and refuses a task folder's config beyond it" {
	# The node's entry point alone (aibox-task --slurm-node DIR), without Slurm:
	# the folder as the submitting host leaves it.
	no_vm_project
	dir=$AIBOX_HOME/projects/repo/tasks/20260101-000000-abcdef
	mkdir -p "$dir"
	printf 'allow: [api.anthropic.com]\nmemory: 4G\n' >"$dir/config.yaml"
	: >"$dir/aibox.log"
	{
		echo "aibox-slurm-secrets 1"
		for f in key tokens env user_key host_blob secrets oauth; do printf '%s 0\n\n' "$f"; done
	} >"$dir/slurm.secrets"
	chmod 600 "$dir/slurm.secrets"
	policy $'memory: 2G'
	run --separate-stderr "$BUILD/aibox-task" --slurm-node "$dir"
	assert_failure 2
	[[ "$stderr" == *"$dir/config.yaml:2: memory: 4G is beyond the policy ($pol:1: memory: 2G)"* ]] || fail "$stderr"
	# the node's log of the task ends there, as for any task that fails to start
	run tail -1 "$dir/aibox.log"
	assert_success
	assert_output --regexp '^total [0-9.]+s exit 2$'
	# the secrets were taken from the folder before anything else
	assert_file_not_exists "$dir/slurm.secrets"
}
