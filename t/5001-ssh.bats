#!/usr/bin/env bats
# common/ssh: the host's SSH client, against a real OpenSSH server run by the
# test user (`sshd -i` on one end of a socketpair).  As a non-root user sshd
# can only log in as that user, so the tests authenticate as it, not as root.
load lib-common
load lib-sshd

setup() {
	common_setup
	sshd_setup
}

ssh_run() {
	test-task ssh-run --user "$(id -un)" --key keys/test_user_key \
		--host-pub keys/ssh/ssh_host_ecdsa_key.pub "$@" -- \
		$(SSHD_ARGV)
}

@test "ssh: the task keys: authorized_keys forces the init's session, no user key left on disk" {
	mkdir "$T/keys2"
	run test-task ssh-keys "$T/keys2"
	assert_success
	assert_output "host key blob 104 bytes"
	run cat keys/ssh/authorized_keys
	assert_output --regexp '^command="/usr/lib/aibox/aibox-init session",restrict ecdsa-sha2-nistp256 [A-Za-z0-9+/]+=* aibox-task$'
	assert_file_exists keys/ssh/ssh_host_ecdsa_key
	run ls -A keys/ssh
	assert_output "authorized_keys
ssh_host_ecdsa_key
ssh_host_ecdsa_key.pub"
	run head -1 keys/test_user_key
	assert_output "-----BEGIN EC PRIVATE KEY-----"
}

