#!/usr/bin/env bats
# aibox-proxy's allow list with real clients: curl through the proxy to a local
# server, for hosts, ports, wildcards, presets, IP literals and names that
# resolve to loopback; the log; options; the lockdown; a clean stop.
load lib-common
load lib-claude
load lib-tls
load lib-proxy
load lib-dns

setup() {
	common_setup
	echo '{"turns": []}' >"$T/script.json"
	# Names for the proxy's resolver (test-only): it never asks DNS here.
	cat >"$T/hosts" <<-EOF
		127.0.0.1 evil.test a.example.test b.other.test example.test github.com
		127.0.0.1 deep.a.example.test
	EOF
	export AIBOX_PROXY_HOSTS=$T/hosts
}

teardown() {
	stop_proxy || true
	stop_fake_api
	common_teardown
}

@test "proxy: --help, bad options and bad entries exit 2 with a message" {
	run aibox-proxy --help
	assert_success
	assert_output --partial "--allow ENTRY"
	run aibox-proxy --bogus
	[ "$status" -eq 2 ]
	assert_line --index 0 --partial "'--bogus'"
	run aibox-proxy --allow 'exa mple.com'
	[ "$status" -eq 2 ]
	assert_output --partial "invalid entry 'exa mple.com'"
	run aibox-proxy --allow '*.com'
	[ "$status" -eq 2 ]
	assert_output --partial "invalid entry '*.com': a wildcard needs a domain with a dot"
	run aibox-proxy --allow 'example.com:99999'
	[ "$status" -eq 2 ]
	assert_output --partial "invalid entry 'example.com:99999': invalid port"
	run aibox-proxy --allow 'preset:nonesuch'
	[ "$status" -eq 2 ]
	assert_output --partial "unknown preset 'nonesuch'"
	run aibox-proxy --allow 'preset:../etc'
	[ "$status" -eq 2 ]
	assert_output --partial "bad preset name"
	run env -u AIBOX_TEST_NO_KEY aibox-proxy --key-env AIBOX_TEST_NO_KEY
	[ "$status" -eq 2 ]
	assert_output "aibox-proxy: the variable 'AIBOX_TEST_NO_KEY' is not set"
	run aibox-proxy --listen 127.0.0.1:0 --listen-fd 5
	[ "$status" -eq 2 ]
	assert_output --partial "--listen-fd 5"
}

@test "proxy: an allowed host:port is reached, plain HTTP and through CONNECT, and logged" {
	make_test_ca "$T/ca"
	start_fake_api "$T/script.json"
	plain=$FAKE_API_PORT
	FAKE_API_PID_PLAIN=$FAKE_API_PID
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	start_proxy --allow "127.0.0.1:$plain" --allow "localhost:$FAKE_API_PORT"
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:$plain/api/hello"
	assert_success
	assert_output '{}'
	run pcurl -sS -x "$PROXY" --cacert "$T/ca/ca.pem" "https://localhost:$FAKE_API_PORT/api/hello"
	assert_success
	assert_output '{}'
	# the same server under another port or name is not on the list
	run pcurl -sS -x "$PROXY" --cacert "$T/ca/ca.pem" "https://127.0.0.1:$FAKE_API_PORT/api/hello"
	assert_failure
	run pcurl -sS -x "$PROXY" "http://localhost:$plain/api/hello"
	assert_output 'aibox-proxy: not on the allow list'
	kill "$FAKE_API_PID_PLAIN"; wait "$FAKE_API_PID_PLAIN" || true
	# A tunnel's line comes once both its ends closed, the server's after curl's,
	# and the proxy sleeps between them: waited for, as pcurl cannot.
	wait_until 10 grep -q " allowed localhost:$FAKE_API_PORT CONNECT " "$T/proxy.log" || true
	run cat "$T/proxy.log"
	assert_line --regexp "^20[0-9-]+T[0-9:.]+Z allowed 127\.0\.0\.1:$plain GET status=200 sent=[1-9][0-9]* received=[1-9][0-9]* duration=[0-9.]+s$"
	assert_line --regexp "^[^ ]+ allowed localhost:$FAKE_API_PORT CONNECT sent=[1-9][0-9]* received=[1-9][0-9]* duration=[0-9.]+s$"
	assert_line --regexp "^[^ ]+ refused 127\.0\.0\.1:$FAKE_API_PORT CONNECT \(not on the allow list\) status=403 sent=0 received=0 duration="
	assert_line --regexp "^[^ ]+ refused localhost:$plain GET \(not on the allow list\) status=403 "
}

