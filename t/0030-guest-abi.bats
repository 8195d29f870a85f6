#!/usr/bin/env bats
# common/guest_abi.h: the checks and tables the host and the guest init share.
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
