#!/usr/bin/env bats
# aibox-proxy's interception (docs/proxy.md, "Secrets and interception"):
# the secrets and rules read from --secrets-fd, the hosts they name ended
# with the task CA's certificates and relayed request by request through the
# swap and the rules; every other host a tunnel.  Loopback HTTPS services
# (t/tls-echo) with a CA of their own stand in for the real ones:
# SSL_CERT_FILE points the proxy at that CA.
bats_require_minimum_version 1.5.0
load lib-common
load lib-tls
load lib-proxy

PH=aibox-secret-0123456789abcdef0123456789abcdef
VALUE='s3cr3t-Value_1'

setup_file() {
	make_test_ca "$BATS_FILE_TMPDIR/ca"
}

setup() {
	common_setup
	cp -r "$BATS_FILE_TMPDIR/ca" "$T/ca"
	start_echo a
	A=$ECHO_PORT
	start_echo b
	B=$ECHO_PORT
	export SSL_CERT_FILE=$T/ca/ca.pem
	# TOK goes to 127.0.0.1:A only; localhost:A has a rule; 127.0.0.1:B is a tunnel.
	printf 'secret TOK %s\nvalue %s\nhost 127.0.0.1:%s\nrule localhost:%s\nmethod GET\nmethod POST\npath /ok/*\npath /v1/items\n' \
		"$PH" "$VALUE" "$A" "$A" >"$T/secrets"
}

teardown() {
	stop_proxy || true
	stop_echoes
	common_teardown
}

# start_intercepting [ARGS...]: start_intercepting_proxy allowing the three hosts.
start_intercepting() {
	start_intercepting_proxy --allow "127.0.0.1:$A" --allow "localhost:$A" --allow "127.0.0.1:$B" "$@"
}

# codes URL...: each URL's status through the proxy, one a line
codes() {
	local u
	for u in "$@"; do
		icurl -o /dev/null -w '%{http_code}\n' "$u" || return 1
	done
}

@test "intercept: the placeholder becomes the value at its host: after Bearer, inside Basic, in the query; the log names the secret" {
	start_intercepting
	run icurl -H "Authorization: Bearer $PH" "https://127.0.0.1:$A/x?q=$PH&r=1" -o /dev/null
	assert_success
	run icurl -u "me:$PH" "https://127.0.0.1:$A/y" -o /dev/null
	assert_success
	run cat "$T/a.seen"
	assert_line "GET /x?q=$VALUE&r=1 HTTP/1.1"
	assert_line "Authorization: Bearer $VALUE"
	assert_line "GET /y HTTP/1.1"
	assert_line "Authorization: Basic $(printf 'me:%s' "$VALUE" | base64)"
	refute_output --partial "$PH"
	stop_proxy
	run cat "$T/proxy.log"
	assert_line --regexp "^[^ ]+ allowed 127\.0\.0\.1:$A CONNECT \(intercepted\) "
	assert_line --regexp "^[^ ]+ allowed 127\.0\.0\.1:$A GET /x status=200 secrets=TOK sent=[0-9]+ received=[0-9]+ "
	assert_line --regexp "^[^ ]+ allowed 127\.0\.0\.1:$A GET /y status=200 secrets=TOK "
	refute_output --partial "$VALUE"
	refute_output --partial "q="
}

@test "intercept: an echo of the value in the answer, in a header and split across chunks in the body, reaches the client as the placeholder" {
	start_intercepting
	run icurl -i -H "Authorization: token $PH" "https://127.0.0.1:$A/echo"
	assert_success
	assert_line "X-Seen-Authorization: token $PH"$'\r'
	assert_line "echo:token $PH"
	assert_line "Transfer-Encoding: chunked"$'\r'
	refute_output --partial "$VALUE"
	# across the 16 KiB of a TLS record and of the proxy's reads, in a long body
	for pad in 16370 32760; do
		run icurl -H "Authorization: token $PH" "https://127.0.0.1:$A/echo?pad=$pad"
		assert_success
		x=$(printf "%${pad}s" | tr ' ' x)
		assert_output "${x}echo:token $PH"$'\n'"$x"
	done
	run grep -c "Authorization: token $VALUE" "$T/a.seen"
	assert_success
	assert_output 3
}

@test "intercept: hostile: the placeholder toward another intercepted host is refused with 403 and a log line, nothing forwarded" {
	start_intercepting
	run icurl -H "Authorization: Bearer $PH" "https://localhost:$A/ok/1"
	assert_success
	assert_output "aibox-proxy: TOK to localhost:$A"
	run icurl "https://localhost:$A/ok/$PH"
	assert_success
	assert_output "aibox-proxy: TOK to localhost:$A"
	run icurl -H "X-Other: a${PH}b" -w '%{http_code}\n' -o /dev/null "https://localhost:$A/ok/2"
	assert_success
	assert_output 403
	[ ! -e "$T/a.seen" ]
	stop_proxy
	run grep -c "refused localhost:$A GET /ok/[^ ]* (TOK to localhost:$A) status=403" "$T/proxy.log"
	assert_success
	assert_output 3
}

@test "intercept: rules: only the methods and paths listed pass, whatever the spelling of the path" {
	start_intercepting
	run codes "https://localhost:$A/ok/a" "https://localhost:$A/v1/items" \
		"https://localhost:$A/ok/%2e%2e/secret" "https://localhost:$A/v1/items/1" "https://localhost:$A/"
	assert_success
	assert_output "$(printf '200\n200\n403\n403\n403')"
	run icurl -X DELETE "https://localhost:$A/ok/a"
	assert_success
	assert_output "aibox-proxy: method DELETE is not allowed"
	# dot segments, which servers read differently, in either direction
	for p in /ok/../admin /admin/../ok/a /ok/./a; do
		run icurl --path-as-is "https://localhost:$A$p"
		assert_success
		assert_output "aibox-proxy: the path is not one the rules can read"
	done
	run icurl "https://localhost:$A/%6fk/b" -o /dev/null -w '%{http_code}\n'
	assert_success
	assert_output 200
	run grep -c '^GET /' "$T/a.seen"
	assert_success
	assert_output 3
	stop_proxy
	run grep "refused localhost:$A DELETE /ok/a (method DELETE is not allowed) status=403" "$T/proxy.log"
	assert_success
}

