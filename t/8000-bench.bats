#!/usr/bin/env bats
# The benches under bench/ (docs/performance.md), each run once at its
# smallest size, so that a broken bench fails the suite.  They time nothing
# here and assert no speed: each must end with status 0 and print its figures
# (the lines checked are the ones docs/performance.md takes its tables from).
# bench/slurm needs root and a cluster: t/9200-bench-slurm.bats runs it.
load lib-common
load lib-vm

# bench NAME ARGS...: run bench/NAME with its output in $T/NAME.out, and fail,
# showing it, when it exits non-zero.
bench() {
	local name=$1
	shift
	run --separate-stderr "$TOP/bench/$name" "$@"
	printf '%s\n%s\n' "$output" "$stderr" >"$T/$name.out"
	[ "$status" -eq 0 ] || fail "bench/$name exited $status: $(tail -30 "$T/$name.out")"
}

# figure REGEX: a line of the last bench's stdout matches REGEX (an extended
# regular expression), else the test fails naming it.
figure() {
	grep -qE -- "$1" <<<"$output" || fail "bench printed no line matching '$1': $(tail -30 "$T"/*.out)"
}

@test "bench: BENCH_KSM's switch sets KSM on and puts run and pages_to_scan back, even on a failure" {
	# A sysfs folder of the test's own: the host's KSM is left alone.
	export KSM_SYS=$T/ksm
	mkdir "$KSM_SYS"
	echo 0 >"$KSM_SYS/run"
	echo 100 >"$KSM_SYS/pages_to_scan"
	run bash -c '. "$0/bench/lib-ksm.bash"; trap ksm_restore EXIT; set -e
		ksm_on 1000; cat "$KSM_SYS/run" "$KSM_SYS/pages_to_scan"; false' "$TOP"
	assert_failure 1
	assert_output $'1\n1000'
	run cat "$KSM_SYS/run" "$KSM_SYS/pages_to_scan"
	assert_success
	assert_output $'0\n100'
	# where run cannot be written the bench refuses before it runs anything
	KSM_SYS=$T/none BENCH_KSM=1 run --separate-stderr "$TOP/bench/attempts" 2 1
	assert_failure 2
	assert_equal "$stderr" "bench/attempts: BENCH_KSM needs $T/none/run writable (root, a kernel with KSM)"
}

@test "bench: BENCH_APPEND refuses what is not kernel arguments before it runs anything" {
	# what ends up in the QEMU wrapper's -append: no quote, no ; or $
	for bad in 'a=1|x"; touch $T/ran' "\$(touch $T/ran)" "a;b" "a'b"; do
		BENCH_APPEND=$bad run --separate-stderr "$TOP/bench/attempts" 2 1
		assert_failure 2
		assert_equal "$stderr" "bench/attempts: BENCH_APPEND: '${bad#a=1|}' is not kernel arguments"
	done
	assert [ ! -e "$T/ran" ]
}

@test "bench: bench/bundle at its smallest size prints its table of aibox against git" {
	RUNS=1 bench bundle 200
	figure '^\| start bundle .* \| [0-9]+ ms \| [0-9]+ ms \| [0-9.]+ \|$'
	figure '^\| aibox-bundle-check --pack .* \| [0-9]+ ms \| [0-9]+ ms \| [0-9.]+ \|$'
	figure '^\| header check alone, in process .* \| [0-9]+ µs \|'
}

@test "bench: bench/bundle bombs prints each bomb's verdict, CPU and peak memory" {
	# The two rows checked here; every bomb's verdict is t/2001's.
	bench bundle bombs blob legit
	figure '^\| blob 1024: .* over the limit .* \| [0-9.]+ s \| [0-9]+ KiB \|$'
	figure '^\| a file of 12 MiB .* \| accepted \| [0-9.]+ s \| [0-9]+ KiB \|$'
}

@test "bench: bench/proxy at its smallest size measures aibox-proxy and tinyproxy side by side" {
	command -v tinyproxy >/dev/null || fail "no tinyproxy: make deps installs it"
	BENCH_SMALL=1 bench proxy 4194304
	figure '^## aibox-proxy$'
	figure '^## tinyproxy [0-9.]+$'
	# The interception against the tunnel, in the same run.
	figure '^download ratio, intercepted/tunnel: [0-9.]+$'
	figure '^new intercepted TLS connections, 4 at a time: [0-9]+ per second, proxy CPU [0-9.]+ ms each$'
	figure '^new intercepted TLS connections with one request each, 4 at a time: [0-9]+ per second, proxy CPU [0-9.]+ ms each$'
	figure '^proxy memory per idle intercepted connection: -?[0-9.]+ KiB \(50 open\)$'
	run grep -cE '^tunnel: +[0-9.]+ s +[0-9]+ MiB/s$' "$T/proxy.out"
	assert_output 2
	run grep -cE '^CPU s per GiB, tunnel: sender [0-9.]+, sink [0-9.]+, proxy [0-9.]+' "$T/proxy.out"
	assert_output 2
	run grep -cE '^tunnels opened and closed one after another: [0-9]+ per second$' "$T/proxy.out"
	assert_output 2
	run grep -cE '^VmHWM:[[:space:]]+[0-9]+ kB$' "$T/proxy.out"
	assert_output 2
}

