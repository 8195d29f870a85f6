#!/usr/bin/env bats
# aibox-proxy's record (--report-fd): what the VM reached, counted in the
# proxy and written as one JSON object when it is told to stop; and the cap on
# proxy.log (--log-max), past which lines are counted instead of written.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-proxy

setup() {
	common_setup
	echo '{"turns": []}' >"$T/script.json"
	start_fake_api "$T/script.json"
	echo "127.0.0.1 evil.test" >"$T/hosts"
	export AIBOX_PROXY_HOSTS=$T/hosts
}

teardown() {
	stop_proxy || true
	stop_fake_api
	if [ -n "${PORTS_PID:-}" ]; then
		kill "$PORTS_PID" 2>/dev/null
		wait "$PORTS_PID" 2>/dev/null || true
	fi
	common_teardown
}

# flood N HOST: N requests for HOST through the proxy, one connection each
flood() {
	python3 - "$PROXY_PORT" "$1" "$2" <<-'PY'
		import socket, sys
		port, n, host = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
		for i in range(n):
		    s = socket.create_connection(("127.0.0.1", port), timeout=10)
		    s.sendall(b"GET http://%s/x%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (host.encode(), i, host.encode()))
		    while s.recv(65536):
		        pass
		    s.close()
	PY
}

@test "record: one JSON object at the stop, allowed hosts by name with counts, refusals counted" {
	start_recorded --allow "127.0.0.1:$FAKE_API_PORT"
	curl -sS -x "$PROXY" "http://127.0.0.1:$FAKE_API_PORT/api/hello" "http://127.0.0.1:$FAKE_API_PORT/api/hello" >/dev/null
	run curl -sS -x "$PROXY" "http://evil.test/"
	assert_output 'aibox-proxy: not on the allow list'
	run raw_request "BAD\r\n\r\n"
	assert_success
	assert_line --index 0 "$(printf 'HTTP/1.1 403 Forbidden\r')"
	assert_output --partial "aibox-proxy: malformed request line"
	run curl -sS -x "$PROXY" "http://127.0.0.1:3129/api/hello"
	assert_output '{"type":"error","error":{"type":"permission_error","message":"aibox-proxy refused this request: key forwarding is off (the task'"'"'s proxy.log has it)"}}'
	[ ! -s "$T/record.json" ] # nothing before the stop
	stop_proxy
	[ "$(wc -l <"$T/record.json")" = 1 ]
	run jq -c . "$T/record.json"
	assert_output '{"version":1,"hosts":[{"host":"127.0.0.1:'"$FAKE_API_PORT"'","allowed":2,"sent":'"$(jq '.hosts[0].sent' "$T/record.json")"',"received":'"$(jq '.hosts[0].received' "$T/record.json")"'}],"more_hosts":0,"more_hosts_at_least":false,"more_allowed":0,"allowed":2,"refused":3,"failed":0,"log_left_out":0}'
	[ "$(jq '.hosts[0].sent' "$T/record.json")" -gt 0 ]
	[ "$(jq '.hosts[0].received' "$T/record.json")" -gt 0 ]
	# the hosts are those of proxy.log's allowed lines
	[ "$(grep -c ' allowed 127.0.0.1:'"$FAKE_API_PORT"' ' "$T/proxy.log")" = 2 ]
}

@test "record: a flood of refusals stops at --log-max with a note and a count; the record has every host" {
	start_recorded --allow "127.0.0.1:$FAKE_API_PORT" --log-max 8192
	flood 300 evil.test
	# after the cap: an allowed host, and the proxy still answers at once
	run curl -sS -m 5 -x "$PROXY" "http://127.0.0.1:$FAKE_API_PORT/api/hello"
	assert_output '{}'
	flood 50 evil.test
	stop_proxy
	[ "$(stat -c %s "$T/proxy.log")" -le 8192 ]
	[ "$(jq -r '.hosts[0].host' "$T/record.json")" = "127.0.0.1:$FAKE_API_PORT" ]
	[ "$(jq .refused "$T/record.json")" = 350 ]
	[ "$(jq .allowed "$T/record.json")" = 1 ]
	written=$(grep -c ' refused \| allowed ' "$T/proxy.log")
	left=$(jq .log_left_out "$T/record.json")
	[ $((written + left)) = 351 ]
	[ "$left" -gt 0 ]
	grep -q "^[^ ]* note - (proxy.log reached its cap of 8192 bytes: the lines after this one are left out, and counted in the last line)$" "$T/proxy.log"
	run tail -n 1 "$T/proxy.log"
	assert_output --regexp "^[^ ]+ note - \($left lines left out: proxy.log reached its cap of 8192 bytes\)$"
	run ! grep -q " allowed 127.0.0.1:$FAKE_API_PORT " "$T/proxy.log"
}

@test "record: 8 clients flooding refusals: the log stops at its cap, memory stays bounded, others get answers" {
	# a small quarantine under SANITIZE=1, so that what is measured is the proxy's own
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4 \
		start_recorded --allow "127.0.0.1:$FAKE_API_PORT" --log-max 65536
	flood 20 evil.test
	hwm0=$(awk '/^VmHWM:/ { print $2 }' "/proc/$PROXY_PID/status")
	run python3 - "$PROXY_PORT" "$FAKE_API_PORT" <<-'PY'
		import socket, sys, threading, time
		port, api = int(sys.argv[1]), int(sys.argv[2])
		stop = time.time() + 4
		counts = [0] * 8
		def flood(k):
		    while time.time() < stop:
		        s = socket.create_connection(("127.0.0.1", port), timeout=10)
		        s.sendall(b"GET http://evil.test/%s HTTP/1.1\r\nHost: evil.test\r\n\r\n" % (b"x" * 100))
		        while s.recv(65536):
		            pass
		        s.close()
		        counts[k] += 1
		ts = [threading.Thread(target=flood, args=(k,)) for k in range(8)]
		for t in ts:
		    t.start()
		time.sleep(2)
		t0 = time.time()
		s = socket.create_connection(("127.0.0.1", port), timeout=10)
		s.sendall(b"GET http://127.0.0.1:%d/api/hello HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % (api, api))
		answer = b""
		while True:
		    b = s.recv(65536)
		    if not b:
		        break
		    answer += b
		print("allowed answered: %s in %.1fs" % (answer.startswith(b"HTTP/1.1 200 "), time.time() - t0))
		for t in ts:
		    t.join()
		print("refused", sum(counts))
	PY
	echo "$output"
	assert_line --regexp "^allowed answered: True in [01]\.[0-9]s$"
	sent=$(sed -n 's/^refused //p' <<<"$output")
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$PROXY_PID/status")
	stop_proxy
	echo "# $sent refusals; the proxy's VmHWM: $hwm0 kB before, $hwm kB after" >&3
	[ "$sent" -gt 1000 ]
	[ "$(stat -c %s "$T/proxy.log")" -le 65536 ]
	[ "$(jq .refused "$T/record.json")" = $((sent + 20)) ]
	[ "$(jq -r '.hosts[0].host' "$T/record.json")" = "127.0.0.1:$FAKE_API_PORT" ]
	[ $((hwm - hwm0)) -lt $((16 * 1024)) ]
}

@test "record: past 256 hosts the rest are counted, not named, and the record says so" {
	# 300 loopback ports, each accepting and closing: 300 distinct allowed hosts
	"$BATS_TEST_DIRNAME/accept-close" 300 "$T/ports" &
	PORTS_PID=$!
	wait_until 10 test -s "$T/ports"
	sed 's/^/127.0.0.1:/' "$T/ports" >"$T/allow"
	start_recorded --allow-file "$T/allow"
	python3 - "$PROXY_PORT" "$T/ports" <<-'PY'
		import socket, sys
		ports = open(sys.argv[2]).read().split()
		for rounds in range(2):
		    for p in ports:
		        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
		        s.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\n" % p.encode())
		        while s.recv(65536):
		            pass
		        s.close()
	PY
	stop_proxy
	[ "$(jq '.hosts | length' "$T/record.json")" = 256 ]
	[ "$(jq -r '.hosts[0].host' "$T/record.json")" = "127.0.0.1:$(head -n 1 "$T/ports")" ]
	[ "$(jq '.hosts[0].allowed' "$T/record.json")" = 2 ]
	[ "$(jq .more_hosts "$T/record.json")" = 44 ]
	[ "$(jq .more_allowed "$T/record.json")" = 88 ]
	[ "$(jq .more_hosts_at_least "$T/record.json")" = false ]
	[ "$(jq .allowed "$T/record.json")" = 600 ]
}

@test "record: --log-max and --report-fd are checked" {
	run aibox-proxy --log-max 100
	[ "$status" -eq 2 ]
	assert_output --partial "invalid --log-max '100'"
	run aibox-proxy --log-max 1x
	[ "$status" -eq 2 ]
	assert_output --partial "invalid --log-max '1x'"
	run aibox-proxy --report-fd 9
	[ "$status" -eq 2 ]
	assert_output "aibox-proxy: --report-fd 9: Bad file descriptor"
	run aibox-proxy --help
	assert_success
	assert_output --partial "--report-fd N"
}