@test "intercept: HTTP as clients use it: keep-alive, chunked and 100-continue uploads, a large download, ALPN http/1.1 only" {
	start_intercepting
	head -c 3000000 /dev/urandom >"$T/up.bin"
	sum=$(sha256sum "$T/up.bin" | cut -d' ' -f1)
	run icurl -H "Transfer-Encoding: chunked" --data-binary @"$T/up.bin" "https://localhost:$A/ok/up"
	assert_success
	assert_line "body=3000000 sha256=$sum"
	run icurl -H "Expect: 100-continue" --data-binary @"$T/up.bin" "https://localhost:$A/ok/up"
	assert_success
	assert_line "body=3000000 sha256=$sum"
	run icurl -o "$T/big" -w '%{size_download} %{http_version}\n' "https://localhost:$A/ok/big?n=30000000"
	assert_success
	assert_output "30000000 1.1"
	run icurl --http2 -w '%{http_version} %{num_connects}\n' -o /dev/null "https://localhost:$A/ok/1" -o /dev/null "https://localhost:$A/ok/2"
	assert_success
	assert_output "$(printf '1.1 1\n1.1 0')"
	stop_proxy
	run grep -c "allowed localhost:$A CONNECT (intercepted)" "$T/proxy.log"
	assert_success
	assert_output 4
}

@test "intercept: a host no secret or rule names stays a tunnel: its own certificate, the placeholder as it was" {
	start_intercepting
	run curl -sS -x "$PROXY" --cacert "$T/ca/ca.pem" -H "Authorization: Bearer $PH" "https://127.0.0.1:$B/z" -o /dev/null
	assert_success
	run cat "$T/b.seen"
	assert_line "Authorization: Bearer $PH"
	# the task CA is no use there: the host's own certificate came through
	run icurl "https://127.0.0.1:$B/z"
	assert_failure 60
	stop_proxy
	run grep -c "allowed 127.0.0.1:$B CONNECT " "$T/proxy.log"
	assert_success
	assert_output 2
	run grep "intercepted" "$T/proxy.log"
	assert_failure 1
}

@test "intercept: the task CA on --ca-fd permits only the intercepted hosts; the hosts are checked against SSL_CERT_FILE" {
	start_intercepting
	run openssl x509 -in "$T/taskca.pem" -noout -text
	assert_success
	assert_line --regexp '^ +IP:127\.0\.0\.1/255\.255\.255\.255$'
	assert_line --regexp '^ +DNS:localhost$'
	stop_proxy
	# another CA in SSL_CERT_FILE: the host's certificate is refused, the client told
	make_test_ca "$T/other"
	SSL_CERT_FILE=$T/other/ca.pem start_intercepting
	run icurl -H "Authorization: Bearer $PH" "https://127.0.0.1:$A/x"
	assert_success
	assert_output "aibox-proxy: TLS with the host failed: unable to get local issuer certificate"
	[ ! -e "$T/a.seen" ]
}

@test "intercept: the value is in neither the proxy's argv nor its environment nor its messages" {
	start_intercepting
	run icurl -H "Authorization: Bearer $PH" "https://127.0.0.1:$A/x" -o /dev/null
	assert_success
	run cat "/proc/$PROXY_PID/cmdline" "/proc/$PROXY_PID/environ"
	assert_success
	refute_output --partial "$VALUE"
	refute_output --partial "$PH"
	run ps -ww -o args= -p "$PROXY_PID"
	assert_success
	refute_output --partial "$VALUE"
	stop_proxy
	run cat "$T/proxy.log" "$T/proxy.err"
	refute_output --partial "$VALUE"
}

@test "intercept: hostile --secrets-fd: each bad text refused with its line, never the value" {
	bad() {
		printf "$1" >"$T/bad"
		run timeout 20 aibox-proxy --listen 127.0.0.1:0 --secrets-fd 5 5<"$T/bad"
		assert_failure 2
		assert_output "aibox-proxy: $2"
		refute_output --partial "$VALUE"
	}
	bad "value $VALUE\n" "secrets, line 1: a value outside a secret"
	bad "secret TOK $PH\nvalue $VALUE\n" "secrets, line 2: a secret without hosts"
	bad "secret TOK $PH\nhost a.com\n" "secrets, line 2: a secret without a value"
	bad "secret TOK aibox-secret-12\nvalue $VALUE\nhost a.com\n" "secrets, line 1: not 'secret NAME PLACEHOLDER'"
	bad "secret TOK $PH\nvalue $VALUE\nhost *\n" "secrets, line 3: host '*': not a host"
	bad "secret TOK $PH\nvalue $VALUE\nhost preset:github\n" "secrets, line 3: host 'preset:github': not a host"
	bad "secret TOK $PH\nvalue a\tb\nhost a.com\n" "secrets, line 2: a value must be 1 to 4096 printable ASCII characters"
	bad "rule a.com\nmethod GET\nvalue $VALUE\n" "secrets, line 3: a value outside a secret"
	bad "method GET\n" "secrets, line 1: a method outside a rule, or not a token"
	bad "rule a.com\npath x\n" "secrets, line 2: a path outside a rule, or not '/'-rooted"
	bad "secret TOK $PH\nvalue $VALUE\nhost a.com" "secrets, line 3: no newline at the end"
	bad "bogus\n" "secrets, line 1: not 'WORD REST'"
	bad "what ever\n" "secrets, line 1: an unknown word"
	bad "prefix /a\n" "secrets, line 1: a prefix outside a rule, a second one, or not a path prefix"
	bad "rule a.com\ncache go\nprefix /a/\n" "secrets, line 3: a prefix outside a rule, a second one, or not a path prefix"
	bad "rule a.com\ncache go\nprefix /a/../b\n" "secrets, line 3: a prefix outside a rule, a second one, or not a path prefix"
	bad "rule a.com\ncache go\nprefix /a\nprefix /b\n" "secrets, line 4: a prefix outside a rule, a second one, or not a path prefix"
	run aibox-proxy --listen 127.0.0.1:0 --ca-fd 1
	assert_failure 2
	assert_output "aibox-proxy: --ca-fd and --ca-valid need --secrets-fd"
}

