#!/usr/bin/env bats
# aibox-proxy counts what key forwarding spends (docs/budget.md): the usage
# the API reports in each answer, priced with share/prices, in the record
# (--report-fd) and proxy.log; caps per task (--budget-task) and per project
# and day (--budget-day with the ledger on --ledger-fd), refused in the API's
# own error shape.  Against the TLS fake API, no VM.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-tls
load lib-proxy
load lib-task # api

KEY=sk-ant-real-key-3006

setup() {
	common_setup
	make_test_ca "$T/ca"
	export AIBOX_TEST_KEY=$KEY
	export AIBOX_API_CA=$T/ca/ca.pem
}

teardown() {
	[ -z "${PID1:-}" ] || { kill -TERM "$PID1"; wait "$PID1" || true; }
	stop_proxy || true
	stop_fake_api
	common_teardown
}

# ask MODEL STREAM [PATH]: one main request (with tools, max_tokens 1000)
# through the proxy; the answer in $T/out
ask() {
	curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary \
		"{\"model\":\"$1\",\"max_tokens\":1000,\"stream\":$2,\"tools\":[{\"name\":\"Bash\"}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
		"http://127.0.0.1:3129${3:-/v1/messages?beta=true}" >"$T/out"
}

# usage JQ: the record's usage, through jq
usage() {
	jq -c ".usage | $1" "$T/record.json"
}

SONNET=claude-sonnet-4-5-20250929
# 1234 x 3 + 567 x 15 + 100 x 3.75 + 200 x 6 + 300 x 0.30 USD per million tokens
USAGE='{"input_tokens":1234,"output_tokens":567,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"cache_creation_input_tokens":300,"cache_read_input_tokens":300}'
NANO=13872000

@test "spend: a streamed answer's usage is counted exactly, by kind and model" {
	api "{\"turns\":[{\"text\":\"hello\",\"usage\":$USAGE}]}"
	start_recorded
	ask "$SONNET" true
	grep -q 'event: message_stop' "$T/out"
	stop_proxy
	[ "$(usage '.models | length')" = 1 ]
	[ "$(usage '.models[0] | [.model, .input, .output, .cache_write_5m, .cache_write_1h, .cache_read, .requests, .priced]')" = \
		"[\"$SONNET\",1234,567,100,200,300,1,true]" ]
	[ "$(usage '[.requests, .nano_usd, .usd, .uncounted, .skipped, .refused, .ended_by_cap]')" = \
		"[1,$NANO,0.013872,0,0,0,null]" ]
	run cat "$T/proxy.log"
	assert_line --regexp "^[^ ]+ allowed localhost:3129 POST /v1/messages\?beta=true status=200 model=$SONNET input=1234 output=567 cache_write_5m=100 cache_write_1h=200 cache_read=300 usd=0.013872 sent=[0-9]+ received=[0-9]+ duration=[0-9.]+s$"
	# the upstream got the answer unencoded, whatever the client asked for
	[ "$(jq -r '.headers["accept-encoding"]' "$T/rec/0001.json")" = identity ]
}

@test "spend: a non-streamed answer's usage is counted exactly; cache writes without the split count as 5 minutes" {
	api '{"turns":[{"text":"hello","usage":{"input_tokens":7,"output_tokens":9,"cache_creation_input_tokens":11,"cache_read_input_tokens":13}}]}'
	start_recorded
	ask "$SONNET" false
	[ "$(jq -r .usage.output_tokens "$T/out")" = 9 ]
	ask "$SONNET" false
	stop_proxy
	[ "$(usage '.models[0] | [.input, .output, .cache_write_5m, .cache_write_1h, .cache_read, .requests]')" = \
		"[14,18,22,0,26,2]" ]
	# (7 x 3 + 9 x 15 + 11 x 3.75 + 13 x 0.3) x 2 thousand nano-USD
	[ "$(usage .nano_usd)" = 402300 ]
}

@test "spend: a model not in the price table is charged at its top price, and says so" {
	api '{"usage":{"input_tokens":1000000,"output_tokens":1000000,"cache_creation_input_tokens":0,"cache_read_input_tokens":1000000}}'
	start_recorded
	ask mystery-model-9 true
	ask claude-haiku-4-5 true
	stop_proxy
	# the top of each column: 60 + 225 + 6 USD (Opus 4.6's fast mode over 200,000 tokens)
	[ "$(usage '[.models[] | select(.model == "mystery-model-9") | .priced, .usd]')" = '[false,291]' ]
	[ "$(usage '[.models[] | select(.model == "claude-haiku-4-5") | .priced, .usd]')" = '[true,6.1]' ]
}

@test "spend: count_tokens and other free endpoints cost nothing" {
	api '{}'
	start_recorded
	ask "$SONNET" false /v1/messages/count_tokens
	curl -sS -x "$PROXY" http://127.0.0.1:3129/api/hello >/dev/null
	stop_proxy
	[ "$(usage '[.requests, .nano_usd, (.models | length)]')" = '[0,0,0]' ]
}

@test "spend: a task cap lets the answer that crossed it through, then refuses in the API's error shape" {
	api "{\"usage\":$USAGE}"
	start_recorded --budget-task 0.01
	ask "$SONNET" true
	grep -q 'event: message_stop' "$T/out"
	run curl -sS -i -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","stream":true,"messages":[]}' \
		"http://127.0.0.1:3129/v1/messages?beta=true"
	assert_line --index 0 "$(printf 'HTTP/1.1 400 Bad Request\r')"
	assert_output --partial '{"type":"error","error":{"type":"invalid_request_error","message":"aibox: this task'"'"'s budget of 0.010000 USD is spent (0.013872 USD by aibox'"'"'s count); aibox-proxy refuses further API requests"}}'
	# free endpoints still pass
	curl -sS -f -x "$PROXY" http://127.0.0.1:3129/api/hello >/dev/null
	stop_proxy
	[ "$(ls "$T/rec" | wc -l)" = 2 ]
	[ "$(usage '[.requests, .refused, .ended_by_cap, .caps.task_usd]')" = '[1,1,"task",0.01]' ]
	grep -q ' refused localhost:3129 POST /v1/messages?beta=true (budget: the task cap of 0.010000 USD is reached) status=400' "$T/proxy.log"
}

@test "spend: two proxies of one project share the day's ledger without losing an update, and its cap" {
	api "{\"usage\":$USAGE}"
	: >"$T/ledger"
	exec 5<>"$T/ledger"
	start_recorded --ledger-fd 5
	P1=$PROXY_PORT PID1=$PROXY_PID
	PROXY_PID=
	# each proxy opens the ledger itself, as each task does: flock(2) locks are per open
	exec 5>&-
	exec 5<>"$T/ledger"
	start_proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 --log "$T/proxy2.log"
	exec 5>&-
	P2=$PROXY_PORT
	pids=()
	for i in $(seq 1 8); do
		for p in $P1 $P2; do
			curl -sS -f -x "http://127.0.0.1:$p" -H 'content-type: application/json' \
				--data-binary '{"model":"claude-sonnet-4-5","stream":true,"messages":[]}' \
				"http://127.0.0.1:3129/v1/messages" >/dev/null &
			pids+=($!)
		done
	done
	for j in "${pids[@]}"; do wait "$j"; done
	# 16 answers, each 13872000 nano-USD, all in the ledger's total
	[ "$(head -1 "$T/ledger")" = "$(printf '%020d' $((16 * NANO)))" ]
	# a third proxy whose day cap the ledger has reached refuses at once
	stop_proxy
	exec 5<>"$T/ledger"
	start_proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 --budget-day 0.2 --log "$T/proxy3.log"
	exec 5>&-
	run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
		"http://127.0.0.1:3129/v1/messages"
	assert_output '{"type":"error","error":{"type":"invalid_request_error","message":"aibox: the project'"'"'s daily budget of 0.200000 USD is spent (0.221952 USD today by aibox'"'"'s count); aibox-proxy refuses further API requests"}}'
	stop_proxy
	kill -TERM "$PID1"
	wait "$PID1"
	PID1=
	[ "$(jq .usage.nano_usd "$T/record.json")" = $((8 * NANO)) ]
	[ "$(jq .usage.day_nano_usd "$T/record.json")" -ge $((8 * NANO)) ]
}

@test "spend: the proxy adds to the ledger only under its lock: another task's update while it waits is kept" {
	api "{\"usage\":$USAGE}"
	printf '%020d\n' 0 >"$T/ledger"
	exec 5<>"$T/ledger"
	start_proxy --key-env AIBOX_TEST_KEY --ledger-fd 5
	exec 5>&-
	# another task holds the lock, and writes its own total before letting go,
	# once the proxy waits for the lock (its waiter's "->" line in /proc/locks)
	flock -x "$T/ledger" bash -c '. "$1/t/lib-base.bash"; touch "$2/held"
		wait_until 30 grep -qE -- "-> FLOCK .*:$3 " /proc/locks || exit 1
		printf "%020d\n" 1000 >"$2/ledger"' _ "$TOP" "$T" "$(stat -c %i "$T/ledger")" &
	holder=$!
	wait_until 10 test -e "$T/held"
	ask "$SONNET" true
	wait "$holder"
	[ "$(head -1 "$T/ledger")" = "$(printf '%020d' $((1000 + NANO)))" ]
}

