#!/usr/bin/env bats
# The dependency cache's faults in aibox-proxy (docs/cache.md, "How an entry
# is kept"): a fill cut short by the upstream, the store's disk full during a
# fill, and the proxy killed (SIGKILL) half way through one.  In each, no
# partial entry is ever served or listed (aibox cache list, aibox cache
# verify), and the next task's proxy fills the artifact again, whole.  A
# loopback registry (t/dep-registry) with a CA of its own; each proxy
# stands for one task, as in t/3020.
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy
load lib-deps

setup_file() {
	make_test_ca "$BATS_FILE_TMPDIR/ca"
	mkdir -p "$BATS_FILE_TMPDIR/reg/npm"
	make_npm_tgz "$BATS_FILE_TMPDIR/reg/npm" left-pad 1.0.0
	# 256 KiB that gzip cannot shrink: bigger than the small disk's room below.
	local d
	d=$(mktemp -d)
	mkdir "$d/package"
	printf '{"name": "big-pad", "version": "1.0.0"}\n' >"$d/package/package.json"
	head -c 262144 /dev/urandom >"$d/package/blob"
	tar -C "$d" -czf "$BATS_FILE_TMPDIR/reg/npm/big-pad-1.0.0.tgz" package
	rm -rf "$d"
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	cp -r "$BATS_FILE_TMPDIR/reg" "$T/reg"
	export SSL_CERT_FILE=$T/ca/ca.pem
	export AIBOX_DEPS_CACHE=$T/deps
	URL=
}

