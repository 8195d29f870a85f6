#!/usr/bin/env bats
# The dependency cache's store (common/net/dep_cache.h, docs/cache.md) through
# t/helper/test-cache.c, and `aibox cache`: no partial entry is ever seen, one
# filler per key, scopes kept apart, the cap kept by least recent use.
bats_require_minimum_version 1.5.0
load lib-common

setup() {
	common_setup
	unset XDG_CACHE_HOME
	export AIBOX_DEPS_CACHE=$T/store
	S=$T/store
	U=https://registry.example/p/-/p-1.0.0.tgz
	head -c 10000 /dev/urandom >blob
	SUM=$(sha256sum blob | cut -c1-64)
}
teardown() { common_teardown; }

# The files of the store's entries (not locks, not temporaries).
entries() { find "$S/v1" -type f -name '[0-9a-f]*' | sort; }
# A filler's temporary file is there.
filling() { compgen -G "$S/v1/*/.tmp.*" >/dev/null; }
# holds KEY: the store serves KEY (no scope) with blob's bytes.
holds() { test-cache get "$S" "$1" - | cmp -s - blob; }

@test "dep cache: an entry is stored and served whole; another scope or key misses it" {
	run test-cache put "$S" 1G "$U" - sha256 "$SUM" <blob
	assert_success
	assert_output stored
	test-cache get "$S" "$U" - >got
	cmp blob got
	# A private artifact of one project is not another project's, nor anyone's.
	run test-cache put "$S" 1G "$U.private" project:a/registry.example <blob
	assert_output stored
	run test-cache get "$S" "$U.private" project:b/registry.example
	assert_failure 1
	assert_output miss
	run test-cache get "$S" "$U.private" -
	assert_failure 1
	assert_output miss
	run test-cache get "$S" "$U" project:a/registry.example
	assert_failure 1
	assert_output miss
	run test-cache get "$S" "${U}x" -
	assert_failure 1
	assert_output miss
	run entries
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	# A second filler of a stored key finds it and reads nothing.
	run test-cache put "$S" 1G "$U" - </dev/null
	assert_success
	assert_output found
}

@test "dep cache: bytes that do not match their digest are refused and nothing is stored" {
	run test-cache put "$S" 1G "$U" - sha256 "00${SUM:2}" <blob
	assert_failure 1
	assert_output "refused: the artifact's digest does not match"
	run test-cache put "$S" 1G "$U" - sha512 "$SUM" <blob
	assert_output "refused: the artifact's digest does not match"
	run test-cache get "$S" "$U" -
	assert_failure 1
	assert_output miss
	run find "$S/v1" -type f
	assert_success
	assert_output ""
	# sha512 as npm's integrity names it.
	run test-cache put "$S" 1G "$U" - sha512 "$(sha512sum blob | cut -c1-128)" <blob
	assert_output stored
}

@test "dep cache: a filler killed half way leaves no entry; the next filler of the key stores it" {
	run test-cache put "$S" 1G "$U" - sha256 "$SUM" --cut 5000 <blob
	assert_failure 137
	assert_output ""
	run test-cache get "$S" "$U" -
	assert_failure 1
	assert_output miss
	run entries
	assert_output ""
	run aibox cache list --json
	assert_success
	assert_output "[]"
	# Its temporary file is there until the next filler of the key.
	run find "$S/v1" -name '.tmp.*'
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	run test-cache put "$S" 1G "$U" - sha256 "$SUM" <blob
	assert_output stored
	run find "$S/v1" -name '.tmp.*'
	assert_output ""
	test-cache get "$S" "$U" - >got
	cmp blob got
}

@test "dep cache: two fillers of one key at once: one reads upstream, both get the same bytes" {
	head -c 10000 /dev/urandom >other
	test-cache put "$S" 1G "$U" - --slow 50 <blob >one &
	pid=$!
	wait_until 10 filling
	run test-cache put "$S" 1G "$U" - <other
	assert_success
	assert_output found
	wait "$pid"
	run cat one
	assert_output stored
	test-cache get "$S" "$U" - >got
	cmp blob got
}

