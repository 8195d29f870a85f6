#!/usr/bin/env bats
# common/task_settings: settings.json as docs/internals.md fixes it, and the
# secrets JSON for the task command's stdin.
load lib-common

@test "settings: settings.json has every field of docs/internals.md" {
	run test-task settings --model sonnet --budget 2.5 --env GITHUB_TOKEN=x \
		--mount skills:/home/claude/.claude/skills --system-prompt "$(printf 'a\nb')" \
		--git "Ada L:ada@example.com" --remote https://github.com/o/r.git \
		--remote https://git.example.org:8443/team/tools
	assert_success
	printf '%s\n' "$output" >settings.json
	run python3 - <<-'PY'
		import json
		s = json.load(open("settings.json"))
		assert list(s) == ["version", "id", "mode", "model", "timeout_s", "max_budget_usd", "git",
		                   "start_commit", "branch", "env_names", "placeholders", "api", "proxy",
		                   "path", "mounts",
		                   "system_prompt", "git_remotes", "resume_session", "check",
		                   "check_timeout_ms"], list(s)
		assert s["version"] == 1 and s["id"] == "259e07" and s["mode"] == "task"
		assert s["model"] == "sonnet" and s["timeout_s"] == 3600 and s["max_budget_usd"] == 2.5
		assert s["git"] == {"name": "Ada L", "email": "ada@example.com"}
		assert s["start_commit"] == "0123456789abcdef0123456789abcdef01234567"
		assert s["branch"] == "aibox/task" and s["env_names"] == ["GITHUB_TOKEN"]
		assert s["placeholders"] == {}
		assert s["api"] == "forward" and s["proxy"] == "http://10.0.2.100:3128"
		assert s["path"] == "/project"
		assert s["mounts"] == [{"tag": "skills", "path": "/home/claude/.claude/skills"}]
		assert s["system_prompt"] == "a\nb" and s["resume_session"] is None and s["check"] is None
		assert s["check_timeout_ms"] is None
		assert s["git_remotes"] == ["https://github.com/o/r.git",
		                            "https://git.example.org:8443/team/tools"]
		print("ok")
	PY
	assert_output ok
}

@test "settings: a git remote the init could not write into git's config is refused" {
	run test-task settings --remote http://github.com/o/r
	assert_failure
	assert_output "error: the git remote 'http://github.com/o/r' must be an https:// URL"
	for bad in 'https://h/a b' 'https://h/a"b' 'https://h/a\b' \
		'https://h/a#b' 'https://h/a;b' "https://h/$(printf 'a\tb')"; do
		run test-task settings --remote "$bad"
		assert_failure
		assert_output "error: the git remote '$bad' may hold no spaces, query, fragment or special characters in its path"
	done
	run test-task settings --remote https://
	assert_failure
	assert_output "error: the git remote 'https://' needs a repository path after the host"
	# The config's grammar, all of it: the host too, and the length.
	run test-task settings --remote 'https://h_x/a'
	assert_failure
	assert_output "error: the git remote 'https://h_x/a' has a bad host: not a host name"
	run test-task settings --remote "https://h/$(head -c 2039 /dev/zero | tr '\0' a)"
	assert_failure
	assert_output --partial "is longer than 2048 bytes"
	run test-task settings --remote "https://h/$(head -c 2038 /dev/zero | tr '\0' a)"
	assert_success
	run test-task settings
	printf '%s\n' "$output" >settings.json
	run python3 -c 'import json; print(json.load(open("settings.json"))["git_remotes"])'
	assert_output "[]"
}

@test "settings: no model and no budget are null" {
	run test-task settings --api oauth
	assert_success
	printf '%s\n' "$output" >settings.json
	run python3 -c 'import json; s = json.load(open("settings.json")); print(s["model"], s["max_budget_usd"], s["api"], s["env_names"], s["mounts"])'
	assert_output "None None oauth [] []"
}

@test "settings: a secret value never appears in settings.json, only on stdin" {
	secret='sk-ant-api03-SECRET-VALUE-4f9a'
	run test-task settings --env ANTHROPIC_API_KEY="$secret" --env CLAUDE_CODE_OAUTH_TOKEN="o\"a\\uth
token" --secrets secrets.json
	assert_success
	printf '%s\n' "$output" >settings.json
	run grep -c -e SECRET-VALUE -e 'a\\uth' settings.json
	assert_output 0
	grep -q ANTHROPIC_API_KEY settings.json
	run python3 -c 'import json; print(json.load(open("secrets.json")))'
	assert_output "{'env': {'ANTHROPIC_API_KEY': 'sk-ant-api03-SECRET-VALUE-4f9a', 'CLAUDE_CODE_OAUTH_TOKEN': 'o\"a\\\\uth\\ntoken'}}"
}

