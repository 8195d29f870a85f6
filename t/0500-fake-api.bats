#!/usr/bin/env bats
# The scripted fake Messages API (t/fake-api) that the task tests drive Claude
# Code with: first the fake on its own over plain HTTP and TLS, then the real
# Claude Code CLI against it.
load lib-common
load lib-claude
load lib-tls

teardown() {
	stop_fake_api
	common_teardown
}

two_turns() {
	cat >"$T/script.json" <<-'JSON'
		{"turns": [
		  {"text": "Creating the file.",
		   "tool_use": {"name": "Bash", "input": {"command": "echo made-by-claude > proof.txt"}}},
		  {"text": "The file proof.txt is there."}
		 ],
		 "require_key": "sk-test"}
	JSON
}

@test "fake-api: streams a scripted tool_use turn, then text, by assistant count" {
	two_turns
	start_fake_api "$T/script.json"
	req='{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}'
	run curl -sS -H 'x-api-key: sk-test' -H 'content-type: application/json' \
		--data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages?beta=true"
	assert_success
	assert_line 'event: message_start'
	assert_line --partial '"type": "input_json_delta"'
	assert_line --partial '"stop_reason": "tool_use"'
	assert_line 'event: message_stop'
	# the JSON pieces of the tool input put back together
	input=$(grep '^data: .*input_json_delta' <<<"$output" | sed 's/^data: //' |
		jq -j '.delta.partial_json')
	[ "$(jq -r .command <<<"$input")" = "echo made-by-claude > proof.txt" ]

	req='{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"user","content":"y"}]}'
	run curl -sS -H 'x-api-key: sk-test' --data-binary "$req" \
		"http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_success
	[ "$(jq -r '.content[0].text' <<<"$output")" = "The file proof.txt is there." ]
	[ "$(jq -r '.stop_reason' <<<"$output")" = "end_turn" ]

	# past the last turn: done; a side request (no tools): a short text
	req='{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"assistant","content":"1"},{"role":"assistant","content":"2"}]}'
	run curl -sS -H 'x-api-key: sk-test' --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	[ "$(jq -r '.content[0].text' <<<"$output")" = "done" ]
	req='{"model":"m","messages":[{"role":"user","content":"title?"}]}'
	run curl -sS -H 'x-api-key: sk-test' --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	[ "$(jq -r '.content[0].text' <<<"$output")" = "Fake title" ]
}

@test "fake-api: keep-alive, chunked request bodies, the key rule, the record" {
	two_turns
	start_fake_api "$T/script.json"
	req='{"model":"m","messages":[]}'
	# two requests on one connection, the first with a chunked body
	run curl -sS -v -H 'x-api-key: sk-test' -H 'Transfer-Encoding: chunked' \
		--data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages" \
		--next -H 'x-api-key: sk-test' --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_success
	assert_output --partial 'Re-using existing connection'
	[ "$(grep -c '"Fake title"' <<<"$output")" = 2 ]

	run curl -sS -o /dev/null -w '%{http_code}' -H 'x-api-key: sk-wrong' \
		--data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_output 401
	run curl -sS -o /dev/null -w '%{http_code}' --data-binary "$req" \
		"http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_output 401
	run curl -sS -w ' %{http_code}' "http://127.0.0.1:$FAKE_API_PORT/api/hello"
	assert_output '{} 200'
	run curl -sS -o /dev/null -w '%{http_code}' -H 'x-api-key: sk-test' \
		"http://127.0.0.1:$FAKE_API_PORT/v1/nothing"
	assert_output 404

	# the record: numbered, with method, path, lowercased headers and body
	[ "$(jq -r .body.model "$T/rec/0001.json")" = m ]
	[ "$(jq -r '.headers["transfer-encoding"]' "$T/rec/0001.json")" = chunked ]
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0003.json")" = sk-wrong ]
	[ "$(jq -r '.headers["x-api-key"]' "$T/rec/0004.json")" = null ]
	[ "$(jq -r .path "$T/rec/0005.json")" = /api/hello ]
	[ "$(jq -r .method "$T/rec/0005.json")" = GET ]
	assert_file_not_exists "$T/rec/0007.json"
}

@test "fake-api: serves HTTPS with a test CA's certificate, on IPv4 and IPv6" {
	make_test_ca "$T/ca"
	run openssl verify -CAfile "$T/ca/ca.pem" "$T/ca/server.pem"
	assert_success
	echo '{"turns": []}' >"$T/script.json"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	run curl -sS --cacert "$T/ca/ca.pem" "https://127.0.0.1:$FAKE_API_PORT/api/hello"
	assert_success
	assert_output '{}'
	run curl -sS --cacert "$T/ca/ca.pem" "https://localhost:$FAKE_API_PORT/api/hello"
	assert_output '{}'
	# a client that does not trust the CA is refused, and the server lives on
	run curl -sS "https://127.0.0.1:$FAKE_API_PORT/api/hello"
	assert_failure
	stop_fake_api
	if ! ip -6 addr show lo 2>/dev/null | grep -q '::1'; then
		return 0
	fi
	rm -f "$T/fake-api.port"
	"$TOP/t/fake-api" --listen '[::1]:0' --ready-file "$T/fake-api.port" \
		--tls "$T/ca/server.pem" "$T/ca/server.key" 2>"$T/fake-api.log" &
	FAKE_API_PID=$!
	wait_until 10 file_or_gone "$T/fake-api.port" "$FAKE_API_PID"
	run curl -sS --cacert "$T/ca/ca.pem" "https://[::1]:$(cat "$T/fake-api.port")/api/hello"
	assert_output '{}'
}