@test "spend: hostile streams (huge events, broken JSON, usage going down, absurd numbers) cannot crash, stall or lower the count" {
	big=$(head -c 600000 /dev/zero | tr '\0' x)
	cat >"$T/script.json" <<-JSON
		{"turns": [{"raw": [
		  "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1,\"cache_read_input_tokens\":50}}}\n\n",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"$big\"}}\n\n",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40,\n\n",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":5,\"output_tokens\":30}}\r\n\r\n",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"cache_read_input_tokens\":-7,\"output_tokens\":60}}\r\r",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":99999999999999999999999}}\n\n",
		  "data: {\"type\":\"message_delta\",\"usage\":{\"cache_creation_input_tokens\":1e300}}\n\n",
		  "data: [1,2\n", "data: 3]\n\n",
		  "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		]}]}
	JSON
	api "$(cat "$T/script.json")"
	start_recorded
	ask claude-sonnet-4-5 true
	# the stream came through whole
	[ "$(wc -c <"$T/out")" -gt 600000 ]
	tail -c 40 "$T/out" | grep -q 'message_stop'
	# and the proxy still answers
	ask claude-sonnet-4-5 false
	stop_proxy
	# output the highest (60), and the second answer (its body not JSON, so
	# no final usage) its max_tokens (1000); the too-large integer (input),
	# the 1e300 cache write and the negative cache read count as
	# USAGE_TOKENS_MAX; the huge event, the broken JSON and the array are skipped
	[ "$(usage '.models[0] | [.input, .output, .cache_write_5m, .cache_read]')" = '[1000000000,1060,1000000000,1000000000]' ]
	# three events in the stream, then the second answer's body (not JSON)
	[ "$(usage '.skipped')" = 4 ]
}

@test "spend: events reach the client as they come, a huge one too, while the proxy counts them" {
	big=$(head -c 600000 /dev/zero | tr '\0' x)
	cat >"$T/script.json" <<-JSON
		{"turns": [{"raw": [
		  "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n",
		  "data: {\"type\":\"ping\",\"pad\":\"$big\"}\n\n",
		  4,
		  "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":30}}\n\n",
		  "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		]}]}
	JSON
	api "$(cat "$T/script.json")"
	start_recorded
	# the seconds at which the client had the first event, the huge one, and the end
	python3 - "$PROXY_PORT" >"$T/times" <<-'PY'
		import socket, sys, time, json
		body = json.dumps({"model": "claude-sonnet-4-5", "stream": True, "tools": [{"name": "Bash"}], "mcp_servers": [],
		                   "messages": [{"role": "user", "content": "hi"}]}).encode()
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
		s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		          b"Content-Type: application/json\r\nConnection: close\r\n"
		          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
		t0, got, first, huge = time.time(), b"", None, None
		while True:
		    b = s.recv(65536)
		    if not b:
		        break
		    got += b
		    if first is None and b"message_start" in got:
		        first = time.time() - t0
		    if huge is None and b"x" * 600000 + b'"}' in got:
		        huge = time.time() - t0
		print("%.2f %.2f %.2f" % (first, huge, time.time() - t0))
	PY
	read -r first huge end <"$T/times"
	# both before the upstream's 4 s pause ended, the end after it
	awk -v f="$first" -v h="$huge" -v e="$end" 'BEGIN { exit !(f < 3 && h < 3 && e >= 4) }'
	stop_proxy
	[ "$(usage '.models[0] | [.input, .output]')" = '[100,30]' ]
	[ "$(usage '.skipped')" = 1 ]
}

@test "spend: --budget-task, --budget-day, --ledger-fd and --prices are checked" {
	run aibox-proxy --budget-task 0
	[ "$status" -eq 2 ]
	assert_output --partial "invalid --budget-task '0'"
	run aibox-proxy --budget-task 1.0000001
	[ "$status" -eq 2 ]
	assert_output --partial "invalid --budget-task '1.0000001'"
	run aibox-proxy --budget-day 5
	[ "$status" -eq 2 ]
	assert_output --partial "--budget-day needs --ledger-fd"
	run aibox-proxy --budget-task 5
	[ "$status" -eq 2 ]
	assert_output --partial "need key forwarding"
	printf 'date 2025-01-01\nclaude-x 1 2 3\n' >"$T/prices"
	export AIBOX_API_UPSTREAM=https://localhost:1
	run aibox-proxy --key-env AIBOX_TEST_KEY --prices "$T/prices"
	[ "$status" -eq 2 ]
	assert_output --partial "line 2: want a model family and 5 prices"
	for l in 'garbage\n' '%020d\nxyz\n' '%020d\n%016x %020d %020d\n\n' '%020d\n%016X %020d %020d\n'; do
		# shellcheck disable=SC2059
		printf "$l" 0 255 1 1 >"$T/ledger"
		run aibox-proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 5<>"$T/ledger"
		[ "$status" -eq 2 ]
		assert_output --partial "cannot read the ledger"
	done
}

@test "spend: after a cap only the free paths pass, whatever the spelling of a paid one" {
	api "{\"usage\":$USAGE}"
	start_recorded --budget-task 0.01
	ask "$SONNET" true
	for p in /v1/messages /v1/Messages /v1/messages/ '/v1/%6Dessages?beta=true'; do
		run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
			"http://127.0.0.1:3129$p"
		[ "$status" -eq 0 ]
		assert_output --partial "budget of 0.010000 USD is spent"
	done
	for p in /v1/messages/batches /v1/chat/completions /v1/messages/Batches/ /v1/complete; do
		run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
			"http://127.0.0.1:3129$p"
		[ "$status" -eq 0 ]
		assert_output --partial "is not forwarded"
	done
	for p in '/v1/messages%3Fbeta=true' '/v1/messages%3fbeta=true' /v1/messages/x /v1/messagesx; do
		run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
			"http://127.0.0.1:3129$p"
		[ "$status" -eq 0 ]
		assert_output '{"type":"error","error":{"type":"permission_error","message":"aibox-proxy refused this request: path not forwarded to the API (the task'"'"'s proxy.log has it)"}}'
	done
	ask "$SONNET" false /v1/messages/count_tokens
	stop_proxy
	# the first answer and count_tokens, nothing else
	run jq -r .path "$T"/rec/*.json
	assert_output "$(printf '/v1/messages?beta=true\n/v1/messages/count_tokens')"
	[ "$(usage '[.requests, .refused]')" = '[1,4]' ]
}

@test "spend: a usage count out of range (2^63, negative, fractional, not a number) is charged as the largest" {
	for v in 9223372036854775808 -1 1.5 '"5"' true 1e30; do
		jq -cn --arg v "$v" '{turns: [{raw: [
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
			"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\($v)}}\n\n",
			"data: {\"type\":\"message_stop\"}\n\n"]}]}' >"$T/script.json"
		api "$(cat "$T/script.json")"
		start_recorded
		ask claude-haiku-4-5 true
		stop_proxy
		stop_fake_api
		rm -rf "$T/rec"
		# 10^9 output tokens at 5 USD per million, 10 input at 1
		[ "$(usage '[.models[0].output, .nano_usd, .skipped]')" = '[1000000000,5000000010000,0]' ] ||
			{ echo "output_tokens $v: $(usage .)" >&2; false; }
	done
}

# lines_in N PATTERN FILE: FILE has N lines with PATTERN (for wait_until)
lines_in() {
	[ "$(grep -c -- "$2" "$3")" = "$1" ]
}

# clients N MARK [MAX_TOKENS [MODEL [STREAM [MEMBERS [ENCODING]]]]]: N requests at once through the
# proxy, each closed with a reset as soon as MARK (a Python bytes literal's
# text; "" for never) has arrived; each answer's bytes in $T/got.N
clients() {
	python3 - "$T" "$PROXY_PORT" "$@" <<-'PY'
		import json, socket, struct, sys, threading
		tdir, port, n, mark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].encode()
		max_tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 32000
		model = sys.argv[6] if len(sys.argv) > 6 else "claude-sonnet-4-5"
		stream = sys.argv[7] != "false" if len(sys.argv) > 7 else True
		body = {"model": model, "max_tokens": max_tokens, "stream": stream,
		        "tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "hi"}]}
		# the 8th argument: members that replace or join the body's, as JSON text
		# spliced in before its last brace (so a key may be spelled with an escape);
		# the 9th: the body's encoding (utf-8)
		body = json.dumps(body)
		if len(sys.argv) > 8 and sys.argv[8]:
		    body = body[:-1] + ", " + sys.argv[8] + "}"
		body = body.encode(sys.argv[9] if len(sys.argv) > 9 else "utf-8")
		def one(i):
		    s = socket.create_connection(("127.0.0.1", port), timeout=60)
		    s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		              b"Content-Type: application/json\r\nConnection: close\r\n"
		              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
		    got = b""
		    while not (mark and mark in got):
		        b = s.recv(65536)
		        if not b:
		            break
		        got += b
		    # a reset, as a client killed mid-answer leaves it
		    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
		    s.close()
		    with open("%s/got.%d" % (tdir, i), "wb") as f:
		        f.write(got)
		ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
		for t in ts:
		    t.start()
		for t in ts:
		    t.join()
	PY
}

# stream_script OUTPUT PAUSE TEXT_EVENTS [CUT]: a raw streamed answer of
# claude-sonnet-4-5: message_start (input 10, output 1), TEXT_EVENTS text
# deltas of 10,000 bytes, content_block_stop, PAUSE seconds, message_delta
# with OUTPUT tokens, message_stop; with CUT, the upstream cuts it after
# the text instead
stream_script() {
	jq -cn --argjson out "$1" --argjson pause "$2" --argjson n "$3" --arg cut "${4:-}" '
		("x" * 10000) as $x |
		{turns: [{cut: ($cut != ""), raw: (
			["event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
			 "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"] +
			[range($n) | "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\($x)\"}}\n\n"] +
			["event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"] +
			(if $cut != "" then [] else
			[$pause,
			 "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":\($out)}}\n\n",
			 "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"] end))}]}'
}

@test "spend: a client that leaves after the text, before message_delta, is charged what the answer cost" {
	api "$(stream_script 100000 1 1)"
	start_recorded
	clients 10 content_block_stop
	# each client had the text, and none had the final usage
	for i in $(seq 0 9); do
		grep -q content_block_stop "$T/got.$i"
		run ! grep -q message_delta "$T/got.$i"
	done
	wait_until 30 lines_in 10 'its answer was read to the end' "$T/proxy.log"
	stop_proxy
	# 10 x (10 x 3 + 100,000 x 15) USD per million: about 15 USD, as the API bills
	[ "$(usage '[.models[0].output, .nano_usd, .requests]')" = '[1000000,15000300000,10]' ]
	run grep -c " allowed localhost:3129 POST /v1/messages (client went away: its answer was read to the end) status=200 model=claude-sonnet-4-5 input=10 output=100000 .* usd=1.500030 " "$T/proxy.log"
	[ "$status" -eq 0 ]
	[ "$output" = 10 ]
}

@test "spend: streams cut by their clients mid-content are charged their final usage" {
	api "$(stream_script 100000 0 180)"
	start_recorded
	# 20 answers of 1.8 MB of text each, every client gone after its first 20 KB
	clients 20 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
	for i in $(seq 0 19); do
		[ "$(wc -c <"$T/got.$i")" -lt 1000000 ]
	done
	# (an answer the kernel's buffers took whole before the reset is read to its end as well;
	# 36 MB drained through a sanitizer build takes over a minute on a loaded machine)
	wait_until 240 lines_in 20 ' status=200 model=claude-sonnet-4-5 input=10 output=100000 ' "$T/proxy.log"
	stop_proxy
	[ "$(usage '[.models[0].output, .nano_usd]')" = '[2000000,30000600000]' ]
}

@test "spend: an answer the upstream cuts is charged its request's max_tokens of output" {
	api "$(stream_script 100000 0 1 cut)"
	start_recorded
	clients 1 "" 5000
	grep -q content_block_stop "$T/got.0"
	run ! grep -q message_delta "$T/got.0"
	stop_proxy
	# message_start's input, and max_tokens of output
	[ "$(usage '[.models[0].input, .models[0].output, .nano_usd]')" = '[10,5000,75030000]' ]
	grep -Eq ' failed localhost:3129 POST /v1/messages \(upstream (read failed|closed inside the response)\) status=200 model=claude-sonnet-4-5 input=10 output=5000 .* usd=0.075030 charged=max_tokens ' "$T/proxy.log"
}

@test "spend: a non-streamed answer cut short is charged its request's max_tokens of output and its prompt" {
	jq -cn '{turns: [{cut: true, raw: ["{\"type\":\"message\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":\"text\",\"text\":\"hel"]}]}' >"$T/script.json"
	api "$(cat "$T/script.json")"
	start_recorded
	clients 1 "" 7000 claude-sonnet-4-5 false
	grep -q '"text":"hel' "$T/got.0"
	stop_proxy
	# No usage came at all: the prompt as its body bounds it (145 bytes + 4096) at the
	# dearest input-like price (the 1-hour cache write, 6 USD per million), 7000 output.
	[ "$(usage '[.models[0].model, .models[0].input, .models[0].cache_write_1h, .models[0].output, .nano_usd]')" = '["claude-sonnet-4-5",0,4241,7000,130446000]' ]
	grep -q ' cache_write_1h=4241 cache_read=0 usd=0.130446 charged=max_tokens,prompt ' "$T/proxy.log"
}

@test "spend: max_tokens is read from the body as the API reads it; an unreadable one charges the documented maximum" {
	api "$(stream_script 100000 0 1 cut)"
	start_recorded
	m='"model":"claude-sonnet-4-5","stream":true,"tools":[{"name":"Bash"}],"messages":[]'
	for b in "{$m,\"max_tokens\":5000}" "{$m}" "{$m,\"max\\u005ftokens\":5}" \
		"{\"max_tokens\":5, $m, \"max_tokens\" : 7000 }" "{$m,\"max_tokens\":\"5\"}" \
		"{$m,\"max_tokens\":5e3}" "{$m,\"metadata\":{\"max_tokens\":5}}" \
		"{$m,\"system\":\"\\\"max_tokens\\\":5\"}" "{\"max_tokens\":300,\"a\":[{\"b\":\"}\"}],$m}"; do
		run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary "$b" \
			http://127.0.0.1:3129/v1/messages
		[ "$status" -ne 0 ]
		assert_output --partial content_block_stop
	done
	stop_proxy
	# (the key spelled with an escape may spell one that unbounds the prompt: its input
	# is charged as well, charged=max_tokens,prompt)
	run sed -n 's/.* output=\([0-9]*\) .*charged=max_tokens\(,prompt\)\? .*/\1\2/p' "$T/proxy.log"
	[ "$status" -eq 0 ]
	assert_output "$(printf '5000\n128000\n128000,prompt\n7000\n128000\n128000\n128000\n128000\n300')"
}

@test "spend: a client gone away is read for at most --drain-max bytes and --drain-timeout, then charged its max_tokens" {
	api "$(stream_script 100000 0 180)"
	start_recorded --drain-max 100K
	clients 1 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx 32000
	wait_until 10 grep -q 'drain bound' "$T/proxy.log"
	stop_proxy
	grep -q ' failed localhost:3129 POST /v1/messages (client went away: its answer passed the drain bound in bytes) status=200 model=claude-sonnet-4-5 input=10 output=32000 .* charged=max_tokens ' "$T/proxy.log"
	stop_fake_api
	rm -rf "$T/rec"
	api "$(stream_script 100000 6 1)"
	start_recorded --drain-timeout 1s --log "$T/proxy2.log"
	clients 1 content_block_stop 32000
	wait_until 10 grep -q 'drain bound' "$T/proxy2.log"
	stop_proxy
	grep -q ' allowed localhost:3129 POST /v1/messages (client went away: its answer passed the drain bound in time) status=200 model=claude-sonnet-4-5 input=10 output=32000 .* charged=max_tokens ' "$T/proxy2.log"
}

@test "spend: 30 concurrent streams against a task cap: one answer passes, the rest wait for it and are refused" {
	# each answer 10 x 3 + 10,000 x 15 USD per million: 0.15003 USD
	api "$(stream_script 10000 1 1)"
	start_recorded --budget-task 0.05
	clients 30 ""
	stop_proxy
	[ "$(ls "$T/rec" | wc -l)" = 1 ]
	[ "$(usage '[.nano_usd, .requests, .refused, .ended_by_cap]')" = '[150030000,1,29,"task"]' ]
	run grep -l 'budget of 0.050000 USD is spent (0.150030 USD' "$T"/got.*
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" = 29 ]
}

# input_script IN_START IN_DELTA START_PAUSE DELTA_PAUSE: a streamed answer of
# claude-sonnet-4-5 whose message_start comes after START_PAUSE seconds with
# IN_START input tokens, and whose message_delta, DELTA_PAUSE seconds later,
# reports IN_DELTA input tokens (as a server tool's results add input) and 10
# of output
input_script() {
	jq -cn --argjson a "$1" --argjson b "$2" --argjson p1 "$3" --argjson p2 "$4" '
		{turns: [{raw: [$p1,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":\($a),\"output_tokens\":1}}}\n\n",
			$p2,
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":\($b),\"output_tokens\":10}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"]}]}'
}

# alone_under_cap SCRIPT NANO BODY...: for each BODY (members joining the request's),
# 10 requests at once against a task cap of 0.05 USD, the fake API answering SCRIPT,
# whose one answer costs NANO: one is forwarded, the others wait for it to end and
# are refused
alone_under_cap() {
	local i=0 script=$1 nano=$2 extra
	shift 2
	for extra in "$@"; do
		i=$((i + 1))
		mkdir "$T/$i"
		api "$script"
		T=$T/$i start_recorded --budget-task 0.05
		T=$T/$i clients 10 "" 100 claude-sonnet-4-5 true "$extra"
		T=$T/$i stop_proxy
		stop_fake_api
		[ "$(ls "$T/rec" | wc -l)" = 1 ] || fail "body $i ($extra): $(ls "$T/rec" | wc -l) forwarded"
		rm -rf "$T/rec"
		run jq -c '.usage | [.nano_usd, .requests, .refused]' "$T/$i/record.json"
		assert_output "[$nano,1,9]"
	done
}

@test "spend: hostile: a body that does not bound its prompt (by URL, an image, a server tool, MCP, an escape) runs alone under a cap" {
	# Each body is a few hundred bytes; the API counts 200,000 tokens of input for
	# each (a fetched PDF, a server tool's results: known only at message_delta).
	# 200,000 x 3 + 10 x 15 USD per million: 0.60015 USD an answer.
	alone_under_cap "$(input_script 10 200000 0 1)" 600150000 \
		'"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/big.pdf"}}]}]' \
		'"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]' \
		'"tools":[{"name":"Bash"},{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}]' \
		'"mcp_servers":[{"type":"url","url":"https://mcp.example/sse","name":"m"}]' \
		'"container":"container_1"' \
		'"messages":[{"role":"user","content":[{"type":"document","sour\u0063e":{"type":"url","url":"https://example.com/a.pdf"}}]}]' \
		'"messages":[{"role":"user","content":[{"type":"document","Source":{"type":"url","url":"https://example.com/a.pdf"}}]}]' \
		'"tools":[{"name":"Bash"},{"TYPE":"web_fetch_20250910","name":"web_fetch"}]' \
		'"messages":[{"role":"user","content":[{"type":"document","ſource":{"type":"url","url":"https://example.com/a.pdf"}}]}]' \
		"\"metadata\":$(printf '[%.0s' $(seq 70))$(printf ']%.0s' $(seq 70))"
}

@test "spend: hostile: many tiny requests at once are each reserved the API's own prompt beyond their bytes" {
	# 145-byte bodies whose prompt the API counts at 500 tokens (its tool use system
	# prompt); message_start after a second. 500 x 3 + 10 x 15 USD per million:
	# 0.00165 USD an answer, against a cap of 0.005: at most four answers (0.0066).
	api "$(input_script 500 500 1 0)"
	start_recorded --budget-task 0.005
	clients 30 "" 1
	stop_proxy
	run jq -c '.usage | [.nano_usd, .requests, .refused]' "$T/record.json"
	assert_output '[6600000,4,26]'
}

@test "spend: a non-streamed answer too large to read, for a body that does not bound its prompt, is charged the largest prompt" {
	# Over USAGE_BODY_MAX (4 MiB), its usage is not read: a server tool's results
	# can make the answer that large and its input anything up to a context window.
	jq -cn '("x" * (5 * 1024 * 1024)) as $x | {turns: [{raw: [
		"{\"type\":\"message\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":\"text\",\"text\":\"\($x)\"}],\"usage\":{\"input_tokens\":900000,\"output_tokens\":100}}"]}]}' >"$T/script.json"
	api "$(cat "$T/script.json")"
	start_recorded --budget-task 1
	clients 1 "" 100 claude-sonnet-4-5 false '"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]'
	[ "$(wc -c <"$T/got.0")" -gt 5000000 ]
	# 1,000,000 x 12 (the 1-hour cache write, at the price of a prompt over 200,000
	# tokens) + 100 x 22.50 USD per million; the cap is passed
	clients 1 "" 100
	stop_proxy
	run jq -c '.usage | [.nano_usd, .requests, .refused, .skipped]' "$T/record.json"
	assert_output '[12002250000,1,1,1]'
	grep -q ' usd=12.002250 charged=max_tokens,prompt ' "$T/proxy.log"
}

# api_seven_searches: the fake API answers one turn of claude-sonnet-4-5, 10
# tokens in and 10 out, whose message_delta reports 7 web searches
# (server_tool_use)
api_seven_searches() {
	api "$(jq -cn '{turns: [{raw: [
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":10,\"server_tool_use\":{\"web_search_requests\":7}}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"]}]}')"
}

