#!/usr/bin/env bats
# aibox-proxy under load: 1,000 tunnels held open and used at once, and a
# client stalling inside a request head dropped while the others go on.
load lib-common
load lib-proxy

teardown() {
	stop_proxy || true
	common_teardown
}

# tunnel_lines PORT: how many lines of a whole tunnel to PORT proxy.log has.
tunnel_lines() {
	grep -c "allowed 127.0.0.1:$1 CONNECT sent=2048 received=2048" "$T/proxy.log"
}

# tunnels_logged PORT N: proxy.log has N lines of a whole tunnel to PORT.
tunnels_logged() {
	[ "$(tunnel_lines "$1")" = "$2" ]
}

# free_port: a port for proxy-load.py's echo server, free now and below the
# kernel's ephemeral range, so that nothing the kernel numbers itself (the
# proxy's listen on :0, a connection's own end) takes it before the echo
# server binds it (a port from bind(:0), let go, could be the proxy's own).
free_port() {
	python3 - <<-'PY'
		import random, socket
		lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
		while True:
		    p = random.randrange(1024, lo) if lo > 2048 else 0
		    s = socket.socket()
		    try:
		        s.bind(("127.0.0.1", p))
		    except OSError:
		        continue
		    print(s.getsockname()[1])
		    break
	PY
}

@test "load: 1,000 concurrent tunnels held open and used; a stalled client is dropped" {
	# the proxy needs 2 fds a tunnel, the test client and echo server 1 each
	hard=$(ulimit -Hn)
	if [ "$hard" != unlimited ] && [ "$hard" -lt 4200 ]; then
		skip "the open file limit ($hard) is too low for 1,000 tunnels"
	fi
	ulimit -n "$hard"
	ep=$(free_port)
	start_proxy --allow "127.0.0.1:$ep" --header-timeout 1s
	run timeout 120 python3 "$TOP/t/proxy-load.py" "$PROXY_PORT" 1000 --echo-port "$ep" \
		--rounds 3 --staller 1 --pid "$PROXY_PID"
	echo "$output"
	assert_success
	assert_line --partial "opened 1000 tunnels"
	assert_line "open at once: 1000"
	assert_line --regexp "^staller dropped: yes after (1|2)\.[0-9]s$"
	assert_line "tunnels still work after the drop: yes"
	# Each tunnel's line is written when the proxy has seen both ends close,
	# which may come a moment after the client is done (a full run of
	# 2026-12-06 read the log too soon).
	wait_until 30 tunnels_logged "$ep" 1000 || true
	assert_equal "$(tunnel_lines "$ep")" 1000
	grep -q "^[^ ]* refused .*(request head timed out)" "$T/proxy.log"
	kill -0 "$PROXY_PID"
}

@test "load: the proxy raises its open file limit to the hard limit" {
	hard=$(ulimit -Hn)
	[ "$hard" != unlimited ] || skip "no hard limit"
	[ "$hard" -gt 1024 ] || skip "hard limit $hard leaves nothing to raise"
	ulimit -Sn 1024
	start_proxy
	run grep '^Max open files' "/proc/$PROXY_PID/limits"
	assert_output --regexp "^Max open files +$hard +$hard +files"
}

@test "load: bulk tunnels (spliced past the first MiB) carry every byte both ways" {
	ep=$(free_port)
	start_proxy --allow "127.0.0.1:$ep"
	run timeout 120 python3 "$TOP/t/proxy-load.py" "$PROXY_PORT" 4 --echo-port "$ep" \
		--rounds 3 --size 3000000
	echo "$output"
	assert_success
	assert_line --partial "echoed 3 rounds on 4 tunnels"
	stop_proxy
	[ "$(grep -c "allowed 127.0.0.1:$ep CONNECT sent=9000000 received=9000000" "$T/proxy.log")" = 4 ]
}

@test "load: a bulk tunnel gives its pipes back when it goes quiet, and takes new ones" {
	ep=$(free_port)
	start_proxy --allow "127.0.0.1:$ep"
	run timeout 120 python3 "$TOP/t/proxy-load.py" "$PROXY_PORT" 2 --echo-port "$ep" \
		--rounds 1 --size 3000000 --idle 3.5 --pid "$PROXY_PID"
	echo "$output"
	assert_success
	# 2 tunnels, a pipe (2 fds) each way each (stdio may hold more pipes)
	before=$(sed -n 's/^proxy pipes after the rounds: //p' <<<"$output")
	after=$(sed -n 's/^proxy pipes after 3.5s idle: //p' <<<"$output")
	[ "$((before - after))" = 8 ]
	assert_line "tunnels still work after the idle time: yes"
	stop_proxy
	[ "$(grep -c "allowed 127.0.0.1:$ep CONNECT sent=6000000 received=6000000" "$T/proxy.log")" = 2 ]
}

@test "load: out of file descriptors, the proxy notes it in its log and prints nothing" {
	# A hard limit of 32 (the proxy raises its soft limit to the hard one):
	# 60 clients at once run it out of descriptors to accept with.
	(ulimit -Sn 32 -Hn 32 && start_proxy && echo "$PROXY_PID $PROXY_PORT" >"$T/started") || true
	read -r PROXY_PID PROXY_PORT <"$T/started"
	python3 - "$PROXY_PORT" <<'PY'
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(60)]
time.sleep(1)
PY
	wait_until 10 grep -q 'note - (accept: Too many open files)' "$T/proxy.log"
	run cat "$T/proxy.err"
	assert_output ""
	# It goes on accepting once descriptors are free again.
	run curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$PROXY_PORT" http://127.0.0.1:1/
	assert_output 403
}
