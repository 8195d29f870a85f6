#!/usr/bin/env bats
# What a hostile VM tries against the shared store (docs/cache.md): metadata
# made to look like an artifact, a private artifact fetched by what a secret's
# request left (a cookie, a kept connection).  A loopback server of files (t/probe-registry)
# with a CA of its own; each proxy stands for one task, as in t/3020.
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy
load lib-deps

PH=aibox-secret-0123456789abcdef0123456789abcdef

setup_file() {
	make_test_ca "$BATS_FILE_TMPDIR/ca"
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	export SSL_CERT_FILE=$T/ca/ca.pem
	export AIBOX_DEPS_CACHE=$T/deps
	mkdir -p "$T/reg/www"
}

teardown() {
	stop_proxy || true
	end_paused
	end_hostile_filler
	[ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null || true
	common_teardown
}

# probe_registry [ARGS...]: t/probe-registry serving $T/reg/www on a free port (REG).
probe_registry() {
	serve_registry "$TOP/t/probe-registry" "$@"
}

# private_registry [ARGS...]: probe_registry with its /priv/ behind the token
# tok-value, holding the package priv 1.0.0 (u: its URL); $T/rules-secret
# gives the secret TOK for it and caches it as npm.
private_registry() {
	printf 'tok-value\n' >"$T/token"
	probe_registry --token-file "$T/token" "$@"
	u=https://localhost:$REG
	mkdir -p "$T/reg/www/priv/-"
	make_npm_tgz "$T/reg/www/priv/-" priv 1.0.0
	npm_doc priv 1.0.0 "$u/priv/-/priv-1.0.0.tgz" "$(sri "$T/reg/www/priv/-/priv-1.0.0.tgz")" >"$T/reg/www/priv/index"
	printf 'secret TOK %s\nvalue tok-value\nhost localhost:%s\nrule localhost:%s\ncache npm\n' \
		"$PH" "$REG" "$REG" >"$T/rules-secret"
}

# sri FILE: npm's integrity of FILE's bytes.
sri() {
	printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
}

# npm_doc NAME VERSION TARBALL INTEGRITY: a package document naming one version.
npm_doc() {
	printf '{"name": "%s", "dist-tags": {"latest": "%s"}, "versions": {"%s": {"name": "%s", "version": "%s", "dist": {"tarball": "%s", "integrity": "%s"}}}}\n' \
		"$1" "$2" "$2" "$1" "$2" "$3" "$4"
}

@test "cache hostile: a document named as a tarball with its digest of today is neither stored nor served stale to a later task" {
	probe_registry
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	local u=https://localhost:$REG
	# lodash's document as upstream has it today: its latest is 1.0.0.
	npm_doc lodash 1.0.0 "$u/lodash/-/lodash-1.0.0.tgz" sha512-x >"$T/reg/www/lodash"
	# A package the VM published: one version whose "tarball" is lodash's document.
	npm_doc evil 1.0.0 "$u/lodash" "$(sri "$T/reg/www/lodash")" >"$T/reg/www/evil"
	dep_task "$T/rules" "$T/deps"
	run icurl -f -o /dev/null "$u/evil"
	assert_success
	run icurl -f -o /dev/null "$u/lodash"
	assert_success
	run aibox cache list
	assert_success
	# The store must never hold metadata.
	refute_output --partial "$u/lodash#"
	# Upstream publishes lodash 2.0.0 (a security fix); a later task reads evil's document
	# (a dependency of its project), then lodash's.
	npm_doc lodash 2.0.0 "$u/lodash/-/lodash-2.0.0.tgz" sha512-x >"$T/reg/www/lodash"
	dep_task "$T/rules" "$T/deps"
	run icurl -f -o /dev/null "$u/evil"
	assert_success
	run icurl -f -sS "$u/lodash"
	assert_success
	# Metadata is never served from the store: the task gets today's document.
	assert_output --partial '"latest": "2.0.0"'
}

@test "cache hostile: an artifact fetched with the session cookie a secret's request got stays the project's: another project is not served it" {
	local u
	private_registry
	# Project a's task: its private document with the secret (the registry gives a
	# session cookie), then the tarball with that cookie and no placeholder.
	dep_task "$T/rules-secret" "$T/deps" --cache-scope project:a
	run icurl -f -o /dev/null -c "$T/jar" -H "Authorization: Bearer $PH" "$u/priv/index"
	assert_success
	run icurl -f -o /dev/null -b "$T/jar" "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	run aibox cache list
	assert_success
	# What the secret let in is project a's, or not kept.
	refute_line --regexp "  -  $u/priv/-/priv-1.0.0.tgz#"
	# Project b's task, with no secret, and a public document naming the
	# private tarball with its digest (the VM of project a read it).
	npm_doc pub 1.0.0 "$u/priv/-/priv-1.0.0.tgz" "$(sri "$T/reg/www/priv/-/priv-1.0.0.tgz")" >"$T/reg/www/pub"
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	dep_task "$T/rules" "$T/deps" --cache-scope project:b
	run icurl -f -o /dev/null "$u/pub"
	assert_success
	run icurl -o "$T/got.tgz" -w '%{http_code}' "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	# Project b has no secret: upstream refuses it, and the store must not give it.
	assert_output 401
}

# fill_private: project a's task fills the private tarball with the secret, and
# a second task of it with the same secret is served it from the store.
fill_private() {
	local i
	for i in 1 2; do
		dep_task "$T/rules-secret" "$T/deps" --cache-scope project:a
		run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$u/priv/index" \
			--next -x "$PROXY" --cacert "$T/taskca.pem" -f -o /dev/null -H "Authorization: Bearer $PH" "$u/priv/-/priv-1.0.0.tgz"
		assert_success
	done
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
	run grep -c '^GET /priv/-/priv-1.0.0.tgz ' "$T/reg.log"
	assert_output 1
	# The store holds no secret's value, nor its unkeyed SHA-256.
	run grep -rl tok-value "$T/deps"
	assert_failure 1
	run grep -rl "$(printf tok-value | sha256sum | cut -c1-32)" "$T/deps"
	assert_failure 1
	run aibox cache list
	assert_line --regexp "  project:a/[0-9a-f]{32}  $u/priv/-/priv-1.0.0.tgz#"
	# A public document names the private tarball with its digest (the VM read it):
	# a later task learns the digest without the secret.
	npm_doc pub 1.0.0 "$u/priv/-/priv-1.0.0.tgz" "$(sri "$T/reg/www/priv/-/priv-1.0.0.tgz")" >"$T/reg/www/pub"
}

# asks_upstream RULES AUTH: project a's task (RULES) reads the public document,
# then asks for the private tarball with "Authorization: AUTH": the registry, which
# takes only the old token, refuses it (401), and the store serves nothing.
asks_upstream() {
	dep_task "$1" "$T/deps" --cache-scope project:a
	run icurl -f -o /dev/null "$u/pub"
	assert_success
	run icurl -o /dev/null -w '%{http_code}' -H "Authorization: $2" "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	assert_output 401
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 0
}

@test "cache hostile: a copy of the store holds no key to try guessed secrets against; an old store's own key moves out, what it scoped still served" {
	local u
	private_registry
	fill_private
	# The key of the secrets' scopes is the user's (the task's --cache-key), not the store's.
	run find "$T/deps" -name '*key*'
	assert_output ""
	[ "$(stat -c '%s %a' "$T/scope-key")" = "32 600" ]
	# A store of before, its key inside it: the next task moves it out, and what it
	# scoped is still served.
	mv "$T/scope-key" "$T/deps/scope-key"
	cp "$T/deps/scope-key" "$T/old-key"
	dep_task "$T/rules-secret" "$T/deps" --cache-scope project:a
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$u/priv/index" \
		--next -x "$PROXY" --cacert "$T/taskca.pem" -f -o /dev/null -H "Authorization: Bearer $PH" "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
	[ ! -e "$T/deps/scope-key" ] || fail "the store still holds its old key"
	cmp "$T/old-key" "$T/scope-key"
	# One left in a store that the user's key already replaced scopes nothing: it goes too.
	head -c 32 /dev/urandom >"$T/deps/scope-key"
	dep_task "$T/rules-secret" "$T/deps" --cache-scope project:a
	[ ! -e "$T/deps/scope-key" ] || fail "the store still holds a key"
	cmp "$T/old-key" "$T/scope-key"
}

@test "cache hostile: an artifact fetched with a secret is not served to its project once the secret's value changed" {
	local u
	private_registry
	fill_private
	# The secret is rotated: a task with the new value asks upstream again.
	sed -i 's/^value tok-value$/value tok-new/' "$T/rules-secret"
	asks_upstream "$T/rules-secret" "Bearer $PH"
}

@test "cache hostile: an artifact fetched with a secret is not served to its project once the secret is removed" {
	local u
	private_registry
	fill_private
	# The project's config no longer gives the secret; its VM sends a credential of its own.
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	asks_upstream "$T/rules" "Bearer made-up"
}

@test "cache hostile: a simple index named with a #sha256= on any page of a pypi host is neither stored nor served stale" {
	probe_registry
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	local u=https://localhost:$REG
	mkdir -p "$T/reg/www/simple/requests" "$T/reg/www/project/evil"
	printf '<html><body><a href="%s/packages/requests-1.0.tar.gz#sha256=%s">requests-1.0.tar.gz</a></body></html>\n' \
		"$u" "$(printf 1 | sha256sum | cut -c1-64)" >"$T/reg/www/simple/requests/index.html"
	# A project page whose README (the VM's project's) links to requests' index with its digest.
	printf '<html><body><a href="%s/simple/requests/#sha256=%s">docs</a></body></html>\n' \
		"$u" "$(sha256sum "$T/reg/www/simple/requests/index.html" | cut -c1-64)" >"$T/reg/www/project/evil/index.html"
	dep_task "$T/rules" "$T/deps"
	run icurl -f -o /dev/null "$u/project/evil/"
	assert_success
	run icurl -f -o /dev/null "$u/simple/requests/"
	assert_success
	run aibox cache list
	assert_success
	refute_output --partial "$u/simple/requests/#"
	# requests 2.0 is published; a later task reads the same project page, then the index.
	printf '<html><body><a href="%s/packages/requests-2.0.tar.gz#sha256=%s">requests-2.0.tar.gz</a></body></html>\n' \
		"$u" "$(printf 2 | sha256sum | cut -c1-64)" >"$T/reg/www/simple/requests/index.html"
	dep_task "$T/rules" "$T/deps"
	run icurl -f -o /dev/null "$u/project/evil/"
	assert_success
	run icurl -f -sS "$u/simple/requests/"
	assert_success
	assert_output --partial requests-2.0.tar.gz
}

@test "cache hostile: on a registry that ties a login to its connection, an artifact asked for after a request with the secret stays the project's" {
	local u
	private_registry --conn-auth
	dep_task "$T/rules-secret" "$T/deps" --cache-scope project:a
	# One client connection: the document with the placeholder, then the tarball without.
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$u/priv/index" \
		--next -x "$PROXY" --cacert "$T/taskca.pem" -f -o /dev/null "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	run grep -c '^GET /priv/-/priv-1.0.0.tgz auth=conn ' "$T/reg.log"
	assert_output 1
	npm_doc pub 1.0.0 "$u/priv/-/priv-1.0.0.tgz" "$(sri "$T/reg/www/priv/-/priv-1.0.0.tgz")" >"$T/reg/www/pub"
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	dep_task "$T/rules" "$T/deps" --cache-scope project:b
	run icurl -f -o /dev/null "$u/pub"
	assert_success
	run icurl -o /dev/null -w '%{http_code}' "$u/priv/-/priv-1.0.0.tgz"
	assert_success
	assert_output 401
}

# demo_wheel: probe_registry, caching it as pypi, with the wheel demo 1.0 in PyPI's
# layout, its path naming its own blake2b-256; d its folder (packages/...).
demo_wheel() {
	probe_registry
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	make_wheel "$T" demo 1.0
	local b2
	b2=$("$PY" -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' \
		"$T/demo-1.0-py3-none-any.whl")
	d=packages/${b2:0:2}/${b2:2:2}/${b2:4}
	mkdir -p "$T/reg/www/$d"
	cp "$T/demo-1.0-py3-none-any.whl" "$T/reg/www/$d/"
}

@test "cache hostile: a wheel's PEP 658 metadata file, beside it in PyPI's layout, is forwarded whole, not checked against the wheel's blake2b-256" {
	demo_wheel
	# PyPI serves a wheel's core metadata at its URL and ".metadata" (pip fetches it first).
	printf 'Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n' >"$T/reg/www/$d/demo-1.0-py3-none-any.whl.metadata"
	dep_task "$T/rules" "$T/deps"
	run icurl -f -sS "https://localhost:$REG/$d/demo-1.0-py3-none-any.whl.metadata"
	assert_success
	assert_line 'Name: demo'
	run icurl -f -o /dev/null "https://localhost:$REG/$d/demo-1.0-py3-none-any.whl"
	assert_success
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 1
}

# hostile_filler MODE [PROXY ARGS...]: the registry holds big 1.0.0 (32 MiB,
# 64 MiB for MODE "slow": far more than the sockets' and the proxy's buffers
# hold; u its URL) and a hostile task (its proxy HOSTILE_PROXY_PID, the same
# store) has begun to fill it: its VM takes the first bytes and then, MODE
# "stop", reads no more, or, MODE "slow", 1 MiB a second (HOSTILE_PID), so
# that the fill grows every second or two (the proxy's socket buffer to it,
# a few MiB, empties in steps) but takes a minute.  Then another task's proxy
# starts with the same store and PROXY ARGS (--idle-timeout 60s first).
hostile_filler() {
	local mode=$1
	shift
	probe_registry
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	u=https://localhost:$REG
	mkdir -p "$T/reg/www/big/-"
	local mib=32
	[ "$mode" != slow ] || mib=64
	head -c $((mib << 20)) /dev/urandom >"$T/reg/www/big/-/big-1.0.0.tgz"
	npm_doc big 1.0.0 "$u/big/-/big-1.0.0.tgz" "$(sri "$T/reg/www/big/-/big-1.0.0.tgz")" >"$T/reg/www/big/index"
	dep_task "$T/rules" "$T/deps" --idle-timeout 60s "$@"
	local p1=$PROXY_PORT
	HOSTILE_PROXY_PID=$PROXY_PID
	PROXY_PID=
	mv "$T/proxy.log" "$T/proxy1.log"
	cp "$T/taskca.pem" "$T/taskca1.pem"
	run icurl -f -o /dev/null "$u/big/index"
	assert_success
	python3 - "$p1" "$T/taskca1.pem" "localhost:$REG" "$T/stalled" "$mode" <<-'PY' &
		import socket, ssl, sys, time
		port, ca, authority, flag, mode = sys.argv[1:6]
		s = socket.create_connection(("127.0.0.1", int(port)), timeout=60)
		if mode == "stop":
		    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
		s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()))
		head = b""
		while b"\r\n\r\n" not in head:
		    head += s.recv(1)
		t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="localhost")
		t.sendall(b"GET /big/-/big-1.0.0.tgz HTTP/1.1\r\nHost: %s\r\n\r\n" % authority.encode())
		t.recv(4096)
		open(flag, "w").close()
		for _ in range(200):
		    time.sleep(0.5)
		    got = 0
		    while mode == "slow" and got < 1 << 19:
		        got += len(t.recv((1 << 19) - got))
	PY
	HOSTILE_PID=$!
	wait_until 10 test -e "$T/stalled"
	dep_task "$T/rules" "$T/deps" --idle-timeout 60s "$@"
	run icurl -f -o /dev/null "$u/big/index"
	assert_success
}

