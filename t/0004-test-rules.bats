#!/usr/bin/env bats
# The suite's own rules, as t/run enforces them (t/check-bang).
load lib-common

@test "test-rules: a bare '!' in the middle of a test is refused" {
	printf '@test "x" {\n\t! false\n\ttrue\n}\n' >mid.bats
	run "$TOP/t/check-bang" mid.bats
	assert_failure 1
	assert_output --partial 'mid.bats:2: a bare "!" that is not last asserts nothing'
}

@test "test-rules: 'run !', a last '!' and '!' in conditions pass" {
	# (written as TEST and NOT: bats reads a line starting with @test as a test
	# of this file, and a line starting with '!' here would be one of ours)
	sed 's/^TEST/@test/; s/NOT/!/g' >ok.bats <<'B'
TEST "x" {
	run NOT false
	if NOT false; then
		true
	fi
	NOT false && NOT false ||
		NOT true
	while NOT true; do :; done
	NOT false
}
helper() {
	NOT false # a helper's result
}
B
	run "$TOP/t/check-bang" ok.bats
	assert_success
	assert_output ''
}

@test "test-rules: every test file of the suite passes the check" {
	run "$TOP/t/check-bang" "$TOP"/t/*.bats "$TOP"/t/lib-*.bash
	assert_success
}
