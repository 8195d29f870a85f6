#!/usr/bin/env bats
# aibox-proxy's key forwarding: requests for 127.0.0.1:3129 go to the API
# upstream (a local TLS fake with a test CA) with the client's credentials
# dropped and the real key added; the key shows up nowhere else.  Then the
# real Claude Code CLI through the proxy.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-tls
load lib-proxy

KEY=sk-ant-real-key-5150

setup() {
	common_setup
	make_test_ca "$T/ca"
	cat >"$T/script.json" <<-JSON
		{"turns": [{"text": "Hello through the proxy."}], "require_key": "$KEY"}
	JSON
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	export AIBOX_TEST_KEY=$KEY
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT
	export AIBOX_API_CA=$T/ca/ca.pem
	echo "127.0.0.1 api.test" >"$T/hosts"
	export AIBOX_PROXY_HOSTS=$T/hosts
}

teardown() {
	stop_proxy || true
	stop_fake_api
	[ ! -s "$T/echo.pid" ] || kill "$(cat "$T/echo.pid")" 2>/dev/null || true
	common_teardown
}

# restart_fake_api [OPTION...]: the fake API again on $T/script.json over TLS,
# with the options given, and AIBOX_API_UPSTREAM pointing at it.
restart_fake_api() {
	stop_fake_api
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key" "$@"
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT
}

# key_nowhere FILE...: the real key is in none of the files nor in proxy.log
key_nowhere() {
	local f
	for f in "$T/proxy.log" "$T/proxy.err" "$@"; do
		if grep -q "$KEY" "$f"; then
			echo "the key is in $f" >&2
			return 1
		fi
	done
}

REQ='{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}'

@test "key: the real key replaces every credential the client sent" {
	start_proxy --key-env AIBOX_TEST_KEY
	pcurl -sS -i -v -x "$PROXY" -H 'x-api-key: sk-placeholder' -H 'Authorization: Bearer tok-vm' \
		-H 'Cookie: session=vm' -H 'Proxy-Authorization: Basic dm06dm0=' -U vm:vm \
		-H 'content-type: application/json' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages?beta=true" >"$T/out" 2>"$T/err"
	run cat "$T/out"
	assert_line --index 0 "$(printf 'HTTP/1.1 200 OK\r')"
	assert_line 'event: message_stop'
	assert_output --partial 'Hello through the proxy.'
	rec=$T/rec/0001.json
	[ "$(jq -r '.headers["x-api-key"]' "$rec")" = "$KEY" ]
	[ "$(jq -r '.headers.authorization' "$rec")" = null ]
	[ "$(jq -r '.headers.cookie' "$rec")" = null ]
	[ "$(jq -r '.headers["proxy-authorization"]' "$rec")" = null ]
	[ "$(jq -r '.headers.host' "$rec")" = "localhost:$FAKE_API_PORT" ]
	[ "$(jq -r '.path' "$rec")" = "/v1/messages?beta=true" ]
	[ "$(jq -r '.body.messages[0].content' "$rec")" = hi ]
	# the placeholder and the other credentials went nowhere
	run ! grep -q 'sk-placeholder\|tok-vm\|session=vm' "$rec"
	key_nowhere "$T/out" "$T/err"
	run cat "$T/proxy.log"
	assert_line --regexp "^[^ ]+ allowed localhost:3129 POST /v1/messages\?beta=true status=200 model=m input=10 output=[0-9]+ cache_write_5m=0 cache_write_1h=0 cache_read=0 usd=[0-9.]+ sent=[1-9][0-9]* received=[1-9][0-9]* duration=[0-9.]+s$"
}

