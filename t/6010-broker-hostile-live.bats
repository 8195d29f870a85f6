#!/usr/bin/env bats
# Live hostile requests against the broker's push boundary and token scrub: each crafted request
# is refused, or reaches the remote only in a form that changes nothing the
# rules forbid.
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
	# The remote takes push options; its pre-receive hook writes down what it got.
	git -C up/repo.git config receive.advertisePushOptions true
	mkdir -p up/repo.git/hooks
	printf '#!/bin/sh\necho "options=${GIT_PUSH_OPTION_COUNT:-none} ${GIT_PUSH_OPTION_0:-}" >>%s\ncat >>%s\n' \
		"$T/hook.log" "$T/hook.log" >up/repo.git/hooks/pre-receive
	chmod +x up/repo.git/hooks/pre-receive
}

teardown() {
	broker_teardown
	common_teardown
}

# raw_body FILE: python builds a body from the script on stdin (helpers pkt, OLD, NEW, pack).
raw_body() {
	python3 - "$OLD" "$NEW" >"$1"
}

post() {
	local svc=$1 file=$2
	shift 2
	curl -sS -o "$T/answer" -w '%{http_code}' -H "Content-Type: application/x-$svc-request" \
		"$@" --data-binary @"$file" "${BR_URL}$svc"
}

PY_HEAD='import hashlib, sys
OLD, NEW = sys.argv[1].encode(), sys.argv[2].encode()
Z = b"0" * 40
def pkt(b, upper=False):
    h = b"%04X" % (len(b) + 4) if upper else b"%04x" % (len(b) + 4)
    return h + b
p = b"PACK\0\0\0\2\0\0\0\0"
pack = p + hashlib.sha1(p).digest()
out = sys.stdout.buffer.write
'

@test "broker live: upper-case pkt-line lengths are read as git reads them, push options still refused" {
	before=$(up_refs)
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/po12345\0report-status push-options\n", True) + b"0000" + pkt(b"ci.variable=X=1\n") + b"0000" + pack)
	EOF2
	grep -q '^00[0-9A-F]*[A-F]' body
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'push options (git push -o) are not allowed'
	assert_file_not_exists hook.log
	assert_equal "$(up_refs)" "$before"
}

@test "broker live: a second command list after the flush updates nothing" {
	before=$(up_refs)
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/a\0report-status\n") + b"0000" + pkt(OLD + b" " + Z + b" refs/heads/main\n") + b"0000" + pack)
	EOF2
	run post git-receive-pack body
	assert_output 200
	run cat answer
	refute_output --partial 'ok refs/heads/main'
	assert_equal "$(git -C up/repo.git rev-parse main)" "$OLD"
	run git -C up/repo.git rev-parse -q --verify refs/heads/aibox/a
	assert_failure
	assert_equal "$(up_refs)" "$before"
}

@test "broker live: a delim or response-end pkt in the command list is refused" {
	for end in 0001 0002; do
		raw_body body <<-EOF2
		$PY_HEAD
		out(pkt(Z + b" " + NEW + b" refs/heads/aibox/a\0report-status push-options\n") + b"$end" + pkt(b"ci.variable=X=1\n") + b"0000" + pack)
		EOF2
		run post git-receive-pack body
		assert_output 400
	done
	run grep -c '"POST"' up-headers.jsonl
	assert_output 0
}

@test "broker live: shallow lines, caps on a later line, v2 bodies and a push-cert are refused" {
	before=$(up_refs)
	raw_body body1 <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/a\0report-status\n") + pkt(Z + b" " + NEW + b" refs/heads/aibox/b\0push-options\n") + b"0000" + pkt(b"ci.variable=X=1\n") + b"0000" + pack)
	EOF2
	raw_body body2 <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/a\0report-status\n") + pkt(b"shallow " + OLD + b"\0push-options\n") + b"0000" + pkt(b"ci.variable=X=1\n") + b"0000" + pack)
	EOF2
	raw_body body3 <<-EOF2
	$PY_HEAD
	out(pkt(b"command=push\n") + b"0001" + pkt(Z + b" " + NEW + b" refs/heads/aibox/a\n") + b"0000" + pack)
	EOF2
	raw_body body4 <<-EOF2
	$PY_HEAD
	out(pkt(b"push-cert\0report-status push-options\n") + pkt(b"certificate version 0.1\n") + b"0000" + pack)
	EOF2
	for b in body1 body2 body3 body4; do
		run post git-receive-pack "$b" -H 'Git-Protocol: version=2'
		assert_output 400
	done
	assert_file_not_exists hook.log
	assert_equal "$(up_refs)" "$before"
}

