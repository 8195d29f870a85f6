#!/usr/bin/env bats
# aibox projects: list, path, remove, and the project lock.
bats_require_minimum_version 1.5.0
load lib-common
load lib-lock

setup() {
	common_setup
	make_repo "$T/My Repo!"
	cd "$T/My Repo!" || return 1
}
teardown() { lock_teardown; }

@test "projects path: makes the checkout's project with the default config, once" {
	run aibox projects path
	assert_success
	assert_output --partial "$AIBOX_HOME/projects/my-repo"
	P=$AIBOX_HOME/projects/my-repo
	assert_line --index 0 "aibox-projects: made project 'my-repo' for $T/My Repo!"
	assert_dir_exists "$P/tasks"
	assert_dir_exists "$P/home"
	[ "$(cat "$P/checkout")" = "$T/My Repo!" ]
	[ "$(stat -c %a "$P")" = 700 ]
	run test-found config "$P/config.yaml"
	assert_success
	assert_line "allow api.anthropic.com"
	assert_line "allow platform.claude.com"
	# The second time, and from a subfolder: the same, nothing made.
	mkdir -p sub/dir
	cd sub/dir
	run --separate-stderr aibox projects path
	assert_success
	assert_output "$P"
	[ -z "$stderr" ]
	[ "$(ls "$AIBOX_HOME/projects")" = my-repo ]
}

@test "projects path: stdout is the folder alone" {
	out=$(aibox projects path 2>/dev/null)
	[ "$out" = "$AIBOX_HOME/projects/my-repo" ]
}

@test "projects path: another checkout of the same name gets its own project" {
	mkdir "$T/other"
	make_repo "$T/other/My Repo!"
	P1=$(aibox projects path 2>/dev/null)
	P2=$(cd "$T/other/My Repo!" && aibox projects path 2>/dev/null)
	[ "$P1" = "$AIBOX_HOME/projects/my-repo" ]
	[ "$P2" = "$AIBOX_HOME/projects/my-repo-2" ]
	[ "$(cat "$P2/checkout")" = "$T/other/My Repo!" ]
	# A linked worktree is a checkout of its own.
	git worktree add -q "$T/wt" 2>/dev/null
	P3=$(cd "$T/wt" && aibox projects path 2>/dev/null)
	[ "$P3" = "$AIBOX_HOME/projects/wt" ]
}

@test "projects path: names are made safe" {
	run test-found project-name "/x/My Repo!"
	assert_output "my-repo valid"
	run test-found project-name "/x/..hidden"
	assert_output "hidden valid"
	run test-found project-name "/x/Café au lait"
	assert_output "caf-au-lait valid"
	run test-found project-name "/x/---"
	assert_output "project valid"
	run test-found project-name "/x/$(printf 'a\nb')"
	assert_output "a-b valid"
	run test-found project-name "/x/$(printf 'x%.0s' {1..100})"
	assert_output "$(printf 'x%.0s' {1..48}) valid"
}

@test "projects path: outside a checkout or in a bare repository it fails" {
	cd "$T"
	run aibox projects path
	assert_failure 2
	assert_output "aibox-projects: not in a git checkout: a project is the checkout of a git repository"
	git init -q --bare "$T/bare.git"
	cd "$T/bare.git"
	run aibox projects path
	assert_failure 2
	assert_output --partial "bare repository"
	assert_dir_not_exists "$AIBOX_HOME/projects/bare"
}

@test "projects: lists name, tasks, running tasks, checkout and folder" {
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20200101-000000-aaaaaa" "$P/tasks/20200101-000001-bbbbbb"
	mkdir "$P/tasks/20200101-000002-cccccc" "$P/tasks/not-a-task"
	hold_lock "$P/tasks/20200101-000001-bbbbbb.lock"
	# An older aibox kept its lock inside the folder: running too.
	hold_lock "$P/tasks/20200101-000002-cccccc/lock"
	make_repo "$T/second"
	(cd "$T/second" && aibox projects path >/dev/null 2>&1)
	run aibox projects
	assert_success
	assert_line --index 0 --regexp '^NAME +TASKS +RUNNING +CHECKOUT +FOLDER$'
	assert_line --index 1 --regexp "^my-repo +3 +2  $T/My Repo!  $P\$"
	assert_line --index 2 --regexp "^second +0 +0  $T/second +$AIBOX_HOME/projects/second\$"
	release_locks
	run aibox projects list
	assert_success
	assert_line --index 1 --regexp "^my-repo +3 +0  "
}

