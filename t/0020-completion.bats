#!/usr/bin/env bats
# Shell completion: the bash function run with COMP_WORDS and COMP_CWORD set,
# the zsh one with words and CURRENT set and compadd recording what it is
# given; both ask aibox for the candidates (aibox completion --words).
load lib-common

# bash_complete WORD...: the candidates bash's _aibox offers for the last
# word, one a line, in the order given.
bash_complete() {
	bash -c 'source <(aibox completion bash) || exit 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_aibox; printf "%s\n" "${COMPREPLY[@]}"' bash "$@"
}

# zsh_complete WORD...: the same through zsh's _aibox.
zsh_complete() {
	zsh -fc 'compdef() { :; }
		compadd() { [[ $1 == -a ]] && print -rl -- "${(@P)2}"; }
		_files() { print -r -- "(files)"; }
		source <(aibox completion zsh) || exit 2
		words=("$@"); CURRENT=$#
		_aibox' zsh "$@"
}

# fake_tree: $T/tree/build, a build tree with aibox, aibox-completion and a
# made-up command aibox-tasks-show, whose option table (what it answers to
# --aibox-options, common/base/opt.h) has --json only.
fake_tree() {
	mkdir -p "$T/tree/build" "$T/tree/common/base"
	touch "$T/tree/common/base/paths.h"
	cp "$BUILD/aibox" "$BUILD/aibox-completion" "$T/tree/build/"
	printf '#!/bin/sh\n[ "$1" = --aibox-options ] || exit 2\nprintf "\\t--json\\t\\tflag\\t\\n"\n' \
		>"$T/tree/build/aibox-tasks-show"
	chmod +x "$T/tree/build/aibox-tasks-show"
}

@test "completion: bash offers the commands, then a command's subcommands" {
	run bash_complete aibox t
	assert_success
	assert_output "$(printf 'task\ntasks')"
	run bash_complete aibox tasks ''
	assert_output "$(printf 'clean\ncompare\nlist\nlog\nshow')"
	run bash_complete aibox help ''
	assert_line "task"
	assert_line "projects"
	refute_line "init"
	refute_line "connect"
	run bash_complete aibox ''
	assert_line "--version"
	assert_line "completion"
}

@test "completion: bash offers a command's flags, read from its option table" {
	run bash_complete aibox task --
	assert_success
	assert_line "--model"
	assert_line "--image"
	assert_line "--no-sandbox"
	assert_line "--detach"
	refute_line "--all"
	run bash_complete aibox tasks clean --o
	assert_output "--older-than"
	# After --, the words are the prompt's.
	run bash_complete aibox task -- --
	assert_output ""
}

@test "completion: bash offers the words and names a command takes" {
	run bash_complete aibox image ''
	assert_output "$(printf 'list\nbuild\nremove')"
	run bash_complete aibox completion ''
	assert_output "$(printf 'bash\nzsh')"
	run bash_complete aibox broker --auth ''
	assert_output "$(printf 'basic\nbearer')"
	run bash_complete aibox task --model ''
	assert_output ""
}

@test "completion: bash offers the image names, built and recipes" {
	export AIBOX_IMAGES=$T/images
	mkdir -p "$AIBOX_IMAGES/built" "$AIBOX_IMAGES/half" "$AIBOX_HOME/image/mine"
	touch "$AIBOX_IMAGES/built/manifest" "$AIBOX_HOME/image/mine/recipe"
	run bash_complete aibox task --image ''
	assert_success
	assert_output "$(printf 'built\ndefault\nmine')"
	run bash_complete aibox image remove m
	assert_output "mine"
}

@test "completion: bash offers the project names" {
	make_repo one
	make_repo two
	(cd one && aibox projects path && cd ../two && aibox projects path) >/dev/null 2>&1
	run bash_complete aibox projects remove ''
	assert_success
	assert_output "$(printf 'one\ntwo')"
	run bash_complete aibox projects check t
	assert_output "two"
}

@test "completion: bash offers the current project's task ids, newest first" {
	fake_tree
	make_repo repo
	cd repo
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20260101-100000-aaaaaa" "$P/tasks/20260102-100000-bbbbbb" \
		"$P/tasks/not-a-task"
	run bash_complete "$T/tree/build/aibox" tasks show ''
	assert_success
	assert_output "$(printf 'bbbbbb\naaaaaa')"
	run bash_complete "$T/tree/build/aibox" tasks show --
	assert_output "--json"
	# aibox task --continue takes a task too.
	run bash_complete aibox task --continue b
	assert_output "bbbbbb"
	# Outside a project there are none, and nothing is made.
	cd "$T"
	run bash_complete "$T/tree/build/aibox" tasks show ''
	assert_output ""
}

