#!/usr/bin/env bats
# bench/slurm (docs/performance.md, "Slurm") run once, as root, so that a
# broken bench fails the suite; the other benches are in t/8000-bench.bats.
# It starts a cluster of its own (t/lib-slurm.bash), so it runs after
# t/9100-slurm.bats has stopped that file's.  It times nothing here.
load lib-common
load lib-vm
load lib-slurm

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: t/run runs the root family (t/9*.bats) as root"
	local why
	why=$(slurm_why_not)
	[ -z "$why" ] || skip "$why"
	common_setup
	vm_image
}

@test "bench: bench/slurm 1 runs a task directly and with --slurm and prints both columns" {
	# 1G: the size whose snapshot t/9100's tasks saved (no run saves one here)
	BENCH_MEMORY=1G run --separate-stderr "$TOP/bench/slurm" 1
	[ "$status" -eq 0 ] || fail "bench/slurm exited $status: $(tail -30 <<<"$stderr")"
	assert_line --regexp '^\| to-vm-start \| [0-9.]+ \| [0-9.]+ \|$'
	assert_line --regexp '^\| queue \| - \| [0-9.]+ \|$'
	assert_line --regexp '^\| wall \| [0-9.]+ \| [0-9.]+ \|$'
}
