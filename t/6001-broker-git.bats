#!/usr/bin/env bats
# aibox-broker with the real git client: fetch and clone, pushes it lets
# through and pushes it refuses, against git-http-backend behind TLS.
load lib-common
load lib-tls
load lib-broker
load lib-dns

setup() {
	common_setup
	broker_setup
}

teardown() {
	broker_teardown
	common_teardown
}

@test "broker: --help, and usage errors exit 2 with a message" {
	run aibox-broker --help
	assert_success
	assert_output --partial "usage: aibox-broker"
	run aibox-broker
	assert_failure 2
	assert_output --partial "usage: aibox-broker --remote URL"
	run aibox-broker --fetch --remote https://x/r --listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: --fetch must follow a --remote"
	run aibox-broker --remote http://example.com/r --token-env GIT_TOKEN --listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: remote 'http://example.com/r' must be an https:// URL"
	run aibox-broker --remote https://u:p@localhost/r --token-env GIT_TOKEN --listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: remote 'https://u:p@localhost/r' cannot hold credentials; name the variable holding the token in token"
	run aibox-broker --remote https://localhost/r --token-env NOT_SET_HERE --listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: the token variable 'NOT_SET_HERE' is not set"
	run aibox-broker --remote https://localhost/r --token-env GIT_TOKEN --push 'refs/heads/x' \
		--listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: --push 'refs/heads/x' is not a branch name or pattern"
	run aibox-broker --remote https://localhost/r --token-env GIT_TOKEN --push 'a..b' \
		--listen 127.0.0.1:0
	assert_failure 2
	assert_output "aibox-broker: --push 'a..b' is not a branch name or pattern"
	run aibox-broker --remote https://localhost/r --token-env GIT_TOKEN --fetch
	assert_failure 2
	assert_output --partial "give exactly one of --listen"
	run aibox-broker --remote https://localhost/r --token-env GIT_TOKEN --fetch --conn-fd 9
	assert_failure 2
	assert_output "aibox-broker: --conn-fd 9: Bad file descriptor"
}

@test "broker: clone and fetch work with protocol v0 and v2" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch
	for v in 0 2; do
		run git -c protocol.version=$v clone -q "$BR_URL" "c$v"
		assert_success
		assert_equal "$(git -C c$v rev-parse HEAD)" "$(git -C up/repo.git rev-parse main)"
	done
	# The protocol version reached the remote.
	run grep -c '"Git-Protocol", "version=2"' up-headers.jsonl
	assert_success
	# A fetch of new upstream commits.
	git -C seed commit -q --allow-empty -m third
	git -C seed push -q "$T/up/repo.git" main
	for v in 0 2; do
		run git -C "c$v" -c protocol.version=$v fetch -q origin
		assert_success
		assert_equal "$(git -C c$v rev-parse origin/main)" "$(git -C seed rev-parse main)"
	done
	broker_settle
	# The log names every operation, the remote and the bytes.
	run grep -c 'op=fetch request=POST git-upload-pack result=allowed status=200' broker.log
	# v2: ls-refs and fetch for clone and for fetch; v0: one each.
	assert_output 6
	assert_file_contains broker.log "url=$UP_URL op=fetch request=GET info/refs result=allowed"
	run grep -E 'bytes_down=[1-9]' broker.log
	assert_success
	# Our token reached the remote as Basic x-access-token:<token>.
	want=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -c "\"Authorization\", \"Basic $want\"" up-headers.jsonl
	assert_output "$(wc -l <up-headers.jsonl)"
}

@test "broker: without --fetch, clone is refused with a clear message" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --push 'aibox/*'
	for v in 0 2; do
		run git -c protocol.version=$v clone -q "$BR_URL" "c$v"
		assert_failure
		assert_output --partial "remote error: aibox-broker: fetching from this remote is not allowed"
	done
	assert_file_empty up-headers.jsonl
	broker_settle
	assert_file_contains broker.log 'op=fetch request=GET info/refs result=refused'
}

@test "broker: a push to an allowed branch lands upstream" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*' --push feature
	git clone -q "$BR_URL" c
	cd c
	git checkout -q -b aibox/task
	echo more >>README.md
	git commit -q -am "task work"
	run git push origin aibox/task
	assert_success
	assert_equal "$(git -C ../up/repo.git rev-parse aibox/task)" "$(git rev-parse HEAD)"
	# An update (fast-forward) of the same branch, and a plain name.
	echo again >>README.md
	git commit -q -am "more work"
	run git push origin aibox/task HEAD:feature
	assert_success
	assert_equal "$(git -C ../up/repo.git rev-parse aibox/task)" "$(git rev-parse HEAD)"
	assert_equal "$(git -C ../up/repo.git rev-parse feature)" "$(git rev-parse HEAD)"
	cd ..
	broker_settle
	assert_file_contains broker.log 'op=push request=POST git-receive-pack refs=refs/heads/aibox/task(create) result=allowed status=200'
	assert_file_contains broker.log 'refs=refs/heads/aibox/task,refs/heads/feature(create) result=allowed'
}

