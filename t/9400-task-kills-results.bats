#!/usr/bin/env bats
# kill -9 of a task's parts while the results come back from the VM and
# while the host checks changes.bundle (docs/reliability.md).  No VM: a fake
# QEMU runs OpenSSH's `sshd -i` on the VM's SSH port with the task's own
# keys (its host key and authorized_keys, from the task folder it is given),
# and the task command is a script that sends a results tar with a real
# changes.bundle.  aibox-task logs in as root, which only an sshd run as root
# allows: so this is in the root family (t/run runs t/9*.bats as root).
# Hold points the test controls: the script stops inside changes.bundle's
# bytes until a fifo is written; the bundle's checker (a child of
# aibox-task) is stopped with SIGSTOP before it is given the bundle.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: the fake VM's sshd lets root in only when it runs as root (t/run runs t/9*.bats as root)"
	[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd"
	common_setup
	no_vm_project
	# a git remote, so that the broker runs too
	printf 'env: [ANTHROPIC_API_KEY]\ngit:\n  - url: https://localhost:1/public.git\n    fetch: no\n' >"$cfg"
	# sshd's privilege separation folder (the openssh-server package's service makes it)
	mkdir -p /run/sshd
	mkfifo "$T/go"
	# the fake QEMU: sshd on fd 4 (the VM's SSH port) with the task folder's keys
	cat >"$T/fake-bin/qemu-system-x86_64" <<-SH
		#!/bin/bash
		[ "\$1" != --version ] || { echo "QEMU emulator version 8.2.2"; exit 0; }
		for a in "\$@"; do
			case \$a in local,path=*,mount_tag=aibox.task,*) dir=\${a#local,path=}; dir=\${dir%%,mount_tag=aibox.task,*} ;; esac
		done
		cat >"$T/sshd_config" <<-CFG
			HostKey \$dir/ssh/ssh_host_ecdsa_key
			AuthorizedKeysFile \$dir/ssh/authorized_keys
			ForceCommand $T/fake-task \$dir
			StrictModes no
			UsePAM no
			PermitRootLogin prohibit-password
			PidFile none
			LogLevel ERROR
		CFG
		exec /usr/sbin/sshd -i -e -f "$T/sshd_config" <&4 >&4 4>&-
	SH
	# the results, made once: a commit on aibox/task after the start commit
	# (the project's HEAD), its bundle, and the results tar (changes.bundle,
	# vm.log, result.json)
	start=$(git rev-parse HEAD)
	git clone -q . "$T/w"
	head -c 150000 /dev/urandom >"$T/w/big.bin"
	git -C "$T/w" add big.bin
	git -C "$T/w" commit -q -m "Add big.bin"
	git -C "$T/w" branch -q -f aibox/task HEAD
	end=$(git -C "$T/w" rev-parse HEAD)
	mkdir "$T/out"
	git -C "$T/w" bundle create -q "$T/out/changes.bundle" aibox/task "^$start" 2>/dev/null
	echo "the VM's log" >"$T/out/vm.log"
	printf '{"version": 1, "steps": [{"name": "clone", "status": "ok", "seconds": 1}, {"name": "claude", "status": "ok", "seconds": 1, "exit_code": 0}, {"name": "commit", "status": "ok", "seconds": 0}, {"name": "bundle", "status": "ok", "seconds": 0}], "failed_step": null, "claude": {"exit_code": 0, "num_turns": 1, "duration_ms": 10, "total_cost_usd": 0, "ended_by": "completed", "last_message": "Added."}, "start_commit": "%s", "end_commit": "%s", "changes": true}' "$start" "$end" >"$T/out/result.json"
	tar -C "$T/out" --format=ustar -cf "$T/all.tar" changes.bundle vm.log result.json
	# the task command: the results tar, held inside changes.bundle's bytes
	# while $T/hold-results exists
	cat >"$T/fake-task" <<-SH
		#!/bin/bash
		exec 0</dev/null
		if [ -e "$T/hold-results" ]; then
			head -c 100000 "$T/all.tar"
			echo \$\$ >"$T/holding"
			read -r -t 60 _ <>"$T/go"
			tail -c +100001 "$T/all.tar"
		else
			cat "$T/all.tar"
		fi
	SH
	chmod +x "$T/fake-bin/qemu-system-x86_64" "$T/fake-task"
}

teardown() {
	# a holder let go (it then finds its reader gone), whatever happened
	[ -z "${T:-}" ] || [ ! -p "$T/go" ] || echo 1<>"$T/go"
	common_teardown
}

