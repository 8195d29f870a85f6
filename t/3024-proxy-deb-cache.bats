#!/usr/bin/env bats
# The dependency cache's debian kind in aibox-proxy (docs/cache.md, "debian"):
# a loopback apt repository signed with a test key (t/deb-repo serves it over
# TLS, with a CA of its own as in t/3020), and the host's real apt-get, in a
# private root, through the proxy and trusting the task CA.  By-hash files
# are checked against their URL's digest, .deb files against the SHA256 of
# the Packages index the proxy read.  Each proxy stands for one task; they
# share the store.
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy
load lib-deps

setup_file() {
	command -v dpkg-scanpackages >/dev/null || skip "no dpkg-scanpackages (packages.txt: dpkg-dev)"
	command -v gpg >/dev/null || skip "no gpg (packages.txt: gpg)"
	make_test_ca "$BATS_FILE_TMPDIR/ca"
	make_deb_repo "$BATS_FILE_TMPDIR"
	# A second suite whose index gives hello other bytes.
	sed "/^Filename: .*hello/,/^SHA256:/ s/^SHA256: .*/SHA256: $(printf 'e%.0s' {1..64})/" \
		"$BATS_FILE_TMPDIR/Packages" >"$BATS_FILE_TMPDIR/Packages.lie"
	GNUPGHOME=$BATS_FILE_TMPDIR/gnupg make_index "$BATS_FILE_TMPDIR/repo/debian" other "$BATS_FILE_TMPDIR/Packages.lie"
	gpgconf --homedir "$BATS_FILE_TMPDIR/gnupg" --kill gpg-agent
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	cp -r "$BATS_FILE_TMPDIR/repo" "$T/repo"
	export SSL_CERT_FILE=$T/ca/ca.pem
	export AIBOX_DEPS_CACHE=$T/deps
	: >"$T/repo.log"
	"$PY" "$TOP/t/deb-repo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/repo" \
		--port-file "$T/repo.port" --log "$T/repo.log" 2>"$T/repo.err" &
	REPO_PID=$!
	wait_until 10 file_or_gone "$T/repo.port" $REPO_PID
	REG=$(cat "$T/repo.port")
	U=https://localhost:$REG/debian
	printf 'rule localhost:%s\ncache debian\n' "$REG" >"$T/rules"
}

teardown() {
	stop_proxy || true
	[ -z "${REPO_PID:-}" ] || kill "$REPO_PID" 2>/dev/null || true
	common_teardown
}

# task: one task's proxy, the repository's host cached as debian; the task CA in $T/taskca.pem.
task() {
	dep_task "$T/rules" "$T/deps"
}

repo_count() {
	log_count "$T/repo.log" "$1"
}

# apt_get DIR ARGS...: the host's apt-get in a private root DIR (its state,
# cache and sources), through the proxy, trusting the task CA, gz indexes first.
# Then proxy_settle: the lines of its last requests are in proxy.log.
apt_get() {
	local d=$1
	shift
	mkdir -p "$d/state/lists/partial" "$d/cache/archives/partial" "$d/parts" "$d/prefs" "$d/dl"
	: >"$d/status"
	printf 'deb [signed-by=%s arch=amd64] %s stable main\n' "$BATS_FILE_TMPDIR/repo.gpg" "$U" >"$d/sources.list"
	cat >"$d/apt.conf" <<-EOF
		Dir::Etc::main "/dev/null";
		Dir::Etc::parts "$d/parts";
		Dir::Etc::SourceList "$d/sources.list";
		Dir::Etc::SourceParts "$d/parts";
		Dir::Etc::Preferences "/dev/null";
		Dir::Etc::PreferencesParts "$d/prefs";
		Dir::Etc::Trusted "/dev/null";
		Dir::Etc::TrustedParts "$d/parts";
		Dir::State "$d/state";
		Dir::State::status "$d/status";
		Dir::Cache "$d/cache";
		APT::Architecture "amd64";
		APT::Sandbox::User "$(id -un)";
		Acquire::Languages "none";
		Acquire::https::Proxy "$PROXY";
		Acquire::https::CaInfo "$T/taskca.pem";
		Acquire::CompressionTypes::Order:: "gz";
		Acquire::Retries "0";
	EOF
	local st=0
	(cd "$d/dl" && APT_CONFIG=$d/apt.conf apt-get -q "$@") || st=$?
	proxy_settle
	return "$st"
}

