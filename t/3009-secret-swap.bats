#!/usr/bin/env bats
# What the proxy does to a request head on an intercepted connection
# (common/proxy/secret_swap.h): placeholders swapped toward their hosts, refused
# toward any other, and allow rules' methods and paths.  Everything in the
# head is the VM's, so hostile.
bats_require_minimum_version 1.5.0
load lib-common

setup() {
	common_setup
	P=aibox-secret-0123456789abcdef0123456789abcdef
	Q=aibox-secret-ffffffffffffffffffffffffffffffff
}
teardown() { common_teardown; }

# swap HOST PORT HEAD: the head (\n for CRLF) through test-swap with two
# secrets: NPM_TOKEN for registry.example and GH_TOKEN for *.gh.example.
swap() {
	local host=$1 port=$2
	printf '%s' "$3" | sed 's/$/\r/' |
		test-swap head "$host" "$port" NPM_TOKEN "$P" 'npm s3cr/t' registry.example \
			GH_TOKEN "$Q" 'ghp_v4lue' '*.gh.example,gh.example:8443'
}

@test "secret swap: after Bearer and token, inside Basic's base64 and in the query; the path keeps the placeholder" {
	b=$(printf 'x:%s' "$P" | base64 -w0)
	run swap registry.example 443 "GET /p/$P?tok=$P&a=1 HTTP/1.1
Authorization: Bearer $P
X-Token: token $P
Proxy-Authorization: Basic $b
"
	assert_success
	assert_line --index 0 "swapped 4 used=NPM_TOKEN"
	assert_line --index 1 "GET /p/$P?tok=npm%20s3cr%2Ft&a=1 HTTP/1.1"$'\r'
	assert_line --index 2 "Authorization: Bearer npm s3cr/t"$'\r'
	assert_line --index 3 "X-Token: token npm s3cr/t"$'\r'
	assert_line --index 4 "Proxy-Authorization: Basic $(printf 'x:npm s3cr/t' | base64 -w0)"$'\r'
	run swap api.gh.example 443 "GET / HTTP/1.1
Authorization: token $Q
"
	assert_success
	assert_line --index 0 "swapped 1 used=GH_TOKEN"
	assert_line --index 1 "GET / HTTP/1.1"$'\r'
	assert_line --index 2 "Authorization: token ghp_v4lue"$'\r'
}

@test "secret swap: hostile: a placeholder toward a host its secret does not name is refused whole" {
	# another allowed host, the host's address, another port, the wildcard's parent, a look-alike
	for hp in "evil.example 443" "192.0.2.1 443" "registry.example 8443" "gh.example 443" "registry.example.evil 443"; do
		run swap $hp "GET / HTTP/1.1
Authorization: Bearer $P
"
		assert_failure 1
		assert_output "refused: NPM_TOKEN to ${hp/ /:}"
	done
	# in the path, in a Basic credential, in a header's name, beside the other secret's placeholder
	b=$(printf '%s:x' "$P" | base64 -w0)
	for head in "GET /x/$P HTTP/1.1
" "GET / HTTP/1.1
Authorization: Basic $b
" "GET / HTTP/1.1
X-$P: 1
" "GET / HTTP/1.1
Authorization: token $Q
X-Other: $P
"; do
		run swap api.gh.example 443 "$head"
		assert_failure 1
		assert_output "refused: NPM_TOKEN to api.gh.example:443"
	done
	run swap gh.example 8443 "GET / HTTP/1.1
Authorization: token $Q
"
	assert_success
	assert_line --index 0 "swapped 1 used=GH_TOKEN"
}

@test "secret swap: hostile: a placeholder split across headers, changed or unknown stays as it is and is not the value" {
	run swap registry.example 443 "GET / HTTP/1.1
X-A: ${P:0:20}
X-B: ${P:20}
X-C: ${P^^}
X-D: aibox-secret-00000000000000000000000000000000
"
	assert_success
	assert_line --index 0 "swapped 0 used="
	refute_output --partial "s3cr"
	run swap registry.example 443 "GET / HTTP/1.1
X-A: 1"
	assert_failure 1
	assert_output "refused: a header line without CRLF"
	# the value swapped into an earlier line is wiped and freed when a later
	# line is refused (under SANITIZE=1 a leak adds LeakSanitizer's report)
	b=$(printf 'x:%s' "$P" | base64 -w0)
	run swap registry.example 443 "GET / HTTP/1.1
Authorization: Basic $b
X-A: 1"
	assert_failure 1
	assert_output "refused: a header line without CRLF"
	run swap registry.example 443 "NOSPACE
"
	assert_failure 1
	assert_output "refused: not a request head"
}