@test "spend: web searches an answer reports are counted at 0.01 USD each, and reach a cap" {
	# message_delta reports 7 searches (server_tool_use): 10 x 3 + 10 x 15 USD per million
	# and 7 x 0.01 USD: 0.07018 USD, past a cap of 0.05
	api_seven_searches
	start_recorded --budget-task 0.05
	clients 1 "" 100 claude-sonnet-4-5 true '"tools":[{"type":"web_search_20250305","name":"web_search"}]'
	clients 1 "" 100
	stop_proxy
	run jq -c '.usage | [.models[0].web_searches, .nano_usd, .requests, .refused]' "$T/record.json"
	assert_output '[7,70180000,1,1]'
	grep -q ' cache_read=0 web_searches=7 usd=0.070180 ' "$T/proxy.log"
	grep -q 'budget of 0.050000 USD is spent (0.070180 USD' "$T/got.0"
}

@test "spend: a search is priced by the table's web-search line, which the user's file replaces" {
	api_seven_searches
	# 25.5 USD per 1,000: 7 x 0.0255 USD and the tokens' 0.00018
	mkdir -p "$AIBOX_HOME"
	printf 'date 2026-12-20\nweb-search 25.5\nclaude-other 1 1 1 1 1\n' >"$AIBOX_HOME/prices"
	start_recorded
	clients 1 "" 100 claude-sonnet-4-5 true '"tools":[{"type":"web_search_20250305","name":"web_search"}]'
	stop_proxy
	run jq -c '.usage | [.models[0].web_searches, .nano_usd]' "$T/record.json"
	assert_output '[7,178680000]'
	grep -q ' web_searches=7 usd=0.178680 ' "$T/proxy.log"
}