@test "key: through a CONNECT to 127.0.0.1:3129 too, with keep-alive, and /api/hello" {
	start_proxy --key-env AIBOX_TEST_KEY
	pcurl -sS -v -p -x "$PROXY" "http://127.0.0.1:3129/api/hello" \
		--next -p -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages" \
		--next -p -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		-H 'Transfer-Encoding: chunked' "http://127.0.0.1:3129/v1/messages" \
		>"$T/out" 2>"$T/err"
	grep -q 'Re-using existing connection' "$T/err"
	[ "$(head -c 3 "$T/out")" = '{}e' ] # {} then "event: ..."
	[ "$(grep -c 'Hello through the proxy' "$T/out")" = 2 ]
	[ "$(jq -r '.path' "$T/rec/0001.json")" = /api/hello ]
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0002.json")" = "$KEY" ]
	[ "$(jq -r '.headers["transfer-encoding"]' "$T/rec/0003.json")" = chunked ]
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0003.json")" = "$KEY" ]
	key_nowhere "$T/out" "$T/err"
	run cat "$T/proxy.log"
	assert_line --regexp "allowed localhost:3129 CONNECT \(key forwarding\)"
	assert_line --regexp "allowed localhost:3129 GET /api/hello status=200"
	# localhost:3129 is the same port; no other host or port is
	run curl -sS -x "$PROXY" "http://localhost:3129/api/hello"
	assert_output '{}'
	run curl -sS -x "$PROXY" "http://127.0.0.2:3129/api/hello"
	assert_output 'aibox-proxy: not on the allow list'
}

@test "key: requests for the port go to the upstream whatever host the request names" {
	start_proxy --key-env AIBOX_TEST_KEY
	# a Host header naming another host
	run pcurl -sS -x "$PROXY" -H 'Host: api.anthropic.com' "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	run pcurl -sS -x "$PROXY" -H 'Host: evil.test:8080' -H 'x-api-key: sk-placeholder' \
		--data-binary "$REQ" "http://localhost:3129/v1/messages"
	assert_output --partial 'Hello through the proxy.'
	[ "$(jq -r '.headers.host' "$T/rec/0002.json")" = "localhost:$FAKE_API_PORT" ]
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0002.json")" = "$KEY" ]
	# inside a CONNECT to the port: an absolute URI naming another host, and another Host
	run raw_request "CONNECT 127.0.0.1:3129 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\nGET http://evil.test/api/hello HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
	assert_line --index 0 "$(printf 'HTTP/1.1 200 Connection established\r')"
	assert_output --partial "$(printf 'HTTP/1.1 200 OK\r')"
	[ "$(jq -r '.path' "$T/rec/0003.json")" = /api/hello ]
	[ "$(jq -r '.headers.host' "$T/rec/0003.json")" = "localhost:$FAKE_API_PORT" ]
	[ "$(grep -c ' allowed localhost:3129 GET /api/hello status=200 ' "$T/proxy.log")" = 2 ]
	run ! grep -q 'evil.test\|refused' "$T/proxy.log"
	key_nowhere
}

@test "key: the upstream's certificate and host name are checked" {
	unset AIBOX_API_CA
	start_proxy --key-env AIBOX_TEST_KEY
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output --partial "aibox-proxy: TLS with the API upstream failed: unable to get local issuer certificate"
	stop_proxy
	export AIBOX_API_CA=$T/ca/ca.pem
	export AIBOX_API_UPSTREAM=https://api.test:$FAKE_API_PORT
	start_proxy --key-env AIBOX_TEST_KEY
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output --partial "aibox-proxy: TLS with the API upstream failed: hostname mismatch"
	assert_file_not_exists "$T/rec/0001.json"
	key_nowhere
}

@test "key: without --key-env the port is refused; a bad upstream or key is an error" {
	start_proxy
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_success
	assert_equal "$(jq -r .error.message <<<"$output")" "aibox-proxy refused this request: key forwarding is off (the task's proxy.log has it)"
	AIBOX_API_UPSTREAM=http://localhost:1 run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	assert_output --partial "not an https:// URL"
	AIBOX_API_UPSTREAM=https://localhost:1/path run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	assert_output --partial "'https://localhost:1/path': not https://HOST[:PORT]"
	AIBOX_TEST_KEY=$'sk-bad\r\nX-Injected: 1' run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	assert_output --partial "holds characters a key cannot have"
}

