#!/usr/bin/env bats
# make deps, as the README's first command runs it: as root it runs apt-get
# itself (t/9000-root.bats has that test), as anyone else through sudo, and
# without sudo it says to run it as root.  apt-get and sudo are fakes on a PATH
# of their own, so nothing is installed.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" != 0 ] || skip "as root make deps needs no sudo (t/9000-root.bats)"
	common_setup
	fake_path
}

# fake_path: $T/bin holds what make deps runs (id, grep, xargs, sh), a fake
# apt-get that logs its arguments to $T/apt.log, and nothing else.
fake_path() {
	local t
	mkdir "$T/bin"
	for t in id grep xargs sh; do ln -s "$(command -v "$t")" "$T/bin/$t"; done
	printf '#!/bin/sh\necho "apt-get $*" >>"%s/apt.log"\n' "$T" >"$T/bin/apt-get"
	chmod +x "$T/bin/apt-get"
	MAKE=$(command -v make)
}

@test "make deps: without root and without sudo it says to run it as root, and installs nothing" {
	PATH=$T/bin run "$MAKE" -s -C "$TOP" deps
	assert_failure
	assert_line "make deps: this needs root and there is no sudo: run 'make deps' as root"
	[ ! -e "$T/apt.log" ]
}

@test "make deps: as a user it installs packages.txt through sudo" {
	printf '#!/bin/sh\necho "sudo $1" >>"%s/apt.log"\nexec "$@"\n' "$T" >"$T/bin/sudo"
	chmod +x "$T/bin/sudo"
	PATH=$T/bin run "$MAKE" -s -C "$TOP" deps
	assert_success
	run cat "$T/apt.log"
	assert_line --index 0 "sudo apt-get"
	assert_line --index 1 "apt-get update -qq"
	assert_line --index 2 "sudo sh"
	assert_line --regexp "^apt-get install -y -qq --no-install-recommends make gcc .* qemu-system-x86 mmdebstrap uidmap "
	# The README's commands have no sudo: make deps asks for it when it must.
	run grep -nE '^    .*sudo' "$TOP/README.md"
	assert_failure
	grep -qx '    make deps && make demo' "$TOP/README.md"
}