# sse_answer MODEL START DELTA: a streamed answer of MODEL whose message_start
# reports the usage START and whose message_delta reports DELTA (JSON objects)
sse_answer() {
	jq -cn --arg m "$1" --argjson a "$2" --argjson b "$3" '{turns: [{raw: [
		"event: message_start\ndata: \({type: "message_start", message: {model: $m, usage: $a}} | tojson)\n\n",
		"event: message_delta\ndata: \({type: "message_delta", delta: {stop_reason: "end_turn"}, usage: $b} | tojson)\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"]}]}'
}

# iterations_usage: the usage of an answer of claude-haiku-4-5 whose advisor
# (claude-fable-5-1) and a compaction ran inside it: the top level holds the
# executor's own tokens only, usage.iterations each inference
ITERATIONS_USAGE='{"input_tokens":10,"output_tokens":10,"iterations":[{"type":"message","input_tokens":5,"output_tokens":5},{"type":"advisor_message","model":"claude-fable-5-1","input_tokens":200000,"output_tokens":1000},{"type":"message","input_tokens":5,"output_tokens":5},{"type":"compaction","input_tokens":100000,"output_tokens":2000}]}'

@test "spend: the advisor's and compaction's inferences an answer reports in usage.iterations are counted, at their own model" {
	# executor 10 x 1 + 10 x 5; advisor 200,000 x 10 + 1,000 x 50; compaction (the
	# executor's model) 100,000 x 1 + 2,000 x 5 USD per million: 2.16006 USD
	api "$(sse_answer claude-haiku-4-5 '{"input_tokens":10,"output_tokens":1}' "$ITERATIONS_USAGE")"
	start_recorded
	clients 1 "" 100 claude-haiku-4-5 true '"tools":[{"type":"advisor_20260301","name":"advisor","model":"claude-fable-5-1"}]'
	stop_proxy
	run jq -c '.usage | [.nano_usd, ([.models[] | [.model, .input, .output]])]' "$T/record.json"
	assert_output '[2160060000,[["claude-haiku-4-5",100010,2010],["claude-fable-5-1",200000,1000]]]'
	grep -q ' model=claude-haiku-4-5 input=10 output=10 .* usd=0.000060 iterations_usd=2.160000 ' "$T/proxy.log"
	# and so in a non-streamed answer
	stop_fake_api
	rm -rf "$T/rec"
	api "$(jq -cn --argjson u "$ITERATIONS_USAGE" '{turns: [{raw: [{type: "message", model: "claude-haiku-4-5", content: [], usage: $u} | tojson]}]}')"
	start_recorded
	clients 1 "" 100 claude-haiku-4-5 false
	stop_proxy
	run jq -c '.usage.nano_usd' "$T/record.json"
	assert_output 2160060000
}

@test "spend: an answer's own inferences in usage.iterations count when they add up to more than its usage's top level" {
	# the top level under-reports them (seen beside an advisor's): 11,000 x 1 + 500 x 5
	# USD per million for the executor, 1,000 x 10 for the advisor
	u='{"input_tokens":10,"output_tokens":10,"iterations":[{"type":"message","input_tokens":5000,"output_tokens":300},{"type":"advisor_message","model":"claude-fable-5-1","input_tokens":1000,"output_tokens":0},{"type":"message","input_tokens":6000,"output_tokens":200}]}'
	api "$(jq -cn --argjson u "$u" '{turns: [{raw: [{type: "message", model: "claude-haiku-4-5", content: [], usage: $u} | tojson]}]}')"
	start_recorded
	clients 1 "" 100 claude-haiku-4-5 false
	stop_proxy
	run jq -c '.usage | [.nano_usd, ([.models[] | [.model, .input, .output]])]' "$T/record.json"
	assert_output '[23500000,[["claude-haiku-4-5",11000,500],["claude-fable-5-1",1000,0]]]'
}

@test "spend: the iterations past the first 15 of usage.iterations, reported twice, are counted once" {
	# 15 of the model's own (nothing in them), then two advisor inferences of 1,000 tokens
	# in each, added up under (other) at the table's top price (60 USD per million in):
	# 0.12 USD, though two message_delta events report them (each kind counts its highest)
	u=$(jq -cn '{input_tokens: 10, output_tokens: 10, iterations: ([range(15) | {type: "message", input_tokens: 0, output_tokens: 0}] + [range(2) | {type: "advisor_message", model: "claude-fable-5-1", input_tokens: 1000, output_tokens: 0}])}')
	api "$(jq -cn --argjson u "$u" '{turns: [{raw: [
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
		"event: message_delta\ndata: \({type: "message_delta", delta: {}, usage: $u} | tojson)\n\n",
		"event: message_delta\ndata: \({type: "message_delta", delta: {stop_reason: "end_turn"}, usage: $u} | tojson)\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"]}]}')"
	start_recorded
	clients 1 "" 100 claude-haiku-4-5 true
	stop_proxy
	run jq -c '.usage | [.nano_usd, ([.models[] | [.model, .input, .output]])]' "$T/record.json"
	assert_output '[120060000,[["claude-haiku-4-5",10,10],["(other)",2000,0]]]'
	grep -q ' model=claude-haiku-4-5 input=10 output=10 .* usd=0.000060 iterations_usd=0.120000 ' "$T/proxy.log"
}

@test "spend: a fast-mode request (speed other than standard) is priced by its model's fast row, else at the table's top price" {
	# 1,000,000 tokens in and 1,000,000 out each; fast mode is billed at a multiple of the
	# standard prices, and only the request's "speed" says it is asked for
	api '{"usage":{"input_tokens":1000000,"output_tokens":1000000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}'
	start_recorded
	clients 1 "" 100 claude-opus-5-5 true '"speed":"fast"'
	clients 1 "" 100 claude-opus-5-5 true '"speed":"standard"'
	clients 1 "" 100 claude-opus-5-5-20261101 true '"speed" : "fast"'
	clients 1 "" 100 claude-sonnet-4-5 true '"speed":"fast"'
	clients 1 "" 100 claude-sonnet-4-5 true '"sp\u0065ed":"fast"'
	clients 1 "" 100 claude-opus-4-6 true '"speed":"fast"'
	stop_proxy
	# claude-opus-5-5-fast: 8 + 40 USD, twice; claude-opus-5-5: 4 + 20; Sonnet 4.5 has no
	# fast row: the top price, 60 + 225, and again for the escaped key, which may spell
	# speed, at 1.1 times (it may spell inference_geo too); Opus 4.6's fast row over
	# 200,000 tokens of prompt: 60 + 225
	run jq -c '[.usage.models[] | [.model, .usd, .priced]]' "$T/record.json"
	assert_output '[["claude-opus-5-5-fast",48,true],["claude-opus-5-5",24,true],["claude-opus-5-5-fast-20261101",48,true],["claude-sonnet-4-5-fast",598.5,false],["claude-opus-4-6-fast",285,true]]'
	grep -q ' status=200 model=claude-opus-5-5-fast input=1000000 output=1000000 .* usd=48.000000 ' "$T/proxy.log"
}

@test "spend: Fable 5.2 is priced by its own row, and in fast mode by its fast row, not under it" {
	# 8 + 40 USD a million tokens each way, 16 + 80 fast (the pricing page of 2026-12)
	api '{"usage":{"input_tokens":1000000,"output_tokens":1000000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}'
	start_recorded
	clients 1 "" 100 claude-fable-5-2 true
	clients 1 "" 100 claude-fable-5-2 true '"speed":"fast"'
	stop_proxy
	run jq -c '[.usage.models[] | [.model, .usd, .priced]]' "$T/record.json"
	assert_output '[["claude-fable-5-2",48,true],["claude-fable-5-2-fast",96,true]]'
}

