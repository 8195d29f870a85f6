#!/usr/bin/env bats
# make deb: the Debian package, installed with dpkg --root into a fresh root
# and run from there.  dpkg --root works as the unprivileged test user with
# --force-not-root (the files then belong to that user, which is all a test
# needs); the root's database starts as a copy of this machine's, so dpkg
# checks the package's Depends against what make deps installed.
load lib-common

setup_file() {
	command -v dpkg-shlibdeps >/dev/null || skip "no dpkg-shlibdeps (packages.txt has dpkg-dev)"
	# The build as it is: the same SANITIZE, so nothing is rebuilt.
	local san=0
	grep -q -- -fsanitize "$BUILD/.flags" 2>/dev/null && san=1
	make -s -C "$TOP" SANITIZE=$san deb >/dev/null
	DEB=$(echo "$BUILD"/aibox_*_"$(dpkg --print-architecture)".deb)
	export DEB
}

# dpkg_root ROOT: an empty root whose dpkg database lists this machine's packages.
dpkg_root() {
	mkdir -p "$1/var/lib/dpkg/info" "$1/var/lib/dpkg/updates"
	cp /var/lib/dpkg/status "$1/var/lib/dpkg/status"
	: >"$1/var/lib/dpkg/available"
}

# dpkg_install ROOT: dpkg -i the package into ROOT, as whoever runs the test.
dpkg_install() {
	dpkg --root="$1" --force-not-root --log=/dev/null -i "$DEB" 2>&1 |
		grep -v "^dpkg: warning: files list file for package .* missing"
	return "${PIPESTATUS[0]}"
}

@test "deb: installed with dpkg --root, aibox runs its tools from /usr/libexec/aibox" {
	dpkg_root root
	run dpkg_install root
	assert_success
	assert_output --partial "Setting up aibox"
	run root/usr/bin/aibox --version
	assert_success
	assert_output --regexp '^aibox version [0-9]+\.[0-9]+\.[0-9]+$'
	run root/usr/bin/aibox help
	assert_success
	assert_output --partial "usage: aibox"
	assert_line --regexp '^   task +run Claude Code unattended'
	assert_line --regexp '^   tasks clean +remove what ended tasks leave behind$'
	refute_line --regexp '^   init( |$)'
	# help for one command runs that tool from libexec (stdout is no terminal).
	run root/usr/bin/aibox help task
	assert_success
	assert_line --index 0 --regexp '^usage: aibox task '
	# The completion script comes from /usr/share/aibox.
	run root/usr/bin/aibox completion bash
	assert_success
	assert_line "complete -F _aibox aibox"
}

@test "deb: the files are where make install PREFIX=/usr puts them" {
	run dpkg-deb -c "$DEB"
	assert_success
	assert_line --regexp ' \./usr/bin/aibox$'
	assert_line --regexp ' \./usr/libexec/aibox/aibox-task$'
	assert_line --regexp ' \./usr/libexec/aibox/aibox-init$'
	assert_line --regexp ' \./usr/share/aibox/image/default/recipe$'
	assert_line --regexp ' \./usr/share/aibox/image/task\.md$'
	assert_line --regexp ' \./usr/share/aibox/presets/github$'
	assert_line --regexp ' \./usr/share/man/man1/aibox-task\.1\.gz$'
	assert_line --regexp ' \./usr/share/doc/aibox/copyright$'
	assert_line --regexp ' \./usr/libexec/aibox/aibox-completion$'
	assert_line --regexp ' \./usr/share/bash-completion/completions/aibox$'
	assert_line --regexp ' \./usr/share/zsh/vendor-completions/_aibox$'
	assert_line --regexp '^-rwxr-xr-x root/root .* \./usr/bin/aibox$'
	refute_line --regexp '\.c$'
	refute_line --regexp ' \./usr/share/aibox/image/init/'
}

@test "deb: Depends names the libraries and the programs aibox runs" {
	run dpkg-deb -f "$DEB" Depends
	assert_success
	local p
	for p in 'libgit2-1.5' 'libssh2-1' 'libjansson4' 'libseccomp2' 'libsystemd0' 'git' \
		'qemu-system-x86' 'mmdebstrap' 'uidmap' 'busybox-static' 'cpio' 'e2fsprogs' 'npm | nodejs'; do
		[[ ", $output," == *", $p"[\ ,]* ]] || fail "Depends has no '$p': $output"
	done
	# the task's SSH keys are made in the process: no OpenSSH program runs on the host
	[[ "$output" != *openssh* ]] || fail "Depends names OpenSSH: $output"
}

@test "deb: dpkg refuses it in a root without qemu-system-x86" {
	dpkg_root root
	awk -v RS= -v ORS='\n\n' '!/^Package: qemu-system-x86\n/' /var/lib/dpkg/status \
		>root/var/lib/dpkg/status
	run dpkg_install root
	assert_failure
	assert_output --partial "depends on qemu-system-x86"
	run dpkg-query --admindir=root/var/lib/dpkg -W -f '${Status}' aibox
	refute_output --partial " installed"
}
