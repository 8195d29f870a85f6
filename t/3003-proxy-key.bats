#!/usr/bin/env bats
# aibox-proxy's key forwarding: requests for 127.0.0.1:3129 go to the API
# upstream (a local TLS fake with a test CA) with the client's credentials
# dropped and the real key added; the key shows up nowhere else.  Then the
# real Claude Code CLI through the proxy.
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
	common_teardown
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
	curl -sS -i -v -x "$PROXY" -H 'x-api-key: sk-placeholder' -H 'Authorization: Bearer tok-vm' \
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
	! grep -q 'sk-placeholder\|tok-vm\|session=vm' "$rec"
	key_nowhere "$T/out" "$T/err"
	run cat "$T/proxy.log"
	assert_line --regexp "^[^ ]+ localhost:3129 POST /v1/messages\?beta=true allowed status=200 sent=[1-9][0-9]* received=[1-9][0-9]* duration=[0-9.]+s$"
}

@test "key: through a CONNECT to 127.0.0.1:3129 too, with keep-alive, and /api/hello" {
	start_proxy --key-env AIBOX_TEST_KEY
	curl -sS -v -p -x "$PROXY" "http://127.0.0.1:3129/api/hello" \
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
	assert_line --regexp "localhost:3129 CONNECT allowed \(key forwarding\)"
	assert_line --regexp "localhost:3129 GET /api/hello allowed status=200"
	# localhost:3129 is the same port; no other host or port is
	run curl -sS -x "$PROXY" "http://localhost:3129/api/hello"
	assert_output '{}'
	run curl -sS -x "$PROXY" "http://127.0.0.2:3129/api/hello"
	assert_output 'aibox-proxy: not on the allow list'
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
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output --partial "aibox-proxy: TLS with the API upstream failed: hostname mismatch"
	assert_file_not_exists "$T/rec/0001.json"
	key_nowhere
}

@test "key: without --key-env the port is refused; a bad upstream or key is an error" {
	start_proxy
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output 'aibox-proxy: key forwarding is off'
	AIBOX_API_UPSTREAM=http://localhost:1 run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	assert_output --partial "not an https:// URL"
	AIBOX_API_UPSTREAM=https://localhost:1/path run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	AIBOX_TEST_KEY=$'sk-bad\r\nX-Injected: 1' run aibox-proxy --key-env AIBOX_TEST_KEY
	[ "$status" -eq 2 ]
	assert_output --partial "holds characters a key cannot have"
}

@test "key: the real Claude Code CLI through the proxy gets its scripted reply" {
	need_claude
	start_proxy --key-env AIBOX_TEST_KEY
	mkdir "$T/work"
	cd "$T/work"
	st=0
	env -u NO_PROXY -u no_proxy \
		HTTPS_PROXY="$PROXY" HTTP_PROXY="$PROXY" https_proxy="$PROXY" http_proxy="$PROXY" \
		ANTHROPIC_BASE_URL=http://127.0.0.1:3129 ANTHROPIC_API_KEY=sk-ant-placeholder \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=0 \
		DISABLE_AUTOUPDATER=1 HOME="$HOME" \
		timeout 120 "$CLAUDE_BIN" --print --output-format stream-json --verbose \
		"say hello" >"$T/out.jsonl" 2>"$T/err" || st=$?
	cat "$T/err" "$T/fake-api.log" "$T/proxy.log"
	[ "$st" -eq 0 ]
	result=$(grep '"type":"result"' "$T/out.jsonl" | tail -1)
	[ "$(jq -r .result <<<"$result")" = "Hello through the proxy." ]
	[ "$(jq -r .is_error <<<"$result")" = false ]
	n=0
	for f in "$T"/rec/*.json; do
		[ "$(jq -r '.headers["x-api-key"]' "$f")" = "$KEY" ] || [ "$(jq -r .path "$f")" = /api/hello ]
		! grep -q sk-ant-placeholder "$f"
		n=$((n + 1))
	done
	[ "$n" -ge 1 ]
	grep -q "localhost:3129 POST /v1/messages?beta=true allowed status=200" "$T/proxy.log"
	key_nowhere "$T/out.jsonl" "$T/err"
}
