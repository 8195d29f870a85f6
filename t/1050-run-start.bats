#!/usr/bin/env bats
# aibox run up to the boot, without a VM (t/lib-common.bash no_vm): the
# options, the checks before the run folder, and the words it shares with
# aibox task.  t/7000 runs it with the real image.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
}

@test "run: options stand anywhere before --; what follows -- is the command's" {
	# the command's own --memory is not aibox's: the run gets to the boot
	run --separate-stderr aibox run -- true --memory 4GB
	assert_failure 125
	[[ "$stderr" == *"aibox-run: the VM did not come up: QEMU exited"* ]] || fail "$stderr"
	run --separate-stderr aibox run --no-sandbox --cpus 1 --image default --memory 1G -- true
	assert_failure 125
	[[ "$stderr" == *"aibox-run: the VM did not come up: QEMU exited"* ]] || fail "$stderr"
	POSIXLY_CORRECT=1 run --separate-stderr aibox run --no-sandbox --cpus 1 -- true
	assert_failure 125
	[[ "$stderr" == *"aibox-run: the VM did not come up: QEMU exited"* ]] || fail "$stderr"
	run aibox run true
	assert_failure 125
	assert_line --index 0 "aibox-run: 'true' is not an option: the command goes after '--'"
	run aibox run --cpus 1 --modle x -- true
	assert_failure 125
	assert_line --index 0 "aibox-run: unknown option '--modle'"
	[ -z "$(ls "$AIBOX_HOME/projects/repo/runs" 2>/dev/null)" ]
}

@test "run: the image, mounts, presets and git remotes are checked as aibox task checks them" {
	export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-token
	for c in "" "mounts:
  - host: $T/nowhere
    vm: /data" "allow:
  - preset:nosuch" "git:
  - url: https://nosuch.invalid/o/r.git"; do
		# With a login, so that aibox task gets as far as these checks.
		printf 'env: [CLAUDE_CODE_OAUTH_TOKEN]\n%s\n' "$c" >"$cfg"
		if [ -z "$c" ]; then
			img=(--image nosuch)
		else
			img=()
		fi
		run --separate-stderr aibox task "${img[@]}" x
		assert_failure 2
		want=${stderr#aibox-task: }
		[ -n "$want" ]
		run --separate-stderr aibox run "${img[@]}" -- true
		assert_failure 125
		assert_equal "$stderr" "aibox-run: $want"
	done
	run --separate-stderr aibox run --image nosuch -- true
	assert_failure 125
	assert_equal "$stderr" "aibox-run: the image 'nosuch' is not built: run 'aibox image build nosuch'"
	[ -z "$(ls "$AIBOX_HOME/projects/repo/runs" 2>/dev/null)" ]
	[ -z "$(ls "$AIBOX_HOME/projects/repo/tasks" 2>/dev/null)" ]
}
