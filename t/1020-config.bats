#!/usr/bin/env bats
# The project config: the schema, the defaults, and every refusal with
# file:line:column and the key.  Hostile files are first-class subjects.
load lib-common

FIX=$BATS_TEST_DIRNAME/fixtures/config

# cfg TEXT: write TEXT as config.yaml and parse it.
cfg() {
	printf '%s\n' "$1" >config.yaml
	run test-found config config.yaml
}

@test "config: the default config parses, allowing the two Claude hosts and nothing else, and lists the API key" {
	test-found config-default >config.yaml
	run test-found config config.yaml
	assert_success
	assert_line "allow api.anthropic.com"
	assert_line "allow platform.claude.com"
	assert_equal "$(grep -c '^allow ' <<<"$output")" 2
	assert_line "path /project"
	assert_line "skills default"
	# The login a first task needs (README.md, "Your first task"): the key, which
	# stays on the host.
	assert_line "env ANTHROPIC_API_KEY"
	assert_equal "$(grep -c '^env ' <<<"$output")" 1
	# Every key is explained in the default, commented out or set.
	for key in allow mounts skills agents commands path env git memory cpus disk budget slurm secrets; do
		grep -Eq "^#? ?$key:" config.yaml || fail "default config does not explain $key"
	done
}

@test "config: every key is read, hosts lowercased and ~ expanded" {
	run test-found config "$FIX/good.yaml"
	assert_success
	assert_line "allow example.com:8443"
	assert_line "allow *.githubusercontent.com"
	assert_line "allow [2001:db8::1]:443"
	assert_line "allow preset:github"
	assert_line "mount $HOME/datasets /data"
	assert_line "mount /srv/models /opt/models"
	assert_line "skills none"
	assert_line "agents default"
	assert_line "commands $HOME/my-commands"
	assert_line "path /work/app"
	assert_line "env ANTHROPIC_API_KEY"
	assert_line "env NPM_TOKEN"
	assert_line "git https://github.com/you/project.git host=github.com token=GITHUB_TOKEN auth=basic user=x-access-token fetch=1 push=aibox/*,feature/*-draft"
	assert_line "git https://git.example.org:8443/team/tools.git host=git.example.org token=FORGE_TOKEN auth=bearer user=- fetch=0 push="
	assert_line "memory 8192"
	assert_line "cpus 1"
	assert_line "disk 40960"
	assert_line "set 0x7ff"
}

@test "config: an empty file, or one of comments only, means the defaults" {
	: >config.yaml
	run test-found config config.yaml
	assert_success
	assert_line "memory 4096"
	assert_line "disk 20480"
	assert_line "set 0x000"
	cfg "# nothing here"
	assert_success
	cfg "allow:"
	assert_success
	refute_line --regexp '^allow '
}

@test "config: check: is one printable line of 1 to 4096 bytes, run in the VM" {
	cfg 'check: make test && ./run-e2e --quick'
	assert_success
	assert_line "check make test && ./run-e2e --quick"
	assert_line "set 0x8000"
	long=$(printf 'x%.0s' $(seq 4097))
	cfg "check: $long"
	assert_failure 1
	assert_output "config.yaml:1:8: a value is longer than 4096 bytes"
	cfg "check: ${long:1}"
	assert_success
	for bad in "check: ''" $'check: "make\\ttest"' $'check: "a\\nb"'; do
		cfg "$bad"
		assert_failure 1
		[[ "$output" == "config.yaml:1:8: check: must be "* ]] || fail "${bad:0:30}: $output"
	done
	cfg "check: [make, test]"
	assert_failure 1
	assert_output --partial "config.yaml:1:8: check: must be a string"
}

@test "config: check: {run, timeout} gives the check a time limit of 1s to 24h; the plain string keeps 10 minutes" {
	cfg 'check: make test'
	assert_success
	assert_line "check_timeout_ms 0"
	cfg 'check: {run: make test, timeout: 90s}'
	assert_success
	assert_line "check make test"
	assert_line "check_timeout_ms 90000"
	assert_line "set 0x8000"
	cfg $'check:\n  timeout: 24h\n  run: ./run-e2e --quick'
	assert_success
	assert_line "check ./run-e2e --quick"
	assert_line "check_timeout_ms 86400000"
	cfg 'check: {run: make test}'
	assert_success
	assert_line "check_timeout_ms 0"
	cfg 'check: {run: make test, timeout: 30}'
	assert_failure 1
	assert_output "config.yaml:1:34: check.timeout: '30' is not a duration: missing unit (use h, m, s or ms)"
	cfg 'check: {run: make test, timeout: 999ms}'
	assert_failure 1
	assert_output "config.yaml:1:34: check.timeout: '999ms' is not between 1s and 24h"
	cfg 'check: {run: make test, timeout: 24h1s}'
	assert_failure 1
	assert_output "config.yaml:1:34: check.timeout: '24h1s' is not between 1s and 24h"
	for bad in '-1m' '10 m' ''; do
		cfg "check: {run: make test, timeout: '$bad'}"
		assert_failure 1
		[[ "$output" == "config.yaml:1:"*": check.timeout: '$bad' is not a duration: "* ]] || fail "'$bad': $output"
	done
	cfg 'check: {run: make test, timeout: [10m]}'
	assert_failure 1
	assert_output "config.yaml:1:34: check.timeout: must be a duration, like 10m or 90s"
	cfg 'check: {run: make test, timeout: null}'
	assert_failure 1
	assert_output "config.yaml:1:34: check.timeout: must be a duration, like 10m or 90s"
	cfg 'check: {timeout: 10m}'
	assert_failure 1
	assert_output "config.yaml:1:8: check: has no run: (the command, like {run: make test, timeout: 10m})"
	cfg 'check: {run: make test, time: 10m}'
	assert_failure 1
	assert_output "config.yaml:1:25: check: unknown key 'time' (known keys: run, timeout)"
	cfg $'check: {run: "a\\nb", timeout: 10m}'
	assert_failure 1
	[[ "$output" == "config.yaml:1:14: check.run: must be one line without control characters"* ]] || fail "$output"
	cfg "check: {run: '', timeout: 10m}"
	assert_failure 1
	assert_output "config.yaml:1:14: check.run: must be a command of 1 to 4096 bytes, like 'make test'"
	cfg 'check: {run: [make, test]}'
	assert_failure 1
	assert_output --partial "config.yaml:1:14: check.run: must be a string"
}