@test "broker: pushes to main, a tag, a deletion or another branch are refused and change nothing" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	git clone -q "$BR_URL" c
	cd c
	echo more >>README.md
	git commit -q -am "work"
	git tag v9
	before=$(up_refs)

	run git push origin HEAD:main
	assert_failure
	assert_output --partial "remote: aibox-broker: refusing refs/heads/main: this branch may not be pushed; this remote allows pushing branches aibox/*"
	assert_output --partial "! [remote rejected] HEAD -> main (this branch may not be pushed (allowed: branches aibox/*))"

	run git push origin v9
	assert_failure
	assert_output --partial "! [remote rejected] v9 -> v9 (tags may not be pushed"

	run git push origin :old-feature
	assert_failure
	assert_output --partial "! [remote rejected] old-feature (deleting branches is not allowed"

	# '*' does not cross '/', and other names are not branches of the pattern.
	for ref in aibox/a/b aibox other/x aiboxx; do
		run git push origin "HEAD:refs/heads/$ref"
		assert_failure
		assert_output --partial "! [remote rejected] HEAD -> $ref (this branch may not be pushed"
	done
	run git push origin HEAD:refs/notes/x
	assert_failure
	assert_output --partial "(only branches may be pushed"

	# A mixed push is refused whole: the allowed ref does not land either.
	run git push origin HEAD:aibox/ok HEAD:main
	assert_failure
	assert_output --partial "! [remote rejected] HEAD -> aibox/ok (not pushed: another ref of this push was refused"
	assert_output --partial "! [remote rejected] HEAD -> main (this branch may not be pushed"

	# Also with protocol v0 and without side-band (report-status only).
	run git -c protocol.version=0 push origin HEAD:main
	assert_failure
	assert_output --partial "! [remote rejected] HEAD -> main (this branch may not be pushed"

	cd ..
	assert_equal "$(up_refs)" "$before"
	run grep -c '"POST", "path": "/repo.git/git-receive-pack"' up-headers.jsonl
	assert_output 0
	broker_settle
	assert_file_contains broker.log 'refs=refs/heads/main result=refused status=200'
	assert_file_contains broker.log 'refs=refs/tags/v9(create) result=refused'
	assert_file_contains broker.log 'refs=refs/heads/old-feature(delete) result=refused'
	assert_file_contains broker.log 'why="refs/heads/main: this branch may not be pushed"'
}

@test "broker: a large push: refused with its message, or streamed through" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	git clone -q "$BR_URL" c
	head -c $((12 << 20)) /dev/urandom >c/big.bin
	git -C c add big.bin
	git -C c commit -q -m big
	before=$(up_refs)
	run git -C c push origin HEAD:main
	assert_failure
	assert_output --partial "! [remote rejected] HEAD -> main (this branch may not be pushed"
	assert_equal "$(up_refs)" "$before"
	# The same pack to an allowed branch streams through (chunked, after git's probe).
	run git -C c push origin HEAD:aibox/big
	assert_success
	assert_equal "$(git -C up/repo.git rev-parse aibox/big)" "$(git -C c rev-parse HEAD)"
	broker_settle
	assert_file_contains broker.log 'refs=(probe) result=allowed'
}

@test "broker: without --push, pushing is refused before anything is sent" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch
	git clone -q "$BR_URL" c
	cd c
	git checkout -q -b aibox/x
	git commit -q --allow-empty -m x
	run git push origin aibox/x
	assert_failure
	assert_output --partial "remote error: aibox-broker: pushing to this remote is not allowed"
	cd ..
	run grep -c 'git-receive-pack' up-headers.jsonl
	assert_output 0
}

@test "broker: the client's own credentials do not reach the remote" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	vm=$(printf 'vm:vm-secret-123' | base64 -w0)
	run git -c http.extraHeader="Authorization: Basic $vm" -c http.extraHeader="Cookie: vm-cookie-456" \
		-c http.extraHeader="Proxy-Authorization: Basic $vm" clone -q "$BR_URL" c
	assert_success
	cd c
	git checkout -q -b aibox/x
	git commit -q --allow-empty -m x
	run git -c http.extraHeader="Authorization: Bearer vm-secret-123" push origin aibox/x
	assert_success
	cd ..
	run grep -c -e vm-secret-123 -e vm-cookie-456 -e "$vm" -e '"Cookie"' -e Proxy-Authorization up-headers.jsonl
	assert_output 0
	want=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -c "\"Authorization\", \"Basic $want\"" up-headers.jsonl
	assert_output "$(wc -l <up-headers.jsonl)"
	run grep -o '"Authorization"' up-headers.jsonl
	assert_equal "${#lines[@]}" "$(wc -l <up-headers.jsonl)"
}