@test "settings: malformed input is refused with a reason" {
	run test-task settings --id 259E07
	assert_output "error: the task id is not 6 lowercase hex digits"
	run test-task settings --commit abc
	assert_output "error: the start commit is not a full commit id"
	run test-task settings --timeout 0
	assert_output "error: the timeout is not 1 to 604800 seconds"
	run test-task settings --budget -1
	assert_output "error: the budget is not a positive amount up to 1e+06"
	run test-task settings --env 1BAD=x
	assert_output "error: '1BAD' is not a valid variable name"
	run test-task settings --env "A B=x"
	assert_output "error: 'A B' is not a valid variable name"
	run test-task settings --mount skills:relative
	assert_output "error: the mount path 'relative' is not a clean absolute path"
	run test-task settings --mount "a,b:/x"
	assert_output "error: the mount tag 'a,b' is not valid"
	run test-task settings --model "$(printf 'son\xffnet')"
	assert_output "error: the model name is not valid UTF-8"
	run test-task settings --api bogus
	assert_output "error: unknown API mode"
	run test-task settings --env A=1 --env A=2 --secrets s.json
	assert_output "error: A is given twice"
	run test-task settings --env A="$(printf '\xc0\xaf')" --secrets s.json
	assert_output "error: the value of A is not valid UTF-8"
	assert_file_not_exists s.json
}

@test "settings: what the writer writes in task mode the parser reads back the same" {
	run test-task settings --model sonnet --budget 2.5 --env GITHUB_TOKEN=x \
		--mount aibox.m0:/data --system-prompt "$(printf 'a\nb')" --path /work/p \
		--git "Ada L:ada@example.com" --remote https://github.com/o/r.git \
		--resume 0123abcd-0123-4567-89ab-0123456789ab --api oauth
	assert_success
	printf '%s\n' "$output" >settings.json
	run test-task settings-parse settings.json
	assert_success
	printf '%s\n' "$output" >back.json
	cmp settings.json back.json
}

@test "settings: a run's settings.json has the fields of docs/internals.md and reads back the same" {
	run test-task settings --run --command bash --command -c --command 'echo hi' \
		--uid 4242 --gid 77 --env FOO=1 --mount aibox.m0:/data --path /src/p \
		--remote https://github.com/o/r.git
	assert_success
	printf '%s\n' "$output" >settings.json
	run python3 - <<-'PY'
		import json
		s = json.load(open("settings.json"))
		assert list(s) == ["version", "id", "mode", "command", "path", "mounts", "uid", "gid",
		                   "env_names", "placeholders", "api", "proxy", "git_remotes"], list(s)
		assert s["mode"] == "run" and s["command"] == ["bash", "-c", "echo hi"]
		assert s["uid"] == 4242 and s["gid"] == 77 and s["path"] == "/src/p"
		assert s["mounts"] == [{"tag": "aibox.m0", "path": "/data"}]
		assert s["env_names"] == ["FOO"] and s["api"] == "forward"
		assert s["proxy"] == "http://10.0.2.100:3128"
		assert s["git_remotes"] == ["https://github.com/o/r.git"]
		print("ok")
	PY
	assert_output ok
	run test-task settings-parse settings.json
	assert_success
	printf '%s\n' "$output" >back.json
	cmp settings.json back.json
	run test-task settings --run
	printf '%s\n' "$output" >settings.json
	run python3 -c 'import json; s = json.load(open("settings.json")); print(s["command"], s["uid"], s["path"])'
	assert_output "None 0 /project"
}

@test "settings: the host refuses what the init would refuse, before writing" {
	run test-task settings --model -x
	assert_output "error: the model name '-x' is not valid"
	run test-task settings --timeout 604801
	assert_output "error: the timeout is not 1 to 604800 seconds"
	run test-task settings --budget 2000000
	assert_output "error: the budget is not a positive amount up to 1e+06"
	run test-task settings --branch main
	assert_output "error: the branch is not 'aibox/task'"
	run test-task settings --proxy socks5://x
	assert_output "error: the proxy is not an http:// URL"
	run test-task settings --path /a/../b
	assert_output "error: the project path '/a/../b' is not a clean absolute path"
	run test-task settings --mount aibox.task:/x
	assert_output "error: the mount tag 'aibox.task' is not valid"
	run test-task settings --git "$(printf 'a\tb'):a@b"
	assert_output "error: the git user name has a control character"
	run test-task settings --system-prompt "$(head -c 120001 /dev/zero | tr '\0' a)"
	assert_output "error: the system prompt is over 120000 bytes"
	run test-task settings --run --uid 4294967295
	assert_output "error: the user's ids are not 0 to 4294967294"
}

