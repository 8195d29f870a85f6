#!/usr/bin/env bats
# The task's CA for the proxy's TLS interception (common/net/task_ca.h): ECDSA
# P-256, name constraints that permit only the intercepted hosts, valid no
# longer than the task, its key never written.  openssl verify judges.
bats_require_minimum_version 1.5.0
load lib-common

teardown() { common_teardown; }

setup() {
	common_setup
	mkdir -p "$T/ca"
}

@test "task CA: a host it was made for verifies; every other host, an address beside it and a parent domain are refused" {
	run test-ca "$T/ca" 3600 api.github.com '*.example.com' 10.0.0.1:8443 '[::1]' -- \
		api.github.com x.example.com a.b.example.com 10.0.0.1 ::1 \
		evil.com api.github.com.evil.com github.com example.com 10.0.0.2 ::2 xexample.com
	assert_success
	for h in api.github.com x.example.com a.b.example.com 10.0.0.1 ::1; do
		run openssl verify -CAfile "$T/ca/ca.pem" "$T/ca/$h.pem"
		assert_success
		assert_output "$T/ca/$h.pem: OK"
	done
	for h in evil.com api.github.com.evil.com github.com example.com 10.0.0.2 ::2 xexample.com; do
		run openssl verify -CAfile "$T/ca/ca.pem" "$T/ca/$h.pem"
		assert_failure
		assert_output --partial "permitted subtree violation"
	done
}

@test "task CA: ECDSA P-256, a CA for one level, valid from a minute ago until the task's end and not after" {
	run test-ca "$T/ca" 600 api.github.com -- api.github.com
	assert_success
	run openssl x509 -in "$T/ca/ca.pem" -noout -text
	assert_success
	assert_line --partial "NIST CURVE: P-256"
	assert_line --partial "CA:TRUE, pathlen:0"
	assert_line --partial "X509v3 Name Constraints: critical"
	assert_line --regexp '^ +DNS:api.github.com$'
	end=$(date -d "$(openssl x509 -in "$T/ca/ca.pem" -noout -enddate | cut -d= -f2)" +%s)
	now=$(date +%s)
	((end >= now + 590 && end <= now + 600)) || fail "the CA ends at $end, now is $now"
	run openssl verify -attime $((now + 601)) -CAfile "$T/ca/ca.pem" "$T/ca/api.github.com.pem"
	assert_failure
	assert_output --partial "certificate has expired"
	# Nothing but the certificates was written: the keys stay in memory.
	run grep -rl "PRIVATE KEY" "$T/ca"
	assert_failure 1
}

@test "task CA: hostile: no hosts, a bad entry, a validity out of range and a bad name to issue for are refused" {
	run test-ca "$T/ca" 600
	assert_failure 1
	assert_output "error: a task CA needs hosts and 1 s to 30 days"
	run test-ca "$T/ca" 0 a.com
	assert_failure 1
	assert_output "error: a task CA needs hosts and 1 s to 30 days"
	run test-ca "$T/ca" 2592001 a.com
	assert_failure 1
	assert_output "error: a task CA needs hosts and 1 s to 30 days"
	for e in 'a b.com' '*' 'a.*.com' 'A,permitted;DNS:evil.com' '[::1'; do
		run test-ca "$T/ca" 600 "$e"
		assert_failure 1
		assert_output "error: '$e' is not a host"
	done
	run test-ca "$T/ca" 600 a.com -- 'a.com,DNS:evil.com'
	assert_failure 1
	assert_output "error: cannot issue a certificate for 'a.com,DNS:evil.com'"
}