@test "proxy: refusals are a 403 with a one-line reason" {
	start_proxy
	run curl -sS -i -x "$PROXY" "http://nowhere.test/"
	assert_line --index 0 --partial "HTTP/1.1 403 Forbidden"
	assert_line --partial "Content-Type: text/plain"
	[ "${lines[-1]}" = "aibox-proxy: not on the allow list" ]
	run curl -sS -p -x "$PROXY" "http://nowhere.test:443/"
	assert_failure
	assert_output --partial "403"
}

@test "proxy: a host entry means port 443; a port is reached only when an entry names it" {
	start_proxy --allow evil.test --allow localhost:5999
	run raw_request 'CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n'
	assert_output --partial "resolves to a non-public address"
	run raw_request 'CONNECT evil.test:80 HTTP/1.1\r\nHost: evil.test:80\r\n\r\n'
	assert_output --partial "not on the allow list"
	run raw_request 'CONNECT localhost:22 HTTP/1.1\r\nHost: localhost:22\r\n\r\n'
	assert_output --partial "403 Forbidden"
	assert_output --partial "not on the allow list"
	run raw_request 'CONNECT 127.0.0.1:5999 HTTP/1.1\r\nHost: 127.0.0.1:5999\r\n\r\n'
	assert_output --partial "not on the allow list"
	# localhost:5999 is allowed; nothing listens there
	run raw_request 'CONNECT localhost:5999 HTTP/1.1\r\nHost: localhost:5999\r\n\r\n'
	assert_output --partial "502 Bad Gateway"
	assert_output --partial "cannot connect: Connection refused"
}

@test "proxy: a public name that resolves to loopback gets nowhere" {
	start_fake_api "$T/script.json"
	start_proxy --allow "evil.test:$FAKE_API_PORT" --allow "example.test:$FAKE_API_PORT"
	run pcurl -sS -x "$PROXY" "http://evil.test:$FAKE_API_PORT/api/hello"
	assert_output "aibox-proxy: the host resolves to a non-public address"
	run pcurl -sS -p -x "$PROXY" "http://example.test:$FAKE_API_PORT/api/hello"
	assert_failure
	grep -q "^[^ ]* refused evil.test:$FAKE_API_PORT GET (the host resolves to a non-public address)" "$T/proxy.log"
	grep -q "^[^ ]* refused example.test:$FAKE_API_PORT CONNECT (the host resolves to a non-public address)" "$T/proxy.log"
	stop_proxy
	# a name not in the table does not resolve at all (no DNS in tests)
	start_proxy --allow "nothere.test:$FAKE_API_PORT"
	run curl -sS -x "$PROXY" "http://nothere.test:$FAKE_API_PORT/api/hello"
	assert_output "aibox-proxy: cannot resolve the host name"
}

@test "proxy: wildcards match subdomains only; names match whole, case-insensitively" {
	start_proxy --allow '*.example.test' --allow 'github.com:8443'
	for h in a.example.test A.Example.TEST deep.a.example.test a.example.test.; do
		run raw_request "CONNECT $h:443 HTTP/1.1\r\n\r\n"
		assert_output --partial "resolves to a non-public address"
	done
	for h in example.test b.other.test xa.example.test.evil aexample.test; do
		run raw_request "CONNECT $h:443 HTTP/1.1\r\n\r\n"
		assert_output --partial "not on the allow list"
	done
	run raw_request 'CONNECT GitHub.com:8443 HTTP/1.1\r\n\r\n'
	assert_output --partial "resolves to a non-public address"
	run raw_request 'CONNECT github.com:443 HTTP/1.1\r\n\r\n'
	assert_output --partial "not on the allow list"
}