@test "bench: bench/cache at its smallest size prints a fill's and a hit's times" {
	bench cache 4 20
	figure '^fill: [0-9]+ ms \(sha512sum alone: [0-9]+ ms\)$'
	figure '^hit: [0-9]+ ms \(cat alone: [0-9]+ ms\)$'
	figure '^fill: [0-9]+ µs each$'
	figure '^hit: [0-9]+ µs each$'
}

@test "bench: bench/cache-install at its smallest size prints npm's, npm ci's and pip's first and second task and the proxy's CPU" {
	BENCH_SLOW=0 bench cache-install 3 2 1
	figure '^second task: [0-9]+ ms, 0 tarballs from upstream \([0-9]+% of the first\)$'
	figure '^second task: [0-9]+ ms, 0 tarballs from upstream, 3 documents fetched \([0-9]+% of the first\), the proxy.s CPU [0-9]+ ms$'
	figure '^npm ci alone \(no proxy, no delay, no document\): [0-9]+ ms \([0-9]+% of the first\)$'
	figure '^second task: [0-9]+ ms, 0 wheels from upstream \([0-9]+% of the first\), the proxy.s CPU [0-9]+ ms$'
	figure '^hit \(from the store\): [0-9]+ ms of CPU, [0-9]+ ms$'
}

@test "bench: bench/boot 1 prints a cold and a restored boot's figures" {
	vm_image
	bench boot 1
	figure '^run 1: bare [0-9]+ ms, cold: ready [0-9]+ ms, ssh [0-9]+ ms, claude [0-9]+ ms, rss [0-9]+ KiB$'
	figure '^run 1: snapshot: ready [0-9]+ ms, ssh [0-9]+ ms, claude [0-9]+ ms, rss [0-9]+ KiB \(from the stamp: qemu (yes|no), ram (yes|no)\)$'
	figure '^run 1: snapshot checked in full: ready [0-9]+ ms, ssh [0-9]+ ms, claude [0-9]+ ms, rss [0-9]+ KiB \(from the stamp: qemu no, ram no\)$'
}

@test "bench: bench/clone at its smallest shape prints the host's and the guest's clone" {
	vm_image
	RUNS=1 bench clone 20:4:3
	figure '^### 20 files of 4 KiB, 3 commits: pack [0-9.]+ MiB'
	figure '^\| host: test-bundle write --idx .* \| [0-9]+ \| [0-9]+ \| [0-9.]+ \|$'
	figure '^\| guest: the clone step under (TCG|KVM) \(s, one boot each; ok / ok\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$'
}

@test "bench: bench/task at its smallest size runs a one-commit task and prints its phases" {
	vm_image
	BENCH_SMALL=1 bench task 1
	figure '^\| wall \| - \| - \| [0-9.]+ \|$'
	figure '^\| agent \| - \| - \| [0-9.]+ \|$'
	figure '^\| overhead \| - \| - \| [0-9.]+ \|$'
	figure '^\| host-clone \| - \| - \| [0-9.]+ \|$'
	figure '^\| first-request \| - \| - \| [0-9.]+ \|$'
	figure '^\| ssh-kex \| - \| - \| [0-9.]+ \|$'
	figure '^\| ssh-close \| - \| - \| [0-9.]+ \|$'
	figure "^the guest's init: built (without the sanitizers|with UBSan|with ASan and UBSan)$"
}

@test "bench: bench/load at its smallest size holds 100 tunnels, lands 5 pushes and runs 2 tasks at once, each with its own result" {
	vm_image
	BENCH_SMALL=1 bench load
	figure '^tunnels open at once: 100 \(opened in [0-9.]+ s\)$'
	figure '^each tunnel used 2 times, its own bytes back: all 100, in [0-9.]+ s$'
	figure '^proxy memory with all open: VmHWM [0-9]+ KiB, -?[0-9.]+ KiB a tunnel more than at rest$'
	figure '^proxy log: 100 tunnels, all allowed, no error$'
	figure '^pushes at once: 5, landed upstream with their own commits: 5, in [0-9.]+ s$'
	figure '^tasks ended with their own commit, none with another.s: 2 of 2, in [0-9.]+ s$'
	figure '^configured guest memory: 2048 MiB \(2 x 1024 MiB\)$'
	figure '^host memory of the tasks against the configured: [0-9]+ MiB, [-+][0-9]+ MiB, [-+][0-9.]+ MiB a task$'
}

@test "bench: bench/attempts at its smallest size prints one task's and two attempts' wall time and memory" {
	vm_image
	BENCH_SMALL=1 BENCH_MEM_DIR=$T/mem bench attempts 2 1
	figure '^\| 1 task \| [0-9.]+ \| 1\.00 \| [0-9]+ \| 1\.00 \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| 1\.00 \|$'
	figure '^\| --attempts 2 \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \| [0-9.]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$'
	# BENCH_MEM_DIR: the guest's memory at the task's commit (each
	# attempt's), and the QEMUs' mappings at the peak
	run grep -c '^MemTotal: ' "$T/mem/aibox.one.guest" "$T/mem/aibox.attempts.guest"
	assert_output "$T/mem/aibox.one.guest:1
$T/mem/aibox.attempts.guest:2"
	run grep -cE "^\| [0-9]+ \| guest RAM \(the snapshot's file\) \|( [0-9]+ \|){7}$" \
		"$T/mem/aibox.one.host" "$T/mem/aibox.attempts.host"
	assert_output "$T/mem/aibox.one.host:1
$T/mem/aibox.attempts.host:2"
}