@test "config: an unknown key is refused with file:line:column and the known keys" {
	cfg $'allow: []\nalow: [x]'
	assert_failure 1
	assert_output "config.yaml:2:1: unknown key 'alow' (known keys: allow, mounts, skills, agents, commands, path, env, git, memory, cpus, disk, budget, slurm, secrets, attempts, check)"
	cfg $'mounts:\n  - host: /a\n    vm: /b\n    rw: true'
	assert_failure 1
	assert_output "config.yaml:4:5: mounts[0]: unknown key 'rw' (known keys: host, vm, read-only)"
	cfg $'git:\n  - url: https://x.example/r.git\n    password: hunter2'
	assert_failure 1
	assert_output --partial "config.yaml:3:5: git[0]: unknown key 'password'"
}

@test "config: a duplicate key is refused, at the top and inside entries" {
	cfg $'cpus: 1\nallow: []\ncpus: 1'
	assert_failure 1
	assert_output "config.yaml:3:1: duplicate key 'cpus' (first at line 1)"
	cfg $'git:\n  - url: https://a.example/r\n    fetch: yes\n    fetch: no'
	assert_failure 1
	assert_output "config.yaml:4:5: duplicate key 'fetch' (first at line 3)"
}

@test "config: wrong types are refused with the key" {
	cfg 'allow: api.anthropic.com'
	assert_output "config.yaml:1:8: allow: must be a list, like [api.anthropic.com], not a string"
	cfg 'env: {A: 1}'
	assert_output --partial "config.yaml:1:6: env: must be a list"
	cfg 'cpus: two'
	assert_output "config.yaml:1:7: cpus: 'two' is not a whole number"
	cfg 'cpus: "2"'
	assert_output "config.yaml:1:7: cpus: must be a whole number, like 2"
	cfg 'path: [/a]'
	assert_output "config.yaml:1:7: path: must be a string, not a list"
	cfg 'mounts: {host: /a, vm: /b}'
	assert_output "config.yaml:1:9: mounts: must be a list, like [{host: ~/data, vm: /data}], not a mapping"
	cfg 'git: {url: https://a.example/r}'
	assert_output --partial "config.yaml:1:6: git: must be a list"
	cfg 'mounts: [/data]'
	assert_output "config.yaml:1:10: mounts[0]: must be a mapping with host and vm, not a string"
	cfg $'git:\n  - url: https://a.example/r\n    fetch: maybe'
	assert_output "config.yaml:3:12: git[0].fetch: must be yes or no (true or false)"
	cfg $'git:\n  - url: https://a.example/r\n    push: aibox/*'
	assert_output --partial "config.yaml:3:11: git[0].push: must be a list, like [aibox/*]"
	cfg 'memory:'
	assert_output "config.yaml:1:8: memory: needs a value (leave the key out for the default)"
	cfg '[allow]'
	assert_output "config.yaml:1:1: the config must be a mapping of keys, like 'allow:', not a list"
	cfg '? [a, b]'
	assert_output --partial "a key must be a plain string, not a list"
}

@test "config: values out of range are refused" {
	cfg 'memory: 256M'
	assert_output "config.yaml:1:9: memory: '256M' is out of range (512M to 1T)"
	cfg 'memory: 2T'
	assert_output "config.yaml:1:9: memory: '2T' is out of range (512M to 1T)"
	cfg 'memory: 4GB'
	assert_output "config.yaml:1:9: memory: '4GB' is not a size like 512M, 4G or 1T"
	cfg 'memory: 99999999999999999999999G'
	assert_output --partial "memory: '99999999999999999999999G' is out of range"
	cfg 'disk: 512M'
	assert_output "config.yaml:1:7: disk: '512M' is out of range (1G to 16T)"
	cfg 'cpus: 0'
	assert_output --regexp "^config.yaml:1:7: cpus: '0' is out of range \(1 to [0-9]+\)$"
	cfg 'cpus: -1'
	assert_output --partial "cpus: '-1' is out of range"
	cfg 'cpus: 100000'
	assert_output --regexp "^config.yaml:1:7: cpus: 100000 is more than the [0-9]+ CPUs of this machine$"
	cfg 'memory: 4G'
	assert_success
	assert_line "memory 4096"
	cfg 'disk: 1T'
	assert_success
	assert_line "disk 1048576"
}

@test "config: ANTHROPIC_BASE_URL next to ANTHROPIC_API_KEY is refused" {
	cfg $'env:\n  - ANTHROPIC_API_KEY\n  - ANTHROPIC_BASE_URL'
	assert_failure 1
	assert_output "config.yaml:3:5: env: ANTHROPIC_BASE_URL cannot be set next to ANTHROPIC_API_KEY: aibox points it at its own port, which adds the key on the host"
	cfg $'env:\n  - ANTHROPIC_BASE_URL\n  - FOO\n  - ANTHROPIC_API_KEY'
	assert_failure 1
	assert_output --partial "config.yaml:2:5: env: ANTHROPIC_BASE_URL cannot be set next to ANTHROPIC_API_KEY"
	# Alone, with a subscription token, it is the user's choice.
	cfg $'env: [CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_BASE_URL]'
	assert_success
}

