# A real OpenSSH server for the task session tests, run as the test user
# (`sshd -i` on a socketpair the helper makes).  As a non-root user sshd can
# only log in as that user, so the tests authenticate as it, not as root.
# Load after lib-common; call sshd_setup from setup().

sshd_setup() {
	[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (openssh-server)"
	mkdir "$T/keys"
	test-task ssh-keys "$T/keys" >/dev/null
	cat >"$T/sshd_config" <<-CONF
		AuthorizedKeysFile $T/auth
		StrictModes no
		UsePAM no
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		PidFile none
		LogLevel VERBOSE
	CONF
}

# forced SCRIPT: replace the product's forced command by a test script.
forced() {
	sed "s|^command=\"/usr/lib/aibox/aibox-init session\",restrict |command=\"$T/cmd\",restrict |" \
		"$T/keys/ssh/authorized_keys" >"$T/auth"
	printf '#!/bin/sh\n%s\n' "$1" >"$T/cmd"
	chmod +x "$T/cmd"
}

SSHD_ARGV() {
	echo /usr/sbin/sshd -i -f "$T/sshd_config" -h "$T/keys/ssh/ssh_host_ecdsa_key" -E "$T/sshd.log"
}