teardown() {
	stop_proxy || true
	[ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null || true
	common_teardown
}

# registry [ARGS...]: t/dep-registry on a free port (REG), its requests in
# $T/reg.log; URL is big-pad's tarball there.
registry() {
	dep_registry "$@" || return 1
	URL=https://localhost:$REG/big-pad/-/big-pad-1.0.0.tgz
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
}

# task [STORE]: a new task's proxy, the registry cache: npm, the store at
# STORE (default $T/deps); its CA in $T/taskca.pem.
task() {
	dep_task "$T/rules" "${1:-$T/deps}"
}

# fetch NAME: NAME's package document, then its tarball into $T/NAME.tgz.
fetch() {
	icurl -o /dev/null "https://localhost:$REG/$1" &&
		icurl -o "$T/$1.tgz" "https://localhost:$REG/$1/-/$1-1.0.0.tgz"
}

# nothing_partial STORE: aibox cache list and verify see no big-pad entry in
# STORE, and no temporary file of a fill is left there.
nothing_partial() {
	run env AIBOX_DEPS_CACHE="$1" aibox cache list
	assert_success
	refute_output --partial big-pad
	run env AIBOX_DEPS_CACHE="$1" aibox cache verify
	assert_success
	assert_output ""
}

# refill STORE: the next task's proxy fetches big-pad from upstream again and
# stores it whole; a second fetch is then a hit.
refill() {
	task "$1"
	run fetch big-pad
	assert_success
	run cmp "$T/big-pad.tgz" "$T/reg/npm/big-pad-1.0.0.tgz"
	assert_success
	run fetch big-pad
	assert_success
	run grep -cE " GET /big-pad/-/big-pad-1.0.0.tgz status=200 cache=(fill|hit) " "$T/proxy.log"
	assert_output 2
	run grep -c " cache=fill " "$T/proxy.log"
	assert_output 1
	run env AIBOX_DEPS_CACHE="$1" aibox cache list
	assert_success
	assert_line --regexp "^ +[0-9]+  [0-9TZ:-]+  -  $URL#sha512=[0-9a-f]{128}\$"
	run env AIBOX_DEPS_CACHE="$1" aibox cache verify
	assert_success
	run find "$1" -name '.tmp.*'
	assert_output ""
}

@test "cache faults: an upstream that closes mid-body gets the client a download cut short and stores nothing; the next task fills it whole" {
	registry
	touch "$T/reg/CUT"
	task
	run fetch big-pad
	assert_failure
	run grep -F " GET /big-pad/-/big-pad-1.0.0.tgz " "$T/proxy.log"
	assert_success
	assert_output --partial " failed localhost:$REG GET /big-pad/-/big-pad-1.0.0.tgz ("
	refute_output --partial "cache=fill"
	refute_output --partial "cache=hit"
	nothing_partial "$T/deps"
	run find "$T/deps" -name '.tmp.*'
	assert_output ""
	rm "$T/reg/CUT"
	refill "$T/deps"
	run grep -c '^GET /big-pad/-/big-pad-1.0.0.tgz$' "$T/reg.log"
	assert_output 2
}

@test "cache faults: the store's disk full during a fill: the client still gets the artifact whole, proxy.log says why it was not kept, nothing partial is left; the next task fills it" {
	registry
	small_disk 1048576 0
	local store=$DISK/deps
	# The store works there: a small artifact is kept.
	task "$store"
	run fetch left-pad
	assert_success
	run grep -c " GET /left-pad/-/left-pad-1.0.0.tgz status=200 cache=fill " "$T/proxy.log"
	assert_output 1
	# Now the disk is full but for 64 KiB (big-pad takes 256 KiB).
	head -c 2097152 /dev/zero >"$DISK/fill" 2>/dev/null || true
	truncate -s -65536 "$DISK/fill"
	run fetch big-pad
	assert_success
	run cmp "$T/big-pad.tgz" "$T/reg/npm/big-pad-1.0.0.tgz"
	assert_success
	run grep -F "big-pad-1.0.0.tgz" "$T/proxy.log"
	assert_output --partial " GET /big-pad/-/big-pad-1.0.0.tgz status=200 cache=miss "
	run grep -F " note - (the dependency cache failed: " "$T/proxy.log"
	assert_output --partial "(the dependency cache failed: No space left on device)"
	nothing_partial "$store"
	run find "$store" -name '.tmp.*'
	assert_output ""
	run env AIBOX_DEPS_CACHE="$store" aibox cache list
	assert_success
	assert_line --partial "/left-pad/-/left-pad-1.0.0.tgz#sha512="
	rm "$DISK/fill"
	refill "$store"
}

# grown GLOBS: a file matching one of GLOBS holds more than an entry's 4 KiB header.
grown() {
	local f
	for f in $1; do
		[ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -gt 4096 ] && return 0
	done
	return 1
}

@test "cache faults: aibox-proxy killed (SIGKILL) half way through a fill leaves no entry to serve or list; the next task fills it again" {
	registry --slow 500
	task
	run icurl -o /dev/null "https://localhost:$REG/big-pad"
	assert_success
	icurl -o "$T/got" "$URL" 2>/dev/null &
	local pid=$! st=0
	# The first of its 4 pieces is in the store (its temporary file): kill it there.
	wait_until 20 grown "$T/deps/v1/*/.tmp.* $T/deps/v1/*/[0-9a-f]*"
	kill -KILL "$PROXY_PID"
	wait "$PROXY_PID" 2>/dev/null || true
	PROXY_PID=
	wait "$pid" || st=$?
	[ "$st" -ne 0 ] || fail "the client got a whole answer from a proxy killed half way"
	nothing_partial "$T/deps"
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
	# The dead filler's temporary file is left, never served; the next filler takes its place.
	run find "$T/deps" -name '.tmp.*'
	assert_line --regexp '/v1/[0-9a-f]{2}/\.tmp\.[0-9a-f]{64}$'
	refill "$T/deps"
	run grep -c '^GET /big-pad/-/big-pad-1.0.0.tgz$' "$T/reg.log"
	assert_output 2
}

@test "cache faults: an entry cut short on the host's disk is not served; the next task's proxy fills it anew, whole" {
	registry
	task
	run fetch big-pad
	assert_success
	local f
	f=$(find "$T/deps/v1" -type f -name '[0-9a-f]*')
	truncate -s -1000 "$f"
	refill "$T/deps"
	run grep -c '^GET /big-pad/-/big-pad-1.0.0.tgz$' "$T/reg.log"
	assert_output 2
}
