#!/usr/bin/env bats
# The audit record's copy in the system log (common/task/audit.c, docs/security.md
# "The audit record"), read back from a real syslog daemon that the test
# starts itself: rsyslogd, in a mount namespace of the test's own where /dev
# is a fresh tmpfs (the machine's devices bound back in), so that its
# /dev/log is the test's and no other program's.  rsyslog stamps each entry
# with the sender's uid from the socket's credentials (SysSock.ParseTrusted),
# which the sender cannot forge: the task runs as uid 65534 and the entries
# say so.  Where journald listens the entries go to it instead
# (sd_journal_send()): a stand-in for its socket (t/journal-listen) checks
# the fields sent, and the machine's systemd-journald, run on tmpfs mounts of
# the test's own, stamps them and is read back by aibox audit list --log.
# Root family: making the namespace and switching the uid need root.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: the test's own /dev/log needs a mount namespace"
	command -v rsyslogd >/dev/null || skip "no rsyslogd (packages.txt lists rsyslog)"
	common_setup
}

teardown() { common_teardown; }

@test "audit: each entry reaches the system log, stamped with the real uid of the task's user" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	chown -R 65534:65534 "$T"
	chmod 755 "$T"
	cat >"$T/rsyslog.conf" <<EOF
global(workDirectory="$T")
module(load="imuxsock" SysSock.Use="on" SysSock.Name="/dev/log" SysSock.Annotate="on" SysSock.ParseTrusted="on")
template(name="t" type="string" string="uid=%\$!uid% %syslogfacility-text% %syslogtag%%msg%\n")
authpriv.* action(type="omfile" file="$T/syslog.out" template="t")
EOF
	export T
	# In the namespace: a /dev of our own, rsyslogd on its /dev/log, the task as 65534.
	run --separate-stderr timeout 60 unshare -m --propagation private bash -c '
		set -e
		mkdir "$T/realdev"
		mount --bind /dev "$T/realdev"
		mount -t tmpfs tmpfs /dev
		for n in null zero full random urandom tty kvm; do
			[ -e "$T/realdev/$n" ] || continue
			touch "/dev/$n"
			mount --bind "$T/realdev/$n" "/dev/$n"
		done
		ln -s /proc/self/fd /dev/fd
		rsyslogd -n -f "$T/rsyslog.conf" -i "$T/rsyslog.pid" &
		for i in $(seq 100); do [ -S /dev/log ] && break; sleep 0.1; done
		cd "$T/repo"
		setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$HOME" AIBOX_HOME="$AIBOX_HOME" \
			PATH="$PATH" AIBOX_IMAGES="$AIBOX_IMAGES" ANTHROPIC_API_KEY=sk-ant-test-key \
			GIT_CONFIG_NOSYSTEM=1 aibox task "a prompt" || true
		for i in $(seq 100); do [ "$(grep -c aibox-audit "$T/syslog.out" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
		kill "$(cat "$T/rsyslog.pid")"
		wait
	'
	[ "$status" -eq 0 ] || fail "$stderr"
	assert_success
	run grep -c '' "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_output 2
	# Both entries, as in the file, each stamped with the uid that sent it.
	run grep 'aibox-audit: ' "$T/syslog.out"
	assert_success
	assert_equal "${#lines[@]}" 2
	for i in 0 1; do
		[[ "${lines[$i]}" == "uid=65534 authpriv aibox["*"]: aibox-audit: "* ]] || fail "${lines[$i]}"
		assert_equal "${lines[$i]#*aibox-audit: }" "$(sed -n "$((i + 1))p" "$AIBOX_HOME/audit.jsonl")"
	done
	run jq -r '.uid' "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_output $'65534\n65534'
}

