#!/usr/bin/env bats
# The dependency cache in aibox-proxy (docs/cache.md): on a host whose allow
# rule says cache: npm, pypi or crates, the proxy learns the digests from the
# metadata it fetches, answers an artifact from the store, or fetches it,
# checks it and stores it.  A loopback registry (t/dep-registry) with a CA of
# its own (SSL_CERT_FILE, as in t/3011) serves npm tarballs, a PyPI simple
# index and a crates sparse index; the host's real npm, pip and cargo go
# through the proxy, trusting the task CA.  Each proxy stands for one task;
# they share the store.
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy
load lib-deps

PH=aibox-secret-0123456789abcdef0123456789abcdef

# make_crate DIR NAME VERSION: a crate file as cargo packages them (NAME-VERSION/...).
make_crate() {
	local d
	d=$(mktemp -d) || return 1
	mkdir -p "$d/$2-$3/src"
	printf '[package]\nname = "%s"\nversion = "%s"\nedition = "2021"\n' "$2" "$3" >"$d/$2-$3/Cargo.toml"
	printf 'pub const V: &str = "%s %s";\n' "$2" "$3" >"$d/$2-$3/src/lib.rs"
	tar -C "$d" -czf "$1/$2-$3.crate" "$2-$3" || return 1
	rm -rf "$d"
}

setup_file() {
	make_test_ca "$BATS_FILE_TMPDIR/ca"
	mkdir -p "$BATS_FILE_TMPDIR/reg/npm" "$BATS_FILE_TMPDIR/reg/pypi"
	make_npm_tgz "$BATS_FILE_TMPDIR/reg/npm" left-pad 1.0.0
	make_npm_tgz "$BATS_FILE_TMPDIR/reg/npm" right-pad 2.1.0
	mkdir "$BATS_FILE_TMPDIR/reg/npm/@sc"
	make_npm_tgz "$BATS_FILE_TMPDIR/reg/npm" @sc/thing 3.0.0
	make_wheel "$BATS_FILE_TMPDIR/reg/pypi" demo_pkg 1.0
	mkdir "$BATS_FILE_TMPDIR/reg/crates"
	make_crate "$BATS_FILE_TMPDIR/reg/crates" demo 1.0.0
	make_crate "$BATS_FILE_TMPDIR/reg/crates" demo 1.1.0
	make_crate "$BATS_FILE_TMPDIR/reg/crates" other_lib 0.3.0
}

# start_registry [ARGS...]: t/dep-registry on a free port (REG), its requests in $T/reg.log.
start_registry() {
	cp -r "$BATS_FILE_TMPDIR/reg" "$T/reg"
	dep_registry "$@"
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	export SSL_CERT_FILE=$T/ca/ca.pem
	export AIBOX_DEPS_CACHE=$T/deps
	start_registry
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
}