@test "config: env lists names only, once each, and not the ones aibox sets" {
	cfg 'env: [ANTHROPIC_API_KEY=sk-ant-123]'
	assert_failure 1
	assert_output --partial "env[0]: 'ANTHROPIC_API_KEY=sk-ant-123' is not a variable name (list NAMES"
	cfg 'env: [FOO, FOO]'
	assert_output "config.yaml:1:12: env[1]: FOO is listed twice"
	cfg 'env: [https_proxy]'
	assert_output "config.yaml:1:7: env[0]: https_proxy is set by aibox in the VM"
	cfg 'env: [HOME]'
	assert_output "config.yaml:1:7: env[0]: HOME is set by aibox in the VM"
	# The value of a listed variable is not read (nor needed) when loading.
	cfg 'env: [AIBOX_TEST_SURELY_UNSET]'
	assert_success
	assert_line "env AIBOX_TEST_SURELY_UNSET"
}

@test "config: allow entries are hosts, ports, wildcards, addresses or presets" {
	cfg 'allow: [https://example.com]'
	assert_output "config.yaml:1:9: allow[0]: 'https://example.com': name a host, not a URL (like example.com or example.com:8443)"
	cfg 'allow: ["*"]'
	assert_output --partial "allow[0]: '*': allowing every host is not supported"
	cfg 'allow: [example.com:0]'
	assert_output --partial "the port must be a number from 1 to 65535"
	cfg 'allow: [example.com:70000]'
	assert_output --partial "the port must be a number from 1 to 65535"
	cfg 'allow: ["a.*.com"]'
	assert_output --partial "a wildcard is only allowed as '*.' at the start"
	cfg 'allow: [exa_mple.com]'
	assert_output --partial "'exa_mple.com': not a host name"
	cfg 'allow: [300.1.1.1]'
	assert_output --partial "'300.1.1.1': not an IPv4 address"
	cfg 'allow: ["2001:db8::1"]'
	assert_output --partial "write an IPv6 address in brackets"
	cfg 'allow: [preset:GitHub_x]'
	assert_output --partial "a preset name is 1 to 32 lowercase letters, digits and '-'"
	# the proxy's rule: 33 characters are one too many for both
	cfg "allow: [preset:$(printf 'a%.0s' $(seq 33))]"
	assert_output --partial "a preset name is 1 to 32 lowercase letters"
	cfg "allow: [preset:$(printf 'a%.0s' $(seq 32))]"
	refute_output --partial "a preset name"
	cfg 'allow: [localhost:5432, 127.0.0.1:8080, "[::1]"]'
	assert_success
}

@test "config: mounts and path are checked; every mount is read-only" {
	cfg $'mounts:\n  - host: /srv/data\n    vm: /data\n    read-only: false'
	assert_output "config.yaml:4:16: mounts[0].read-only: mounts are always read-only; to change files, have the task commit them"
	cfg $'mounts:\n  - host: data\n    vm: /data'
	assert_output "config.yaml:2:11: mounts[0].host: 'data' must be an absolute path or start with '~/'"
	cfg $'mounts:\n  - host: ~root/x\n    vm: /data'
	assert_output --partial "only '~/' is understood"
	cfg $'mounts:\n  - vm: /data'
	assert_output "config.yaml:2:5: mounts[0]: needs both host and vm"
	cfg $'mounts:\n  - host: /a\n    vm: /etc/ssh'
	assert_output "config.yaml:3:9: mounts[0].vm: '/etc/ssh' is a system folder of the VM"
	cfg $'mounts:\n  - host: /a\n    vm: /data/../etc'
	assert_output --partial "cannot hold '.' or '..'"
	cfg $'mounts:\n  - host: /a\n    vm: /project/sub'
	assert_output "config.yaml:3:9: mounts[0].vm: '/project/sub' overlaps the project's path /project (the default of path)"
	cfg $'path: /src\nmounts:\n  - host: /a\n    vm: /'
	assert_output --partial "mounts[0].vm: '/' cannot be /"
	cfg $'mounts:\n  - {host: /a, vm: /data}\n  - {host: /b, vm: /data/sub}'
	assert_output "config.yaml:3:20: mounts[1].vm: '/data/sub' overlaps mounts[0].vm '/data'"
	cfg 'path: /home'
	assert_output "config.yaml:1:7: path: '/home' is a folder the VM needs; use a folder inside it"
	cfg 'path: "/my project"'
	assert_output --partial "may hold only letters, digits"
	cfg 'skills: off'
	assert_output "config.yaml:1:9: skills: 'off': must be none, default, or a folder (absolute or ~/)"
}