@test "intercept: the record lists which secret went to which host and where it was refused; the task summary says so" {
	exec 4>"$T/record.json"
	start_intercepting --report-fd 4
	exec 4>&-
	run icurl -H "Authorization: Bearer $PH" -o /dev/null "https://127.0.0.1:$A/1" -o /dev/null "https://127.0.0.1:$A/2"
	assert_success
	run icurl -H "Authorization: Bearer $PH" "https://localhost:$A/ok/1"
	assert_success
	assert_output "aibox-proxy: TOK to localhost:$A"
	run icurl "https://localhost:$A/ok/1" -o /dev/null
	assert_success
	stop_proxy
	run jq -c '.secrets, .more_secrets' "$T/record.json"
	assert_success
	assert_output "$(printf '[{"name":"TOK","host":"127.0.0.1:%s","sent":2,"refused":0},{"name":"TOK","host":"localhost:%s","sent":0,"refused":1}]\n0' "$A" "$A")"
	run grep "refused localhost:$A GET /ok/1 (TOK to localhost:$A) status=403 secret=TOK sent=" "$T/proxy.log"
	assert_success
	run test-task results - --report "$T/record.json"
	assert_success
	assert_line "aibox: the secret TOK was sent to 127.0.0.1:$A (2 requests)"
	assert_line "aibox: the secret TOK was refused toward localhost:$A: its placeholder was sent there (1 request, see proxy.log)"
	# a record without secrets (an older one too) reads as none
	run jq -c 'del(.secrets, .more_secrets)' "$T/record.json"
	assert_success
	echo "$output" >"$T/old.json"
	run test-task results - --report "$T/old.json"
	assert_success
	refute_output --partial "secret"
	# a hostile record: a name with a space is refused
	jq -c '.secrets[0].name = "A B"' "$T/record.json" >"$T/bad.json"
	run test-task results - --report "$T/bad.json"
	assert_success
	assert_output --partial "the proxy's record: a secret without a proper name or host"
}

@test "intercept: hostile: no TLS after the CONNECT, bytes before its answer, CONNECT or an absolute URI inside, a placeholder in the body" {
	start_intercepting
	# plain HTTP where the TLS hello should be
	run python3 - "$PROXY_PORT" "$A" <<-'PY'
		import socket, sys
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
		s.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % (sys.argv[2].encode(), sys.argv[2].encode()))
		head = b""
		while b"\r\n\r\n" not in head:
		    head += s.recv(1)
		s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		try:
		    rest = s.recv(65536)
		except ConnectionResetError:
		    rest = b""
		print(head.decode().split("\r\n")[0], "then", b"HTTP" not in rest)
	PY
	assert_success
	assert_output "HTTP/1.1 200 Connection established then True"
	run tls_raw "127.0.0.1:$A" "GET / HTTP/1.1\r\n\r\n" "early bytes"
	assert_success
	assert_output closed
	run tls_raw "127.0.0.1:$A" "CONNECT 127.0.0.1:$B HTTP/1.1\r\nHost: 127.0.0.1:$B\r\n\r\n"
	assert_success
	assert_line "aibox-proxy: CONNECT inside an intercepted connection"
	run tls_raw "127.0.0.1:$A" "GET http://127.0.0.1:$B/ HTTP/1.1\r\nHost: 127.0.0.1:$B\r\n\r\n"
	assert_success
	assert_line "aibox-proxy: an intercepted request needs an origin-form target"
	# the body is never swapped: the placeholder arrives as it was sent
	printf 'token=%s' "$PH" >"$T/body"
	run icurl --data-binary @"$T/body" "https://127.0.0.1:$A/form"
	assert_success
	assert_line "body=$((6 + ${#PH})) sha256=$(sha256sum "$T/body" | cut -d' ' -f1)"
	# the proxy still serves
	run icurl -o /dev/null -w '%{http_code}\n' "https://127.0.0.1:$A/after"
	assert_success
	assert_output 200
	stop_proxy
	run cat "$T/proxy.log"
	assert_line --regexp "failed 127\.0\.0\.1:$A CONNECT \(TLS with the client failed: .*\) "
	assert_line --regexp "failed 127\.0\.0\.1:$A CONNECT \(bytes sent before the tunnel was established\) "
	assert_line --regexp "refused 127\.0\.0\.1:$A CONNECT \(CONNECT inside an intercepted connection\) status=403 "
	run grep -c "$B" "$T/b.seen"
	assert_failure 2
}

