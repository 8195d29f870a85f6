#!/usr/bin/env bats
# The audit record's copy in the system log (common/task/audit.c, docs/security.md
# "The audit record"), read back from a real syslog daemon that the test
# starts itself: rsyslogd, in a mount namespace of the test's own where /dev
# is a fresh tmpfs (the machine's devices bound back in), so that its
# /dev/log is the test's and no other program's.  rsyslog stamps each entry
# with the sender's uid from the socket's credentials (SysSock.ParseTrusted),
# which the sender cannot forge: the task runs as uid 65534 and the entries
# say so.  Root family: making the namespace and switching the uid need root.
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
