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

@test "test-rules: a mid-test '[ A ] && [ B ]' or 'cmd && cmd' list is refused" {
	printf '@test "x" {\n\t[ -e a ] && [ -e b ]\n\ttrue\n}\n@test "y" {\n\tcd sub && grep -q x f; true\n\ttrue\n}\n' >and.bats
	run "$TOP/t/check-bang" and.bats
	assert_failure 1
	assert_line --partial 'and.bats:2: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_line --partial 'and.bats:6: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_equal "${#lines[@]}" 2
}

@test "test-rules: '[[ A ]] && [[ B ]]' and 'test A && test B' in the middle of a test are refused" {
	printf '@test "x" {\n\t[[ -e a ]] && [[ $b == "x && y" ]]\n\ttrue\n}\n@test "y" {\n\ttest -e a && test -e b\n\ttrue\n}\n' >and.bats
	run "$TOP/t/check-bang" and.bats
	assert_failure 1
	assert_line --partial 'and.bats:2: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_line --partial 'and.bats:6: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_equal "${#lines[@]}" 2
}

@test "test-rules: an '&&' list over lines, or one whose '||' is inside braces, is refused in the middle of a test" {
	printf '@test "x" {\n\t[ -e a ] &&\n\t\t[ -e b ]\n\ttrue\n}\n@test "y" {\n\t[ -e a ] && { [ -e b ] || [ -e c ]; }\n\ttrue\n}\n' >and.bats
	run "$TOP/t/check-bang" and.bats
	assert_failure 1
	assert_line --partial 'and.bats:2: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_line --partial 'and.bats:7: an "A && B" list in the middle of a test asserts nothing when A fails'
	assert_equal "${#lines[@]}" 2
}

@test "test-rules: a list over lines that ends the test, has its own '||' or guards an assignment passes" {
	sed 's/^TEST/@test/' >ok.bats <<'B'
TEST "x" {
	[ -e a ] &&
		[ -e b ] || fail "no b"
	[ -n "$h" ] &&
		hwm=$h
	[ -e a ] && { [ -e b ] || [ -e c ]; } || fail "none"
	[ -e a ] &&
		[ -e b ]
}
B
	run "$TOP/t/check-bang" ok.bats
	assert_success
	assert_output ''
}

@test "test-rules: '&&' that only guards an assignment or a break, is last, or sits in a condition, a subshell or a string passes" {
	sed 's/^TEST/@test/' >ok.bats <<'B'
TEST "x" {
	[ -n "$h" ] && hwm=$h
	for i in 1 2; do
		[ -e a ] && [ -e b ] && break
	done
	if [ -e a ] && [ -e b ]; then
		true
	fi
	(cd sub && grep -q x f)
	v=$(cd sub && pwd)
	echo "a && b"
	[ -e a ] ||
		[ -e b ] && [ -e c ]
	cat <<-EOF
		x && y
	EOF
	[ -e a ] && [ -e b ]
}
helper() {
	[ -n "$x" ] && kill "$x"
	true
}
B
	run "$TOP/t/check-bang" ok.bats
	assert_success
	assert_output ''
}

@test "test-rules: a 'run' whose status and output nothing reads is refused, up to the next run and at the test's end" {
	printf '@test "x" {\n\trun aibox task x\n\trun cat f\n\tassert_output y\n\trun --separate-stderr aibox task y\n\t[ -e f ]\n}\n' >run.bats
	run "$TOP/t/check-bang" run.bats
	assert_failure 1
	assert_line --partial 'run.bats:2: a "run" whose status and output nothing checks'
	assert_line --partial 'run.bats:5: a "run" whose status and output nothing checks'
	assert_equal "${#lines[@]}" 2
}