@test "intercept: a WebSocket upgrade is relayed both ways once its request passed the rules and the swap" {
	start_intercepting
	run python3 - "$PROXY_PORT" "$T/taskca.pem" "$A" "$PH" <<-'PY'
		import socket, ssl, sys
		port, ca, a, ph = sys.argv[1:]
		def ws(host, path, auth):
		    s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
		    s.sendall(b"CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n" % (host.encode(), a.encode(), host.encode(), a.encode()))
		    h = b""
		    while b"\r\n\r\n" not in h:
		        h += s.recv(1)
		    t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=host)
		    t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: %s\r\n\r\n" % (path.encode(), host.encode(), auth.encode()))
		    h = b""
		    while b"\r\n\r\n" not in h:
		        b = t.recv(1)
		        if not b:
		            break
		        h += b
		    print(h.split(b"\r\n")[0].decode())
		    if b" 101 " not in h:
		        return
		    print([l for l in h.decode().split("\r\n") if l.startswith("X-Seen")][0])
		    for msg in (b"hello", b"x" * 100000):
		        # a masked frame of the client's; the echo comes as a frame of the host's
		        n = len(msg)
		        size = bytes([128 | n]) if n < 126 else bytes([128 | 127]) + n.to_bytes(8, "big")
		        t.sendall(bytes([0x82]) + size + b"\1\2\3\4" + bytes(b ^ (1 + i % 4) for i, b in enumerate(msg)))
		        got = t.recv(2)
		        hl = 2 if got[1] < 126 else 4 if got[1] == 126 else 10
		        while len(got) < hl:
		            got += t.recv(hl - len(got))
		        n = got[1] if hl == 2 else int.from_bytes(got[2:hl], "big")
		        data = b""
		        while len(data) < n:
		            data += t.recv(n - len(data))
		        print(data[:10].decode(), data.replace(b"echo:", b"") == msg)
		    t.close()
		ws("127.0.0.1", "/ws", "Bearer " + ph)
		ws("localhost", "/admin", "Bearer x")
	PY
	assert_success
	assert_output "$(printf 'HTTP/1.1 101 Switching Protocols\nX-Seen-Authorization: Bearer %s\necho:hello True\necho:xxxxx True\nHTTP/1.1 403 Forbidden' "$PH")"
	run grep -c "Authorization: Bearer $VALUE" "$T/a.seen"
	assert_success
	assert_output 1
	stop_proxy
	run cat "$T/proxy.log"
	assert_line --regexp "allowed 127\.0\.0\.1:$A GET /ws (\(connection reset\) )?status=101 secrets=TOK sent=[0-9]{6} received=[0-9]{6} "
	assert_line --regexp "refused localhost:$A GET /admin \(path /admin is not allowed\) status=403 "
}

# ws HOST SCRIPT AUTH [HEADER...]: through the proxy to HOST:A (CONNECT,
# TLS trusting the task CA), GET /ws/script?j=SCRIPT (t/tls-echo) asking
# for a WebSocket upgrade (none with a HEADER "noupgrade", or one of its
# own with a HEADER "Upgrade: ...") with Authorization AUTH and the HEADER
# lines; prints the answer's status
# line, then each frame that came as "OP FIN PAYLOAD" (a payload over 60
# bytes as its length, its '*' and whether the value is in it), then "end"
# at the connection's end between frames, "cut" inside one.
ws() {
	python3 - "$PROXY_PORT" "$T/taskca.pem" "$A" "$VALUE" "$@" <<-'PY'
		import socket, ssl, sys, urllib.parse
		port, ca, a, value, host, script, auth = sys.argv[1:8]
		extra = "".join(h + "\r\n" for h in sys.argv[8:])
		s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
		s.sendall(b"CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n" % (host.encode(), a.encode(), host.encode(), a.encode()))
		h = b""
		while b"\r\n\r\n" not in h:
		    h += s.recv(1)
		t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=host)
		up = "" if "Upgrade:" in extra or "noupgrade" in extra else "Upgrade: websocket\r\nConnection: Upgrade\r\n"
		extra = extra.replace("noupgrade\r\n", "")
		t.sendall(("GET /ws/script?j=%s HTTP/1.1\r\nHost: %s\r\n%sSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
		           "Sec-WebSocket-Version: 13\r\nAuthorization: %s\r\n%s\r\n"
		           % (urllib.parse.quote(script, safe=""), host, up, auth, extra)).encode())
		buf = b""
		def more():
		    global buf
		    try:
		        b = t.recv(65536)
		    except (ssl.SSLError, OSError):
		        b = b""
		    buf += b
		    return len(b)
		while b"\r\n\r\n" not in buf:
		    if not more():
		        break
		head, _, buf = buf.partition(b"\r\n\r\n")
		print(head.split(b"\r\n")[0].decode())
		if b" 101 " not in head.split(b"\r\n")[0]:
		    sys.exit(0)
		def need(n):
		    while len(buf) < n:
		        if not more():
		            return False
		    return True
		while True:
		    if not need(1):
		        print("end" if not buf else "cut")
		        break
		    if not need(2):
		        print("cut")
		        break
		    op, fin, n, at = buf[0] & 15, buf[0] >> 7, buf[1] & 127, 2
		    if n == 126:
		        if not need(4):
		            print("cut"); break
		        n, at = int.from_bytes(buf[2:4], "big"), 4
		    elif n == 127:
		        if not need(10):
		            print("cut"); break
		        n, at = int.from_bytes(buf[2:10], "big"), 10
		    if buf[1] & 128:
		        at += 4
		    if not need(at + n):
		        print("cut")
		        break
		    p = buf[at:at + n].decode("latin-1")
		    value_in = value in p
		    p = "".join(c if " " <= c <= "~" else "\\x%02x" % ord(c) for c in p)
		    buf = buf[at + n:]
		    if len(p) > 60:
		        p = "%d bytes, %d stars, value %s" % (len(p), p.count("*"), value_in)
		    print(op, fin, p)
	PY
}

@test "intercept: websocket: the value a host echoes in a frame reaches the client as stars, also split across frames, reads and a ping between them, frame lengths kept" {
	start_intercepting
	run ws 127.0.0.1 '{"frames": [{"data": "auth={auth}"},
		{"fin": 0, "data": "split=s3cr3"}, {"op": 9, "data": "pi"}, {"op": 0, "fin": 0, "data": "t-Va"},
		{"pause": 0.3}, {"op": 0, "data": "lue_1!"},
		{"op": 2, "pad": 65530, "data": "{auth}."}, {"op": 2, "len": 127, "data": "s3cr3t-Value_1"},
		{"op": 2, "pad": 104, "data": "{auth}"}, {"op": 2, "pad": 105, "data": "{auth}"},
		{"op": 8, "data": "\u0003\u00e8bye {auth}"}]}' "Bearer $PH"
	assert_success
	assert_output "$(printf '%s\n' 'HTTP/1.1 101 Switching Protocols' '1 1 auth=Bearer **************' \
		'1 0 split=*****' '9 1 pi' '0 0 ****' '0 1 *****!' '2 1 65552 bytes, 14 stars, value False' \
		'2 1 **************' '2 1 125 bytes, 14 stars, value False' \
		'2 1 126 bytes, 14 stars, value False' '8 1 \x03\xe8bye Bearer **************' 'end')"
	run grep -c "^Authorization: Bearer $VALUE" "$T/a.seen"
	assert_output 1
}