@test "broker: the token is in no log, no file and nothing the client receives" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --push 'aibox/*'
	export GIT_TRACE_CURL=$T/client-trace.txt
	git clone -q "$BR_URL" c
	git -C c checkout -q -b aibox/x
	git -C c commit -q --allow-empty -m x
	git -C c push -q origin aibox/x
	run git -C c push origin HEAD:main
	assert_failure
	unset GIT_TRACE_CURL
	# What the client received is in the trace: data and headers.
	assert_file_contains client-trace.txt 'Recv header: HTTP/1.1 200 OK'
	b64=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	run grep -rlF -e "$GIT_TOKEN" -e "$b64" "$T" --exclude=up-headers.jsonl
	assert_output ""
	run grep -rlF -e "$GIT_TOKEN" "$T"
	assert_output ""
	# Nor is it left in the broker's environment.
	run grep -caF "$GIT_TOKEN" "/proc/$BR_PID/environ"
	assert_output 0
}

@test "broker: a remote that reflects the Authorization header does not bring the token to the client" {
	# Characters that base64 and URL-encoding change.
	export GIT_TOKEN="t0k/en+$RANDOM=x%y~z" UPSTREAM_TOKEN="t0k/en+$RANDOM=x%y~z"
	start_upstream --reflect
	cred=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
	for mode in basic bearer; do
		reflect_fetch "$mode"
		assert_file_contains head.txt 'HTTP/1.1 200'
		# The upstream's status with the one table's words, not "Error".
		assert_file_contains errhead.txt 'HTTP/1.1 500 Internal Server Error'
		assert_file_contains ok.txt '^auth: [A-Za-z]* \*\*\*\*'
		assert_file_contains err.txt '^decoded: '
		python3 - "$GIT_TOKEN" "$cred" >forms <<-'PY'
		import re, sys, urllib.parse
		for s in sys.argv[1:]:
		    q = urllib.parse.quote(s, safe="")
		    print(s, q, re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), q), sep="\n")
		PY
		[ "$(wc -l <forms)" = 6 ]
		run grep -cF -f forms head.txt ok.txt errhead.txt err.txt
		assert_output $'head.txt:0\nok.txt:0\nerrhead.txt:0\nerr.txt:0'
		# The rest of the page is as the remote wrote it.
		assert_file_contains ok.txt '^quoted-lower: '
		kill "$BR_PID"
		wait "$BR_PID" || true
	done
	# The remote did get the real credentials.
	assert_file_contains up-headers.jsonl "\"Bearer $GIT_TOKEN\""
}

@test "broker: --token-fd takes the tokens as NAME=value lines from a pipe, never the environment" {
	start_upstream
	# Two remotes on one variable; the variable is not in the environment at all.
	(
		t=$GIT_TOKEN
		unset GIT_TOKEN
		start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch \
			--remote "$UP_URL" --token-env GIT_TOKEN --fetch \
			--token-fd 4 4< <(printf 'OTHER=x\nGIT_TOKEN=%s\n' "$t")
		echo "$BR_PID $BR_URL" >"$T/br"
	)
	read -r BR_PID BR_URL <"$T/br"
	BROKER_PIDS+=("$BR_PID")
	run git clone -q "$BR_URL" c0
	assert_success
	run git clone -q "${BR_URL%0/}1/" c1
	assert_success
	run grep -caF "$GIT_TOKEN" "/proc/$BR_PID/environ"
	assert_output 0
	run env -u GIT_TOKEN aibox-broker --remote "$UP_URL" --token-env GIT_TOKEN \
		--listen 127.0.0.1:0 --token-fd 4 4< <(printf 'GIT_TOKENX=a\n')
	assert_failure 2
	assert_output "aibox-broker: the token 'GIT_TOKEN' is not on --token-fd"
	run env -u GIT_TOKEN aibox-broker --remote "$UP_URL" --token-env GIT_TOKEN \
		--listen 127.0.0.1:0 --token-fd 4 4< <(printf 'GIT_TOKEN=a b\n')
	assert_failure 2
	assert_output "aibox-broker: the token in 'GIT_TOKEN' holds a space or control character"
}

