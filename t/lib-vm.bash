# Shared by the tests that boot VMs (t/4xxx, and later families): load after
# lib-common.
#
# The image store is shared on purpose: the user's own cache (kept between
# runs), built once by t/4000-image.bats or by the first test that needs it.

export AIBOX_IMAGES=${AIBOX_IMAGES:-${XDG_CACHE_HOME:-$HOME/.cache}/aibox/images}
IMAGE=$AIBOX_IMAGES/default

# vm_image: make sure the default image is built (reused when unchanged).
# Checked once per test file and store: no test changes the store's image
# (those that spoil one spoil a copy), and the check itself (apt-cache and
# dpkg on the host) costs seconds, which every test's setup paid before.
vm_image() {
	local stamp=${BATS_FILE_TMPDIR:-}/vm-image-checked
	if [ -n "${BATS_FILE_TMPDIR:-}" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$AIBOX_IMAGES" ]; then
		return 0
	fi
	aibox image build >/dev/null 2>"$T/image-build.log" || {
		cat "$T/image-build.log" >&2
		return 1
	}
	if [ -n "${BATS_FILE_TMPDIR:-}" ]; then
		printf '%s\n' "$AIBOX_IMAGES" >"$stamp"
	fi
}

# vm_share DIR [forced]: a task folder for a VM with new host and user keys.
# With "forced", authorized_keys carries the product's forced command, as
# aibox-task writes it; without, the test's key may run any command, so the
# test can look inside the guest (the image's own sshd does the rest).
vm_share() {
	local dir=$1 forced=${2:-}
	mkdir -p "$dir/ssh"
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -C aibox-host -f "$T/hostkey"
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -C aibox-user -f "$T/userkey"
	cp "$T/hostkey" "$dir/ssh/ssh_host_ecdsa_key"
	if [ -n "$forced" ]; then
		echo "command=\"/usr/lib/aibox/aibox-init session\",restrict $(cat "$T/userkey.pub")" \
			>"$dir/ssh/authorized_keys"
	else
		cp "$T/userkey.pub" "$dir/ssh/authorized_keys"
	fi
	echo "aibox $(cut -d' ' -f1,2 "$T/hostkey.pub")" >"$T/known_hosts"
	printf '{"version": 1, "mode": "task", "path": "/project", "mounts": []}\n' \
		>"$dir/settings.json"
}

# vm_ssh ARGS...: ssh to the guest through test-vm's --listen socket $T/ssh.sock,
# pinning the host key made by vm_share.  VM_SSH_KEY: another user key;
# VM_SSH_OPTS: options first (ssh takes an option's first value).
vm_ssh() {
	# shellcheck disable=SC2086 # VM_SSH_OPTS is words
	ssh ${VM_SSH_OPTS:-} -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -i "${VM_SSH_KEY:-$T/userkey}" \
		-o UserKnownHostsFile="$T/known_hosts" -o StrictHostKeyChecking=yes \
		-o HostKeyAlias=aibox -o LogLevel=ERROR -o ConnectTimeout=120 \
		-o ProxyCommand="aibox-connect $T/ssh.sock" root@aibox "$@"
}

# vm_fake_proxy SOCKET: a stand-in for aibox-proxy on SOCKET that answers each
# connection with "proxy-hello"; its pid in FAKE_PROXY_PID (end it by pid).
vm_fake_proxy() {
	python3 - "$1" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b"proxy-hello\n")
    c.close()
PY
	FAKE_PROXY_PID=$!
	wait_until 60 test -S "$1"
}

vm_teardown() {
	if [ -n "${FAKE_PROXY_PID:-}" ]; then
		kill "$FAKE_PROXY_PID" 2>/dev/null
		wait "$FAKE_PROXY_PID" 2>/dev/null
	fi
	if [ -n "${TEST_VM_PID:-}" ]; then
		kill "$TEST_VM_PID" 2>/dev/null
		wait "$TEST_VM_PID" 2>/dev/null
	fi
	true
}