teardown() {
	stop_proxy || true
	[ -z "${PROXY2_PID:-}" ] || kill "$PROXY2_PID" 2>/dev/null || true
	[ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null || true
	common_teardown
}

# stop_registry_and_restart_with_token [ARGS...]: the registry again, taking only the token tok-value.
stop_registry_and_restart_with_token() {
	kill "$REG_PID"
	wait "$REG_PID" || true
	rm -f "$T/reg.port"
	printf 'tok-value\n' >"$T/token"
	dep_registry --token-file "$T/token" "$@"
}

# reg_conns PATTERN: the connections (the registry's conn=N, --conn-ids) that
# carried its requests matching PATTERN (grep -E), each once, in order.
reg_conns() {
	grep -E "$1" "$T/reg.log" | sed -E 's/.* conn=([0-9]+)$/\1/' | sort -nu
}

# task RULES [ARGS...]: one task's proxy with RULES on --secrets-fd, the
# store at $T/deps and its record to $T/record.json; the task CA in $T/taskca.pem.
task() {
	local rules=$1
	shift
	dep_task "$rules" "$T/deps" "$@"
}

# reg_count PATTERN: the registry's requests matching PATTERN (grep -E).
reg_count() {
	log_count "$T/reg.log" "$1"
}

# npm_install DIR: the host's npm installs left-pad and right-pad in DIR
# through the proxy, with an npm cache of its own (empty: nothing from npm's cache).
npm_install() {
	mkdir -p "$1"
	printf '{"name": "p", "version": "1.0.0", "dependencies": {"left-pad": "1.0.0", "right-pad": "^2.0.0"}}\n' >"$1/package.json"
	npm_proxied "$1" install
}

# npm_proxied DIR COMMAND: npm COMMAND in DIR through the proxy, the registry
# as $REG, its own empty npm cache.  npm tries a failed fetch again, as it
# does by default, but after 0.2 to 0.5 s, not its default 10 to 60.  Then
# proxy_settle: the lines of npm's last requests are in proxy.log.
npm_proxied() {
	command -v npm >/dev/null || skip "no npm on this host (packages.txt: nodejs)"
	local st=0
	(cd "$1" && HTTPS_PROXY=$PROXY https_proxy=$PROXY npm "$2" --registry "https://localhost:$REG/" \
		--cafile "$T/taskca.pem" --cache "$1/.npm-cache" --no-audit --no-fund --no-update-notifier \
		--fetch-retry-mintimeout=200 --fetch-retry-maxtimeout=500 --loglevel=error) || st=$?
	proxy_settle
	return "$st"
}

@test "cache npm: the first task's npm install fills the store, the second's takes every tarball from it and none from upstream" {
	task "$T/rules"
	run npm_install "$T/p1"
	assert_success
	run cat "$T/p1/node_modules/left-pad/index.js"
	assert_output 'module.exports = "left-pad 1.0.0";'
	assert_equal "$(reg_count '^GET /left-pad/-/left-pad-1.0.0.tgz$')" 1
	assert_equal "$(reg_count '^GET /right-pad/-/right-pad-2.1.0.tgz$')" 1
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 2
	stop_proxy
	run jq -c .cache "$T/record.json"
	assert_success
	assert_output --regexp '^\{"hits":0,"misses":2,"bytes_from_cache":0,"bytes_from_upstream":[1-9][0-9]*,"refused":0,"own_fetches":0,"own_fetch_bytes":0\}$'
	run aibox cache list
	assert_success
	assert_line --partial "https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz#sha512="

	: >"$T/reg.log"
	task "$T/rules"
	run npm_install "$T/p2"
	assert_success
	run cat "$T/p2/node_modules/right-pad/index.js"
	assert_output 'module.exports = "right-pad 2.1.0";'
	# The package documents still come from upstream (metadata is never cached); no tarball does.
	assert_equal "$(reg_count '\.tgz$')" 0
	assert_equal "$(reg_count '^GET /left-pad$')" 1
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 2
	stop_proxy
	local size
	size=$(($(stat -c %s "$T/reg/npm/left-pad-1.0.0.tgz") + $(stat -c %s "$T/reg/npm/right-pad-2.1.0.tgz")))
	run jq -c .cache "$T/record.json"
	assert_output "{\"hits\":2,\"misses\":0,\"bytes_from_cache\":$size,\"bytes_from_upstream\":0,\"refused\":0,\"own_fetches\":0,\"own_fetch_bytes\":0}"
	# The task summary, from the record as aibox-task reads it.
	run test-task results - --report "$T/record.json"
	assert_success
	assert_line "aibox: the dependency cache served 2 artifacts ($size bytes); 0 came from upstream (0 bytes)"
}

# count_is N FILE PATTERN: FILE has N lines matching PATTERN (grep -E), for wait_until.
count_is() {
	[ "$(log_count "$2" "$3")" = "$1" ]
}

# received_sum: the sum of the received= fields of the proxy.log lines on stdin.
received_sum() {
	awk '{ for (i = 1; i <= NF; i++) if (sub("^received=", "", $i)) s += $i } END { print s + 0 }'
}

# npm_ci DIR LOCKDIR: the host's npm ci in DIR from LOCKDIR's package.json and
# package-lock.json (made by npm_install), with an npm cache of its own (empty).
npm_ci() {
	mkdir -p "$1"
	cp "$2/package.json" "$2/package-lock.json" "$1/"
	npm_proxied "$1" ci
}

@test "cache npm: npm ci from a lock file asks for no package document: the proxy fetches each itself, fills the store, and the next task's npm ci takes every tarball from it" {
	task "$T/rules"
	run npm_install "$T/p1"
	assert_success
	# A scoped package too: its document is /@sc%2fthing, its tarball /@sc/thing/-/thing-3.0.0.tgz.
	(cd "$T/p1" && HTTPS_PROXY=$PROXY https_proxy=$PROXY npm install --registry "https://localhost:$REG/" \
		--cafile "$T/taskca.pem" --cache "$T/p1/.npm-cache" --no-audit --no-fund --no-update-notifier \
		--loglevel=error @sc/thing@3.0.0)
	run grep -c '"resolved": "https://localhost:'"$REG"'/@sc/thing/-/thing-3.0.0.tgz"' "$T/p1/package-lock.json"
	assert_output 1
	stop_proxy
	rm -rf "$T/deps"

	# A task whose store is empty: npm ci asks the registry for tarballs only.
	: >"$T/reg.log"
	task "$T/rules"
	run npm_ci "$T/p2" "$T/p1"
	assert_success
	run cat "$T/p2/node_modules/@sc/thing/index.js"
	assert_output 'module.exports = "@sc/thing 3.0.0";'
	assert_equal "$(reg_count '\.tgz$')" 3
	# The three documents came, each once, from the proxy's own fetch (its log says cache=fetch).
	assert_equal "$(reg_count '^GET /(left-pad|right-pad|@sc%2fthing)$')" 3
	assert_equal "$(reg_count '^GET /[^/]*$')" 3
	run grep -cE ' allowed localhost:[0-9]+ GET /(left-pad|right-pad|@sc%2fthing) status=200 cache=fetch ' "$T/proxy.log"
	assert_output 3
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 3
	stop_proxy
	# The record counts the VM's requests only (its tunnels and its three tarballs, as
	# proxy.log's lines other than cache=fetch); the three documents apart, as the proxy's own.
	local vm vm_host vm_received own_received
	vm=$(grep -E '^[^ ]+ (allowed|refused|failed) ' "$T/proxy.log" | grep -vc ' cache=fetch ')
	vm_host=$(grep " allowed localhost:$REG " "$T/proxy.log" | grep -vc ' cache=fetch ')
	vm_received=$(grep " allowed localhost:$REG " "$T/proxy.log" | grep -v ' cache=fetch ' | received_sum)
	own_received=$(grep ' cache=fetch ' "$T/proxy.log" | received_sum)
	assert_equal "$(grep -c " allowed localhost:$REG GET /[^ ]*\.tgz " "$T/proxy.log")" 3
	run jq -r '[.allowed + .refused + .failed, (.hosts | length), .hosts[0].allowed, .hosts[0].received] | @tsv' "$T/record.json"
	assert_output "$(printf '%s\t1\t%s\t%s' "$vm" "$vm_host" "$vm_received")"
	run jq -c '.cache | [.own_fetches, .own_fetch_bytes]' "$T/record.json"
	assert_output "[3,$own_received]"
	run test-task results - --report "$T/record.json"
	assert_success
	assert_line "aibox: the proxy fetched 3 metadata documents itself ($own_received bytes)"
	# A record written before the own fetches were counted apart (summary.json keeps them) still reads.
	jq -c 'del(.cache.own_fetches, .cache.own_fetch_bytes)' "$T/record.json" >"$T/old-record.json"
	run test-task results - --report "$T/old-record.json"
	assert_success
	assert_line --partial 'aibox: the dependency cache served 0 artifacts'
	refute_output --partial 'the proxy fetched'

	# The next task's npm ci: every tarball from the store, none from the registry.
	: >"$T/reg.log"
	task "$T/rules"
	run npm_ci "$T/p3" "$T/p1"
	assert_success
	run cat "$T/p3/node_modules/left-pad/index.js"
	assert_output 'module.exports = "left-pad 1.0.0";'
	assert_equal "$(reg_count '\.tgz$')" 0
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 3
	run grep -c ' cache=fetch ' "$T/proxy.log"
	assert_output 3
	stop_proxy
	run jq -c '.cache | [.hits, .misses, .bytes_from_upstream]' "$T/record.json"
	assert_output '[3,0,0]'
}

@test "cache npm: the proxy fetches a document only for a tarball path of the exact shape, once a name, shared by requests at once; one that does not name it, or fails, stores nothing" {
	task "$T/rules"
	local u=https://localhost:$REG bad
	# Other spellings: forwarded as they are, no document fetched for them.
	for bad in '/left-pad/-/left-pad-1.0.0.tgz?v=1' '/left-pad/-/./left-pad-1.0.0.tgz' \
		'//left-pad/-/left-pad-1.0.0.tgz' '/left%2dpad/-/left-pad-1.0.0.tgz' \
		'/left-pad/-/right-pad-2.1.0.tgz' '/left-pad/-/rightpad-1.0.0.tgz' '/left-pad/-/left-pad-x.tgz' '/left-pad/-/left-pad-1.0.0.tar' \
		'/.left-pad/-/.left-pad-1.0.0.tgz' '/@sc%2fthing/-/thing-3.0.0.tgz' '/@sc/thing/x/-/x-3.0.0.tgz' \
		'/@/thing/-/thing-3.0.0.tgz' '/left-pad/-/left-pad-1.0.0.tgz/' '/left-pad/left-pad-1.0.0.tgz' \
		'/left-pad/-/left-pad-1.0.0%2etgz' '/le\pad/-/le\pad-1.0.0.tgz'; do
		run icurl --path-as-is -o /dev/null "$u$bad"
		assert_success
	done
	assert_equal "$(reg_count '^GET /[^/]*$')" 0
	run grep -c ' cache=fetch ' "$T/proxy.log"
	assert_output 0
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 0
	# Four requests at once for one name (its document comes 1 s late): one document, fetched once.
	touch "$T/reg/SLOWDOC"
	local i pids=()
	for i in 1 2 3 4; do
		icurl -o "$T/got$i" "$u/left-pad/-/left-pad-1.0.0.tgz" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for i in 1 2 3 4; do
		cmp "$T/got$i" "$T/reg/npm/left-pad-1.0.0.tgz"
	done
	assert_equal "$(reg_count '^GET /left-pad$')" 1
	# A version the document does not name, and a name with no document: forwarded, not stored.
	run icurl -o /dev/null "$u/left-pad/-/left-pad-9.9.9.tgz"
	assert_success
	run icurl -o /dev/null "$u/nope/-/nope-1.0.0.tgz"
	assert_success
	run icurl -o /dev/null "$u/nope/-/nope-1.0.1.tgz"
	assert_success
	assert_equal "$(reg_count '^GET /left-pad$')" 1
	assert_equal "$(reg_count '^GET /nope$')" 1
	run grep -c 'GET /left-pad/-/left-pad-9.9.9.tgz (the metadata the proxy fetched does not name it) status=404 cache=bypass ' "$T/proxy.log"
	assert_output 1
	run grep -c "GET /nope/-/nope-1.0.[01].tgz (the proxy's own metadata fetch failed) status=404 cache=bypass " "$T/proxy.log"
	assert_output 2
	run grep -c ' GET /nope status=404 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run aibox cache list
	assert_success
	assert_line --partial "$u/left-pad/-/left-pad-1.0.0.tgz#sha512="
	refute_output --partial nope
	refute_output --partial 9.9.9
}

@test "cache npm: a tarball that does not match the document the proxy fetched itself is cut, never served whole" {
	touch "$T/reg/TAMPER"
	task "$T/rules"
	run icurl -o "$T/got" "https://localhost:$REG/right-pad/-/right-pad-2.1.0.tgz"
	assert_failure
	run grep -c ' failed localhost:[0-9]* GET /right-pad/-/right-pad-2.1.0.tgz (the artifact does not match the digest its metadata gives) status=200 cache=bad ' "$T/proxy.log"
	assert_output 1
	run grep -c ' GET /right-pad status=200 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
}

@test "cache npm: on a private registry the proxy's own fetch carries the secret the VM's placeholder stands for, and what it stores is the project's" {
	stop_registry_and_restart_with_token
	printf 'secret TOK %s\nvalue tok-value\nhost localhost:%s\nrule localhost:%s\ncache npm\n' \
		"$PH" "$REG" "$REG" >"$T/rules-secret"
	local url=https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz
	task "$T/rules-secret" --cache-scope project:a
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$url"
	assert_success
	run grep -c '^GET /left-pad auth=bearer$' "$T/reg.log"
	assert_output 1
	run grep -c ' GET /left-pad status=200 cache=fetch secrets=TOK ' "$T/proxy.log"
	assert_output 1
	run aibox cache list
	assert_success
	assert_line --regexp "  project:a/[0-9a-f]{32}  $url#sha512="
	# Without the placeholder the proxy's fetch carries no credential: 401, nothing learnt or kept.
	run icurl -o /dev/null "https://localhost:$REG/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	run grep -c '^GET /right-pad auth=no$' "$T/reg.log"
	assert_output 1
	run grep -c ' GET /right-pad status=401 cache=fetch ' "$T/proxy.log"
	assert_output 1
	# Another project's task: the same request fetches again, and finds nothing of project:a's.
	task "$T/rules-secret" --cache-scope project:b
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$url"
	assert_success
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 0
	assert_equal "$(reg_count '^GET /left-pad/-/left-pad-1.0.0.tgz auth=bearer$')" 2
}

@test "cache npm: the proxy's own document fetches of a task take one upstream connection, kept between them" {
	kill "$REG_PID"
	wait "$REG_PID" || true
	rm -f "$T/reg.port"
	dep_registry --conn-ids
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	task "$T/rules"
	local u=https://localhost:$REG
	# Three client connections one after another, each asking for a tarball whose document is not fetched yet.
	run icurl -f -o "$T/got1" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run icurl -f -o "$T/got2" "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	run icurl -f -o "$T/got3" "$u/@sc/thing/-/thing-3.0.0.tgz"
	assert_success
	cmp "$T/got3" "$T/reg/npm/@sc/thing-3.0.0.tgz"
	run grep -cE ' GET /(left-pad|right-pad|@sc%2fthing) status=200 cache=fetch ' "$T/proxy.log"
	assert_output 3
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 3
	# The three documents, each fetched once, all on one connection to the registry.
	assert_equal "$(reg_count '^GET /[^/]* conn=[0-9]+$')" 3
	run reg_conns '^GET /[^/]* conn='
	assert_output --regexp '^[0-9]+$'
	# ... which the tarballs' client connections did not use.
	run reg_conns '\.tgz conn='
	refute_line "$(reg_conns '^GET /left-pad conn=')"
}

@test "cache npm: an own fetch's kept connection carries only own fetches with the same secrets swapped in, never one with another or none" {
	make_npm_tgz "$T/reg/npm" four 1.0.0
	stop_registry_and_restart_with_token --conn-ids
	printf 'secret TOK %s\nvalue tok-value\nhost localhost:%s\nrule localhost:%s\ncache npm\n' \
		"$PH" "$REG" "$REG" >"$T/rules-secret"
	local u=https://localhost:$REG with without
	task "$T/rules-secret" --cache-scope project:a
	# With the placeholder, without, with, without: four documents the proxy fetches itself.
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run icurl -o /dev/null "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	run icurl -f -o /dev/null -H "Authorization: Bearer $PH" "$u/@sc/thing/-/thing-3.0.0.tgz"
	assert_success
	run icurl -o /dev/null "$u/four/-/four-1.0.0.tgz"
	assert_success
	run grep -c ' cache=fetch secrets=TOK ' "$T/proxy.log"
	assert_output 2
	# The two with the secret share a connection; the two without share another.
	run reg_conns '^GET /(left-pad|@sc%2fthing) auth=bearer conn='
	assert_output --regexp '^[0-9]+$'
	with=$output
	run reg_conns '^GET /(right-pad|four) auth=no conn='
	assert_output --regexp '^[0-9]+$'
	without=$output
	[ "$with" != "$without" ]
}

# restart_registry [ARGS...]: the registry again with ARGS, the rules for it in $T/rules, a new task.
restart_registry() {
	kill "$REG_PID"
	wait "$REG_PID" || true
	rm -f "$T/reg.port"
	dep_registry "$@"
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	task "$T/rules"
}

@test "cache npm: an own fetch that meets a kept connection the registry closed is sent once again on a new one, and fills" {
	restart_registry --conn-ids --drop-kept
	local u=https://localhost:$REG
	run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	# The second document goes on the kept connection, which the registry closes unanswered.
	run icurl -f -m 20 -o "$T/got" "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	cmp "$T/got" "$T/reg/npm/right-pad-2.1.0.tgz"
	run grep -cE '^GET /right-pad conn=[0-9]+ dropped$' "$T/reg.log"
	assert_output 1
	run grep -cE '^GET /right-pad conn=[0-9]+$' "$T/reg.log"
	assert_output 1
	run grep -c ' GET /right-pad status=200 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c ' GET /right-pad/-/right-pad-2.1.0.tgz status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
}

@test "cache npm: an own fetch whose replay fails too leaves the waiting request its answer from upstream, not stored, and the reason" {
	restart_registry --conn-ids --drop-kept
	local u=https://localhost:$REG
	run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	# The kept connection dropped, and the new one's document request reset too.
	echo 1 >"$T/reg/DROPDOC"
	run icurl -f -m 20 -o "$T/got" "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	cmp "$T/got" "$T/reg/npm/right-pad-2.1.0.tgz"
	assert_equal "$(reg_count '^GET /right-pad conn=')" 2
	run grep -c " GET /right-pad/-/right-pad-2.1.0.tgz (the proxy's own metadata fetch failed) status=200 cache=bypass " "$T/proxy.log"
	assert_output 1
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 1
	run aibox cache list
	assert_success
	refute_output --partial right-pad
}

@test "cache npm: an own fetch that failed for a cause that may pass (a 503, a reset) is fetched again by a later request after its backoff, and fills" {
	task "$T/rules"
	local u=https://localhost:$REG
	# A reset first, on a new connection (none is kept yet: nothing to replay), then a 503.
	echo 1 >"$T/reg/DROPDOC"
	run icurl -f -m 20 -o /dev/null "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	echo 1 >"$T/reg/FAILDOC"
	local t0 t1
	t0=$(date +%s%N)
	run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	# Within the backoff (when this machine's load let both requests end within 1 s): not fetched again.
	run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	t1=$(date +%s%N)
	if ((t1 - t0 < 1000000000)); then
		assert_equal "$(reg_count '^GET /left-pad$')" 1
	else
		echo "# the backoff not checked: the two requests took $(((t1 - t0) / 1000000)) ms" >&3
	fi
	run grep -c ' GET /left-pad status=503 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c " GET /right-pad/-/right-pad-2.1.0.tgz (the proxy's own metadata fetch failed) status=200 cache=bypass " "$T/proxy.log"
	assert_output 1
	run grep -c " GET /left-pad/-/left-pad-1.0.0.tgz (the proxy's own metadata fetch failed) status=200 cache=bypass " "$T/proxy.log"
	assert_output --regexp '^[12]$'
	sleep 1.2
	run icurl -f -m 20 -o "$T/got1" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run icurl -f -m 20 -o "$T/got2" "$u/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	cmp "$T/got1" "$T/reg/npm/left-pad-1.0.0.tgz"
	cmp "$T/got2" "$T/reg/npm/right-pad-2.1.0.tgz"
	assert_equal "$(reg_count '^GET /left-pad$')" 2
	assert_equal "$(reg_count '^GET /right-pad$')" 2
	run grep -c ' GET /left-pad status=200 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 2
	# A 404 is the registry's word: fetched once for the whole task.
	run icurl -m 20 -o /dev/null "$u/nope/-/nope-1.0.0.tgz"
	assert_success
	sleep 1.2
	run icurl -m 20 -o /dev/null "$u/nope/-/nope-1.0.0.tgz"
	assert_success
	assert_equal "$(reg_count '^GET /nope$')" 1
}