@test "settings: the placeholders are written by name and read back the same, in both modes" {
	local a=aibox-secret-00112233445566778899aabbccddeeff b=aibox-secret-ffeeddccbbaa99887766554433221100
	for mode in "" --run; do
		run test-task settings $mode --env FOO=1 --placeholder NPM_TOKEN=$a \
			--placeholder CLAUDE_CODE_OAUTH_TOKEN=$b
		assert_success
		printf '%s\n' "$output" >settings.json
		run python3 -c 'import json; s = json.load(open("settings.json")); print(s["env_names"], s["placeholders"])'
		assert_output "['FOO'] {'NPM_TOKEN': '$a', 'CLAUDE_CODE_OAUTH_TOKEN': '$b'}"
		run test-task settings-parse settings.json
		assert_success
		assert_output "$(cat settings.json)"
	done
}

@test "settings: a placeholder that is not one of aibox's, or a name given twice, is refused both ways" {
	local ok=aibox-secret-00112233445566778899aabbccddeeff
	test-task settings >good.json
	while IFS='|' read -r change want; do
		run test-task settings $change
		assert_failure
		assert_output "error: $want"
		python3 - "$change" <<-'PY'
			import json, sys
			s = json.load(open("good.json"))
			args = sys.argv[1].split()
			s["env_names"] = [a.split("=")[0] for k, a in zip(args, args[1:]) if k == "--env"]
			s["placeholders"] = {}
			for k, a in zip(args, args[1:]):
			    if k == "--placeholder":
			        n, v = a.split("=", 1)
			        s["placeholders"][n] = v
			json.dump(s, open("bad.json", "w"))
		PY
		run test-task settings-parse bad.json
		assert_failure
		assert_output "error: settings.json: $want"
	done <<-EOF
		--placeholder A=sk-live-real-value|the placeholder of A is not one of aibox's
		--placeholder A=aibox-secret-00112233445566778899AABBCCDDEEFF|the placeholder of A is not one of aibox's
		--placeholder A=aibox-secret-00112233445566778899aabbccddeef|the placeholder of A is not one of aibox's
		--placeholder A=${ok}0|the placeholder of A is not one of aibox's
		--placeholder A=aibox-secret-00112233445566778899aabbccddeefg|the placeholder of A is not one of aibox's
		--placeholder A=|the placeholder of A is not one of aibox's
		--placeholder 1A=$ok|'1A' is not a valid variable name
		--env A=1 --placeholder A=$ok|A is named twice
	EOF
	# the same name twice in the file is JSON's duplicate key
	printf '%s' "$(cat good.json)" | python3 -c 'import sys
t = sys.stdin.read().replace("\"placeholders\": {}", "\"placeholders\": {\"A\": \"%s\", \"A\": \"%s\"}" % (sys.argv[1], sys.argv[1]))
open("bad.json", "w").write(t)' "$ok"
	run test-task settings-parse bad.json
	assert_output --partial "error: settings.json: duplicate object key"
	# a NUL in a value, not a string, not an object, over the cap
	local many
	many=$(seq 1 257 | sed "s/.*/\"V&\": \"$ok\"/" | paste -sd,)
	while IFS='|' read -r change want; do
		python3 -c 'import json, sys
s = json.load(open("good.json"))
s.update(json.loads("{" + sys.argv[1] + "}"))
json.dump(s, open("bad.json", "w"))' "$change"
		run test-task settings-parse bad.json
		assert_failure
		assert_output "error: settings.json: $want"
	done <<-EOF
		"placeholders": {"A": "$ok\\u0000"}|\\u0000 is not allowed without JSON_ALLOW_NUL
		"placeholders": {"A": 7}|placeholder 0 is not a string
		"placeholders": ["A"]|'placeholders' is not an object
		"placeholders": {$many}|over 256 placeholders
	EOF
}

