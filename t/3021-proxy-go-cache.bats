#!/usr/bin/env bats
# The dependency cache's go kind in aibox-proxy (docs/cache.md, "go"): a
# checksum database's /lookup answer whose note verifies teaches the h1 of a
# module's zip and .mod; the zip is checked whole, read back from its fill.
# t/go-proxy is a loopback GOPROXY and checksum database (signed notes,
# tiles); the host's real go command goes through the proxy, trusting the
# task CA, to "localhost." (the go command sends "localhost" and loopback
# addresses through no proxy; the proxy takes the name without its dot).
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy
load lib-deps

MODS=(example.com/m@v1.0.0 example.com/Big@v1.2.0-RC1)

setup_file() {
	make_test_ca "$BATS_FILE_TMPDIR/ca"
	mkdir "$BATS_FILE_TMPDIR/db"
	"$PY" "$TOP/t/go-proxy" lookup --dir "$BATS_FILE_TMPDIR/db" "${MODS[0]}" >/dev/null
}

# start_goproxy [ARGS...]: t/go-proxy on a free port (REG), requests in $T/reg.log, its files in $T/db.
start_goproxy() {
	: >"$T/reg.log"
	rm -f "$T/reg.port"
	"$PY" "$TOP/t/go-proxy" serve --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/db" \
		--port-file "$T/reg.port" --log "$T/reg.log" "$@" "${MODS[@]}" 2>"$T/reg.err" &
	REG_PID=$!
	wait_until 10 file_or_gone "$T/reg.port" $REG_PID || return 1
	REG=$(cat "$T/reg.port")
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	cp -r "$BATS_FILE_TMPDIR/db" "$T/db"
	export SSL_CERT_FILE=$T/ca/ca.pem
	export AIBOX_DEPS_CACHE=$T/deps
	unset NO_PROXY no_proxy
	start_goproxy
	printf 'rule localhost:%s\ncache go\nsumdb-key %s\n' "$REG" "$(cat "$T/db/vkey")" >"$T/rules"
}