@test "config: git entries name an https remote, a token variable and branches" {
	cfg $'git:\n  - url: http://github.com/a/b'
	assert_output "config.yaml:2:10: git[0].url: 'http://github.com/a/b' must be an https:// URL"
	cfg $'git:\n  - url: https://me:ghp_secret@github.com/a/b'
	assert_output --partial "cannot hold credentials"
	cfg $'git:\n  - url: https://github.com/a/b?x=1'
	assert_output --partial "may hold no spaces, query, fragment"
	cfg $'git:\n  - url: https://github.com'
	assert_output --partial "needs a repository path after the host"
	# What git's config could not hold plainly is refused here, not at the task's start.
	cfg $'git:\n  - url: "https://github.com/a;b"'
	assert_output "config.yaml:2:10: git[0].url: 'https://github.com/a;b' may hold no spaces, query, fragment or special characters in its path"
	cfg "git: [{url: https://github.com/$(head -c 2041 /dev/zero | tr '\0' a)}]"
	assert_output --partial "is longer than 2048 bytes"
	cfg $'git:\n  - token: GITHUB_TOKEN'
	assert_output "config.yaml:2:5: git[0]: needs a url"
	cfg $'git:\n  - url: https://github.com/a/b\n    token: ghp_0123456789abcdef-x'
	assert_output "config.yaml:3:12: git[0].token: names the host variable that holds the token (like GITHUB_TOKEN), not the token itself"
	cfg $'git:\n  - url: https://github.com/a/b\n    push: [refs/heads/x]'
	assert_output --partial "git[0].push[0]: 'refs/heads/x' names a branch without refs/heads/"
	cfg $'git:\n  - url: https://github.com/a/b\n    push: [ok, "bad name"]'
	assert_output --partial "git[0].push[1]: 'bad name' is not a branch name or pattern"
	cfg $'git:\n  - url: https://github.com/a/b\n    auth: digest'
	assert_output --partial "git[0].auth: must be basic or bearer"
	cfg $'git:\n  - url: https://GitHub.com/a/b\n  - url: https://github.com/a/b'
	assert_output "config.yaml:3:5: git[1]: the url is also in git[0]"
	cfg $'env: [GITHUB_TOKEN]\ngit:\n  - url: https://github.com/a/b\n    token: GITHUB_TOKEN'
	assert_output --partial "env: GITHUB_TOKEN is the token of git[0]: listed in env it would enter the VM"
}

@test "config: push patterns follow the broker's rule, '*' and '?' within one level" {
	run test-found push-allowed 'aibox/*' aibox/task
	assert_output "match"
	run test-found push-allowed 'aibox/*' aibox/a/b
	assert_failure
	assert_output "no match"
	run test-found push-allowed 'aibox/*' main
	assert_failure
	assert_output "no match"
	run test-found push-allowed 'feat-*-draft' feat-x-draft
	assert_output "match"
	run test-found push-allowed 'feat-*-draft' feat-x-draft2
	assert_failure
	assert_output "no match"
	run test-found push-allowed 'fix-?' fix-1
	assert_output "match"
	run test-found push-allowed main main
	assert_output "match"
	run test-found push-allowed main mainline
	assert_failure
	assert_output "no match"
}

@test "config: a push pattern is checked by the broker's rule" {
	for p in 'fix-?' 'aibox/*' 'a*/b'; do
		cfg "$(printf 'git:\n  - url: https://h/r\n    push: ["%s"]' "$p")"
		assert_success
	done
	for p in '-x' 'HEAD' 'a..b' 'x.lock' "$(printf 'a%.0s' $(seq 256))"; do
		cfg "$(printf 'git:\n  - url: https://h/r\n    push: ["%s"]' "$p")"
		assert_failure
		assert_output --partial "git[0].push[0]: '"
	done
}

@test "config: hostile: aliases (billion laughs) are refused at the first anchor" {
	run test-found config "$FIX/billion-laughs.yaml"
	assert_failure 1
	assert_output "$FIX/billion-laughs.yaml:2:4: anchors and aliases are not supported"
	run test-found config "$FIX/alias-only.yaml"
	assert_failure 1
	assert_output --regexp "alias-only.yaml:3:6: (anchors and aliases are not supported|invalid YAML.*)$"
}

@test "config: hostile: tags are refused" {
	run test-found config "$FIX/tags.yaml"
	assert_failure 1
	assert_output "$FIX/tags.yaml:1:8: YAML tags are not supported ('tag:yaml.org,2002:python/object:os.system')"
	cfg 'cpus: !!int 2'
	assert_output --partial "config.yaml:1:7: YAML tags are not supported"
	cfg $'%TAG ! tag:example.com,2000:\n---\nallow: []'
	assert_output --partial "YAML directives are not supported"
}

@test "config: hostile: NUL bytes, invalid UTF-8 and UTF-16 are refused with their place" {
	run test-found config "$FIX/nul.yaml"
	assert_output "$FIX/nul.yaml:3:7: the file holds a NUL byte"
	run test-found config "$FIX/latin1.yaml"
	assert_output "$FIX/latin1.yaml:3:8: the file is not UTF-8 text"
	run test-found config "$FIX/utf16le.yaml"
	assert_output "$FIX/utf16le.yaml:1:1: the file is not UTF-8 text"
	# An escaped NUL inside a quoted string.
	cfg 'allow: ["a\0b"]'
	assert_output "config.yaml:1:9: a value holds a NUL character"
	# Overlong encoding of '/' and a UTF-16 surrogate in UTF-8.
	printf 'path: /a\xc0\xafb\n' >config.yaml
	run test-found config config.yaml
	assert_output "config.yaml:1:9: the file is not UTF-8 text"
	printf 'path: /a\xed\xa0\x80\n' >config.yaml
	run test-found config config.yaml
	assert_output "config.yaml:1:9: the file is not UTF-8 text"
	# A UTF-8 BOM is fine.
	printf '\xef\xbb\xbfcpus: 1\n' >config.yaml
	run test-found config config.yaml
	assert_success
}