@test "broker live: a gzip body with a second member, or trailing bytes, is refused" {
	raw_body plain <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/a\0report-status\n") + b"0000")
	EOF2
	raw_body evil <<-EOF2
	$PY_HEAD
	out(pkt(b"ci.variable=X=1\n") + b"0000" + pack)
	EOF2
	{ gzip -c plain; gzip -c evil; } >two.gz
	run post git-receive-pack two.gz -H 'Content-Encoding: gzip'
	assert_output 400
	{ gzip -c plain; printf 'junk'; } >junk.gz
	run post git-receive-pack junk.gz -H 'Content-Encoding: gzip'
	assert_output 400
	run grep -c '"POST"' up-headers.jsonl
	assert_output 0
}

@test "broker live: with protocol v1 and v2 asked for, the advertisement still drops push-options" {
	for v in 1 2; do
		run curl -sS -H "Git-Protocol: version=$v" "${BR_URL}info/refs?service=git-receive-pack"
		assert_success
		refute_output --partial 'push-options'
	done
	git clone -q "$BR_URL" c
	git -C c checkout -q -b aibox/o
	git -C c commit -q --allow-empty -m o
	for v in 0 1 2; do
		run git -C c -c protocol.version=$v push -o ci.variable=X=1 origin aibox/o
		assert_failure
		assert_output --partial 'does not support push options'
	done
	assert_file_not_exists hook.log
}

