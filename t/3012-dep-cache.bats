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
# tmp_bytes_at_least N: the fillers' temporary files hold N bytes or more.
tmp_bytes_at_least() { [ "$(find "$S/v1" -name '.tmp.*' -printf '%s\n' | awk '{n += $1} END {print n + 0}')" -ge "$1" ]; }
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
	# Every hex digit one on (f to 0): another digest whatever the random blob's is.
	run test-cache put "$S" 1G "$U" - sha256 "$(printf %s "$SUM" | tr 0-9a-f 1-9a-f0)" <blob
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

@test "dep cache: the fills of every process on the store share one cap; a filler killed half way holds none of it" {
	head -c $((10 << 20)) /dev/urandom >big
	# One filler holds 10 MiB of a 24 MiB cap (it waits on its input for more): a
	# second filler's 10 MiB would leave 4 MiB free, less than it holds, and is refused.
	mkfifo in
	test-cache put "$S" 24M "$U.1" - <in >first &
	local pid=$!
	exec 7>in
	cat big >&7
	wait_until 10 tmp_bytes_at_least $((10 << 20))
	run test-cache put "$S" 24M "$U.2" - <big
	assert_output "refused: this process's fills under way would hold more of the cache's cap than they leave free"
	# Killed, it holds nothing: the same fill then has room.
	kill -KILL "$pid"
	wait "$pid" || true
	exec 7>&-
	run test-cache put "$S" 24M "$U.2" - <big
	assert_output stored
}

@test "dep cache: a fill's header counts toward the cap before any byte comes: a fill with no room for it is refused" {
	# One process holds fills of 1 MiB, 4 KiB at a time: exactly half the cap of 16
	# MiB, headers included; the next fill's header (4 KiB, counted before upstream
	# answers) would pass it.
	mkfifo in
	test-cache hold "$S" 16M 1M <in >held &
	local pid=$!
	exec 7>in
	wait_until 10 grep -q '^holding' held
	exec 7>&-
	wait "$pid"
	run cat held
	assert_output "holding $((8 << 20)) bytes: this process's fills under way would hold more of the cache's cap than they leave free"
}