@test "test-rules: a run of an aibox tool whose exit status nothing checks is refused, though what it says is" {
	printf '@test "x" {\n\trun aibox tasks list\n\tassert_output x\n\trun --separate-stderr build/aibox-task x\n\t[ "$stderr" = y ]\n\trun cat f\n\tassert_output z\n}\n' >run.bats
	run "$TOP/t/check-bang" run.bats
	assert_failure 1
	assert_line --partial 'run.bats:2: a "run" of an aibox tool whose exit status nothing checks (assert_success, assert_failure)'
	assert_line --partial 'run.bats:4: a "run" of an aibox tool whose exit status nothing checks'
	assert_equal "${#lines[@]}" 2
}

@test "test-rules: a run of an aibox tool checked by assert_success, assert_failure, \$status, assert_stopped_at_boot, 'run !' or 'run -N' passes" {
	sed 's/^TEST/@test/' >ok.bats <<'B'
TEST "x" {
	run aibox tasks list
	assert_success
	run aibox task x
	assert_output y
	assert_failure 2
	run --separate-stderr aibox task x
	assert_stopped_at_boot
	run aibox-proxy --help
	[ "$status" -eq 0 ]
	run -0 aibox tasks list
	run ! aibox tasks show x
	assert_output --partial "no task"
}
B
	run "$TOP/t/check-bang" ok.bats
	assert_success
	assert_output ''
}

@test "test-rules: a run read by \$status, \$output, \$stderr, assert_ or refute_, and 'run !' and 'run -N', pass" {
	sed 's/^TEST/@test/' >ok.bats <<'B'
TEST "x" {
	run a
	[ "$status" -eq 0 ]
	run b
	[ "$output" = x ]
	run --separate-stderr c
	[[ $stderr == *x* ]]
	run d
	refute_output
	run e
	[ "${lines[0]}" = y ]
	run -1 f
	run ! g
	FOO=1 run h \
		--long
	assert_success
}
B
	run "$TOP/t/check-bang" ok.bats
	assert_success
	assert_output ''
}

@test "test-rules: a refusal of an aibox tool checked only by its status is refused" {
	printf '@test "x" {\n\trun aibox task --bogus\n\tassert_failure 2\n\trun aibox-proxy --bogus\n\t[ "$status" -eq 2 ]\n\trun ! build/aibox-broker\n\trun aibox-connect x\n\tassert_failure\n\tassert_output --partial "usage"\n\trun ! grep -q x f\n}\n' >refusal.bats
	run "$TOP/t/check-bang" refusal.bats
	assert_failure 1
	assert_line --partial 'refusal.bats:2: a refusal checked only by its status (check what it says'
	assert_line --partial 'refusal.bats:4: a refusal checked only by its status'
	assert_line --partial 'refusal.bats:6: a refusal checked only by its status'
	assert_equal "${#lines[@]}" 3
}

@test "test-rules: a test helper's refusal, or an aibox tool's behind as_user, env, timeout or bin/, checked only by its status is refused; test-vm's passes" {
	printf '@test "x" {\n\trun test-slurm job-id x\n\tassert_failure\n\trun as_user env A=1 timeout 10 aibox tasks show x\n\tassert_failure 2\n\trun bin/aibox foo\n\tassert_output y\n\trun test-vm --image x\n\tassert_failure 3\n}\n' >refusal.bats
	run "$TOP/t/check-bang" refusal.bats
	assert_failure 1
	assert_line --partial 'refusal.bats:2: a refusal checked only by its status (check what it says'
	assert_line --partial 'refusal.bats:4: a refusal checked only by its status'
	assert_line --partial 'refusal.bats:6: a "run" of an aibox tool whose exit status nothing checks'
	assert_equal "${#lines[@]}" 3
}