@test "key: --key-fd reads the key from a pipe; it is in no environment, and a bad one is refused" {
	unset AIBOX_TEST_KEY
	start_proxy --key-fd 4 4< <(printf '%s\n' "$KEY")
	run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages?beta=true"
	assert_output --partial 'Hello through the proxy.'
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0001.json")" = "$KEY" ]
	run grep -caF "$KEY" "/proc/$PROXY_PID/environ"
	assert_output 0
	# --key-env: the variable's bytes are wiped in the initial block too
	stop_proxy
	AIBOX_TEST_KEY=$KEY start_proxy --key-env AIBOX_TEST_KEY
	run grep -caF "$KEY" "/proc/$PROXY_PID/environ"
	assert_output 0
	stop_proxy
	run aibox-proxy --key-fd 4 4</dev/null
	assert_failure 2
	assert_output "aibox-proxy: no key on fd 4"
	run aibox-proxy --key-fd 4 4< <(printf 'sk-bad\r\nX-Injected: 1')
	assert_failure 2
	assert_output "aibox-proxy: the key on fd 4 holds characters a key cannot have"
	run aibox-proxy --key-fd 4 4< <(head -c 5000 /dev/zero | tr '\0' k)
	assert_failure 2
	assert_output "aibox-proxy: the key on fd 4 is longer than 4096 bytes"
	run aibox-proxy --key-fd 4 --key-env AIBOX_TEST_KEY 4</dev/null
	assert_failure 2
	assert_output "aibox-proxy: --key-env and --key-fd cannot be used together"
}

@test "key: a refusal by the proxy reaches the real Claude Code as one readable sentence" {
	need_claude
	start_proxy # no key: every request for the API is refused
	mkdir "$T/work"
	cd "$T/work"
	st=0
	claude_via_proxy "say hello" || st=$?
	proxy_settle
	assert_equal "$st" 1
	result=$(jq -r 'select(.type == "result") | .result' "$T/out.jsonl")
	[[ "$result" == *"API Error: 403 aibox-proxy refused this request: key forwarding is off (the task's proxy.log has it)" ]] ||
		fail "Claude Code showed: $result"
	grep -q "refused localhost:3129 POST /v1/messages?beta=true (key forwarding is off) status=403" "$T/proxy.log"
}

