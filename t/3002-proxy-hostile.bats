#!/usr/bin/env bats
# aibox-proxy against hostile requests: raw bytes on a socket, each refused
# with a 403 and a one-line reason, and a line in proxy.log.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-proxy

setup() {
	common_setup
	echo '{"turns": []}' >"$T/script.json"
	start_fake_api "$T/script.json"
	export AIBOX_TEST_KEY=sk-real-key-777
	start_proxy --allow "127.0.0.1:$FAKE_API_PORT" --key-env AIBOX_TEST_KEY
	H="Host: 127.0.0.1:$FAKE_API_PORT"
	U="http://127.0.0.1:$FAKE_API_PORT/api/hello"
}

teardown() {
	stop_proxy || true
	stop_fake_api
	common_teardown
}

# refused REQUEST REASON: the proxy answers 403 with REASON (for the API, in
# the API's error shape), logs it, and the fake upstream never sees a request.
refused() {
	run raw_request "$1"
	assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	if [[ "$output" == *"Content-Type: application/json"* ]]; then
		assert_equal "$(sed '1,/^\r$/d' <<<"$output" | jq -r .error.message)" \
			"aibox-proxy refused this request: $2 (the task's proxy.log has it)"
	else
		assert_output --partial "aibox-proxy: $2"
	fi
	grep -F "($2)" "$T/proxy.log" | grep -q "^[^ ]* refused "
	assert_file_not_exists "$T/rec/0001.json"
}

@test "hostile: a well-formed request passes (the control for the tests below)" {
	run raw_request "GET $U HTTP/1.1\r\n$H\r\nConnection: close\r\n\r\n"
	assert_line --index 0 "$(printf 'HTTP/1.1 200 OK\r')"
	assert_file_exists "$T/rec/0001.json"
}

@test "hostile: Content-Length together with Transfer-Encoding" {
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" \
		"both Content-Length and Transfer-Encoding"
}

@test "hostile: duplicate or invalid Content-Length" {
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" "duplicate Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd" "duplicate Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 3,3\r\n\r\nabc" "invalid Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: -1\r\n\r\n" "invalid Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: +3\r\n\r\nabc" "invalid Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 0x10\r\n\r\n" "invalid Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 99999999999999999999\r\n\r\n" "invalid Content-Length"
	refused "POST $U HTTP/1.1\r\n$H\r\nContent-Length: \r\n\r\n" "invalid Content-Length"
}

@test "hostile: Transfer-Encoding other than one plain chunked" {
	refused "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" "unsupported Transfer-Encoding"
	refused "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" "duplicate Transfer-Encoding"
	refused "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: xchunked\r\n\r\n" "unsupported Transfer-Encoding"
}

@test "hostile: a header name spelled with an underscore" {
	refused "POST $U HTTP/1.1\r\n$H\r\nTransfer_Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc" \
		"underscore in a header name"
	refused "GET $U HTTP/1.1\r\n$H\r\nX_Forwarded_For: 1.2.3.4\r\n\r\n" "underscore in a header name"
}

@test "hostile: obs-fold" {
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: one\r\n two\r\n\r\n" "obs-fold (folded header line)"
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: one\r\n\ttwo\r\n\r\n" "obs-fold (folded header line)"
}

@test "hostile: bare CR or LF where CRLF belongs" {
	refused "GET $U HTTP/1.1\n$H\r\n\r\n" "bare CR or LF in the request line"
	refused "GET $U HTTP/1.1\r\n$H\n\r\n" "bare CR or LF in the head"
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: a\rb\r\n\r\n" "bare CR or LF in the head"
	refused "GET $U HTTP/1.1\r\n$H\r\n\n" "bare CR or LF in the head"
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: a\r\r\n\r\n" "bare CR or LF in the head"
}