@test "projects: with no projects it says so and succeeds" {
	run --separate-stderr aibox projects
	assert_success
	assert_output ""
	assert_equal "$stderr" "aibox-projects: no projects yet; \`aibox projects path\` in a checkout makes one"
}

@test "projects remove: removes the folder, config, home and tasks" {
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20200101-000000-aaaaaa"
	head -c 10000 /dev/urandom >"$P/tasks/20200101-000000-aaaaaa/start.bundle"
	run aibox projects remove my-repo
	assert_success
	assert_output --regexp "^removed project 'my-repo' \($P, freed [0-9.]+ [KM]iB\)$"
	assert_dir_not_exists "$P"
	run --separate-stderr aibox projects
	assert_success
	assert_output ""
}

@test "projects remove: what its tasks kept in the dependency cache with a secret goes with it, so a later project of its name never gets it" {
	export AIBOX_DEPS_CACHE=$T/deps
	P=$(aibox projects path 2>/dev/null)
	local u=https://registry.example/p/-/p-1.0.0.tgz#sha512=00
	printf private | test-cache put "$T/deps" 1G "$u" project:my-repo
	printf public | test-cache put "$T/deps" 1G "$u" -
	printf other | test-cache put "$T/deps" 1G "$u" project:my-repo-2
	run aibox projects remove my-repo
	assert_success
	run aibox cache list
	assert_success
	refute_output --partial "  project:my-repo  "
	assert_output --partial "  project:my-repo-2  $u"
	assert_output --partial "  -  $u"
	# Another checkout of that name, made later, is project my-repo again.
	mkdir "$T/later"
	make_repo "$T/later/my-repo"
	run --separate-stderr bash -c 'cd "$1" && aibox projects path' - "$T/later/my-repo"
	assert_output "$P"
	run test-cache get "$T/deps" "$u" project:my-repo
	assert_failure
	assert_output miss
}

@test "projects remove: what its tasks kept with a secret's value (its scope's keyed hash) goes with it too" {
	export AIBOX_DEPS_CACHE=$T/deps
	aibox projects path >/dev/null 2>&1
	local u=https://registry.example/p/-/p-1.0.0.tgz#sha512=00
	printf private | test-cache put "$T/deps" 1G "$u" project:my-repo/0123456789abcdef0123456789abcdef
	printf other | test-cache put "$T/deps" 1G "$u" project:my-repo-2/0123456789abcdef0123456789abcdef
	run aibox projects remove my-repo
	assert_success
	run aibox cache list
	assert_success
	refute_output --partial "  project:my-repo/"
	assert_output --partial "  project:my-repo-2/0123456789abcdef0123456789abcdef  $u"
}

@test "projects remove: leaves a project alone while its lock is held, by a task or aibox run" {
	P=$(aibox projects path 2>/dev/null)
	hold_lock "$P/lock" sh
	run aibox projects remove my-repo
	assert_failure 1
	assert_output "aibox-projects: project 'my-repo' is in use by a task or aibox run: left alone"
	assert_file_exists "$P/config.yaml"
	# Two holders at once (tasks share it), then none.
	hold_lock "$P/lock" sh
	run aibox projects remove my-repo
	assert_failure 1
	assert_output "aibox-projects: project 'my-repo' is in use by a task or aibox run: left alone"
	release_locks
	run aibox projects remove my-repo
	assert_success
	assert_dir_not_exists "$P"
}