@test "fake-api: a bad script is refused with exit 2" {
	echo '{"turns": [{"nothing": 1}]}' >"$T/bad.json"
	run "$TOP/t/fake-api" --script "$T/bad.json"
	[ "$status" -eq 2 ]
	assert_output --partial "turn 0 has no text, tool_use, stall, error or raw"
	echo '{"delay": -1}' >"$T/bad.json"
	run "$TOP/t/fake-api" --script "$T/bad.json"
	[ "$status" -eq 2 ]
	assert_output --partial "delay must be a number of seconds from 0 to 600"
	echo '{"turns": [{"text": "x", "wait_file": 1}]}' >"$T/bad.json"
	run "$TOP/t/fake-api" --script "$T/bad.json"
	[ "$status" -eq 2 ]
	assert_output --partial "turn 0: wait_file must be a path"
	run "$TOP/t/fake-api" --help
	assert_success
	assert_output --partial "--ready-file"
}

@test "fake-api: real Claude Code runs a scripted Bash tool call and a text turn" {
	need_claude
	two_turns
	start_fake_api "$T/script.json"
	mkdir "$T/work"
	cd "$T/work"
	status=0
	run_claude --dangerously-skip-permissions "make the proof file" >"$T/out.jsonl" 2>"$T/err" ||
		status=$?
	cat "$T/err" "$T/fake-api.log"
	[ "$status" -eq 0 ]
	assert_file_exists "$T/work/proof.txt"
	[ "$(cat "$T/work/proof.txt")" = made-by-claude ]
	result=$(grep '"type":"result"' "$T/out.jsonl" | tail -1)
	[ "$(jq -r .result <<<"$result")" = "The file proof.txt is there." ]
	[ "$(jq -r .is_error <<<"$result")" = false ]
	[ "$(jq -r .num_turns <<<"$result")" = 2 ]
	# every main request carried the key; the second carried the tool's result
	n=0
	for f in "$T"/rec/*.json; do
		[ "$(jq -r .path "$f")" = "/v1/messages?beta=true" ] || continue
		[ "$(jq -r '.headers["x-api-key"]' "$f")" = sk-test ]
		n=$((n + 1))
		last=$f
	done
	[ "$n" -ge 2 ]
	jq -e '[.body.messages[-1].content[] | select(.type == "tool_result")] | length == 1' "$last"
	[ "$(jq '[.body.messages[] | select(.role == "assistant")] | length' "$last")" = 1 ]
}

@test "fake-api: real Claude Code exits non-zero on a scripted API error" {
	need_claude
	cat >"$T/script.json" <<-'JSON'
		{"turns": [{"error": {"status": 500, "type": "api_error", "message": "scripted failure"}}]}
	JSON
	start_fake_api "$T/script.json"
	mkdir "$T/work"
	cd "$T/work"
	run run_claude --dangerously-skip-permissions "do something"
	[ "$status" -ne 0 ]
	result=$(grep '"type":"result"' <<<"$output" | tail -1)
	[ "$(jq -r .is_error <<<"$result")" = true ]
	grep -q '"status": 500\|" 500 ' "$T/fake-api.log"
}

@test "fake-api: a stall turn waits, an error turn answers the scripted status" {
	cat >"$T/script.json" <<-'JSON'
		{"turns": [{"stall": 30},
		           {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}]}
	JSON
	start_fake_api "$T/script.json"
	req='{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}'
	run curl -sS --max-time 1 --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	[ "$status" -eq 28 ] # curl: operation timed out
	# the fake notices the client left and goes on serving
	wait_until 5 grep -q 'client went away during stall' "$T/fake-api.log"
	req='{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"assistant","content":"x"}]}'
	run curl -sS -w ' %{http_code}' --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_output '{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}} 529'
	# a short stall answers afterwards
	echo '{"turns": [{"stall": 0.5}]}' >"$T/short.json"
	stop_fake_api
	start_fake_api "$T/short.json"
	req='{"model":"m","tools":[{"name":"Bash"}],"messages":[]}'
	run curl -sS --max-time 10 --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	[ "$(jq -r '.content[0].text' <<<"$output")" = stalled ]
	# "delay": each main request waits, as a model thinks; a side request does not
	echo '{"delay": 1, "turns": [{"text": "late"}]}' >"$T/delay.json"
	stop_fake_api
	start_fake_api "$T/delay.json"
	run curl -sS -w ' %{time_total}' --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_success
	[ "$(jq -r '.content[0].text' <<<"${output% *}")" = late ]
	awk -v t="${output##* }" 'BEGIN { exit !(t >= 1) }'
	run curl -sS -w ' %{time_total}' --data-binary '{"model":"m","messages":[]}' \
		"http://127.0.0.1:$FAKE_API_PORT/v1/messages"
	assert_success
	awk -v t="${output##* }" 'BEGIN { exit !(t < 1) }'
	# "wait_file": the turn is answered only once the file is there
	echo '{"turns": [{"text": "gated", "wait_file": "'"$T/gate"'"}]}' >"$T/gate.json"
	stop_fake_api
	start_fake_api "$T/gate.json"
	curl -sS --data-binary "$req" "http://127.0.0.1:$FAKE_API_PORT/v1/messages" >"$T/gated" &
	wait_until 5 grep -qF "waiting for $T/gate" "$T/fake-api.log"
	sleep 0.5
	[ ! -s "$T/gated" ] || fail "answered before the file: $(cat "$T/gated")"
	touch "$T/gate"
	wait_until 5 test -s "$T/gated"
	[ "$(jq -r '.content[0].text' "$T/gated")" = gated ]
}