@test "dep cache: one process's fills hold at most what they leave free, so others' still have room; the bound of all is exact" {
	# The first holds half the cap of 16 MiB, the second half of what is left, the
	# third half of what those two leave: never all of it, whatever each does.
	mkfifo in1 in2 in3
	local i pids=()
	for i in 1 2 3; do
		test-cache hold "$S" 16M 1M <in$i >held$i &
		pids+=($!)
		eval "exec $((6 + i))>in$i"
		wait_until 10 grep -q '^holding' held$i
	done
	run cat held1 held2 held3
	assert_line --index 0 --regexp "^holding $((8 << 20)) bytes: "
	assert_line --index 1 --regexp "^holding $((4 << 20)) bytes: "
	assert_line --index 2 --regexp "^holding $((2 << 20)) bytes: "
	# The second killed: its share is free at once, for a fill of up to half of
	# what the others leave (16 - 8 - 2 = 6 MiB: 3 MiB).
	kill -KILL "${pids[1]}"
	wait "${pids[1]}" || true
	head -c $(((3 << 20) - 4096)) /dev/urandom >mid
	run test-cache put "$S" 16M "$U.mid" - <mid
	assert_output stored
	exec 7>&- 9>&-
	wait "${pids[0]}" "${pids[2]}"
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
	run test-cache put "$S" 24000 "$U.e" - <blob
	assert_failure 1
	assert_output "refused: the artifact is bigger than half the cache's cap"
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
	for s in 'a b' 'a;b' - -a .a "$(printf 'x%.0s' {1..257})"; do
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
	flip_byte "$f" 5000
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

@test "aibox cache: verify removes an entry whose header names another scope or key than its file is named for" {
	test-cache put "$S" 1G "$U" - >/dev/null <blob
	test-cache put "$S" 1G "$U.2" - >/dev/null <blob
	local f g
	f=$(entries | head -1)
	g=$(entries | tail -1)
	# Its bytes and their SHA-256 as they were; its header now says it is another
	# project's, or another URL's: what it says is not what it is stored as.
	python3 - "$f" "$g" <<-'PY'
		import sys
		for path, old, new in ((sys.argv[1], b"\nscope -\n", b"\nscope b\n"),
		                       (sys.argv[2], b"/p/-/p-", b"/q/-/q-")):
		    data = bytearray(open(path, "rb").read())
		    at = data.index(old)
		    data[at:at + len(old)] = new
		    open(path, "wb").write(data)
	PY
	run aibox cache verify
	assert_failure 1
	assert_line "aibox-cache: '$g': its header names another key or scope than its file's name: removed"
	assert_line "aibox-cache: '$f': its header names another key or scope than its file's name: removed"
	[ ! -e "$f" ]
	[ ! -e "$g" ]
	[ "$(entries)" = "" ]
}

@test "aibox cache: verify says an entry removed between its listing and its reading is gone, not bad, and exits 0" {
	command -v strace >/dev/null || skip "strace is not installed"
	test-cache put "$S" 1G "$U" - >/dev/null <blob
	local f
	f=$(entries)
	# verify's own open of the entry (not the listing's) waits 3 s; the entry goes
	# meanwhile, as a trim or another verify would remove it.
	ASAN_OPTIONS=detect_leaks=0 strace -f -o trace -P "$f" -e trace=openat \
		-e inject=openat:delay_enter=3000000:when=1 aibox cache verify >out 2>err &
	local pid=$!
	sleep 1
	rm "$f"
	local st=0
	wait "$pid" || st=$?
	grep -q DELAYED trace || fail "strace delayed no open: $(cat trace)"
	[ "$st" -eq 0 ] || fail "verify exit $st: $(cat err)"
	[ "$(cat err)" = "aibox-cache: warning: '$f' was removed before it was read: not checked" ] || fail "$(cat err)"
}

# removal_meets_refill CMD...: the store holds U cut short (a lookup finds it
# unreadable, so that a task's filler fills it anew); `aibox cache CMD` runs with
# its removal of the entry held 3 s, and a filler of the key comes meanwhile.  f
# the entry's path, st the command's status (its stderr in err).
removal_meets_refill() {
	test-cache put "$S" 1G "$U" - >/dev/null <blob
	f=$(entries)
	truncate -s 8000 "$f"
	ASAN_OPTIONS=detect_leaks=0 strace -f -o trace -P "$f" -e trace=unlink,unlinkat \
		-e inject=unlink,unlinkat:delay_enter=3000000:when=1 aibox cache "$@" >out 2>err &
	local pid=$!
	sleep 1
	run test-cache put "$S" 1G "$U" - <blob
	assert_output stored
	st=0
	wait "$pid" || st=$?
	grep -q DELAYED trace || fail "strace delayed no removal: $(cat trace)"
}

@test "aibox cache: verify removes only the entry it judged bad, never one filled anew at its path meanwhile" {
	command -v strace >/dev/null || skip "strace is not installed"
	removal_meets_refill verify
	[ "$st" -eq 1 ] || fail "verify exit $st: $(cat err)"
	grep -q "^aibox-cache: '$f' is cut short or too long" err || fail "$(cat err)"
	# What the filler stored is there, whole.
	holds "$U"
}

@test "aibox cache: clear removes only the entries it listed, never one filled anew at its path meanwhile" {
	command -v strace >/dev/null || skip "strace is not installed"
	removal_meets_refill clear
	[ "$st" -eq 0 ] || fail "clear exit $st: $(cat err)"
	# What the filler stored after clear listed the store is there, whole.
	holds "$U"
}

@test "aibox cache: a named pipe or a symbolic link named as an entry hangs nothing; verify names it and removes it" {
	test-cache put "$S" 1G "$U" - >/dev/null <blob
	local f d p l
	f=$(entries)
	d=$(dirname "$f")
	p=$d/$(printf a%.0s $(seq 1 64))
	l=$d/$(printf b%.0s $(seq 1 64))
	mkfifo "$p"
	ln -s "$f" "$l"
	run timeout 10 aibox cache list
	assert_success
	assert_line --index 1 --regexp "  $U\$"
	run timeout 10 aibox cache size
	assert_success
	assert_output --regexp "^10000 bytes in 3 entries"
	run timeout 10 aibox cache verify
	assert_failure 1
	assert_line "aibox-cache: '$p' is not a cache entry: removed"
	assert_line "aibox-cache: '$l' is not a cache entry: removed"
	[ ! -e "$p" ]
	[ ! -L "$l" ]
	holds "$U"
}

# req HEAD: the request head (\n for CRLF, the empty line added) through dep_request_cacheable().
req() { printf '%s\n\n' "$1" | sed 's/$/\r/' | test-cache request; }

@test "dep rules: a GET without Range, conditions or encodings may be cached; any other bypasses" {
	run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r'
	assert_success
	assert_output cacheable
	run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\naccept-encoding: IDENTITY'
	assert_output cacheable
	for h in 'Range: bytes=0-10' 'rAnGe: bytes=5-' 'If-Range: "x"' 'If-None-Match: "x"' \
		'If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT' 'If-Match: *' \
		'If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT'; do
		run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\n'"$h"
		assert_success
		assert_output "bypass: a $(printf '%s' "${h%%:*}" | tr A-Z a-z) header"
	done
	# The proxy answers identity whatever the client lists (npm and pip list gzip).
	for h in 'Accept-Encoding: gzip, deflate' 'Accept-Encoding: identity, gzip' 'Accept-Encoding: identity;q=0.5' 'Accept-Encoding: *;q=1'; do
		run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\n'"$h"
		assert_output cacheable
	done
	for h in 'Accept-Encoding: gzip, identity;q=0' 'Accept-Encoding: *;q=0' 'Accept-Encoding: IDENTITY ; Q=0.000' \
		'Accept-Encoding: gzip,*;q=0.' $'Accept-Encoding: identity\nAccept-Encoding: gzip'; do
		run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\n'"$h"
		assert_output "bypass: an Accept-Encoding that refuses identity"
	done
	run req $'HEAD /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r'
	assert_output "bypass: not a GET"
	run req $'get /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r'
	assert_output "bypass: not a GET"
	# A GET with a body: a second request could hide in it.
	run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\nContent-Length: 40'
	assert_output "bypass: a body"
	run req $'GET /p/-/p-1.0.0.tgz HTTP/1.1\nHost: r\nTransfer-Encoding: chunked'
	assert_output "bypass: a body"
}

@test "dep rules: the key is the normalized URL; a URL that could name two things is refused" {
	run test-cache key Registry.EXAMPLE 443 /p/-/p-1.0.0.tgz
	assert_success
	assert_output https://registry.example/p/-/p-1.0.0.tgz
	run test-cache key registry.example 8443 /p/-/p-1.0.0.tgz
	assert_output https://registry.example:8443/p/-/p-1.0.0.tgz
	# A mutable URL shaped like an artifact: the query could make it anything.
	for t in '/p/-/p-1.0.0.tgz?v=2' '/p/-/p-1.0.0.tgz#x' '/p/-/p%2d1.0.0.tgz' '/p/-/p-1.0.0.tgz%3fv=2'; do
		run test-cache key r 443 "$t"
		assert_output "refused: a query, fragment or escape"
	done
	for t in '/p/../q/-/q-1.tgz' '/p/./-/p-1.tgz' '/p/-/..' '/p/-/.'; do
		run test-cache key r 443 "$t"
		assert_output "refused: a dot segment"
	done
	run test-cache key r 443 '/p//-/p-1.tgz'
	assert_output "refused: an empty segment"
	run test-cache key r 443 $'/p/-/p-\x7f.tgz'
	assert_output "refused: a byte outside printable ASCII"
	run test-cache key r 443 "/$(printf 'x%.0s' {1..2040})"
	assert_output "refused: longer than the cache's key cap"
	run test-cache key r 443 'p/-/p-1.tgz'
	assert_output "refused: not an absolute path"
	# URLs in metadata, relative to the page they are in.
	B=https://pypi.example/simple/p/
	run test-cache url "$B" ../../packages/aa/p-1.whl#sha256=00
	assert_output https://pypi.example/packages/aa/p-1.whl
	run test-cache url "$B" ./p-1.whl
	assert_output https://pypi.example/simple/p/p-1.whl
	run test-cache url "$B" ../../../../x.whl
	assert_output https://pypi.example/x.whl
	run test-cache url "$B" /packages/p-1.whl
	assert_output https://pypi.example/packages/p-1.whl
	run test-cache url "$B" HTTPS://Files.Example:443/p-1.whl
	assert_output https://files.example/p-1.whl
	run test-cache url "$B" //evil.example/p-1.whl
	assert_output "refused: an empty segment"
	for u in http://files.example/p-1.whl javascript:alert file:///etc/passwd; do
		run test-cache url "$B" "$u"
		assert_output "refused: not an https URL"
	done
	run test-cache url "$B" 'https://bad host/p-1.whl'
	assert_output "refused: a URL whose host is not a host"
}

@test "dep rules: npm tarballs' digests from dist.integrity of the document the proxy fetched" {
	sri=sha512-$(openssl dgst -sha512 -binary blob | base64 -w0)
	hex=$(sha512sum blob | cut -c1-128)
	B=https://registry.example/p
	cat >doc.json <<-JSON
		{"name": "p", "versions": {
		  "1.0.0": {"dist": {"tarball": "https://registry.example/p/-/p-1.0.0.tgz", "integrity": "sha1-AAAA $sri"}},
		  "1.0.1": {"dist": {"tarball": "https://registry.example/p/-/p-1.0.1.tgz", "shasum": "$(sha1sum blob | cut -c1-40)"}},
		  "1.0.2": {"dist": {"tarball": "http://registry.example/p/-/p-1.0.2.tgz", "integrity": "$sri"}},
		  "1.0.3": {"dist": {"tarball": "https://registry.example/p/-/p-1.0.3.tgz?x", "integrity": "$sri"}},
		  "1.0.4": {"dist": {"tarball": "https://registry.example/p/-/p-1.0.4.tgz", "integrity": "sha512-short=="}},
		  "1.0.5": {"dist": {"tarball": 5, "integrity": "$sri"}}
		}}
	JSON
	run test-cache npm "$B" doc.json https://registry.example/p/-/p-1.0.0.tgz \
		https://registry.example/p/-/p-1.0.1.tgz https://registry.example/p/-/p-1.0.4.tgz
	assert_success
	assert_line --index 0 "learnt 1"
	assert_line --index 1 "https://registry.example/p/-/p-1.0.0.tgz sha512 $hex"
	assert_line --index 2 "https://registry.example/p/-/p-1.0.1.tgz none"
	assert_line --index 3 "https://registry.example/p/-/p-1.0.4.tgz none"
	# A second document naming the same tarball with other bytes: neither is trusted.
	sed "s|$sri|sha512-$(openssl dgst -sha512 -binary doc.json | base64 -w0)|" doc.json >doc2.json
	run test-cache npm "$B" doc.json,doc2.json https://registry.example/p/-/p-1.0.0.tgz
	assert_success
	assert_line --index 1 "https://registry.example/p/-/p-1.0.0.tgz none"
	run test-cache npm "$B" doc.json,doc.json https://registry.example/p/-/p-1.0.0.tgz
	assert_line --index 1 "https://registry.example/p/-/p-1.0.0.tgz sha512 $hex"
	printf '{"versions": {"1": {}}, "versions": {}}' >dup.json
	for f in dup.json blob; do
		run test-cache npm "$B" "$f"
		assert_failure 1
		assert_output "refused: a package document that is not JSON"
	done
	# What it learnt is what the store checks.
	run test-cache put "$S" 1G https://registry.example/p/-/p-1.0.0.tgz - sha512 "$hex" <blob
	assert_output stored
	head -c 9999 blob >cut
	run test-cache put "$S" 1G https://registry.example/p/-/p-1.0.0.tgz.x - sha512 "$hex" <cut
	assert_output "refused: the artifact's digest does not match"
}

@test "dep rules: PyPI files' digests from the sha256 of their links in the index the proxy fetched" {
	B=https://pypi.example/simple/p/
	cat >index.html <<-HTML
		<!DOCTYPE html><html><body>
		<a href="../../packages/aa/bb/p-1.0-py3-none-any.whl#sha256=$SUM">p-1.0-py3-none-any.whl</a>
		<a href="https://files.example/packages/p-1.0.tar.gz#sha256=$SUM" data-requires-python="&gt;=3">p-1.0.tar.gz</a>
		<a href="https://files.example/packages/p-0.9.tar.gz#md5=0123456789abcdef0123456789abcdef">old</a>
		<a href="https://files.example/packages/p-0.8.tar.gz#sha256=${SUM:0:63}g">bad hex</a>
		<a href="https://files.example/packages/p-0.7.tar.gz?x=1&amp;y=2#sha256=$SUM">query</a>
		<a href="https://files.example/packages/p-0.6.tar.gz#sha256=$SUM
	HTML
	run test-cache pypi "$B" index.html https://pypi.example/packages/aa/bb/p-1.0-py3-none-any.whl \
		https://files.example/packages/p-1.0.tar.gz https://files.example/packages/p-0.9.tar.gz \
		https://files.example/packages/p-0.8.tar.gz https://files.example/packages/p-0.6.tar.gz
	assert_success
	assert_line --index 0 "learnt 2"
	assert_line --index 1 "https://pypi.example/packages/aa/bb/p-1.0-py3-none-any.whl sha256 $SUM"
	assert_line --index 2 "https://files.example/packages/p-1.0.tar.gz sha256 $SUM"
	assert_line --index 3 "https://files.example/packages/p-0.9.tar.gz none"
	assert_line --index 4 "https://files.example/packages/p-0.8.tar.gz none"
	assert_line --index 5 "https://files.example/packages/p-0.6.tar.gz none"
}

@test "dep rules: crates' digests from the cksum of their sparse index lines, by name and version; a download path names its crate" {
	B=https://index.example/se/rd/serde
	O=$(printf '0%.0s' {1..64})
	cat >serde <<-JSON
		{"name":"serde","vers":"1.0.0","deps":[],"cksum":"$SUM","features":{},"yanked":false}
		{"name":"Serde","vers":"1.0.1+build.5","cksum":"${SUM^^}"}
		{"name":"serde","vers":"1.0.2","cksum":"$SUM"}
		{"name":"serde","vers":"1.0.2","cksum":"$O"}
		{"name":"serde","vers":"1.0.3","cksum":"$SUM"}
		{"name":"serde","vers":"1.0.3","cksum":"$SUM"}
		{"name":"serde_json","vers":"1.0.4","cksum":"$SUM"}
		{"name":"serde","vers":"1.0.5","cksum":"${SUM:0:63}"}
		{"name":"serde","vers":"1.0.6/../x","cksum":"$SUM"}
		{"name":"serde","vers":"1.0.7","cksum":"${SUM:0:63}g"}
		{"name":"serde","vers":"1.0.8","cksum":"$SUM","name":"x"}
		{"name":"serde\u0000x","vers":"1.0.9","cksum":"$SUM"}
		not json
	JSON
	# The last line has no newline after it.
	printf '{"name":"serde","vers":"1.1.0","cksum":"%s"}' "$SUM" >>serde
	local v ids=()
	for v in 1.0.0 1.0.1+build.5 1.0.2 1.0.3 1.0.4 1.0.5 1.0.7 1.0.8 1.0.9 1.1.0; do
		ids+=("crate:serde@$v")
	done
	run test-cache crates "$B" serde "${ids[@]}" crate:serde_json@1.0.4
	assert_success
	assert_output "learnt 5
crate:serde@1.0.0 sha256 $SUM
crate:serde@1.0.1+build.5 sha256 $SUM
crate:serde@1.0.2 none
crate:serde@1.0.3 sha256 $SUM
crate:serde@1.0.4 none
crate:serde@1.0.5 none
crate:serde@1.0.7 none
crate:serde@1.0.8 none
crate:serde@1.0.9 none
crate:serde@1.1.0 sha256 $SUM
crate:serde_json@1.0.4 none"
	# A second index host giving other bytes for a version: neither is trusted.
	sed "s/$SUM/$O/" serde >other
	run test-cache crates "$B" serde,other crate:serde@1.0.0
	assert_success
	assert_output "learnt 5
crate:serde@1.0.0 none"

	run test-cache crate /crates/Serde/1.0.1+build.5/download
	assert_output "crate:serde@1.0.1+build.5"
	run test-cache crate /serde/serde-1.0.0.crate
	assert_output "crate:serde@1.0.0"
	run test-cache crate /crates/serde_json/serde_json-1.0.0-rc.1.crate
	assert_output "crate:serde_json@1.0.0-rc.1"
	local t
	for t in /crates/serde/serde-1.0.0.tgz /crates/serde/serdx-1.0.0.crate \
		/crates/serde/serde-.crate /crates/se:de/1.0.0/download /crates/serde/1.0~0/download \
		/crates/serde//download /crates/serde/1.0.0 /do/wn/download /crates/serde/v1.0.0/download "/crates/$(printf 'x%.0s' {1..65})/1.0.0/download"; do
		run test-cache crate "$t"
		assert_success
		assert_output --regexp '^refused: not a crate (download|name and version)$'
	done
}

@test "dep rules: a PyPI file path names its blake2b-256; any other spelling names none" {
	H=$(printf 'ab%.0s' {1..32})
	run test-deprules pypi-file "/packages/ab/ab/${H:4}/p-1.0-py3-none-any.whl"
	assert_success
	assert_output "$H"
	local t=("/packages/AB/ab/${H:4}/p-1.whl" "/packages/ab/ab/${H:4:59}A/p-1.whl"
		"/packages/ab/ab/${H:4:59}/p-1.whl" "/packages/ab/ab/${H:4}0/p-1.whl" "/packages/a/bab/${H:4}/p-1.whl"
		"/packages/ab/ab/${H:4}/" "/packages/ab/ab/${H:4}" "/packages/ab/ab/${H:4}/x/p-1.whl"
		"/packages/abab/${H:4}/p-1.whl" "/pkgs/ab/ab/${H:4}/p-1.whl" "/x/packages/ab/ab/${H:4}/p-1.whl"
		"/packages/ab/ab/${H:4}/$(printf 'x%.0s' {1..256})" "/packages/ab/ab/${H:4:58}zz/p-1.whl")
	run test-deprules pypi-file "${t[@]}"
	assert_success
	[ "${#lines[@]}" -eq "${#t[@]}" ]
	local l
	for l in "${lines[@]}"; do
		assert_equal "$l" "refused: not a PyPI file path"
	done
	# 255 bytes of file name is the most.
	run test-deprules pypi-file "/packages/ab/ab/${H:4}/$(printf 'x%.0s' {1..255})"
	assert_output "$H"
}

@test "dep rules: 100,000 digests learnt, relearnt and looked up in well under a second; a conflict forgets" {
	run timeout 20 test-deprules bench 100000
	assert_success
	assert_line --index 0 "learnt 20000"
	assert_line --index 1 "found 10000"
	assert_line --index 2 "forgotten 10000"
	assert_line --index 3 "table 100000 found 50000"
	ms=${lines[4]#cpu_ms }
	echo "the table's CPU time: $ms ms"
	[ "$ms" -lt 1000 ]
	# The bound on the keys' bytes: 64 MiB of 2000-byte keys, then nothing more.
	run test-deprules bytes 2000
	assert_success
	assert_output "learnt 33537 bytes 67107537"
}

@test "dep rules: go's h1 of a module zip, bounded; a name with .., a name twice, a bomb, a zip64 or a cut zip is refused" {
	python3 - <<-'PY'
		import zipfile, struct, zlib
		def mk(path, files, method=zipfile.ZIP_DEFLATED):
		    with zipfile.ZipFile(path, "w", method) as z:
		        for n, d in files:
		            z.writestr(n, d)
		import random
		rnd = random.Random(7)
		# big.go: over 64 KiB both deflated and inflated, so a step stops inside it
		big = "".join("// %08x %s\n" % (rnd.getrandbits(32), "x" * rnd.randrange(40)) for _ in range(12000)).encode()
		good = [("m@v1/go.mod", b"module m\n"), ("m@v1/a.go", b"package m\n" * 100), ("m@v1/b/", b""), ("m@v1/big.go", big)]
		mk("good.zip", good)
		mk("stored.zip", good, zipfile.ZIP_STORED)
		mk("dotdot.zip", good + [("m@v1/../evil.go", b"x")])
		mk("abs.zip", good + [("/etc/evil.go", b"x")])
		mk("back.zip", good + [("m@v1\\..\\evil.go", b"x")])
		import warnings; warnings.simplefilter("ignore")
		mk("twice.zip", good + [("m@v1/a.go", b"other")])
		mk("bomb.zip", [("m@v1/z", b"\0" * (8 << 20))])
		def patch(src, dst, off, fmt, val):
		    b = bytearray(open(src, "rb").read())
		    cd = b.rfind(b"PK\x01\x02")
		    struct.pack_into(fmt, b, cd + off, val)
		    open(dst, "wb").write(b)
		patch("bomb.zip", "bomb-small.zip", 24, "<I", 100)        # says 100 bytes, inflates to 8 MiB
		patch("bomb.zip", "bomb-big.zip", 24, "<I", 0xfffffffe)   # says 4 GiB: over the bound
		b = bytearray(open("good.zip", "rb").read()); cd = b.find(b"PK\x01\x02"); struct.pack_into("<I", b, cd + 16, 1); open("crc.zip", "wb").write(b)
		b = open("good.zip", "rb").read()
		open("cut.zip", "wb").write(b[:-1])
		# a.go's deflated bytes said to be 5 fewer: its stream ends past them
		e = bytearray(b); cd = e.rfind(b"PK\x01\x02", 0, e.rfind(b"m@v1/a.go"))
		struct.pack_into("<I", e, cd + 20, struct.unpack_from("<I", e, cd + 20)[0] - 5); open("short-entry.zip", "wb").write(e)
		e = bytearray(b); struct.pack_into("<H", e, len(e) - 22 + 10, 0xffff); struct.pack_into("<H", e, len(e) - 22 + 8, 0xffff)
		open("zip64.zip", "wb").write(e)
		import hashlib, base64
		z = zipfile.ZipFile("good.zip")
		s = "".join("%s  %s\n" % (hashlib.sha256(z.read(n)).hexdigest(), n) for n in sorted(z.namelist()))
		open("good.h1", "w").write("h1:" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "\n")
	PY
	run test-gosum zip good.zip
	assert_success
	assert_output "$(cat good.h1)"
	run test-gosum zip stored.zip
	assert_output "$(cat good.h1)"
	# In steps, as the proxy works it out (a byte, 100 and 64 KiB at a time): the same.
	local budget
	for budget in 1 100 65536; do
		for z in good stored; do
			run test-gosum zip:$budget $z.zip
			assert_success
			assert_output "$(cat good.h1)"
		done
		run test-gosum zip:$budget bomb-small.zip
		assert_output "refused: a zip entry bigger than it says"
		run test-gosum zip:$budget crc.zip
		assert_output "refused: a zip entry whose size or CRC-32 is not its own"
		run test-gosum zip:$budget short-entry.zip
		assert_output "refused: a zip entry cut short"
	done
	run test-gosum zip short-entry.zip
	assert_output "refused: a zip entry cut short"
	local z
	for z in dotdot abs back; do
		run test-gosum zip $z.zip
		assert_success
		assert_output "refused: a zip entry with a name no module holds"
	done
	run test-gosum zip twice.zip
	assert_output "refused: a zip with one name twice"
	run test-gosum zip bomb-small.zip
	assert_output "refused: a zip entry bigger than it says"
	run test-gosum zip bomb-big.zip
	assert_output "refused: a zip that inflates past the bound"
	run test-gosum zip crc.zip
	assert_output "refused: a zip entry whose size or CRC-32 is not its own"
	run test-gosum zip cut.zip
	assert_output "refused: a zip without its end record"
	run test-gosum zip zip64.zip
	assert_output "refused: a zip on several disks, or a zip64"
	head -c 21 good.zip >short.zip
	run test-gosum zip short.zip
	assert_output "refused: a zip shorter than its end record"
}

@test "dep rules: go's h1 from a checksum database lookup whose note verifies, for its own module only; Go's case-encoding" {
	mkdir db
	python3 "$TOP/t/go-proxy" lookup --dir db example.com/Big@v1.0.0-RC1 example.com/m@v1.0.0 >lk
	local k real='sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8' B='https://sum.example/lookup/example.com/!big@v1.0.0-!r!c1'
	k=$(cat db/vkey)
	local zh mh
	zh=$(sed -n 's/^example.com\/Big v1.0.0-RC1 \(h1:.*\)$/\1/p' lk)
	mh=$(sed -n 's/^example.com\/Big v1.0.0-RC1\/go.mod \(h1:.*\)$/\1/p' lk)
	run test-gosum lookup "$B" lk "$real,$k" /example.com/!big/@v/v1.0.0-!r!c1.zip \
		/prefix/example.com/!big/@v/v1.0.0-!r!c1.mod /example.com/Big/@v/v1.0.0-!r!c1.zip \
		/example.com/!big/@v/v1.0.0-RC1.zip /example.com/!!big/@v/v1.0.0-!r!c1.zip \
		/example.com/!big/@v/list /example.com/!big/@v/v1.0.0-!r!c1.info /example.com/!big/@v/x/v1.zip
	assert_success
	assert_output "learnt 2
/example.com/!big/@v/v1.0.0-!r!c1.zip zip $zh
/prefix/example.com/!big/@v/v1.0.0-!r!c1.mod mod $mh
/example.com/Big/@v/v1.0.0-!r!c1.zip zip none
/example.com/!big/@v/v1.0.0-RC1.zip zip none
/example.com/!!big/@v/v1.0.0-!r!c1.zip zip none
/example.com/!big/@v/list not a download
/example.com/!big/@v/v1.0.0-!r!c1.info not a download
/example.com/!big/@v/x/v1.zip not a download"
	# Signed by a key the proxy was not given: nothing learnt.
	run test-gosum lookup "$B" lk "$real" /example.com/!big/@v/v1.0.0-!r!c1.zip
	assert_output "refused: a note signed by no known key
/example.com/!big/@v/v1.0.0-!r!c1.zip zip none"
	# The signature's last byte changed.
	touch db/BADNOTE
	python3 "$TOP/t/go-proxy" lookup --dir db example.com/Big@v1.0.0-RC1 >bad
	run test-gosum lookup "$B" bad "$k" /example.com/!big/@v/v1.0.0-!r!c1.zip
	assert_output "refused: a note whose signature does not verify
/example.com/!big/@v/v1.0.0-!r!c1.zip zip none"
	# A lookup of another module, or with its text changed under the note, teaches nothing of this one.
	run test-gosum lookup 'https://sum.example/lookup/example.com/m@v1.0.0' lk "$k" /example.com/!big/@v/v1.0.0-!r!c1.zip
	assert_output "learnt 0
/example.com/!big/@v/v1.0.0-!r!c1.zip zip none"
	sed '/^go.sum database tree$/{n;s/^2$/3/}' lk >lk3
	run test-gosum lookup "$B" lk3 "$k"
	assert_output "refused: a note whose signature does not verify"
	run test-gosum unescape path 'example.com/!big/x'
	assert_output example.com/Big/x
	for k in 'example.com/Big' 'a/!' 'a/!!b' 'a/!1' 'a b' 'a%21b' ''; do
		run test-gosum unescape path "$k"
		assert_success
		assert_output --regexp '^refused: '
	done
	run test-gosum unescape version 'v1.0.0-!r!c1+incompatible'
	assert_output v1.0.0-RC1+incompatible
	run test-gosum unescape version 'v1/x'
	assert_output "refused: a byte Go's case-encoding never gives"
}

@test "dep rules: Debian packages' digests from the SHA256 of a Packages index (plain or gzip) under dists/; hostile paragraphs teach nothing" {
	B=https://deb.example/debian/dists/stable/main/binary-amd64/Packages
	R=https://deb.example/debian/pool/main
	O=$(printf '0%.0s' {1..64})
	long=$(printf 'x%.0s' {1..5000})
	cat >Packages <<-EOF
		Package: a
		Version: 1.0
		Filename: pool/main/a/a_1.0_all.deb
		Size: 10000
		SHA256: $SUM
		Description: a $long
		 a continuation line
		
		Package: b
		filename:   pool/main/b/b_1.0~rc1+x_amd64.udeb  
		sha256: ${SUM^^}
		
		Package: twice
		Filename: pool/main/t/t_1_all.deb
		SHA256: $SUM
		SHA256: $SUM
		
		Package: nosum
		Filename: pool/main/n/n_1_all.deb
		
		Package: badhex
		Filename: pool/main/h/h_1_all.deb
		SHA256: ${SUM:0:63}g
		
		Package: short
		Filename: pool/main/s/s_1_all.deb
		SHA256: ${SUM:0:63}
		
		Package: climb
		Filename: pool/../../etc/x.deb
		SHA256: $SUM
		
		Package: dot
		Filename: pool/./main/d.deb
		SHA256: $SUM
		
		Package: empty
		Filename: pool//main/e.deb
		SHA256: $SUM
		
		Package: abs
		Filename: /pool/main/abs.deb
		SHA256: $SUM
		
		Package: url
		Filename: https://evil.example/x.deb
		SHA256: $SUM
		
		Package: escape
		Filename: pool/main/p%2e.deb
		SHA256: $SUM
		
		Package: notdeb
		Filename: pool/main/n/n_1.dsc
		SHA256: $SUM
		
		Package: folded
		Filename: pool/main/f/f_1_all.deb
		 pool/main/f/g_1_all.deb
		SHA256: $SUM
		
		Package: overlong
		Filename: pool/main/o/$long.deb
		SHA256: $SUM
		
		Package: conflict
		Filename: pool/main/c/c_1_all.deb
		SHA256: $SUM
		
		Package: conflict
		Filename: pool/main/c/c_1_all.deb
		SHA256: $O
	EOF
	# The last paragraph has no newline after it.
	printf '\nFilename: pool/main/z/z_1_all.deb\nSHA256: %s' "$SUM" >>Packages
	local k keys=()
	for k in a/a_1.0_all.deb b/b_1.0~rc1+x_amd64.udeb t/t_1_all.deb n/n_1_all.deb h/h_1_all.deb \
		s/s_1_all.deb d.deb e.deb abs.deb n/n_1.dsc f/f_1_all.deb c/c_1_all.deb z/z_1_all.deb; do
		keys+=("$R/$k")
	done
	run test-cache debian "$B" Packages "${keys[@]}" https://deb.example/etc/x.deb https://evil.example/x.deb
	assert_success
	assert_output "learnt 3
$R/a/a_1.0_all.deb sha256 $SUM
$R/b/b_1.0~rc1+x_amd64.udeb sha256 $SUM
$R/t/t_1_all.deb none
$R/n/n_1_all.deb none
$R/h/h_1_all.deb none
$R/s/s_1_all.deb none
$R/d.deb none
$R/e.deb none
$R/abs.deb none
$R/n/n_1.dsc none
$R/f/f_1_all.deb none
$R/c/c_1_all.deb none
$R/z/z_1_all.deb sha256 $SUM
https://deb.example/etc/x.deb none
https://evil.example/x.deb none"
	# gzip, and the same gzip as a by-hash file: the root is the URL up to dists/.
	gzip -9n <Packages >Packages.gz
	# Read as the proxy reads it, a piece at a time as it comes, plain or gzip:
	# the same answer, whatever the pieces' size.
	local want=$output piece f
	for piece in 1 5 7 4096; do
		for f in Packages Packages.gz; do
			run test-cache debian:$piece "$B" $f "${keys[@]}" https://deb.example/etc/x.deb https://evil.example/x.deb
			assert_success
			assert_output "$want"
		done
	done
	run test-cache debian https://deb.example/debian/dists/stable/main/binary-amd64/by-hash/SHA256/$O \
		Packages.gz "$R/a/a_1.0_all.deb"
	assert_success
	assert_output "learnt 3
$R/a/a_1.0_all.deb sha256 $SUM"
	# A second index giving a package other bytes: neither is trusted.
	sed "s/^SHA256: $SUM/SHA256: $O/" Packages >other
	run test-cache debian "$B" Packages,other "$R/a/a_1.0_all.deb" "$R/z/z_1_all.deb"
	assert_success
	assert_output "learnt 3
$R/a/a_1.0_all.deb none
$R/z/z_1_all.deb none"
	# Cut short, xz, outside dists/, bytes after the gzip's end: nothing learnt.
	head -c 300 Packages.gz >cut.gz
	cat Packages.gz Packages.gz >two.gz
	printf '\3757zXZ\0rest' >Packages.xz
	for piece in 0 1 3; do
		for f in cut.gz two.gz Packages.xz; do
			m=debian
			[ "$piece" = 0 ] || m=debian:$piece
			run test-cache $m "$B" "$f" "$R/a/a_1.0_all.deb"
			assert_failure 1
			case $f in
			cut.gz) assert_output "refused: a gzip index cut short" ;;
			two.gz) assert_output "refused: a gzip index with bytes after its end" ;;
			*) assert_output "refused: an xz, bzip2 or zstd index, which aibox cannot read" ;;
			esac
		done
	done
	# Two bytes of gzip's magic and nothing more, and an empty index.
	head -c 2 Packages.gz >magic.gz
	run test-cache debian:1 "$B" magic.gz
	assert_failure 1
	assert_output "refused: a gzip index cut short"
	: >empty
	run test-cache debian:1 "$B" empty
	assert_success
	assert_output "learnt 0"
	run test-cache debian https://deb.example/debian/Packages Packages
	assert_failure 1
	assert_output "refused: an index outside a dists/ folder"

	run test-cache deb-path /debian/dists/stable/main/binary-amd64/by-hash/SHA256/$SUM
	assert_output "by-hash sha256 $SUM"
	run test-cache deb-path /debian/dists/stable/main/binary-amd64/by-hash/SHA256/${SUM:0:63}g
	assert_output other
	run test-cache deb-path /debian/dists/stable/main/binary-amd64/by-hash/MD5Sum/${SUM:0:32}
	assert_output other
	run test-cache deb-path /debian/dists/stable/main/binary-amd64/Packages.gz
	assert_output index
	run test-cache deb-path /debian/pool/main/Packages.gz
	assert_output other
	run test-cache deb-path /debian/dists/stable/main/binary-amd64/Packages.xz
	assert_output other
	run test-cache deb-path /debian/dists/stable/InRelease
	assert_output other
	run test-cache deb-path /debian/pool/main/a/a_1.0_all.deb
	assert_output package
}