@test "ssh: the task keys are made in the process, each pair whole and new" {
	local tt
	tt=$(command -v test-task)
	mkdir a b
	# no ssh-keygen (nor anything else) on the PATH
	PATH=/nonexistent run "$tt" ssh-keys a
	assert_success
	PATH=/nonexistent run "$tt" ssh-keys b
	assert_success
	run stat -c '%a' a/ssh/ssh_host_ecdsa_key
	assert_output 600
	run head -1 a/ssh/ssh_host_ecdsa_key
	assert_output "-----BEGIN EC PRIVATE KEY-----"
	# each private half matches its public line, as OpenSSH reads them
	run ssh-keygen -y -f a/ssh/ssh_host_ecdsa_key
	assert_success
	assert_output "$(cut -d' ' -f1,2 a/ssh/ssh_host_ecdsa_key.pub)"
	run ssh-keygen -y -f a/test_user_key
	assert_success
	assert_output "$(sed 's/^command="[^"]*",restrict //' a/ssh/authorized_keys | cut -d' ' -f1,2)"
	# four different keys
	run bash -c "cat a/ssh/ssh_host_ecdsa_key.pub b/ssh/ssh_host_ecdsa_key.pub a/ssh/authorized_keys b/ssh/authorized_keys | grep -o 'AAAA[^ ]*' | sort -u | wc -l"
	assert_output 4
}

@test "ssh: aibox run's keys: authorized_keys also lets the session ask for a terminal" {
	mkdir "$T/keys3"
	run test-task ssh-keys --pty "$T/keys3"
	assert_success
	run cat "$T/keys3/ssh/authorized_keys"
	assert_output --regexp '^command="/usr/lib/aibox/aibox-init session",restrict,pty ecdsa-sha2-nistp256 [A-Za-z0-9+/]+=* aibox-task$'
}

@test "ssh: a command's stdin, stdout, stderr and exit code go through" {
	forced 'echo "cmd: $SSH_ORIGINAL_COMMAND"; sed s/^/in:/; echo "progress 1" >&2; printf "no newline" >&2; exit 3'
	printf '{"env": {"A": "b"}}\nsecond line\n' >in
	run ssh_run --in in --timeout-ms 30000 --idle-ms 10000 task
	assert_success
	assert_line --index 0 "cmd: task"
	assert_line 'in:{"env": {"A": "b"}}'
	assert_line "in:second line"
	assert_line "stderr: progress 1"
	assert_line "stderr: no newline"
	assert_line "exit 3"
	grep -q "Accepted publickey for $(id -un)" sshd.log
}

@test "ssh: a stderr line cut at the buffer's size is followed by no empty line when its newline comes later" {
	# 4096 bytes (SSH_LINE_MAX), then its newline in a later read; 8192, two pieces, the same;
	# the empty line after "next" is the VM's own and stays; a CRLF, later or in the same
	# read, ends the line as a newline does (the sanitizer reads "\r" as a line break)
	forced 'head -c 4096 /dev/zero | tr "\0" a >&2; sleep 1; printf "\nnext\n\nafter an empty one\n" >&2
head -c 8192 /dev/zero | tr "\0" b >&2; sleep 1; printf "\nlast\n" >&2
head -c 4096 /dev/zero | tr "\0" c >&2; sleep 1; printf "\r" >&2; sleep 1; printf "\nafter a CRLF\n" >&2
{ head -c 4096 /dev/zero | tr "\0" d; printf "\r\nend\n"; } >&2'
	run ssh_run --timeout-ms 30000 --idle-ms 10000 task
	assert_success
	# each piece of 4096 bytes named, a CR shown, so that a failure reads
	run sed -E 's/^(stderr: )([a-d]{4096})$/\1<4096 bytes>/; s/\r/<CR>/' <<<"$output"
	assert_output "stderr: <4096 bytes>
stderr: next
stderr: 
stderr: after an empty one
stderr: <4096 bytes>
stderr: <4096 bytes>
stderr: last
stderr: <4096 bytes>
stderr: after a CRLF
stderr: <4096 bytes>
stderr: end
exit 0"
}

@test "ssh: a stderr line cut at the buffer's size keeps a character split there whole" {
	# 4095 bytes and an "é": the cut at 4096 bytes falls before the "é", which starts the
	# next piece whole, never two U+FFFD
	forced '{ head -c 4095 /dev/zero | tr "\0" a; printf "\303\251b\n"; } >&2'
	run ssh_run --timeout-ms 30000 --idle-ms 10000 task
	assert_success
	run sed -E 's/^(stderr: )(a{4095})$/\1<4095 bytes>/' <<<"$output"
	assert_output "stderr: <4095 bytes>
stderr: éb
exit 0"
}

@test "ssh: a stderr line cut at the buffer's size and ended by a lone CR at the session's end adds no line" {
	forced 'head -c 4096 /dev/zero | tr "\0" d >&2; sleep 1; printf "\r" >&2'
	run ssh_run --timeout-ms 30000 --idle-ms 10000 task
	assert_success
	run sed -E 's/^(stderr: )(d{4096})$/\1<4096 bytes>/; s/\r/<CR>/' <<<"$output"
	assert_output "stderr: <4096 bytes>
exit 0"
}

@test "ssh: a signal that ends the command is reported" {
	forced 'kill -TERM $$'
	run ssh_run --timeout-ms 30000 task
	assert_success
	assert_line "exit 143 signal TERM"
}

@test "ssh: an interactive command without a terminal: stdin and its EOF, stdout, stderr, exit code" {
	forced 'echo "cmd: $SSH_ORIGINAL_COMMAND"; sed s/^/in:/; echo "progress 1" >&2; exit 3'
	printf 'first line\nsecond line\n' >in
	run ssh_run --interactive --in in --idle-ms 10000 run
	assert_success
	assert_line --index 0 "cmd: run"
	assert_line "in:first line"
	assert_line "in:second line"
	assert_line "progress 1"
	assert_line "exit 3"
}

@test "ssh: an interactive command ended by a signal reports it" {
	forced 'kill -TERM $$'
	run ssh_run --interactive --idle-ms 10000 run
	assert_success
	assert_line "exit 143 signal TERM"
}

@test "ssh: a wrong host key is refused before authentication" {
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -f other
	forced 'echo should not run'
	run test-task ssh-run --user "$(id -un)" --key keys/test_user_key --host-pub other.pub \
		--timeout-ms 30000 task -- /usr/sbin/sshd -i -f "$T/sshd_config" \
		-h "$T/keys/ssh/ssh_host_ecdsa_key" -E "$T/sshd.log"
	assert_failure
	assert_output "error: the VM's host key is not the one made for this task"
	run grep -c "publickey" sshd.log
	assert_output 0
}

@test "ssh: the client takes only ecdh-sha2-nistp256 and a P-256 host key, and signs with its P-256 key" {
	forced 'echo ran'
	sed -i 's/^LogLevel VERBOSE$/LogLevel DEBUG1/' sshd_config
	run ssh_run --timeout-ms 30000 task
	assert_success
	assert_output "ran
exit 0"
	# (sshd's privilege-separated child ends its lines with a CR)
	tr -d '\r' <sshd.log >log
	grep -Eq "kex: algorithm: ecdh-sha2-nistp256( \[preauth\])?$" log
	grep -Eq "kex: host key algorithm: ecdsa-sha2-nistp256( \[preauth\])?$" log
	grep -q "Accepted publickey for $(id -un) .* ECDSA SHA256:" log
	# a server that offers only curve25519 for the key exchange is refused
	# (by the client: whether sshd reads its offer before it hangs up is a race)
	printf 'KexAlgorithms curve25519-sha256\n' >>sshd_config
	: >sshd.log
	run ssh_run --timeout-ms 30000 task
	assert_failure
	assert_output "error: SSH failed while greeting the VM: Unable to exchange encryption keys"
	run grep -c "Accepted" sshd.log
	assert_output 0
	# one with only an ed25519 host key: no host key algorithm in common
	sed -i '/^KexAlgorithms/d' sshd_config
	ssh-keygen -q -t ed25519 -N '' -f old_host
	: >sshd.log
	run test-task ssh-run --user "$(id -un)" --key keys/test_user_key \
		--host-pub keys/ssh/ssh_host_ecdsa_key.pub --timeout-ms 30000 task -- \
		/usr/sbin/sshd -i -f "$T/sshd_config" -h "$T/old_host" -E "$T/sshd.log"
	assert_failure
	assert_output "error: SSH failed while greeting the VM: Unable to exchange encryption keys"
	run grep -c "Accepted" sshd.log
	assert_output 0
}

@test "ssh: a pinned host key that is not one P-256 key is refused before any connection" {
	ssh-keygen -q -t ed25519 -N '' -f ed
	ssh-keygen -q -t ecdsa -b 384 -N '' -f p384
	# a P-384 key's blob under the P-256 name; a P-256 line cut short, one with
	# a byte more, one with bad base64
	read -r _ b _ <p384.pub
	echo "ecdsa-sha2-nistp256 $b x" >relabelled.pub
	read -r _ b _ <keys/ssh/ssh_host_ecdsa_key.pub
	echo "ecdsa-sha2-nistp256 ${b:0:100}" >short.pub
	echo "ecdsa-sha2-nistp256 $(printf '%s' "$b" | base64 -d | { cat; printf x; } | base64 -w0)" >long.pub
	echo "ecdsa-sha2-nistp256 ${b:0:50}*${b:51}" >badchar.pub
	# the right length, but another curve's name, or a point that is not uncompressed
	python3 - "$b" <<-'PY'
		import base64, sys
		blob = base64.b64decode(sys.argv[1])
		for name, b in (("curve", blob[:27] + b"nistp384" + blob[35:]), ("point", blob[:39] + b"\x02" + blob[40:])):
		    open(name + ".pub", "w").write("ecdsa-sha2-nistp256 " + base64.b64encode(b).decode() + "\n")
	PY
	for k in ed.pub p384.pub relabelled.pub short.pub long.pub badchar.pub curve.pub point.pub; do
		run test-task ssh-run --user "$(id -un)" --key keys/test_user_key --host-pub "$k" \
			--timeout-ms 10000 task -- /bin/true
		assert_failure
		assert_output "test-task: not a P-256 public key"
	done
}

@test "ssh: a key the server does not know is refused" {
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -f stranger
	forced 'echo should not run'
	run test-task ssh-run --user "$(id -un)" --key stranger \
		--host-pub keys/ssh/ssh_host_ecdsa_key.pub --timeout-ms 30000 task -- \
		/usr/sbin/sshd -i -f "$T/sshd_config" -h "$T/keys/ssh/ssh_host_ecdsa_key" -E "$T/sshd.log"
	assert_failure
	assert_output "error: the VM refused the task's key"
}

@test "ssh: a server that stalls mid-session ends in the idle timeout" {
	# The script stops the sshd process that serves the connection: the
	# socket stays open but nothing answers, not even keepalives.
	forced "echo started >&2; sleep 1; echo \$PPID >$T/stalled.pid; echo \$\$ >$T/script.pid; kill -STOP \$PPID; sleep 30"
	SECONDS=0
	run ssh_run --timeout-ms 60000 --idle-ms 3000 task
	elapsed=$SECONDS
	kill -KILL "$(cat stalled.pid)" "$(cat script.pid)" 2>/dev/null || true
	assert_failure
	assert_line "stderr: started"
	assert_line "error: the VM sent nothing for 3 s"
	[ "$elapsed" -ge 3 ] && [ "$elapsed" -le 10 ]
}

@test "ssh: a server that stalls while its disk's folder is full ends at once, saying the disk is full" {
	# As QEMU does when the VM's disk cannot grow: the VM stops, silent.
	small_disk 1048576
	forced "echo started >&2; sleep 1; echo \$PPID >$T/stalled.pid; echo \$\$ >$T/script.pid; kill -STOP \$PPID; sleep 30"
	SECONDS=0
	run ssh_run --timeout-ms 60000 --idle-ms 30000 --disk "$DISK" task
	elapsed=$SECONDS
	kill -KILL "$(cat stalled.pid)" "$(cat script.pid)" 2>/dev/null || true
	assert_failure
	assert_line "stderr: started"
	assert_line "error: the disk of '$DISK' is full (0 KiB free): the VM stopped when its disk could not grow; free space there and run the task again"
	[ "$elapsed" -le 10 ] || fail "it took $elapsed s"
}

@test "ssh: a session that fails mid-line still passes on the stderr line it had begun" {
	# the VM's last words without their newline, then the server stalls: they say why
	forced "printf 'disk full, stopping' >&2; sleep 1; echo \$PPID >$T/stalled.pid; echo \$\$ >$T/script.pid; kill -STOP \$PPID; sleep 30"
	run ssh_run --timeout-ms 60000 --idle-ms 3000 task
	kill -KILL "$(cat stalled.pid)" "$(cat script.pid)" 2>/dev/null || true
	assert_failure
	assert_output "stderr: disk full, stopping
error: the VM sent nothing for 3 s"
}

@test "ssh: a quiet command is not idle while the server answers keepalives" {
	forced 'sleep 5; echo done'
	run ssh_run --timeout-ms 60000 --idle-ms 3000 task
	assert_success
	assert_output "done
exit 0"
}

@test "ssh: the overall deadline holds against a command that never ends" {
	forced 'while :; do echo tick >&2; sleep 0.2; done'
	SECONDS=0
	run ssh_run --timeout-ms 2000 --idle-ms 10000 task
	elapsed=$SECONDS
	assert_failure
	assert_line "error: the task's SSH session ran out of time"
	[ "$elapsed" -le 6 ]
}

@test "ssh: 50 MB of stdout flow at a reasonable speed" {
	forced 'head -c 50000000 /dev/zero'
	run ssh_run --count --timeout-ms 60000 --idle-ms 10000 task
	assert_success
	assert_line --index 0 --regexp '^stdout 50000000 bytes, [0-9.]+ MB/s$'
	assert_line "exit 0"
	speed=$(echo "${lines[0]}" | awk '{print int($4)}')
	echo "speed $speed MB/s" >&3
	# The guest side manages 6-10 MB/s under TCG: the client must not be the
	# bottleneck even on a loaded machine (about 90 MB/s when idle).
	[ "$speed" -ge 3 ]
}

@test "ssh: the server dying mid-stream is an error, not a hang" {
	forced 'head -c 5000000 /dev/zero; kill -KILL $PPID; sleep 1'
	SECONDS=0
	run ssh_run --count --timeout-ms 60000 --idle-ms 20000 task
	assert_failure
	assert_output --regexp '^error: the connection to the VM ended while '
	[ "$SECONDS" -le 10 ]
}

@test "ssh: a channel that closes before the banner is an error" {
	run test-task ssh-run --user "$(id -un)" --key keys/test_user_key \
		--host-pub keys/ssh/ssh_host_ecdsa_key.pub --timeout-ms 10000 task -- /bin/true
	assert_failure
	assert_output "error: the channel to the VM closed before its SSH server spoke"
}

@test "ssh: a peer that never speaks runs into the deadline without being sent a byte" {
	run test-task ssh-run --user "$(id -un)" --key keys/test_user_key \
		--host-pub keys/ssh/ssh_host_ecdsa_key.pub --timeout-ms 1500 task -- \
		sh -c "echo \$\$ >$T/peer.pid; exec head -c 100 >$T/got"
	assert_failure
	assert_output "error: the task's SSH session ran out of time"
	# the peer has read all there was once it ended (its end closed with ours)
	wait_until 10 gone "$(cat "$T/peer.pid")"
	[ ! -s got ]
}
