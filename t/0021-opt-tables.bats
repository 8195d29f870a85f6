#!/usr/bin/env bats
# Every tool's option table (common/base/opt.h): what it describes to
# completion (--aibox-options) agrees with its --help and with what completion
# offers, every duration option in a table reads a duration by the one rule,
# and no tool parses its command line by hand.  No VM.
load lib-common

# The tools built from tools/*.c, by program name.
tools() {
	local f
	for f in "$TOP"/tools/aibox-*.c; do
		f=${f##*/}
		echo "${f%.c}"
	done
}

# The command words aibox takes for a program: aibox-tasks-show -> "tasks show".
words_of() {
	local w=${1#aibox-}
	case $w in
	tasks-* | audit-* | bundle-*) echo "${w%%-*} ${w#*-}" ;;
	*) echo "$w" ;;
	esac
}

@test "opt tables: each tool's table and its --help name the same options" {
	local prog desc help name
	for prog in $(tools); do
		run "$BUILD/$prog" --aibox-options
		assert_success
		desc=$output
		[ -n "$desc" ]
		# Every line: SUB TAB --name TAB [-x] TAB kind TAB value.
		run grep -vcP '^[a-z]*\t--[a-z0-9-]+\t(-[a-zA-Z])?\t(flag|text|duration|file|task|image|ref|project|choice)\t[^\t]*$' <<<"$desc"
		assert_output 0
		run "$BUILD/$prog" --help
		assert_success
		help=$output
		# Each option the table describes is in --help ...
		for name in $(cut -f2 <<<"$desc" | grep -vx -- --help); do
			[[ "$help" == *"$name"* ]] || fail "$prog: $name is in its table, not in its --help"
		done
		# ... and each option --help names (in its usage or its option lines) is in the table.
		run comm -23 <(grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]+|\[--[a-z][a-z0-9-]+' <<<"$help" |
			grep -oE -- '--[a-z0-9-]+' | sort -u) <(cut -f2 <<<"$desc" | sort -u)
		assert_success
		assert_output ""
	done
}

@test "opt tables: completion offers exactly each table's options" {
	local prog words sub want desc cmds
	run aibox completion --words 1 aibox ''
	assert_success
	cmds=$output
	for prog in $(tools); do
		words=$(words_of "$prog")
		# aibox-connect is a helper, not a command; completion's own words are none
		grep -qx "${words%% *}" <<<"$cmds" || continue
		[ "$prog" != aibox-completion ] || continue
		run "$BUILD/$prog" --aibox-options
		assert_success
		desc=$output
		# The command's own options, then each subcommand's (a line's first field)
		for sub in "" $(cut -f1 <<<"$desc" | grep . | sort -u); do
			want=$(awk -F'\t' -v s="$sub" '$1 == "" || $1 == s { print $2 }' <<<"$desc" | sort -u)
			run aibox completion --words $(($(wc -w <<<"aibox $words $sub"))) aibox $words $sub --
			assert_success
			assert_equal "$(sort -u <<<"$output")" "$want"
		done
	done
}

@test "opt tables: every duration option of every table refuses a bare number in the same words" {
	local prog name n=0
	for prog in $(tools); do
		for name in $("$BUILD/$prog" --aibox-options | awk -F'\t' '$4 == "duration" { print $2 }'); do
			run timeout 10 "$BUILD/$prog" "$name" 30
			assert_failure 2
			assert_line --index 0 "$prog: $name: '30' is not a duration: missing unit (use h, m, s or ms)"
			n=$((n + 1))
		done
	done
	# aibox task --timeout, tasks clean --older-than, the broker's one, the proxy's seven
	assert_equal "$n" 10
}

@test "opt tables: no tool parses its command line by hand, and tools/ has no headers" {
	cd "$TOP"
	# Only common/base/opt.c calls getopt; tools read argv through a table.
	run grep -lE 'getopt|opt_next\(|struct option\b' tools/*.c bin/*.c common/*/*.c common/*/*.h
	assert_success
	assert_output "$(printf 'common/base/opt.c\ncommon/base/opt.h')"
	# A tool is its one .c file: no code in headers under tools/ (docs/internals.md).
	run find tools -name '*.h'
	assert_success
	assert_output ""
	# And no tool looks at an argument by its place, but for aibox-completion's --words.
	run grep -nE 'argv\[[1-9]\]' tools/*.c
	assert_output --regexp '^tools/aibox-completion\.c:[0-9]+:.*"--words"'
}