@test "cache npm: a registry whose document always fails gets at most three fetches of it from a task, however many requests come, at once or over time" {
	restart_registry --times
	local u=https://localhost:$REG i pids=() st=0
	echo all >"$T/reg/FAILDOC"
	for i in $(seq 50); do
		icurl -f -m 30 -o "$T/burst$i" "$u/left-pad/-/left-pad-1.0.0.tgz" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || st=$?
	done
	assert_equal "$st" 0
	for i in $(seq 50); do
		cmp "$T/burst$i" "$T/reg/npm/left-pad-1.0.0.tgz"
	done
	run reg_count '^GET /left-pad t='
	assert_output --regexp '^[123]$'
	# Over time, past every backoff (1 s, then 2 s): the third fetch is the last.
	for i in $(seq 10); do
		run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
		assert_success
		sleep 0.4
	done
	sleep 4.1
	run icurl -f -m 20 -o /dev/null "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	assert_equal "$(reg_count '^GET /left-pad t=')" 3
	assert_equal "$(reg_count '^GET /left-pad/-/left-pad-1.0.0.tgz t=')" 61
	# Each fetch again came no sooner than its backoff after the one before (1 s, then 2 s),
	# in whole ms (t=S.mmm without its dot).  The proxy's clock counts whole ms and the log
	# rounds to the ms, so a backoff kept to the letter can show 1 ms short of it: 999 and
	# 1999 ms, where a broken one shows a few ms.
	run awk '$2 == "/left-pad" { t = $3; sub("t=", "", t); sub("[.]", "", t); t += 0; if (n++) print t - last; last = t }' "$T/reg.log"
	assert_equal "${#lines[@]}" 2
	((lines[0] >= 999))
	((lines[1] >= 1999))
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 0
}

