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
	assert_line "   tasks clean"
}

@test "front: dispatches to aibox-<a>-<b>, else aibox-<a> with the rest" {
	mkdir bin
	cp "$BUILD/aibox" bin/aibox
	mkdir common
	touch common/paths.h   # makes bin/ a build tree
	printf '#!/bin/sh\necho "two: $0 $*"\n' >bin/aibox-foo-bar
	printf '#!/bin/sh\necho "one: $0 $*"\n' >bin/aibox-foo
	chmod +x bin/aibox-foo-bar bin/aibox-foo
	run bin/aibox foo bar x y
	assert_output "two: $T/bin/aibox-foo-bar x y"
	run bin/aibox foo baz x
	assert_output "one: $T/bin/aibox-foo baz x"
	run bin/aibox foo --bar
	assert_output "one: $T/bin/aibox-foo --bar"
	run bin/aibox help
	assert_line "   foo"
	assert_line "   foo bar"
}

@test "front: a command word with subcommands lists them" {
	run aibox tasks
	assert_failure 2
	assert_line --index 0 "usage: aibox tasks <subcommand> [<args>]"
	assert_line "   tasks clean"
	refute_output --partial "is not an aibox command"
	refute_line "   task"
	run aibox tasks frob
	assert_failure 2
	assert_line --index 0 "aibox: 'tasks frob' is not an aibox command, see 'aibox help tasks'"
	assert_line "   tasks clean"
	run aibox help tasks
	assert_success
	assert_line --index 0 "usage: aibox tasks <subcommand> [<args>]"
	assert_line "   tasks clean"
}
