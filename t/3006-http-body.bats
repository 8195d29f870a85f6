#!/usr/bin/env bats
# common/net/http.c's body framing read for its payload (http_body_decode(), the
# broker's way; the proxy passes the framing through with http_body_feed(),
# and fuzz/fuzz-http.c checks that both take the same bytes).
bats_require_minimum_version 1.5.0
load lib-common

setup() { common_setup; }
teardown() { common_teardown; }

@test "http body: chunked framing comes off, in pieces of any size" {
	printf '4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nTrailer: x\r\n\r\nNEXT' >body
	for piece in 1 2 5 1000; do
		run --separate-stderr test-http decode chunked "$piece" <body
		assert_success
		assert_output abcdefg
		[ "$stderr" = "taken=40 done=1" ]
	done
}

@test "http body: a bare LF in chunked framing is refused, as in a head" {
	printf '4\nabcd\r\n0\r\n\r\n' >body
	run test-http decode chunked 3 <body
	assert_failure 1
	assert_output "refused: malformed chunked body"
	printf '4\r\nabcd\n0\r\n\r\n' >body
	run test-http decode chunked 64 <body
	assert_failure 1
	assert_output "refused: malformed chunked body"
}

@test "http body: Content-Length and until-close bodies are passed whole" {
	printf 'abcdefNEXT' >body
	run --separate-stderr test-http decode length 6 4 <body
	assert_success
	assert_output abcdef
	[ "$stderr" = "taken=6 done=1" ]
	run --separate-stderr test-http decode close 3 <body
	assert_output abcdefNEXT
	[ "$stderr" = "taken=10 done=0" ]
}

@test "http: one status table gives every status line its reason phrase" {
	run test-http reason 100 200 400 403 404 405 408 413 415 500 502 503 504
	assert_success
	assert_output "100 Continue
200 OK
400 Bad Request
403 Forbidden
404 Not Found
405 Method Not Allowed
408 Request Timeout
413 Payload Too Large
415 Unsupported Media Type
500 Internal Server Error
502 Bad Gateway
503 Service Unavailable
504 Gateway Timeout"
	run test-http reason 299 600 0 -1
	assert_success
	assert_output "299 Error
600 Error
0 Error
-1 Error"
}