# end_paused: ends what read_and_pause started.
end_paused() {
	local pid
	for pid in ${PAUSED_PIDS:-}; do
		kill "$pid" 2>/dev/null || true
	done
	PAUSED_PIDS=
}

# end_hostile_filler: ends what hostile_filler started.
end_hostile_filler() {
	[ -z "${HOSTILE_PID:-}" ] || kill "$HOSTILE_PID" 2>/dev/null || true
	if [ -n "${HOSTILE_PROXY_PID:-}" ]; then
		kill -TERM "$HOSTILE_PROXY_PID" 2>/dev/null || true
		wait "$HOSTILE_PROXY_PID" || true
	fi
	HOSTILE_PID= HOSTILE_PROXY_PID=
}

@test "cache hostile: a filler whose VM stops reading does not hold another task's request for the same artifact until the idle timeout" {
	hostile_filler stop
	# the other task gets it whole, from upstream, long before the idle timeout
	run icurl -f --max-time 30 -o "$T/b.tgz" "$u/big/-/big-1.0.0.tgz"
	local st=$status
	end_hostile_filler
	[ "$st" -eq 0 ]
	run cmp "$T/b.tgz" "$T/reg/www/big/-/big-1.0.0.tgz"
	assert_success
	run grep -c "GET /big/-/big-1.0.0.tgz (another filler of it has written nothing for a while) status=200 cache=busy" "$T/proxy.log"
	assert_output 1
}

