#!/usr/bin/env bats
# The common library's base: spawn, capped reads, numbers, the seccomp lockdown, printable text.
load lib-common

@test "common: spawn gives the child exactly 0-2 and the fd it was given" {
	run test-common spawn-fds
	assert_success
	assert_line --index 0 "0 1 2 3 5 "
	assert_line --index 1 "via-fd-5"
	assert_line --index 2 "status 0"
}

@test "common: spawn reports exec failures, exit codes and signals to the parent" {
	run test-common spawn-missing
	assert_success
	assert_line --index 0 "-2 No such file or directory"
	assert_line --index 1 "-8 Exec format error"
	assert_line --index 2 "exit 7"
	assert_line --index 3 "signal 143"
}

@test "common: a capped read refuses more than the cap and keeps what fits" {
	run bash -c 'head -c 100 /dev/zero | test-common read-capped 50'
	assert_output "error File too large, kept 50"
	run bash -c 'head -c 100 /dev/zero | test-common read-capped 100'
	assert_output "read 100"
}

@test "common: a programmer's mistake is a BUG that names its place and aborts" {
	ulimit -c 0
	run test-common bug
	[ "$status" -eq 134 ]
	assert_output --regexp '^BUG: common/base/spawn\.c:[0-9]+: spawn_give_fd: bad request \(5 -> 1\)$'
}

@test "common: a read within a time gives up at the deadline; the wait for a child kills it after its time" {
	run bash -c 'head -c 100 /dev/zero | test-common read-capped 100 2000'
	assert_output "read 100"
	run bash -c 'head -c 100 /dev/zero | test-common read-capped 50 2000'
	assert_output "error File too large, kept 50"
	run bash -c '{ printf abc; sleep 1; } | test-common read-capped 100 200'
	assert_output "error Connection timed out, kept 3"
	run test-common spawn-within
	assert_line --index 0 143
	assert_line --index 1 137
}

@test "common: a capture within a time takes the time once, for stdout's end and the exit together" {
	# stdout ends at 1.5 s, the child lives on: killed at 2 s from the start,
	# not 2 s after its stdout ended
	run test-common capture-within 2000 'sleep 1.5; exec >&-; exec sleep 30'
	assert_success
	read -r ret ms <<<"$output"
	[ "$ret" = 137 ]
	[ "$ms" -ge 1900 ]
	[ "$ms" -lt 3000 ]
	run test-common capture-within 5000 'echo hi'
	assert_output --regexp '^0 [0-9]+$'
}

@test "common: numbers are parsed whole and range-checked" {
	run test-common parse-long 1 64 8
	assert_output "8"
	run test-common parse-long 1 64 65
	assert_output "error Numerical result out of range"
	run test-common parse-long 1 64 8x
	assert_output "error Invalid argument"
	run test-common parse-long 1 64 " 8"
	assert_output "error Invalid argument"
	run test-common parse-long 1 64 ""
	assert_output "error Invalid argument"
}

@test "common: after the lockdown, opening, creating and exec fail" {
	run test-common sandbox
	assert_success
	assert_line "open: Permission denied"
	assert_line "create: Permission denied"
	assert_line "exec: Permission denied"
	assert_line "socket: ok"
	assert_file_not_exists sandbox-created
}

@test "common: the lockdown can also forbid new sockets" {
	run test-common sandbox --no-sockets
	assert_line "socket: Operation not permitted"
}

@test "common: the lockdown can keep files but forbid exec, new processes and sockets" {
	# the bundle checker's (common/git/bundle_check.h)
	run test-common sandbox --keep-files --no-processes --no-sockets
	assert_success
	assert_line "open: ok"
	assert_line "create: ok"
	assert_line "socket: Operation not permitted"
	assert_line "fork: Operation not permitted"
	assert_line --partial "exec: "
	refute_line "exec: ok"
	assert_file_exists sandbox-created
}

@test "common: the null sandbox backend changes nothing" {
	run test-common sandbox --none
	assert_line "open: ok"
	assert_line "create: ok"
	assert_line "exec: ok"
}

@test "common: one size grammar; a count of bytes takes no unit as bytes, a count of MiB wants M or more" {
	while read -r value want; do
		run test-common bytes "$value"
		assert_output "$want"
	done <<EOF2
0 0
100 100
1K 1024
1KiB 1024
16M 16777216
4G 4294967296
4GiB 4294967296
1T 1099511627776
1TiB 1099511627776
18446744073709551615 18446744073709551615
18446744073709551616 error ERANGE
16777216T error ERANGE
99999999999999999999K error ERANGE
1k error EINVAL
1KB error EINVAL
1Ki error EINVAL
1.5K error EINVAL
-1 error EINVAL
+1 error EINVAL
K error EINVAL
1P error EINVAL
EOF2
	run test-common bytes ""
	assert_output "error EINVAL"
	run test-common bytes " 1"
	assert_output "error EINVAL"
	# the same grammar counting in MiB: K and no unit are refused
	run test-common size 1 1048576 1024K
	assert_output "error EINVAL: '1024K' is not a size like 512M, 4G or 1T"
	run test-common size 1 1048576 1024
	assert_output "error EINVAL: '1024' is not a size like 512M, 4G or 1T"
	run test-common size 1 1048576 1TiB
	assert_output "1048576"
}