@test "spend: hostile: a body that is not UTF-8 JSON (UTF-16, which a JSON reader may take) is unreadable: priced as fast and US-only" {
	# Python's json.loads reads UTF-16 and UTF-32 bytes as well (the fake API reads
	# bodies so); the scanner cannot, so the body's "speed" counts as fast, and its
	# inference_geo, which it may have, as "us": (8 + 40) x 1.1 USD, twice
	api '{"usage":{"input_tokens":1000000,"output_tokens":1000000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}'
	start_recorded
	clients 1 "" 100 claude-opus-5-5 true '"speed":"fast"' utf-16
	clients 1 "" 100 claude-opus-5-5 true '"speed":"fast"' utf-32-le
	stop_proxy
	grep -q message_stop "$T/got.0"
	run jq -c '[.usage.models[] | [.model, .usd]]' "$T/record.json"
	assert_output '[["claude-opus-5-5-fast",105.6]]'
}

# two_proxies_race LEDGER1 LEDGER2 USER OPTS...: two proxies with OPTS, the first
# recorded, each with its day ledger (--ledger-fd) and, when USER is not "", the
# user's (--user-ledger-fd), each opened by the proxy's own open as each task does
# (flock(2) locks are per open); 10 requests at once through each, their answers in
# $T/got.N and $T/2/got.N; both stopped then
two_proxies_race() {
	local l1=$1 l2=$2 user=$3 uopt=()
	shift 3
	[ -z "$user" ] || uopt=(--user-ledger-fd 6)
	start_recorded --ledger-fd 5 "${uopt[@]}" "$@" 5<>"$l1" 6<>"${user:-/dev/null}"
	P1=$PROXY_PORT PID1=$PROXY_PID
	PROXY_PID=
	start_proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 "${uopt[@]}" "$@" --log "$T/proxy2.log" \
		5<>"$l2" 6<>"${user:-/dev/null}"
	P2=$PROXY_PORT
	PROXY_PORT=$P1 clients 10 "" &
	c1=$!
	mkdir "$T/2"
	T=$T/2 PROXY_PORT=$P2 clients 10 "" &
	c2=$!
	wait "$c1"
	wait "$c2"
	stop_proxy
	kill -TERM "$PID1"
	wait "$PID1"
	PID1=
}

@test "spend: two proxies on one day ledger, 20 concurrent requests: the day passes its cap by one answer at most" {
	api "$(stream_script 10000 1 1)"
	: >"$T/ledger"
	two_proxies_race "$T/ledger" "$T/ledger" "" --budget-day 0.05
	# one answer forwarded, the other 19 refused
	[ "$(ls "$T/rec" | wc -l)" = 1 ]
	[ "$(head -1 "$T/ledger")" = "$(printf '%020d' 150030000)" ]
	[ "$(cat "$T"/got.* "$T"/2/got.* | grep -c "daily budget of 0.050000 USD is spent")" = 19 ]
	# and no reservation is left in the ledger
	run tail -n +2 "$T/ledger"
	[ "$status" -eq 0 ]
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
}

@test "spend: the policy's daily cap holds across the proxies of several projects: 20 concurrent requests pass it by one answer at most" {
	# two projects (a ledger each), one user: the user's ledger and cap (--user-ledger-fd,
	# --budget-user), as a task and aibox run are given them under a policy's budget.day
	api "$(stream_script 10000 1 1)"
	: >"$T/ledger"
	: >"$T/ledger2"
	: >"$T/user"
	two_proxies_race "$T/ledger" "$T/ledger2" "$T/user" --budget-user 0.05
	# one answer forwarded, the other 19 refused, naming the policy's cap
	[ "$(ls "$T/rec" | wc -l)" = 1 ]
	[ "$(head -1 "$T/user")" = "$(printf '%020d' 150030000)" ]
	[ "$((10#$(head -1 "$T/ledger") + 10#$(head -1 "$T/ledger2")))" = 150030000 ]
	[ "$(cat "$T"/got.* "$T"/2/got.* | grep -c "your daily budget under the policy of 0.050000 USD is spent")" = 19 ]
	grep -q ' refused localhost:3129 POST /v1/messages (budget: the user cap of 0.050000 USD is reached) status=400' "$T/proxy.log" "$T/proxy2.log"
	[ "$(jq -c '.usage | [.caps.user_day_usd, .cap_user_nano, .user_nano_usd, .day_nano_usd >= 0]' "$T/record.json")" = '[0.05,50000000,150030000,true]' ]
	# no reservation is left in any ledger
	run tail -n +2 "$T/user" "$T/ledger" "$T/ledger2"
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
}

@test "spend: a request the user's ledger has no line for (64 proxies in flight) waits, reserving nothing in the project's, and starts when a line frees" {
	api "$(stream_script 10 0 1)"
	now=$(date +%s)
	{
		printf '%020d\n' 0
		for i in $(seq 1 64); do printf '%016x %020d %020d\n' "$i" 1 $((now + 600)); done
	} >"$T/user"
	: >"$T/ledger"
	start_recorded --ledger-fd 5 --user-ledger-fd 6 --budget-user 1 5<>"$T/ledger" 6<>"$T/user"
	clients 1 "" &
	c=$!
	sleep 3
	# it waits: nothing forwarded, no reservation written to the project's ledger (the
	# two are decided as one)
	[ "$(ls "$T/rec" 2>/dev/null | wc -l)" = 0 ]
	run tail -n +2 "$T/ledger"
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
	# one of the other proxies' requests ends: its line is free
	printf '%016x %020d %020d\n' 0 0 0 | dd of="$T/user" bs=1 seek=$((21 + 59 * 10)) conv=notrunc status=none
	wait "$c"
	grep -q message_stop "$T/got.0"
	stop_proxy
	[ "$(usage '[.requests, .refused]')" = '[1,0]' ]
}

# held_until_lapse LEDGER OPTS...: LEDGER with a reservation live for 4 s more and one
# lapsed; a proxy with OPTS, $T/ledger on fd 5 and $T/user on fd 6; its one request is
# held back until the live one lapsed (the lapsed one never held it), then passes
held_until_lapse() {
	local f=$1 start now end
	shift
	api "$(stream_script 10 0 1)"
	# start before now, which date rounds down: the live reservation lapses at now + 4,
	# more than 3 s after start whatever the second's fraction and the proxy's start-up took
	start=$(date +%s%N)
	now=$(date +%s)
	{
		printf '%020d\n' 0
		printf '%016x %020d %020d\n' 255 1000000000000 $((now + 4)) 254 1000000000000 $((now - 1))
	} >"$f"
	[ -e "$T/ledger" ] || : >"$T/ledger"
	[ -e "$T/user" ] || : >"$T/user"
	start_recorded "$@" 5<>"$T/ledger" 6<>"$T/user"
	clients 1 ""
	end=$(date +%s%N)
	grep -q message_stop "$T/got.0"
	[ $(((end - start) / 1000000)) -ge 3000 ]
	stop_proxy
	[ "$(usage '[.requests, .refused]')" = '[1,0]' ]
}

@test "spend: a reservation in the ledger holds other proxies back until it lapses (a proxy that died)" {
	held_until_lapse "$T/ledger" --ledger-fd 5 --budget-day 1
}

@test "spend: a reservation in the user's ledger holds the user's other proxies back until it lapses (a proxy of another project that died)" {
	held_until_lapse "$T/user" --ledger-fd 5 --user-ledger-fd 6 --budget-user 1
}

@test "spend: --budget-user needs --user-ledger-fd on a well-formed ledger, another file than --ledger-fd's; one that goes bad refuses" {
	export AIBOX_API_UPSTREAM=https://localhost:1
	run aibox-proxy --key-env AIBOX_TEST_KEY --budget-user 1
	[ "$status" -eq 2 ]
	assert_output --partial "--budget-user needs --user-ledger-fd"
	: >"$T/ledger"
	run aibox-proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 --user-ledger-fd 6 --budget-user 1 5<>"$T/ledger" 6<>"$T/ledger"
	[ "$status" -eq 2 ]
	assert_output --partial "--ledger-fd and --user-ledger-fd must be two different files"
	printf 'garbage\n' >"$T/user"
	run aibox-proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 --user-ledger-fd 6 --budget-user 1 5<>"$T/ledger" 6<>"$T/user"
	[ "$status" -eq 2 ]
	assert_output --partial "cannot read the user's ledger on --user-ledger-fd 6"
	# well-formed at the start, not reset when it goes bad: paid requests are refused
	unset AIBOX_API_UPSTREAM
	api '{"usage":{"input_tokens":10,"output_tokens":10}}'
	printf '%020d\n' 0 >"$T/user"
	start_recorded --ledger-fd 5 --user-ledger-fd 6 --budget-user 1 5<>"$T/ledger" 6<>"$T/user"
	printf 'junk\n' >"$T/user"
	run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
		"http://127.0.0.1:3129/v1/messages"
	assert_output --partial "so your daily budget under the policy of 1.000000 USD cannot be kept"
	stop_proxy
	[ "$(cat "$T/user")" = junk ]
	[ ! -e "$T/rec" ] || [ "$(ls "$T/rec" | wc -l)" = 0 ]
}

@test "spend: hostile: bodies whose answers run other inferences (compaction, an advisor) run alone under a cap" {
	# each answer's usage.iterations reports a compaction of 100,000 tokens in and 1,000
	# out beside its own 10 and 10 (Sonnet 4.5: 0.31518 USD in all), which no reservation
	# of a few hundred bytes covers
	alone_under_cap "{\"usage\":{\"input_tokens\":10,\"output_tokens\":10,\"iterations\":[{\"type\":\"message\",\"input_tokens\":10,\"output_tokens\":10},{\"type\":\"compaction\",\"input_tokens\":100000,\"output_tokens\":1000}]}}" 315180000 \
		'"context_management":{"edits":[{"type":"compact_20260112"}]}' \
		'"tools":[{"name":"Bash"},{"type":"advisor_20260301","name":"advisor","model":"claude-sonnet-4-5"}]' \
		'"context_management":{"edits":[{"type":"clear_thinking_20251015"},{"type":"compact_20260112"}]}' \
		'"context_management":{"edits":[{"TYPE":"compact_20260112"}]}' \
		'"context_management":{"edits":[{"type":"clear_thinking_20251015","Type":"compact_20260112"}]}' \
		'"context_management":{"edits":[{"type":"clear_thinking_2025101x"}]}' \
		'"context_management":{"edits":[{"type":"clear_thinking_"}]}' \
		'"context_management":{"edits":[{"type":"\u0063lear_thinking_20251015"}]}' \
		'"context_management":{"edits":[{"type":["clear_thinking_20251015"]}]}' \
		'"context_management":{"edits":["compact_20260112"]}' \
		'"context_management":{"edits":{"type":"compact_20260112"}}' \
		'"context_management":{"compaction":{}}' \
		'"context_management":"compact"' \
		'"messages":[{"role":"user","content":"hi"}],"metadata":{"context_management":{"edits":[]}}'
}