@test "cache hostile: a filler whose VM reads slowly but never stops holds another task's request for the same artifact only for the fill wait" {
	# the fill grows every second, so it never looks stalled
	hostile_filler slow --fill-wait 3s
	SECONDS=0
	run icurl -f --max-time 30 -o "$T/b.tgz" "$u/big/-/big-1.0.0.tgz"
	local st=$status took=$SECONDS
	end_hostile_filler
	[ "$st" -eq 0 ] || fail "curl: $st after $took s"
	run cmp "$T/b.tgz" "$T/reg/www/big/-/big-1.0.0.tgz"
	assert_success
	run grep -c "GET /big/-/big-1.0.0.tgz (another filler of it took longer than the fill wait) status=200 cache=busy" "$T/proxy.log"
	assert_output 1
}

@test "cache hostile: a request for a PyPI file path the VM made up leaves no file in the store, its lock included" {
	probe_registry
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	dep_task "$T/rules" "$T/deps"
	# Each path names a BLAKE2b-256 of the VM's choosing; upstream has none of them.
	local i args=()
	for i in $(seq 1 20); do
		local h
		h=$(printf '%s' "$i" | sha256sum | cut -c1-64)
		args+=(--next -x "$PROXY" --cacert "$T/taskca.pem" -sS -o /dev/null
			"https://localhost:$REG/packages/${h:0:2}/${h:2:2}/${h:4:60}/x-$i.whl")
	done
	run icurl -o /dev/null "https://localhost:$REG/packages/" "${args[@]}"
	assert_success
	run grep -c ' cache=miss ' "$T/proxy.log"
	assert_output 20
	# Nothing was stored, so nothing of the store may be left behind: a VM making up
	# paths by the million would otherwise fill the host's disk with empty files.
	# The store's own file stays: its one count of the fills under way (this
	# proxy's line, at 0).  Its scope key is the user's, outside it.
	run bash -c 'find "$1" -type f | sort' - "$T/deps"
	assert_success
	assert_output "$T/deps/filling"
	run cat "$T/deps/filling"
	assert_output 00000000000000000000
}