@test "proxy: preset:github allows GitHub's hosts; presets come from the data folder or --presets" {
	start_proxy --allow preset:github
	for h in github.com api.github.com codeload.github.com objects.githubusercontent.com; do
		run raw_request "CONNECT $h:443 HTTP/1.1\r\n\r\n"
		refute_output --partial "not on the allow list"
	done
	run raw_request 'CONNECT gist.github.com:443 HTTP/1.1\r\n\r\n'
	assert_output --partial "not on the allow list"
	run raw_request 'CONNECT github.com:22 HTTP/1.1\r\n\r\n'
	assert_output --partial "not on the allow list"
	stop_proxy

	start_fake_api "$T/script.json"
	mkdir "$T/presets"
	printf '# a test preset\n\nlocalhost:%s\n' "$FAKE_API_PORT" >"$T/presets/local"
	printf 'preset:local\n# comment\n' >"$T/allow.txt"
	start_proxy --presets "$T/presets" --allow-file "$T/allow.txt"
	run curl -sS -x "$PROXY" "http://localhost:$FAKE_API_PORT/api/hello"
	assert_output '{}'
	printf 'preset:local\n' >"$T/presets/loop"
	run aibox-proxy --presets "$T/presets" --allow preset:loop
	[ "$status" -eq 2 ]
	assert_output --partial "a preset cannot name a preset"
}

@test "proxy: a rule's methods and paths hold for plain http:// requests, not only inside CONNECT" {
	start_fake_api "$T/script.json"
	printf 'rule localhost:%s\nmethod GET\npath /api/*\n' "$FAKE_API_PORT" >"$T/secrets"
	start_proxy --allow "localhost:$FAKE_API_PORT" --secrets-fd 5 --ca-fd 6 5<"$T/secrets" 6>"$T/taskca.pem"
	# the control: what the rule lets through passes
	run pcurl -sS -x "$PROXY" "http://localhost:$FAKE_API_PORT/api/hello"
	assert_output '{}'
	run pcurl -sS -x "$PROXY" -X DELETE "http://localhost:$FAKE_API_PORT/api/hello"
	assert_output 'aibox-proxy: method DELETE is not allowed'
	run pcurl -sS -x "$PROXY" "http://localhost:$FAKE_API_PORT/admin"
	assert_output 'aibox-proxy: path /admin is not allowed'
	run pcurl -sS -x "$PROXY" --path-as-is "http://localhost:$FAKE_API_PORT/api/../admin"
	assert_output 'aibox-proxy: the path is not one the rules can read'
	run pcurl -sS -x "$PROXY" -H 'X-HTTP-Method-Override: DELETE' "http://localhost:$FAKE_API_PORT/api/hello"
	assert_output 'aibox-proxy: a method override header on a host whose rule lists the methods'
	# only the control reached the host
	assert_file_exists "$T/rec/0001.json"
	assert_file_not_exists "$T/rec/0002.json"
	run grep -c "^[^ ]* refused localhost:$FAKE_API_PORT " "$T/proxy.log"
	assert_output 4
}

@test "proxy: the path a rule refuses is named escaped, never as the bytes it decodes to" {
	start_fake_api "$T/script.json"
	printf 'rule localhost:%s\npath /api/*\n' "$FAKE_API_PORT" >"$T/secrets"
	start_proxy --allow "localhost:$FAKE_API_PORT" --secrets-fd 5 --ca-fd 6 5<"$T/secrets" 6>"$T/taskca.pem"
	# decoded: a space, a ')' and "status=200", U+009B (an 8-bit CSI) and a lone 0x9b
	run pcurl -sS -x "$PROXY" --path-as-is "http://localhost:$FAKE_API_PORT/admin%20x)%20status=200%C2%9B%9Bz"
	assert_output 'aibox-proxy: path /admin\x20x)\x20status=200\xc2\x9b\x9bz is not allowed'
	run grep -cF "refused localhost:$FAKE_API_PORT GET (path /admin\\x20x)\\x20status=200\\xc2\\x9b\\x9bz is not allowed) status=403 " "$T/proxy.log"
	assert_output 1
	# nothing in the log but printable ASCII
	run env LC_ALL=C grep -c '[^ -~]' "$T/proxy.log"
	assert_output 0
}

