#!/usr/bin/env bats
# aibox-proxy against a dead or slow API upstream (docs/reliability.md): an
# upstream that accepts and never answers, one that resets mid-stream, and
# the other connections while one upstream hangs.  Against the TLS fake API
# over loopback, no VM.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-tls
load lib-proxy
load lib-task # api

setup() {
	common_setup
	make_test_ca "$T/ca"
	export AIBOX_TEST_KEY=sk-ant-real-key-3019
	export AIBOX_API_CA=$T/ca/ca.pem
}

teardown() {
	stop_proxy || true
	stop_fake_api
	common_teardown
}

# ask STREAM [MAX_TIME]: one main request through the proxy (max_tokens
# 1000); the answer in $T/out, curl's status and time in $T/curl
ask() {
	pcurl -sS -m "${2:-20}" -x "$PROXY" -H 'content-type: application/json' --data-binary \
		"{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1000,\"stream\":$1,\"tools\":[{\"name\":\"Bash\"}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
		-w '%{http_code} %{time_total}\n' -o "$T/out" \
		"http://127.0.0.1:3129/v1/messages" >"$T/curl"
}

@test "upstream: an API that accepts and never answers is ended by --idle-timeout, with a 504 and a log line" {
	api '{"turns":[{"stall":60}]}'
	start_recorded --idle-timeout 2s
	run ask true
	[ "$status" -eq 0 ]
	read -r code secs <"$T/curl"
	[ "$code" = 504 ]
	[ "$(jq -c . "$T/out")" = '{"type":"error","error":{"type":"api_error","message":"aibox-proxy: upstream sent no answer in 2 s"}}' ]
	# ended by the proxy's timeout, not curl's
	awk -v s="$secs" 'BEGIN { exit !(s >= 1.9 && s < 10) }'
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ failed localhost:3129 POST /v1/messages \(upstream sent no answer in 2 s\) status=504 model=claude-sonnet-4-5 input=0 output=1000 cache_write_5m=0 cache_write_1h=4227 cache_read=0 usd=0.040362 charged=max_tokens,prompt '
	stop_proxy
	# an answer that never came may still be billed: charged as cut, its prompt (131 bytes
	# + 4096) at the dearest input-like price with it (docs/budget.md)
	[ "$(jq -c '.usage | [.models[0].requests, .models[0].output, .nano_usd]' "$T/record.json")" = '[1,1000,40362000]' ]
}

@test "upstream: an API that resets mid-stream after its usage: the client sees a cut stream, the usage is charged" {
	# (the pause lets the proxy read it all: a reset drops what the kernel holds unread)
	jq -cn '{turns: [{cut: "reset", raw: [
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n", 0.5]}]}' >"$T/s.json"
	api "$(cat "$T/s.json")"
	start_recorded
	run ask true
	# curl sees the chunked stream end without its last chunk
	[ "$status" -eq 18 ]
	[ "$output" = "curl: (18) transfer closed with outstanding read data remaining" ]
	grep -q '"output_tokens":42' "$T/out"
	run ! grep -q message_stop "$T/out"
	run cat "$T/proxy.log"
	assert_line --regexp '^[^ ]+ failed localhost:3129 POST /v1/messages \(upstream (read failed|closed inside the response)\) status=200 model=claude-sonnet-4-5 input=10 output=42 cache_write_5m=0 cache_write_1h=0 cache_read=0 usd=0.000660 sent='
	run ! grep -q charged=max_tokens "$T/proxy.log"
	stop_proxy
	# 10 x 3 + 42 x 15 USD per million
	[ "$(jq -c '.usage | [.requests, .models[0].input, .models[0].output, .nano_usd]' "$T/record.json")" = '[1,10,42,660000]' ]
}

@test "upstream: while one API request hangs, other requests through the proxy are answered at once" {
	# turn 0 (no assistant message yet) hangs; turn 1 answers
	api '{"turns":[{"stall":60},{"text":"quick"}]}'
	start_recorded --idle-timeout 20s
	curl -sS -m 30 -x "$PROXY" -H 'content-type: application/json' --data-binary \
		'{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}' \
		-o "$T/hung" "http://127.0.0.1:3129/v1/messages" 2>"$T/hung.err" &
	HUNG=$!
	wait_until 5 test -e "$T/rec/0001.json"
	for i in 1 2 3; do
		run curl -sS -m 5 -x "$PROXY" -H 'content-type: application/json' --data-binary \
			'{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"again"}]}' \
			-w '%{time_total}\n' "http://127.0.0.1:3129/v1/messages"
		[ "$status" -eq 0 ]
		[[ "$output" == *'"text_delta", "text": "quick"'* ]]
		awk -v s="${lines[${#lines[@]} - 1]}" 'BEGIN { exit !(s < 1.5) }'
	done
	run curl -sS -m 5 -x "$PROXY" -o /dev/null -w '%{http_code}' "http://127.0.0.1:3129/api/hello"
	[ "$status" -eq 0 ]
	[ "$output" = 200 ]
	# the first one still hangs, its client still connected
	kill -0 "$HUNG"
	kill "$HUNG"
	wait "$HUNG" || true
}