@test "settings: the parser refuses a malformed settings.json with a reason" {
	test-task settings >good.json
	while IFS='|' read -r change want; do
		python3 - "$change" <<-'PY'
			import json, sys
			s = json.load(open("good.json"))
			s.update(json.loads("{" + sys.argv[1] + "}"))
			json.dump(s, open("bad.json", "w"))
		PY
		run test-task settings-parse bad.json
		assert_failure
		assert_output "error: settings.json: $want"
	done <<-'EOF'
		"version": 2|'version' is out of range
		"mode": "shell"|'mode' is not task or run
		"id": 7|'id' is not a string
		"id": null|'id' is missing
		"timeout_s": "1"|'timeout_s' is not an integer
		"timeout_s": null|'timeout_s' is missing
		"git": []|'git' is not an object
		"env_names": ["A", 1]|'env_names'[1] is not a string
		"env_names": {}|'env_names' is not a list
		"env_names": ["1A"]|'1A' is not a valid variable name
		"api": "key"|'api' is not none, forward or oauth
		"mounts": [{"tag": "a b", "path": "/x"}]|the mount tag 'a b' is not valid
		"mounts": [7]|mount 0 is not an object
		"start_commit": "abc"|the start commit is not a full commit id
		"resume_session": "x"|the session to resume is not a session id
	EOF
	printf '{"version": 1, "version": 1}' >bad.json
	run test-task settings-parse bad.json
	assert_output --partial "error: settings.json: duplicate object key"
	printf '[]' >bad.json
	run test-task settings-parse bad.json
	assert_output "error: settings.json: not an object"
	test-task settings --run >run.json
	python3 -c 'import json; s = json.load(open("run.json")); s["command"] = ["a", 1]; json.dump(s, open("bad.json", "w"))'
	run test-task settings-parse bad.json
	assert_output "error: settings.json: 'command'[1] is not a string"
}

@test "settings: PID 1 reads only path and mounts, checked as the task and run commands check them" {
	# a task's settings with a bad model: PID 1's parse does not read it
	test-task settings >task.json
	python3 -c 'import json; s = json.load(open("task.json")); s["model"] = "-bad"; s["mounts"] = [{"tag": "aibox.m0", "path": "/data"}]; json.dump(s, open("place.json", "w"))'
	run test-task settings-parse --place place.json
	assert_success
	assert_output "$(printf 'path /project\nmount aibox.m0 /data')"
	run test-task settings-parse place.json
	assert_failure
	assert_output "error: settings.json: the model name '-bad' is not valid"
	printf '{"version": 1, "path": "/a/../b"}' >place.json
	run test-task settings-parse --place place.json
	assert_output "error: settings.json: the project path '/a/../b' is not a clean absolute path"
	printf '{"mounts": [{"tag": "aibox.task", "path": "/x"}]}' >place.json
	run test-task settings-parse --place place.json
	assert_output "error: settings.json: the mount tag 'aibox.task' is not valid"
}

@test "settings: check_timeout_ms is the check's limit (600000 by default), 1000 to 86400000, read back by the init's parser" {
	run test-task settings --check "make test"
	assert_success
	assert_line '  "check": "make test",'
	assert_line '  "check_timeout_ms": 600000'
	printf '%s\n' "$output" >settings.json
	run test-task settings --check "make test" --check-timeout 86400000
	assert_success
	printf '%s\n' "$output" >max.json
	run test-task settings-parse max.json
	assert_success
	assert_line '  "check_timeout_ms": 86400000'
	for ms in 999 86400001 -5; do
		run test-task settings --check "make test" --check-timeout "$ms"
		assert_failure
		assert_output "error: the check's time limit is not 1000 to 86400000 ms"
		# the init refuses what the host would not write
		sed "s/\"check_timeout_ms\": 600000/\"check_timeout_ms\": $ms/" settings.json >bad.json
		run test-task settings-parse bad.json
		assert_failure
		assert_output --regexp "^error: settings.json: (the check's time limit is not 1000 to 86400000 ms|'check_timeout_ms' is out of range)$"
	done
	sed 's/"check_timeout_ms": 600000/"check_timeout_ms": "10m"/' settings.json >bad.json
	run test-task settings-parse bad.json
	assert_failure
	assert_output "error: settings.json: 'check_timeout_ms' is not an integer"
	# absent (an older host): the default
	sed 's/"check": "make test",/"check": "make test"/; /"check_timeout_ms"/d' settings.json >old.json
	run test-task settings-parse old.json
	assert_success
	assert_line '  "check_timeout_ms": 600000'
}