@test "proxy: IP literals, IPv4 and IPv6, name exactly that address" {
	start_fake_api "$T/script.json"
	v4=$FAKE_API_PORT
	start_proxy --allow "127.0.0.1:$v4" --allow "[::1]:$v4" --allow "10.1.2.3:80"
	run curl -sS -x "$PROXY" "http://127.0.0.1:$v4/api/hello"
	assert_output '{}'
	run curl -sS -x "$PROXY" "http://127.0.0.2:$v4/api/hello"
	assert_output 'aibox-proxy: not on the allow list'
	# [::1] is allowed, but the fake listens on IPv4 only
	run curl -sS -x "$PROXY" "http://[::1]:$v4/api/hello"
	assert_output --partial 'aibox-proxy: cannot connect'
	run curl -sS -x "$PROXY" "http://[::2]:$v4/api/hello"
	assert_output 'aibox-proxy: not on the allow list'
	# numeric spellings that some resolvers read as 127.0.0.1 are no names
	for h in 127.1 2130706433 0x7f.1; do
		run raw_request "CONNECT $h:$v4 HTTP/1.1\r\n\r\n"
		assert_output --partial "403 Forbidden"
		assert_output --partial "invalid host"
	done
}

@test "proxy: it runs under seccomp, keeps no key in its environment, and stops cleanly" {
	export AIBOX_TEST_KEY=sk-secret-in-env-4242
	unset AIBOX_PROXY_HOSTS # with resolver threads too
	start_proxy --key-env AIBOX_TEST_KEY
	run grep '^Seccomp:' "/proc/$PROXY_PID/status"
	assert_output "$(printf 'Seccomp:\t2')"
	run grep -c sk-secret-in-env-4242 "/proc/$PROXY_PID/environ"
	assert_output 0
	kill -TERM "$PROXY_PID"
	st=0
	wait "$PROXY_PID" || st=$?
	PROXY_PID=
	[ "$st" -eq 0 ]
	start_proxy --no-sandbox
	run grep '^Seccomp:' "/proc/$PROXY_PID/status"
	assert_output "$(printf 'Seccomp:\t0')"
}

@test "proxy: without the sandbox it frees what it holds (leak check under SANITIZE=1)" {
	make_test_ca "$T/ca"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	export AIBOX_TEST_KEY=sk-leak-check
	unset AIBOX_PROXY_HOSTS # with resolver threads
	ASAN_OPTIONS=detect_leaks=1 AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT \
		AIBOX_API_CA=$T/ca/ca.pem start_proxy --no-sandbox --key-env AIBOX_TEST_KEY \
		--allow "localhost:$FAKE_API_PORT"
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	run curl -sS -x "$PROXY" --cacert "$T/ca/ca.pem" "https://localhost:$FAKE_API_PORT/api/hello"
	assert_output '{}'
	run raw_request 'GET http://x/ HTTP/1.1\r\nHost: y\r\n\r\n'
	assert_output --partial "403 Forbidden"
	# a connection still open when the proxy stops
	exec 5<>"/dev/tcp/127.0.0.1/$PROXY_PORT"
	printf 'CONNECT localhost:%s HTTP/1.1\r\n\r\n' "$FAKE_API_PORT" >&5
	read -r -t 5 line <&5
	[ "${line%$'\r'}" = "HTTP/1.1 200 Connection established" ]
	st=0
	stop_proxy || st=$?
	exec 5<&-
	cat "$T/proxy.err"
	[ "$st" -eq 0 ]
	run ! grep -q 'LeakSanitizer' "$T/proxy.err"
	grep -q "allowed localhost:$FAKE_API_PORT CONNECT (proxy stopped)" "$T/proxy.log"
}