@test "hostile: oversize request line and head" {
	long=$(head -c 9000 /dev/zero | tr '\0' a)
	refused "GET http://127.0.0.1:$FAKE_API_PORT/$long HTTP/1.1\r\n$H\r\n\r\n" "request line too long"
	hdr=$(head -c 9000 /dev/zero | tr '\0' b)
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: $hdr\r\n\r\n" "header line too long"
	many=""
	for i in $(seq 1 5); do many+="X-$i: $(head -c 4000 /dev/zero | tr '\0' c)\r\n"; done
	refused "GET $U HTTP/1.1\r\n$H\r\n$many\r\n" "request head too large"
	many=""
	for i in $(seq 1 120); do many+="X-$i: y\r\n"; done
	refused "GET $U HTTP/1.1\r\n$H\r\n$many\r\n" "too many header lines"
}

@test "hostile: absolute-URI hosts that disagree with Host, and other target tricks" {
	refused "GET $U HTTP/1.1\r\nHost: evil.test\r\n\r\n" "Host disagrees with the request target"
	refused "GET $U HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" "Host disagrees with the request target"
	refused "GET $U HTTP/1.1\r\n$H\r\nHost: 127.0.0.1:$FAKE_API_PORT\r\n\r\n" "duplicate Host"
	refused "GET $U HTTP/1.1\r\n\r\n" "Host header missing"
	refused "CONNECT 127.0.0.1:$FAKE_API_PORT HTTP/1.1\r\nHost: evil.test:443\r\n\r\n" "Host disagrees with the CONNECT target"
	refused "GET http://evil.test@127.0.0.1:$FAKE_API_PORT/ HTTP/1.1\r\n$H\r\n\r\n" "user information in the request target"
	refused "GET /api/hello HTTP/1.1\r\n$H\r\n\r\n" "not a proxy request"
	refused "GET https://127.0.0.1:$FAKE_API_PORT/ HTTP/1.1\r\n$H\r\n\r\n" "https:// requests need CONNECT"
	refused "GET $U HTTP/1.1 extra\r\n$H\r\n\r\n" "unsupported HTTP version"
	refused "GET $U HTTP/2.0\r\n$H\r\n\r\n" "unsupported HTTP version"
	refused "G(T $U HTTP/1.1\r\n$H\r\n\r\n" "malformed request line"
	refused "GET $U HTTP/1.1\r\n$H\r\nBad Name: x\r\n\r\n" "invalid header name"
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A : x\r\n\r\n" "invalid header name"
	refused "GET $U HTTP/1.1\r\n$H\r\nX-A: a\x01b\r\n\r\n" "control character in a header value"
	refused "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n" "port missing"
}

@test "hostile: key forwarding refuses dot segments in any spelling and escapes" {
	for p in /v1/../x /v1/./x /v1/.. /v1/. '/v1/%2e%2e/x' '/v1/%2E%2E/x' '/v1/%2e/x' \
		'/v1/.%2e/x' '/v1/%2E./x' '/v1/a%2fb' '/v1/a%2Fb' '/v1/a%5cb' '/v1/a%5Cb' \
		'/v1/a\\b' '/v1//x' '/v1/%00' '/v1/%zz' '/v1/%2' '/v1/x#f' '/api/hello/../../v1/x' \
		'/api/hello/' '/api/other' '/v2/messages' '/v1' '/' '//v1/x' '/v1/%25' '*'; do
		run raw_request "GET http://127.0.0.1:3129$p HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n"
		assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	refused "GET http://127.0.0.1:3129/v1/%2e%2e/x HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n" \
		"encoded slash, backslash, dot or control in the path"
	refused "GET http://localhost:3129/v1/../x HTTP/1.1\r\nHost: localhost:3129\r\n\r\n" \
		"dot or empty segment in the path"
	refused "GET http://127.0.0.1:3129/admin HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n" \
		"path not under /v1/ or /api/hello"
	# and inside a CONNECT to the key forwarding port
	run raw_request "CONNECT 127.0.0.1:3129 HTTP/1.1\r\n\r\nGET /v1/../x HTTP/1.1\r\nHost: x\r\n\r\n"
	assert_line --index 0 "$(printf 'HTTP/1.1 200 Connection established\r')"
	assert_output --partial "403 Forbidden"
	assert_output --partial "dot or empty segment in the path"
	run raw_request "CONNECT 127.0.0.1:3129 HTTP/1.1\r\n\r\nCONNECT 127.0.0.1:$FAKE_API_PORT HTTP/1.1\r\n\r\n"
	assert_output --partial "CONNECT inside the key forwarding port"
	assert_file_not_exists "$T/rec/0001.json"
	# the key is never in an answer or the log
	! grep -q sk-real-key-777 "$T/proxy.log"
}