@test "intercept: websocket: a long value echoed in 5-byte reads is read a bounded number of times a byte" {
	# One message of a 3000-byte value, 100 times over, 5 bytes a read: what waits is one long
	# partial spelling of it, which a matcher that starts over on each read reads again (about
	# 300 times each byte here).  It resumes where it stopped: about what one read costs.
	v=eyJ$(head -c 2250 /dev/urandom | base64 -w0 | tr '+/' '-_' | head -c 2997)
	{
		printf '\x81\x7f\x00\x00\x00\x00\x00\x04\x93\xe0'
		for _ in $(seq 100); do printf '%s' "$v"; done
	} >"$T/frames"
	run test-swap ws-work 16777216 "$v" PH1 <"$T/frames"
	assert_success
	whole=$output
	run test-swap ws-work 5 "$v" PH1 <"$T/frames"
	assert_success
	[ "$output" -lt $((2 * whole)) ] || fail "the matcher read $output bytes, against $whole in one read"
}

@test "intercept: websocket: text that spells a value only where a read cuts it short passes as the whole message makes it" {
	# "&#x31" is '1', but "&#x31a" is no byte: a read that ends after "&#x31" must not make
	# the message's bytes before it stars for good (a value that never came).
	printf '\x81\x13s3cr3t-Value_&#x31a' >"$T/frames"
	test-swap ws 4096 s3cr3t-Value_1 PH1 <"$T/frames" >"$T/whole"
	run grep -c 's3cr3t-Value_&#x31a' "$T/whole"
	assert_output 1
	for chunk in 1 2 3 5 7 20; do
		test-swap ws "$chunk" s3cr3t-Value_1 PH1 <"$T/frames" >"$T/pieces"
		cmp "$T/whole" "$T/pieces" || fail "in reads of $chunk bytes"
	done
}

@test "intercept: websocket: the request's Sec-WebSocket-Extensions is not forwarded, and a 101 that agrees one anyway is a 502, logged" {
	start_intercepting
	run ws 127.0.0.1 '{"frames": [{"data": "a"}]}' "Bearer $PH" "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits" \
		"sec-websocket-extensions: x-webkit-deflate-frame"
	assert_success
	assert_output "$(printf '%s\n' 'HTTP/1.1 101 Switching Protocols' '1 1 a' 'end')"
	run grep -ci "^Sec-WebSocket-Extensions" "$T/a.seen"
	assert_output 0
	run ws 127.0.0.1 '{"hdr": [["Sec-WebSocket-Extensions", "permessage-deflate"]], "frames": [{"data": "a"}]}' "Bearer $PH"
	assert_success
	assert_output "HTTP/1.1 502 Bad Gateway"
	stop_proxy
	run cat "$T/proxy.log"
	assert_line --regexp "failed 127\.0\.0\.1:$A GET /ws/script \(upstream agreed a WebSocket extension\) status=502 secrets=TOK "
}

@test "intercept: websocket: a 101 that switches to another protocol than websocket is a 502, logged" {
	start_intercepting
	for up in h2c "websocket, h2c" "" "WebSocket/13"; do
		run ws 127.0.0.1 '{"upgrade": "'"$up"'", "frames": [{"data": "{auth}"}]}' "Bearer $PH"
		assert_success
		assert_output "HTTP/1.1 502 Bad Gateway"
	done
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (upstream switched protocols to other than websocket) status=502 " "$T/proxy.log"
	assert_output 4
}

@test "intercept: websocket: a 101 the request did not ask for, or after interim answers that echo the value, never opens a relay" {
	start_intercepting
	run ws 127.0.0.1 '{"frames": [{"data": "{auth}"}]}' "Bearer $PH" noupgrade
	assert_success
	assert_output "HTTP/1.1 502 Bad Gateway"
	run ws 127.0.0.1 '{"frames": [{"data": "{auth}"}]}' "Bearer $PH" "Upgrade: h2c" "Connection: Upgrade, HTTP2-Settings"
	assert_success
	assert_output "HTTP/1.1 502 Bad Gateway"
	run ws 127.0.0.1 '{"pre": ["HTTP/1.1 100 Continue\r\nX-A: {auth}", "HTTP/1.1 103 Early Hints\r\nLink: </{auth}>", "HTTP/1.1 199 X"],
		"frames": [{"data": "{auth}"}]}' "Bearer $PH"
	assert_success
	assert_output "$(printf '%s\n' 'HTTP/1.1 101 Switching Protocols' '1 1 Bearer **************' 'end')"
}

@test "intercept: websocket: a masked frame, a reserved bit, an unknown opcode, a bad control frame, a stray continuation or an oversized length from the host ends the connection, logged" {
	start_intercepting
	for bad in '{"mask": 1, "data": "m"}' '{"rsv": 4, "data": "r"}' '{"rsv": 1, "data": "r"}' '{"op": 3, "data": "u"}' \
		'{"op": 11}' '{"op": 9, "pad": 126}' '{"op": 9, "fin": 0}' '{"op": 8, "data": "1"}' '{"op": 0, "data": "c"}' \
		'{"op": 1, "fin": 0, "data": "x"}, {"op": 2, "data": "y"}' '{"op": 2, "claim": 9223372036854775808}' \
		'{"op": 2, "claim": 1099511627776}' '{"op": 2, "claim": 1073741825}' '{"op": 8}, {"data": "after close"}'; do
		run ws 127.0.0.1 '{"frames": [{"data": "a"}, '"$bad"', {"data": "{auth}"}]}' "Bearer $PH"
		assert_success
		assert_line --index 0 'HTTP/1.1 101 Switching Protocols'
		assert_line --index 1 '1 1 a'
		refute_output --partial "Bearer"
		refute_output --partial "$VALUE"
		refute_line "1 1 x"
		refute_line "1 1 after close"
	done
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (a WebSocket frame from the host: [^)]*) status=101 secrets=TOK " "$T/proxy.log"
	assert_output 14
}