@test "proxy: listens on a unix socket and on a given fd" {
	start_fake_api "$T/script.json"
	aibox-proxy --listen "unix:$T/p.sock" --ready-fd 3 --allow "127.0.0.1:$FAKE_API_PORT" \
		3>"$T/ready" &
	pid=$!
	wait_until 5 test -s "$T/ready"
	run cat "$T/ready"
	assert_output "ready unix:$T/p.sock"
	run python3 - "$T/p.sock" "$FAKE_API_PORT" <<-'PY'
		import socket, sys
		s = socket.socket(socket.AF_UNIX)
		s.connect(sys.argv[1])
		p = sys.argv[2]
		s.sendall(("GET http://127.0.0.1:%s/api/hello HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n" % (p, p)).encode())
		out = b""
		while True:
		    b = s.recv(4096)
		    if not b:
		        break
		    out += b
		print(out.decode().splitlines()[0], out.decode().splitlines()[-1])
	PY
	assert_output "HTTP/1.1 200 OK {}"
	kill "$pid"
	wait "$pid"

	run python3 - "$TOP/build/aibox-proxy" "$FAKE_API_PORT" <<-'PY'
		import socket, subprocess, sys
		l = socket.socket()
		l.bind(("127.0.0.1", 0))
		l.listen(16)
		p = subprocess.Popen([sys.argv[1], "--listen-fd", str(l.fileno()), "--allow",
		                      "127.0.0.1:" + sys.argv[2], "--ready-fd", "1"],
		                     pass_fds=[l.fileno()], stdout=subprocess.PIPE)
		print(p.stdout.readline().decode().strip())
		port = l.getsockname()[1]
		out = subprocess.run(["curl", "-sS", "-m", "10", "-x", "http://127.0.0.1:%d" % port,
		                      "http://127.0.0.1:%s/api/hello" % sys.argv[2]],
		                     capture_output=True).stdout.decode()
		print(out)
		p.terminate()
		print("exit", p.wait())
	PY
	assert_line --index 0 --regexp '^ready fd:[0-9]+$'
	assert_line --index 1 '{}'
	assert_line --index 2 'exit 0'
}

@test "proxy: a request whose client resets while its upstream is reached is logged" {
	start_fake_api "$T/script.json"
	start_proxy --allow "127.0.0.1:$FAKE_API_PORT"
	# The head asks for 100 Continue and the client resets at once: the
	# proxy's 100 cannot be written once its connection upstream is started.
	for i in 1 2 3; do
		python3 - "$PROXY_PORT" "$FAKE_API_PORT" <<-'PY'
			import socket, struct, sys
			p = sys.argv[2]
			s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
			s.sendall(("POST http://127.0.0.1:%s/api/hello HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n"
			           "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n" % (p, p)).encode())
			s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
			s.close()
		PY
		proxy_settle
	done
	wait_until 10 test "$(grep -c " 127\.0\.0\.1:$FAKE_API_PORT POST " "$T/proxy.log")" -eq 3 || true
	run grep -c "^[^ ]* failed 127\.0\.0\.1:$FAKE_API_PORT POST " "$T/proxy.log"
	assert_output 3
}

@test "proxy: a refused request's log line names the host as the VM wrote it, made printable" {
	start_proxy --allow evil.test
	for r in 'CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n' \
		'CONNECT 2130706433:443 HTTP/1.1\r\n\r\n' \
		'CONNECT evil.test:65536 HTTP/1.1\r\n\r\n' \
		'GET http://127.1:8080/a?b=c HTTP/1.1\r\nHost: 127.1:8080\r\n\r\n' \
		'GET http://user:pw-42@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n' \
		'CONNECT ex\xc3\xa4mple.test:443 HTTP/1.1\r\n\r\n' \
		'GET HTTP://Evil.Test\x7f:80/x HTTP/1.1\r\nHost: evil.test\r\n\r\n'; do
		run raw_request "$r"
		assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ refused - CONNECT 0x7f\.1:443 \(invalid host\) status=403 '
	assert_line --regexp '^[^ ]+ refused - CONNECT 2130706433:443 \(invalid host\) status=403 '
	assert_line --regexp '^[^ ]+ refused - CONNECT evil\.test:65536 \(invalid port\) status=403 '
	assert_line --regexp '^[^ ]+ refused - GET 127\.1:8080 \(invalid host\) status=403 '
	# user information may be a credential: only the host after it
	assert_line --regexp '^[^ ]+ refused - GET evil\.test \(user information in the request target\) status=403 '
	refute_output --partial "pw-42"
	assert_line --regexp '^[^ ]+ refused - CONNECT ex\\xc3\\xa4mple\.test:443 \(invalid character in the request target\) status=403 '
	assert_line --regexp '^[^ ]+ refused - GET Evil\.Test\\x7f:80 \(invalid character in the request target\) status=403 '
}

