#!/usr/bin/env bats
# aibox tasks clean: ended and running tasks, --all, --older-than, locks of
# tasks that failed to start, what it cannot clean, and symlinks.
bats_require_minimum_version 1.5.0
load lib-common
load lib-lock

setup() {
	task_project_setup || return 1
}
teardown() { lock_teardown; }

# mk_task NAME: a task folder as an ended task leaves it, with its lock beside it.
mk_task() {
	mkdir "$TK/$1"
	head -c 102400 /dev/urandom >"$TK/$1/start.bundle"
	echo '{"version":1}' >"$TK/$1/result.json"
	echo 'prompt' >"$TK/$1/prompt.txt"
	touch "$TK/$1.lock"
}

# A name for a task that started now (local time).
now_name() { echo "$(date +%Y%m%d-%H%M%S)-$1"; }

@test "tasks clean: an ended task loses its start.bundle and start.idx and keeps the rest" {
	mk_task 20200101-120000-aaaaaa
	head -c 8192 /dev/urandom >"$TK/20200101-120000-aaaaaa/start.idx"
	run aibox tasks clean
	assert_success
	assert_line --index 0 --regexp "^removed $TK/20200101-120000-aaaaaa/start.bundle \(1[0-9][0-9].[0-9] KiB\)$"
	assert_line --index 1 --regexp "^removed $TK/20200101-120000-aaaaaa/start.idx \([0-9.]+ KiB\)$"
	assert_line --index 2 --regexp '^freed 1[0-9][0-9].[0-9] KiB$'
	assert_file_not_exists "$TK/20200101-120000-aaaaaa/start.bundle"
	assert_file_not_exists "$TK/20200101-120000-aaaaaa/start.idx"
	assert_file_exists "$TK/20200101-120000-aaaaaa/result.json"
	assert_file_exists "$TK/20200101-120000-aaaaaa/prompt.txt"
	assert_file_exists "$TK/20200101-120000-aaaaaa.lock"
	# Again: nothing left to do.
	run aibox tasks clean
	assert_success
	assert_output "nothing to clean"
}

@test "tasks clean: a running task is left alone, even with --all" {
	mk_task 20200101-120000-aaaaaa
	mk_task 20200101-120001-bbbbbb
	hold_lock "$TK/20200101-120001-bbbbbb.lock"
	run aibox tasks clean --all
	assert_success
	assert_line --regexp "^removed $TK/20200101-120000-aaaaaa/ and 20200101-120000-aaaaaa.lock \([0-9.]+ KiB\)\$"
	assert_line "left 1 running task alone"
	assert_dir_not_exists "$TK/20200101-120000-aaaaaa"
	assert_file_not_exists "$TK/20200101-120000-aaaaaa.lock"
	assert_file_exists "$TK/20200101-120001-bbbbbb/start.bundle"
	assert_file_exists "$TK/20200101-120001-bbbbbb.lock"
	# Once it ends, it goes.
	release_locks
	run aibox tasks clean --all
	assert_success
	assert_dir_not_exists "$TK/20200101-120001-bbbbbb"
	assert_file_not_exists "$TK/20200101-120001-bbbbbb.lock"
}

@test "tasks clean: a lock held inside the folder (aibox 1.6 and before) counts as running" {
	mk_task 20200101-120000-aaaaaa
	rm "$TK/20200101-120000-aaaaaa.lock"
	hold_lock "$TK/20200101-120000-aaaaaa/lock"
	mk_task 20200101-120001-bbbbbb
	hold_lock "$TK/20200101-120001-bbbbbb/task.lock"
	run aibox tasks clean --all
	assert_success
	assert_output $'left 2 running tasks alone\nnothing to clean'
	assert_file_exists "$TK/20200101-120000-aaaaaa/start.bundle"
	assert_file_exists "$TK/20200101-120001-bbbbbb/start.bundle"
	release_locks
	# Not held any more: ended, and the inner lock goes with the folder.
	run aibox tasks clean --all
	assert_success
	assert_line --regexp "^removed $TK/20200101-120000-aaaaaa/ \([0-9.]+ KiB\)\$"
	assert_dir_not_exists "$TK/20200101-120000-aaaaaa"
	assert_dir_not_exists "$TK/20200101-120001-bbbbbb"
}