# wsvm SCRIPT [--with-head EXPR] EXPR...: through the proxy to 127.0.0.1:A,
# GET /ws/script?j=SCRIPT (t/tls-echo; "recv" in SCRIPT to have the host
# log what it gets) asking for a WebSocket upgrade with the placeholder in
# Authorization, --with-head's bytes in the same write as the request;
# after the 101 each EXPR's bytes (a Python expression: bytes, or a list of
# them sent one by one; frame(op, data, fin=1, rsv=0, key=b"\1\2\3\4",
# form=0) is a frame of the client's, key None for an unmasked one, form
# 126 or 127 to spell the length longer) in a write of their own.  Prints
# the status line, "sent HEX" (all it sent after the request), then "end"
# when the connection ended within 1.5 s or "open".
wsvm() {
	python3 - "$PROXY_PORT" "$T/taskca.pem" "$A" "$PH" "$@" <<-'PY'
		import socket, ssl, sys, time, urllib.parse
		port, ca, a, ph, script = sys.argv[1:6]
		args, first = sys.argv[6:], b""
		def frame(op, data, fin=1, rsv=0, key=b"\1\2\3\4", form=0):
		    n, m = len(data), 0x80 if key is not None else 0
		    if n < 126 and not form:
		        size = bytes([m | n])
		    elif n < 65536 and form != 127:
		        size = bytes([m | 126]) + n.to_bytes(2, "big")
		    else:
		        size = bytes([m | 127]) + n.to_bytes(8, "big")
		    body = data if key is None else key + bytes(b ^ key[i % 4] for i, b in enumerate(data))
		    return bytes([(0x80 if fin else 0) | rsv << 4 | op]) + size + body
		if args[:1] == ["--with-head"]:
		    first, args = eval(args[1]), args[2:]
		s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
		s.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % (a.encode(), a.encode()))
		h = b""
		while b"\r\n\r\n" not in h:
		    h += s.recv(1)
		t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="127.0.0.1")
		t.sendall(("GET /ws/script?j=%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
		           % (urllib.parse.quote(script, safe=""), ph)).encode() + first)
		h = b""
		while b"\r\n\r\n" not in h and (b := t.recv(1)):
		    h += b
		print(h.split(b"\r\n")[0].decode())
		sent = first
		for e in args:
		    pieces = eval(e)
		    for p in pieces if isinstance(pieces, list) else [pieces]:
		        time.sleep(0.02)
		        try:
		            t.sendall(p)
		        except OSError:
		            pass
		        sent += p
		print("sent", sent.hex())
		t.settimeout(1.5)
		try:
		    while t.recv(65536):
		        pass
		    print("end")
		except socket.timeout:
		    print("open")
		except OSError:
		    print("end")
		t.close()
	PY
}

# host_got: the bytes the host got after its 101 (t/tls-echo's "ws-recv" line), as hex
host_got() {
	wait_until 10 grep -q '^ws-recv ' "$T/a.seen" || return 1
	sed -n 's/^ws-recv //p' "$T/a.seen"
}

@test "intercept: websocket: an unmasked frame from the VM ends the connection, logged, and never reaches the host" {
	start_intercepting
	run wsvm '{"recv": 5}' 'frame(1, b"ok")' 'frame(1, b"GET /admin HTTP/1.1\r\n\r\n", key=None)'
	assert_success
	assert_line --index 0 'HTTP/1.1 101 Switching Protocols'
	assert_line --index 2 end
	run host_got
	assert_success
	assert_output "$(python3 -c 'print((bytes([0x81, 0x82, 1, 2, 3, 4]) + bytes([ord("o") ^ 1, ord("k") ^ 2])).hex())')"
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (a WebSocket frame from the VM: an unmasked frame) status=101 secrets=TOK " "$T/proxy.log"
	assert_output 1
}

@test "intercept: websocket: raw HTTP bytes from the VM, after the 101 or in the write of its upgrade request, end the connection, logged, and never reach the host" {
	start_intercepting
	for with in "" --with-head; do
		rm -f "$T/a.seen"
		run wsvm '{"recv": 5}' $with 'b"GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"'
		assert_success
		assert_line --index 0 'HTTP/1.1 101 Switching Protocols'
		assert_line --index 2 end
		run host_got
		assert_success
		assert_output ""
	done
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (a WebSocket frame from the VM: [^)]*) status=101 secrets=TOK " "$T/proxy.log"
	assert_output 2
}

@test "intercept: websocket: a reserved bit in a frame from the VM ends the connection, logged, and never reaches the host" {
	start_intercepting
	run wsvm '{"recv": 5}' 'frame(2, b"ok")' 'frame(2, b"r", rsv=4)'
	assert_success
	assert_line --index 2 end
	run host_got
	assert_success
	assert_output "$(python3 -c 'print((bytes([0x82, 0x82, 1, 2, 3, 4]) + bytes([ord("o") ^ 1, ord("k") ^ 2])).hex())')"
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (a WebSocket frame from the VM: a reserved bit set) status=101 secrets=TOK " "$T/proxy.log"
	assert_output 1
}

@test "intercept: websocket: any byte from the VM after its Close frame ends the connection, logged, and never reaches the host" {
	start_intercepting
	for after in 'frame(1, b"x")' 'b"\x81"'; do
		rm -f "$T/a.seen"
		run wsvm '{"recv": 5}' 'frame(8, b"\x03\xe8", key=b"\0\0\0\0")' "$after"
		assert_success
		assert_line --index 2 end
		run host_got
		assert_success
		assert_output 88820000000003e8
	done
	stop_proxy
	run grep -c "failed 127\.0\.0\.1:$A GET /ws/script (a WebSocket frame from the VM: bytes after its Close frame) status=101 secrets=TOK " "$T/proxy.log"
	assert_output 2
}