@test "broker: bearer auth and a custom basic user" {
	start_upstream --auth bearer
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --auth bearer
	run git clone -q "$BR_URL" c
	assert_success
	assert_file_contains up-headers.jsonl "\"Authorization\", \"Bearer $GIT_TOKEN\""
	broker_teardown
	rm -f up.port up-headers.jsonl
	start_upstream --user oauth2
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --auth-user oauth2
	run git clone -q "$BR_URL" c2
	assert_success
}

@test "broker: a token the remote refuses is a plain error, not a password prompt" {
	start_upstream
	GIT_TOKEN=wrong-token start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch
	run git clone -q "$BR_URL" c
	assert_failure
	assert_output --partial "The requested URL returned error: 502"
	broker_settle
	assert_file_contains broker.log 'answered 401 (the token was not accepted)'
	run grep -c 'wrong-token' broker.log
	assert_output 0
}

@test "broker: the remote's certificate is checked" {
	start_upstream
	broker_make_certs "$T/other"
	rm -f br.ready
	aibox-broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --listen 127.0.0.1:0 \
		--log "$T/broker.log" --ca "$T/other/ca.pem" --ready-fd 3 3>"$T/br.ready" 2>/dev/null &
	BROKER_PIDS+=($!)
	wait_until 20 test -s br.ready
	port=$(sed -n 's/^ready 127\.0\.0\.1:\([0-9]*\)$/\1/p' br.ready)
	run git clone -q "http://127.0.0.1:$port/0/" c
	assert_failure
	broker_settle "${BROKER_PIDS[-1]}"
	assert_file_contains broker.log 'TLS with localhost:'
	assert_file_contains broker.log 'unable to get local issuer certificate'
	assert_file_empty up-headers.jsonl
}

@test "broker: a host name the certificate does not name is refused" {
	# The upstream's certificate names other.example, signed by the CA the broker trusts.
	broker_make_certs "$T/tls" DNS:other.example
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch
	run git clone -q "$BR_URL" c
	assert_failure
	broker_settle
	assert_file_contains broker.log 'TLS with localhost:[0-9]* failed: hostname mismatch'
	assert_file_empty up-headers.jsonl
}

@test "broker: it runs locked down, and leaves no process behind" {
	start_upstream
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch
	run grep '^Seccomp:' "/proc/$BR_PID/status"
	assert_output --regexp 'Seccomp:[[:space:]]+2'
	git clone -q "$BR_URL" c
	# A client that connects and says nothing keeps a child busy ...
	exec 5<>/dev/tcp/127.0.0.1/"$BR_PORT"
	wait_until 10 has_children "$BR_PID"
	run children_of "$BR_PID"
	[ "${#lines[@]}" -ge 1 ]
	kids=("${lines[@]}")
	# ... until the broker is stopped: then it and its children are gone.
	kill "$BR_PID"
	wait "$BR_PID" || true
	for k in "${kids[@]}"; do
		wait_until 5 dead "$k"
	done
	exec 5>&-
}

@test "broker: a remote's host is looked up as the proxy looks names up, never under the machine's search domains" {
	# The broker's start, in namespaces with a DNS server of their own (search
	# domain corp.test): "started" once it is ready, else its exit and message.
	# shellcheck disable=SC2016
	script='for h in "$@"; do
		rm -f "$T/br.ready"
		aibox-broker --remote "https://$h/r.git" --token-env GIT_TOKEN --fetch \
			--listen 127.0.0.1:0 --log "$T/broker.log" --ready-fd 3 3>"$T/br.ready" 2>"$T/br.err" &
		br=$!
		wait_until 10 ready_or_gone "$T/br.ready" $br || exit 1
		if [ -s "$T/br.ready" ]; then echo started; kill $br; wait $br; else wait $br; echo "exit $? $(cat "$T/br.err")"; fi
	done'
	# HOSTALIASES (read by glibc for a name without a dot) names ok.example.test for gitalias
	echo "gitalias ok.example.test" >"$T/aliases"
	run in_dns_ns "HOSTALIASES=\$T/aliases; export HOSTALIASES; $script" ok.example.test nx.example.test gitalias
	assert_success
	# the control: a name DNS has is resolved
	assert_line --index 0 started
	# not as nx.example.test.corp.test, which DNS has
	assert_line --index 1 "exit 2 aibox-broker: cannot resolve 'nx.example.test': no such host name"
	# nor as the alias's name, nor under the search domain
	assert_line --index 2 "exit 2 aibox-broker: cannot resolve 'gitalias': no such host name"
	run cat "$T/dns.log"
	assert_line "nx.example.test 1"
	refute_output --partial "corp.test"
}
