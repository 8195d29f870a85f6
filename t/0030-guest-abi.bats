#!/usr/bin/env bats
# common/base/guest_abi.h: the checks and tables the host and the guest init share.
load lib-common

@test "guest-abi: env names are [A-Za-z_][A-Za-z0-9_]*, at most 128 bytes" {
	for good in A _ a_1 GITHUB_TOKEN "$(head -c 128 /dev/zero | tr '\0' A)"; do
		[ "$(test-common guest-valid env "$good")" = yes ] || { echo "refused $good"; return 1; }
	done
	for bad in '' 1A A-B 'A B' A=B é "$(head -c 129 /dev/zero | tr '\0' A)"; do
		[ "$(test-common guest-valid env "$bad")" = no ] || { echo "accepted $bad"; return 1; }
	done
}

@test "guest-abi: guest paths are clean and absolute, at most 1024 bytes" {
	for good in /project /a/b.c /home/aibox/.claude/skills /a/..b /a/.x "/$(head -c 1023 /dev/zero | tr '\0' a)"; do
		[ "$(test-common guest-valid path "$good")" = yes ] || { echo "refused $good"; return 1; }
	done
	for bad in '' / relative a/b /a/ //a /a//b /a/./b /a/../b /. /.. /a/. /a/.. \
		"$(printf '/a\tb')" "/$(head -c 1024 /dev/zero | tr '\0' a)"; do
		[ "$(test-common guest-valid path "$bad")" = no ] || { echo "accepted $bad"; return 1; }
	done
}

@test "guest-abi: 9p tags are 1 to 31 of [A-Za-z0-9._-]" {
	for good in aibox.task aibox.m0 a-b_c.D9 "$(head -c 31 /dev/zero | tr '\0' t)"; do
		[ "$(test-common guest-valid tag "$good")" = yes ] || { echo "refused $good"; return 1; }
	done
	for bad in '' 'a b' a,b a/b a=b "$(head -c 32 /dev/zero | tr '\0' t)"; do
		[ "$(test-common guest-valid tag "$bad")" = no ] || { echo "accepted $bad"; return 1; }
	done
}

@test "guest-abi: a config mount's tag is aibox.m<N> in both modes, valid for any N" {
	run test-common guest-mount-tag 0
	assert_output "aibox.m0 valid"
	run test-common guest-mount-tag 18446744073709551615
	assert_output "aibox.m18446744073709551615 valid"
}

@test "guest-abi: the result files, their caps and order are docs/internals.md's" {
	run test-common guest-results
	assert_success
	assert_output "$(printf '%s\n' 'transcript.jsonl 268435456' 'session.jsonl 67108864' \
		'changes.bundle 2147483648' 'vm.log 67108864' 'result.json 1048576')"
}

@test "guest-abi: no string of the contract is written as a literal outside its module" {
	test-common guest-literals >literals
	grep -q '^name common/base/guest_abi GUEST_FILE_SETTINGS settings.json$' literals
	grep -q '^token common/base/guest_abi GUEST_RUN_ENV_VAR AIBOX_ENV$' literals
	grep -q '^name common/base/guest_abi guest_results\[4\] result.json$' literals
	run "$TOP/t/check-guest-abi" literals
	assert_success
	assert_output ''
}