@test "hostile: a broken chunked body ends the request without reaching past it" {
	run raw_request "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
	refute_output --partial "200 OK"
	grep -q "^[^ ]* failed .* (malformed chunked body)" "$T/proxy.log"
	# a smuggled second request after a valid body is not forwarded as part of the first
	run raw_request "POST $U HTTP/1.1\r\n$H\r\nContent-Length: 2\r\n\r\nhiGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	assert_output --partial "200 OK"
	assert_output --partial "aibox-proxy: not on the allow list"
	[ "$(jq -r .body_text "$T/rec/0001.json")" = hi ]
}

@test "hostile: a chunked body whose trailer is no header field ends the request there" {
	# a request line where a trailer belongs would reach the upstream's connection
	run raw_request "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nGET /smuggled HTTP/1.1\r\n\r\n"
	refute_output --partial "200 OK"
	grep -q "^[^ ]* failed .* (malformed chunked body)" "$T/proxy.log"
	run raw_request "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX_A: b\r\n\r\n"
	refute_output --partial "200 OK"
	if [ -e "$T/rec/0001.json" ]; then
		run ! grep -q smuggled "$T/rec/0001.json"
	fi
	# a trailer that is a header field passes
	run raw_request "POST $U HTTP/1.1\r\n$H\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n"
	assert_output --partial "200 OK"
}

@test "hostile: key forwarding refuses path parameters and characters outside the path's syntax" {
	for p in '/v1/..;/x' '/v1/messages;x=1' '/v1/a%3bb' '/v1/a%3Bb' '/v1/a;' '/v1/a"b' '/v1/a<b' \
		'/v1/a{b' '/v1/a|b' '/v1/a^b' '/v1/a`b' '/v1/a[b'; do
		run raw_request "GET http://127.0.0.1:3129$p HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n"
		assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	refused "GET http://127.0.0.1:3129/v1/..;/x HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n" \
		"path parameter (;) in the path"
	refused "GET http://127.0.0.1:3129/v1/a%3Bb HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n" \
		"path parameter (;) in the path"
}

@test "hostile: key forwarding answers methods the API does not use with 405" {
	for m in TRACE TRACK OPTIONS PUT PATCH HEAD FOO; do
		run raw_request "$m http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n\r\n"
		assert_line --index 0 "$(printf 'HTTP/1.1 405 Method Not Allowed\r')"
		assert_line "$(printf 'Allow: GET, POST, DELETE\r')"
	done
	run raw_request "CONNECT 127.0.0.1:3129 HTTP/1.1\r\n\r\nTRACE /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n"
	assert_output --partial "405 Method Not Allowed"
	grep -q "^[^ ]* refused localhost:3129 TRACE /v1/messages (method not forwarded to the API) status=405 " "$T/proxy.log"
	assert_file_not_exists "$T/rec/0001.json"
}

@test "hostile: a client that stalls inside a request head is dropped after the header timeout" {
	stop_proxy
	start_proxy --allow "127.0.0.1:$FAKE_API_PORT" --header-timeout 500ms
	run python3 - "$PROXY_PORT" <<-'PY'
		import socket, sys, time
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
		s.sendall(b"GET http://x/ HTTP/1.1\r\nHost: ")
		t = time.time()
		s.settimeout(10)
		try:
		    data = s.recv(100)
		except ConnectionResetError:
		    data = b""
		print("closed" if data == b"" else data, round(time.time() - t, 1) < 3)
	PY
	assert_output "closed True"
	grep -q "^[^ ]* refused .*(request head timed out)" "$T/proxy.log"
}