@test "common: clock_ms() counts milliseconds of the monotonic clock" {
	run test-common clock 300
	assert_success
	[ "$output" -ge 300 ]
	[ "$output" -lt 3000 ]
	run test-common clock 0
	assert_success
	[ "$output" -ge 0 ]
	[ "$output" -lt 100 ]
}

@test "common: shell_quote() leaves safe strings alone and quotes the rest so sh reads them back" {
	run test-common shell-quote /a/b_c-1.2/d@e:f,g+h=i%
	assert_success
	assert_output "/a/b_c-1.2/d@e:f,g+h=i%"
	run test-common shell-quote ""
	assert_success
	assert_output "''"
	run test-common shell-quote "it's"
	assert_success
	assert_output "'it'\\''s'"
	run test-common shell-quote 'a $b `c` "d"'
	assert_success
	assert_output "'a \$b \`c\` \"d\"'"
	for s in "it's" ' lead' $'new\nline' '*' '~x' '-n' "'" '\'; do
		run test-common shell-quote "$s"
		assert_success
		run sh -c "printf '%s' $output"
		assert_success
		assert_output "$s"
	done
}

@test "common: a git remote's URL has one grammar, taken apart for the broker" {
	run test-common git-remote https://GitHub.com/o/r.git/
	assert_success
	assert_output "github.com 443 github.com /o/r.git"
	run test-common git-remote 'https://[2001:DB8::1]:8443/a/b'
	assert_success
	assert_output "2001:db8::1 8443 [2001:db8::1]:8443 /a/b"
	run test-common git-remote https://10.0.0.1:1/x
	assert_success
	assert_output "10.0.0.1 1 10.0.0.1:1 /x"
	run test-common git-remote https://h:0/x
	assert_failure
	assert_output "error: has a bad host: the port must be a number from 1 to 65535"
	run test-common git-remote https://h:/x
	assert_failure
	assert_output "error: needs a host"
	run test-common git-remote https://*.h/x
	assert_failure
	assert_output "error: needs a host"
	run test-common git-remote https://h/a/../b
	assert_failure
	assert_output "error: cannot hold '.', '..' or '//' in its path"
	run test-common git-remote https://h/a%3Bb
	assert_success
	assert_output "h 443 h /a%3Bb"
}

@test "common: JSON members have one rule: absent and null are missing, a NUL byte or a wrong type is refused" {
	cases=$(cat <<-'EOF'
		str|req|{"k":"abc"}|set abc
		str|req|{}|error: 'k' is missing
		str|req|{"k":null}|error: 'k' is missing
		str|opt|{}|missing
		str|opt|{"k":null}|missing
		str|opt|{"k":"a\u0000b"}|error: 'k' has a NUL byte
		str|req|{"k":"\u0000"}|error: 'k' has a NUL byte
		str|opt|{"k":"12345678"}|set 12345678
		str|opt|{"k":"123456789"}|error: 'k' is over 8 bytes
		str|opt|{"k":1}|error: 'k' is not a string
		str|opt|[1]|missing
		int|req|{"k":-5}|set -5
		int|req|{"k":6}|error: 'k' is out of range
		int|req|{"k":-9223372036854775808}|error: 'k' is out of range
		int|req|{"k":1.0}|error: 'k' is not an integer
		int|req|{"k":"1"}|error: 'k' is not an integer
		int|opt|{"k":null}|missing
		real|req|{"k":0}|set 0
		real|req|{"k":0.25}|set 0.25
		real|req|{"k":0.6}|error: 'k' is out of range
		real|req|{"k":"0"}|error: 'k' is not a number
		bool|req|{"k":false}|set 0
		bool|req|{"k":0}|error: 'k' is not true or false
		bool|opt|{}|missing
		obj|req|{"k":{"a":1}}|set 1 members
		obj|req|{"k":[]}|error: 'k' is not an object
		list|req|{"k":[1,2]}|set 2 elements
		list|req|{"k":[1,2,3]}|error: 'k' has over 2 elements
		list|req|{"k":{}}|error: 'k' is not a list
		list|req|{"j":[]}|error: 'k' is missing
	EOF
	)
	run test-common json-get <<<"$(cut -d'|' -f1-3 <<<"$cases")"
	assert_success
	assert_output "$(cut -d'|' -f4- <<<"$cases")"
}

@test "common: printable_ascii() keeps printable ASCII and makes every other byte '?', 8-bit bytes kept when asked" {
	python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))' >all
	test-common printable <all >out
	python3 -c 'import sys; sys.stdout.buffer.write(b"?" * 32 + bytes(range(32, 127)) + b"?" * 129)' >want
	cmp out want
	test-common printable keep-8bit <all >out
	python3 -c 'import sys; sys.stdout.buffer.write(b"?" * 32 + bytes(range(32, 127)) + b"?" + bytes(range(128, 256)))' >want
	cmp out want
	# The length is kept: a NUL does not end the text early.
	printf 'a\0b\033[31mc\n' | test-common printable >out
	[ "$(cat out)" = 'a?b?[31mc?' ]
}
