#!/usr/bin/env bats
# The libFuzzer targets (fuzz/), built with clang and run for a second each
# on their seed corpora (libFuzzer runs every seed before it checks the time,
# so the whole corpus runs however short the time): this proves they still
# build and start, it is no campaign (docs/security.md, "Fuzzing").  A crash is a failure; its input
# is kept in $T/crash-* (copy it into a test, then fix the bug).
load lib-common

FUZZ_SECONDS=${AIBOX_FUZZ_SECONDS:-1}

# Every fuzzer, built once for the file (the library compiled once for them
# all); a test whose fuzzer did not build says why when it makes it again.
# Whether clang can build a fuzzer at all is asked once here too: the
# reason to skip, if any, is in $FUZZ_BUILD/skip for every test's setup.
setup_file() {
	export FUZZ_BUILD=$BATS_FILE_TMPDIR/build
	mkdir -p "$FUZZ_BUILD"
	if ! command -v clang >/dev/null; then
		echo "clang is not installed (packages.txt has it)" >"$FUZZ_BUILD/skip"
		return 0
	fi
	echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' \
		>"$BATS_FILE_TMPDIR/probe.c"
	if ! clang -fsanitize=fuzzer "$BATS_FILE_TMPDIR/probe.c" -o "$BATS_FILE_TMPDIR/probe" 2>/dev/null; then
		echo "clang cannot link libFuzzer (libclang-rt-14-dev)" >"$FUZZ_BUILD/skip"
		return 0
	fi
	make -s -C "$TOP" -j2 B="$FUZZ_BUILD" fuzz >/dev/null 2>&1 || true
}

setup() {
	common_setup
	[ ! -s "$FUZZ_BUILD/skip" ] || skip "$(cat "$FUZZ_BUILD/skip")"
}

teardown() { common_teardown; }

# fuzz NAME: build it into $T and run it for FUZZ_SECONDS.
fuzz() {
	local name=$1
	make -s -C "$TOP" B="$FUZZ_BUILD" "$FUZZ_BUILD/fuzz/$name" >/dev/null
	mkdir -p "corpus-$name" tmp
	TMPDIR=$T/tmp run "$FUZZ_BUILD/fuzz/$name" -max_total_time="$FUZZ_SECONDS" \
		-max_len=65536 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$T/" \
		-print_final_stats=1 "corpus-$name" "$TOP/fuzz/corpus/$name"
	echo "$output" | grep -E '^(stat::number_of_executed_units|Done)' || true
	assert_success
	refute_output --partial "ERROR: AddressSanitizer"
	refute_output --partial "runtime error"
	assert_output --partial "stat::number_of_executed_units"
	run ls crash-* leak-* timeout-* oom-*
	assert_failure
	# The indexer's folders are all gone.
	[ "$(ls -A tmp)" = "" ]
}

@test "fuzz: every target has a seed corpus and a test here" {
	local f name missing=
	for f in "$TOP"/fuzz/fuzz-*.c; do
		name=$(basename "$f" .c)
		[ -n "$(ls -A "$TOP/fuzz/corpus/$name" 2>/dev/null)" ] || missing+=" $name(corpus)"
		grep -q "^	fuzz $name\$" "$BATS_TEST_FILENAME" || missing+=" $name(test)"
	done
	[ -z "$missing" ] || fail "missing:$missing"
}

@test "fuzz: make fuzz-run runs every fuzzer, with or without a seed corpus" {
	make -s -C "$TOP" B="$FUZZ_BUILD" "$FUZZ_BUILD/fuzz/fuzz-duration" >/dev/null
	cp "$FUZZ_BUILD/fuzz/fuzz-duration" "$FUZZ_BUILD/fuzz/fuzz-no-such-corpus"
	run make -s -C "$TOP" B="$FUZZ_BUILD" FUZZ_SECONDS=1 \
		FUZZERS="$FUZZ_BUILD/fuzz/fuzz-no-such-corpus $FUZZ_BUILD/fuzz/fuzz-duration" fuzz-run
	assert_success
	assert_output --partial "fuzz-no-such-corpus: no seed corpus"
	# The second fuzzer ran after the first, and read its seeds.
	assert_output --partial "fuzz/corpus/fuzz-duration"
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

@test "fuzz: the broker's token scrub survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-broker-scrub
}

@test "fuzz: the results tar reader survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-tar-in
}

@test "fuzz: result.json, the summary and the proxy's record survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-result-parse
}

@test "fuzz: the transcript renderer and summary.json's reader survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-transcript
}

@test "fuzz: the check of a task's session.jsonl survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-session-file
}

@test "fuzz: the mending of a session file from its transcript survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-session-mend
}

@test "fuzz: the proxy's HTTP parsing survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-http
}

@test "fuzz: the push command list and pkt-line parsers survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-gitproto
}

@test "fuzz: the config parser survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-config
}

@test "fuzz: the duration parser survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-duration
}

@test "fuzz: prompt decoding survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-prompt-decode
}

@test "fuzz: the output sanitizer survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-sanitize
}

@test "fuzz: the proxy's usage parser and the price table survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-usage
}

@test "fuzz: the proxy's WebSocket frame scrub survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-ws-scrub
}

@test "fuzz: the secret swap, a rule's path and method, the form scan and the echo survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-secret-swap
}

@test "fuzz: the dependency cache's keys, path rules and metadata readers survive ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-dep-rules
}

@test "fuzz: a Go module zip's h1, whole and in steps, survives ${FUZZ_SECONDS}s of fuzzing" {
	fuzz fuzz-go-zip
}
