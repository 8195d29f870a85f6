#!/usr/bin/env bats
# A task's VM started from the image's saved snapshot (common/vm/snapshot.h,
# docs/image.md "Snapshots"): restored VMs differ where it matters and share
# nothing writable; a snapshot that is damaged or made for something else is
# not used, and the VM boots cold with the reason.
load lib-common
load lib-vm

setup() {
	common_setup
	vm_image
	export T
}

teardown() {
	for p in ${SNAP_PIDS:-}; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	vm_teardown
	common_teardown
}

# snap_keys DIR: a task folder DIR/share with its own host and user keys in DIR.
snap_keys() {
	local d=$1
	mkdir -p "$d/share/ssh"
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -C aibox-host -f "$d/hostkey"
	ssh-keygen -q -t ecdsa -b 256 -m PEM -N '' -C aibox-user -f "$d/userkey"
	cp "$d/hostkey" "$d/share/ssh/ssh_host_ecdsa_key"
	cp "$d/userkey.pub" "$d/share/ssh/authorized_keys"
	echo "aibox $(cut -d' ' -f1,2 "$d/hostkey.pub")" >"$d/known_hosts"
	printf '{"version": 1, "path": "/project", "mounts": [{"tag": "extra0", "path": "/home/aibox/.claude/skills"}]}\n' \
		>"$d/share/settings.json"
}

# snap_made: the store's image has its snapshot for test-vm's size (saved now if not).
snap_made() {
	snap_keys "$T/made"
	test-vm --image "$IMAGE" --share "$T/made/share" --proxy "$T/none.sock" \
		--log "$T/made.log" --snapshot 1 --start-only 1 2>"$T/made.err" || {
		cat "$T/made.err" "$T/made.log" >&2
		return 1
	}
	grep -q 'test-vm: restored' "$T/made.err" || {
		cat "$T/made.err" >&2
		return 1
	}
}

# snap_start: test-vm starts the VM of $T/c's task folder from $T/img's
# snapshot (or cold) and stops it; its lines on stdout.
snap_start() {
	test-vm --image "$T/img" --share "$T/c/share" --proxy "$T/none.sock" \
		--log "$T/c/console.log" --snapshot 1 --start-only 1 2>&1
}