@test "secret swap: paths are decoded and folded before a rule matches, and dot segments refused" {
	for t in '/a//b/c?x=/..:/a/b/c' '/a%2Fb:/a/b' '/a/b/:/a/b/' '/a/.../.x/%2e%2e%2e:/a/.../.x/...' '/:/'; do
		run test-swap path "${t%:*}"
		assert_success
		assert_output "${t##*:}"
	done
	# a dot segment in any spelling (a server that routes on the raw path reads
	# /admin/../ok/x under /admin/); an encoded ? or #, a raw # and an escape
	# once decoded (docs/proxy.md, "The rules")
	for t in '/a/../b' '/a/%2e%2e/b' '/a/%2E%2E/b' '/a/.%2e/b' '/a/./b' '/a/%2e/b' '/..' '/a/..' '/a/.' \
		'/a/%' '/a/%4' '/a/%zz' '/a/%00' '/a/%0a' '/a\b' '/a%5cb' 'x' 'http://h/a' \
		'/a%3Fb' '/a%3fb' '/a%23b' '/a#b' '/a/%252e%252e/b' '/a/%25%32%65'; do
		run test-swap path "$t"
		assert_failure 1
		assert_output "error"
	done
}

@test "secret swap: hostile: a rule's methods and paths hold against other spellings" {
	run test-swap rule GET,POST '/repos/you/project/*' POST /repos/you/project/pulls
	assert_success
	assert_output "allowed"
	run test-swap rule GET,POST '/repos/you/project/*' DELETE /repos/you/project
	assert_failure 1
	assert_output "refused: method DELETE is not allowed"
	run test-swap rule GET,POST '/repos/you/project/*' get /repos/you/project/x
	assert_failure 1
	assert_output "refused: method get is not allowed"
	for t in /repos/you/other /repos/you/projectx /REPOS/you/project/x /repos/you//other; do
		run test-swap rule GET '/repos/you/project/*' GET "$t"
		assert_failure 1
		assert_output --partial "refused: path /"
	done
	# a bad escape; ".." in any spelling, with an encoded slash, after "//", with a
	# parameter; a leading "//"; a path that a resolver reads under the rule and a
	# server routing on the raw path (Express) under /repos/you/other/
	for t in '/repos/you/project/%' /repos/you/project%2F..%2F..%2Fother '/repos/you/project/..%2f..%2fother' \
		/repos/x/y//../../you/project/z '/repos/you/project/..;/x' //repos/you/project/x \
		/repos/you/project/../other/x /repos/you/project/%2e%2e/other /repos/you/other/../project/x \
		/repos/you/other/%2E%2E/project/x /repos/you/project/./x; do
		run test-swap rule GET '/repos/you/project/*' GET "$t"
		assert_failure 1
		assert_output "refused: the path is not one the rules can read"
	done
	run test-swap rule - - PATCH '/anything?x'
	assert_success
	assert_output "allowed"
}

@test "secret swap: a value echoed in an answer reaches the VM as its placeholder, split across reads or not" {
	printf 'HTTP/1.1 200 OK\r\nX-Echo: npm_s3cret\r\n\r\n{"token": "npm_s3cret", "other": "gh_v4lue", "npm_s3cre": 1}npm_s3cret' >"$T/answer"
	want='HTTP/1.1 200 OK\r\nX-Echo: PH1\r\n\r\n{"token": "PH1", "other": "PH2", "npm_s3cre": 1}PH1'
	# 19 and up: reads of at least twice the longest value are searched in place
	for chunk in 1 2 3 7 10 19 20 23 29 41 1000; do
		run test-swap echo $chunk npm_s3cret PH1 gh_v4lue PH2 <"$T/answer"
		assert_success
		assert_output "$(printf "$want")"
	done
	# a long answer, values at every offset of the reads and one right
	# after another, against the same replacement done at once
	python3 -c '
import random, sys
random.seed(7)
parts = []
for i in range(6000):
    parts.append(random.choice(["npm_s3cret", "gh_v4lue", "npm_s3cre", "x", "ab", "gh_"]))
sys.stdout.write("".join(parts))' >"$T/long"
	want=$(sed -e 's/npm_s3cret/PH1/g' -e 's/gh_v4lue/PH2/g' "$T/long")
	for chunk in 19 20 64 4096 16384; do
		run test-swap echo $chunk npm_s3cret PH1 gh_v4lue PH2 <"$T/long"
		assert_success
		[ "$output" = "$want" ]
	done
	# an answer cut inside a value's first bytes is passed as it came
	run test-swap echo 1 npm_s3cret PH1 < <(printf 'abc npm_s3cr')
	assert_success
	assert_output 'abc npm_s3cr'
}