@test "intercept: websocket: the VM's frames split across reads at every byte of their heads reach the host unchanged, the placeholder in one as the placeholder" {
	start_intercepting
	run wsvm '{"recv": 5}' '[bytes([c]) for c in frame(1, b"a")]' \
		'[bytes([c]) for c in frame(1, b"ph=" + ph.encode(), key=b"\0\0\0\0")]' \
		'[bytes([c]) for c in frame(2, b"y" * 300)[:8]] + [frame(2, b"y" * 300)[8:]]' \
		'[bytes([c]) for c in frame(2, b"z" * 5, fin=0, form=127)]' '[bytes([c]) for c in frame(9, b"p")]' \
		'[bytes([c]) for c in frame(0, b"w" * 70000)[:14]] + [frame(0, b"w" * 70000)[14:]]' \
		'frame(10, b"")' 'frame(8, b"\x03\xe8")'
	assert_success
	assert_line --index 0 'HTTP/1.1 101 Switching Protocols'
	assert_line --index 2 open
	sent=$(sed -n 's/^sent //p' <<<"$output")
	run host_got
	assert_success
	[ "$output" = "$sent" ]
	xxd -r -p <<<"$output" | grep -aq "ph=$PH"
	stop_proxy
	run grep -c "a WebSocket frame from" "$T/proxy.log"
	assert_output 0
}

@test "intercept: websocket: an upgrade request with a body, by its length or chunked, is refused and never reaches the host" {
	start_intercepting
	printf 'GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >"$T/body"
	for te in "" "Transfer-Encoding: chunked"; do
		run icurl -m 5 -o /dev/null -w '%{http_code}\n' -X GET -H "Upgrade: websocket" -H "Connection: Upgrade" \
			-H "Authorization: Bearer $PH" ${te:+-H "$te"} --data-binary @"$T/body" \
			"https://127.0.0.1:$A/ws/script?j=%7B%7D"
		assert_output 400
	done
	run ! grep -qs "/ws/script" "$T/a.seen"
	stop_proxy
	run grep -c "refused 127\.0\.0\.1:$A GET /ws/script (a WebSocket upgrade request with a body) status=400 " "$T/proxy.log"
	assert_output 2
}

# unix_get SOCK CA HOST:PORT PATH AUTH: GET PATH with Authorization AUTH through
# the proxy on the unix socket SOCK (CONNECT, then TLS trusting CA); prints
# the answer's status line.
unix_get() {
	python3 - "$@" <<-'PY'
		import socket, ssl, sys
		sock, ca, authority, path, auth = sys.argv[1:]
		s = socket.socket(socket.AF_UNIX)
		s.settimeout(10)
		s.connect(sock)
		s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()))
		head = b""
		while b"\r\n\r\n" not in head:
		    head += s.recv(1)
		ctx = ssl.create_default_context(cafile=ca)
		t = ctx.wrap_socket(s, server_hostname=authority.rsplit(":", 1)[0])
		t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nConnection: close\r\n\r\n" % (path.encode(), authority.encode(), auth.encode()))
		out = b""
		while True:
		    b = t.recv(65536)
		    if not b:
		        break
		    out += b
		print(out.split(b"\r\n")[0].decode())
	PY
}

@test "intercept: aibox task's helpers pass the config's secrets and rules on a pipe and get the task CA back" {
	printf 'allow: ["127.0.0.1:%s", {host: "localhost:%s", methods: [GET], paths: ["/ok/*"]}]\nsecrets:\n  - {env: MY_TOKEN, hosts: ["127.0.0.1:%s"]}\n' \
		"$A" "$A" "$A" >"$T/cfg.yaml"
	mkfifo "$T/in"
	MY_TOKEN=$VALUE test-host helpers "$T/cfg.yaml" "$T/h.sock" "$T/h.log" <"$T/in" >"$T/h.out" 2>"$T/h.err" &
	exec 7>"$T/in"
	wait_until 10 grep -q '^ready$' "$T/h.out" || { exec 7>&-; cat "$T/h.err" >&2; false; }
	ph=$(sed -n 's/^placeholder MY_TOKEN=//p' "$T/h.out")
	[[ "$ph" =~ ^aibox-secret-[0-9a-f]{32}$ ]] || fail "placeholder: $ph"
	run grep '^args: ' "$T/h.out"
	assert_success
	assert_output --regexp ' --secrets-fd [0-9]+ --ca-fd [0-9]+ '
	refute_output --partial "$VALUE"
	sed -n '/BEGIN CERT/,/END CERT/p' "$T/h.out" >"$T/hca.pem"
	run unix_get "$T/h.sock" "$T/hca.pem" "127.0.0.1:$A" /hh "Bearer $ph"
	assert_success
	assert_output "HTTP/1.1 200 OK"
	run unix_get "$T/h.sock" "$T/hca.pem" "localhost:$A" /admin "Bearer x"
	assert_success
	assert_output "HTTP/1.1 403 Forbidden"
	exec 7>&-
	wait_until 10 grep -q '^{"version"' "$T/h.out"
	run grep -c "Authorization: Bearer $VALUE" "$T/a.seen"
	assert_success
	assert_output 1
	run cat "$T/h.log"
	assert_line --regexp "allowed 127\.0\.0\.1:$A GET /hh status=200 secrets=MY_TOKEN "
	assert_line --regexp "refused localhost:$A GET /admin \(path /admin is not allowed\) status=403 "
}