@test "tasks clean: --all removes ended tasks' folders and locks, results included" {
	mk_task 20200101-120000-aaaaaa
	mk_task 20200102-120000-bbbbbb
	echo log >"$TK/20200102-120000-bbbbbb/proxy.log"
	run aibox tasks clean --all
	assert_success
	assert_line --index 0 --partial "removed $TK/20200101-120000-aaaaaa/ and 20200101-120000-aaaaaa.lock"
	assert_line --index 1 --partial "removed $TK/20200102-120000-bbbbbb/ and 20200102-120000-bbbbbb.lock"
	assert_line --index 2 --regexp '^freed 2[0-9][0-9].[0-9] KiB$'
	[ -z "$(ls -A "$TK")" ]
}

@test "tasks clean: --older-than takes the start time from the folder name" {
	old=20200101-120000-aaaaaa
	recent=$(date -d '10 minutes ago' +%Y%m%d-%H%M%S)-bbbbbb
	new=$(now_name cccccc)
	mk_task "$old"
	mk_task "$recent"
	mk_task "$new"
	run aibox tasks clean --all --older-than 720h
	assert_success
	assert_line --index 0 --partial "removed $TK/$old/"
	assert_dir_exists "$TK/$recent"
	assert_dir_exists "$TK/$new"
	run aibox tasks clean --older-than 5m
	assert_success
	assert_line --index 0 --partial "removed $TK/$recent/start.bundle"
	assert_file_exists "$TK/$new/start.bundle"
	run aibox tasks clean --older-than=1h30m
	assert_success
	assert_output "nothing to clean"
	# The file times do not matter, only the name.
	touch -d '2 years ago' "$TK/$new" "$TK/$new/start.bundle" "$TK/$new.lock"
	run aibox tasks clean --older-than 1h
	assert_success
	assert_output "nothing to clean"
	assert_file_exists "$TK/$new/start.bundle"
}

@test "tasks clean: a bad --older-than is a usage error" {
	mk_task 20200101-120000-aaaaaa
	for bad in "" 7d -5m 30 "1 h"; do
		run aibox tasks clean --older-than "$bad"
		assert_failure 2
		assert_output --partial "aibox-tasks-clean: --older-than: '$bad' is not a duration"
	done
	run aibox tasks clean --older-than
	assert_failure 2
	assert_line --index 0 "aibox-tasks-clean: --older-than needs a value"
	run aibox tasks clean --bogus
	assert_failure 2
	assert_line --index 0 "aibox-tasks-clean: unknown option '--bogus'"
	run aibox tasks clean extra
	assert_failure 2
	assert_line --index 0 "aibox-tasks-clean: unexpected argument 'extra'"
	assert_file_exists "$TK/20200101-120000-aaaaaa/start.bundle"
}

@test "tasks clean: a lock with no folder goes once it is a minute old" {
	touch -d '2 minutes ago' "$TK/20200101-120000-aaaaaa.lock"
	touch "$TK/$(now_name bbbbbb).lock"
	touch -d '2 minutes ago' "$TK/20200101-120002-cccccc.lock"
	hold_lock "$TK/20200101-120002-cccccc.lock"
	touch -d '2 minutes ago' "$TK/20200101-120002-cccccc.lock"
	run aibox tasks clean
	assert_success
	assert_line --index 0 "removed $TK/20200101-120000-aaaaaa.lock (0 B)"
	assert_file_not_exists "$TK/20200101-120000-aaaaaa.lock"
	# Too young: its task may be making its folder right now.
	assert_file_exists "$TK/$(ls "$TK" | grep bbbbbb)"
	# Held: its task is alive.
	assert_file_exists "$TK/20200101-120002-cccccc.lock"
}