@test "test-rules: every test file of the suite passes the check" {
	run "$TOP/t/check-bang" "$TOP"/t/*.bats "$TOP"/t/lib-*.bash
	assert_success
}

@test "test-rules: every test docs/security.md names is a test of the file it cites" {
	# docs/security.md, above its tables: in a table's last column, each quoted
	# name after t/NNNN is a test of t/NNNN-*.bats, its exact name or the start
	# of one or more names followed by " ..."
	run python3 - "$TOP" <<'PY'
import glob, os, re, sys
top = sys.argv[1]
tests = {}
for f in glob.glob(os.path.join(top, "t", "[0-9][0-9][0-9][0-9]-*.bats")):
    names = tests.setdefault(os.path.basename(f)[:4], [])
    for m in re.finditer(r'^@test "((?:[^"\\]|\\.)*)"', open(f).read(), re.M):
        names.append(re.sub(r'\\([\\"$`])', r"\1", m.group(1)))
checked = bad = 0
for n, line in enumerate(open(os.path.join(top, "docs/security.md")), 1):
    cells = line.rstrip("\n").split(" | ")
    if not line.startswith("|") or len(cells) < 3:
        continue
    cited = None
    for m in re.finditer(r't/(\d{4})\b|"([^"]*)"', cells[-1]):
        if m.group(1):
            cited = m.group(1)
            if cited not in tests:
                print("docs/security.md:%d: t/%s: no such test file" % (n, cited))
                bad += 1
            continue
        if cited not in tests:
            continue
        name = m.group(2)
        checked += 1
        if name.endswith(" ..."):
            found = any(t.startswith(name[:-4]) for t in tests[cited])
        else:
            found = name in tests[cited]
        if not found:
            print('docs/security.md:%d: t/%s "%s": no such test' % (n, cited, name))
            bad += 1
print("%d names checked" % checked)
sys.exit(1 if bad else 0)
PY
	assert_success
	assert_equal "${#lines[@]}" 1
	assert_output --regexp '^[1-9][0-9]{2,} names checked$'
}

@test "test-rules: with AIBOX_SNAPSHOT=0, t/run hands it to the tests and says before its count that snapshots were off" {
	printf '@test "x" {\n\t[ "$AIBOX_SNAPSHOT" = 0 ]\n}\n' >cold.bats
	AIBOX_SNAPSHOT=0 run "$TOP/t/run" "$T/cold.bats"
	assert_success
	[ "${lines[-2]}" = "t/run: snapshots off (AIBOX_SNAPSHOT=0): task VMs booted cold unless a test turned them on" ]
	[ "${lines[-1]}" = "1 passed, 0 failed, 0 skipped" ]
	run env -u AIBOX_SNAPSHOT "$TOP/t/run" "$T/cold.bats"
	assert_failure
	refute_output --partial "snapshots off"
	[ "${lines[-1]}" = "0 passed, 1 failed, 0 skipped" ]
}

@test "test-rules: make check-cold runs the files that run aibox task on the real image, with AIBOX_SNAPSHOT=0" {
	run make -s -n -C "$TOP" check-cold
	assert_success
	line=$(grep '^AIBOX_SNAPSHOT=0 t/run ' <<<"$output")
	for f in 5100-task-vm 5120-task-snapshot 5200-task-faults 6100-broker-task-vm 9000-root 9100-slurm; do
		[[ " $line " == *" t/$f.bats "* ]]
	done
	# aibox run (always cold), a file that only borrows lib-task's fake API,
	# test-vm's own snapshot tests and aibox task without a VM are not
	for f in 7000-run 3007-proxy-spend 4700-snapshot 5005-task-start; do
		[[ " $line " != *" t/$f.bats "* ]]
	done
}

@test "test-rules: the format check names a C file that is not as .clang-format says" {
	printf 'int  f(void){return 1;}\n' >bad.c
	printf 'int g(void)\n{\n\treturn 1;\n}\n' >good.c
	run "$TOP/t/check-format" "$T/good.c" "$T/bad.c"
	assert_failure 1
	assert_line "$T/bad.c: not as .clang-format says (make format):"
	assert_line "-int  f(void){return 1;}"
	refute_output --partial good.c
	run "$TOP/t/check-format" "$T/good.c"
	assert_success
	assert_output ''
	# a file clang-format cannot read fails the check, and so every file after it
	run "$TOP/t/check-format" "$T/missing.c" "$T/bad.c"
	assert_failure 2
	assert_output --partial "check-format: clang-format failed"
}

@test "test-rules: every C file of the tree is as .clang-format says: make format changes nothing" {
	run "$TOP/t/check-format"
	assert_success
	assert_output ''
}