@test "cache npm: the proxy's own fetch of a large document (2 MiB, many rounds of reads with no client to wake it) ends, and fills" {
	task "$T/rules"
	local u=https://localhost:$REG
	echo 2 >"$T/reg/BIGDOC"
	run icurl -f -m 30 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	cmp "$T/got" "$T/reg/npm/left-pad-1.0.0.tgz"
	run grep -c ' GET /left-pad status=200 cache=fetch ' "$T/proxy.log"
	assert_output 1
	run grep -c ' GET /left-pad/-/left-pad-1.0.0.tgz status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
}

@test "cache npm: a document over the metadata cap stands at once: one fetch of it from a task, however many requests come over the backoffs" {
	restart_registry --times
	local u=https://localhost:$REG i
	touch "$T/reg/BIGDOC"
	# Requests past where each backoff (1 s, then 2 s) would have let a fetch again.
	for i in 1 2 3; do
		run icurl -f -m 60 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
		assert_success
		cmp "$T/got" "$T/reg/npm/left-pad-1.0.0.tgz"
		[ "$i" = 3 ] || sleep $((i + 0)).2
	done
	assert_equal "$(reg_count '^GET /left-pad t=')" 1
	assert_equal "$(reg_count '^GET /left-pad/-/left-pad-1.0.0.tgz t=')" 3
	run grep -c " GET /left-pad/-/left-pad-1.0.0.tgz (the metadata the proxy fetched is over its cap) status=200 cache=bypass " "$T/proxy.log"
	assert_output 3
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 0
}