# ended PID: PID has ended (gone, or a zombie until it is waited for).
ended() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# start PHASE: aibox task in the background ($pid), held in PHASE: results
# (the tar cut inside changes.bundle) or check (the checker stopped, the
# session over); $qemu (sshd), $proxy, $broker, $checker, $workers, $dir.
start() {
	rm -f "$T/hold-results" "$T/holding"
	[ "$1" = check ] || : >"$T/hold-results"
	ANTHROPIC_API_KEY=k aibox task "Do it." >out 2>err &
	pid=$!
	wait_until 60 pgrep -P "$pid" -x sshd >/dev/null || fail "no sshd: $(cat err)"
	dir=$(cat out)
	qemu=$(pgrep -P "$pid" -x sshd)
	proxy=$(pgrep -P "$pid" -x aibox-proxy)
	broker=$(pgrep -P "$pid" -x aibox-broker)
	workers=$(pgrep -P "$pid" -x aibox-task | tr '\n' ' ')
	[ -n "$proxy" ] || fail "no proxy"
	[ -n "$broker" ] || fail "no broker"
	# the checker: the worker that holds changes.bundle
	checker=
	for p in $workers; do
		if ls -l "/proc/$p/fd" 2>/dev/null | grep -q 'changes\.bundle$'; then checker=$p; fi
	done
	[ -n "$checker" ] || fail "no checker among $workers"
	if [ "$1" = results ]; then
		wait_until 60 test -s "$T/holding" || fail "the results did not start: $(cat err)"
		wait_until 20 test -s "$dir/changes.bundle" || fail "no bundle bytes came"
		run grep -q '^session ' "$dir/aibox.log"
		assert_failure
	else
		kill -STOP "$checker"
		# the session and the stops are over: the check is what runs
		wait_until 60 grep -q '^stop ' "$dir/aibox.log" || fail "no check: $(cat err)"
		run grep -q '^check ' "$dir/aibox.log"
		assert_failure
	fi
}

# finish STATUS STATE [WHY]: the task ended with STATUS (saying it did not
# finish for WHY, when given); nothing is left running; no fetch is offered
# and no bundle is kept for one; tasks list says STATE; the spend ledger
# holds no count and no reservation (no request was made); clean cleans.
finish() {
	local id=${dir: -6} p
	wait_until 20 ended "$pid" || kill -KILL "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq "$1" ] || fail "exit $st: $(cat err)"
	if [ -n "${3:-}" ]; then
		run grep -cF "aibox[$id]: the task did not finish: $3" err
		assert_output 1 || fail "$(cat err)"
	fi
	run grep -F "fetch them with" err
	assert_failure
	for p in $qemu $proxy $broker $workers; do
		wait_until 10 ended "$p" || fail "$(ps -o pid,args -p "$p") is left running"
	done
	run flock -n "$dir.lock" true
	assert_success
	run aibox tasks list
	assert_success
	assert_line --regexp "^$id +$2 "
	run aibox tasks show "$id"
	assert_success
	refute_output --partial "fetch them with"
	refute_output --partial "changes end at"
	ledger_untouched
	run aibox tasks clean --all
	assert_success
	assert_line --partial "removed $dir/ and $(basename "$dir").lock"
	assert_dir_not_exists "$dir"
	# the holder let go: it finds the VM's side gone and ends, as the VM would have
	if [ -s "$T/holding" ]; then
		echo 1<>"$T/go"
		wait_until 10 ended "$(cat "$T/holding")" || fail "the held task command is left running"
	fi
}

@test "kills in the results: kill -9 of QEMU, aibox-proxy or the broker while the results come back ends the task at once, saying so; nothing is left, no result is offered" {
	start results
	kill -KILL "$qemu"
	finish 1 "not finished" "QEMU was killed by SIGKILL while the task ran"
	start results
	kill -KILL "$proxy"
	finish 1 "not finished" "aibox-proxy was killed by SIGKILL while the task ran"
	start results
	kill -KILL "$broker"
	finish 1 "not finished" "aibox-broker was killed by SIGKILL while the task ran"
}

@test "kills in the results: kill -9 of aibox-task while the results come back, and while it checks the bundle: everything dies with it; tasks list says killed" {
	for phase in results check; do
		start "$phase"
		kill -KILL "$pid"
		finish 137 killed
	done
}

@test "kills in the results: kill -9 of the bundle's checker while it checks: the task ends saying so, with no result offered" {
	start check
	kill -KILL "$checker"
	finish 1 "not finished" "cannot check changes.bundle: the checker was killed by signal 9"
}