@test "guest-abi: the literal check names each copy, and a string macro missing from the table" {
	test-common guest-literals >literals
	mkdir tools
	cat >tools/aibox-x.c <<'EOF'
/* "settings.json" in a comment is not a copy */
static void f(struct buf *p, const char *d)
{
	buf_addf(p, "%s/start.bundle", d);
	buf_addstr(p, "AIBOX_ENV=");
	x.command = "run";
	y = "transcript.jsonl";
	z = "start.bundles"; /* another name */
}
EOF
	run "$TOP/t/check-guest-abi" literals tools/aibox-x.c
	assert_failure 1
	assert_equal "${#lines[@]}" 4
	assert_line "$T/tools/aibox-x.c:4: \"%s/start.bundle\" spells GUEST_FILE_START_BUNDLE (common/base/guest_abi)"
	assert_line "$T/tools/aibox-x.c:5: \"AIBOX_ENV=\" spells GUEST_RUN_ENV_VAR (common/base/guest_abi)"
	assert_line --regexp "^$T/tools/aibox-x.c:6: \"run\" spells GUEST_(MODE|CMD)_RUN \\(common/base/guest_abi\\)\$"
	assert_line "$T/tools/aibox-x.c:7: \"transcript.jsonl\" spells guest_results[0] (common/base/guest_abi)"

	{ cat "$TOP/common/base/guest_abi.h"; echo '#define GUEST_NEW_NAME "new.txt"'; } >abi.h
	CHECK_GUEST_ABI_HEADER=$T/abi.h run "$TOP/t/check-guest-abi" literals
	assert_failure 1
	assert_output "$T/abi.h: GUEST_NEW_NAME is not in guest_literals[] (common/base/guest_abi.c)"
}

@test "guest-abi: the secrets' framing: what the one writer writes the one reader reads, in both modes" {
	run test-host env-json A=b 'C=d"e' "E=$(printf 'l1\nl2')"
	assert_success
	printf '%s\n' "$output" >stdin.json
	run test-common guest-secrets stdin <stdin.json
	assert_success
	assert_output "$(printf 'A=b\nC=d"e\nE=l1\nl2')"
	run test-host env-json --object A=b 'C=d"e'
	assert_success
	printf '%s' "$output" >env.json
	run test-common guest-secrets env-var <env.json
	assert_success
	assert_output "$(printf 'A=b\nC=d"e')"
	# Each framing is refused by the other's reader.
	run test-common guest-secrets env-var <stdin.json
	assert_failure 1
	assert_output "error: AIBOX_ENV: secret 'env' is not a string"
	run test-common guest-secrets stdin <env.json
	assert_failure 1
	assert_output 'error: the secrets on stdin: not {"env": {...}}'
	# Nothing at all is no secrets.
	run test-common guest-secrets stdin </dev/null
	assert_success
	assert_output ''
}

@test "guest-abi: the secrets' reader refuses what the writer never writes" {
	refused() {
		run test-common guest-secrets "$1" <<<"$2"
		assert_failure 1
		assert_output "error: $3"
	}
	refused stdin '{"env": {"A": "b"}, "more": 1}' 'the secrets on stdin: not {"env": {...}}'
	refused stdin '{"env": {"A": "b"}' 'the secrets on stdin: not {"env": {...}}'
	refused stdin '{"env": ["A"]}' 'the secrets on stdin: not {"env": {...}}'
	refused stdin '{"env": {"A": 1}}' "the secrets on stdin: secret 'A' is not a string"
	refused stdin '{"env": {"A": "x\u0000y"}}' 'the secrets on stdin: not {"env": {...}}'
	refused stdin '{"env": {"A": "b", "A": "c"}}' 'the secrets on stdin: not {"env": {...}}'
	refused env-var '{"1A": "b"}' "AIBOX_ENV: '1A' is not a variable name"
	refused env-var '{"A=B": "b"}' "AIBOX_ENV: 'A=B' is not a variable name"
	refused env-var '"A=b"' 'AIBOX_ENV: not a JSON object'
	names=$(python3 -c 'import json; print(json.dumps({"N%d" % i: "v" for i in range(257)}))')
	refused env-var "$names" 'AIBOX_ENV: more than 256 names'
	names=$(python3 -c 'import json; print(json.dumps({"N%d" % i: "v" for i in range(256)}))')
	run test-common guest-secrets env-var <<<"$names"
	assert_success
	assert_equal "${#lines[@]}" 256
	big=$(python3 -c 'print("{\"A\": \"" + "a" * (1048576 - 9) + "\"}")')
	printf '%s' "$big" >big.json # exactly 1 MiB
	run test-common guest-secrets env-var <big.json
	assert_success
	assert_equal "${#output}" $((1048576 - 9 + 2))
	refused env-var "${big}x" 'AIBOX_ENV: over 1048576 bytes'
}
