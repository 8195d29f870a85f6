#!/usr/bin/env bats
# BLAKE2b (common/base/blake2b.h, RFC 7693) through t/helper/test-blake2b.c:
# the RFC's own vector, OpenSSL's BLAKE2B-512, and Python's
# hashlib.blake2b(digest_size=32), the function PyPI names its files by.
load lib-common

setup() { common_setup; }
teardown() { common_teardown; }

@test "blake2b: RFC 7693 Appendix A, BLAKE2b-512 of \"abc\"" {
	run bash -c 'printf abc | test-blake2b sum 64 -'
	assert_success
	assert_output ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923
	# The 32-byte digest is another function, not a prefix of the 64-byte one.
	run bash -c 'printf abc | test-blake2b sum 32 -'
	assert_success
	assert_output bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319
}

@test "blake2b: the 64-byte digest is OpenSSL's BLAKE2B-512 for every length to 600 and long ones" {
	run test-blake2b openssl 600
	assert_success
	assert_output "ok 608"
}

@test "blake2b: the 32-byte digest is Python's hashlib.blake2b(digest_size=32), edge and random lengths" {
	local files=() n
	for n in 0 1 63 64 65 127 128 129 255 256 257 1023 1024 1025 65535 65536 65537 \
		$((RANDOM % 5000)) $((RANDOM % 5000 + 5000)) $((RANDOM * 17)) $((3 * 1048576 + 5)); do
		head -c "$n" /dev/urandom >"f$n"
		files+=("f$n")
	done
	run python3 -c '
import hashlib, sys
for f in sys.argv[1:]:
    print(hashlib.blake2b(open(f, "rb").read(), digest_size=32).hexdigest())
' "${files[@]}"
	assert_success
	want=$output
	[ "${#lines[@]}" -eq "${#files[@]}" ]
	run test-blake2b sum 32 "${files[@]}"
	assert_success
	assert_output "$want"
	# Another length, in the same parameter block.
	run test-blake2b sum 20 f129
	assert_success
	assert_output "$(python3 -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=20).hexdigest())' f129)"
}