# snap_copy: an image folder $T/img with the store's files and a copy of its
# snapshot that the test may spoil.
snap_copy() {
	mkdir "$T/img"
	for f in vmlinuz initramfs rootfs.ext4; do
		ln -s "$IMAGE/$f" "$T/img/$f"
	done
	cp "$IMAGE/manifest" "$IMAGE"/snapshot-1024m-2c.* "$T/img/"
	chmod u+w "$T/img"/*
}

@test "snapshot: two VMs restored at once differ in random state, PID 1's layout and host key, see their own share, share the RAM file's pages and nothing writable, never write the file, and find claude in their page cache" {
	snap_made
	ram=$IMAGE/snapshot-1024m-2c.ram
	sum=$(md5sum <"$ram")
	mkdir "$T/extra"
	echo "from the host" >"$T/extra/hello"
	cat >"$T/probe" <<'PROBE'
d=$T/$1
ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -i "$d/userkey" \
	-o UserKnownHostsFile="$d/known_hosts" -o StrictHostKeyChecking=yes \
	-o HostKeyAlias=aibox -o LogLevel=ERROR -o ConnectTimeout=120 \
	-o ProxyCommand="aibox-connect $d/ssh.sock" root@aibox bash -s >"$d/out" <<'GUEST'
# first, before anything here could read it: the page cache the snapshot holds
echo "claude-cached $(fincore --bytes --noheadings --output RES /usr/local/bin/claude) $(stat -c %s /usr/local/bin/claude)"
# and what a task starts before Claude Code's first request, which this probe does not run
for f in /usr/bin/ps $(/lib64/ld-linux-x86-64.so.2 --list /usr/bin/ps | awk '$2 == "=>" && $3 ~ /libproc/ { print $3 }') /etc/ssl/certs/ca-certificates.crt; do
	echo "warm-cached $f $(fincore --bytes --noheadings --output RES "$(readlink -f "$f")") $(stat -L -c %s "$f")"
done
echo "random $(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "boot-id $(cat /proc/sys/kernel/random/boot_id)"
echo "stack $(awk '/\[stack\]/ { print $1 }' /proc/1/maps)"
echo "extra $(cat /home/aibox/.claude/skills/hello)"
echo "clock $(date +%s)"
echo "disk $(($(cat /sys/block/$(basename $(awk '$2 == "/mnt/state" { print $1 }' /proc/mounts))/size) / 2048))"
# guest pages written: each a private copy, never the host's file
dd if=/dev/urandom of=/run/fill bs=1M count=16 status=none && echo "filled"
GUEST
echo "ssh $?" >>"$d/out"
touch "$d/done"
# Both VMs up: the files each QEMU holds open for writing.
for i in $(seq 600); do
	[ -e "$T/a/done" ] && [ -e "$T/b/done" ] && break
	sleep 0.2
done
qemu=$(pgrep -P "$PPID" -f qemu-system)
for fd in /proc/$qemu/fd/*; do
	flags=$(awk '/^flags/ { print $2 }' "/proc/$qemu/fdinfo/${fd##*/}" 2>/dev/null) || continue
	# files only: sockets, pipes and anon inodes (one inode for all) are no paths
	[[ $(readlink "$fd") == /* ]] && [ -f "$fd" ] && [ $((8#$flags & 3)) -ne 0 ] &&
		stat -L -c '%d:%i' "$fd"
done | sort -u >"$d/writable"
# The snapshot's RAM file as this QEMU maps it: its permissions, and KiB
# resident, proportional (shared pages split among the sharers) and shared.
awk '/^[0-9a-f]+-[0-9a-f]+ / { on = ($NF ~ /snapshot-1024m-2c\.ram$/); if (on) perm = $2 }
	on && $1 == "Rss:" { rss += $2 } on && $1 == "Pss:" { pss += $2 }
	on && $1 == "Shared_Clean:" { sh += $2 }
	END { print "ram", perm, rss + 0, pss + 0, sh + 0 }' "/proc/$qemu/smaps" >"$d/ram"
# Hold the VM until the other has looked too.
touch "$d/looked"
for i in $(seq 600); do
	[ -e "$T/a/looked" ] && [ -e "$T/b/looked" ] && break
	sleep 0.2
done
PROBE
	SNAP_PIDS=
	for v in a b; do
		snap_keys "$T/$v"
		test-vm --image "$IMAGE" --share "$T/$v/share" --proxy "$T/none.sock" \
			--mount "extra0=$T/extra" --disk-mb $([ $v = a ] && echo 700 || echo 900) \
			--log "$T/$v/console.log" --listen "$T/$v/ssh.sock" --snapshot 1 \
			-- bash "$T/probe" "$v" >"$T/$v/vm.out" 2>"$T/$v/vm.err" &
		SNAP_PIDS="$SNAP_PIDS $!"
	done
	for p in $SNAP_PIDS; do
		wait "$p"
	done
	SNAP_PIDS=
	for v in a b; do
		cat "$T/$v/vm.err" "$T/$v/out" "$T/$v/ram" >&2
		grep -qx 'filled' "$T/$v/out"
		# guest RAM is the snapshot's RAM file, mapped private (copy on write)
		read -r _ perm rss pss shared <"$T/$v/ram"
		[ "$perm" = rw-p ]
		# pages the guest only read are the file's page cache, mapped by
		# both QEMUs (Shared_Clean: mapped by more than one process)
		[ "$shared" -ge $((16 * 1024)) ]
		rss_sum=$((${rss_sum:-0} + rss))
		pss_sum=$((${pss_sum:-0} + pss))
		grep -qx 'test-vm: restored' "$T/$v/vm.err"
		grep -qx 'ssh 0' "$T/$v/out"
		grep -qx 'extra from the host' "$T/$v/out"
		# the clock is the host's, not the snapshot's
		clock=$(awk '$1 == "clock" { print $2 }' "$T/$v/out")
		[ $((clock - $(date +%s))) -gt -120 ]
		# the state disk is the task's own size
		grep -qx "disk $([ $v = a ] && echo 700 || echo 900)" "$T/$v/out"
		[ -s "$T/$v/writable" ]
		# Claude Code's binary is in the page cache whole (docs/image.md,
		# "Snapshots"): its start reads nothing from the root disk
		read -r _ cached size < <(grep '^claude-cached ' "$T/$v/out")
		[ "$size" -gt 100000000 ]
		[ "$cached" -ge "$size" ]
		# ps, its libproc2 and the CA bundle too, read whole before the save
		assert_equal "$(grep -c '^warm-cached ' "$T/$v/out")" 3
		while read -r _ f cached size; do
			[ "$size" -gt 0 ] || fail "$f: empty"
			[ "$cached" -ge "$size" ] || fail "$f: $cached of $size bytes cached"
		done < <(grep '^warm-cached ' "$T/$v/out")
	done
	for k in random boot-id stack; do
		a=$(grep "^$k " "$T/a/out")
		b=$(grep "^$k " "$T/b/out")
		[ -n "$a" ]
		[ "${a#* }" != "" ]
		[ "$a" != "$b" ]
	done
	# each VM answered with its own task's host key (the pin held), and they differ
	[ "$(cat "$T/a/known_hosts")" != "$(cat "$T/b/known_hosts")" ]
	# so the two VMs' PSS of it counts those pages once, not twice
	[ "$pss_sum" -le $((rss_sum - 16 * 1024)) ]
	# QEMU 7.2 opens a private RAM file for writing (it cannot otherwise);
	# both hold that one file so, mapped private: no other file is shared
	ino=$(stat -c '%d:%i' "$ram")
	run comm -12 "$T/a/writable" "$T/b/writable"
	assert_output "$ino"
	# the guests' writes did not reach the file
	[ "$(md5sum <"$ram")" = "$sum" ]
	# the snapshot itself is read-only; the RAM file only to others
	run find "$IMAGE" -name 'snapshot-*' -perm /222 ! -name '*.ram'
	assert_output ""
	run find "$IMAGE" -name 'snapshot-*.ram' -perm /022
	assert_output ""
}

@test "snapshot: a truncated snapshot is not used: the VM boots cold with the reason and works" {
	snap_made
	snap_copy
	chmod u+w "$T"/img/snapshot-1024m-2c.vmstate
	truncate -s -4096 "$T"/img/snapshot-1024m-2c.vmstate
	chmod 0444 "$T"/img/snapshot-1024m-2c.vmstate
	snap_keys "$T/c"
	mkdir "$T/extra"
	run test-vm --image "$T/img" --share "$T/c/share" --proxy "$T/none.sock" \
		--mount "extra0=$T/extra" --log "$T/c/console.log" --snapshot 1 -- true
	assert_success
	assert_output --partial "test-vm: cold"
	assert_output --regexp "test-vm: booting cold: the snapshot is truncated \([0-9]+ bytes, its manifest says [0-9]+\)"
	assert_output --partial "ssh-ready"
}

@test "snapshot: a corrupt, writable or mismatched snapshot is not used but removed, with the reason; so is an image that predates snapshots" {
	snap_made
	snap_copy
	snap_keys "$T/c"
	f=$T/img/snapshot-1024m-2c.vmstate
	m=$T/img/snapshot-1024m-2c.manifest
	ram=$T/img/snapshot-1024m-2c.ram
	fresh() {
		rm -f "$f" "$m" "$ram"
		cp -p "$IMAGE"/snapshot-1024m-2c.vmstate "$IMAGE"/snapshot-1024m-2c.manifest \
			"$IMAGE"/snapshot-1024m-2c.ram "$T/img/"
	}
	removed="; it is removed, the next task saves a new one"
	# one byte changed in the middle
	fresh
	chmod u+w "$f"
	flip_byte "$f" $(($(stat -c %s "$f") / 2))
	chmod 0444 "$f"
	run snap_start
	assert_success
	assert_output --partial "test-vm: cold"
	assert_output --partial "test-vm: booting cold: the snapshot does not match its manifest's digest$removed"
	[ ! -e "$f" ]
	[ ! -e "$m" ]
	# one byte of guest RAM changed, its bits inverted (an X written there would
	# change nothing were that byte an X already: the guest may have used the page)
	fresh
	flip_byte "$ram" $((512 << 20))
	run snap_start
	assert_success
	assert_output --partial "test-vm: cold"
	assert_output --partial "test-vm: booting cold: the snapshot's RAM file does not match its manifest's digest$removed"
	[ ! -e "$ram" ]
	[ ! -e "$m" ]
	# writable by its owner: refused before it is read
	fresh
	chmod 0644 "$f"
	run snap_start
	assert_output --partial "test-vm: booting cold: the snapshot is not a read-only file$removed"
	[ ! -e "$f" ]
	[ ! -e "$m" ]
	# made by another QEMU
	fresh
	chmod u+w "$m"
	sed -i 's/^qemu .*/qemu QEMU emulator version 6.2.0/' "$m"
	run snap_start
	assert_output --partial "test-vm: booting cold: the snapshot was made for 'qemu QEMU emulator version 6.2.0', this VM is 'qemu QEMU emulator version"
	assert_output --partial "$removed"
	[ ! -e "$f" ]
	[ ! -e "$m" ]
	# made for another CPU model
	fresh
	chmod u+w "$m"
	sed -i 's/^cpu .*/cpu host 0000/' "$m"
	run snap_start
	assert_output --partial "test-vm: booting cold: the snapshot was made for 'cpu host 0000', this VM is 'cpu max'$removed"
	# a good one is used
	fresh
	run snap_start
	assert_output --partial "test-vm: restored"
	[ -e "$f" ]
	[ -e "$m" ]
	# an image built before snapshots (no "snapshot 1" in its manifest)
	sed -i '/^snapshot 1$/d' "$T/img/manifest"
	run snap_start
	assert_output --partial "test-vm: booting cold: the image's init predates snapshots (rebuild it: aibox image build)"
}

@test "snapshot: the stamp spares QEMU's version and the RAM file's digest while the files are the same, and never hides a change" {
	snap_made
	snap_copy
	chmod 0444 "$T"/img/snapshot-1024m-2c.vmstate
	rm -f "$T"/img/snapshot-1024m-2c.stamp
	snap_keys "$T/c"
	stamp=$T/img/snapshot-1024m-2c.stamp
	ram=$T/img/snapshot-1024m-2c.ram
	# the copy's RAM file changed just now: checked in full, and not stamped yet
	run snap_start
	assert_output --partial "test-vm: restored"
	assert_output --partial "test-vm: from the stamp: qemu no, ram no"
	run grep -c '^ram ' "$stamp"
	assert_output 0
	# settled: checked in full once more, then stamped
	sleep 2
	run snap_start
	assert_output --partial "test-vm: from the stamp: qemu yes, ram no"
	run grep -c '^ram ' "$stamp"
	assert_output 1
	run snap_start
	assert_output --partial "test-vm: restored"
	assert_output --partial "test-vm: from the stamp: qemu yes, ram yes"
	# a stamp naming another QEMU version: QEMU is asked, the snapshot kept
	good=$(cat "$stamp")
	rm -f "$stamp"
	sed 's/^qemu-version .*/qemu-version QEMU emulator version 6.2.0/' <<<"$good" >"$stamp"
	run snap_start
	assert_output --partial "test-vm: restored"
	assert_output --partial "test-vm: from the stamp: qemu no, ram yes"
	# a garbled stamp is no stamp
	rm -f "$stamp"
	head -c 3000 /dev/urandom >"$stamp"
	run snap_start
	assert_output --partial "test-vm: restored"
	assert_output --partial "test-vm: from the stamp: qemu no, ram no"
	sleep 2
	run snap_start
	assert_output --partial "test-vm: from the stamp: qemu yes, ram yes"
	# one byte of guest RAM changed (its bits inverted), and settled: its
	# change time moved, so it is read again and refused, the stamp
	# notwithstanding
	flip_byte "$ram" $((512 << 20))
	sleep 2
	run snap_start
	assert_output --partial "test-vm: cold"
	assert_output --partial "test-vm: booting cold: the snapshot's RAM file does not match its manifest's digest; it is removed"
	[ ! -e "$ram" ]
	[ ! -e "$stamp" ]
}