@test "cache npm: an own fetch's endless document (chunked, or a Content-Length of 1 TiB) is cut just past the metadata cap, and the waiting request gets its tarball from upstream with the reason" {
	local u=https://localhost:$REG mode n
	for mode in chunked length; do
		echo "$mode" >"$T/reg/ENDLESS"
		: >"$T/reg.log"
		task "$T/rules"
		run icurl -f -m 60 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
		assert_success
		cmp "$T/got" "$T/reg/npm/left-pad-1.0.0.tgz"
		# The registry saw the proxy close: what it sent is the cap (64 MiB) and the sockets' buffers.
		wait_until 10 grep -q '^SENT /left-pad ' "$T/reg.log"
		n=$(sed -n 's|^SENT /left-pad ||p' "$T/reg.log")
		[ "$n" -ge $((64 << 20)) ] || fail "$mode: $n bytes sent, under the cap"
		[ "$n" -le $((80 << 20)) ] || fail "$mode: $n bytes sent, far past the cap"
		run grep -c " failed localhost:$REG GET /left-pad (the metadata the proxy fetched is over its cap) status=200 cache=fetch " "$T/proxy.log"
		assert_output 1
		run grep -c " GET /left-pad/-/left-pad-1.0.0.tgz (the metadata the proxy fetched is over its cap) status=200 cache=bypass " "$T/proxy.log"
		assert_output 1
		assert_equal "$(reg_count '^GET /left-pad$')" 1
		stop_proxy
	done
}