@test "config: hostile: huge files, deep nesting, many values and long strings are refused" {
	head -c 300000 /dev/zero | tr '\0' '#' >config.yaml
	run test-found config config.yaml
	assert_failure 1
	assert_output "config.yaml:1:1: the file is larger than 256 KiB"
	python3 -c "print('allow: ' + '[' * 5000 + ']' * 5000)" >config.yaml
	run test-found config config.yaml
	assert_output "config.yaml:1:15: nested deeper than 8 levels"
	python3 -c "print('allow:'); [print('  - h%d.example' % i) for i in range(300)]" >config.yaml
	run test-found config config.yaml
	assert_output "config.yaml:2:3: allow: more than 256 entries"
	python3 -c "print('allow: [' + ','.join(['a'] * 25000) + ']')" >config.yaml
	run test-found config config.yaml
	assert_output --regexp "^config.yaml:1:[0-9]+: more than 20000 values$"
	python3 -c "print('path: /' + 'a' * 5000)" >config.yaml
	run test-found config config.yaml
	assert_output "config.yaml:1:7: a value is longer than 4096 bytes"
}

@test "config: bad YAML and a second document are refused with their place" {
	cfg $'allow: [a, b\ncpus: 1'
	assert_failure 1
	assert_output --regexp "^config.yaml:2:[0-9]+: invalid YAML: "
	cfg $'allow:\n  - a\n - b'
	assert_output --regexp "^config.yaml:3:[0-9]+: invalid YAML: "
	cfg $'cpus: 1\n---\ncpus: 2'
	assert_output "config.yaml:2:1: only one YAML document is allowed"
	cfg $'\tcpus: 1'
	assert_output --regexp "^config.yaml:1:[0-9]+: invalid YAML: .*"
}

@test "config: a config that is not a regular file is refused" {
	mkdir dir.yaml
	run test-found config dir.yaml
	assert_failure 1
	assert_output "cannot read 'dir.yaml': not a regular file"
	run test-found config missing.yaml
	assert_output "cannot open 'missing.yaml': No such file or directory"
}

@test "config: memory, cpus and disk values, one rule each (common/num)" {
	n=$(nproc)
	while read -r what value want; do
		run test-common "$what" "$value"
		assert_output "$want"
	done <<EOF2
memory 512M 512
memory 4G 4096
memory 4GiB 4096
memory 1T 1048576
memory 1TiB 1048576
memory 4096 error EINVAL: '4096' is not a size like 512M, 4G or 1T
memory 4g error EINVAL: '4g' is not a size like 512M, 4G or 1T
memory 4GB error EINVAL: '4GB' is not a size like 512M, 4G or 1T
memory 1.5G error EINVAL: '1.5G' is not a size like 512M, 4G or 1T
memory -4G error EINVAL: '-4G' is not a size like 512M, 4G or 1T
memory 511M error ERANGE: '511M' is out of range (512M to 1T)
memory 1025G error ERANGE: '1025G' is out of range (512M to 1T)
memory 2T error ERANGE: '2T' is out of range (512M to 1T)
memory 99999999999999999999G error ERANGE: '99999999999999999999G' is out of range (512M to 1T)
cpus 1 1
cpus $n $n
cpus $((n + 1)) error ERANGE: $((n + 1)) is more than the $n CPUs of this machine
cpus 0 error ERANGE: '0' is out of range (1 to $n)
cpus -1 error ERANGE: '-1' is out of range (1 to $n)
cpus +1 error EINVAL: '+1' is not a whole number
cpus 2x error EINVAL: '2x' is not a whole number
cpus 99999999999999999999 error ERANGE: '99999999999999999999' is out of range (1 to $n)
EOF2
	run test-common size 1024 16777216 512M
	assert_output "error ERANGE: '512M' is out of range (1G to 16T)"
	run test-common size 1024 16777216 16T
	assert_output "16777216"
	run test-common memory ""
	assert_output "error EINVAL: '' is not a size like 512M, 4G or 1T"
}

@test "config: slurm: partition, account, options and shared are read and checked" {
	cfg 'slurm:
  partition: agents
  account: my.team-1
  options: [--qos=low, -x]
  shared: [/shared/home, /scratch]'
	assert_success
	assert_line "slurm partition=agents account=my.team-1 options=--qos=low,-x shared=/shared/home,/scratch"
	assert_line "set 0x1000"
	cfg 'slurm:'
	assert_success
	assert_line "slurm partition=- account=- options= shared="
	cfg 'memory: 4G'
	refute_line --regexp '^slurm '
	cfg 'slurm: agents'
	assert_failure
	assert_output "config.yaml:1:8: slurm: must be a mapping, like {partition: agents}, not a string"
	cfg 'slurm: {queue: x}'
	assert_failure
	assert_output --partial "slurm: unknown key 'queue' (known keys: partition, account, options, shared)"
	cfg 'slurm: {partition: "a b"}'
	assert_output --partial "slurm.partition: 'a b' is not a Slurm name (letters, digits, ._-)"
	cfg 'slurm: {account: ""}'
	assert_failure
	cfg 'slurm: {options: [qos=low]}'
	assert_output --partial "slurm.options[0]: 'qos=low' is not an option (srun and sbatch options start with -)"
	cfg 'slurm: {options: --qos=low}'
	assert_output --partial "slurm.options: must be a list, like [--qos=low]"
	cfg 'slurm: {shared: [shared/home]}'
	assert_output --partial "slurm.shared[0]: 'shared/home' is not an absolute path"
}