teardown() {
	stop_proxy || true
	[ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null || true
	common_teardown
}

# task: one task's proxy with $T/rules, the store at $T/deps, its record in $T/record.json.
task() {
	dep_task "$T/rules" "$T/deps"
}

# restart_goproxy VKEY: t/go-proxy started again (it reads $T/db's switch
# files when it starts), the rule trusting the key in the file VKEY, a new task.
restart_goproxy() {
	stop_proxy || true
	kill "$REG_PID"
	wait "$REG_PID" || true
	start_goproxy
	printf 'rule localhost:%s\ncache go\nsumdb-key %s\n' "$REG" "$(cat "$1")" >"$T/rules"
	task
}

reg_count() {
	log_count "$T/reg.log" "$1"
}

# go_download N: the host's go mod download of both modules in a fresh
# project, GOPATH and module cache ($T/go-N), through the proxy; the
# GOPROXY and the database under the path GOPREFIX (none when unset).  Then
# proxy_settle: the lines of its last requests are in proxy.log.
go_download() {
	local d=$T/go-$1
	mkdir -p "$d/p"
	printf 'module p\n\ngo 1.19\n\nrequire (\n\texample.com/m v1.0.0\n\texample.com/Big v1.2.0-RC1\n)\n' >"$d/p/go.mod"
	local st=0
	(cd "$d/p" && env HTTPS_PROXY="$PROXY" SSL_CERT_FILE="$T/taskca.pem" GOPATH="$d/gopath" \
		GOMODCACHE="$d/gopath/pkg/mod" GOCACHE="$d/cache" GOFLAGS=-mod=mod GOTOOLCHAIN=local \
		GOPROXY="https://localhost.:$REG${GOPREFIX:-}" GOSUMDB="$(cat "$T/db/vkey") https://localhost.:$REG${GOPREFIX:-}" \
		GONOSUMDB= GOPRIVATE= GOINSECURE= go mod download -x all) || st=$?
	proxy_settle
	return "$st"
}

# gosum_tasks: two tasks one after the other, each a go mod download with
# $T/go-1's go.sum (under GOPREFIX, as go_download takes it): each makes only
# the proxy's own lookups, one a module version, for its .mod and its zip;
# the second takes every zip and .mod from the store.
gosum_tasks() {
	local i p=${GOPREFIX:-}
	for i in 2 3; do
		: >"$T/reg.log"
		task
		mkdir -p "$T/go-$i/p"
		cp "$T/go-1/p/go.sum" "$T/go-$i/p/"
		run go_download "$i"
		assert_success
		run cat "$T/go-$i/gopath/pkg/mod/example.com/m@v1.0.0/m.go"
		assert_output --partial 'const V = "example.com/m@v1.0.0"'
		assert_equal "$(reg_count "^GET $p/lookup/")" 2
		run grep -c " GET $p/lookup/[^ ]* status=200 cache=fetch " "$T/proxy.log"
		assert_output 2
		stop_proxy
	done
	assert_equal "$(reg_count '\.(zip|mod)$')" 0
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 4
}

@test "cache go: the first task's go mod download fills the store, the second's takes every zip and .mod from it" {
	command -v go >/dev/null || skip "no go on this host (packages.txt: golang-go)"
	task
	run go_download 1
	assert_success
	run cat "$T/go-1/gopath/pkg/mod/example.com/!big@v1.2.0-!r!c1/m.go"
	assert_output --partial 'const V = "example.com/Big@v1.2.0-RC1"'
	assert_equal "$(reg_count '\.zip$')" 2
	# The go command asks for a .mod before its lookup: the proxy fetches the lookup itself
	# then (cache=fetch), and the go command's own lookup comes after.
	assert_equal "$(reg_count '^GET /lookup/example.com/!big@v1.2.0-!r!c1$')" 2
	run grep -c ' cache=fetch ' "$T/proxy.log"
	assert_output 2
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 4
	stop_proxy
	run aibox cache list
	assert_success
	assert_line --regexp "https://localhost:$REG/example.com/!big/@v/v1.2.0-!r!c1.zip#h1=[0-9a-f]{64}\$"
	assert_line --regexp "https://localhost:$REG/example.com/!big/@v/v1.2.0-!r!c1.mod#h1=[0-9a-f]{64}\$"

	: >"$T/reg.log"
	task
	run go_download 2
	assert_success
	run cat "$T/go-2/gopath/pkg/mod/example.com/m@v1.0.0/m.go"
	assert_output --partial 'const V = "example.com/m@v1.0.0"'
	# The lookups and tiles still come from upstream; no zip and no .mod does.
	assert_equal "$(reg_count '\.zip$')" 0
	assert_equal "$(reg_count '\.mod$')" 0
	assert_equal "$(reg_count '^GET /lookup/')" 4
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 4
}

@test "cache go: with a go.sum the go command asks the database nothing: the proxy looks each module version up itself, once, and the next task's zips and .mod files come from the store" {
	command -v go >/dev/null || skip "no go on this host (packages.txt: golang-go)"
	task
	run go_download 1
	assert_success
	run grep -c 'h1:' "$T/go-1/p/go.sum"
	assert_output 4
	stop_proxy
	rm -rf "$T/deps"
	gosum_tasks
}

@test "cache go: a GOPROXY under a path prefix (the rule's prefix): the proxy looks a zip up itself under it, for that exact spelling only, and go with a go.sum fills then hits" {
	kill "$REG_PID"
	wait "$REG_PID" || true
	local P=/art/api/go/go-remote u
	start_goproxy --prefix "$P"
	printf 'rule localhost:%s\ncache go\nsumdb-key %s\nprefix %s\n' "$REG" "$(cat "$T/db/vkey")" "$P" >"$T/rules"
	task
	u=https://localhost.:$REG
	# Other spellings of the prefix, or none: nothing looked up, forwarded as they are.
	local bad
	for bad in "/example.com/m/@v/v1.0.0.zip" "/art/api/go/go-remotex/example.com/m/@v/v1.0.0.zip" \
		"/art/api/go/example.com/m/@v/v1.0.0.zip" "/art//api/go/go-remote/example.com/m/@v/v1.0.0.zip" \
		"/art/api/go/./go-remote/example.com/m/@v/v1.0.0.zip" "/art/api/go/x/../go-remote/example.com/m/@v/v1.0.0.zip" \
		"/art/api/go/go%2dremote/example.com/m/@v/v1.0.0.zip" "/ART/api/go/go-remote/example.com/m/@v/v1.0.0.zip" \
		"$P//example.com/m/@v/v1.0.0.zip" "$P/./example.com/m/@v/v1.0.0.zip" "$P/@v/v1.0.0.zip" "$P"; do
		run icurl --path-as-is -o /dev/null "$u$bad"
		assert_success
	done
	assert_equal "$(reg_count '/lookup/')" 0
	run grep -c ' cache=fetch ' "$T/proxy.log"
	assert_output 0
	# The exact spelling: its lookup under the prefix, once, then the zip checked and stored.
	run icurl -f -o "$T/z" "$u$P/example.com/m/@v/v1.0.0.zip"
	assert_success
	run grep -c " GET $P/lookup/example.com/m@v1.0.0 status=200 cache=fetch " "$T/proxy.log"
	assert_output 1
	run grep -c " GET $P/example.com/m/@v/v1.0.0.zip status=200 cache=fill " "$T/proxy.log"
	assert_output 1
	stop_proxy
	rm -rf "$T/deps"
	# The real go command under the prefix: a go.sum made, then two tasks with it.
	command -v go >/dev/null || skip "no go on this host (packages.txt: golang-go)"
	GOPREFIX=$P
	task
	run go_download 1
	assert_success
	stop_proxy
	rm -rf "$T/deps"
	gosum_tasks
}

@test "cache go: a zip asked before its lookup makes the proxy look it up itself; after a lookup whose note does not verify it is forwarded and not stored" {
	task
	run icurl -f -o "$T/z" "https://localhost.:$REG/example.com/m/@v/v1.0.0.zip"
	assert_success
	run grep -c ' GET /lookup/example.com/m@v1.0.0 status=200 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c ' GET /example.com/m/@v/v1.0.0.zip status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
	# Hostile spellings look nothing up: a query, an escape, a dot segment, an odd version.
	local bad
	for bad in '/example.com/m/@v/v1.0.0.zip?x=1' '/example.com/%6d/@v/v1.0.0.zip' \
		'/example.com/./m/@v/v1.0.0.zip' '/example.com/m/@v/V1.0.0.zip' '/example.com//m/@v/v1.0.0.mod' \
		'/.x/@v/v1.0.0.mod' '/@v/v1.0.0.zip' '/example.com/m/@v/v1.0.0.zip/' '/example.com/M/@v/v1.0.0.mod'; do
		run icurl --path-as-is -o /dev/null "https://localhost.:$REG$bad"
		assert_success
	done
	assert_equal "$(reg_count '^GET /lookup/')" 1
	stop_proxy
	rm -rf "$T/deps"
	# The database's note signed by another key than the rule's: nothing is learnt.
	rm "$T/db/sumdb.key"
	restart_goproxy "$BATS_FILE_TMPDIR/db/vkey"
	run icurl -f -o /dev/null "https://localhost.:$REG/lookup/example.com/m@v1.0.0"
	assert_success
	run icurl -f -o "$T/z" "https://localhost.:$REG/example.com/m/@v/v1.0.0.zip"
	assert_success
	run icurl -f -o /dev/null "https://localhost.:$REG/example.com/m/@v/v1.0.0.mod"
	assert_success
	run grep -c ' cache=meta ' "$T/proxy.log"
	assert_output 1
	run grep -c ' cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c ' (the metadata the proxy fetched does not name it) status=200 cache=bypass ' "$T/proxy.log"
	assert_output 2
	run aibox cache list
	assert_success
	refute_output --partial "localhost:$REG"
}

@test "cache go: a zip whose files do not match the h1, or holding a ../ name, is cut and not stored" {
	local bad
	for bad in TAMPER ZIPNAMES; do
		touch "$T/db/$bad"
		restart_goproxy "$T/db/vkey"
		run icurl -f -o /dev/null "https://localhost.:$REG/lookup/example.com/m@v1.0.0"
		assert_success
		run icurl -f -o "$T/z" "https://localhost.:$REG/example.com/m/@v/v1.0.0.zip"
		assert_failure
		run grep -cF 'GET /example.com/m/@v/v1.0.0.zip (the artifact does not match the digest its metadata gives) status=200 cache=bad' "$T/proxy.log"
		assert_output 1
		# The .mod is right: it is stored.
		run icurl -f -o /dev/null "https://localhost.:$REG/example.com/m/@v/v1.0.0.mod"
		assert_success
		run aibox cache list
		assert_success
		refute_output --partial ".zip#h1="
		assert_output --partial ".mod#h1="
		rm "$T/db/$bad"
		rm -rf "$T/deps"
	done
}
