#!/usr/bin/env bats
# The root family: aibox used by root, as in a container, on a fresh cloud
# machine or in CI.  t/run runs t/9*.bats as root before it switches to the
# user aibox-test for the rest; run by anyone else they skip.  The image store
# is root's own (root's cache, as lib-vm picks it): built once by the first
# test there, rebuilt when the recipe or the build scripts change, so a fresh
# machine (CI) builds it as root every run.  The task and the run use
# t/fake-api as the API, as t/5100 and t/7000 do.
load lib-common
load lib-task
bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: t/run runs the root family (t/9*.bats) as root"
	task_setup
}

teardown() {
	if [ -n "${T:-}" ]; then
		task_teardown
	fi
}

@test "root: aibox image build works as root, without subordinate ids or user namespaces" {
	# task_setup built it (vm_image), or found it built.
	run aibox image build
	assert_success
	assert_line "$IMAGE"
	grep '^sha256 ' "$IMAGE/manifest" | awk '{ print $2 "  " $3 }' >"$T/sums"
	assert_equal "$(wc -l <"$T/sums")" 3
	(cd "$IMAGE" && sha256sum --quiet -c "$T/sums")
	grep -q '^package openssh-server ' "$IMAGE/manifest"
	# Owners and modes came through as in a user's build.
	run debugfs -R 'stat /usr/local/bin/claude' "$IMAGE/rootfs.ext4"
	assert_output --partial "Mode:  0755"
	assert_output --regexp "User: +0 +Group: +0"
	run debugfs -R 'stat /home/aibox' "$IMAGE/rootfs.ext4"
	assert_output --regexp "User: +1000 +Group: +1000"
}

@test "root: a task as root commits in the VM and its fetch command brings the commit in" {
	api '{"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "id -u > uid.txt && git add uid.txt && git commit -q -m \"Add uid.txt\"", "description": "commit"}}},
	  {"text": "I added uid.txt."}], "require_key": "'"$KEY"'"}'
	run --separate-stderr aibox task "Add uid.txt"
	[ "$status" -eq 0 ] || { echo "$stderr" >"$T/err"; show; }
	assert_success
	dir=$(task_dir)
	fetch=$(grep -A1 'fetch them with' <<<"$stderr" | tail -1 | sed 's/^.*]:  *//')
	[[ "$fetch" == "git fetch "* ]]
	eval "$fetch"
	branch=aibox/task-$(basename "$dir")
	assert_equal "$(git log -1 --format=%s "$branch")" "Add uid.txt"
	# Claude Code ran as the VM's unprivileged user, whoever runs aibox.
	assert_equal "$(git show "$branch:uid.txt")" 1000
	run pgrep -f "$dir"
	assert_failure
}

@test "root: aibox run as root writes the project as root, and Claude Code takes bypassPermissions there" {
	printf '  - CLAUDE_CODE_MAX_RETRIES\n  - CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\n' \
		>>"$AIBOX_HOME/projects/repo/config.yaml"
	api '{"turns": [
	  {"text": "Creating the file.", "tool_use": {"name": "Bash", "input": {"command": "echo made-by-claude > proof.txt"}}},
	  {"text": "The file proof.txt is there."}], "require_key": "'"$KEY"'"}'
	export CLAUDE_CODE_MAX_RETRIES=0 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
	run --separate-stderr aibox run --memory 2G -- sh -c 'id -u; id -g; echo "user=$USER sandbox=$IS_SANDBOX"
mkdir made-dir && echo from-vm >made-dir/file
claude -p --permission-mode bypassPermissions "make the proof file"; echo "claude=$?"' </dev/null
	echo "$output" >&2
	echo "$stderr" >&2
	assert_success
	assert_line --index 0 0
	assert_line --index 1 0
	assert_line "user=root sandbox=1"
	assert_line "The file proof.txt is there."
	assert_line "claude=0"
	assert_equal "$(cat made-dir/file)" from-vm
	assert_equal "$(cat proof.txt)" made-by-claude
	assert_equal "$(stat -c %u:%g made-dir made-dir/file proof.txt | sort -u)" 0:0
}

@test "root: make deps runs apt-get itself, without sudo" {
	mkdir "$T/bin"
	for t in id grep xargs sh; do ln -s "$(command -v "$t")" "$T/bin/$t"; done
	printf '#!/bin/sh\necho "apt-get $*" >>"%s/apt.log"\n' "$T" >"$T/bin/apt-get"
	printf '#!/bin/sh\necho "sudo $*" >>"%s/apt.log"\nexit 1\n' "$T" >"$T/bin/sudo"
	chmod +x "$T/bin/apt-get" "$T/bin/sudo"
	PATH=$T/bin run "$(command -v make)" -s -C "$TOP" deps
	assert_success
	run cat "$T/apt.log"
	assert_line --index 0 "apt-get update -qq"
	assert_line --regexp "^apt-get install -y -qq --no-install-recommends make gcc .* mmdebstrap uidmap "
	refute_output --partial sudo
}
