#!/usr/bin/env bats
# The bundle fuzzers (fuzz/), built with clang and run for a bounded time on
# their seed corpora.  A crash is a failure; its input is kept in $T/crash-*
# (copy it into t/fixtures/bundles/ and a test, then fix the bug).
load lib-common

FUZZ_SECONDS=${AIBOX_FUZZ_SECONDS:-20}

setup() {
	common_setup
	command -v clang >/dev/null || skip "clang is not installed (packages.txt has it)"
	echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >probe.c
	clang -fsanitize=fuzzer probe.c -o probe 2>/dev/null ||
		skip "clang cannot link libFuzzer (libclang-rt-14-dev)"
}

# fuzz NAME: build it into $T and run it for FUZZ_SECONDS.
fuzz() {
	local name=$1
	make -s -C "$TOP" B="$T/build" "$T/build/fuzz/$name" >/dev/null
	mkdir -p "corpus-$name" tmp
	TMPDIR=$T/tmp run "$T/build/fuzz/$name" -max_total_time="$FUZZ_SECONDS" \
		-max_len=65536 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$T/" \
		-print_final_stats=1 "corpus-$name" "$TOP/fuzz/corpus/$name"
	echo "$output" | grep -E '^(stat::number_of_executed_units|Done)' || true
	assert_success
	refute_output --partial "ERROR: AddressSanitizer"
	refute_output --partial "runtime error"
	run ls crash-* leak-* timeout-* oom-*
	assert_failure
	# The indexer's folders are all gone.
	[ "$(ls -A tmp)" = "" ]
}

@test "fuzz: the bundle header parser survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-bundle-header
}

@test "fuzz: the pack verifier survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-bundle-pack
}

@test "fuzz: the broker's request reader survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-broker-request
}