@test "cache npm: a task begins at most --own-fetch-max own fetches: the last one fills, past it each artifact goes upstream unstored with the reason, and the log says so once" {
	task "$T/rules" --own-fetch-max 3
	local u=https://localhost:$REG
	local p f
	# a1 twice (another version of the same package: the same key, no fetch more), then a2.
	for p in a1/-/a1-1.0.0.tgz a1/-/a1-2.0.0.tgz a2/-/a2-1.0.0.tgz; do
		run icurl -m 20 -o /dev/null -w '%{http_code}' "$u/$p"
		assert_output 404
	done
	run grep -c 'limit' "$T/proxy.log"
	assert_output 0
	# The third, exactly the limit: fetched, and the tarball filled.
	run icurl -f -m 20 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	cmp "$T/got" "$T/reg/npm/left-pad-1.0.0.tgz"
	run grep -c ' GET /left-pad/-/left-pad-1.0.0.tgz status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
	# One past, and two past: forwarded whole, not stored, with the reason.
	for p in right-pad/-/right-pad-2.1.0.tgz @sc/thing/-/thing-3.0.0.tgz; do
		f=${p%%/-/*}-${p##*-}
		run icurl -f -m 20 -o "$T/got" "$u/$p"
		assert_success
		cmp "$T/got" "$T/reg/npm/$f"
		run grep -c " GET /$p (the proxy's own metadata fetches reached their limit) status=200 cache=bypass " "$T/proxy.log"
		assert_output 1
	done
	# A key fetched before the limit keeps its answer; a tarball it named comes from the store.
	run icurl -m 20 -o /dev/null -w '%{http_code}' "$u/a1/-/a1-3.0.0.tgz"
	assert_output 404
	run grep -c " GET /a1/-/a1-3.0.0.tgz (the proxy's own metadata fetch failed) status=404 cache=bypass " "$T/proxy.log"
	assert_output 1
	run icurl -f -m 20 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run grep -c ' GET /left-pad/-/left-pad-1.0.0.tgz status=200 cache=hit ' "$T/proxy.log"
	assert_output 1
	run grep -c "note - (the proxy's own metadata fetches reached this task's limit of 3)" "$T/proxy.log"
	assert_output 1
	assert_equal "$(reg_count '^GET /(a1|a2|left-pad|right-pad|@sc/thing|@sc%2fthing)$')" 3
	run aibox cache list
	assert_success
	refute_output --partial right-pad
	# The option's hard ceiling.
	run aibox-proxy --own-fetch-max 100001 --listen 127.0.0.1:0
	assert_failure
	assert_output --partial "invalid --own-fetch-max"
}

@test "cache npm: a burst of 200 distinct packages at once makes --own-fetch-max own fetches, at most 16 in flight, and every request gets its answer" {
	restart_registry --times
	local u=https://localhost:$REG i
	task "$T/rules" --own-fetch-max 40
	touch "$T/reg/SLOWMISS"
	for i in $(seq 200); do
		printf 'url = "%s/b%d/-/b%d-1.0.0.tgz"\noutput = "/dev/null"\n' "$u" "$i" "$i"
	done >"$T/burst.cfg"
	run icurl -Z --parallel-max 200 -m 120 -w '%{http_code}\n' -K "$T/burst.cfg"
	assert_success
	assert_equal "$(grep -c '^404$' <<<"$output")" 200
	assert_equal "$(reg_count '^GET /b[0-9]+ t=')" 40
	assert_equal "$(reg_count '^GET /b[0-9]+/-/b[0-9]+-1.0.0.tgz t=')" 200
	run grep -c "note - (the proxy's own metadata fetches reached this task's limit of 40)" "$T/proxy.log"
	assert_output 1
	run grep -c "(the proxy's own metadata fetches reached their limit) status=404 cache=bypass " "$T/proxy.log"
	assert_output 160
	# At most 16 in flight: the 17th fetch after any came only once one had its 0.5 s answer.
	run awk '$2 ~ /^\/b[0-9]+$/ { sub("t=", "", $3); t[n++] = $3 } END { for (i = 0; i + 16 < n; i++) if (t[i + 16] - t[i] < 0.5) print "17 in flight at " t[i] }' "$T/reg.log"
	assert_success
	assert_output ''
}

@test "cache npm: a queued own fetch whose requests all went away (the client closed, or the proxy's wait timed out) is dropped, never started, and its key is fetched later as any" {
	local u=https://localhost:$REG i pids=()
	task "$T/rules" --idle-timeout 2s
	# 16 fetches in flight that the registry holds (a byte every 0.2 s, so none times out).
	touch "$T/reg/HOLDDOC"
	for i in $(seq 16); do
		icurl -m 30 -o /dev/null "$u/b$i/-/b$i-1.0.0.tgz" &
		pids+=($!)
	done
	wait_until 20 count_is 16 "$T/reg.log" '^GET /b[0-9]+$'
	# Queued behind them: requests whose client gives up (q), and requests whose wait
	# times out in the proxy, which forwards them unstored (r).
	for i in 1 2 3 4; do
		icurl -m 3 -o /dev/null "$u/q$i/-/q$i-1.0.0.tgz" &
		pids+=($!)
		icurl -m 30 -o /dev/null "$u/r$i/-/r$i-1.0.0.tgz" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	run grep -cE " GET /r[0-9]/-/r[0-9]-1.0.0.tgz \(the proxy's own metadata fetch took too long\) status=404 cache=bypass " "$T/proxy.log"
	assert_output 4
	# The registry lets the 16 go: the queue's fetches find nobody waiting, and none starts.
	rm "$T/reg/HOLDDOC"
	wait_until 20 count_is 16 "$T/proxy.log" ' GET /b[0-9]+ status=404 cache=fetch '
	run icurl -f -m 20 -o "$T/got" "$u/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	cmp "$T/got" "$T/reg/npm/left-pad-1.0.0.tgz"
	run grep -c ' GET /left-pad/-/left-pad-1.0.0.tgz status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
	assert_equal "$(reg_count '^GET /[qr][0-9]$')" 0
	# A dropped key is fetched again by the next request for it, once.
	run icurl -m 20 -o /dev/null -w '%{http_code}' "$u/q1/-/q1-1.0.0.tgz"
	assert_output 404
	assert_equal "$(reg_count '^GET /q1$')" 1
	run grep -c " GET /q1 status=404 cache=fetch " "$T/proxy.log"
	assert_output 1
}

@test "cache npm: a tampered tarball upstream is cut before its end, not stored, and counted; a request the rules bypass is not stored either" {
	touch "$T/reg/TAMPER"
	task "$T/rules"
	run icurl -o /dev/null "https://localhost:$REG/left-pad"
	assert_success
	run icurl -o "$T/got" "https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz"
	assert_failure
	run grep -c ' failed localhost:[0-9]* GET /left-pad/-/left-pad-1.0.0.tgz (the artifact does not match the digest its metadata gives) status=200 cache=bad ' "$T/proxy.log"
	assert_output 1
	run npm_install "$T/p1"
	assert_failure
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
	stop_proxy
	# curl's once, and npm's at least once (it tries again).
	run jq -e '.cache.refused >= 2 and .cache.hits == 0' "$T/record.json"
	assert_success

	rm "$T/reg/TAMPER"
	task "$T/rules"
	run icurl -o /dev/null "https://localhost:$REG/left-pad"
	assert_success
	# A Range, a conditional header: forwarded, checked by nobody, never stored.
	run icurl -o /dev/null -H 'Range: bytes=0-9' "https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run icurl -o /dev/null -H 'If-None-Match: "x"' "https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz"
	assert_success
	run grep -c ' cache=bypass ' "$T/proxy.log"
	assert_output 2
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
}

# two_tasks MS: the registry sending artifacts in 4 pieces MS apart, and two
# tasks (proxies) on one store, each having read left-pad's document: p1
# (proxy1.log, taskca1.pem, PROXY2_PID) and p2; url, left-pad's tarball.
two_tasks() {
	kill "$REG_PID"
	rm -rf "$T/reg" "$T/reg.port"
	start_registry --slow "$1"
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	task "$T/rules"
	p1=$PROXY
	PROXY2_PID=$PROXY_PID
	mv "$T/proxy.log" "$T/proxy1.log"
	mv "$T/taskca.pem" "$T/taskca1.pem"
	PROXY_PID=
	task "$T/rules"
	p2=$PROXY
	url=https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz
	curl -sS -x "$p1" --cacert "$T/taskca1.pem" -o /dev/null "https://localhost:$REG/left-pad" || return 1
	curl -sS -x "$p2" --cacert "$T/taskca.pem" -o /dev/null "https://localhost:$REG/left-pad"
}

@test "cache npm: two tasks asking for the same tarball at once make one download, and both get it whole" {
	two_tasks 250
	curl -sS -x "$p1" --cacert "$T/taskca1.pem" -o "$T/a.tgz" "$url" &
	local a=$!
	curl -sS -x "$p2" --cacert "$T/taskca.pem" -o "$T/b.tgz" "$url" &
	local b=$!
	local sa=0 sb=0
	wait $a || sa=$?
	wait $b || sb=$?
	# both proxies done with their lines (pcurl's wait, for the two)
	PROXY_PID=$PROXY2_PID proxy_settle
	proxy_settle
	assert_equal "$sa $sb" "0 0"
	run cmp "$T/a.tgz" "$T/reg/npm/left-pad-1.0.0.tgz"
	assert_success
	run cmp "$T/b.tgz" "$T/reg/npm/left-pad-1.0.0.tgz"
	assert_success
	assert_equal "$(reg_count '\.tgz$')" 1
	run cat "$T/proxy1.log" "$T/proxy.log"
	assert_equal "$(grep -c ' cache=fill ' <<<"$output")" 1
	assert_equal "$(grep -c ' cache=hit ' <<<"$output")" 1
}

@test "cache npm: a task waits for another task's fill that goes on slowly (a piece every 2.5 s) and gets it from the store" {
	two_tasks 2500
	curl -sS -x "$p1" --cacert "$T/taskca1.pem" -o "$T/a.tgz" "$url" &
	local a=$!
	# the second asks once the first's fill has begun: its lock is held
	wait_until 10 grep -q 'GET /left-pad/-/left-pad-1.0.0.tgz' "$T/reg.log"
	curl -sS -x "$p2" --cacert "$T/taskca.pem" -o "$T/b.tgz" "$url"
	wait $a
	PROXY_PID=$PROXY2_PID proxy_settle
	proxy_settle
	run cmp "$T/b.tgz" "$T/reg/npm/left-pad-1.0.0.tgz"
	assert_success
	# the fill took longer than a waiter's 5 s without growth, but grew: one download
	assert_equal "$(reg_count '\.tgz$')" 1
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
}

@test "cache npm: an artifact fetched with a secret is kept in its project's scope, never served to another project's task" {
	printf 'secret TOK %s\nvalue tok-value\nhost localhost:%s\nrule localhost:%s\ncache npm\n' \
		"$PH" "$REG" "$REG" >"$T/rules-secret"
	local url=https://localhost:$REG/left-pad/-/left-pad-1.0.0.tgz
	task "$T/rules-secret" --cache-scope project:a
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "https://localhost:$REG/left-pad"
	assert_success
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "$url"
	assert_success
	run aibox cache list
	assert_success
	assert_line --regexp "  project:a/[0-9a-f]{32}  $url#sha512="
	# The same project's next task: a hit.
	task "$T/rules-secret" --cache-scope project:a
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "https://localhost:$REG/left-pad"
	assert_success
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "$url"
	assert_success
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
	assert_equal "$(reg_count '\.tgz$')" 1
	# Another project's task, with its secret or without: never project a's entry.  On
	# the secret's host even the request without the placeholder is project b's (the
	# host may let it in on what the first proved): its own fill, a hit.
	task "$T/rules-secret" --cache-scope project:b
	run icurl -o /dev/null "https://localhost:$REG/left-pad"
	assert_success
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "$url"
	assert_success
	run icurl -o /dev/null "$url"
	assert_success
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 1
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
	assert_equal "$(reg_count '\.tgz$')" 2
	run aibox cache list
	assert_success
	assert_line --regexp "  project:b/[0-9a-f]{32}  $url#sha512="
	# Without a scope, what a secret fetched is not kept at all.
	task "$T/rules-secret"
	run icurl -o /dev/null "https://localhost:$REG/right-pad"
	assert_success
	run icurl -o /dev/null -H "Authorization: Bearer $PH" "https://localhost:$REG/right-pad/-/right-pad-2.1.0.tgz"
	assert_success
	run aibox cache list
	assert_success
	refute_output --partial right-pad
}

@test "cache pypi: pip download fills from a simple index's #sha256 links, and the second task's takes the wheel from the store" {
	"$PY" -m pip --version >/dev/null 2>&1 || skip "no pip on this host (packages.txt: python3-pip)"
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	local i
	for i in 1 2; do
		task "$T/rules"
		run env HTTPS_PROXY="$PROXY" https_proxy="$PROXY" PIP_CONFIG_FILE=/dev/null \
			SSL_CERT_FILE="$T/taskca.pem" REQUESTS_CA_BUNDLE="$T/taskca.pem" \
			"$PY" -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q \
			--index-url "https://localhost:$REG/simple/" --cert "$T/taskca.pem" \
			-d "$T/dl$i" demo-pkg==1.0
		proxy_settle
		assert_success
		run cmp "$T/dl$i/demo_pkg-1.0-py3-none-any.whl" "$T/reg/pypi/demo_pkg-1.0-py3-none-any.whl"
		assert_success
	done
	assert_equal "$(reg_count '^GET /packages/')" 1
	assert_equal "$(reg_count '^GET /simple/demo-pkg/$')" 2
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 1
}

# b2 FILE: the file's blake2b-256, in hex (Python's, not ours).
b2() {
	"$PY" -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$1"
}

@test "cache pypi: a file in PyPI's layout is checked against the blake2b-256 its path names, with no index; other spellings are not" {
	local w=demo_pkg-1.0-py3-none-any.whl h o t
	h=$(b2 "$T/reg/pypi/$w")
	o=$(printf '%s' "$h" | tr 0-9a-f 1-9a-f0)
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	task "$T/rules"
	local u=https://localhost:$REG/packages/${h:0:2}/${h:2:2}/${h:4}/$w i
	for i in 1 2; do
		run icurl -o "$T/got$i" "$u"
		assert_success
		run cmp "$T/got$i" "$T/reg/pypi/$w"
		assert_success
	done
	run grep -cE " GET /packages/${h:0:2}/${h:2:2}/${h:4}/$w status=200 cache=(fill|hit) " "$T/proxy.log"
	assert_output 2
	assert_equal "$(reg_count "^GET /packages/")" 1
	run aibox cache list
	assert_success
	assert_line --regexp "  -  $u#blake2b256=$h\$"
	# A path naming other bytes: cut before its end, nothing stored.
	run icurl -o /dev/null "https://localhost:$REG/packages/${o:0:2}/${o:2:2}/${o:4}/$w"
	assert_failure
	run grep -c " GET /packages/${o:0:2}/${o:2:2}/${o:4}/$w (the file does not match the blake2b-256 its URL gives) status=200 cache=bad " "$T/proxy.log"
	assert_output 1
	# Other spellings: uppercase hex, other lengths, escapes, dot segments.  Forwarded whole, never stored.
	# The escape is of the path's own hex digit (%36 for 6), so it means the same path: the digest's
	# bytes escaped as they are (%15) would be a control byte, which the rules refuse (403, no cache=).
	local H=${h^^} e
	e=$(printf '%%%02x' "'${h:2:1}")
	for t in "${h:0:2}/${h:2:2}/${H:4}/$w" "${h:0:2}/${h:2:2}/${h:4:58}/$w" "${h:0:2}/${h:2:2}${h:4}/$w" \
		"${h:0:2}/${h:2:2}/${h:4}0/$w" "${h:0:2}/$e${h:3:1}/${h:4}/$w" "${h:0:2}/${h:2:2}/./${h:4}/$w" \
		"${h:0:2}/x/../${h:2:2}/${h:4}/$w"; do
		run icurl --path-as-is -o "$T/got" "https://localhost:$REG/packages/$t"
		assert_success
	done
	run grep -cE " GET /packages/.* cache=(fill|hit|bad) " "$T/proxy.log"
	assert_output 3
	# The proxy writes a request's line once its answer is relayed: the last may come after curl ends.
	wait_until 10 sh -c '[ "$(grep -c " cache=bypass " "$1")" -ge 3 ]' _ "$T/proxy.log" || true
	# The count, then the lines (shown if the count is wrong).
	run sh -c 'grep -c " cache=bypass " "$1"; grep " /packages/" "$1"' _ "$T/proxy.log"
	assert_line --index 0 3
	refute_line --partial " refused "
	run aibox cache size
	assert_success
	assert_output --partial " in 1 entries"
	# On a host whose rule is not cache: pypi, the same path is no PyPI file: forwarded whole, not stored.
	printf 'rule localhost:%s\ncache npm\n' "$REG" >"$T/rules"
	task "$T/rules"
	run icurl -o "$T/got" "https://localhost:$REG/packages/${o:0:2}/${o:2:2}/${o:4}/$w"
	assert_success
	run cmp "$T/got" "$T/reg/pypi/$w"
	assert_success
	run grep -cE " cache=(fill|hit|bad) " "$T/proxy.log"
	assert_output 0
}

@test "cache pypi: pip fetches a file by its URL, checked by its path's blake2b-256, then from the store; an index's link is checked by both digests" {
	"$PY" -m pip --version >/dev/null 2>&1 || skip "no pip on this host (packages.txt: python3-pip)"
	local w=demo_pkg-1.0-py3-none-any.whl h i
	h=$(b2 "$T/reg/pypi/$w")
	printf 'rule localhost:%s\ncache pypi\n' "$REG" >"$T/rules"
	for i in 1 2; do
		task "$T/rules"
		run env HTTPS_PROXY="$PROXY" https_proxy="$PROXY" PIP_CONFIG_FILE=/dev/null \
			SSL_CERT_FILE="$T/taskca.pem" REQUESTS_CA_BUNDLE="$T/taskca.pem" \
			"$PY" -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q \
			--no-index --cert "$T/taskca.pem" -d "$T/dl$i" \
			"https://localhost:$REG/packages/${h:0:2}/${h:2:2}/${h:4}/$w"
		proxy_settle
		assert_success
		run cmp "$T/dl$i/$w" "$T/reg/pypi/$w"
		assert_success
	done
	run grep -c " GET /packages/${h:0:2}/${h:2:2}/${h:4}/$w status=200 cache=hit " "$T/proxy.log"
	assert_output 1
	assert_equal "$(reg_count '^GET /packages/')" 1
	# An index whose links name the right sha256 but another blake2b-256: the file is cut.
	touch "$T/reg/B2LINKS" "$T/reg/B2LIE"
	aibox cache clear
	task "$T/rules"
	run icurl -o "$T/index.html" "https://localhost:$REG/simple/demo-pkg/"
	assert_success
	run grep -o "/packages/[^#]*" "$T/index.html"
	assert_success
	run icurl -o /dev/null "https://localhost:$REG$output"
	assert_failure
	run grep -c "(the file does not match the blake2b-256 its URL gives) status=200 cache=bad " "$T/proxy.log"
	assert_output 1
	# Both right: kept under the index's sha256.
	rm "$T/reg/B2LIE"
	run icurl -o /dev/null "https://localhost:$REG/simple/demo-pkg/"
	assert_success
	run icurl -o "$T/got" "https://localhost:$REG/packages/${h:0:2}/${h:2:2}/${h:4}/$w"
	assert_success
	run cmp "$T/got" "$T/reg/pypi/$w"
	assert_success
	run aibox cache list
	assert_success
	assert_line --regexp "/packages/${h:0:2}/${h:2:2}/${h:4}/$w#sha256=$(sha256sum "$T/reg/pypi/$w" | cut -c1-64)\$"
}

# crates_registry: the registry again, its index on localhost and its crate
# files on 127.0.0.1 (two hosts to the proxy, as index.crates.io and
# static.crates.io), both cache: crates in $T/rules.
crates_registry() {
	kill "$REG_PID"
	rm -rf "$T/reg" "$T/reg.port"
	start_registry --dl-host 127.0.0.1
	printf 'rule localhost:%s\ncache crates\nrule 127.0.0.1:%s\ncache crates\n' "$REG" "$REG" >"$T/rules"
}

@test "cache crates: a crate file on the download host is checked against the cksum its index host gave, by name and version; hostile spellings and lying indexes store nothing" {
	crates_registry
	local dl=https://127.0.0.1:$REG/crates/demo/1.0.0/download sum
	sum=$(sha256sum "$T/reg/crates/demo-1.0.0.crate" | cut -c1-64)
	task "$T/rules" --allow "127.0.0.1:$REG"
	# Before the proxy saw its index: forwarded whole, stored nowhere.
	run icurl -o "$T/got" "$dl"
	assert_success
	run cmp "$T/got" "$T/reg/crates/demo-1.0.0.crate"
	assert_success
	run icurl -o /dev/null "https://localhost:$REG/index/config.json"
	assert_success
	run icurl -o /dev/null "https://localhost:$REG/index/de/mo/demo"
	assert_success
	# Other spellings of the same file: never from the store, never into it.
	run icurl -o /dev/null --path-as-is "https://127.0.0.1:$REG/crates/x/../demo/1.0.0/download"
	assert_success
	run icurl -o /dev/null "https://127.0.0.1:$REG/crates/dem%6f/1.0.0/download"
	assert_success
	run icurl -o /dev/null --path-as-is "https://127.0.0.1:$REG/crates/demo/./1.0.0/download"
	assert_success
	run grep -c ' cache=bypass ' "$T/proxy.log"
	assert_output 3
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
	# Now the file: filled, then a hit.
	local i
	for i in 1 2; do
		run icurl -o "$T/got$i" "$dl"
		assert_success
		run cmp "$T/got$i" "$T/reg/crates/demo-1.0.0.crate"
		assert_success
	done
	run grep -cE " GET /crates/demo/1.0.0/download status=200 cache=(fill|hit) " "$T/proxy.log"
	assert_output 2
	assert_equal "$(reg_count '^GET /crates/demo/1.0.0/download$')" 2
	run aibox cache list
	assert_success
	assert_line --regexp "  -  $dl#sha256=$sum\$"

	# An index line that lies: the file is cut before its end, nothing stored.
	aibox cache clear
	touch "$T/reg/LIE"
	task "$T/rules" --allow "127.0.0.1:$REG"
	run icurl -o /dev/null "https://localhost:$REG/index/de/mo/demo"
	assert_success
	run icurl -o /dev/null "$dl"
	assert_failure
	run grep -c ' GET /crates/demo/1.0.0/download (the artifact does not match the digest its metadata gives) status=200 cache=bad ' "$T/proxy.log"
	assert_output 1
	# Two lines for one version with different cksums: neither is trusted; forwarded whole, not stored.
	rm "$T/reg/LIE"
	touch "$T/reg/DOUBLE"
	task "$T/rules" --allow "127.0.0.1:$REG"
	run icurl -o /dev/null "https://localhost:$REG/index/de/mo/demo"
	assert_success
	run icurl -o "$T/got" "$dl"
	assert_success
	run cmp "$T/got" "$T/reg/crates/demo-1.0.0.crate"
	assert_success
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
}

@test "cache crates: an index read while a crate file streams, growing the digests' table, leaves the streaming file's check whole" {
	kill "$REG_PID"
	rm -rf "$T/reg" "$T/reg.port"
	start_registry --slow 300
	printf 'rule localhost:%s\ncache crates\n' "$REG" >"$T/rules"
	task "$T/rules"
	run icurl -o /dev/null "https://localhost:$REG/index/de/mo/demo"
	assert_success
	icurl -o "$T/got" "https://localhost:$REG/crates/demo/1.0.0/download" &
	local pid=$! st=0
	wait_until 10 grep -q '^GET /crates/demo/1.0.0/download$' "$T/reg.log"
	# 300 more digests while the file streams: the table is moved.
	touch "$T/reg/MANY"
	run icurl -o /dev/null "https://localhost:$REG/index/de/mo/demo"
	assert_success
	wait $pid || st=$?
	assert_equal "$st" 0
	run cmp "$T/got" "$T/reg/crates/demo-1.0.0.crate"
	assert_success
	run grep -c ' GET /crates/demo/1.0.0/download status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
}

@test "cache crates: the host's real cargo fetch from a sparse registry fills the store, and the second task's takes every crate from it" {
	command -v cargo >/dev/null || skip "no cargo on this host"
	[ -n "${RUSTUP_HOME:-}" ] || [ ! -d "$REAL_HOME/.rustup" ] || export RUSTUP_HOME=$REAL_HOME/.rustup
	crates_registry
	local i
	for i in 1 2; do
		task "$T/rules" --allow "127.0.0.1:$REG"
		mkdir -p "$T/cargo$i" "$T/p$i/src"
		printf '[source.crates-io]\nreplace-with = "loop"\n[source.loop]\nregistry = "sparse+https://localhost:%s/index/"\n[http]\nproxy = "%s"\ncainfo = "%s"\n[net]\nretry = 0\n' \
			"$REG" "$PROXY" "$T/taskca.pem" >"$T/cargo$i/config.toml"
		printf '[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\ndemo = "1.0.0"\nother_lib = "0.3"\n' >"$T/p$i/Cargo.toml"
		: >"$T/p$i/src/lib.rs"
		run env CARGO_HOME="$T/cargo$i" cargo fetch -q --manifest-path "$T/p$i/Cargo.toml"
		proxy_settle
		assert_success
		run cat "$T"/cargo$i/registry/src/*/demo-1.1.0/src/lib.rs
		assert_output 'pub const V: &str = "demo 1.1.0";'
		run grep -c ' cache=hit ' "$T/proxy.log"
		assert_output $((i == 1 ? 0 : 2))
	done
	assert_equal "$(reg_count '^GET /crates/demo/1.1.0/download$')" 1
	assert_equal "$(reg_count '^GET /crates/other_lib/0.3.0/download$')" 1
	assert_equal "$(reg_count '^GET /index/de/mo/demo$')" 2
}