# together_under_cap SCRIPT EXTRA...: as alone_under_cap, but each body (with
# EXTRA) bounds its prompt: all 10 are reserved a little and forwarded at once,
# so SCRIPT's answers of a second or more end together, not one after another
together_under_cap() {
	local i=0 script=$1 extra took
	shift
	for extra in "$@"; do
		i=$((i + 1))
		mkdir "$T/$i"
		api "$script"
		T=$T/$i start_recorded --budget-task 0.05
		SECONDS=0
		T=$T/$i clients 10 "" 100 claude-sonnet-4-5 true "$extra"
		took=$SECONDS
		T=$T/$i stop_proxy
		stop_fake_api
		[ "$(ls "$T/rec" | wc -l)" = 10 ] || fail "body $i ($extra): $(ls "$T/rec" | wc -l) forwarded"
		[ "$took" -lt 6 ] || fail "body $i ($extra): the 10 answers took $took s: one after another"
		rm -rf "$T/rec"
	done
}

@test "spend: Claude Code's own context_management (edits that only clear thinking or tool uses) does not make a request run alone under a cap" {
	# Claude Code sends one in every request: were it read as a compaction, the
	# attempts of a group under a day cap would wait on one another's answers
	together_under_cap "$(input_script 10 10 0 1)" \
		'"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}' \
		'"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000},"keep":{"type":"tool_uses","value":3},"exclude_tools":["web_search"]}]}' \
		'"context_management":{"edits":[]}'
}

# models_usd MODEL EXTRA [MODEL EXTRA]...: one request of each MODEL, with the
# members EXTRA, one after the other through a new proxy; then the record's
# [model, usd] of each model
models_usd() {
	start_recorded
	while [ $# -ge 2 ]; do
		clients 1 "" 100 "$1" true "$2"
		shift 2
	done
	stop_proxy
	jq -c '[.usage.models[] | [.model, .usd]]' "$T/record.json"
}

# million_usage [FIELDS]: a usage of 1,000,000 tokens in and 1,000,000 out, with FIELDS
# (JSON members) beside them
million_usage() {
	echo "{\"input_tokens\":1000000,\"output_tokens\":1000000,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0${1:+,$1}}"
}

@test "spend: US-only inference asked for (an inference_geo other than global, in any spelling) is charged 1.1 times" {
	api "{\"usage\":$(million_usage)}"
	models_usd claude-opus-4-6 '"inference_geo":"us"' \
		claude-opus-4-7 '"inference_geo":"global"' \
		claude-opus-4-8 '"inference_geo":"\u0075s"' \
		claude-sonnet-4-6 '"inference_geo":"global","inference_geo":"eu"' \
		claude-opus-5 '"inference_geo":["us"]' \
		claude-sonnet-4-5 '"inference_geo":"us"' >"$T/usd"
	# 5 + 25 USD at 1.1 (every kind of token), but "global"; an unknown value or one that
	# cannot be read is charged as "us"; Sonnet 4.5's row says its US price is the standard
	# one (for this prompt of 1,000,000 tokens, its long-context price: 6 + 22.50)
	run cat "$T/usd"
	assert_output '[["claude-opus-4-6",33],["claude-opus-4-7",30],["claude-opus-4-8",33],["claude-sonnet-4-6",19.8],["claude-opus-5",33],["claude-sonnet-4-5",28.5]]'
}

@test "spend: US-only inference the answer's usage reports (a workspace's default) is charged 1.1 times, from the event that says so" {
	# message_start does not say where the answer ran, message_delta does: the tokens
	# counted before it are charged the difference then
	api "$(sse_answer claude-opus-4-6 '{"input_tokens":1000000,"output_tokens":1}' '{"output_tokens":1000000,"inference_geo":"us"}')"
	start_recorded
	clients 1 "" 100 claude-opus-4-6 true '"inference_geo":"global"'
	stop_proxy
	run jq -c '[.usage.models[] | [.model, .usd]]' "$T/record.json"
	assert_output '[["claude-opus-4-6",33]]'
	# and a whole body's usage, for a request that does not ask
	stop_fake_api
	rm -rf "$T/rec"
	api "{\"usage\":$(million_usage '"inference_geo":"us"')}"
	start_recorded --log "$T/proxy2.log"
	clients 1 "" 100 claude-opus-4-6 false
	stop_proxy
	run jq -c '[.usage.models[] | [.model, .usd]]' "$T/record.json"
	assert_output '[["claude-opus-4-6",33]]'
}

@test "spend: an answer the Priority Tier served (usage.service_tier other than standard) is charged at the table's top price" {
	api "{\"usage\":$(million_usage '"service_tier":"priority"')}"
	start_recorded
	clients 1 "" 100 claude-sonnet-4-6 true
	stop_proxy
	# its price per token is the capacity commitment's, which aibox cannot know: 60 + 225 USD;
	# the model is in the table (priced), the tier said apart
	run jq -c '[.usage.models[] | [.model, .usd, .priced, .priority]]' "$T/record.json"
	assert_output '[["claude-sonnet-4-6",285,true,true]]'
	stop_fake_api
	rm -rf "$T/rec"
	api "{\"usage\":$(million_usage '"service_tier":"standard"')}"
	start_recorded --log "$T/proxy2.log"
	clients 1 "" 100 claude-sonnet-4-6 true
	stop_proxy
	run jq -c '[.usage.models[] | [.model, .usd, .priced, .priority]]' "$T/record.json"
	assert_output '[["claude-sonnet-4-6",18,true,null]]'
}

@test "spend: once an answer came from the Priority Tier, requests in flight are reserved at the top price: a cap is passed by one answer" {
	# each answer 10 x 60 + 1,000 x 225 USD per million at the top price (0.2256 USD),
	# though the request names Sonnet 4.5 (0.015 USD of output at its own price)
	api "{\"usage\":{\"input_tokens\":10,\"output_tokens\":1000,\"service_tier\":\"priority\"}}"
	start_recorded --budget-task 0.5
	clients 1 "" 1000
	clients 20 "" 1000
	stop_proxy
	run jq -c '.usage | [.nano_usd <= 500000000 + 225600000, .requests + .refused]' "$T/record.json"
	assert_output '[true,21]'
}

@test "spend: a prompt over 200,000 tokens on Sonnet 4 or 4.5 (the 1M context beta a header asks for) is priced at the long-context prices" {
	# anthropic-beta: context-1m-2025-08-07 lets those models take a prompt of up to
	# 1,000,000 tokens, all of its tokens billed at 6 + 22.50 USD per million above
	# 200,000 (Opus and Sonnet 4.6 have the 1M window at their standard prices)
	api '{"usage":{"input_tokens":400000,"output_tokens":1000000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}'
	start_recorded
	clients 1 "" 100 claude-sonnet-4-5-20250929 true
	clients 1 "" 100 claude-sonnet-4 true
	clients 1 "" 100 claude-sonnet-4-6 true
	stop_proxy
	run jq -c '[.usage.models[] | [.model, .usd]]' "$T/record.json"
	assert_output '[["claude-sonnet-4-5-20250929",24.9],["claude-sonnet-4",24.9],["claude-sonnet-4-6",16.2]]'
}

@test "spend: hostile: a top-level key in another case, or with a letter a JSON reader may fold to ASCII, is unreadable: priced as fast and US-only" {
	# A JSON reader that matches keys without case (Go's encoding/json, with Unicode
	# folding: U+017F folds to s, U+212A to k) reads "SPEED" and "ſpeed" as speed
	api "{\"usage\":$(million_usage)}"
	models_usd claude-opus-5-5 '"SPEED":"fast"' claude-opus-5 '"ſpeed":"fast"' \
		claude-opus-4-8 '"Inference_Geo":"us"' >"$T/usd"
	# (8 + 40) x 1.1, (10 + 50) x 1.1, and Opus 4.8's fast mode, at the top price:
	# (60 + 225) x 1.1 USD
	run cat "$T/usd"
	assert_output '[["claude-opus-5-5-fast",52.8],["claude-opus-5-fast",66],["claude-opus-4-8-fast",313.5]]'
}

@test "spend: once an answer came from the Priority Tier, an answer whose usage was never read is charged at the top price" {
	# the first answer says priority; the second, over 4 MiB, is never read: its
	# output and prompt are charged as its reservation bounds them, at the price it
	# was reserved at: 1,000,000 x 120 (the top 1-hour cache write) + 100 x 225 USD
	# per million, on top of the first's 10 x 60 + 10 x 225
	jq -cn '("x" * (5 * 1024 * 1024)) as $x | {usage: {input_tokens: 10, output_tokens: 10, service_tier: "priority"}, turns: [{text: "a"}, {raw: [
		"{\"type\":\"message\",\"model\":\"claude-sonnet-4-6\",\"content\":[{\"type\":\"text\",\"text\":\"\($x)\"}],\"usage\":{\"input_tokens\":900000,\"output_tokens\":100,\"service_tier\":\"priority\"}}"]}]}' >"$T/script.json"
	api "$(cat "$T/script.json")"
	start_recorded
	# the second a turn later (the fake API's second turn), with a server tool
	for extra in '' '"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"},{"role":"user","content":"go on"}]'; do
		clients 1 "" 100 claude-sonnet-4-6 false "$extra"
	done
	stop_proxy
	[ "$(usage '[.nano_usd, .requests, .skipped]')" = '[120025350000,2,1]' ]
}