@test "projects remove: a running task's own lock also keeps the project" {
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20200101-000000-aaaaaa"
	hold_lock "$P/tasks/20200101-000000-aaaaaa.lock"
	run aibox projects remove my-repo
	assert_failure 1
	assert_output "aibox-projects: project 'my-repo' has a running task: left alone"
	assert_dir_exists "$P/tasks/20200101-000000-aaaaaa"
}

@test "projects remove: symlinks inside are removed, their targets survive" {
	P=$(aibox projects path 2>/dev/null)
	mkdir "$T/outside"
	echo keep >"$T/outside/file"
	ln -s "$T/outside" "$P/home/link-to-dir"
	ln -s "$T/outside/file" "$P/tasks/link-to-file"
	run aibox projects remove my-repo
	assert_success
	assert_dir_not_exists "$P"
	assert_file_exists "$T/outside/file"
	[ "$(cat "$T/outside/file")" = keep ]
}

@test "projects remove: what it cannot remove is named, and the status is 1" {
	P=$(aibox projects path 2>/dev/null)
	too_deep "$P/home/deep"
	run aibox projects remove my-repo
	assert_failure 1
	assert_line --index 0 --regexp "^aibox-projects: cannot remove '$AIBOX_HOME/projects/my-repo/home/deep(/d){255}': Too many levels of symbolic links\$"
	assert_line --index 1 --partial "aibox-projects: project 'my-repo' is partly removed"
	assert_dir_exists "$P/home/deep/d"
	assert_file_not_exists "$P/config.yaml"
}

@test "projects remove: unknown and unsafe names are refused" {
	run aibox projects remove nothing-here
	assert_failure 2
	assert_output "aibox-projects: no project 'nothing-here' (see \`aibox projects\`)"
	run aibox projects remove ../../etc
	assert_failure 2
	assert_output --partial "is not a project name"
	run aibox projects remove .lock
	assert_failure 2
	assert_output --partial "'.lock' is not a project name"
	run aibox projects remove
	assert_failure 2
	assert_output --partial "usage: aibox projects"
}

@test "projects: --help, usage errors and the exit codes" {
	run aibox projects --help
	assert_success
	assert_output --partial "usage: aibox projects [list [--json]]"
	run aibox help projects
	assert_success
	assert_output --partial "aibox projects remove NAME"
	run aibox projects frob
	assert_failure 2
	assert_line --index 0 "aibox-projects: unknown subcommand 'frob'"
	run aibox projects path extra
	assert_failure 2
	assert_line --index 0 "aibox-projects: unexpected argument 'extra'"
	run aibox projects --bogus
	assert_failure 2
	assert_line --index 0 "aibox-projects: unknown option '--bogus'"
	run aibox projects remove
	assert_failure 2
	assert_line --index 0 "aibox-projects: remove takes one project name"
	run aibox projects remove a b
	assert_failure 2
	assert_line --index 0 "aibox-projects: unexpected argument 'b'"
}

@test "project lock: shared with shared, exclusive alone, none once removed" {
	P=$(aibox projects path 2>/dev/null)
	run test-found project-lock "$P" sh-nb
	assert_output "locked"
	hold_lock "$P/lock" sh
	run test-found project-lock "$P" sh-nb
	assert_output "locked"
	run test-found project-lock "$P" ex-nb
	assert_failure
	assert_output "error Resource temporarily unavailable"
	release_locks
	run test-found project-lock "$P" ex-nb
	assert_output "locked"
	rm -rf "$P"
	run test-found project-lock "$P" sh
	assert_output "error No such file or directory"
}

# waits_for_lock PID: PID is blocked on a flock(2) lock (a "->" line of /proc/locks).
waits_for_lock() {
	grep -qE "^[0-9]+: -> FLOCK +ADVISORY +[A-Z]+ +$1 " /proc/locks
}

@test "project lock: a waiter let in after the project was removed is told so" {
	P=$(aibox projects path 2>/dev/null)
	hold_lock "$P/lock" ex
	test-found project-lock "$P" sh >"$T/waiter.out" 3>&- &
	waiter=$!
	wait_until 10 waits_for_lock "$waiter"
	rm -rf "$P"
	release_locks
	wait "$waiter" || true
	[ "$(cat "$T/waiter.out")" = "error No such file or directory" ]
}

