#!/usr/bin/env bats
# The real path from the VM's git to the remote: aibox-proxy (--broker-fd)
# hands requests for git.aibox.internal to aibox-broker (--handoff-fd) over a
# SOCK_SEQPACKET socket pair, as aibox task joins them; the broker reaches
# t/git-https-upstream.  git is configured as the init configures it in the VM.
load lib-common
load lib-tls
load lib-broker
load lib-proxy

setup() {
	common_setup
	broker_setup
	start_upstream
}

teardown() {
	stop_pair
	broker_teardown
	common_teardown
}

# start_pair [BROKER REMOTE OPTIONS...]: proxy and broker joined by a socket
# pair; sets PROXY, PROXY_PORT, PX_PID (the proxy), BK_PID (the broker).
# Without options: remote 0 is the upstream, fetch and push aibox/*.
start_pair() {
	[ $# -gt 0 ] || set -- --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	rm -f "$T/pair.pids" "$T/proxy.ready"
	env -u UPSTREAM_TOKEN "$TOP/t/socketpair-run" --pid-file "$T/pair.pids" -- \
		env -u GIT_TOKEN aibox-proxy --listen 127.0.0.1:0 --ready-fd 5 --log "$T/proxy.log" --broker-fd '{fd}' -- \
		aibox-broker "$@" --handoff-fd '{fd}' --log "$T/broker.log" --ca "$T/tls/ca.pem" \
		5>"$T/proxy.ready" 2>"$T/pair.err" &
	PAIR_PID=$!
	BROKER_PIDS+=("$PAIR_PID")
	wait_until 20 test -s "$T/pair.pids" || return 1
	PX_PID=$(sed -n 1p "$T/pair.pids")
	BK_PID=$(sed -n 2p "$T/pair.pids")
	wait_until 5 ready_or_gone "$T/proxy.ready" "$PX_PID" || { cat "$T/pair.err" >&2; return 1; }
	PROXY_PORT=$(sed -n 's/^ready 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/proxy.ready")
	[ -n "$PROXY_PORT" ] || { cat "$T/pair.err" >&2; return 1; }
	PROXY=http://127.0.0.1:$PROXY_PORT
}

stop_pair() {
	if [ -n "${PX_PID:-}" ]; then
		kill "$PX_PID" 2>/dev/null || true
		wait "$PAIR_PID" 2>/dev/null || true
		PX_PID=
	fi
}

# vm_git_config N URL: what the init writes for git: entry N with URL.
vm_git_config() {
	git config --global --add "url.http://git.aibox.internal/$1/.insteadOf" "$2"
	git config --global --add "url.http://git.aibox.internal/$1/.insteadOf" "$2.git"
	git config --global http.http://git.aibox.internal/.proxy "$PROXY"
}

@test "broker+proxy: clone, fetch and an allowed push through the real proxy" {
	start_pair
	# The remote as the project knows it; it does not resolve here, only the broker reaches it.
	vm_git_config 0 https://git.example.com/o/r
	for v in 0 2; do
		run git -c protocol.version=$v clone -q https://git.example.com/o/r "c$v"
		assert_success
	done
	git -C up/repo.git branch fresh main
	run git -C c2 fetch -q origin
	assert_success
	git -C c2 rev-parse -q --verify origin/fresh
	git -C c2 checkout -q -b aibox/through-proxy
	git -C c2 commit -q --allow-empty -m through
	run git -C c2 push origin HEAD:aibox/through-proxy
	assert_success
	assert_equal "$(git -C up/repo.git rev-parse aibox/through-proxy)" "$(git -C c2 rev-parse HEAD)"
	# The proxy logged hand-offs, named by remote, and connected nowhere.
	run grep -c '^[^ ]* allowed git.aibox.internal:80 GET remote=0 (handed to aibox-broker) ' proxy.log
	[ "$output" -ge 3 ]
	run grep -c '^[^ ]* allowed git.aibox.internal:80 POST remote=0 (handed to aibox-broker) ' proxy.log
	[ "$output" -ge 3 ]
	run grep -v 'git.aibox.internal:80 ' proxy.log
	assert_output ''
	broker_settle "$BK_PID"
	assert_file_contains broker.log 'refs=refs/heads/aibox/through-proxy(create) result=allowed status=200'
}

@test "broker+proxy: a push and a clone of more than 64 MiB pass through the handed-over socket" {
	# The proxy hands over a non-blocking socket; the broker must not take
	# EAGAIN for an error (a short read ends the command list, a short write
	# the answer).  Random bytes: git cannot compress them below 64 MiB.
	start_pair
	vm_git_config 0 https://git.example.com/o/r
	git clone -q https://git.example.com/o/r c
	git -C c checkout -q -b aibox/big
	head -c $((66 << 20)) /dev/urandom >c/big.bin
	git -C c add big.bin
	git -C c commit -q -m big
	run git -C c push origin aibox/big
	assert_success
	assert_equal "$(git -C up/repo.git rev-parse aibox/big)" "$(git -C c rev-parse HEAD)"
	run git clone -q --branch aibox/big https://git.example.com/o/r c2
	assert_success
	cmp c/big.bin c2/big.bin
	broker_settle "$BK_PID"
	# Both went through the broker, each more than 64 MiB.
	up=$(sed -n 's/.*op=push request=POST git-receive-pack refs=refs\/heads\/aibox\/big(create) result=allowed status=200 bytes_up=\([0-9]*\).*/\1/p' broker.log)
	[ "$up" -gt $((64 << 20)) ]
	down=$(sed -n 's/.*op=fetch request=POST git-upload-pack result=allowed status=200 bytes_up=[0-9]* bytes_down=\([0-9]*\).*/\1/p' broker.log | sort -n | tail -1)
	[ "$down" -gt $((64 << 20)) ]
}

@test "broker+proxy: a refused push reaches git as remote: and ng lines, upstream unchanged" {
	start_pair
	vm_git_config 0 https://git.example.com/o/r
	git clone -q https://git.example.com/o/r c
	before=$(up_refs)
	git -C c commit -q --allow-empty -m nope
	run git -C c push origin HEAD:main
	assert_failure
	assert_output --partial "remote: aibox-broker: refusing refs/heads/main: this branch may not be pushed"
	assert_output --partial "! [remote rejected] HEAD -> main (this branch may not be pushed"
	run git -C c push origin HEAD:other
	assert_failure
	assert_output --partial "[remote rejected] HEAD -> other"
	run git -C c push origin v0.1:refs/tags/v9
	assert_failure
	run git -C c push origin :old-feature
	assert_failure
	assert_equal "$(up_refs)" "$before"
	broker_settle "$BK_PID"
	run grep -c 'result=refused' broker.log
	assert_output 4
}

@test "broker+proxy: push options are not advertised, and a push that carries them is refused" {
	# The remote would take them (GitLab: merge_request.create, ci.variable=...).
	git -C up/repo.git config receive.advertisePushOptions true
	run git -C up/repo.git receive-pack --http-backend-info-refs .
	assert_output --partial push-options
	start_pair
	vm_git_config 0 https://git.example.com/o/r
	git clone -q https://git.example.com/o/r c
	before=$(up_refs)
	run curl -sS --proxy "$PROXY" 'http://git.aibox.internal/0/info/refs?service=git-receive-pack'
	assert_output --partial report-status
	refute_output --partial push-options
	git -C c commit -q --allow-empty -m opts
	run git -C c push -o merge_request.create -o merge_request.target=main \
		-o ci.variable=X=1 origin HEAD:aibox/opts
	assert_failure
	assert_output --partial 'the receiving end does not support push options'
	# A client that sends them all the same: git's ng and remote: lines.
	old=$(git -C up/repo.git rev-parse main)
	python3 - "$old" >push.body <<-'PY'
	import hashlib, sys
	def pkt(b):
	    return b"%04x" % (len(b) + 4) + b
	oid = sys.argv[1].encode()
	body = pkt(b"0" * 40 + b" " + oid + b" refs/heads/aibox/raw\0report-status side-band-64k push-options\n")
	body += b"0000" + pkt(b"ci.variable=X=1\n") + pkt(b"merge_request.create\n") + b"0000"
	pack = b"PACK\0\0\0\2\0\0\0\0"
	sys.stdout.buffer.write(body + pack + hashlib.sha1(pack).digest())
	PY
	run curl -sS --proxy "$PROXY" -H 'Content-Type: application/x-git-receive-pack-request' \
		--data-binary @push.body http://git.aibox.internal/0/git-receive-pack
	assert_output --partial 'aibox-broker: refusing this push: push options (git push -o) are not allowed'
	assert_output --partial 'ng refs/heads/aibox/raw push options (git push -o) are not allowed'
	assert_equal "$(up_refs)" "$before"
	broker_settle "$BK_PID"
	assert_file_contains broker.log 'refs=refs/heads/aibox/raw(create) result=refused status=200 .* why="push options (git push -o) are not allowed"'
	run grep -c '"POST", "path": "/repo.git/git-receive-pack"' up-headers.jsonl
	assert_output 0
}

@test "broker+proxy: the VM's credentials are dropped, the token is nowhere but upstream" {
	start_pair
	vm_git_config 0 https://git.example.com/o/r
	vm=$(printf 'vm:vm-secret-123' | base64 -w0)
	export GIT_TRACE_CURL=$T/client-trace.txt
	run git -c http.extraHeader="Authorization: Basic $vm" clone -q https://git.example.com/o/r c
	assert_success
	git -C c checkout -q -b aibox/creds
	git -C c commit -q --allow-empty -m creds
	run git -C c -c http.extraHeader="Authorization: Bearer vm-secret-123" push origin aibox/creds
	assert_success
	unset GIT_TRACE_CURL
	run grep -c -e vm-secret-123 -e "$vm" up-headers.jsonl
	assert_output 0
	want=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -c "\"Authorization\", \"Basic $want\"" up-headers.jsonl
	assert_output "$(wc -l <up-headers.jsonl)"
	# The token, plain or encoded, in no file here but the upstream's own header log.
	run grep -rlF -e "$GIT_TOKEN" -e "$want" --exclude=up-headers.jsonl "$T"
	assert_output ''
	assert_file_exists client-trace.txt
	# Not in the proxy's or the broker's environment either.
	run grep -c -aF "$GIT_TOKEN" "/proc/$BK_PID/environ" "/proc/$PX_PID/environ"
	refute_output --partial ':1'
}

@test "broker+proxy: bad remote numbers, CONNECT and other ports are refused" {
	start_pair
	# Not a number: the proxy refuses it itself.
	run raw_request 'GET http://git.aibox.internal/x/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'HTTP/1.1 403 Forbidden'
	assert_output --partial 'aibox-proxy: no remote number in the path'
	# The broker's rule (breq_remote_number): digits only, no leading zero, below 1000.
	for n in 007 -0 +0 00 1000; do
		run raw_request "GET http://git.aibox.internal/$n/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n"
		assert_output --partial 'HTTP/1.1 403 Forbidden'
		assert_output --partial 'aibox-proxy: no remote number in the path'
	done
	# A number with no remote behind it: the broker says so.
	run raw_request 'GET http://git.aibox.internal/7/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'HTTP/1.1 404'
	broker_settle "$BK_PID"
	assert_file_contains broker.log 'why="no such remote"'
	run raw_request 'CONNECT git.aibox.internal:443 HTTP/1.1\r\nHost: git.aibox.internal:443\r\n\r\n'
	assert_output --partial 'HTTP/1.1 403 Forbidden'
	assert_output --partial 'not CONNECT'
	run raw_request 'GET http://git.aibox.internal:8080/0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal:8080\r\n\r\n'
	assert_output --partial 'HTTP/1.1 403 Forbidden'
	assert_output --partial 'port 80 only'
	# A head the proxy will not read whole is refused before any hand-off.
	big=$(head -c 1000 /dev/zero | tr '\0' a)
	hdrs=
	for i in $(seq 20); do hdrs+="X-Big-$i: $big\r\n"; done
	run raw_request "GET http://git.aibox.internal/0/info/refs HTTP/1.1\r\nHost: git.aibox.internal\r\n$hdrs\r\n"
	assert_output --partial 'HTTP/1.1 403 Forbidden'
	assert_output --partial 'too large'
	run grep -c 'handed to aibox-broker' proxy.log
	assert_output 1
	# The upstream saw none of it.
	assert_file_empty up-headers.jsonl
	# Both still serve.
	vm_git_config 0 https://git.example.com/o/r
	run git clone -q https://git.example.com/o/r c
	assert_success
}

@test "broker+proxy: without --broker-fd, git.aibox.internal is refused with a reason" {
	start_proxy
	run raw_request 'GET http://git.aibox.internal/0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'HTTP/1.1 403 Forbidden'
	assert_output --partial 'aibox-proxy: no git remotes'
	assert_file_contains proxy.log 'refused git.aibox.internal:80 GET remote=0 (no git remotes'
	# Even when the allow list holds the name: it is never connected to.
	stop_proxy
	start_proxy --allow git.aibox.internal
	run raw_request 'GET http://git.aibox.internal/0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'aibox-proxy: no git remotes'
	stop_proxy
}

@test "broker+proxy: the broker gone: 502 to the client, the proxy goes on" {
	start_pair
	kill "$BK_PID"
	wait_until 5 dead "$BK_PID"
	run raw_request 'GET http://git.aibox.internal/0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'HTTP/1.1 502 Bad Gateway'
	assert_output --partial 'aibox-proxy: aibox-broker is not running'
	run raw_request 'GET http://git.aibox.internal/0/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.aibox.internal\r\n\r\n'
	assert_output --partial 'HTTP/1.1 502 Bad Gateway'
	alive "$PX_PID"
	assert_file_contains proxy.log 'failed git.aibox.internal:80 GET remote=0 (aibox-broker is not running) status=502'
}

@test "broker+proxy: the broker exits when the proxy ends, and the proxy exits 0" {
	start_pair
	vm_git_config 0 https://git.example.com/o/r
	git clone -q https://git.example.com/o/r c
	kill "$PX_PID"
	wait "$PAIR_PID"
	PX_PID=
	run alive "$BK_PID"
	assert_failure
	assert_file_contains broker.log ' stop$'
}