@test "intercept: without the secrets' values (a Slurm node) the helpers pass the rules only: the secret's host is a tunnel" {
	printf 'allow: ["127.0.0.1:%s", {host: "localhost:%s", methods: [GET], paths: ["/ok/*"]}]\nsecrets:\n  - {env: MY_TOKEN, hosts: ["127.0.0.1:%s"]}\n' \
		"$A" "$A" "$A" >"$T/cfg.yaml"
	mkfifo "$T/in"
	MY_TOKEN=$VALUE test-host helpers --no-values "$T/cfg.yaml" "$T/h.sock" "$T/h.log" <"$T/in" >"$T/h.out" 2>"$T/h.err" &
	exec 7>"$T/in"
	wait_until 10 grep -q '^ready$' "$T/h.out" || { exec 7>&-; cat "$T/h.err" >&2; false; }
	sed -n '/BEGIN CERT/,/END CERT/p' "$T/h.out" >"$T/hca.pem"
	run unix_get "$T/h.sock" "$T/hca.pem" "localhost:$A" /admin "Bearer x"
	assert_success
	assert_output "HTTP/1.1 403 Forbidden"
	# the secret's host is not intercepted: the task CA is no use there
	run unix_get "$T/h.sock" "$T/hca.pem" "127.0.0.1:$A" /hh "Bearer x"
	assert_failure
	assert_output --partial "CERTIFICATE_VERIFY_FAILED"
	exec 7>&-
	wait_until 10 grep -q '^{"version"' "$T/h.out"
	run cat "$T/h.log"
	assert_line --regexp "allowed 127\.0\.0\.1:$A CONNECT "
	refute_line --regexp "127\.0\.0\.1:$A CONNECT \(intercepted\)"
}

# ka HOST PORT PATH...: the PATHs one after another on one client connection
# through the proxy (a second apart), trusting the task CA; prints for each
# "STATUS conn=N resumed=R BODY's first line", the service's X-Seen ones.
# A PATH may go on with "|NAME: VALUE" headers.
ka() {
	python3 - "$PROXY_PORT" "$T/taskca.pem" "$@" <<-'PY'
		import http.client, ssl, sys, time
		port, ca, host, hport = sys.argv[1:5]
		h = http.client.HTTPSConnection("127.0.0.1", int(port), timeout=10,
		                                 context=ssl.create_default_context(cafile=ca))
		h.set_tunnel(host, int(hport))
		for i, path in enumerate(sys.argv[5:]):
		    if i:
		        time.sleep(1)
		    path, *hs = path.split("|")
		    h.request("GET", path, headers=dict(x.split(": ", 1) for x in hs))
		    r = h.getresponse()
		    body = r.read().decode("latin-1")
		    print(r.status, "conn=%s" % r.getheader("X-Seen-Conn"),
		          "resumed=%s" % r.getheader("X-Seen-Resumed"), body.split("\n")[0])
	PY
}

@test "intercept: reuse: one client connection's requests share the host's connection; the next one resumes its TLS session" {
	start_intercepting
	run ka 127.0.0.1 "$A" /1 /2
	assert_success
	assert_output "$(printf '200 conn=1 resumed=0 GET /1 HTTP/1.1\n200 conn=1 resumed=0 GET /2 HTTP/1.1')"
	# a new client connection: a new connection to the host, its session resumed
	run ka 127.0.0.1 "$A" /3
	assert_success
	assert_output "200 conn=2 resumed=1 GET /3 HTTP/1.1"
	# another host name on the same service: no session of 127.0.0.1's is offered
	run ka localhost "$A" /ok/4
	assert_success
	assert_output "200 conn=3 resumed=0 GET /ok/4 HTTP/1.1"
	run grep -c "^Connection: keep-alive" "$T/a.seen"
	assert_success
	assert_output 4
}

@test "intercept: reuse: hostile: bytes after an answer, a session for another name, the secret only toward its own host" {
	# a second service whose certificate names localhost only
	openssl ecparam -name prime256v1 -genkey -noout -out "$T/lo.key" 2>/dev/null
	openssl req -new -key "$T/lo.key" -subj /CN=localhost -out "$T/lo.csr" 2>/dev/null
	printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$T/lo.ext"
	openssl x509 -req -in "$T/lo.csr" -CA "$T/ca/ca.pem" -CAkey "$T/ca/ca.key" -CAcreateserial \
		-out "$T/lo.pem" -days 1 -extfile "$T/lo.ext" 2>/dev/null
	rm -f "$T/c.port"
	"$TOP/t/tls-echo" --cert "$T/lo.pem" --key "$T/lo.key" --port-file "$T/c.port" \
		--log "$T/c.seen" 2>"$T/c.err" &
	echo $! >>"$T/echo.pids"
	wait_until 30 file_or_gone "$T/c.port" $!
	C=$(cat "$T/c.port")
	printf 'rule localhost:%s\nrule 127.0.0.1:%s\n' "$C" "$C" >>"$T/secrets"
	start_intercepting --allow "localhost:$C" --allow "127.0.0.1:$C"
	# the host sends bytes after its answer: the next request gets its own
	# answer on a new connection, never those bytes
	run ka 127.0.0.1 "$A" /extra /after
	assert_success
	assert_output "$(printf '200 conn=1 resumed=0 one\n200 conn=2 resumed=1 GET /after HTTP/1.1')"
	# localhost's session is never offered to 127.0.0.1, whose certificate check fails
	run ka localhost "$C" /1
	assert_success
	assert_output "200 conn=1 resumed=0 GET /1 HTTP/1.1"
	run icurl "https://127.0.0.1:$C/2"
	assert_success
	assert_output --partial "aibox-proxy: TLS with the host failed: "
	# a request naming another host on a reused connection: the secret is
	# swapped for the connection's own host, and sent there, named so
	run ka 127.0.0.1 "$A" /x "/y|Host: localhost:$A|Authorization: Bearer $PH"
	assert_success
	assert_output "$(printf '200 conn=3 resumed=1 GET /x HTTP/1.1\n200 conn=3 resumed=1 GET /y HTTP/1.1')"
	run grep -A1 "^GET /y " "$T/a.seen"
	assert_success
	assert_output "$(printf 'GET /y HTTP/1.1\nHost: 127.0.0.1:%s' "$A")"
	run grep -c "Authorization: Bearer $VALUE" "$T/a.seen"
	assert_success
	assert_output 1
	stop_proxy
	run cat "$T/proxy.log"
	assert_line --regexp "failed 127\.0\.0\.1:$C GET /2 \(TLS with the host failed: .*\) status=502 "
	refute_output --partial "forged"
}