@test "spend: once one proxy's answer came from the Priority Tier, the other proxies of the day reserve at the top price: the day's cap is passed by one answer" {
	# each answer 10 x 60 + 1,000 x 225 USD per million at the top price (0.2256 USD),
	# a second after its request; the first proxy's answer says priority, and the second
	# proxy, whose 20 requests come at once, has to know it from the day's ledger
	api '{"delay":1,"usage":{"input_tokens":10,"output_tokens":1000,"service_tier":"priority"}}'
	: >"$T/ledger"
	exec 5<>"$T/ledger"
	start_proxy --key-env AIBOX_TEST_KEY --ledger-fd 5 --budget-day 0.5 --log "$T/proxy1.log"
	exec 5>&-
	P1=$PROXY_PORT PID1=$PROXY_PID
	PROXY_PID=
	clients 1 "" 1000
	grep -q message_stop "$T/got.0"
	exec 5<>"$T/ledger"
	start_recorded --ledger-fd 5 --budget-day 0.5
	exec 5>&-
	mkdir "$T/2"
	T=$T/2 clients 20 "" 1000
	stop_proxy
	# the day: at most the cap and one answer
	[ "$((10#$(head -1 "$T/ledger")))" -le $((500000000 + 225600000)) ] ||
		fail "the day's total is $(head -1 "$T/ledger") nano-USD"
	# the Priority Tier is a line of the ledger's reservations, of nothing, never lapsing
	# (so a proxy that knows only reservations reads it, and never takes its place)
	run tail -n +2 "$T/ledger"
	assert_line 'ffffffffffff0002 00000000000000000000 18446744073709551615'
	run grep -cvE '^[0-9a-f]{16} [0-9]{20} [0-9]{20}$' <(tail -n +2 "$T/ledger")
	assert_output 0
}

@test "spend: hostile: under a cap however large, a body that does not bound its prompt runs alone: its reservation bounds nothing" {
	# A cheap model's body naming a document by URL is reserved 10^9 input tokens at
	# Haiku 5.5's dearest input-like price (1,000 USD), under a cap of 1,500; but its
	# answer counts 10^9 tokens of each prompt kind, 2,175 USD (500 + 625 + 1,000 + 50
	# and 10 x 2.50 USD per million of output), a second after its request
	api '{"delay":1,"usage":{"input_tokens":1000000000,"cache_creation":{"ephemeral_5m_input_tokens":1000000000,"ephemeral_1h_input_tokens":1000000000},"cache_read_input_tokens":1000000000,"output_tokens":10}}'
	start_recorded --budget-task 1500
	clients 5 "" 100 claude-haiku-5-5 true '"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/big.pdf"}}]}]'
	stop_proxy
	# one forwarded, the others waited for it and were refused
	run jq -c '.usage | [.nano_usd, .requests, .refused]' "$T/record.json"
	assert_output '[2175000025000,1,4]'
}

@test "spend: hostile: a top-level key a JSON reader may match without its underscores and dashes (inferenceGeo, Inference-Geo) is unreadable: priced as fast and US-only" {
	# Go's encoding/json/v2, matching names without case, ignores '_' and '-' too
	# (unless told not to): "inferenceGeo" and "inference-geo" are inference_geo there.
	# Each: a model, the member, and what 1,000,000 tokens in and out cost: (8 + 40) x 1.1
	# and (10 + 50) x 1.1 in fast mode; Opus 4.6's fast mode over 200,000 tokens of prompt,
	# 60 + 225, at 1.1 as well
	api "{\"usage\":$(million_usage)}"
	while IFS='|' read -r model extra usd; do
		models_usd "$model" "$extra" >"$T/usd"
		[ "$(jq -c '.[0][1]' "$T/usd")" = "$usd" ] || fail "$extra: $(cat "$T/usd")"
	done <<-'CASES'
		claude-opus-5-5|"inferenceGeo":"us"|52.8
		claude-opus-5|"Inference-Geo":"us"|66
		claude-opus-4-6|"Speed":"fast","inference_geo":"global"|313.5
		claude-opus-5-5|"max_Tokens":100,"s-p-e-e-d":"standard"|52.8
	CASES
}

@test "spend: hostile: a key that does not bound the prompt, spelled without its underscores or with dashes (mcpServers, so_urce), runs alone under a cap" {
	# (at the top level such a key is one taken for a key the scanner reads: unreadable
	# whole, as the test above)
	alone_under_cap "$(input_script 10 200000 0 1)" 600150000 \
		'"metadata":{"mcpServers":[{"type":"url","url":"https://mcp.example/sse","name":"m"}]}' \
		'"messages":[{"role":"user","content":[{"type":"document","so_urce":{"type":"url","url":"https://example.com/big.pdf"}}]}]' \
		'"tools":[{"name":"Bash"},{"ty-pe":"web_fetch_20250910","name":"web_fetch"}]' \
		'"metadata":{"Context-Management":{"edits":[{"type":"compact_20260112"}]}}' \
		'"context_management":{"edits":[{"Ty_pe":"compact_20260112"}]}'
}

@test "spend: a streamed answer cut after message_start, for a body that does not bound its prompt, is charged the largest prompt" {
	# A server tool's results add input as the answer goes, which only message_delta
	# reports: message_start's input (10) bounds nothing
	api "$(stream_script 100000 0 1 cut)"
	start_recorded
	clients 1 "" 5000 claude-sonnet-4-5 true '"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]'
	grep -q content_block_stop "$T/got.0"
	stop_proxy
	# 10 input and 1,000,000 of the 1-hour cache write at the prices of a prompt over
	# 200,000 tokens (6 and 12 USD per million), 5000 output at 22.50
	[ "$(usage '[.models[0].input, .models[0].cache_write_1h, .models[0].output, .nano_usd]')" = '[10,1000000,5000,12112560000]' ]
	grep -Eq ' status=200 model=claude-sonnet-4-5 input=10 output=5000 .* usd=12.112560 charged=max_tokens,prompt ' "$T/proxy.log"
}

# stalled PORT OUT BODY...: a paid request on PORT whose head says a body of 1000
# bytes (or $STALL_HEAD), then BODY's pieces (printf %b) each a second apart, then
# nothing; what came back (up to 30 s) in OUT, and the seconds it took on its last line
stalled() {
	python3 - "$@" <<-'PY'
		import codecs, os, socket, sys, time
		port, out, pieces = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
		head = os.environ.get("STALL_HEAD", "Content-Length: 1000").encode()
		s = socket.create_connection(("127.0.0.1", port), timeout=30)
		start = time.time()
		s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		          b"Content-Type: application/json\r\n%s\r\n\r\n" % head)
		for p in pieces:
		    time.sleep(1)
		    try:
		        s.sendall(codecs.escape_decode(p.encode())[0])
		    except OSError:
		        break
		got = b""
		try:
		    while True:
		        b = s.recv(65536)
		        if not b:
		            break
		        got += b
		except (socket.timeout, OSError):
		    pass
		with open(out, "wb") as f:
		    f.write(got + b"\n%d\n" % int(time.time() - start))
	PY
}

# two_on_ledger OPTS...: two proxies with OPTS on $T/ledger (fd 5) and $T/user (fd 6),
# the first recorded ($P1, $PID1), the second logging to $T/proxy2.log, waiting 20 s
# at most ($P2)
two_on_ledger() {
	: >"$T/ledger"
	: >"$T/user"
	start_recorded "$@" 5<>"$T/ledger" 6<>"$T/user"
	P1=$PROXY_PORT PID1=$PROXY_PID
	PROXY_PID=
	start_proxy --key-env AIBOX_TEST_KEY --idle-timeout 20s --log "$T/proxy2.log" "$@" \
		5<>"$T/ledger" 6<>"$T/user"
	P2=$PROXY_PORT
}

# stall_beside PIECES...: on two_on_ledger's proxies, a request on the first whose body
# stalls (stalled PIECES...) and, 2 s later, one on the second, which is answered within
# 10 s; the stalled one gets its 408 (in $T/stalled) and proxy.log says why
stall_beside() {
	local s start end
	stalled "$P1" "$T/stalled" "$@" &
	s=$!
	sleep 2
	start=$(date +%s)
	clients 1 ""
	end=$(date +%s)
	grep -q message_stop "$T/got.0"
	[ $((end - start)) -le 10 ]
	wait "$s"
	run cat "$T/stalled"
	assert_line "$(printf 'HTTP/1.1 408 Request Timeout\r')"
	assert_output --partial "aibox-proxy refused this request: budget: the request body stalled 5 s in all"
	[ "${lines[-1]}" -le 10 ]
	grep -q ' refused localhost:3129 POST /v1/messages (budget: the request body stalled 5 s in all) status=408' "$T/proxy.log"
}

@test "spend: hostile: a paid request's body stalled mid-way holds the other proxies of the day back a few seconds at most, then is refused" {
	api "$(stream_script 10 0 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	stall_beside '{"model":'
	# its reservation is gone from the ledger
	run tail -n +2 "$T/ledger"
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
}

@test "spend: hostile: a paid request's body trickled a byte a second, each gap under the bound, is refused once its gaps add up to 5 s" {
	api "$(stream_script 10 0 1)"
	two_on_ledger --ledger-fd 5 --user-ledger-fd 6 --budget-user 1
	stall_beside '{' '"' 'm' 'o' 'd' 'e' 'l' '"' ':' '"' 'x' '"' ',' '"'
	run tail -n +2 "$T/user" "$T/ledger"
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
}

@test "spend: under a task cap alone a paid body sent slowly is waited for: it holds back no other proxy" {
	api '{"usage":{"input_tokens":10,"output_tokens":10}}'
	start_recorded --budget-task 1
	# 27 bytes in 7 pieces a second apart: 7 s of waiting, past the day caps' 5 s
	STALL_HEAD=$'Content-Length: 27\r\nConnection: close' stalled "$PROXY_PORT" "$T/slow" '{"model"' ':"m",' '"mess' 'ages"' ':' '[' ']}'
	run cat "$T/slow"
	assert_line "$(printf 'HTTP/1.1 200 OK\r')"
	refute_output --partial "stalled"
}

@test "spend: a day ledger that cannot be read is named in proxy.log, not taken for a cap reached" {
	api '{"usage":{"input_tokens":10,"output_tokens":10}}'
	printf '%020d\n' 0 >"$T/ledger"
	start_recorded --ledger-fd 5 --budget-day 1 5<>"$T/ledger"
	printf 'junk\n' >"$T/ledger"
	run curl -sS -x "$PROXY" -H 'content-type: application/json' --data-binary '{"model":"m","messages":[]}' \
		"http://127.0.0.1:3129/v1/messages"
	assert_output --partial "the project's ledger of today's spend cannot be read"
	stop_proxy
	run grep ' refused localhost:3129 POST /v1/messages ' "$T/proxy.log"
	assert_output --regexp "\(budget: the ledger of today's spend cannot be read \([^)]+\): the day cap of 1.000000 USD cannot be kept\) status=400"
	refute_output --partial "is reached"
}

