#!/usr/bin/env bats
# The front command: dispatch, help, version, unknown commands.
load lib-common

@test "front: --version prints the version" {
	run aibox --version
	assert_success
	assert_output --regexp '^aibox version [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "front: no command prints usage and fails" {
	run aibox
	assert_failure 2
	assert_output --partial "usage: aibox"
}

@test "front: no command prints what help prints, on stderr" {
	run --separate-stderr aibox help
	assert_success
	help=$output
	run --separate-stderr aibox
	assert_failure 2
	assert_equal "$output" ""
	assert_equal "$stderr" "$help"
}

@test "front: an unknown command says which exist" {
	run aibox frobnicate
	assert_failure 2
	assert_line --index 0 "aibox: 'frobnicate' is not an aibox command, see 'aibox help'"
	assert_output --partial "commands:"
}

@test "front: a path is never taken as a command" {
	run aibox ../../bin/true
	assert_failure 2
	assert_output --partial "'../../bin/true' is not an aibox command"
}

@test "front: help lists the commands" {
	run aibox help
	assert_success
	assert_output --partial "usage: aibox"
	refute_output --partial "init"
	refute_output --partial "connect"
	assert_line "   tasks clean     remove what ended tasks leave behind"
}

@test "front: help gives every command a line that says what it does" {
	run --separate-stderr aibox help
	assert_success
	local n=0 name words
	for prog in "$BUILD"/aibox-*; do
		name=${prog##*/aibox-}
		case $name in init | connect | *.*) continue ;; esac
		words=${name//-/ }
		# The name, padded to the longest name, three spaces, then words.
		assert_line --regexp "^   $words +[a-z].{10,}$"
		n=$((n + 1))
	done
	[ "$n" -ge 12 ]
	# The descriptions start in one column.
	run bash -c "aibox help | grep '^   [a-z]' | sed -E 's/^   ([a-z]+( [a-z]+)?) +.*/\1/' | sort -u | wc -l"
	assert_success
	[ "$output" -eq "$n" ]
	run bash -c "aibox help | grep '^   [a-z]' | awk '{ match(\$0, /^   [a-z]+( [a-z]+)? +/); print RLENGTH }' | sort -u | wc -l"
	assert_success
	assert_output 1
}

@test "front: --help after a command word with subcommands is its help, on stdout" {
	for h in --help -h; do
		run --separate-stderr aibox tasks "$h"
		assert_success
		assert_equal "$stderr" ""
		assert_line --index 0 "usage: aibox tasks <subcommand> [<args>]"
		assert_line "   tasks list      list the tasks, newest first"
	done
}

@test "front: dispatches to aibox-<a>-<b>, else aibox-<a> with the rest" {
	mkdir bin
	cp "$BUILD/aibox" bin/aibox
	mkdir -p common/base
	touch common/base/paths.h   # makes bin/ a build tree
	printf '#!/bin/sh\necho "two: $0 $*"\n' >bin/aibox-foo-bar
	printf '#!/bin/sh\necho "one: $0 $*"\n' >bin/aibox-foo
	chmod +x bin/aibox-foo-bar bin/aibox-foo
	run bin/aibox foo bar x y
	assert_success
	assert_output "two: $T/bin/aibox-foo-bar x y"
	run bin/aibox foo baz x
	assert_success
	assert_output "one: $T/bin/aibox-foo baz x"
	run bin/aibox foo --bar
	assert_success
	assert_output "one: $T/bin/aibox-foo --bar"
	run bin/aibox help
	assert_success
	assert_line "   foo"
	assert_line "   foo bar"
}

@test "front: a command word with subcommands lists them" {
	run aibox tasks
	assert_failure 2
	assert_line --index 0 "usage: aibox tasks <subcommand> [<args>]"
	assert_line --regexp "^   tasks clean +remove "
	refute_output --partial "is not an aibox command"
	refute_line "   task"
	run aibox tasks frob
	assert_failure 2
	assert_line --index 0 "aibox: 'tasks frob' is not an aibox command, see 'aibox help tasks'"
	assert_line --regexp "^   tasks clean +remove "
	run aibox help tasks
	assert_success
	assert_line --index 0 "usage: aibox tasks <subcommand> [<args>]"
	assert_line --regexp "^   tasks clean +remove "
}

# Every tool and subcommand the front runs, as words, then every program
# itself: aibox-connect is run by QEMU, not by a user, but reads options too.
every_command() {
	local prog name
	for prog in "$BUILD"/aibox-*; do
		name=${prog##*/aibox-}
		case $name in init | *.*) continue ;; esac
		echo "$name"
	done
}

# The words that run the command name ("tasks-clean", "image list"): through
# aibox, but aibox-connect, which is no command, by its path.
command_words() {
	if [ "$1" = connect ]; then
		echo "$BUILD/aibox-connect"
	else
		echo "aibox ${1//-/ }"
	fi
}

@test "front: every tool says \"unknown option '--x'\" for an option it does not know, and exits 2" {
	local name want status_want
	make_repo repo
	cd repo
	for name in $(every_command) "image list" "image build" "image remove" "projects list" \
		"projects path" "projects check" "projects remove"; do
		prog=aibox-${name%% *}
		if [ "$prog" = aibox-completion ]; then
			prog="aibox completion"
		fi
		# aibox run's own failures are 125 (docs/exit-codes.md).
		status_want=2
		if [ "$name" = run ]; then
			status_want=125
		fi
		for bad in --bogus --bogus=1; do
			run --separate-stderr $(command_words "$name") "$bad"
			assert_failure "$status_want"
			assert_equal "${stderr%%$'\n'*}" "$prog: unknown option '--bogus'"
			assert_equal "$output" ""
		done
	done
	run --separate-stderr aibox --bogus
	assert_failure 2
	assert_equal "${stderr%%$'\n'*}" "aibox: unknown option '--bogus'"
}

@test "front: every tool's --help and -h is its help, on stdout, status 0" {
	local name
	make_repo repo
	cd repo
	for name in $(every_command) "image list" "image build" "image remove" "projects list" \
		"projects path" "projects check" "projects remove"; do
		for h in --help -h; do
			run --separate-stderr $(command_words "$name") "$h"
			assert_success
			assert_equal "$stderr" ""
			assert_line --index 0 --regexp '^usage: aibox'
		done
	done
	# A project name or an image name that looks like help is help.
	run --separate-stderr aibox projects remove --help
	assert_success
	assert_line --index 0 "usage: aibox projects [list [--json]]"
	run --separate-stderr aibox image remove --help
	assert_success
	assert_line --index 0 "usage: aibox image list [--json]"
}

@test "front: aibox(1) has an entry for every command, under the name aibox help gives it" {
	local words n=0
	run --separate-stderr aibox help
	assert_success
	while read -r words; do
		# A tagged paragraph whose tag starts with the words: `.B "tasks list ...`,
		# `.BI "projects remove " name`, `.B run`.
		grep -A1 -x '\.TP' "$TOP/docs/man/aibox.1" |
			grep -Eq "^\.B[IR]? \"?${words// /\\ }( |\"|\$)" ||
			fail "docs/man/aibox.1 has no entry for 'aibox $words'"
		n=$((n + 1))
	done < <(printf '%s\n' "$output" | sed -nE 's/^   ([a-z]+( [a-z]+)?)( {3,}.*)?$/\1/p')
	[ "$n" -ge 12 ]
}

@test "front: every option a tool's --help names is an entry (.TP) of its man page" {
	local prog name man flag esc
	for prog in "$BUILD"/aibox-*; do
		name=${prog##*/}
		case $name in aibox-init | aibox-completion | *.*) continue ;; esac
		man=$TOP/docs/man/$name.1
		assert_file_exists "$man"
		for flag in $("$prog" --help | grep -oE '^ +(-[a-z], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
			esc=${flag//-/\\-}
			awk -v f="$esc" 'prev == ".TP" && /^\.B/ && index($0, f) { found = 1 } { prev = $0 }
				END { exit !found }' "$man" || fail "$man has no .TP entry for $flag"
		done
	done
}

# One duration grammar (common/base/duration.h) for every duration option: a bare
# number is no duration, save "0", which each option's range then judges.
@test "front: every duration option refuses a bare number in the same words, and takes the same units" {
	local opt
	for opt in "aibox task --timeout" "aibox tasks clean --older-than" \
		"aibox-broker --client-timeout" "aibox-proxy --header-timeout" \
		"aibox-proxy --idle-timeout" "aibox-proxy --connect-timeout" \
		"aibox-proxy --api-pool-idle" "aibox-proxy --drain-timeout" \
		"aibox-proxy --fill-wait"; do
		local tool=${opt% *} name=${opt##* }
		local prog=${tool/aibox /aibox-}
		prog=${prog// /-}
		# timeout: a tool that took it would run on
		run timeout 10 $tool "$name" 30
		assert_failure 2
		assert_line --index 0 "$prog: $name: '30' is not a duration: missing unit (use h, m, s or ms)"
		run timeout 10 $tool "$name" 1.5x
		assert_failure 2
		assert_line --index 0 "$prog: $name: '1.5x' is not a duration: unknown unit 'x' (use h, m, s or ms)"
	done
	# "0" is a duration: of zero, which a time-out's range refuses and --older-than takes
	run timeout 10 aibox-proxy --header-timeout 0
	assert_failure 2
	assert_line --index 0 "aibox-proxy: --header-timeout: '0' is not between 1ms and 24h"
	run aibox task --timeout 0
	assert_failure 2
	assert_line --index 0 "aibox-task: --timeout: '0' is not between 1s and 168h"
	run aibox task --timeout 168h0.001s
	assert_failure 2
	assert_line --index 0 "aibox-task: --timeout: '168h0.001s' is not between 1s and 168h"
	run timeout 10 aibox-broker --client-timeout 1h1ms
	assert_failure 2
	assert_line --index 0 "aibox-broker: --client-timeout: '1h1ms' is not between 1s and 1h"
	run timeout 10 aibox-proxy --header-timeout 24h0m0.001s
	assert_failure 2
	assert_line --index 0 "aibox-proxy: --header-timeout: '24h0m0.001s' is not between 1ms and 24h"
	no_vm_project
	run aibox tasks clean --older-than 0
	assert_success
}