@test "broker live: a chunked push with chunk extensions and trailers is checked as decoded" {
	before=$(up_refs)
	{
		printf 'POST /0/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nTransfer-Encoding: chunked\r\n\r\n'
		line="$Z40 $NEW refs/heads/main"
		printf '%x;ext="refs/heads/aibox/a"\r\n%04x%s\r\n' $((${#line} + 4)) $((${#line} + 4)) "$line"
		printf '4\r\n0000\r\n0\r\nX-Trailer: refs/heads/aibox/a\r\n\r\n'
	} >req
	run curl -sS --max-time 5 "telnet://127.0.0.1:$BR_PORT" <req
	assert_output --partial 'this branch may not be pushed'
	assert_equal "$(up_refs)" "$before"
}

@test "broker live: a pipelined second request on one connection is not served" {
	before=$(up_refs)
	l1="$Z40 $NEW refs/heads/aibox/ok"
	l2="$OLD $Z40 refs/heads/main"
	b1=$(printf '%04x%s0000' $((${#l1} + 4)) "$l1")
	b2=$(printf '%04x%s0000' $((${#l2} + 4)) "$l2")
	{
		printf 'GET /0/info/refs?service=git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n'
		printf 'POST /0/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' ${#b2} "$b2"
	} >req
	run curl -sS --max-time 8 "telnet://127.0.0.1:$BR_PORT" <req
	assert_success
	run grep -c '"POST"' up-headers.jsonl
	assert_output 0
	assert_equal "$(up_refs)" "$before"
	: "$b1"
}

@test "broker live: pkt-line lengths at the edges: 0004, fff0, fff1, ffff are read as the broker's rules say" {
	before=$(up_refs)
	for len in 0004 fff1 ffff FFFF; do
		raw_body body <<-EOF2
		$PY_HEAD
		out(b"$len" + b"a" * 70000)
		EOF2
		run post git-receive-pack body
		assert_output 400
	done
	# fff0 is the largest pkt-line: a command line of that length is read, and its ref refused by name (over 1024 bytes).
	raw_body body <<-EOF2
	$PY_HEAD
	line = Z + b" " + NEW + b" refs/heads/main/" + b"a" * (65516 - 97) + b"\0report-status"
	line = line[:65516]
	out(pkt(line) + b"0000" + pack)
	EOF2
	head -c 4 body >len
	assert_file_contains len '^fff0$'
	run post git-receive-pack body
	assert_output 200
	assert_file_contains answer 'not a valid ref name'
	run grep -c '"POST"' up-headers.jsonl
	assert_output 0
	assert_equal "$(up_refs)" "$before"
}

@test "broker live: GET and POST confusion, HTTP/1.0, and a receive-pack body on the upload-pack path" {
	before=$(up_refs)
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(OLD + b" " + Z + b" refs/heads/main\0report-status\n") + b"0000")
	EOF2
	run curl -sS -o /dev/null -w '%{http_code}' --data-binary @body -X GET "${BR_URL}git-receive-pack"
	assert_output 405
	run curl -sS -o /dev/null -w '%{http_code}' --data-binary @body "${BR_URL}info/refs?service=git-receive-pack"
	assert_output 405
	run curl -sS -o /dev/null -w '%{http_code}' -X GET -H 'Transfer-Encoding: chunked' --data-binary @body \
		"${BR_URL}info/refs?service=git-receive-pack"
	assert_output 400
	run curl -sS -0 -o "$T/answer" -w '%{http_code}' -H 'Content-Type: application/x-git-receive-pack-request' \
		--data-binary @body "${BR_URL}git-receive-pack"
	assert_output 200
	assert_file_contains answer 'deleting branches is not allowed'
	# On the upload-pack path it reaches upload-pack, which updates nothing.
	run post git-upload-pack body
	assert_equal "$(up_refs)" "$before"
	run curl -sS -o /dev/null -w '%{http_code}' --data-binary @body "${BR_URL}.git/git-receive-pack?x"
	assert_output 404
}

# reflect_restart: the remote replaced by one that reflects the Authorization header.
reflect_restart() {
	kill "$UP_PID"
	wait "$UP_PID" || true
	rm -f up.port
	start_upstream --reflect
}

# token_reflected DECODE: which of reflect_fetch's files hold $GIT_TOKEN or its Basic
# credential once read back by DECODE: percent (%XX decoded), json (a JSON string's
# escapes decoded) or html (character references decoded; then the base64 characters
# that only the token's bytes make, at each of three offsets, count too, and in
# base64url's alphabet with b64url).  Prints nothing when none does.
token_reflected() {
	python3 - "$1" "$GIT_TOKEN" head.txt ok.txt errhead.txt err.txt <<-'PY'
	import base64, html, re, sys, urllib.parse
	decode, tok = sys.argv[1], sys.argv[2]
	forms = [tok, base64.b64encode(("x-access-token:" + tok).encode()).decode()]
	if decode in ("html", "b64url"):
	    for r in range(3):
	        enc = base64.b64encode(b"\0" * r + tok.encode() + b"\0\0").decode()
	        forms.append(enc[(8 * r + 5) // 6:8 * (r + len(tok)) // 6])
	        if decode == "b64url":
	            forms.append(forms[-1].replace("+", "-").replace("/", "_"))
	def unescape(m):
	    e = m.group(1)
	    return chr(int(e[3:], 16)) if e[0] == "u" else e
	for f in sys.argv[3:]:
	    text = open(f, encoding="latin-1").read()
	    if decode == "percent":
	        text = urllib.parse.unquote(text, encoding="latin-1")
	    elif decode == "html":
	        text = html.unescape(text)
	    else:
	        text = re.sub(r'\\(u00[0-9a-fA-F]{2}|[/"\\])', unescape, text)
	    for i, s in enumerate(forms):
	        if s in text:
	            what = ("the token", "the credential", "the token's base64")[min(i, 2)]
	            print("%s holds %s" % (f, what))
	PY
}

# reflect_each_auth DECODE LINE...: with --auth basic, then bearer, the client's files hold
# every LINE (a line start the remote wrote) and, read back by DECODE (token_reflected),
# neither the token nor any form of it.
reflect_each_auth() {
	local decode=$1 mode line
	shift
	for mode in basic bearer; do
		reflect_fetch "$mode"
		for line in "$@"; do
			assert_file_contains ok.txt "^$line: "
		done
		run token_reflected "$decode"
		assert_output ''
		kill "$BR_PID"
		wait "$BR_PID" || true
	done
}

@test "broker live: a reflected token, percent-encoded with some bytes left raw, does not reach the client" {
	# Characters that base64 and URL-encoding change.
	export GIT_TOKEN="t0k/en+$RANDOM=x%y~z" UPSTREAM_TOKEN="t0k/en+$RANDOM=x%y~z"
	reflect_restart
	# Percent-decoded, nothing the client got holds the token or the Basic credential.
	reflect_each_auth percent quoted-path
}

@test "broker live: a reflected token, JSON-escaped as PHP writes it, does not reach the client" {
	# A token with '/' and '"', which JSON escapes; "???" (15 + 12 bytes in) makes a '/' of
	# its Basic credential as well.
	tok="t0k/en\"$(printf %05d "$RANDOM")???/"
	printf 'x-access-token:%s' "$tok" | base64 -w0 | grep -q /
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	reflect_restart
	# JSON escapes read back, nothing the client got holds the token or the Basic credential.
	reflect_each_auth json json-php json-u
}

@test "broker live: a reflected token, HTML-escaped or in base64 inside a longer string, does not reach the client" {
	# '>' and '?' 2 bytes into a group of 3 make a '+' and a '/' of the Basic credential
	# (15 + 2 and 15 + 5 bytes in), which HTML escapers change too (Go's writes &#43;).
	tok="t0>k&?$(printf %03d $((RANDOM % 1000)))en<'~+=/\"x"
	printf 'x-access-token:%s' "$tok" | base64 -w0 | grep -q '+.*/'
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	reflect_restart
	# References decoded, nothing holds the token, the credential or the token's base64.
	reflect_each_auth html html-go html-php html-hex html-dec html-named b64-at-0 b64-at-1 b64-at-2
}

@test "broker live: a reflected token in base64url inside a longer string does not reach the client" {
	# '>' and '?' make a '+' and a '/' of the token's base64 at each offset: '-' and '_' in
	# base64url's alphabet (JWTs, Go's base64.URLEncoding).
	tok="t0>k?en>?$(printf %03d $((RANDOM % 1000)))>?x>?y"
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	reflect_restart
	reflect_each_auth b64url b64url-at-0 b64url-at-1 b64url-at-2
}

@test "broker live: a Basic credential is scrubbed whole, though the token's base64 in it comes first" {
	# The credential holds the token's base64 (x-access-token: is 15 bytes, a whole number of
	# groups), which ends 2 bytes before it; the remote pauses there ("auth: Basic " is 12).
	tok=tok-s3cr3t-value-$(printf %05d "$RANDOM")
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	kill "$UP_PID"
	wait "$UP_PID" || true
	rm -f up.port
	start_upstream --reflect --pause-at $((12 + 20 + 22 * 8 / 6))
	reflect_fetch basic
	run grep -c '^auth: Basic \**$' ok.txt
	assert_output 1
}

@test "broker live: a compressed answer is refused, whatever Content-Encoding header comes first" {
	# A compressed body could not be scrubbed: one gzip header among others refuses it too.
	kill "$UP_PID"
	wait "$UP_PID" || true
	for encodings in "gzip" "identity gzip" "identity"; do
		rm -f up.port
		args=()
		for e in $encodings; do
			args+=(--encoding "$e")
		done
		start_upstream --reflect "${args[@]}"
		reflect_fetch basic
		if [ "$encodings" = identity ]; then
			# No compression at all: passed on, scrubbed.
			assert_file_contains head.txt '^HTTP/1.1 200 '
			assert_file_contains ok.txt '^auth: Basic \*\*\*\*'
		else
			assert_file_contains head.txt '^HTTP/1.1 502 '
			assert_file_contains ok.txt 'the remote sent a compressed answer'
			assert_file_contains broker.log 'why="localhost:[0-9]* sent a compressed answer"'
		fi
		kill "$BR_PID" "$UP_PID"
		wait "$BR_PID" "$UP_PID" || true
		: >broker.log
	done
}

@test "broker live: a token of backslashes is scrubbed in time linear in the answer" {
	# Each '\' may be itself or "\\": a matcher that tries both at each byte doubles its work
	# per byte on a run of backslashes one short of a match (the reflected "auth: Bearer
	# <token>" line). 36 of them took minutes.
	tok=$(printf '\\%.0s' {1..36})
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	reflect_restart
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --auth bearer
	run timeout 20 curl -sS -o "$T/ok.txt" "${BR_URL}info/refs?service=git-upload-pack"
	assert_success
	assert_file_contains ok.txt '^auth: Bearer \*\*\*\*'
	run grep -cF -e "$tok" ok.txt
	assert_output 0
}

@test "broker live: an answer in small writes, with a long token, costs the broker time linear in the answer" {
	# A JWT-sized token (3000 bytes: its spellings up to 54 KB) and 2 MB that spell none of it,
	# in 64-byte writes: a relay that scans its whole held-back tail again on each read
	# spent 13 s of CPU here, against none for the same bytes in 8 KB writes.
	tok=eyJ$(head -c 2250 /dev/urandom | base64 -w0 | tr '+/' '-_' | head -c 2997)
	export GIT_TOKEN="$tok" UPSTREAM_TOKEN="$tok"
	kill "$UP_PID"
	wait "$UP_PID" || true
	rm -f up.port
	start_upstream --reflect --chunk 64 --pad 2000000
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --auth bearer
	run timeout 60 curl -sS -o "$T/ok.txt" "${BR_URL}info/refs?service=git-upload-pack"
	assert_success
	broker_settle
	# The broker's CPU time, its children's included (ended or not), in clock ticks.
	ticks=$(cat "/proc/$BR_PID/stat" $(sed 's|[0-9]*|/proc/&/stat|g' "/proc/$BR_PID/task/$BR_PID/children") |
		awk '{ s += $14 + $15 + $16 + $17 } END { print s }')
	[ "$ticks" -lt $((3 * $(getconf CLK_TCK))) ] || fail "the broker spent $ticks ticks"
	assert_file_contains ok.txt '^auth: Bearer \*\*\*\*'
	run grep -cF -e "$tok" ok.txt
	assert_output 0
	run awk '/^\.+$/ { print length($0) }' ok.txt
	assert_output 2000000
}

# restart_upstream ARGS...: the remote again with ARGS, and a broker in front of it.
restart_upstream() {
	kill "$BR_PID" "$UP_PID"
	wait "$BR_PID" "$UP_PID" 2>/dev/null || true
	rm -f up.port
	start_upstream "$@" || return 1
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
}

# send_short FILE EXTRA: POST FILE as a receive-pack body whose Content-Length
# says EXTRA bytes more (EXTRA "chunked": as a chunked body without its last
# chunk), then end the connection's sending side.
send_short() {
	python3 - "$BR_PORT" "$1" "$2" <<-'EOF2'
	import socket, sys
	body = open(sys.argv[2], "rb").read()
	if sys.argv[3] == "chunked":
	    frame = b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(body), body)
	else:
	    frame = b"Content-Length: %d\r\n\r\n" % (len(body) + int(sys.argv[3])) + body
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	s.sendall(b"POST /0/git-receive-pack HTTP/1.1\r\nHost: x\r\n"
	          b"Content-Type: application/x-git-receive-pack-request\r\n" + frame)
	s.shutdown(socket.SHUT_WR)
	s.settimeout(60)
	while s.recv(65536):
	    pass
	EOF2
}

# push_line: the broker.log line of the last push (waiting for one: a check
# that waits on the remote leaves the broker's children asleep, not done).
push_line() {
	broker_settle
	wait_until 30 grep -q 'op=push request=POST' broker.log
	grep 'op=push request=POST' broker.log | tail -n 1
}

@test "broker live: a push body cut short after a whole pack, which the remote applies, is logged landed" {
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/short\0report-status\n") + b"0000" + pack)
	EOF2
	send_short body 100
	run push_line
	assert_output --partial 'why="reading the request: Bad message"'
	assert_output --partial 'result=landed'
	assert_output --partial 'check="refs/heads/aibox/short landed"'
	# t/git-https-upstream reads a short body as the end, as the log says.
	assert_equal "$(git -C up/repo.git rev-parse refs/heads/aibox/short)" "$NEW"
}

# cut_push REF [FAKE ARGS...]: a remote started with --cut-push and FAKE ARGS, and
# a push creating REF at NEW that it applies and then drops; the log's line into output.
cut_push() {
	local ref=$1
	shift
	restart_upstream --cut-push "$@"
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" $ref\0report-status\n") + b"0000" + pack)
	EOF2
	run post git-receive-pack body
	assert_output 502
	run push_line
}

@test "broker live: a chunked push body without its last chunk is not applied, and logged not landed" {
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/chunked\0report-status\n") + b"0000" + pack)
	EOF2
	send_short body chunked
	run push_line
	assert_output --partial 'result=failed'
	assert_output --partial 'check="refs/heads/aibox/chunked not landed"'
	run git -C up/repo.git rev-parse -q --verify refs/heads/aibox/chunked
	assert_failure
}

@test "broker live: a push the remote applies before it drops the connection is logged landed" {
	cut_push refs/heads/aibox/cut
	assert_equal "$(git -C up/repo.git rev-parse refs/heads/aibox/cut)" "$NEW"
	assert_output --partial 'result=landed'
	assert_output --partial 'check="refs/heads/aibox/cut landed"'
	refute_output --partial 'result=failed'
	# The check: the remote's refs for receive-pack, as git asks for them.
	run grep '"GET".*info/refs?service=git-receive-pack.*git/aibox-broker' up-headers.jsonl
	assert_success
}

@test "broker live: a push whose ref moved on at the remote before the check is logged unknown" {
	cut_push refs/heads/aibox/moved --move-after-push "refs/heads/aibox/moved=$OLD"
	assert_output --partial 'result=unknown'
	assert_output --partial "check=\"refs/heads/aibox/moved unknown (the remote has $OLD)\""
	assert_equal "$(git -C up/repo.git rev-parse refs/heads/aibox/moved)" "$OLD"
}

@test "broker live: a push the remote refused before it dropped the connection is logged not landed" {
	# An object the remote does not have: receive-pack refuses the update.
	restart_upstream --cut-push
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + b"ab" * 20 + b" refs/heads/aibox/missing\0report-status\n") + b"0000" + pack)
	EOF2
	run post git-receive-pack body
	assert_output 502
	run git -C up/repo.git rev-parse -q --verify refs/heads/aibox/missing
	assert_failure
	run push_line
	assert_output --partial 'result=failed'
	assert_output --partial 'check="refs/heads/aibox/missing not landed"'
}

@test "broker live: the check of a push reads at most 16 MiB of the remote's refs" {
	cut_push refs/heads/aibox/big --refs-pad $((17 << 20))
	assert_output --partial 'result=unknown'
	assert_output --partial 'check="refs/heads/aibox/big unknown (cannot check: its answer is longer than 16777216 bytes)"'
	assert_equal "$(git -C up/repo.git rev-parse refs/heads/aibox/big)" "$NEW"
}

@test "broker live: the check of a push waits at most 10 s for the remote's refs" {
	start=$(date +%s)
	cut_push refs/heads/aibox/slow --refs-delay 30
	assert_output --partial 'result=unknown'
	assert_output --partial 'check="refs/heads/aibox/slow unknown (cannot check: '
	[ $(($(date +%s) - start)) -lt 25 ]
}

@test "broker live: a check answered with what is no advertisement is logged unknown" {
	cut_push refs/heads/aibox/garbage --refs-garbage
	assert_output --partial 'result=unknown'
	assert_output --partial 'check="refs/heads/aibox/garbage unknown (cannot check: its answer is not a receive-pack advertisement)"'
}

@test "broker live: a broker checks the remote's refs after at most 32 pushes that did not finish" {
	raw_body body <<-EOF2
	$PY_HEAD
	out(pkt(Z + b" " + NEW + b" refs/heads/aibox/many\0report-status\n") + b"0000" + pack)
	EOF2
	for _ in $(seq 33); do
		send_short body 100
	done
	broker_settle
	run grep -c 'check="refs/heads/aibox/many landed"' broker.log
	assert_output 32
	run push_line
	assert_output --partial 'result=unknown'
	assert_output --partial 'check="refs/heads/aibox/many unknown (cannot check: the broker made its 32 checks)"'
	run grep -c '"GET"' up-headers.jsonl
	assert_output 32
}

@test "broker live: a push of 1000 refs that the remote applies before it drops the connection is checked ref by ref" {
	restart_upstream --cut-push
	raw_body body <<-EOF2
	$PY_HEAD
	cmds = b"".join(pkt(Z + b" " + NEW + b" refs/heads/aibox/r%d" % i + (b"\0report-status" if i == 0 else b"") + b"\n") for i in range(1000))
	out(cmds + b"0000" + pack)
	EOF2
	start=$(date +%s)
	run post git-receive-pack body
	assert_output 502
	run push_line
	assert_output --partial 'result=landed'
	run grep -o 'refs/heads/aibox/r[0-9]* landed' broker.log
	assert_equal "$(printf '%s\n' "$output" | wc -l)" 1000
	assert_equal "$(git -C up/repo.git for-each-ref refs/heads/aibox | wc -l)" 1000
	[ $(($(date +%s) - start)) -lt 20 ]
}