@test "cache hostile: a task whose fills under way hold all it can still leaves another task's fills room to store" {
	demo_wheel
	d=/$d
	# A hostile task's proxy (its VM reading many large artifacts, each up to just
	# before the store would refuse it, and then no more) holds all the store lets
	# one process's fills hold.
	mkfifo "$T/hold.in"
	test-cache hold "$T/deps" 16M 1M <"$T/hold.in" >"$T/hold.out" &
	HOSTILE_PID=$!
	exec 7>"$T/hold.in"
	wait_until 10 grep -q '^holding' "$T/hold.out"
	# Another task fetches a small artifact twice: stored the first time, a hit the second.
	dep_task "$T/rules" "$T/deps" --cache-max 16M
	run icurl -f -o /dev/null "https://localhost:$REG$d/demo-1.0-py3-none-any.whl" \
		--next -x "$PROXY" --cacert "$T/taskca.pem" -f -o /dev/null "https://localhost:$REG$d/demo-1.0-py3-none-any.whl"
	exec 7>&-
	assert_success
	run grep -c " cache=fill " "$T/proxy.log"
	assert_output 1
	run grep -c " cache=hit " "$T/proxy.log"
	assert_output 1
	run grep -c "^GET $d/demo-1.0-py3-none-any.whl " "$T/reg.log"
	assert_output 1
}

