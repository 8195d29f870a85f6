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
