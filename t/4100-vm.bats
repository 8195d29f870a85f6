#!/usr/bin/env bats
# Real boots of the default image under the launcher (common/vm/vm.h), with
# aibox-init's base as PID 1: the SSH server on the private channel with the
# pinned host key, the read-only share and mounts, the state disk, the network
# that reaches only the proxy forward, and the power-off after a session.
load lib-common
load lib-vm

setup() {
	common_setup
	vm_image
}

teardown() {
	vm_teardown
	common_teardown
}

# One boot, in setup_file, for the tests that read what a probe over SSH saw
# in it ("vm: the booted VM ..."): $S/out (test-vm's output and the probe's),
# $S/status, $S/console.log.
setup_file() {
	common_setup
	export S=$T
	vm_image
	vm_share "$T/task"
	ssh-keygen -q -t ed25519 -N '' -C old -f "$T/oldkey"
	cat "$T/oldkey.pub" >>"$T/task/ssh/authorized_keys"
	mkdir "$T/extra"
	echo "from the host" >"$T/extra/hello"
	printf '{"version": 1, "path": "/work/proj", "mounts": [{"tag": "extra0", "path": "/home/aibox/.claude/skills"}]}\n' \
		>"$T/task/settings.json"
	vm_fake_proxy "$T/proxy.sock"
	echo "$FAKE_PROXY_PID" >"$S/proxy.pid"
	cat >"$T/probe" <<'PROBE'
. "$T/env"
vm_ssh bash -s <<'GUEST'
echo "user $(id -un)"
touch /run/aibox/task/new 2>/dev/null && echo "share writable" || echo "share read-only"
awk '$2 == "/run/aibox/task" { split($4, o, ","); print "share-mount", $3, o[1] }' /proc/mounts
awk '$2 == "/mnt/state" { print "state-mount", $3 }' /proc/mounts
awk '$2 == "/" { print "root-mount", $3 }' /proc/mounts
s=$(stat -c %d /mnt/state)
for d in /home/aibox /work/proj /tmp /var/tmp; do
	[ "$(stat -c %d "$d")" = "$s" ] && echo "on-state $d $(stat -c '%U %a' "$d")"
done
cat /home/aibox/.claude/skills/hello
touch /home/aibox/.claude/skills/x 2>/dev/null && echo "mount writable" || echo "mount read-only"
stat -c 'ssh-key %a %U' /run/aibox/ssh/ssh_host_ecdsa_key
[ -s /etc/resolv.conf ] && echo "dns configured" || echo "no dns"
(exec 3<>/dev/tcp/10.0.2.100/3128 && head -1 <&3 | sed 's/^/forward: /')
timeout 10 bash -c 'exec 3<>/dev/tcp/10.0.2.2/22' 2>/dev/null && echo "host reached" || echo "host unreachable"
timeout 10 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443' 2>/dev/null && echo "internet reached" || echo "internet unreachable"
echo "claude $(claude --version 2>&1 | head -1)"
GUEST
echo "ssh status $?"
# The state disk as QEMU holds it (docs/security.md, the Disk row): every
# regular file QEMU has open at test-vm's disk size, its links, whether its
# blocks are allocated and whether it has a name, once a file (QEMU opens
# /dev/fd/N again).
q=$(pgrep -P "$PPID" qemu-system)
declare -A seen
for f in /proc/$q/fd/*; do
	read -r ino links size blocks unit < <(stat -L -c '%d:%i %h %s %b %B' "$f" 2>/dev/null) || continue
	[ "$size" = 1073741824 ] && [ -z "${seen[$ino]}" ] || continue
	seen[$ino]=1
	used=$((blocks * unit))
	echo "state-disk links $links size $size $([ "$used" -lt $((64 << 20)) ] && echo sparse || echo "allocated $used") $(readlink "$f" | grep -q ' (deleted)$' && echo unnamed || echo named)"
done
# Only NIST P-256 (docs/security.md, "The SSH algorithms"): what the guest's
# sshd offers, as a client offering only the old algorithms is told, and an
# authorized ed25519 key refused before the P-256 one is taken.  (After a
# refused login or host key, the next session here once got no banner within
# test-vm's 60 s, that sshd presumably waiting out its LoginGraceTime: the
# wrong pin below goes last.)
VM_SSH_OPTS="-o LogLevel=INFO -o KexAlgorithms=curve25519-sha256" vm_ssh true 2>&1 |
	tr -d '\r' | sed -n 's/^Unable to negotiate with [^:]*: /old kex: /p'
VM_SSH_OPTS="-o LogLevel=INFO -o HostKeyAlgorithms=ssh-ed25519" vm_ssh true 2>&1 |
	tr -d '\r' | sed -n 's/^Unable to negotiate with [^:]*: /old host key: /p'
VM_SSH_OPTS="-v -i $T/oldkey" vm_ssh echo logged in 2>&1 | tr -d '\r' | sed -n \
	-e 's/^debug1: Offering public key: .*\/\([a-z]*\) \([A-Z0-9]*\) .*/user key offered: \1 \2/p' \
	-e 's/^debug1: Server accepts key: .*\/\([a-z]*\) \([A-Z0-9]*\) .*/user key accepted: \1 \2/p' \
	-e 's/^logged in$/user key: logged in/p'
# A server with another host key is refused: the pin holds.
echo "aibox $(cut -d' ' -f1,2 "$T/userkey.pub")" >"$T/known_hosts"
vm_ssh true 2>/dev/null
echo "wrong pin status $?"
PROBE
	export T
	declare -f vm_ssh >"$T/env"
	echo "T=$T" >>"$T/env"
	local status=0
	test-vm --image "$IMAGE" --share "$T/task" --proxy "$T/proxy.sock" \
		--mount "extra0=$T/extra" --log "$T/console.log" --listen "$T/ssh.sock" \
		-- bash "$T/probe" >"$S/out" 2>&1 || status=$?
	echo "$status" >"$S/status"
}

