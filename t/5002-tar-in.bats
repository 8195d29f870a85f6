#!/usr/bin/env bats
# common/tar_in: the results tar from the VM is read strictly; everything but
# the four known plain files, each once, within its cap, result.json last, is
# refused with a reason.
load lib-common

setup() {
	common_setup
	mkdir in out
	MKTAR=$TOP/t/mktar
}

@test "tar-in: a tar made by GNU tar in ustar format is accepted byte for byte" {
	head -c 70000 /dev/urandom >in/changes.bundle
	printf '{"type":"result"}\n' >in/transcript.jsonl
	: >in/vm.log
	printf '{"version": 1}\n' >in/result.json
	tar -C in --format=ustar -cf all.tar changes.bundle transcript.jsonl vm.log result.json
	run test-task tar-in out <all.tar
	assert_success
	assert_output "ok changes.bundle 70000 transcript.jsonl 18 vm.log 0 result.json 15"
	for f in changes.bundle transcript.jsonl vm.log result.json; do
		cmp in/$f out/$f
	done
}

@test "tar-in: a subset of the files, GNU magic and zero padding after the end are accepted" {
	run test-task tar-in out < <($MKTAR --gnu --trailer 9216 vm.log:size=513 result.json:size=2)
	assert_success
	assert_output "ok vm.log 513 result.json 2"
}

@test "tar-in: an extra file is refused" {
	run test-task tar-in out < <($MKTAR vm.log:size=1 notes.txt:size=5 result.json:size=2)
	assert_failure
	assert_output "refused: unexpected file 'notes.txt'"
}

@test "tar-in: a symbolic link is refused" {
	run test-task tar-in out < <($MKTAR vm.log:type=2,link=/etc/passwd result.json:size=2)
	assert_failure
	assert_output "refused: 'vm.log' is a symbolic link"
}

@test "tar-in: a hard link is refused" {
	run test-task tar-in out < <($MKTAR vm.log:size=1 transcript.jsonl:type=1,link=vm.log)
	assert_failure
	assert_output "refused: 'transcript.jsonl' is a hard link"
}

@test "tar-in: a directory is refused" {
	run test-task tar-in out < <($MKTAR changes.bundle:type=5)
	assert_failure
	assert_output "refused: 'changes.bundle' is a directory"
}

@test "tar-in: pax and GNU long-name headers are refused" {
	for t in x g; do
		run test-task tar-in out < <($MKTAR vm.log:type=$t,size=30 result.json:size=2)
		assert_failure
		assert_output "refused: 'vm.log' is a pax extended header"
	done
	for t in L K; do
		run test-task tar-in out < <($MKTAR ././@LongLink:type=$t,size=30)
		assert_failure
		assert_output --partial "refused: the file name '././@LongLink' has a slash"
		run test-task tar-in out < <($MKTAR vm.log:type=$t,size=30)
		assert_output "refused: 'vm.log' is a GNU long name"
	done
}

@test "tar-in: a file sent twice is refused" {
	run test-task tar-in out < <($MKTAR changes.bundle:size=10 changes.bundle:size=10)
	assert_failure
	assert_output "refused: 'changes.bundle' sent twice"
}

@test "tar-in: a file over its cap is refused before its data is written" {
	run test-task tar-in out transcript.jsonl=1000 < <($MKTAR transcript.jsonl:size=1001)
	assert_failure
	assert_output "refused: 'transcript.jsonl' over its size limit of 1000 bytes"
	run stat -c %s out/transcript.jsonl
	assert_output 0
	run test-task tar-in out transcript.jsonl=1000 < <($MKTAR transcript.jsonl:size=1000)
	assert_success
}

@test "tar-in: the default caps are those of docs/internals.md" {
	# A header claiming 1 MiB + 1 for result.json is refused at the header.
	run test-task tar-in out < <($MKTAR result.json:sizefield=00004000001 --cut 1024)
	assert_failure
	assert_output "refused: 'result.json' over its size limit of 1048576 bytes"
	run test-task tar-in out < <($MKTAR changes.bundle:sizefield=20000000001 --cut 1024)
	assert_output "refused: 'changes.bundle' over its size limit of 2147483648 bytes"
}