@test "projects check: a good config is fine, a bad one refused with file:line:column" {
	P=$(aibox projects path 2>/dev/null)
	run aibox projects check
	assert_success
	assert_output "$P/config.yaml: fine"
	printf 'allow: []\nenv: [ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL]\n' >"$P/config.yaml"
	run --separate-stderr aibox projects check
	assert_failure 1
	assert_equal "$stderr" "$P/config.yaml:2:26: env: ANTHROPIC_BASE_URL cannot be set next to ANTHROPIC_API_KEY: aibox points it at its own port, which adds the key on the host"
	printf 'a: &x 1\nb: *x\n' >"$P/config.yaml"
	cd "$T"
	run aibox projects check my-repo
	assert_failure 1
	assert_output "$P/config.yaml:1:4: anchors and aliases are not supported"
	rm "$P/config.yaml"
	run aibox projects check my-repo
	assert_failure 2
	assert_output "aibox-projects: cannot open '$P/config.yaml': No such file or directory"
	run aibox projects check
	assert_failure 2
	assert_output --partial "not in a git checkout"
}

@test "projects path: several at once in a new checkout make one project" {
	for i in 1 2 3 4 5 6; do
		aibox projects path >"$T/out.$i" 2>/dev/null 3>&- &
	done
	wait
	[ "$(ls "$AIBOX_HOME/projects")" = my-repo ]
	for i in 1 2 3 4 5 6; do
		[ "$(cat "$T/out.$i")" = "$AIBOX_HOME/projects/my-repo" ]
	done
}

@test "projects remove: a task folder it cannot check keeps the project" {
	P=$(aibox projects path 2>/dev/null)
	mkdir "$P/tasks/20200101-000000-aaaaaa"
	not_a_lock "$P/tasks/20200101-000000-aaaaaa.lock"
	run aibox projects remove my-repo
	assert_failure 1
	assert_output "aibox-projects: cannot tell whether the tasks of project 'my-repo' run: left alone"
	assert_file_exists "$P/config.yaml"
}

@test "projects list: --json is one array with name, tasks, running, checkout and folder, checked with jq" {
	run --separate-stderr aibox projects list --json
	assert_success
	assert_output "[]"
	aibox projects path >/dev/null 2>&1
	mkdir -p "$AIBOX_HOME/projects/my-repo/tasks/20260101-100000-aaaaaa" \
		"$AIBOX_HOME/projects/my-repo/tasks/20260101-110000-bbbbbb"
	hold_lock "$AIBOX_HOME/projects/my-repo/tasks/20260101-110000-bbbbbb.lock"
	run aibox projects list --json
	assert_success
	assert_equal "$(echo "$output" | jq -c '.[0] | [.name, .tasks, .running, .checkout, .folder]')" \
		"[\"my-repo\",2,1,\"$T/My Repo!\",\"$AIBOX_HOME/projects/my-repo\"]"
	run aibox projects list --all
	assert_failure 2
	assert_line --index 0 "aibox-projects: unknown option '--all'"
}

@test "image list: --json is one array with name, built, claude_code and kernel, checked with jq" {
	export AIBOX_IMAGES=$T/images
	run aibox image list --json
	assert_success
	assert_output "[]"
	mkdir -p "$AIBOX_IMAGES/default"
	for f in vmlinuz initramfs rootfs.ext4; do echo x >"$AIBOX_IMAGES/default/$f"; done
	printf 'aibox-image 1\nname default\nbuilt 2026-12-01T18:10:20Z\nkernel 6.1.0-57-amd64 linux\nclaude-code 2.1.197\n' \
		>"$AIBOX_IMAGES/default/manifest"
	run aibox image list --json
	assert_success
	assert_equal "$(echo "$output" | jq -c '.[0] | [.name, .built, .claude_code, .kernel]')" \
		'["default","2026-12-01T18:10:20Z","2.1.197","6.1.0-57-amd64 linux"]'
}
