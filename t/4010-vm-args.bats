#!/usr/bin/env bats
# common/vm/vm.c's QEMU argv for a cold boot (vm_cold_args(), pure): no VM, no
# QEMU; test-vm --args-only prints it one argument a line.
load lib-common

@test "vm args: a cold boot's machine, sizes, kernel, disks and console" {
	run test-vm --args-only 0 --image /img --share /share --memory 2048 --cpus 3 \
		--cmdline "aibox.x=1"
	assert_success
	want='qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot -M q35
-accel tcg,tb-size=256 -cpu max -m 2048 -smp 3 -kernel /img/vmlinuz -initrd /img/initramfs
-append console=ttyS0 quiet panic=-1 aibox.mode=task aibox.x=1
-chardev stdio,id=con,signal=off -serial chardev:con
-drive file=/img/rootfs.ext4,format=raw,if=none,id=root,readonly=on
-device virtio-blk-pci,drive=root,serial=aibox-root
-drive file=/dev/fd/3,format=raw,if=none,id=state,cache=unsafe
-device virtio-blk-pci,drive=state,serial=aibox-state
-virtfs local,path=/share,mount_tag=aibox.task,security_model=none,readonly=on
-device virtio-serial-pci -chardev socket,id=ssh,fd=4
-device virtserialport,chardev=ssh,name=aibox.ssh'
	assert_equal "$(tr '\n' ' ' <<<"$output")" "$(tr '\n' ' ' <<<"$want")"
	# KVM has no translation buffer: no tb-size, which QEMU refuses there
	run test-vm --args-only 1 --image /img --share /share
	assert_success
	assert_line --index 9 kvm
	assert_line --index 11 host
	refute_output --partial tb-size
}

@test "vm args: shares are read-only unless writable, commas doubled; no proxy socket, no network" {
	run test-vm --args-only 0 --image /img --share /a,b --mount m0=/c,d \
		--rw-mount aibox.home=/h
	assert_success
	assert_line "local,path=/a,,b,mount_tag=aibox.task,security_model=none,readonly=on"
	assert_line "local,path=/c,,d,mount_tag=m0,security_model=none,readonly=on"
	assert_line "local,path=/h,mount_tag=aibox.home,security_model=none"
	refute_line -netdev
}

@test "vm args: the network is one guestfwd to aibox-connect on the proxy's socket, quoted for /bin/sh" {
	run test-vm --args-only 0 --image /img --share /s --proxy "/p q's.sock" --connect /bin/c \
		--conns-log /l.log
	assert_success
	assert_line "user,id=net0,restrict=on,ipv6=off,guestfwd=tcp:10.0.2.100:3128-cmd:/bin/c --max 64 --log /l.log '/p q'\\''s.sock'"
	assert_line "virtio-net-pci,netdev=net0,romfile="
}
