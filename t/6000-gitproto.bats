#!/usr/bin/env bats
# common/gitproto: pkt-lines, the push command list, ref names and the
# broker's branch patterns.
load lib-common

Z40=0000000000000000000000000000000000000000
A40=1111111111111111111111111111111111111111
B40=2222222222222222222222222222222222222222

pkt() {
	printf '%04x%s' $((${#1} + 4)) "$1"
}

@test "gitproto: '*' and '?' stay within one level of the branch name" {
	while read -r pat branch want; do
		run test-gitproto match "$pat" "$branch"
		assert_output "$want"
	done <<-EOF
		aibox/* aibox/x yes
		aibox/* aibox/long-name.1 yes
		aibox/* aibox no
		aibox/* aibox/x/y no
		aibox/* aiboxx/y no
		aibox/* other/aibox/x no
		*/task a/task yes
		*/task a/b/task no
		* main yes
		* a/b no
		feature feature yes
		feature feature2 no
		feature feat no
		fix-? fix-1 yes
		fix-? fix-12 no
		fix-? fix-/ no
		a*b*c aXbYc yes
		a*b*c abc yes
		a*b*c aXbY/c no
		[ab] [ab] yes
		[ab] a no
	EOF
}

@test "gitproto: ref names and --push patterns are checked as git would" {
	while read -r name want; do
		run test-gitproto refname "$name"
		assert_output "$want"
	done <<-EOF
		refs/heads/aibox/x yes
		refs/heads/a.b yes
		refs/heads/a..b no
		refs/heads/x.lock no
		refs/heads/x.lock/y no
		refs/heads/.x no
		refs/heads/x/ no
		refs/heads/x. no
		refs/heads//x no
		refs/heads/a@{b no
		refs/heads/a~1 no
		refs/heads/a^ no
		refs/heads/a:b no
		refs/heads/a?b no
		refs/heads/a*b no
		refs/heads/a[b no
		refs/heads/a\\b no
		/refs/heads/x no
		@ no
	EOF
	run test-gitproto refname "$(printf 'refs/heads/a\tb')"
	assert_output no
	run test-gitproto refname "$(printf 'refs/heads/\xc3\xa9')"
	assert_output no
	for p in 'aibox/*' 'feature' 'a*/b' 'fix-?'; do
		run test-gitproto pattern-ok "$p"
		assert_output yes
	done
	for p in '' 'refs/heads/x' 'a..b' '/x' 'x/' 'x.lock' 'a b' '.x' '-x' 'HEAD' \
		"$(printf 'a%.0s' $(seq 256))"; do
		run test-gitproto pattern-ok "$p"
		assert_output no
	done
}

@test "gitproto: pkt-lines are framed exactly" {
	run bash -c "printf '0000000100020008abcd' | test-gitproto pkt"
	assert_output "$(printf 'flush 0\ndelim 0\nresponse-end 0\ndata 4')"
	for bad in 0003 0004 fff1 ffff 00g0 ' 123'; do
		run bash -c "printf '%s' '$bad' | test-gitproto pkt"
		assert_output 'error Bad message'
	done
	run bash -c "printf 'fff0' | test-gitproto pkt"
	assert_output partial
	run bash -c "printf '0009abcd' | test-gitproto pkt"
	assert_output partial
	run bash -c "printf '00' | test-gitproto pkt"
	assert_output partial
}

@test "gitproto: the push command list is parsed up to its flush" {
	{
		pkt "shallow $B40"
		cmd="$Z40 $A40 refs/heads/aibox/x" caps="report-status side-band-64k"
		printf '%04x%s\0%s\n' $((4 + ${#cmd} + 1 + ${#caps} + 1)) "$cmd" "$caps"
		pkt "$A40 $B40 refs/heads/main"
		printf '0000PACKdata'
	} >body
	run test-gitproto commands <body
	assert_line --index 0 "caps 'report-status side-band-64k' consumed $(( $(stat -c %s body) - 8 ))"
	assert_line --index 1 "$Z40 $A40 refs/heads/aibox/x"
	assert_line --index 2 "$A40 $B40 refs/heads/main"
	# Without the flush: read more.
	{ pkt "$A40 $B40 refs/heads/main"; } >body
	run test-gitproto commands <body
	assert_output 'error Resource temporarily unavailable'
	printf '0000' >body
	run test-gitproto commands <body
	assert_output 'error No data available'
	# SHA-256 ids; mixed lengths are not.
	S64=$A40${A40:0:24}
	{ pkt "$S64 $S64 refs/heads/x"; printf 0000; } >body
	run test-gitproto commands <body
	assert_line --index 1 "$S64 $S64 refs/heads/x"
	for cmd in "$A40 $S64 refs/heads/x" "$A40 $B40" "$A40 $B40 " "$A40  $B40 refs/heads/x" \
		"${A40//1/A} $B40 refs/heads/x" "push-cert" "shallow $A40"; do
		{ pkt "$A40 $B40 refs/heads/ok"; pkt "$cmd"; printf 0000; } >body
		run test-gitproto commands <body
		assert_output 'error Bad message'
	done
	# A delim packet has no place here.
	{ pkt "$A40 $B40 refs/heads/ok"; printf 0001; } >body
	run test-gitproto commands <body
	assert_output 'error Bad message'
}

@test "gitproto: a command list past its caps is refused" {
	for i in $(seq 1 1001); do pkt "$A40 $B40 refs/heads/b$i"; done >body
	printf 0000 >>body
	run test-gitproto commands <body
	assert_output 'error File too large'
	long=$(head -c 65000 /dev/zero | tr '\0' x)
	for i in $(seq 1 17); do pkt "$A40 $B40 refs/heads/$long"; done >body
	run test-gitproto commands <body
	assert_output 'error File too large'
}

@test "gitproto: a capability is found where git's receive-pack finds it" {
	# Named: alone, with a value, first, last, after a TAB, LF or CR.
	for list in 'push-options' 'push-options=1' 'push-options=x report-status' \
		'report-status push-options' $'report-status\tpush-options' \
		$'report-status\npush-options' $'report-status\rpush-options side-band-64k' \
		'xpush-options push-options'; do
		run test-gitproto caps push-options <<<"$list"
		assert_output yes
	done
	# Not named: part of another word, after a byte git does not count as space, after a NUL.
	for list in 'xpush-options' 'push-optionsx' 'push-options-x' 'agent=push-options' \
		$'report-status\vpush-options' $'report-status\fpush-options' ''; do
		printf '%s' "$list" >caps
		run test-gitproto caps push-options <caps
		assert_output no
	done
	printf 'report-status\0push-options' >caps
	run test-gitproto caps push-options <caps
	assert_output no
}

@test "gitproto: push-options is dropped from a capability list in every spelling" {
	printf 'push-options=x report-status\tpush-options\npush-options=1 side-band-64k  agent=git/2.39 push-optionsx' >caps
	run test-gitproto caps-drop push-options <caps
	assert_output 'report-status side-band-64k agent=git/2.39 push-optionsx'
	run test-gitproto caps push-options <<<"$output"
	assert_output no
}

# pktf FORMAT: printf FORMAT (its escapes, \0 too) as a pkt-line.
pktf() {
	# shellcheck disable=SC2059
	printf '%04x' $(($(printf "$1" | wc -c) + 4))
	# shellcheck disable=SC2059
	printf "$1"
}

# advert FIRST-REF [HEADER LINES...]: a receive-pack advertisement whose first
# ref line is FIRST-REF, one more ref after it; each a printf FORMAT.
advert() {
	local first=$1 h
	shift
	pktf '# service=git-receive-pack\n'
	for h; do pktf "$h"; done
	printf 0000
	pktf "$first"
	pktf "$B40 refs/heads/other\n"
	printf 0000
}

@test "gitproto: the receive-pack advertisement loses push-options where git reads its capabilities" {
	advert "$A40 refs/heads/main\\0report-status push-options=1\\tdelete-refs push-options\\n" >adv
	run test-gitproto advert <adv
	assert_output --partial "refs/heads/main"
	refute_output --partial push-options
	assert_output --partial 'report-status delete-refs'
	# Header lines before the flush, which git skips, do not hide the first ref; nor a
	# NUL in one of them.
	advert "$A40 refs/heads/main\\0push-options\\n" 'x-header: 1' '# service=git-receive-pack\0push-options' >adv
	run test-gitproto advert <adv
	refute_output --regexp "main.*push-options"
	assert_output --partial '# service=git-receive-pack'
	# "version 1" before the first ref, and bytes after a second NUL (git reads none).
	{
		pktf '# service=git-receive-pack\n'
		printf 0000
		pktf 'version 1\n'
		pktf "$A40 refs/heads/main\\0report-status\\0push-options\\n"
		printf 0000
	} >adv
	run test-gitproto advert <adv
	assert_output --partial "$A40 refs/heads/main"
	refute_output --partial push-options
	# An empty repository: the first line is capabilities^{}.
	advert "$Z40 capabilities^{}\\0push-options report-status\\n" >adv
	run test-gitproto advert <adv
	refute_output --partial push-options
	# No ref line at all, and what git would not read as an advertisement.
	{ pktf '# service=git-receive-pack\n'; printf 00000000; } >adv
	run test-gitproto advert <adv
	assert_output 'no ref'
	for bad in "pktf '# service=git-upload-pack\\n'; printf 0000" "pktf 'version 2\\n'" \
		"pktf '# service=git-receive-pack\\n'; printf 0000; pktf 'version 2\\n'" \
		"pktf '# service=git-receive-pack\\n'; printf 0000; pktf 'version 3\\n'" \
		"printf 0000; pktf '# service=git-receive-pack\\n'"; do
		eval "$bad" >adv
		run test-gitproto advert <adv
		assert_output 'error Bad message'
	done
	# Cut short: more is needed.
	pktf '# service=git-receive-pack\n' >adv
	run test-gitproto advert <adv
	assert_output more
}

@test "gitproto: a ref line of the advertisement gives its id and name, capabilities and LF left out" {
	printf '%s refs/heads/main\0report-status delete-refs\n' "$A40" >line
	run test-gitproto ref-line <line
	assert_output "$A40 [refs/heads/main]"
	printf '%s refs/heads/aibox/x\n' "$B40" >line
	run test-gitproto ref-line <line
	assert_output "$B40 [refs/heads/aibox/x]"
	printf '%s%s refs/heads/sha256' "$A40" 111111111111111111111111 >line
	run test-gitproto ref-line <line
	assert_output "$A40""111111111111111111111111 [refs/heads/sha256]"
	# Not a ref line: "version 1", a short or upper-case id, no space, no name.
	for bad in 'version 1\n' '1111 refs/heads/x\n' "${A40:0:34}ABCDEF refs/heads/x\\n" \
		"$A40" "$A40 \\n" "$A40 \\0caps\\n"; do
		# shellcheck disable=SC2059
		printf "$bad" >line
		run test-gitproto ref-line <line
		assert_output error
	done
}

@test "gitproto: the log escaper leaves only printable ASCII, cut at its cap" {
	printf 'GET\033[31m\r\n\x07\x7f\xc3\x28\xe2\x80\xae "q" \\b' >in
	run test-gitproto log-escape 0 <in
	assert_output 'GET\x1b[31m\x0d\x0a\x07\x7f\xc3(\xe2\x80\xae\x20\x22q\x22\x20\x5cb'
	run test-gitproto log-escape 0 keep-space <in
	assert_output 'GET\x1b[31m\x0d\x0a\x07\x7f\xc3(\xe2\x80\xae \x22q\x22 \x5cb'
	# Every byte: only the 94 printable ones but '"' and '\' pass as they are.
	python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))' >all
	run test-gitproto log-escape 0 <all
	assert_equal "$(printf '%s' "$output" | sed 's/\\x[0-9a-f][0-9a-f]//g')" \
		"$(printf '%s' '!#$%&'"'"'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~')"
	run test-gitproto log-escape 5 <all
	assert_output '\x00\x01...'
}