@test "proxy: a refused request whose authority is empty logs a placeholder for it, one field a slot" {
	start_proxy --allow evil.test
	for t in 'http://evil.test@/' 'http://@/' 'http://:80/' 'http:///x' 'http://?x' 'http://#x' \
		'https://u@/' 'HTTP://@'; do
		run raw_request "GET $t HTTP/1.1\r\nHost: evil.test\r\n\r\n"
		assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	for t in '@' 'u@' '@:443'; do
		run raw_request "CONNECT $t HTTP/1.1\r\n\r\n"
		assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	run cat "$T/proxy.log"
	[ "${#lines[@]}" -eq 11 ]
	# no empty field: never two spaces in a row
	refute_output --partial '  '
	# the empty authority is said to be empty: "" (an escaped field never holds a '"')
	run grep -c '^[^ ]* refused - GET "" (' "$T/proxy.log"
	assert_output 7
	run grep -c '^[^ ]* refused - CONNECT "" (' "$T/proxy.log"
	assert_output 2
	# an authority that is a port alone is the authority as the VM wrote it
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ refused - GET :80 \('
	assert_line --regexp '^[^ ]+ refused - CONNECT :443 \('
}

@test "proxy: an absolute-URI's authority is read once, for the verdict and the log alike" {
	start_proxy --allow evil.test
	# '#' ends the authority (RFC 3986): no user information here, a fragment
	run raw_request 'GET http://evil.test#@a.example.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n'
	assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	assert_output --partial "aibox-proxy: fragment in the request target"
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ refused - GET evil\.test \(fragment in the request target\) status=403 '
	refute_output --partial "user information"
}

@test "proxy: a CONNECT target's authority is read once, for the verdict and the log alike" {
	start_proxy --allow a.example.test
	# the log names the host after the last '@': the verdict must be about that '@', never
	# "invalid host" beside a host that is allowed
	run raw_request 'CONNECT evil.test@a.example.test:443 HTTP/1.1\r\nHost: a.example.test:443\r\n\r\n'
	assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	assert_output --partial "aibox-proxy: user information in the request target"
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ refused - CONNECT a\.example\.test:443 \(user information in the request target\) status=403 '
}

# in_dns_netns PRE ENTRY HOST...: in namespaces with a DNS server of their
# own (t/lib-dns.bash's in_dns_ns), run the shell snippet PRE (as root there:
# an address on lo, a listener), start the proxy with --allow ENTRY and real
# name resolution, and CONNECT to each HOST:443 through it; prints, a line
# each, the answer's first and last lines ("FIRST | LAST").
in_dns_netns() {
	cat >"$T/connect.py" <<-'PY'
		import socket, sys
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
		s.sendall(b"CONNECT %s:443 HTTP/1.1\r\n\r\n" % sys.argv[2].encode())
		out = b""
		try:
		    while True:
		        b = s.recv(4096)
		        if not b:
		            break
		        out += b
		except socket.timeout:
		    pass
		lines = out.decode("latin-1").splitlines() or [""]
		print(lines[0], "|", lines[-1])
	PY
	# shellcheck disable=SC2016
	in_dns_ns 'PRE=$1 ENTRY=$2
		shift 2
		eval "$PRE" || exit 1
		aibox-proxy --listen 127.0.0.1:0 --ready-fd 3 --log "$T/proxy.log" \
			--allow "$ENTRY" 3>"$T/proxy.ready" 2>"$T/proxy.err" &
		px=$!
		wait_until 10 ready_or_gone "$T/proxy.ready" $px || exit 1
		port=$(sed -n "s/^ready 127\.0\.0\.1:\([0-9]*\)$/\1/p" "$T/proxy.ready")
		for h in "$@"; do python3 "$T/connect.py" "$port" "$h"; done
		kill $px
		wait $px' "$@"
}

@test "proxy: a name is looked up in DNS as it is, never under the machine's search domains" {
	run in_dns_netns : '*.example.test' ok.example.test nx.example.test
	assert_success
	# the control: a name DNS has is resolved, and its address tried
	assert_line --index 0 "HTTP/1.1 502 Bad Gateway | aibox-proxy: cannot connect: Network is unreachable"
	assert_line --index 1 "HTTP/1.1 502 Bad Gateway | aibox-proxy: cannot resolve the host name"
	run cat "$T/dns.log"
	assert_line "nx.example.test 1"
	refute_output --partial "corp.test"
}

# own_service_refused SETUP: in the namespace, SETUP makes 93.184.216.34 (a
# public address, which own.example.test resolves to) one the machine answers
# on, and a service listens there; the proxy refuses to reach it.
own_service_refused() {
	cat >"$T/own.py" <<-'PY'
		import socket, sys
		s = socket.socket()
		s.bind(("93.184.216.34", 443))
		s.listen(8)
		open(sys.argv[1], "w").write("ready\n")
		while True:
		    c, _ = s.accept()
		    c.sendall(b"SSH-2.0-the-machine-itself\r\n")
		    c.close()
	PY
	run in_dns_netns "$1"' &&
		python3 "$T/own.py" "$T/own.ready" >/dev/null 2>&1 &
		wait_until 10 file_or_gone "$T/own.ready" $!' '*.example.test' own.example.test
	assert_success
	assert_output "HTTP/1.1 403 Forbidden | aibox-proxy: the host resolves to an address of this machine"
	grep -q "^[^ ]* refused own.example.test:443 CONNECT (the host resolves to an address of this machine)" "$T/proxy.log"
}

@test "proxy: a name that resolves to an address of the machine itself gets nowhere" {
	own_service_refused 'ip addr add 93.184.216.34/32 dev lo'
}

@test "proxy: a name whose address a local route delivers to this machine, with another source address, gets nowhere" {
	# AnyIP: a local route for a public range whose preferred source is
	# another address; the machine answers on every address in it
	own_service_refused 'ip route add table local local 93.184.216.0/24 dev lo src 127.0.0.1'
}

@test "proxy: a NAT64 address (64:ff9b::/96, as DNS64 answers) is judged by the IPv4 address it holds" {
	run in_dns_netns : '*.example.test' nat64.example.test nat64-private.example.test nat64-loop.example.test
	assert_success
	# a public IPv4 address inside: allowed, and tried (no route in the namespace)
	assert_line --index 0 "HTTP/1.1 502 Bad Gateway | aibox-proxy: cannot connect: Network is unreachable"
	assert_line --index 1 "HTTP/1.1 403 Forbidden | aibox-proxy: the host resolves to a non-public address"
	assert_line --index 2 "HTTP/1.1 403 Forbidden | aibox-proxy: the host resolves to a non-public address"
	run cat "$T/dns.log"
	assert_line "nat64.example.test 28"
}

@test "proxy: a NAT64 address that holds an IPv4 address of the machine itself gets nowhere" {
	run in_dns_netns 'ip addr add 93.184.216.34/32 dev lo' '*.example.test' nat64.example.test
	assert_success
	assert_output "HTTP/1.1 403 Forbidden | aibox-proxy: the host resolves to an address of this machine"
	grep -q "^[^ ]* refused nat64.example.test:443 CONNECT (the host resolves to an address of this machine)" "$T/proxy.log"
}
