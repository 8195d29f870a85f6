#!/usr/bin/env bats
# aibox-broker against hostile requests: malformed pkt-lines, a push
# command list without its flush, gzip bombs, bad HTTP.  Each is refused,
# nothing of it reaches the remote, and the broker keeps serving.
load lib-common
load lib-tls
load lib-broker

setup() {
	common_setup
	broker_setup
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	Z40=0000000000000000000000000000000000000000
	OLD=$(git -C up/repo.git rev-parse main)
	NEW=$(git -C seed rev-parse HEAD~1)
}

teardown() {
	broker_teardown
	common_teardown
}

# pkt STRING: STRING as a pkt-line (no NUL in it).
pkt() {
	printf '%04x%s' $((${#1} + 4)) "$1"
}

# post SERVICE FILE [CURL ARGS]: POST FILE as SERVICE's request; prints the HTTP status.
post() {
	local svc=$1 file=$2
	shift 2
	curl -sS -o "$T/answer" -w '%{http_code}' -H "Content-Type: application/x-$svc-request" \
		"$@" --data-binary @"$file" "${BR_URL}$svc"
}

# send_raw FORMAT: printf FORMAT to the broker as one connection; prints its answer.
send_raw() {
	# shellcheck disable=SC2059
	printf "$1" | curl -sS --max-time 5 "telnet://127.0.0.1:$BR_PORT"
}

# Nothing but info/refs ever reached the remote, and the broker still serves.
assert_nothing_forwarded() {
	run grep -c '"POST"' "$T/up-headers.jsonl"
	assert_output 0
	run git clone -q "$BR_URL" "$T/still-works-$RANDOM"
	assert_success
}

@test "broker: a pkt-line longer than 65520 bytes is refused" {
	{
		printf 'ffff'
		head -c 65531 /dev/zero | tr '\0' a
		printf '0000'
	} >body
	run post git-receive-pack body
	assert_output 400
	assert_file_contains answer 'the command list is malformed'
	# Within the cap, but a command list longer than 1 MiB.
	for i in $(seq 1 20); do
		pkt "$OLD $NEW refs/heads/aibox/$(head -c 60000 /dev/zero | tr '\0' b)"
	done >big
	run post git-receive-pack big
	assert_output 413
	assert_nothing_forwarded
}

@test "broker: bad pkt-line lengths are refused" {
	for bad in '0003' '0004' 'zz10' '00-8' '+012'; do
		printf '%s%s' "$bad" "$OLD $NEW refs/heads/aibox/x" >body
		run post git-receive-pack body
		assert_output 400
	done
	# A length running past the body.
	printf '0100%s' "$OLD $NEW refs/heads/aibox/x" >body
	run post git-receive-pack body
	assert_output 400
	assert_file_contains answer 'ends without a flush'
	# A malformed command: short object id, no ref, upper-case hex, a NUL in the ref.
	for cmd in "${OLD:0:39} $NEW refs/heads/aibox/x" "$OLD $NEW" "${OLD^^} $NEW refs/heads/aibox/x"; do
		{ pkt "$cmd"; printf '0000'; } >body
		run post git-receive-pack body
		assert_output 400
		assert_file_contains answer 'malformed'
	done
	{ printf '%04x%s\0report-status\0x' $((4 + 83 + 21 + 16)) "$OLD $NEW refs/heads/aibox/x"; printf '0000'; } >body
	run post git-receive-pack body
	assert_output 400
	assert_nothing_forwarded
}

@test "broker: a push command list without a flush is refused, and an empty one" {
	{ pkt "$OLD $NEW refs/heads/aibox/x"; pkt "$OLD $NEW refs/heads/aibox/y"; } >body
	run post git-receive-pack body
	assert_output 400
	assert_file_contains answer 'push refused: the command list ends without a flush'
	# The same, chunked.
	run post git-receive-pack body -H 'Transfer-Encoding: chunked'
	assert_output 400
	printf '0000PACK' >body
	run post git-receive-pack body
	assert_output 400
	assert_file_contains answer 'the command list is empty'
	broker_settle
	assert_file_contains "$T/broker.log" 'why="the command list ends without a flush"'
	assert_nothing_forwarded
	# A flush and nothing else is git's probe before a large push: it updates nothing.
	before=$(up_refs)
	printf '0000' >body
	run post git-receive-pack body
	assert_output 200
	assert_equal "$(up_refs)" "$before"
	broker_settle
	assert_file_contains "$T/broker.log" 'refs=(probe) result=allowed'
}

@test "broker: a command list that would be allowed is still checked for every ref" {
	# A hand-made push: one allowed ref, then a deletion of main; refused whole.
	{ pkt "$OLD $NEW refs/heads/aibox/x"; pkt "$OLD $Z40 refs/heads/main"; printf '0000'; } >body
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'ERR aibox-broker: refusing refs/heads/main: deleting branches is not allowed'
	# Ref names git would refuse are refused by name.
	for ref in 'refs/heads/aibox/../main' 'refs/heads/aibox/x.lock' 'refs/heads/aibox/.x'; do
		{ pkt "$OLD $NEW $ref"; printf '0000'; } >body
		run post git-receive-pack body
		assert_output 200
		assert_file_contains answer 'not a valid ref name'
	done
	assert_nothing_forwarded
}

# push_body CAPS [OPTION...]: a push creating refs/heads/aibox/po at $NEW, its
# capability list CAPS (printf's escapes), the push options, and an empty pack.
push_body() {
	# shellcheck disable=SC2059
	python3 - "$OLD" "$NEW" "$(printf "$1")" "${@:2}" <<-'PY'
	import hashlib, sys
	def pkt(b):
	    return b"%04x" % (len(b) + 4) + b
	z = b"0" * len(sys.argv[1])
	body = pkt(z + b" " + sys.argv[2].encode() + b" refs/heads/aibox/po\0" + sys.argv[3].encode() + b"\n") + b"0000"
	if len(sys.argv) > 4:
	    body += b"".join(pkt(o.encode() + b"\n") for o in sys.argv[4:]) + b"0000"
	pack = b"PACK\0\0\0\2\0\0\0\0"
	sys.stdout.buffer.write(body + pack + hashlib.sha1(pack).digest())
	PY
}

@test "broker: push options are refused in every spelling receive-pack reads" {
	# The remote takes push options, and its pre-receive hook writes down what it got.
	git -C up/repo.git config receive.advertisePushOptions true
	mkdir -p up/repo.git/hooks
	printf '#!/bin/sh\necho "options=${GIT_PUSH_OPTION_COUNT:-none} ${GIT_PUSH_OPTION_0:-}" >>%s\n' \
		"$T/hook.log" >up/repo.git/hooks/pre-receive
	chmod +x up/repo.git/hooks/pre-receive
	# Straight to the remote, without the broker, the hook sees them.
	git -C seed push -q -o ci.variable=PWNED=1 "$T/up/repo.git" main:refs/heads/aibox/direct
	assert_file_contains hook.log 'options=1 ci.variable=PWNED=1'
	rm hook.log
	before=$(up_refs)
	for caps in 'report-status push-options' 'report-status push-options=1' \
		'push-options=x report-status' 'report-status\tpush-options' \
		'report-status\npush-options' 'report-status\rpush-options side-band-64k'; do
		push_body "$caps" merge_request.create ci.variable=PWNED=1 >body
		run post git-receive-pack body
		assert_output 200
		assert_file_contains answer 'ng refs/heads/aibox/po push options (git push -o) are not allowed'
	done
	broker_settle
	run grep -c 'refs=refs/heads/aibox/po(create) result=refused status=200 .* why="push options (git push -o) are not allowed"' broker.log
	assert_output 6
	# Not a spelling git reads, but one another server might split at: refused too.
	push_body 'report-status\vpush-options' ci.variable=PWNED=1 >body
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'ERR aibox-broker: refusing this push: the capability list holds a byte git does not send there'
	broker_settle
	assert_file_contains broker.log 'result=refused status=200 .* why="the capability list holds a byte git does not send there"'
	# Nothing reached the remote's hook, and nothing changed there.
	assert_file_not_exists hook.log
	assert_equal "$(up_refs)" "$before"
	# The same push without options passes: the hook runs, and sees none.
	push_body 'report-status' >body
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'ok refs/heads/aibox/po'
	assert_file_contains hook.log '^options=0 $'
}

# children_are N: the broker ($BR_PID) has N children.
children_are() {
	[ "$(pgrep -c -P "$BR_PID")" -eq "$1" ]
}

# still_open: the number t/stall-clients last wrote.
still_open() {
	sed -n 's/^open //p' "$T/stall.state"
}

# all_closed: t/stall-clients has no connection left open.
all_closed() {
	[ "$(still_open)" = 0 ]
}

@test "broker: stalled request bodies end after --client-timeout, and cannot take every child" {
	# A broker of its own, with a short time-out.
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*' \
		--client-timeout 8s
	"$TOP/t/stall-clients" "$BR_PORT" 40 "$T/stall.state" "$T/stall.answers" "$T/stall.closes" &
	BROKER_PIDS+=("$!")
	wait_until 10 test -s stall.state
	# 32 children hold stalled bodies; the other 8 wait in the queue.
	wait_until 10 children_are 32
	# The task's own git is served at once, each request ending a stalled child.
	run git clone -q "$BR_URL" c
	assert_success
	git -C c checkout -q -b aibox/stall
	git -C c commit -q --allow-empty -m stall
	run git -C c push -q origin aibox/stall
	assert_success
	assert_equal "$(git -C up/repo.git rev-parse aibox/stall)" "$(git -C c rev-parse HEAD)"
	broker_settle
	assert_file_contains broker.log 'why="every child busy: ended pid [0-9]*, which had waited [0-9]* ms on its client"'
	# After it, every one is closed, told why.
	wait_until 40 all_closed
	assert_file_contains stall.answers 'HTTP/1.1 408 Request Timeout'
	assert_file_contains broker.log 'op=fetch request=POST git-upload-pack result=refused status=408 .* why="cannot read the request body: Connection timed out"'
	assert_file_contains broker.log 'op=push request=POST git-receive-pack result=refused status=408 .* why="the request body stalled"'
	run grep -c 'result=refused status=408' broker.log
	[ "$output" -ge 20 ]
	# Most stalled bodies were held to the time-out, neither ended for the task's git
	# nor closed early: closed 8 s or more after they connected, by the client's clock
	# (not a count of those open when the git is done, which on a slow machine may
	# come after the time-out).
	run awk '$2 >= 8 { n++ } END { print n + 0 }' stall.closes
	[ "$output" -gt 20 ]
	wait_until 10 children_are 0
}

@test "broker: a command list that comes in small pieces is read in time linear in its size" {
	# 1 MB of commands, 512 bytes at a time, each piece a read of its own: reading the list
	# again from its start for each piece took a core for as long as they came.
	cpu() { awk '{ print $16 + $17 }' "/proc/$BR_PID/stat"; }
	before=$(cpu)
	run python3 - "$BR_PORT" "$OLD" "$NEW" <<-'PY'
	import socket, sys, time
	port, old, new = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3].encode()
	def pkt(b):
	    return b"%04x" % (len(b) + 4) + b
	body = b"".join(pkt(old + b" " + new + b" refs/heads/other/" + (b"y%04d" % i) * 180 + (b"\0report-status\n" if i == 0 else b"\n")) for i in range(1000)) + b"0000"
	s = socket.create_connection(("127.0.0.1", port))
	s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
	s.sendall(b"POST /0/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
	for i in range(0, len(body), 512):
	    s.sendall(body[i:i + 512])
	    time.sleep(0.0003)
	s.shutdown(socket.SHUT_WR)
	ans = b""
	while True:
	    d = s.recv(65536)
	    if not d:
	        break
	    ans += d
	print(len(body), ans.split(b"\r\n")[0].decode())
	PY
	assert_output --regexp '^10[0-9]{5} HTTP/1.1 200 OK$'
	assert_file_contains broker.log 'refs/heads/other/y0000.*result=refused status=200'
	# The child is reaped: its CPU time counts in the broker's.
	wait_until 10 children_are 0
	ticks=$(($(cpu) - before))
	echo "the child took $ticks ticks of CPU" >&2
	[ "$ticks" -le 10 ]
	assert_nothing_forwarded
}

@test "broker: broker.log stops at its cap of 16 MiB, and counts the lines it left out" {
	# A refused push of 1000 refs, each cut at 256 bytes in refs=: about 260 KiB of log
	# for 400 KiB sent; 75 of them would write 19.8 MB on the host's disk.
	python3 - "$OLD" "$NEW" >body <<-'PY'
	import sys
	def pkt(b):
	    return b"%04x" % (len(b) + 4) + b
	cmds = [pkt(sys.argv[1].encode() + b" " + sys.argv[2].encode() + b" refs/heads/" + (b"x%04d" % i) * 60 + (b"\0report-status\n" if i == 0 else b"\n")) for i in range(1000)]
	sys.stdout.buffer.write(b"".join(cmds) + b"0000")
	PY
	for _ in $(seq 75); do
		post git-receive-pack body >/dev/null
	done
	run curl -sS -o /dev/null -w '%{http_code}' "${BR_URL}info/refs?service=git-receive-pack"
	assert_output 200
	kill "$BR_PID"
	wait "$BR_PID" || true
	run stat -c %s broker.log
	[ "$output" -le $((16 << 20)) ]
	[ "$output" -gt $((15 << 20)) ]
	assert_file_contains broker.log '\] note why="the log reached its cap of 16777216 bytes: the lines after this one are left out, and counted before the stop line"$'
	run grep -c 'note why="the log reached its cap' broker.log
	assert_output 1
	# The lines left out (the last pushes and the info/refs) are counted before the stop.
	run tail -n 2 broker.log
	assert_line --index 0 --regexp '\] note why="[0-9]+ lines left out: the log reached its cap of 16777216 bytes"$'
	assert_line --index 1 --regexp '\] stop$'
	n=$(sed -n 's/.* note why="\([0-9]*\) lines left out.*/\1/p' broker.log)
	[ "$n" -ge 8 ]
	run grep -c 'op=push request=GET' broker.log
	assert_output 0
}

# A time-out that is no duration, or out of range, is a usage error.
@test "broker: --client-timeout takes a duration between 1s and 1h" {
	for bad in x 0 500ms 2h -1s; do
		run aibox-broker --remote "$UP_URL" --fetch --listen 127.0.0.1:0 --client-timeout "$bad"
		assert_failure 2
		assert_output --partial "aibox-broker: --client-timeout: '$bad' is not"
	done
}

@test "broker: a gzip bomb is refused at the inflate cap" {
	# 200 MiB of zeros, about 200 KiB compressed; the cap is 10 MiB.
	head -c $((200 << 20)) /dev/zero | gzip -1 >bomb.gz
	[ "$(stat -c %s bomb.gz)" -lt $((1 << 20)) ]
	run post git-upload-pack bomb.gz -H 'Content-Encoding: gzip'
	assert_output 413
	assert_file_contains answer 'cannot read the gzip request body: File too large'
	run post git-receive-pack bomb.gz -H 'Content-Encoding: gzip'
	assert_output 413
	# Not gzip at all, and gzip with bytes after it.
	printf 'not gzip' >bad.gz
	run post git-upload-pack bad.gz -H 'Content-Encoding: gzip'
	assert_output 400
	{ printf '0000' | gzip; printf 'junk'; } >trail.gz
	run post git-upload-pack trail.gz -H 'Content-Encoding: gzip'
	assert_output 400
	run post git-upload-pack trail.gz -H 'Content-Encoding: br'
	assert_output 415
	assert_nothing_forwarded
}

@test "broker: a gzip body is capped at 10 MiB inflated, a plain upload-pack body too" {
	# Well-formed pkt-lines, 11 MiB of them: under 64 MiB, over the 10 MiB cap.
	line=$(pkt "have $OLD")
	for i in $(seq 1 1024); do printf '%s' "$line"; done >kib50
	for i in $(seq 1 240); do cat kib50; done >big
	printf '0009done\n' >>big
	[ "$(stat -c %s big)" -gt $((11 << 20)) ]
	gzip -1 <big >big.gz
	[ "$(stat -c %s big.gz)" -lt $((1 << 20)) ]
	run post git-upload-pack big.gz -H 'Content-Encoding: gzip'
	assert_output 413
	assert_file_contains answer 'File too large'
	run post git-upload-pack big
	assert_output 413
	run post git-receive-pack big.gz -H 'Content-Encoding: gzip'
	assert_output 413
	assert_nothing_forwarded
}

@test "broker: a gzip request body is inflated, checked and forwarded" {
	git clone -q "$BR_URL" c
	git -C c checkout -q -b aibox/gz
	git -C c commit -q --allow-empty -m gz
	# git gzips fetch requests itself; force a gzip receive-pack by hand.
	{ pkt "$OLD $Z40 refs/heads/main"; printf '0000'; } | gzip >del.gz
	run post git-receive-pack del.gz -H 'Content-Encoding: gzip'
	assert_output 200
	assert_file_contains answer 'refusing refs/heads/main: deleting branches is not allowed'
	run git -C c -c protocol.version=0 fetch -q origin
	assert_success
	run grep -c '"Content-Encoding"' up-headers.jsonl
	assert_output 0
}

@test "broker: bad HTTP is refused: framing, methods, paths, remotes" {
	printf '0000' >body
	# Both Content-Length and chunked.
	run post git-upload-pack body -H 'Transfer-Encoding: chunked' -H 'Content-Length: 4'
	assert_output 400
	# Dumb HTTP and other paths are not served.
	run curl -sS -o /dev/null -w '%{http_code}' "${BR_URL}HEAD"
	assert_output 404
	run curl -sS -o /dev/null -w '%{http_code}' "${BR_URL}objects/info/packs"
	assert_output 404
	run curl -sS -o /dev/null -w '%{http_code}' "${BR_URL}info/refs?service=git-upload-pack&x=1"
	assert_output 404
	run curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$BR_PORT/1/info/refs?service=git-upload-pack"
	assert_output 404
	run curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$BR_PORT/00/info/refs?service=git-upload-pack"
	assert_output 404
	run curl -sS -o /dev/null -w '%{http_code}' -X POST "${BR_URL}info/refs?service=git-upload-pack"
	assert_output 405
	run curl -sS -o /dev/null -w '%{http_code}' "${BR_URL}git-upload-pack"
	assert_output 405
	# Oversized and malformed heads.
	run curl -sS -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" \
		"${BR_URL}info/refs?service=git-upload-pack"
	assert_output 413
	run send_raw 'GET /0/info/refs?service=git-upload-pack HTTP/1.1\r\nBad Header\r\n\r\n'
	assert_output --partial 'HTTP/1.1 400'
	run send_raw 'GET /0/info/refs?service=git-upload-pack HTTP/2.0\r\n\r\n'
	assert_output --partial 'HTTP/1.1 400'
	# A chunk size that is not hex.
	run send_raw 'POST /0/git-upload-pack HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'
	assert_output --partial 'HTTP/1.1 400'
	run grep -c '"POST"' up-headers.jsonl
	assert_output 0
	run git clone -q "$BR_URL" c
	assert_success
}

@test "broker: a remote number is decimal digits only" {
	for n in -0 +0 ' 0' 0x0 00 1000; do
		run curl -sS -o /dev/null -w '%{http_code}' \
			"http://127.0.0.1:$BR_PORT/${n// /%20}/info/refs?service=git-upload-pack"
		assert_output 404
	done
	run grep -c '"GET"' up-headers.jsonl
	assert_output 0
	broker_settle
	run grep -c 'why="no such remote"' broker.log
	assert_output 6
}

@test "broker: a request line with control bytes is refused, and client bytes are escaped in the log" {
	# A method is a token (common/net/http.c): control bytes in it are refused.
	run send_raw 'G\033[31mE\rT /0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n\r\n'
	assert_output --partial 'HTTP/1.1 400'
	# Another token is a method the service does not take.
	run send_raw 'G|~T /0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n\r\n'
	assert_output --partial 'HTTP/1.1 405'
	broker_settle
	assert_file_contains broker.log 'request=G|~T info/refs result=refused status=405'
	# Quotes and backslashes of a target are escaped.
	run send_raw 'GET /x"\\y/info/refs HTTP/1.1\r\nHost: x\r\n\r\n'
	assert_output --partial 'HTTP/1.1 404'
	broker_settle
	assert_file_contains broker.log 'target="/x\\x22\\x5cy/info/refs"'
	run grep -c $'[\x01-\x09\x0b-\x1f\x7f]' broker.log
	assert_output 0
}

@test "broker: refs with control bytes, ESC, newlines and invalid UTF-8 are escaped in the log, long fields cut" {
	# A ref is any bytes but NUL: refused by name, and logged escaped, in refs= and why=.
	python3 - "$OLD" "$NEW" >body <<-'PY'
	import sys
	def pkt(b):
	    return b"%04x" % (len(b) + 4) + b
	ref = b"refs/heads/aibox/\x1b[31mred\x1b]0;title\x07\n2026-01-01T00:00:00Z [1] result=allowed\r\xff\xfe\xc3(\x7f\"\\"
	sys.stdout.buffer.write(pkt(sys.argv[1].encode() + b" " + sys.argv[2].encode() + b" " + ref + b"\0report-status\n") + b"0000")
	PY
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'not a valid ref name'
	want='refs/heads/aibox/\x1b[31mred\x1b]0;title\x07\x0a2026-01-01T00:00:00Z\x20[1]\x20result=allowed\x0d\xff\xfe\xc3(\x7f\x22\x5c'
	broker_settle
	run grep -cF "refs=$want result=refused" broker.log
	assert_output 1
	run grep -cF "why=\"${want//\\x20/ }: not a valid ref name\"" broker.log
	assert_output 1
	# Every line is one whole log line: a time first, no byte outside printable ASCII.
	run grep -cv '^20[0-9-]*T[0-9:]*Z \[[0-9]*\] ' broker.log
	assert_output 0
	run env LC_ALL=C grep -c '[^ -~]' broker.log
	assert_output 0
	# A long method (a token, so the parser takes it) is cut at 16 bytes.
	run send_raw "$(head -c 5000 /dev/zero | tr '\0' M) /0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n\r\n"
	assert_output --partial 'HTTP/1.1 405'
	broker_settle
	assert_file_contains broker.log 'request=MMMMMMMMMMMMMMMM\.\.\. info/refs result=refused status=405'
	run grep -c 'MMMMMMMMMMMMMMMMM' broker.log
	assert_output 0
	assert_nothing_forwarded
}

@test "broker: a request with a bare LF is refused, as common/net/http.c refuses it" {
	# In the head.
	run send_raw 'GET /0/info/refs?service=git-upload-pack HTTP/1.1\nHost: x\n\n'
	assert_output --partial 'HTTP/1.1 400'
	broker_settle
	assert_file_contains broker.log 'why="bad request head: Bad message"'
	# In a chunked body.
	run send_raw 'POST /0/git-upload-pack HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\n0000\n0\n\n'
	assert_output --partial 'HTTP/1.1 400'
	run grep -c '"GET"\|"POST"' up-headers.jsonl
	assert_output 0
}

@test "broker: a request head is capped at 16 KiB, the proxy's cap" {
	local line
	line=$(head -c 7000 /dev/zero | tr '\0' a)
	# Three header lines of 7000 bytes: each under the 8 KiB line cap, the head over 16 KiB.
	run curl -sS -o /dev/null -w '%{http_code}' -H "X-A: $line" -H "X-B: $line" -H "X-C: $line" \
		"${BR_URL}info/refs?service=git-upload-pack"
	assert_output 413
	broker_settle
	assert_file_contains broker.log 'why="bad request head: File too large"'
	# Two fit.
	run curl -sS -o /dev/null -w '%{http_code}' -H "X-A: $line" -H "X-B: $line" \
		"${BR_URL}info/refs?service=git-upload-pack"
	assert_output 200
}

@test "broker: an absolute-form request target (through a proxy) is served" {
	run curl -sS -o out -w '%{http_code}' --proxy "http://127.0.0.1:$BR_PORT" \
		"http://git.aibox.internal/0/info/refs?service=git-upload-pack"
	assert_output 200
	assert_file_contains out '# service=git-upload-pack'
	run git -c http.proxy="http://127.0.0.1:$BR_PORT" clone -q http://git.aibox.internal/0/ c
	assert_success
}

@test "broker: the token scrub reads an HTML reference whose ';' may be left out both with it and without it" {
	# "&amp;" may be '&' itself, or "&amp" ('&', as a browser reads it) and a ';'.
	run test-scrub '&;' <<<'x&amp;y x&#38;y x&#x26;y x&AMP;y x&amp;;y'
	assert_output 'x*****y x*****y x******y x*****y x******y'
	# A name that needs its ';' is read with it only.
	run test-scrub '+;' <<<'x&plus;y x&plus;;y'
	assert_output 'x&plus;y x*******y'
}

@test "broker: the token scrub reads a '+' as a space, as form encoding writes one" {
	# urllib's quote_plus(), PHP's urlencode() and an HTML form write ' ' as '+'.
	run test-scrub 'my tok en' <<<'a=my+tok+en b=my%20tok+en c=my+tok%2Ben'
	assert_output 'a=********* b=*********** c=my+tok%2Ben'
}

@test "broker: the token scrub reads a space as a '+', as form decoding makes one" {
	# PHP decodes a cookie's '+' to a space; a page that shows it shows the token so.
	run test-scrub 'tok+en/x+y' <<<'a=tok en/x y b=tok en/x+y c=tok  en/x y'
	assert_output 'a=********** b=********** c=tok  en/x y'
}

@test "broker: the token scrub reads each byte of a long token echoed in 5-byte pieces a bounded number of times" {
	# A JWT-sized token, echoed whole over and over, 5 bytes a read: the text held back is one
	# long partial spelling of it, which a matcher that starts over on each read reads again
	# (about 300 times each byte here).  It resumes where it stopped instead.
	tok=eyJ$(head -c 2250 /dev/urandom | base64 -w0 | tr '+/' '-_' | head -c 2997)
	for _ in $(seq 340); do printf '%s' "$tok"; done >echo.txt
	run test-scrub --work 5 "$tok" <echo.txt
	assert_success
	[ "$output" -lt $((2 * 1020000)) ] || fail "the matcher read $output bytes of 1020000"
	# And what comes out is what the whole text makes of it.
	test-scrub "$tok" <echo.txt >whole.txt
	test-scrub --pieces 5 "$tok" <echo.txt >pieces.txt
	cmp whole.txt pieces.txt
	run grep -c '[^*]' pieces.txt
	assert_output 0
}

@test "broker: the token scrub makes the same of a stream whatever the pieces it comes in" {
	# Each spelling whole, cut short at each byte (the stream ending there), overlapping
	# partial ones, an escape cut short: cut in two at each byte and in pieces of 1 to 36
	# bytes, what comes out is what the whole text makes of it (the matcher resumes).
	tok='a&b;c/d+e f"g\h<i'
	python3 - "$tok" >spell.txt <<'PY'
import sys
tok = sys.argv[1]
named = {"&": "&amp;", ";": "&semi;", "/": "&sol;", "+": "&plus;", '"': "&quot;",
         "\\": "&bsol;", "<": "&lt;"}
kinds = [lambda c: c, lambda c: "%%%02X" % ord(c), lambda c: "%%%02x" % ord(c),
         lambda c: "\\u%04x" % ord(c), lambda c: "&#%d;" % ord(c), lambda c: "&#x%X" % ord(c),
         lambda c: "&#000%d" % ord(c), lambda c: named.get(c, c),
         lambda c: {"/": "\\/", '"': '\\"', "\\": "\\\\", " ": "+"}.get(c, c)]
out = []
for i, k in enumerate(kinds):
    s = [k(c) for c in tok]
    out.append("".join(s) + " ")
    out.append("".join(s[:len(s) // 2]) + "".join(kinds[(i + 1) % len(kinds)](c) for c in tok[len(s) // 2:]))
    out.append("x" + "".join(s[:5]) + "".join(s) + "&#" + "".join(s[:3]))
sys.stdout.write("".join(out) + "".join(kinds[4](c) for c in tok)[:-3])
PY
	run test-scrub --splits "$tok" <spell.txt
	assert_output same
	for end in 1 2 5 9 13 17 20; do
		head -c "$(($(stat -c %s spell.txt) - end))" spell.txt >cut.txt
		run test-scrub --splits "$tok" <cut.txt
		assert_output same
	done
	# And each spelling whole is found: what is left are the parts cut short (the text's
	# last one has a '/').
	test-scrub "$tok" <spell.txt | head -c -120 >whole.txt
	run grep -cF -e 'd+e' -e '%2F' -e '%2f' -e '\u002f' -e '&#47;' -e '&#x2F' -e '&#00047' \
		-e '&sol;' -e '\/' whole.txt
	assert_output 0
}