@test "tar-in: a file after result.json is refused" {
	run test-task tar-in out < <($MKTAR result.json:size=2 vm.log:size=1)
	assert_failure
	assert_output "refused: result.json must come last"
	run test-task tar-in out < <($MKTAR result.json vm.log:size=1)
	assert_output "refused: result.json must come last"
}

@test "tar-in: a truncated stream is refused" {
	run test-task tar-in out < <($MKTAR vm.log:size=2000 --no-end --cut 100)
	assert_failure
	assert_output "refused: the results end in the middle of 'vm.log'"
	run test-task tar-in out < <($MKTAR vm.log:size=2000 --no-end)
	assert_output "refused: the results end before the end of the archive"
	run test-task tar-in out < <($MKTAR vm.log:size=2000 --cut 512)
	assert_output "refused: the results end before the end of the archive"
	run test-task tar-in out < <($MKTAR vm.log:size=2000 --cut 700)
	assert_output "refused: the results end before the end of the archive"
	: >empty
	run test-task tar-in out <empty
	assert_output "refused: the results end before the end of the archive"
}

@test "tar-in: a bad checksum is refused" {
	run test-task tar-in out < <($MKTAR vm.log:size=1,badsum)
	assert_failure
	assert_output "refused: a results tar header has a bad checksum"
}

@test "tar-in: names with a slash, '..', a prefix or odd bytes are refused" {
	run test-task tar-in out < <($MKTAR ../vm.log:size=1)
	assert_failure
	assert_output "refused: the file name '../vm.log' has a slash"
	run test-task tar-in out < <($MKTAR sub/vm.log:size=1)
	assert_output "refused: the file name 'sub/vm.log' has a slash"
	run test-task tar-in out < <($MKTAR ..:size=1)
	assert_output "refused: the file name '..' has '..'"
	run test-task tar-in out < <($MKTAR vm.log:size=1,prefix=etc)
	assert_output "refused: 'vm.log' has a path prefix"
	run test-task tar-in out < <($MKTAR "$(printf 'vm.log\033[2J')":size=1)
	assert_output "refused: unexpected file 'vm.log\\x1b[2J'"
}

@test "tar-in: a long name of quoted bytes is named an unexpected file, not one with '..'" {
	# 40 quotes, each \x27 in the message: the quoted name is cut with "..."
	run test-task tar-in out < <($MKTAR "$(printf "'%.0s" {1..40})":size=1)
	assert_failure
	assert_output --regexp "^refused: unexpected file '(\\\\x27)+\\.\\.\\.'$"
}

@test "tar-in: sizes must be strictly octal: no base-256, no signs, no junk" {
	for sf in 0000000001x 0000000009 -0000000001 "" "$(printf '\x80')"; do
		run test-task tar-in out < <($MKTAR "vm.log:sizefield=$sf")
		assert_failure
		assert_output "refused: the size of 'vm.log' is not an octal number"
	done
}

@test "tar-in: a lone zero block or data after the end is refused" {
	{ head -c 512 /dev/zero; $MKTAR vm.log:size=1; } >lone.tar
	run test-task tar-in out <lone.tar
	assert_failure
	assert_output "refused: the results have a lone zero block inside the archive"
	run test-task tar-in out < <($MKTAR vm.log:size=1 --junk)
	assert_output "refused: the results have data after the end of the archive"
	run test-task tar-in out < <($MKTAR vm.log:size=1 --trailer 1049600)
	assert_output "refused: the results have too much padding after the end"
}

@test "tar-in: a header that is not ustar is refused" {
	# v7 tar: no magic.
	$MKTAR vm.log:size=1 >v7.tar
	printf '\0\0\0\0\0\0\0\0' | dd of=v7.tar bs=1 seek=257 conv=notrunc status=none
	run test-task tar-in out <v7.tar
	assert_failure
	assert_output --regexp "refused: a results tar header (is not ustar|has a bad checksum)"
}