# big_wheels N: N wheels of 15 MiB in PyPI's layout (each path names its own
# blake2b-256) under the registry's root; their paths in $T/paths.
big_wheels() {
	"$PY" - "$T/reg/www" "$1" >"$T/paths" <<-'PY'
		import hashlib, os, sys
		for i in range(int(sys.argv[2])):
		    data = os.urandom(15 << 20)
		    h = hashlib.blake2b(data, digest_size=32).hexdigest()
		    d = "/packages/%s/%s/%s" % (h[:2], h[2:4], h[4:])
		    os.makedirs(sys.argv[1] + d)
		    open("%s%s/w%d-1.0-py3-none-any.whl" % (sys.argv[1], d, i), "wb").write(data)
		    print("%s/w%d-1.0-py3-none-any.whl" % (d, i))
	PY
}

# read_and_pause PORT CA FLAG PATH...: a VM that asks the proxy on PORT (its task
# CA in CA) for each PATH on its own connection, takes 9 MiB of each, then reads
# no more (the 6 MiB left of a big_wheels file are more than the sockets'
# buffers hold: no fill ends); FLAG is made once all are paused.  In the
# background; its pid appended to PAUSED_PIDS.
read_and_pause() {
	"$PY" - "$@" <<-'PY' &
		import socket, ssl, sys, time
		port, ca, flag = sys.argv[1:4]
		authority = "localhost:%s" % sys.argv[4]
		conns = []
		for path in sys.argv[5:]:
		    s = socket.create_connection(("127.0.0.1", int(port)), timeout=60)
		    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
		    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()))
		    head = b""
		    while b"\r\n\r\n" not in head:
		        head += s.recv(1)
		    t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="localhost")
		    t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), authority.encode()))
		    got = 0
		    while got < 9 << 20:
		        n = len(t.recv(1 << 16))
		        if not n:
		            sys.exit("cut at %d" % got)
		        got += n
		    conns.append(t)
		open(flag, "w").close()
		time.sleep(60)
	PY
	PAUSED_PIDS="${PAUSED_PIDS:-} $!"
}

