#!/usr/bin/env bats
# aibox-broker --handoff-fd: connections passed over a unix socket with
# SCM_RIGHTS, with the bytes a proxy already read; and --conn-fd.  The real
# proxy in front of the broker is t/6004-broker-proxy.bats.  Here
# t/handoff-proxy plays the proxy because these tests send what aibox-proxy
# never sends: a chosen number of bytes read ahead (none, part of a line), a
# remote number that disagrees with the path, and malformed messages.
load lib-common
load lib-tls
load lib-broker

setup() {
	common_setup
	broker_setup
	start_upstream
}

teardown() {
	broker_teardown
	common_teardown
}

# start_handoff [PROXY OPTIONS]: the stand-in proxy and its broker; sets HP_URL, HB_PID.
start_handoff() {
	rm -f hp.port hb.pid
	env -u UPSTREAM_TOKEN "$TOP/t/handoff-proxy" --port-file "$T/hp.port" --pid-file "$T/hb.pid" "$@" -- \
		aibox-broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*' \
		--log "$T/broker.log" --ca "$T/tls/ca.pem" 2>"$T/handoff.err" &
	HP_PID=$!
	BROKER_PIDS+=("$HP_PID")
	wait_until 20 test -s "$T/hp.port"
	HB_PID=$(cat "$T/hb.pid")
	HP_URL="http://127.0.0.1:$(cat "$T/hp.port")/0/"
}

# stop_handoff: end the stand-in proxy; its broker sees the socket close and exits.
stop_handoff() {
	kill "$HP_PID" 2>/dev/null || true
	wait "$HP_PID" 2>/dev/null || true
	wait_until 5 dead "$HB_PID"
}

@test "broker: the hand-off carries any number of bytes already read, none too" {
	for peek in 0 10 200; do
		start_handoff --peek "$peek"
		run git -c protocol.version=2 clone -q "$HP_URL" "c$peek"
		assert_success
		stop_handoff
	done
}

@test "broker: the hand-off's remote must match the request's" {
	start_handoff --remote 0
	run git clone -q "$HP_URL" c
	assert_success
	stop_handoff
	start_handoff --remote 1
	run git clone -q "$HP_URL" c1
	assert_failure
	broker_settle "$HB_PID"
	assert_file_contains broker.log 'why="no such remote"'
	stop_handoff
	# The hand-off's number is decimal digits too, as in the path.
	for n in -0 +0 00; do
		start_handoff --remote="$n"
		run timeout 10 git clone -q "$HP_URL" "c$n"
		assert_failure
		stop_handoff
	done
	run grep -c 'handoff result=refused why="malformed hand-off message"' broker.log
	assert_output 3
}

@test "broker: malformed hand-off messages are refused and the broker goes on" {
	for bad in nofd twofds header length; do
		start_handoff --bad "$bad"
		run timeout 10 git clone -q "$HP_URL" "c-$bad"
		assert_failure
		run alive "$HB_PID"
		assert_success
		stop_handoff
	done
	run grep -c 'handoff result=refused' broker.log
	assert_output 4
	assert_file_empty up-headers.jsonl
}

@test "broker: a hand-off with more than 16 KiB read ahead is refused" {
	local line
	line=$(head -c 7000 /dev/zero | tr '\0' a)
	# The proxy reads at most a 16 KiB head before it hands over (common/net/handoff.h).
	start_handoff --peek 17000
	run curl -sS --max-time 10 -o /dev/null -H "X-A: $line" -H "X-B: $line" -H "X-C: $line" \
		"${HP_URL}info/refs?service=git-upload-pack"
	assert_failure
	broker_settle "$HB_PID"
	assert_file_contains broker.log 'handoff result=refused'
	run alive "$HB_PID"
	assert_success
	stop_handoff
	assert_file_empty up-headers.jsonl
}

@test "broker: it exits when the hand-off socket closes, leaving nothing behind" {
	start_handoff
	git clone -q "$HP_URL" c
	run stop_handoff
	assert_success
	assert_file_contains broker.log ' stop$'
}

@test "broker: a hand-off fd that is not a SOCK_SEQPACKET unix socket is refused" {
	run aibox-broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --handoff-fd 3 3<seed/README.md
	assert_failure 2
	assert_output --partial "--handoff-fd 3 is not a unix SOCK_SEQPACKET socket"
	run bash -c 'aibox-broker --remote "$1" --token-env GIT_TOKEN --fetch --handoff-fd 3 3</dev/null' _ "$UP_URL"
	assert_failure 2
	assert_output "aibox-broker: --handoff-fd 3 is not a unix SOCK_SEQPACKET socket"
}

@test "broker: --conn-fd serves the one connection it is given" {
	# socat-free: python gives the broker one accepted connection as fd 3.
	python3 - "$UP_URL" "$T" <<-'PY' &
		import os, socket, subprocess, sys
		url, t = sys.argv[1], sys.argv[2]
		s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
		open(t + "/conn.port.tmp", "w").write(str(s.getsockname()[1]))
		os.rename(t + "/conn.port.tmp", t + "/conn.port")
		c, _ = s.accept()
		os.dup2(c.fileno(), 3, inheritable=True)
		env = dict(os.environ); env.pop("UPSTREAM_TOKEN", None)
		r = subprocess.run(["aibox-broker", "--remote", url, "--token-env", "GIT_TOKEN", "--fetch",
		                    "--ca", t + "/tls/ca.pem", "--log", t + "/broker.log", "--conn-fd", "3"],
		                   pass_fds=(3,), env=env)
		open(t + "/conn.rc", "w").write(str(r.returncode))
	PY
	BROKER_PIDS+=($!)
	wait_until 20 test -s conn.port
	run curl -sS "http://127.0.0.1:$(cat conn.port)/0/info/refs?service=git-upload-pack"
	assert_success
	assert_output --partial '# service=git-upload-pack'
	wait_until 20 test -s conn.rc
	assert_equal "$(cat conn.rc)" 0
}
