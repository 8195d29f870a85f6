# Shared by t/6*.bats (the broker): a TLS git remote on loopback and a broker
# in front of it.  Load after lib-common and lib-tls.
#
#   broker_setup          certificates, an upstream bare repo with main, the token
#   start_upstream [ARGS] t/git-https-upstream on $T/up; sets UP_PORT, UP_PID
#   start_broker ARGS...  aibox-broker --listen on loopback; sets BR_PORT, BR_PID, BR_URL
#   reflect_fetch MODE    what a broker relays from a --reflect upstream
#   broker_teardown       stops what was started, by pid, and checks nothing is left

# broker_make_certs DIR [SAN]: the test CA (ca.pem) and a server certificate
# (server.pem, server.key) from lib-tls.bash, for localhost and 127.0.0.1; or,
# with SAN (openssl's subjectAltName syntax), one for those names instead.
broker_make_certs() {
	local d=$1 san=${2:-}
	if [ -z "$san" ]; then
		make_test_ca "$d"
		return
	fi
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=aibox test CA" \
		-keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null || return 1
	openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
		-keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null || return 1
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$san" >"$d/ext"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
		-CAcreateserial -days 2 -extfile "$d/ext" -out "$d/server.pem" 2>/dev/null
}


broker_setup() {
	export GIT_TERMINAL_PROMPT=0
	export GIT_TOKEN="tok-$RANDOM$RANDOM-s3cr3t-value"
	export UPSTREAM_TOKEN=$GIT_TOKEN
	BROKER_PIDS=()
	broker_make_certs "$T/tls" || return 1
	mkdir -p "$T/up"
	make_repo "$T/seed"
	git init -q --bare "$T/up/repo.git"
	git -C "$T/seed" push -q "$T/up/repo.git" main
	git -C "$T/seed" tag v0.1
	git -C "$T/seed" push -q "$T/up/repo.git" v0.1
	git -C "$T/up/repo.git" branch old-feature main
}

start_upstream() {
	: >"$T/up-headers.jsonl"
	"$TOP/t/git-https-upstream" --root "$T/up" --cert "$T/tls/server.pem" \
		--key "$T/tls/server.key" --port-file "$T/up.port" \
		--headers-log "$T/up-headers.jsonl" "$@" 2>"$T/up.err" &
	UP_PID=$!
	BROKER_PIDS+=("$UP_PID")
	wait_until 20 test -s "$T/up.port" || return 1
	UP_PORT=$(cat "$T/up.port")
	UP_URL="https://localhost:$UP_PORT/repo.git"
}

# start_broker ARGS...: the remote options; listen, log, ready and CA are added.
start_broker() {
	rm -f "$T/br.ready"
	env -u UPSTREAM_TOKEN aibox-broker "$@" --listen 127.0.0.1:0 --log "$T/broker.log" --ca "$T/tls/ca.pem" \
		--ready-fd 3 3>"$T/br.ready" 2>"$T/broker.err" &
	BR_PID=$!
	BROKER_PIDS+=("$BR_PID")
	wait_until 20 test -s "$T/br.ready" || return 1
	BR_PORT=$(sed -n 's/^ready 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$T/br.ready")
	[ -n "$BR_PORT" ] || return 1
	BR_URL="http://127.0.0.1:$BR_PORT/0/"
}

# reflect_fetch MODE: a broker with --auth MODE in front of the remote (started
# with --reflect); what it relays of a 200 (info/refs) and of an error (the POST),
# both chunked in 5-byte pieces, into head.txt, ok.txt, errhead.txt and err.txt.
reflect_fetch() {
	start_broker --remote "$UP_URL" --token-env GIT_TOKEN --fetch --auth "$1" || return 1
	curl -sS -D "$T/head.txt" -o "$T/ok.txt" "${BR_URL}info/refs?service=git-upload-pack"
	curl -sS -D "$T/errhead.txt" -o "$T/err.txt" \
		-H 'Content-Type: application/x-git-upload-pack-request' \
		--data-binary 0000 "${BR_URL}git-upload-pack"
}

# The refs of the upstream repository, one "oid ref" a line.
up_refs() {
	git -C "$T/up/repo.git" for-each-ref --format='%(objectname) %(refname)'
}

# Children of pid $1 (direct), one a line.
children_of() {
	local c
	for c in /proc/[0-9]*/stat; do
		awk -v p="$1" '$4 == p { print $1 }' "$c" 2>/dev/null
	done
}

# alive PID: the process exists and is not a zombie (a dead child of an init
# that does not reap is still listed).
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# dead PID: not alive (for wait_until).
dead() {
	! alive "$1"
}

# has_children PID: PID has a child.
has_children() {
	[ -n "$(children_of "$1")" ]
}

# broker_idle [PID]: every child of the broker PID (BR_PID when not given)
# sleeps or has ended.  A child serves one connection and logs a request's
# line just after its answer's last bytes, then reads on; so once the client
# had its answer and the child sleeps (or is gone), the line is in the log.
broker_idle() {
	local p=${1:-$BR_PID} c st
	for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null); do
		{ read -r st <"/proc/$c/stat"; } 2>/dev/null || continue
		st=${st##*) }
		[[ ${st%% *} != [RD] ]] || return 1
	done
}

# broker_settle [PID]: wait until broker_idle, for a test about to read
# broker.log after a client had its answer.  It never fails and prints nothing
# (a broker busy for 10 s is let go: what the test reads then says what is
# wrong); without a PID nor BR_PID it does nothing.
broker_settle() {
	[ -z "${1:-${BR_PID:-}}" ] || wait_until 10 broker_idle "$@" 2>/dev/null || true
}

broker_teardown() {
	local p
	for p in "${BROKER_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${BROKER_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	BROKER_PIDS=()
	return 0
}