@test "config: --memory and --cpus of aibox task and aibox run refuse what the config refuses, in its words" {
	make_repo repo
	cd repo
	export AIBOX_IMAGES=$T/no-images
	aibox projects path >/dev/null
	cfg=$AIBOX_HOME/projects/repo/config.yaml
	n=$(nproc)
	for kv in "memory 4096" "memory 4g" "memory 2T" "memory 256M" "cpus 0" "cpus $((n + 1))" "cpus two"; do
		set -- $kv
		printf '%s: %s\n' "$1" "$2" >"$cfg"
		run aibox task x
		assert_failure 2
		[[ "$output" =~ ^aibox-task:\ $cfg:1:[0-9]+:\ $1:\ (.*)$ ]] || fail "config: $output"
		why=${BASH_REMATCH[1]}
		: >"$cfg"
		run aibox task --$1 "$2" x
		assert_failure 2
		assert_output "aibox-task: --$1: $why"
		run aibox run --$1 "$2"
		assert_failure 125
		assert_output "aibox-run: --$1: $why"
	done
	# and take what it takes (both then stop at the missing image)
	run aibox task --memory 1T --cpus "$n" x
	assert_failure 2
	refute_output --partial "--memory"
	refute_output --partial "--cpus"
	run aibox run --memory 1T --cpus "$n" -- true
	assert_failure 125
	refute_output --partial "--memory"
	refute_output --partial "--cpus"
}

@test "config: budget caps the spend per task and per day, in USD" {
	cfg $'budget:\n  task: 5.00\n  day: 50'
	assert_success
	assert_line "budget task=5000000000 day=50000000000"
	assert_line "set 0x800"
	cfg $'budget:\n  task: 0.25'
	assert_line "budget task=250000000 day=0"
	cfg $'budget:\n  task: 0'
	assert_failure
	assert_output "config.yaml:2:9: budget.task: must be an amount of USD above 0 and at most 1000000, with at most 6 decimals, like 5.00"
	cfg $'budget:\n  day: -5'
	assert_output --partial "budget.day: must be an amount of USD above 0"
	cfg $'budget:\n  day: "5"'
	assert_output --partial "budget.day: must be an amount"
	cfg $'budget:\n  day: 1000001'
	assert_output --partial "budget.day: must be an amount"
	cfg $'budget:\n  day: 1.0000001'
	assert_output --partial "budget.day: must be an amount"
	cfg $'budget:\n  week: 5'
	assert_output "config.yaml:2:3: budget: unknown key 'week' (known keys: task, day)"
	cfg 'budget: 5'
	assert_output "config.yaml:1:9: budget: must be a mapping like {task: 5.00, day: 50.00}, not a string"
}

@test "config: allow's map form is a rule: its host is allowed, its methods and paths read" {
	cfg 'allow:
  - example.com
  - {host: API.GitHub.com, methods: [GET, POST], paths: ["/repos/you/project/*", /user]}
  - host: uploads.github.com'
	assert_success
	assert_line "allow example.com"
	assert_line "allow api.github.com"
	assert_line "allow uploads.github.com"
	assert_line "rule api.github.com line=3 methods=GET,POST paths=/repos/you/project/*,/user"
	assert_line "rule uploads.github.com line=4 methods= paths="
}

@test "config: a bad allow rule is refused with its place" {
	cfg 'allow: [{methods: [GET]}]'
	assert_output "config.yaml:1:9: allow[0]: needs a host, like {host: api.github.com, methods: [GET]}"
	cfg 'allow: [{host: "*", methods: [GET]}]'
	assert_output "config.yaml:1:16: allow[0].host: '*': allowing every host is not supported"
	cfg 'allow: [{host: preset:github}]'
	assert_output "config.yaml:1:16: allow[0].host: a rule names one host, not a preset"
	cfg 'allow: [{host: "exa mple.com"}]'
	assert_output "config.yaml:1:16: allow[0].host: 'exa mple.com': not a host name"
	cfg 'allow: [{host: a.com, methods: [get]}]'
	assert_output "config.yaml:1:33: allow[0].methods: 'get' is not an HTTP method in capitals, like GET"
	cfg 'allow: [{host: a.com, methods: []}]'
	assert_output "config.yaml:1:32: allow[0].methods: must list at least one method (leave the key out for any)"
	cfg 'allow: [{host: a.com, paths: [repos]}]'
	assert_output "config.yaml:1:31: allow[0].paths: 'repos' must start with '/'"
	for p in /a/../b /a/./b //a /a/.. /a%2fb '/a?x' '/a#x' '/a b'; do
		cfg "allow: [{host: a.com, paths: [\"$p\"]}]"
		assert_failure
		assert_output --partial "allow[0].paths: '$p'"
	done
	cfg 'allow: [{host: a.com, verbs: [GET]}]'
	assert_output "config.yaml:1:23: allow[0]: unknown key 'verbs' (known keys: host, methods, paths, cache, sumdb-key, prefix)"
	cfg 'allow:
  - {host: a.com, methods: [GET]}
  - {host: A.com, methods: [POST]}'
	assert_output "config.yaml:3:12: allow[1].host: a.com has a rule already (line 2)"
}

@test "config: a second rule for a host spelled with its port 443 (or in another case) is refused as one for the same host" {
	for second in '"a.com:443"' '"A.COM:443"' ; do
		cfg "allow:
  - {host: a.com, methods: [GET]}
  - {host: $second}"
		assert_failure
		assert_output "config.yaml:3:12: allow[1].host: a.com:443 has a rule already (line 2)"
	done
	cfg 'allow:
  - {host: "[2001:db8::1]", methods: [GET]}
  - {host: "[2001:DB8:0::1]:443"}'
	assert_failure
	assert_output --partial "allow[1].host: [2001:db8:0::1]:443 has a rule already (line 2)"
	# another port, a wildcard over it: other hosts
	cfg 'allow:
  - {host: a.com, methods: [GET]}
  - {host: "a.com:8443"}
  - {host: "*.a.com"}'
	assert_success
}