@test "dep cache: over the cap, the least recently used entries go; a bigger artifact is refused" {
	for k in a b c; do
		run test-cache put "$S" 100000 "$U.$k" - <blob
		assert_output stored
	done
	find "$S/v1" -type f -exec touch -a -d @1000000000 {} +
	test-cache get "$S" "$U.b" - >/dev/null # b is now the most recent
	# 14096 bytes per file: 4 do not fit in 40000; the oldest two go.
	run test-cache put "$S" 40000 "$U.d" - <blob
	assert_output stored
	holds "$U.b"
	holds "$U.d"
	run test-cache get "$S" "$U.a" -
	assert_failure 1
	assert_output miss
	run test-cache get "$S" "$U.c" -
	assert_failure 1
	assert_output miss
	run test-cache put "$S" 12000 "$U.e" - <blob
	assert_failure 1
	assert_output "refused: the artifact is bigger than the cache's cap"
	run find "$S/v1" -name '.tmp.*'
	assert_output ""
}

@test "dep cache: an entry cut short is not served, and is filled anew" {
	run test-cache put "$S" 1G "$U" - <blob
	assert_output stored
	f=$(entries)
	truncate -s 9000 "$f"
	run test-cache get "$S" "$U" -
	assert_failure 2
	assert_output "refused: '$f' is cut short or too long: 4904 bytes, its header says 10000"
	run test-cache put "$S" 1G "$U" - <blob
	assert_output stored
	test-cache get "$S" "$U" - >got
	cmp blob got
}

@test "dep cache: keys and scopes the store takes" {
	for k in "https://a/b c" $'https://a/\nb' '' "https://a/$(printf 'x%.0s' {1..2040})"; do
		run test-cache key-ok "$k"
		assert_output no
	done
	run test-cache key-ok "https://a/$(printf 'x%.0s' {1..2030})"
	assert_output yes
	for s in 'a b' 'a;b' "$(printf 'x%.0s' {1..257})"; do
		run test-cache scope-ok "$s"
		assert_output no
	done
	run test-cache scope-ok project:my.proj/registry.npmjs.org:443
	assert_output yes
}

@test "aibox cache: list, size, verify, clear" {
	unset AIBOX_DEPS_CACHE
	S=$HOME/.cache/aibox/deps
	run aibox cache list
	assert_success
	assert_output ""
	[ -d "$S/v1" ]
	test-cache put "$S" 1G "$U" - >/dev/null <blob
	test-cache put "$S" 1G "$U.2" project:a/registry.example >/dev/null <blob
	run aibox cache list
	assert_success
	assert_line --index 0 --regexp '^ +SIZE  USED +SCOPE  URL$'
	assert_line --index 1 --regexp "^ +10000  20[0-9-]+T[0-9:]+Z  -  $U\$"
	assert_line --index 2 --regexp "^ +10000  20[0-9-]+T[0-9:]+Z  project:a/registry.example  $U.2\$"
	run aibox cache list --json
	assert_success
	[ "$(jq -r 'sort_by(.url) | .[0] | [.url, .size, .sha256, (.scope // "-")] | join(" ")' <<<"$output")" = "$U 10000 $SUM -" ]
	run aibox cache size
	assert_success
	assert_output "20000 bytes in 2 entries, cap 4294967296 bytes ($S)"
	mkdir -p "$AIBOX_HOME"
	echo 64M >"$AIBOX_HOME/cache-max"
	run aibox cache size
	assert_success
	assert_output "20000 bytes in 2 entries, cap 67108864 bytes ($S)"
	run aibox cache verify
	assert_success
	assert_output ""
	# One flipped byte in an entry: verify says so and removes it.
	f=$(find "$S/v1" -type f -name '[0-9a-f]*' | head -1)
	printf '\1' | dd of="$f" bs=1 seek=5000 conv=notrunc 2>/dev/null
	run --separate-stderr aibox cache verify
	assert_failure 1
	assert_equal "$stderr" "aibox-cache: '$f': its bytes do not match its SHA-256: removed"
	[ ! -e "$f" ]
	run aibox cache clear
	assert_success
	assert_output "removed 1 entries"
	run aibox cache list --json
	assert_success
	assert_output "[]"
	echo 1M >"$AIBOX_HOME/cache-max"
	run --separate-stderr aibox cache size
	assert_failure 2
	assert_equal "$stderr" "aibox-cache: '$AIBOX_HOME/cache-max': '1M' is out of range (16M to 64T)"
	run --separate-stderr aibox cache bogus
	assert_failure 2
	assert_equal "${stderr%%$'\n'*}" "aibox-cache: unknown subcommand 'bogus'"
}