@test "spend: hostile: a chunked paid body stalled in a chunk-size line, after Expect: 100-continue, is refused at the same bound" {
	api "$(stream_script 10 0 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	STALL_HEAD=$'Transfer-Encoding: chunked\r\nExpect: 100-continue' stall_beside '5\r\n{"mod\r\n' '3'
	grep -q '^HTTP/1.1 100 Continue' "$T/stalled"
}

@test "spend: hostile: a client that stops reading its paid answer holds the other proxies of the day back seconds, not the idle timeout; the answer is still counted" {
	# an answer of 30 MB, more than the sockets between hold, to a body that does not
	# bound its prompt (MCP servers): it runs alone
	api "$(stream_script 10 0 3000)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	stop_proxy
	start_proxy --key-env AIBOX_TEST_KEY --idle-timeout 40s --log "$T/proxy2.log" \
		--ledger-fd 5 --budget-day 1 5<>"$T/ledger"
	P2=$PROXY_PORT
	python3 - "$P1" <<-'PY' &
		import json, socket, sys, time
		body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True, "tools": [{"name": "Bash"}], "mcp_servers": [],
		                   "messages": [{"role": "user", "content": "hi"}]}).encode()
		s = socket.socket()
		s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
		s.connect(("127.0.0.1", int(sys.argv[1])))
		s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
		time.sleep(45)
	PY
	s=$!
	sleep 2
	start=$(date +%s)
	PROXY_PORT=$P2 clients 1 ""
	end=$(date +%s)
	kill "$s"
	wait "$s" || true
	grep -q message_stop "$T/got.0"
	[ $((end - start)) -le 25 ]
	kill -TERM "$PID1"
	wait "$PID1"
	PID1=
	# the unread answer was read to its end and counted
	grep -q ' allowed localhost:3129 POST /v1/messages (budget: the client did not read its answer for 10 s in all; it was read to the end) status=200 model=claude-sonnet-4-5 input=10 output=10 ' "$T/proxy.log"
}

@test "spend: hostile: paid requests stalled one after the other, each refused at the bound, do not starve the other proxies of the day" {
	api "$(stream_script 10 0 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	# a new stalled request as soon as the last is refused, for 25 s
	python3 - "$P1" <<-'PY' &
		import socket, sys, time
		end = time.time() + 25
		while time.time() < end:
		    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
		    s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		              b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		    while s.recv(65536):
		        pass
		    s.close()
	PY
	s=$!
	sleep 2
	start=$(date +%s)
	PROXY_PORT=$P2 clients 1 ""
	end=$(date +%s)
	kill "$s" 2>/dev/null || true
	wait "$s" || true
	grep -q message_stop "$T/got.0"
	[ $((end - start)) -le 15 ]
}

# answered_beside PID SECONDS: 2 s into the background job PID (requests on two_on_ledger's
# first proxy), one request on its second, answered within SECONDS ($start, $end: when it
# was sent and answered); then PID is waited for
answered_beside() {
	sleep 2
	start=$(date +%s)
	PROXY_PORT=$P2 clients 1 ""
	end=$(date +%s)
	wait "$1"
	grep -q message_stop "$T/got.0"
	[ $((end - start)) -le "$2" ]
}

@test "spend: hostile: unbounded requests back to back on one proxy do not starve another proxy's request under the day's cap" {
	# answers of 0.3 s, each to a body that does not bound its prompt (MCP servers): each
	# runs alone, and with three sent at once the next starts the moment the last ends
	api "$(stream_script 10 0.3 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	python3 - "$P1" "$T/a.times" <<-'PY' &
		import json, socket, sys, threading, time
		body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": True, "mcp_servers": [],
		                   "messages": [{"role": "user", "content": "hi"}]}).encode()
		end = time.time() + 20
		out = open(sys.argv[2], "w")
		def loop():
		    while time.time() < end:
		        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
		        s.sendall(b"POST http://127.0.0.1:3129/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\n"
		                  b"Content-Type: application/json\r\nConnection: close\r\n"
		                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
		        got = b""
		        while True:
		            b = s.recv(65536)
		            if not b:
		                break
		            got += b
		        s.close()
		        if b"message_stop" in got:
		            print(int(time.time()), file=out, flush=True)
		# three at once: one runs, the other two wait in the proxy for its end
		ts = [threading.Thread(target=loop) for _ in range(3)]
		for t in ts:
		    t.start()
		for t in ts:
		    t.join()
	PY
	answered_beside $! 6
	# and the first proxy's requests went on, before it and after
	[ "$(awk -v t="$start" '$1 < t' "$T/a.times" | wc -l)" -ge 2 ]
	[ "$(awk -v t="$end" '$1 > t + 1' "$T/a.times" | wc -l)" -ge 2 ]
}

@test "spend: hostile: unbounded requests queued at once on one proxy take turns with another proxy's request, not all before it" {
	# 40 requests at once, each to a body that does not bound its prompt (MCP servers),
	# answered in 0.3 s: run alone one after the other they take 12 s and more
	api "$(stream_script 10 0.3 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	mkdir "$T/a"
	T=$T/a PROXY_PORT=$P1 clients 40 "" 100 claude-sonnet-4-5 true '"mcp_servers": []' &
	answered_beside $! 5
	# the first proxy's requests were all answered, some after it
	[ "$(grep -l message_stop "$T"/a/got.* | wc -l)" = 40 ]
}

@test "spend: a waiting line whose proxy died holds the other proxies' requests back until it lapses, 5 s at most" {
	api "$(stream_script 10 0 1)"
	start=$(date +%s%N)
	now=$(date +%s)
	# an older waiter's line (fff, then when it began to wait in ms, then its proxy's 2
	# digits), written now and never again: it lapses in 4 to 5 s
	{
		printf '%020d\n' 0
		printf '%016x %020d %020d\n' $(((0xfff << 52) | ((now - 10) * 1000) << 8 | 7)) 0 $((now + 5))
	} >"$T/ledger"
	start_recorded --ledger-fd 5 --budget-day 1 5<>"$T/ledger"
	# a request, reserved as unbounded until its body is read, would make it wait
	clients 1 ""
	end=$(date +%s%N)
	grep -q message_stop "$T/got.0"
	[ $(((end - start) / 1000000)) -ge 3000 ]
	[ $(((end - start) / 1000000)) -le 7000 ]
	stop_proxy
	[ "$(usage '[.requests, .refused]')" = '[1,0]' ]
}

@test "spend: 80 requests in flight across two proxies under the day's cap all start: the ledger holds a line per proxy, not per request" {
	# each answer held open 2 s (the fake API's delay), a small one, under a cap of 100 USD
	api '{"delay":2,"usage":{"input_tokens":10,"output_tokens":10}}'
	two_on_ledger --ledger-fd 5 --user-ledger-fd 6 --budget-user 100
	mkdir "$T/a"
	start=$(date +%s)
	T=$T/a PROXY_PORT=$P1 clients 40 "" 100 claude-sonnet-4-5 false &
	a=$!
	PROXY_PORT=$P2 clients 40 "" 100 claude-sonnet-4-5 false
	wait "$a"
	[ "$(grep -l '^HTTP/1.1 200 OK' "$T"/got.* "$T"/a/got.* | wc -l)" = 80 ]
	# side by side, not one after the other
	[ $(($(date +%s) - start)) -le 10 ]
	run tail -n +2 "$T/user" "$T/ledger"
	refute_output --regexp '^[0-9a-f]{16} 0*[1-9]'
}

@test "spend: hostile: a request whose body never comes, queued behind its proxy's request that ran alone, does not take an older waiter's turn" {
	# answers of 3 s; the first proxy's request runs alone (MCP servers)
	api "$(stream_script 10 3 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	mkdir "$T/a"
	T=$T/a PROXY_PORT=$P1 clients 1 "" 100 claude-sonnet-4-5 true '"mcp_servers": []' &
	a=$!
	sleep 0.5
	# then a request on the same proxy whose body stops after its first byte
	stalled "$P1" "$T/stalled" '{' &
	s=$!
	sleep 0.5
	start=$(date +%s%N)
	PROXY_PORT=$P2 clients 1 ""
	end=$(date +%s%N)
	wait "$a"
	wait "$s"
	grep -q message_stop "$T/got.0"
	grep -q message_stop "$T/a/got.0"
	# it starts when the lone request ends, not after the stalled body's 5 s and pause too
	[ $(((end - start) / 1000000)) -le 8000 ]
	grep -q '^HTTP/1.1 408 Request Timeout' "$T/stalled"
}

@test "spend: hostile: bodies sent slowly one after the other on one proxy take turns with another proxy's request" {
	api "$(stream_script 10 0 1)"
	two_on_ledger --ledger-fd 5 --budget-day 1
	body='{"model":"m","max_tokens":10,"messages":[]}'
	# five requests at once, each body sent in 3 s (under the 5 s bound), each 3 s after the
	# last one's began: each runs alone while its body comes
	slow=()
	for i in 0 1 2 3 4; do
		wait_pieces=() # an empty piece: a second more before the body
		for _ in $(seq $((3 * i))); do wait_pieces+=(''); done
		STALL_HEAD="Content-Length: ${#body}" stalled "$P1" "$T/slow.$i" "${wait_pieces[@]}" \
			'{"model":"m",' '"max_tokens":10,' '"messages":[]}' &
		slow+=($!)
	done
	sleep 0.5
	start=$(date +%s%N)
	PROXY_PORT=$P2 clients 1 ""
	end=$(date +%s%N)
	wait "${slow[@]}"
	grep -q message_stop "$T/got.0"
	[ $(((end - start) / 1000000)) -le 7000 ]
	# the first proxy's went on (which waits for which there is not said: a body whose
	# wait passed its schedule's is refused at the bound)
	[ "$(grep -l '^HTTP/1.1 200 OK' "$T"/slow.* | wc -l)" -ge 1 ]
}