@test "audit: where journald listens, each entry goes to the journal's socket with aibox's fields and no uid of its own" {
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	chown -R 65534:65534 "$T"
	chmod 755 "$T"
	export T LISTEN=$BATS_TEST_DIRNAME/journal-listen
	# In the namespace: /run/systemd a fresh tmpfs, t/journal-listen at the
	# journal's socket in it (no journald here), the task as 65534.
	run --separate-stderr timeout 60 unshare -m --propagation private bash -c '
		set -e
		mkdir -p /run/systemd
		mount -t tmpfs tmpfs /run/systemd
		mkdir /run/systemd/journal
		"$LISTEN" /run/systemd/journal/socket "$T/journal.out" 2 &
		for i in $(seq 100); do [ -e "$T/journal.out.ready" ] && break; sleep 0.1; done
		[ -S /run/systemd/journal/socket ]
		cd "$T/repo"
		setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$HOME" AIBOX_HOME="$AIBOX_HOME" \
			PATH="$PATH" AIBOX_IMAGES="$AIBOX_IMAGES" ANTHROPIC_API_KEY=sk-ant-test-key \
			GIT_CONFIG_NOSYSTEM=1 aibox task "a prompt" || true
		wait $!
	'
	[ "$status" -eq 0 ] || fail "$stderr"
	assert_success
	run grep -c '' "$T/journal.out"
	assert_success
	assert_output 2
	for i in 1 2; do
		entry=$(sed -n "${i}p" "$AIBOX_HOME/audit.jsonl")
		m=$(sed -n "${i}p" "$T/journal.out")
		# the kernel's word for who sent it: what journald stamps as _UID
		assert_equal "$(jq -r .cred_uid <<<"$m")" 65534
		assert_equal "$(jq -r .MESSAGE <<<"$m")" "aibox-audit: $entry"
		assert_equal "$(jq -r .AIBOX_AUDIT <<<"$m")" "$entry"
		assert_equal "$(jq -r '[.SYSLOG_IDENTIFIER, .SYSLOG_FACILITY, .PRIORITY] | @tsv' <<<"$m")" $'aibox\t10\t6'
		assert_equal "$(jq -r '[.AIBOX_EVENT, .AIBOX_PROJECT, .AIBOX_TASK, .AIBOX_SEQ, .AIBOX_HASH] | @tsv' <<<"$m")" \
			"$(jq -r '[.event, .project, .task, (.seq | tostring), .hash] | @tsv' <<<"$entry")"
		# no trusted field (_UID, _PID, ...) and no other: journald stamps those itself
		assert_equal "$(jq -c 'keys' <<<"$m")" '["AIBOX_AUDIT","AIBOX_EVENT","AIBOX_HASH","AIBOX_PROJECT","AIBOX_SEQ","AIBOX_TASK","MESSAGE","PRIORITY","SYSLOG_FACILITY","SYSLOG_IDENTIFIER","cred_pid","cred_uid"]'
	done
	run jq -r .event "$AIBOX_HOME/audit.jsonl"
	assert_success
	assert_output $'start\nend'
}

@test "audit: a real journald gets each entry, stamps the task user's uid, and aibox audit list --log reads them back" {
	[ -x /lib/systemd/systemd-journald ] || skip "no systemd-journald"
	no_vm_project
	echo 'env: [ANTHROPIC_API_KEY]' >"$cfg"
	chown -R 65534:65534 "$T"
	chmod 755 "$T"
	export T
	# In the namespace: journald of our own, its sockets and its journal on
	# fresh tmpfs mounts (no other program's entries), the task as 65534.
	run --separate-stderr timeout 60 unshare -m --propagation private bash -c '
		set -e
		mkdir -p /run/systemd /run/log
		mount -t tmpfs tmpfs /run/systemd
		mount -t tmpfs tmpfs /run/log
		[ ! -d /var/log/journal ] || mount -t tmpfs tmpfs /var/log/journal
		mkdir /run/systemd/journal
		/lib/systemd/systemd-journald 2>"$T/journald.err" &
		for i in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.1; done
		[ -S /run/systemd/journal/socket ]
		cd "$T/repo"
		setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$HOME" AIBOX_HOME="$AIBOX_HOME" \
			PATH="$PATH" AIBOX_IMAGES="$AIBOX_IMAGES" ANTHROPIC_API_KEY=sk-ant-test-key \
			GIT_CONFIG_NOSYSTEM=1 aibox task "a prompt" 2>"$T/task.err" || true
		for i in $(seq 50); do
			[ "$(aibox audit list --log --json 2>/dev/null | jq length)" = 2 ] && break
			sleep 0.1
		done
		aibox audit list --log --json >"$T/list.json"
		kill $!
		wait $! || true
	'
	[ "$status" -eq 0 ] || fail "$stderr $(cat "$T/journald.err")"
	assert_success
	assert_equal "$stderr" "aibox-audit-list: the system log's copy, from the journal"
	# the entries as in the file, each with the uid the journal stamped
	assert_equal "$(jq -c '[.[] | del(.log_uid)]' "$T/list.json")" "$(jq -sc . "$AIBOX_HOME/audit.jsonl")"
	run jq -c '[.[] | [.event, .uid, .log_uid]]' "$T/list.json"
	assert_success
	assert_output '[["start",65534,65534],["end",65534,65534]]'
}