teardown_file() {
	[ -s "$S/proxy.pid" ] && kill "$(cat "$S/proxy.pid")" 2>/dev/null
	T=$S common_teardown
}

# probed: the probe's output as bats' run leaves it (output, lines); the
# boot and the probe went well.
probed() {
	output=$(cat "$S/out")
	mapfile -t lines <"$S/out"
	[ "$(cat "$S/status")" = 0 ] || { cat "$S/out" "$S/console.log"; false; }
}

@test "vm: the booted VM answers SSH as root with the pinned host key, and refuses another pin" {
	probed
	assert_line --regexp '^ssh-ready [0-9]+$'
	assert_line "user root"
	assert_line "ssh-key 600 root"
	assert_line "ssh status 0"
	assert_line "wrong pin status 255"
	run grep -c 'aibox-init: ready (mode task' "$S/console.log"
	assert_output 1
}

@test "vm: the guest's sshd offers and takes only P-256: a client with the old algorithms is refused" {
	probed
	assert_line --regexp '^old kex: no matching key exchange method found\. Their offer: ecdh-sha2-nistp256(,kex-strict-s-v00@openssh\.com)?$'
	assert_line "old host key: no matching host key type found. Their offer: ecdsa-sha2-nistp256"
	assert_line "user key offered: oldkey ED25519"
	assert_line "user key offered: userkey ECDSA"
	assert_line "user key accepted: userkey ECDSA"
	refute_line "user key accepted: oldkey ED25519"
	assert_line "user key: logged in"
}

@test "vm: the booted VM has the task share read-only over 9p" {
	probed
	assert_line "share read-only"
	assert_line "share-mount 9p ro"
	assert_file_not_exists "$S/task/new"
}

@test "vm: the booted VM's root is an overlay; home, project and temporary folders are on the state disk" {
	probed
	assert_line "state-mount ext4"
	assert_line "root-mount overlay"
	assert_line "on-state /home/aibox aibox 755"
	assert_line "on-state /work/proj aibox 755"
	assert_line "on-state /tmp root 1777"
	assert_line "on-state /var/tmp root 1777"
}

@test "vm: the state disk is a sparse file of the configured size, open in QEMU without a name" {
	probed
	assert_line "state-disk links 0 size 1073741824 sparse unnamed"
	run grep '^state-disk ' "$S/out"
	[ "${#lines[@]}" = 1 ] || { echo "$output"; false; }
}

@test "vm: the booted VM has a settings mount readable and read-only" {
	probed
	assert_line "from the host"
	assert_line "mount read-only"
}

@test "vm: the booted VM's network reaches the proxy forward only: no DNS, no host, no internet" {
	probed
	assert_line "forward: proxy-hello"
	assert_line "no dns"
	assert_line "host unreachable"
	assert_line "internet unreachable"
}

@test "vm: the booted VM has the image's Claude Code" {
	probed
	assert_line "claude 2.1.197 (Claude Code)"
}

@test "vm: the per-task key runs only aibox-init session, and the VM powers off after it" {
	vm_share "$T/task" forced
	cat >"$T/probe" <<'PROBE'
. "$T/env"
vm_ssh 'cat /etc/shadow'
echo "ssh status $?"
PROBE
	export T
	declare -f vm_ssh >"$T/env"
	echo "T=$T" >>"$T/env"
	run test-vm --image "$IMAGE" --share "$T/task" --log "$T/console.log" \
		--listen "$T/ssh.sock" --grace-ms 60000 -- bash "$T/probe"
	[ "$status" -eq 0 ] || cat "$T/console.log"
	assert_success
	assert_line "aibox-init: unknown session command 'cat /etc/shadow' in task mode"
	assert_line "ssh status 2"
	refute_line --partial "root:"
	assert_line "vm: powered off"
	run grep -c 'session over, powering off' "$T/console.log"
	assert_output 1
}

@test "vm: a bad settings.json stops the boot with the reason on the console" {
	vm_share "$T/task"
	echo '{"path": "../escape"}' >"$T/task/settings.json"
	run test-vm --image "$IMAGE" --share "$T/task" --log "$T/console.log"
	assert_failure 3
	run cat "$T/console.log"
	assert_output --partial "settings.json: the project path '../escape' is not a clean absolute path"
	assert_output --partial "cannot set up the VM, powering off"
}