@test "cache debian: apt-get's first task fills the store, the second's takes the by-hash index and every .deb from it and none from upstream" {
	task
	run apt_get "$T/a1" update
	assert_success
	run apt_get "$T/a1" download hello world
	assert_success
	run cmp "$T/a1/dl/hello_1.0_all.deb" "$T/repo/debian/pool/main/hello_1.0_all.deb"
	assert_success
	assert_equal "$(repo_count '^GET /debian/dists/stable/main/binary-amd64/by-hash/SHA256/')" 1
	assert_equal "$(repo_count '\.deb$')" 2
	# The by-hash index and both packages.
	run grep -c ' cache=fill ' "$T/proxy.log"
	assert_output 3
	stop_proxy
	run aibox cache list
	assert_success
	assert_line --regexp "  -  $U/pool/main/world_2.0~rc1_all.deb#sha256=$(sha256sum "$T/repo/debian/pool/main/world_2.0~rc1_all.deb" | cut -c1-64)\$"

	: >"$T/repo.log"
	task
	run apt_get "$T/a2" update
	assert_success
	run apt_get "$T/a2" download hello world
	assert_success
	run cmp "$T/a2/dl/world_2.0~rc1_all.deb" "$T/repo/debian/pool/main/world_2.0~rc1_all.deb"
	assert_success
	# InRelease is metadata: from upstream each time; nothing else is.
	assert_equal "$(repo_count '^GET /debian/dists/stable/InRelease$')" 1
	assert_equal "$(repo_count '\.deb$')" 0
	assert_equal "$(repo_count 'by-hash')" 0
	run grep -c ' cache=hit ' "$T/proxy.log"
	assert_output 3
	stop_proxy
	run jq -c '.cache | [.hits, .misses, .bytes_from_upstream, .refused]' "$T/record.json"
	assert_output '[3,0,0,0]'
}

@test "cache debian: a .deb before its index, a tampered .deb or by-hash file, two indexes that disagree and hostile spellings: nothing wrong stored or served whole" {
	local deb=$U/pool/main/hello_1.0_all.deb gz
	gz=$(sha256sum "$T/repo/debian/dists/stable/main/binary-amd64/Packages.gz" | cut -c1-64)
	task
	# Before any index: forwarded whole, stored nowhere.
	run icurl -o "$T/got" "$deb"
	assert_success
	run cmp "$T/got" "$T/repo/debian/pool/main/hello_1.0_all.deb"
	assert_success
	run icurl -o /dev/null "$U/dists/stable/main/binary-amd64/Packages.gz"
	assert_success
	run grep -c ' GET /debian/dists/stable/main/binary-amd64/Packages.gz status=200 cache=meta ' "$T/proxy.log"
	assert_output 1
	# Other spellings of the package: never from the store, never into it.
	run icurl -o /dev/null "$U/pool/main/hello_1.0_all%2edeb"
	assert_success
	run icurl -o /dev/null --path-as-is "$U/pool/x/../main/hello_1.0_all.deb"
	assert_success
	run icurl -o /dev/null --path-as-is "$U/pool//main/hello_1.0_all.deb"
	assert_success
	run grep -c ' cache=bypass ' "$T/proxy.log"
	assert_output 3
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
	# Tampered upstream: cut before its end, counted, not stored.
	touch "$T/repo/TAMPER"
	run icurl -o /dev/null "$deb"
	assert_failure
	run grep -c ' GET /debian/pool/main/hello_1.0_all.deb (the artifact does not match the digest its metadata gives) status=200 cache=bad ' "$T/proxy.log"
	assert_output 1
	touch "$T/repo/BADHASH"
	run icurl -o /dev/null "$U/dists/stable/main/binary-amd64/by-hash/SHA256/$gz"
	assert_failure
	run grep -c " GET /debian/dists/stable/main/binary-amd64/by-hash/SHA256/$gz (the artifact does not match the digest its metadata gives) status=200 cache=bad " "$T/proxy.log"
	assert_output 1
	run aibox cache size
	assert_success
	assert_output --partial "0 bytes in 0 entries"
	rm "$T/repo/TAMPER" "$T/repo/BADHASH"
	# Now whole: filled.
	run icurl -o "$T/got" "$deb"
	assert_success
	run grep -c ' GET /debian/pool/main/hello_1.0_all.deb status=200 cache=fill ' "$T/proxy.log"
	assert_output 1
	# A second index giving hello other bytes: forgotten, forwarded, never stored or served from the store.
	aibox cache clear
	task
	run icurl -o /dev/null "$U/dists/stable/main/binary-amd64/Packages"
	assert_success
	run icurl -o /dev/null "$U/dists/other/main/binary-amd64/Packages.gz"
	assert_success
	run icurl -o "$T/got" "$deb"
	assert_success
	run cmp "$T/got" "$T/repo/debian/pool/main/hello_1.0_all.deb"
	assert_success
	run icurl -o /dev/null "$U/pool/main/world_2.0~rc1_all.deb"
	assert_success
	run aibox cache list
	assert_success
	refute_output --partial hello
	assert_output --partial "$U/pool/main/world_2.0~rc1_all.deb#sha256="
}