@test "config: a rule of the config's own for a preset's host spelled with its port 443 wins over the preset's cache mark" {
	cfg 'allow: [preset:npm, {host: "registry.npmjs.org:443", methods: [GET]}]'
	assert_success
	run test-found config-host config.yaml
	assert_success
	assert_line "rule registry.npmjs.org:443 line=1 methods=GET paths="
	run grep -c '^rule ' <<<"$output"
	assert_output 1
}

@test "config: cache: marks a host for the dependency cache, npm, pypi, crates, go or debian; another kind is refused with its place" {
	cfg 'allow:
  - {host: registry.npmjs.org, cache: npm}
  - {host: files.pythonhosted.org, cache: pypi, methods: [GET]}
  - {host: static.crates.io, cache: crates}
  - {host: deb.example.org, cache: debian}'
	assert_success
	assert_line "rule deb.example.org line=5 methods= paths= cache=debian"
	assert_line "allow registry.npmjs.org"
	assert_line "rule registry.npmjs.org line=2 methods= paths= cache=npm"
	assert_line "rule files.pythonhosted.org line=3 methods=GET paths= cache=pypi"
	assert_line "rule static.crates.io line=4 methods= paths= cache=crates"
	cfg 'allow: [{host: a.com, cache: maven}]'
	assert_failure
	assert_output "config.yaml:1:30: allow[0].cache: 'maven' is not a cache kind: npm, pypi, crates, go or debian"
	cfg 'allow: [{host: a.com, cache: [npm]}]'
	assert_failure
	assert_output --partial "config.yaml:1:30: allow[0].cache: "
	cfg 'allow: [{host: preset:npm, cache: npm}]'
	assert_failure
	assert_output "config.yaml:1:16: allow[0].host: a rule names one host, not a preset"
}

@test "config: cache: go takes a sumdb-key, a Go checksum database's verifier key, checked; preset:go marks proxy.golang.org and sum.golang.org" {
	local k='sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8'
	cfg "allow: [{host: sum.example.com, cache: go, sumdb-key: '$k'}, preset:go]"
	assert_success
	run test-found config-host config.yaml
	assert_success
	assert_line "rule sum.example.com line=1 methods= paths= cache=go sumdb-key=$k"
	assert_line "rule proxy.golang.org line=0 methods= paths= cache=go"
	assert_line "rule sum.golang.org line=0 methods= paths= cache=go"
	# One digit of the hash, or of the key, changed.
	cfg "allow: [{host: a.com, cache: go, sumdb-key: '${k/033de0ae/033de0af}'}]"
	assert_failure
	assert_output "config.yaml:1:45: allow[0].sumdb-key: 'sum.golang.org+033de0af+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8O': a verifier key whose hash does not match it, like $k"
	cfg "allow: [{host: a.com, cache: go, sumdb-key: '${k/Ux18/Ux19}'}]"
	assert_failure
	assert_output --partial "a verifier key whose hash does not match it"
	cfg "allow: [{host: a.com, cache: go, sumdb-key: 'sum.golang.org+033de0ae'}]"
	assert_failure
	assert_output --partial "'sum.golang.org+033de0ae': not a verifier key NAME+HASH+KEY"
	cfg "allow: [{host: a.com, sumdb-key: '$k'}]"
	assert_failure
	assert_output "config.yaml:1:16: allow[0].host: a sumdb-key is for a rule with cache: go"
}

@test "config: cache: go takes a prefix, the path its GOPROXY is served under, checked; a bad one is refused with its place" {
	cfg 'allow: [{host: art.example.com, cache: go, prefix: /artifactory/api/go/go-remote}]'
	assert_success
	run test-found config-host config.yaml
	assert_success
	assert_line "rule art.example.com line=1 methods= paths= cache=go prefix=/artifactory/api/go/go-remote"
	local p
	for p in artifactory /a/ / // /a//b /a/./b /a/.. /a%2fb '/a?x' '/a b' /a/b#c '/é'; do
		cfg "allow: [{host: a.com, cache: go, prefix: '$p'}]"
		assert_failure
		assert_output --regexp '^config\.yaml:1:4[0-9]: allow\[0\]\.prefix: '
		assert_output --partial "allow[0].prefix: '$p': "
		assert_output --partial ", like /artifactory/api/go/go-remote"
	done
	cfg "allow: [{host: a.com, cache: go, prefix: /a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q}]"
	assert_failure
	assert_output --partial "more than 16 segments"
	cfg "allow: [{host: a.com, cache: go, prefix: /$(printf 'a%.0s' $(seq 256))}]"
	assert_failure
	assert_output --partial "longer than 256 bytes"
	cfg "allow: [{host: a.com, cache: go, prefix: /$(printf 'a%.0s' $(seq 255))}]"
	assert_success
	cfg 'allow: [{host: a.com, cache: npm, prefix: /a}]'
	assert_failure
	assert_output "config.yaml:1:16: allow[0].host: a prefix is for a rule with cache: go"
	cfg 'allow: [{host: a.com, cache: go, prefix: [/a]}]'
	assert_failure
	assert_output --partial "allow[0].prefix: "
}