@test "completion: bash and zsh offer the checkout's branches, then its tags, for --from" {
	make_repo repo
	cd repo
	git branch feature
	git branch fix/flaky
	git tag v1.0
	git tag feature-tag
	main=$(git symbolic-ref --short HEAD)
	run bash_complete aibox task --from ''
	assert_success
	assert_output "$(printf '%s\n' feature fix/flaky "$main" | sort; printf 'feature-tag\nv1.0')"
	run bash_complete aibox task --from fe
	assert_success
	assert_output "$(printf 'feature\nfeature-tag')"
	run bash_complete aibox task "the prompt" --from v
	assert_success
	assert_output "v1.0"
	run zsh_complete aibox task --from fi
	assert_success
	assert_output "fix/flaky"
	# Outside a repository there are none.
	cd "$T"
	run bash_complete aibox task --from ''
	assert_success
	assert_output ""
}

@test "completion: bash offers file names for a --file value" {
	touch notes.txt nothing.md
	run bash_complete aibox task --file no
	assert_success
	assert_line "notes.txt"
	assert_line "nothing.md"
	[ "${#lines[@]}" -eq 2 ]
}

@test "completion: zsh's script parses and offers what bash's does" {
	command -v zsh >/dev/null || skip "zsh is not installed (packages.txt has it)"
	run zsh -n <(aibox completion zsh)
	assert_success
	run zsh_complete aibox t
	assert_success
	assert_output "$(printf 'task\ntasks')"
	run zsh_complete aibox task --i
	assert_output "--image"
	run zsh_complete aibox task --file ''
	assert_output "(files)"
	# Installed in fpath, it is autoloaded as the function _aibox.
	mkdir fp
	aibox completion zsh >fp/_aibox
	run zsh -fc 'fpath=("$1" $fpath); autoload -U _aibox
		compadd() { [[ $1 == -a ]] && print -rl -- "${(@P)2}"; }
		words=(aibox tasks ""); CURRENT=3; _aibox' zsh "$T/fp"
	assert_success
	assert_output "$(printf 'clean\ncompare\nlist\nlog\nshow')"
}

@test "completion: zsh offers the task ids, image names and project names bash does" {
	command -v zsh >/dev/null || skip "zsh is not installed (packages.txt has it)"
	export AIBOX_IMAGES=$T/images
	mkdir -p "$AIBOX_IMAGES/built" "$AIBOX_HOME/image/mine"
	touch "$AIBOX_IMAGES/built/manifest" "$AIBOX_HOME/image/mine/recipe"
	make_repo one
	make_repo two
	(cd one && aibox projects path && cd ../two && aibox projects path) >/dev/null 2>&1
	cd two
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20260101-100000-aaaaaa" "$P/tasks/20260102-100000-bbbbbb"
	run zsh_complete aibox tasks log ''
	assert_success
	assert_output "$(printf 'bbbbbb\naaaaaa')"
	run zsh_complete aibox task --continue a
	assert_output "aaaaaa"
	run zsh_complete aibox task --image ''
	assert_output "$(printf 'built\ndefault\nmine')"
	run zsh_complete aibox projects remove ''
	assert_output "$(printf 'one\ntwo')"
}

@test "completion: aibox completion refuses other shells" {
	run aibox completion fish
	assert_failure 2
	assert_output --partial "usage: aibox completion bash|zsh"
	run aibox completion bash
	assert_success
	assert_line "complete -F _aibox aibox"
}

@test "completion: make install puts the scripts where bash and zsh look, by PREFIX" {
	local san=0
	grep -q -- -fsanitize "$BUILD/.flags" 2>/dev/null && san=1
	make -s -C "$TOP" SANITIZE=$san install DESTDIR="$T/inst" >/dev/null
	cmp "$TOP/share/completion/aibox.bash" "$T/inst/usr/local/share/bash-completion/completions/aibox"
	cmp "$TOP/share/completion/_aibox" "$T/inst/usr/local/share/zsh/site-functions/_aibox"
	make -s -C "$TOP" SANITIZE=$san install DESTDIR="$T/inst" PREFIX=/usr >/dev/null
	cmp "$TOP/share/completion/_aibox" "$T/inst/usr/share/zsh/vendor-completions/_aibox"
	run "$T/inst/usr/bin/aibox" completion zsh
	assert_success
	assert_line "#compdef aibox"
}