# store_bytes: the bytes of every file in the store, its temporary files included.
store_bytes() {
	find "$T/deps" -type f -printf '%s\n' | awk '{n += $1} END {print n + 0}'
}

@test "cache hostile: the fills one task has under way at once take no more of the host's disk than the cache's cap" {
	probe_registry
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	# Four wheels of 15 MiB, each under half the cap of 32 MiB, the four far over it.
	big_wheels 4
	dep_task "$T/rules" "$T/deps" --cache-max 32M
	# The VM takes 9 MiB of each, on four connections at once, then reads no more.
	read_and_pause "$PROXY_PORT" "$T/taskca.pem" "$T/paused" "$REG" $(cat "$T/paths")
	wait_until 60 test -e "$T/paused"
	local held
	held=$(store_bytes)
	end_paused
	# One task's fills hold at most half the cap (they leave as much free as they hold).
	[ "$held" -le $((16 << 20)) ] || fail "the fills hold $held bytes on disk, over half the cap of $((32 << 20))"
	# Those fills ended with their connections: the task's next fill has its room again.
	run icurl -f -o /dev/null "https://localhost:$REG$(tail -1 "$T/paths")"
	assert_success
	run grep -c " cache=fill " "$T/proxy.log"
	assert_output 1
}

@test "cache hostile: the fills two tasks have under way at once take no more of the host's disk together than the cache's cap" {
	probe_registry
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	big_wheels 2
	# Two tasks at once, each with the cap of 16 MiB, each VM taking 9 MiB of its own
	# wheel and then no more: 18 MiB together.
	dep_task "$T/rules" "$T/deps" --cache-max 16M
	cp "$T/taskca.pem" "$T/taskca1.pem"
	read_and_pause "$PROXY_PORT" "$T/taskca1.pem" "$T/paused1" "$REG" $(head -1 "$T/paths")
	wait_until 60 test -e "$T/paused1"
	HOSTILE_PROXY_PID=$PROXY_PID
	PROXY_PID=
	mv "$T/proxy.log" "$T/proxy1.log"
	dep_task "$T/rules" "$T/deps" --cache-max 16M
	read_and_pause "$PROXY_PORT" "$T/taskca.pem" "$T/paused2" "$REG" $(tail -1 "$T/paths")
	wait_until 60 test -e "$T/paused2"
	local held
	held=$(store_bytes)
	end_paused
	end_hostile_filler
	[ "$held" -le $((16 << 20)) ] || fail "the two tasks' fills hold $held bytes on disk, over the cap of $((16 << 20))"
	# The second task's VM still got its 9 MiB (served from upstream, not stored).
	run grep -c " cache=miss " "$T/proxy.log"
	assert_output 1
}