@test "config: the npm, pypi, crates and debian presets mark their registries for the cache; a rule of the config's own wins; a bad mark is refused" {
	cfg 'allow: [preset:npm, preset:pypi, preset:crates, preset:debian, preset:github, {host: files.pythonhosted.org, methods: [GET]}]'
	assert_success
	refute_line --partial "rule registry.npmjs.org"
	run test-found config-host config.yaml
	assert_success
	assert_line "rule registry.npmjs.org line=0 methods= paths= cache=npm"
	assert_line "rule pypi.org line=0 methods= paths= cache=pypi"
	assert_line "rule index.crates.io line=0 methods= paths= cache=crates"
	assert_line "rule static.crates.io line=0 methods= paths= cache=crates"
	# Debian's mirrors over HTTPS only: plain HTTP is forwarded, not intercepted (docs/cache.md).
	assert_line "rule deb.debian.org line=0 methods= paths= cache=debian"
	assert_line "rule security.debian.org line=0 methods= paths= cache=debian"
	# The config's own rule for a preset's host is kept as written: no cache.
	assert_line "rule files.pythonhosted.org line=1 methods=GET paths="
	run grep -c '^rule ' <<<"$output"
	assert_output 7
	# The proxy reads a marked preset as its hosts (what stops it is the next entry).
	run aibox-proxy --allow preset:pypi --allow 'a b'
	assert_failure 2
	assert_output "aibox-proxy: invalid entry 'a b': invalid host"
	mkdir presets
	printf 'a.example cache:maven
' >presets/bad
	printf 'a.example cache:npm extra
' >presets/worse
	cfg 'allow: [preset:bad]'
	assert_success
	AIBOX_DATA_DIR=$PWD run test-found config-host config.yaml
	assert_failure
	assert_output "allow: preset:bad marks a.example with cache:maven, not a kind aibox caches"
	cfg 'allow: [preset:worse]'
	AIBOX_DATA_DIR=$PWD run test-found config-host config.yaml
	assert_failure
	assert_output "allow: preset:worse:1: words after the entry that are not one cache:KIND"
}

@test "config: secrets name a variable and the allowed hosts its value may go to" {
	cfg 'allow: [registry.npmjs.org, "*.example.com", "10.0.0.1:8443", api.github.com]
secrets:
  - {env: NPM_TOKEN, hosts: [Registry.NPMjs.org]}
  - env: GH_TOKEN
    hosts: [api.github.com, x.example.com, "*.example.com", "10.0.0.1:8443"]'
	assert_success
	assert_line "secret NPM_TOKEN line=3 hosts=registry.npmjs.org"
	assert_line "secret GH_TOKEN line=4 hosts=api.github.com,x.example.com,*.example.com,10.0.0.1:8443"
}

@test "config: hostile: every bad secret is refused with its place" {
	cfg 'allow: [a.com]
secrets: [{env: T}]'
	assert_output "config.yaml:2:11: secrets[0]: needs hosts: the hosts the value may be sent to"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: []}]'
	assert_output "config.yaml:2:27: secrets[0].hosts: must name at least one host the value may go to"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: ["*"]}]'
	assert_output "config.yaml:2:28: secrets[0].hosts: '*': allowing every host is not supported"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: ["*:443"]}]'
	assert_output --partial "secrets[0].hosts: '*:443': allowing every host is not supported"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: ["https://a.com/"]}]'
	assert_output --partial "secrets[0].hosts: 'https://a.com/': name a host, not a URL"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: ["a_b.com"]}]'
	assert_output --partial "secrets[0].hosts: 'a_b.com': not a host name"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: [preset:github]}]'
	assert_output --partial "secrets[0].hosts: 'preset:github': name a host, not a preset"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: [b.com]}]'
	assert_output "config.yaml:2:28: secrets[0].hosts: 'b.com': is not allowed: add it to allow too"
	# another port, a wildcard that only a wider wildcard allows, the address of an allowed name
	for h in a.com:8443 '*.a.com' 1.2.3.4; do
		cfg "allow: [a.com]
secrets: [{env: T, hosts: [\"$h\"]}]"
		assert_output --partial "secrets[0].hosts: '$h': is not allowed: add it to allow too"
	done
	cfg 'allow: [a.com]
env: [T]
secrets: [{env: T, hosts: [a.com]}]'
	assert_output "config.yaml:3:17: secrets[0].env: T is also in env, which would give the VM its value"
	cfg 'allow: [a.com]
git: [{url: "https://a.com/o/r.git", token: T}]
secrets: [{env: T, hosts: [a.com]}]'
	assert_output "config.yaml:3:17: secrets[0].env: T is the token of git[0], which the broker keeps"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: [a.com]}, {env: T, hosts: [a.com]}]'
	assert_output --partial "secrets[1].env: T is listed twice"
	for n in ANTHROPIC_API_KEY ANTHROPIC_BASE_URL; do
		cfg "allow: [a.com]
secrets: [{env: $n, hosts: [a.com]}]"
		assert_output --partial "secrets[0].env: $n is the API's"
	done
	for n in HOME https_proxy NO_PROXY; do
		cfg "allow: [a.com]
secrets: [{env: $n, hosts: [a.com]}]"
		assert_output --partial "secrets[0].env: $n is set by aibox in the VM"
	done
	cfg 'allow: [a.com]
secrets: [{env: "1T", hosts: [a.com]}]'
	assert_output --partial "secrets[0].env: '1T' is not a variable name"
	cfg 'allow: [a.com]
secrets: [{env: T, hosts: [a.com], paths: [/]}]'
	assert_output --partial "secrets[0]: unknown key 'paths' (known keys: env, hosts)"
	cfg 'secrets: [T]'
	assert_output --partial "secrets[0]: must be a mapping like {env: NPM_TOKEN, hosts: [registry.npmjs.org]}, not a string"
}
