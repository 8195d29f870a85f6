# aibox-proxy for tests: `load lib-proxy`.
#
# start_proxy ARGS...: start build/aibox-proxy on 127.0.0.1 (a free port),
# logging to $T/proxy.log, with ARGS added; waits for its ready line and sets
# PROXY_PID, PROXY_PORT and PROXY (http://127.0.0.1:PORT).  Its stderr is
# $T/proxy.err.  stop_proxy (teardown calls it) ends it with SIGTERM and
# fails unless it exited 0.

# Under make SANITIZE=1, LeakSanitizer runs when the proxy locks itself down
# (sandbox_lockdown(); /proc is closed to it afterwards); one test in 3001 runs
# the proxy with --no-sandbox to check for leaks at exit too.

start_proxy() {
	rm -f "$T/proxy.ready"
	aibox-proxy --listen 127.0.0.1:0 --ready-fd 3 --log "$T/proxy.log" "$@" \
		3>"$T/proxy.ready" 2>"$T/proxy.err" &
	PROXY_PID=$!
	if ! wait_until 5 ready_or_gone "$T/proxy.ready" "$PROXY_PID" ||
		! grep -q '^ready ' "$T/proxy.ready" 2>/dev/null; then
		cat "$T/proxy.err" >&2
		PROXY_PID=
		return 1
	fi
	PROXY_PORT=$(sed -n 's/^ready 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/proxy.ready")
	PROXY=http://127.0.0.1:$PROXY_PORT
}

# start_recorded ARGS...: start_proxy with ARGS and its record (--report-fd)
# going to $T/record.json; with key forwarding (--key-env AIBOX_TEST_KEY) when
# the test exported AIBOX_TEST_KEY (t/3007, t/3010).
start_recorded() {
	local st
	exec 4>"$T/record.json"
	start_proxy ${AIBOX_TEST_KEY+--key-env AIBOX_TEST_KEY} --report-fd 4 "$@"
	st=$?
	exec 4>&-
	return $st
}

stop_proxy() {
	local st=0
	if [ -n "${PROXY_PID:-}" ]; then
		kill -TERM "$PROXY_PID" 2>/dev/null
		wait "$PROXY_PID" || st=$?
		PROXY_PID=
	fi
	return $st
}

# raw_request BYTES: send BYTES (printf %b escapes) to the proxy on a plain TCP
# connection, print what came back (up to 5 s); then proxy_settle.
raw_request() {
	local st=0
	python3 - "$PROXY_PORT" "$1" <<-'PY' || st=$?
		import socket, sys, codecs
		data = codecs.escape_decode(sys.argv[2].encode())[0]
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
		s.sendall(data)
		out = b""
		try:
		    while True:
		        b = s.recv(65536)
		        if not b:
		            break
		        out += b
		except (socket.timeout, ConnectionResetError):
		    pass
		sys.stdout.write(out.decode("latin-1"))
	PY
	proxy_settle
	return "$st"
}

# tls_raw HOST:PORT BYTES [PRE]: CONNECT to HOST:PORT through the proxy (PRE,
# printf %b escapes, sent right after the CONNECT head), TLS trusting the task
# CA, then BYTES (printf %b escapes); prints what came back inside (5 s); then
# proxy_settle.
tls_raw() {
	local st=0
	python3 - "$PROXY_PORT" "$T/taskca.pem" "$@" <<-'PY' || st=$?
		import codecs, socket, ssl, sys
		port, ca, authority, data = sys.argv[1:5]
		pre = codecs.escape_decode(sys.argv[5].encode())[0] if len(sys.argv) > 5 else b""
		s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
		s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()) + pre)
		head = b""
		while b"\r\n\r\n" not in head:
		    b = s.recv(1)
		    if not b:
		        print("closed after: %r" % head)
		        sys.exit(0)
		    head += b
		if pre:
		    print("closed" if not s.recv(1) else "open")
		    sys.exit(0)
		ctx = ssl.create_default_context(cafile=ca)
		t = ctx.wrap_socket(s, server_hostname=authority.rsplit(":", 1)[0])
		t.sendall(codecs.escape_decode(data.encode())[0])
		out = b""
		try:
		    while True:
		        b = t.recv(65536)
		        if not b:
		            break
		        out += b
		except (socket.timeout, ssl.SSLError, ConnectionResetError):
		    pass
		sys.stdout.write(out.decode("latin-1"))
	PY
	proxy_settle
	return "$st"
}

# start_intercepting_proxy ARGS...: start_proxy with $T/secrets on --secrets-fd
# and the task CA it makes written to $T/taskca.pem; ARGS: its --allow entries
# and any other option.
start_intercepting_proxy() {
	local st
	exec 5<"$T/secrets" 6>"$T/taskca.pem"
	start_proxy --secrets-fd 5 --ca-fd 6 "$@"
	st=$?
	exec 5<&- 6>&-
	return $st
}

# icurl ARGS...: pcurl through the task's proxy, trusting the task CA; its
# status.
icurl() {
	pcurl -sS -x "$PROXY" --cacert "$T/taskca.pem" "$@"
}

# pcurl ARGS...: curl ARGS (a request through the proxy); its status.  It
# returns once the proxy (PROXY_PID, when set) is done with what it was doing
# as curl ended (proxy_settle): the proxy writes a request's log line just
# after the answer's last bytes, so a client that has its answer may otherwise
# find the line not there yet (t/3020 did, once, under ASan).  Every curl whose
# line in proxy.log a test reads goes through it (or icurl).  Not enough for
# a plain tunnel's line: that comes once the server closed its end too, and
# the proxy sleeps until then; a test waits for that line itself.
pcurl() {
	local st=0
	curl "$@" || st=$?
	proxy_settle
	return "$st"
}

# proxy_settle: wait until the proxy is idle (proxy_idle), for a test about to
# read proxy.log after a client other than pcurl had its answer.  It never
# fails and prints nothing (the output of a `run` is the client's): a proxy
# busy for 10 s is let go, and what the test reads then says what is wrong.
proxy_settle() {
	[ -z "${PROXY_PID:-}" ] || wait_until 10 proxy_idle 2>/dev/null || true
}

# proxy_idle: the proxy's main thread (PROXY_PID) is not running or about to
# run (state R) nor in a wait on the disk (D), or it has ended: it sleeps, in
# its loop's epoll_wait or on the spend ledger's lock.  It never sleeps
# between an answer's last bytes and that request's log line (its sockets do
# not block; common/proxy/proxy_forward.c), so once it sleeps after the
# client had its answer, the line is in the log.
proxy_idle() {
	local stat
	{ read -r stat <"/proc/$PROXY_PID/stat"; } 2>/dev/null || return 0
	stat=${stat##*) }
	[[ ${stat%% *} != [RD] ]]
}