@test "key: the real Claude Code CLI through the proxy gets its scripted reply" {
	need_claude
	start_proxy --key-env AIBOX_TEST_KEY
	mkdir "$T/work"
	cd "$T/work"
	st=0
	claude_via_proxy "say hello" || st=$?
	proxy_settle
	cat "$T/err" "$T/fake-api.log" "$T/proxy.log"
	[ "$st" -eq 0 ]
	result=$(grep '"type":"result"' "$T/out.jsonl" | tail -1)
	[ "$(jq -r .result <<<"$result")" = "Hello through the proxy." ]
	[ "$(jq -r .is_error <<<"$result")" = false ]
	n=0
	for f in "$T"/rec/*.json; do
		[ "$(jq -r '.headers["x-api-key"]' "$f")" = "$KEY" ] || [ "$(jq -r .path "$f")" = /api/hello ]
		run ! grep -q sk-ant-placeholder "$f"
		n=$((n + 1))
	done
	[ "$n" -ge 1 ]
	grep -q "allowed localhost:3129 POST /v1/messages?beta=true status=200" "$T/proxy.log"
	key_nowhere "$T/out.jsonl" "$T/err"
}

# no_api_conns: no connection to the fake API is open (for wait_until)
no_api_conns() {
	[ -z "$(ss -Htn state established "( dport = :$FAKE_API_PORT )")" ]
}

# conns: the upstream connection number of each recorded request, in order
conns() {
	local f
	for f in "$T"/rec/*.json; do jq -r .conn "$f"; done | tr '\n' ' '
}

@test "key pool: requests in a row, from different clients, share one upstream connection" {
	start_proxy --key-env AIBOX_TEST_KEY
	for i in 1 2 3; do
		pcurl -sS -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
			"http://127.0.0.1:3129/v1/messages" >"$T/out$i"
		grep -q 'Hello through the proxy' "$T/out$i"
	done
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	[ "$(conns)" = "1 1 1 1 " ]
	for f in "$T"/rec/*.json; do
		[ "$(jq -r '.headers.connection' "$f")" = keep-alive ]
	done
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0003.json")" = "$KEY" ]
	key_nowhere "$T"/out*
	[ "$(grep -c 'allowed localhost:3129 POST /v1/messages status=200' "$T/proxy.log")" = 3 ]
	stop_proxy
	# without the pool, one connection per request (and Connection: close)
	start_proxy --key-env AIBOX_TEST_KEY --api-pool 0
	for i in 1 2 3; do
		curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello" >/dev/null
	done
	[ "$(conns)" = "1 1 1 1 2 3 4 " ]
	[ "$(jq -r '.headers.connection' "$T/rec/0007.json")" = close ]
}

@test "key pool: requests at the same time never share a connection" {
	cat >"$T/script.json" <<-JSON
		{"turns": [{"stall": 1}], "require_key": "$KEY"}
	JSON
	restart_fake_api
	start_proxy --key-env AIBOX_TEST_KEY
	curl -sS -x "$PROXY" --data-binary "$REQ" "http://127.0.0.1:3129/v1/messages" >"$T/a" &
	a=$!
	curl -sS -x "$PROXY" --data-binary "$REQ" "http://127.0.0.1:3129/v1/messages" >"$T/b" &
	b=$!
	wait $a
	wait $b
	grep -q stalled "$T/a"
	grep -q stalled "$T/b"
	c=$(conns)
	[ "$c" = "1 2 " ] || [ "$c" = "2 1 " ]
	# both went back to the pool: the next two, one after the other, reuse one
	curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello" >/dev/null
	curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello" >/dev/null
	set -- $(conns)
	[ $# = 4 ] && [ "$3" = "$4" ] && { [ "$3" = 1 ] || [ "$3" = 2 ]; }
}

@test "key pool: an idle connection is closed after --api-pool-idle" {
	start_proxy --key-env AIBOX_TEST_KEY --api-pool-idle 300ms
	curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello" >/dev/null
	curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello" >/dev/null
	wait_until 5 no_api_conns
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	[ "$(conns)" = "1 1 2 " ]
}

@test "key pool: an upstream that closed an idle connection costs the client nothing" {
	restart_fake_api --idle-close 0.3
	start_proxy --key-env AIBOX_TEST_KEY
	pcurl -sS -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages" >"$T/out1"
	wait_until 10 grep -q "closing connection 1 after" "$T/fake-api.log"
	# a POST, which is never sent twice: the closed connection is seen before use
	pcurl -sS -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages" >"$T/out2"
	grep -q 'Hello through the proxy' "$T/out1"
	grep -q 'Hello through the proxy' "$T/out2"
	[ "$(conns)" = "1 2 " ]
	run grep -c ' failed ' "$T/proxy.log"
	assert_output 0
}

@test "key pool: a connection dropped as the request arrives: GET is sent again, POST fails" {
	restart_fake_api --drop-after 1
	start_proxy --key-env AIBOX_TEST_KEY
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	# connection 1 looks alive in the pool, takes the request and closes
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	grep -q "dropping connection 1 without answering" "$T/fake-api.log"
	[ "$(conns)" = "1 2 " ]
	# a POST may have been acted on: it is not sent twice, the client is told
	run pcurl -sS -i -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages"
	assert_line --index 0 --partial "HTTP/1.1 502"
	assert_output --regexp "aibox-proxy: upstream (closed without a response|read failed|write failed)"
	grep -q "dropping connection 2 without answering" "$T/fake-api.log"
	[ "$(conns)" = "1 2 " ]
	# and the next request opens a new connection
	run pcurl -sS -x "$PROXY" -H 'x-api-key: sk-placeholder' --data-binary "$REQ" \
		"http://127.0.0.1:3129/v1/messages"
	assert_output --partial 'Hello through the proxy'
	[ "$(conns)" = "1 2 3 " ]
	key_nowhere
}

@test "key pool: a large POST on a connection the upstream drops gets a 502, not an empty reply" {
	restart_fake_api --drop-after 1
	start_proxy --key-env AIBOX_TEST_KEY
	run pcurl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{}'
	# the upstream closes unread: the proxy's write of the body fails
	head -c 8388608 /dev/zero | tr '\0' a >"$T/big"
	run pcurl -sS -i -x "$PROXY" -H 'x-api-key: sk-placeholder' -H 'Content-Type: text/plain' \
		--data-binary @"$T/big" "http://127.0.0.1:3129/v1/messages"
	refute_line --partial "curl: ("
	assert_line --partial "HTTP/1.1 502 Bad Gateway"
	assert_output --regexp "aibox-proxy: upstream (closed without a response|read failed|write failed)"
	grep -q "dropping connection 1 without answering" "$T/fake-api.log"
	run grep -c ' failed ' "$T/proxy.log"
	assert_output 1
	key_nowhere
}

# post_path PATH: POST $REQ to the key forwarding port at PATH; the answer's head and body in $T/out
post_path() {
	pcurl -sS -i -x "$PROXY" -H 'content-type: application/json' --data-binary "$REQ" \
		"http://127.0.0.1:3129$1" >"$T/out"
}

@test "key: every spelling of /v1/messages is forwarded as /v1/messages, the query as it came" {
	start_proxy --key-env AIBOX_TEST_KEY
	for p in /v1/Messages /v1/messages/ /v1/MESSAGES/ '/v1/%6Dessages' '/v1/messages/?beta=true'; do
		post_path "$p"
		assert_equal "$(head -1 "$T/out")" "$(printf 'HTTP/1.1 200 OK\r')"
	done
	run jq -r .path "$T"/rec/*.json
	[ "$status" -eq 0 ]
	assert_output "$(printf '/v1/messages\n/v1/messages\n/v1/messages\n/v1/messages\n/v1/messages?beta=true')"
}

@test "key: batches, chat completions, text completions and unlisted paths get no key, in any spelling" {
	start_proxy --key-env AIBOX_TEST_KEY
	for p in /v1/messages/batches /v1/messages/batches/ /v1/Messages/Batches '/v1/messages/%62atches' \
		/v1/messages/batches/msgbatch_1/cancel /v1/chat/completions /v1/Chat/Completions/ /V1/messages /v1/complete \
		'/v1/messages%3Fbeta=true' /v1/messagesx /v1/messages/x /v1/files /v1/models/a/b /api/oauth/token /admin; do
		post_path "$p"
		assert_equal "$(head -1 "$T/out")" "$(printf 'HTTP/1.1 403 Forbidden\r')"
	done
	# a listed path with another method
	run pcurl -sS -i -x "$PROXY" http://127.0.0.1:3129/v1/messages
	[ "$status" -eq 0 ]
	assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	assert_output --partial 'method not forwarded for this API path'
	# each refusal in the API's error shape, whose message Claude Code shows: one sentence
	post_path /v1/messages/batches
	assert_equal "$(grep -i '^content-type:' "$T/out")" "$(printf 'Content-Type: application/json\r')"
	run jq -r '[.type, .error.type, .error.message] | join("|")' < <(sed '1,/^\r$/d' "$T/out")
	assert_success
	assert_output "error|permission_error|aibox-proxy refused this request: the Message Batches API is not forwarded: its spend cannot be counted (the task's proxy.log has it)"
	run pcurl -sS -X TRACE -x "$PROXY" http://127.0.0.1:3129/v1/messages
	assert_success
	assert_equal "$(jq -r '.error.type + "|" + .error.message' <<<"$output")" \
		"invalid_request_error|aibox-proxy refused this request: method not forwarded to the API (the task's proxy.log has it)"
	[ ! -e "$T/rec" ] || [ -z "$(ls "$T/rec")" ]
	grep -q 'refused localhost:3129 POST /v1/messages/batches (the Message Batches API is not forwarded: its spend cannot be counted) status=403' "$T/proxy.log"
	grep -q 'refused localhost:3129 POST /v1/chat/completions (the OpenAI-compatible API is not forwarded: its spend is not counted) status=403' "$T/proxy.log"
	grep -q 'refused localhost:3129 POST /v1/messages%3Fbeta=true (path not forwarded to the API) status=403' "$T/proxy.log"
}

@test "key: the free paths are forwarded: count_tokens, the models list and a model" {
	start_proxy --key-env AIBOX_TEST_KEY
	post_path /v1/messages/count_tokens
	assert_equal "$(head -1 "$T/out")" "$(printf 'HTTP/1.1 200 OK\r')"
	curl -sS -x "$PROXY" http://127.0.0.1:3129/v1/models/ >/dev/null
	curl -sS -x "$PROXY" http://127.0.0.1:3129/v1/Models/claude-Opus-5 >/dev/null
	run jq -r '.path + " " + .headers["x-api-key"]' "$T"/rec/*.json
	[ "$status" -eq 0 ]
	assert_output "$(printf '/v1/messages/count_tokens %s\n/v1/models %s\n/v1/models/claude-Opus-5 %s' "$KEY" "$KEY" "$KEY")"
}

# The subscription's token (docs/proxy.md, "The OAuth login"): OAUTH is the
# real one, on --secrets-fd as the "api bearer" secret; the client holds OPH.
OAUTH=sk-ant-oat01-real-token-3003
OPH=aibox-secret-00112233445566778899aabbccddeeff

# oauth_secrets [MORE]: the token's lines of the secrets text, then MORE, in $T/secrets
oauth_secrets() {
	printf 'secret CLAUDE_CODE_OAUTH_TOKEN %s\nvalue %s\napi bearer\n%s' "$OPH" "$OAUTH" "${1:-}" \
		>"$T/secrets"
}

# start_oauth [ARGS...]: the proxy with $T/secrets on --secrets-fd
start_oauth() {
	local st
	exec 5<"$T/secrets"
	start_proxy --secrets-fd 5 "$@"
	st=$?
	exec 5<&-
	return $st
}

@test "oauth: the token replaces the placeholder on the API port as a Bearer, no x-api-key; its echo comes back as the placeholder" {
	unset AIBOX_TEST_KEY
	python3 -c 'import json, sys; print(json.dumps({"turns": [{"raw": [
	  "event: x\ndata: {\"echo\": \"Bearer " + sys.argv[2] + "\"}\n\n"]}], "require_bearer": sys.argv[2]}))' \
		"$KEY" "$OAUTH" >"$T/script.json"
	restart_fake_api
	oauth_secrets
	start_oauth
	pcurl -sS -i -x "$PROXY" -H "Authorization: Bearer $OPH" -H 'x-api-key: sk-vm' \
		-H 'anthropic-beta: oauth-2025-04-20' -H 'content-type: application/json' \
		--data-binary "$REQ" "http://127.0.0.1:3129/v1/messages?beta=true" >"$T/out" 2>"$T/err"
	run cat "$T/out"
	assert_line --index 0 "$(printf 'HTTP/1.1 200 OK\r')"
	assert_line "data: {\"echo\": \"Bearer $OPH\"}"
	refute_output --partial "$OAUTH"
	rec=$T/rec/0001.json
	[ "$(jq -r '.headers.authorization' "$rec")" = "Bearer $OAUTH" ]
	[ "$(jq -r '.headers["x-api-key"]' "$rec")" = null ]
	[ "$(jq -r '.headers["anthropic-beta"]' "$rec")" = oauth-2025-04-20 ]
	run grep -c -e "$OPH" -e sk-vm "$rec"
	assert_output 0
	# a subscription is not charged by the token: nothing counted, no usd
	run grep -F 'allowed localhost:3129 POST /v1/messages?beta=true status=200' "$T/proxy.log"
	assert_success
	refute_output --partial usd=
	run grep -c -F "$OAUTH" "$T/proxy.log" "$T/proxy.err" "/proc/$PROXY_PID/cmdline" "/proc/$PROXY_PID/environ"
	assert_failure
	refute_output --regexp ':[1-9]'
}

@test "oauth: the placeholder sent to another host is refused there, and only the API port gets the token" {
	unset AIBOX_TEST_KEY
	cp "$T/ca/ca.pem" "$T/upstream-ca.pem"
	"$TOP/t/tls-echo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" \
		--port-file "$T/echo.port" --log "$T/echo.seen" 2>"$T/echo.err" &
	echo $! >"$T/echo.pid"
	wait_until 10 file_or_gone "$T/echo.port" $!
	E=$(cat "$T/echo.port")
	# another secret makes 127.0.0.1:E an intercepted host
	oauth_secrets "$(printf 'secret TOK aibox-secret-0123456789abcdef0123456789abcdef\nvalue tokval\nhost 127.0.0.1:%s' "$E")"$'\n'
	exec 6>"$T/taskca.pem"
	SSL_CERT_FILE=$T/upstream-ca.pem start_oauth --allow "127.0.0.1:$E" --ca-fd 6
	exec 6>&-
	run pcurl -sS -w '\n%{http_code}\n' -x "$PROXY" --cacert "$T/taskca.pem" \
		-H "Authorization: Bearer $OPH" "https://127.0.0.1:$E/x"
	assert_success
	assert_line 403
	assert_line "aibox-proxy: CLAUDE_CODE_OAUTH_TOKEN to 127.0.0.1:$E"
	# nothing reached the service
	run cat "$T/echo.seen"
	refute_output --partial GET
	run grep -F "refused 127.0.0.1:$E GET /x" "$T/proxy.log"
	assert_success
	assert_output --partial CLAUDE_CODE_OAUTH_TOKEN
}

@test "oauth: a bearer token next to a key, with a host, twice, or with a budget is refused" {
	oauth_secrets
	run aibox-proxy --key-env AIBOX_TEST_KEY --secrets-fd 5 5<"$T/secrets"
	assert_failure 2
	assert_output "aibox-proxy: --key-env or --key-fd, and a bearer token for the API on --secrets-fd 5: one of them"
	run aibox-proxy --secrets-fd 5 --budget-task 1 5<"$T/secrets"
	assert_failure 2
	assert_output "aibox-proxy: --budget-task, --budget-day and --budget-user need key forwarding with a key (--key-env or --key-fd)"
	bad() {
		printf "$1" >"$T/bad"
		run aibox-proxy --secrets-fd 5 5<"$T/bad"
		assert_failure 2
		assert_output "aibox-proxy: $2"
	}
	bad "secret A $OPH\\nvalue v\\napi bearer\\nhost example.com\\n" \
		"secrets, line 4: a host for the API's bearer token"
	bad "secret A $OPH\\nvalue v\\nhost example.com\\napi bearer\\n" \
		"secrets, line 4: not 'api bearer' right after a secret's value"
	bad "secret A $OPH\\napi bearer\\nvalue v\\n" \
		"secrets, line 2: not 'api bearer' right after a secret's value"
	bad "secret A $OPH\\nvalue v\\napi key\\n" \
		"secrets, line 3: not 'api bearer' right after a secret's value"
	bad "secret A $OPH\\nvalue v\\napi bearer\\nsecret B $OPH\\nvalue w\\napi bearer\\n" \
		"secrets, line 6: a second bearer token for the API"
	bad "secret A $OPH\\nvalue v\\n" "secrets, line 2: a secret without hosts"
}

@test "oauth: the real Claude Code CLI with the placeholder as its token gets its reply; the API sees the token as a Bearer and no x-api-key" {
	need_claude
	unset AIBOX_TEST_KEY
	printf '{"turns": [{"text": "Hello with a subscription."}], "require_bearer": "%s"}\n' "$OAUTH" >"$T/script.json"
	restart_fake_api
	oauth_secrets
	start_oauth
	mkdir "$T/work"
	cd "$T/work"
	st=0
	CLAUDE_LOGIN=CLAUDE_CODE_OAUTH_TOKEN=$OPH claude_via_proxy "say hello" || st=$?
	proxy_settle
	[ "$st" -eq 0 ] || { cat "$T/err" "$T/fake-api.log" "$T/proxy.log"; false; }
	result=$(grep '"type":"result"' "$T/out.jsonl" | tail -1)
	[ "$(jq -r .result <<<"$result")" = "Hello with a subscription." ]
	n=0
	for f in "$T"/rec/*.json; do
		[ "$(jq -r .path "$f")" = /api/hello ] && continue
		[ "$(jq -r '.headers.authorization' "$f")" = "Bearer $OAUTH" ]
		[ "$(jq -r '.headers["x-api-key"]' "$f")" = null ]
		n=$((n + 1))
	done
	[ "$n" -ge 1 ]
	run grep -rlF "$OAUTH" "$T/out.jsonl" "$T/err" "$T/proxy.log" "$T/work" "$HOME"
	assert_failure
	assert_output ""
}