@test "tasks clean: a folder it cannot clean is named, the rest is cleaned, status 1" {
	mk_task 20200101-120000-aaaaaa
	mk_task 20200101-120001-bbbbbb
	mk_task 20200101-120002-cccccc
	too_deep "$TK/20200101-120001-bbbbbb/deep"
	run --separate-stderr aibox tasks clean --all
	assert_failure 1
	assert_regex "$stderr" "^aibox-tasks-clean: cannot clean '$TK/20200101-120001-bbbbbb': cannot remove '$TK/20200101-120001-bbbbbb/deep(/d){256}': Too many levels of symbolic links\$"
	assert_line --partial "removed $TK/20200101-120000-aaaaaa/"
	assert_line --partial "removed $TK/20200101-120002-cccccc/"
	assert_line --regexp '^freed '
	assert_dir_not_exists "$TK/20200101-120000-aaaaaa"
	assert_dir_not_exists "$TK/20200101-120002-cccccc"
	# What it could remove of that one went; the lock stays with what is left.
	assert_file_not_exists "$TK/20200101-120001-bbbbbb/start.bundle"
	assert_dir_exists "$TK/20200101-120001-bbbbbb/deep/d"
	assert_file_exists "$TK/20200101-120001-bbbbbb.lock"
}

@test "tasks clean: a folder it cannot check is named, the rest is cleaned, status 1" {
	mk_task 20200101-120000-aaaaaa
	mk_task 20200101-120001-bbbbbb
	not_a_lock "$TK/20200101-120000-aaaaaa.lock"
	run --separate-stderr aibox tasks clean
	assert_failure 1
	assert_equal "$stderr" "aibox-tasks-clean: cannot check '$TK/20200101-120000-aaaaaa': Invalid argument"
	assert_line --index 0 --partial "removed $TK/20200101-120001-bbbbbb/start.bundle"
	assert_file_exists "$TK/20200101-120000-aaaaaa/start.bundle"
}

@test "tasks clean: a bundle it cannot remove is named, status 1" {
	mk_task 20200101-120000-aaaaaa
	mk_task 20200101-120001-bbbbbb
	run --separate-stderr busy "$TK/20200101-120000-aaaaaa/start.bundle" aibox tasks clean
	assert_failure 1
	assert_equal "$stderr" "aibox-tasks-clean: cannot clean '$TK/20200101-120000-aaaaaa': cannot remove start.bundle: Device or resource busy"
	assert_line --index 0 --partial "removed $TK/20200101-120001-bbbbbb/start.bundle"
	assert_file_exists "$TK/20200101-120000-aaaaaa/start.bundle"
}

@test "tasks clean: a lock that is a symlink is not trusted, and its target survives" {
	mk_task 20200101-120000-aaaaaa
	rm "$TK/20200101-120000-aaaaaa.lock"
	echo keep >"$T/target"
	ln -s "$T/target" "$TK/20200101-120000-aaaaaa.lock"
	run --separate-stderr aibox tasks clean --all
	assert_failure 1
	assert_equal "$stderr" "aibox-tasks-clean: cannot check '$TK/20200101-120000-aaaaaa': Too many levels of symbolic links"
	assert_dir_exists "$TK/20200101-120000-aaaaaa"
	[ "$(cat "$T/target")" = keep ]
}

@test "tasks clean: symlinks inside a task folder are removed as links, their targets survive" {
	mkdir -p "$T/outside/dir"
	echo keep >"$T/outside/file"
	echo keep >"$T/outside/dir/inner"
	echo keep >"$T/outside/bundle"
	mk_task 20200101-120000-aaaaaa
	ln -s "$T/outside/file" "$TK/20200101-120000-aaaaaa/link-file"
	ln -s "$T/outside/dir" "$TK/20200101-120000-aaaaaa/link-dir"
	ln -s ../../../../../.. "$TK/20200101-120000-aaaaaa/link-up"
	mk_task 20200101-120001-bbbbbb
	rm "$TK/20200101-120001-bbbbbb/start.bundle"
	ln -s "$T/outside/bundle" "$TK/20200101-120001-bbbbbb/start.bundle"
	run aibox tasks clean
	assert_success
	assert_line --partial "removed $TK/20200101-120001-bbbbbb/start.bundle"
	assert_file_exists "$T/outside/bundle"
	run aibox tasks clean --all
	assert_success
	assert_dir_not_exists "$TK/20200101-120000-aaaaaa"
	[ "$(cat "$T/outside/file")" = keep ]
	[ "$(cat "$T/outside/dir/inner")" = keep ]
	[ "$(cat "$T/outside/bundle")" = keep ]
	assert_file_exists "$T/repo/README.md"
}

@test "tasks clean: anything in tasks/ that is not a task is not touched" {
	mkdir "$T/elsewhere"
	echo keep >"$T/elsewhere/start.bundle"
	ln -s "$T/elsewhere" "$TK/20200101-120000-aaaaaa"
	mkdir "$TK/backup" "$TK/20200101-120000-AAAAAA"
	echo x >"$TK/backup/start.bundle"
	echo x >"$TK/20200101-120000-AAAAAA/start.bundle"
	echo notes >"$TK/notes.txt"
	touch -d '1 hour ago' "$TK/notes.lock" "$TK/20200101-120000-aaaaaa.lock.old"
	run aibox tasks clean --all
	assert_success
	assert_output "nothing to clean"
	assert_file_exists "$T/elsewhere/start.bundle"
	assert_file_exists "$TK/backup/start.bundle"
	assert_file_exists "$TK/20200101-120000-AAAAAA/start.bundle"
	assert_file_exists "$TK/notes.txt"
	assert_file_exists "$TK/notes.lock"
}

@test "tasks clean: a task made by task_create is cleaned once its process ended" {
	name=$(test-found task-create "$TK")
	echo x >"$TK/$name/start.bundle"
	run aibox tasks clean
	assert_success
	assert_line --index 0 --partial "removed $TK/$name/start.bundle"
}

@test "tasks clean: outside a checkout fails; a checkout without a project has nothing" {
	cd "$T"
	run aibox tasks clean
	assert_failure 2
	assert_output "aibox-tasks-clean: not in a git checkout: a project is the checkout of a git repository"
	make_repo "$T/fresh"
	cd "$T/fresh"
	run aibox tasks clean --all
	assert_success
	assert_output "nothing to clean: this checkout has no aibox project"
	assert_dir_not_exists "$AIBOX_HOME/projects/fresh"
}

@test "tasks clean: --help" {
	run aibox tasks clean --help
	assert_success
	assert_output --partial "usage: aibox tasks clean [--all] [--older-than DURATION]"
	run aibox help tasks clean
	assert_success
	assert_output --partial "--older-than DURATION"
}

@test "tasks clean: what writing start.bundle left when aibox was killed goes with it" {
	mk_task 20200101-120000-aaaaaa
	mkdir -p "$TK/20200101-120000-aaaaaa/.start-bundle.Ab12Cd/objects/info"
	echo /elsewhere >"$TK/20200101-120000-aaaaaa/.start-bundle.Ab12Cd/objects/info/alternates"
	echo partial >"$TK/20200101-120000-aaaaaa/start.bundle.lock"
	mkdir "$TK/20200101-120000-aaaaaa/.start-bundle.toolongname"
	run aibox tasks clean
	assert_success
	assert_line --partial "removed $TK/20200101-120000-aaaaaa/start.bundle ("
	assert_line --partial "removed $TK/20200101-120000-aaaaaa/.start-bundle.Ab12Cd ("
	assert_line --partial "removed $TK/20200101-120000-aaaaaa/start.bundle.lock ("
	assert_dir_not_exists "$TK/20200101-120000-aaaaaa/.start-bundle.Ab12Cd"
	assert_file_not_exists "$TK/20200101-120000-aaaaaa/start.bundle.lock"
	assert_dir_exists "$TK/20200101-120000-aaaaaa/.start-bundle.toolongname"
	assert_file_exists "$TK/20200101-120000-aaaaaa/result.json"
}
