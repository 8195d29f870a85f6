#!/usr/bin/env bats
# The start bundle (common/git/bundle_write.c, through t/helper/test-bundle):
# resolving --from, refusing what lacks history, the round trip, nothing added
# to the project, no hooks or programs from config, no leftovers when killed.
load lib-common
bats_require_minimum_version 1.5.0

# A project with history on two branches, a tag, an ignored file and a stash.
make_project() {
	make_repo proj
	(
		cd proj
		git switch -q -c feature
		echo "feature" >feature.txt
		git add feature.txt
		git commit -q -m "feature work"
		git switch -q main
		git tag -a -m "release one" v1 HEAD~1
		echo "ignored.log" >.gitignore
		git add .gitignore
		git commit -q -m "ignore logs"
		echo "noise" >ignored.log
		echo "uncommitted" >>README.md
		git stash -q
		echo "still uncommitted" >>README.md
	)
	mkdir -p task
}

# snapshot DIR: everything about the project that must not change.
snapshot() {
	(
		cd "$1"
		git for-each-ref --format='%(refname) %(objectname)'
		git --no-optional-locks status --porcelain --ignored
		find .git -printf '%P %y %s %T@\n' | LC_ALL=C sort
	)
}

# check_clone BUNDLE COMMIT: a fresh clone lands on aibox/task at COMMIT with its history.
check_clone() {
	local bundle=$1 commit=$2
	rm -rf clone
	git clone -q "$bundle" clone
	[ "$(git -C clone rev-parse HEAD)" = "$commit" ]
	[ "$(git -C clone symbolic-ref HEAD)" = refs/heads/aibox/task ]
	[ "$(git -C clone rev-list HEAD)" = "$(git -C proj rev-list "$commit")" ]
	git -C clone fsck --strict --no-dangling
}

@test "bundle-write: the start bundle clones to the same commit and history" {
	make_project
	run --separate-stderr test-bundle write proj HEAD task/start.bundle
	assert_success
	head=$(git -C proj rev-parse HEAD)
	assert_output "$head"
	run aibox-bundle-check --pack --ref aibox/task --ref HEAD task/start.bundle
	assert_success
	check_clone task/start.bundle "$head"
	# Only the start bundle is left in the task folder.
	[ "$(ls -A task)" = start.bundle ]
	# The stash and the other branch stay out.
	run ! git -C clone cat-file -e "$(git -C proj rev-parse stash@{0})"
	run ! git -C clone cat-file -e "$(git -C proj rev-parse feature)"
}

@test "bundle-write: the project gets no new ref and no file" {
	make_project
	# Something in the project that a careless implementation would touch.
	git -C proj gc -q
	before=$(snapshot proj)
	run test-bundle write proj HEAD task/start.bundle
	assert_success
	after=$(snapshot proj)
	diff <(echo "$before") <(echo "$after")
	[ -n "$before" ]
}

@test "bundle-write: --from a branch, a tag, a commit, stash@{0}, from a subfolder" {
	make_project
	mkdir proj/sub
	for rev in feature v1 HEAD~1 "$(git -C proj rev-parse feature)" main^{commit} "stash@{0}"; do
		want=$(git -C proj rev-parse "$rev^{commit}")
		rm -f task/start.bundle
		run --separate-stderr test-bundle write proj/sub "$rev" task/start.bundle
		assert_success
		assert_output "$want"
		check_clone task/start.bundle "$want"
	done
	# The last was the stash: its commit carries the change never committed.
	grep -q uncommitted clone/README.md
}

@test "bundle-write: the project may be a linked worktree" {
	make_project
	git -C proj worktree add -q ../wt feature
	run test-bundle write wt HEAD task/start.bundle
	assert_success
	assert_output "$(git -C proj rev-parse feature)"
	check_clone task/start.bundle "$(git -C proj rev-parse feature)"
}

@test "bundle-write: a shallow, bare or empty repository is refused" {
	make_project
	git clone -q --depth 1 "file://$T/proj" shallow
	run --separate-stderr test-bundle write shallow HEAD task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: the repository is a shallow clone, which lacks the history (git fetch --unshallow)"
	git clone -q --bare proj bare.git
	run --separate-stderr test-bundle write bare.git HEAD task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: '$T/bare.git/' is a bare repository"
	git init -q empty
	run --separate-stderr test-bundle write empty HEAD task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: the repository is empty (no commits)"
	mkdir plain
	run --separate-stderr test-bundle write plain HEAD task/start.bundle
	assert_failure 1
	assert_output ""
	[[ "$stderr" == "test-bundle: not in a git repository"* ]]
	[ "$(ls -A task)" = "" ]
}

@test "bundle-write: a revision that is not a commit is refused" {
	make_project
	git -C proj tag -a -m "a tree" treetag 'HEAD^{tree}'
	blob=$(git -C proj rev-parse HEAD:README.md)
	run --separate-stderr test-bundle write proj 'HEAD^{tree}' task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: 'HEAD^{tree}' is a tree, not a commit"
	run --separate-stderr test-bundle write proj "$blob" task/start.bundle
	assert_equal "$stderr" "test-bundle: '$blob' is a blob, not a commit"
	run --separate-stderr test-bundle write proj treetag task/start.bundle
	assert_equal "$stderr" "test-bundle: 'treetag' is a tag of a tree, not a commit"
	run --separate-stderr test-bundle write proj no-such-branch task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: unknown revision 'no-such-branch'"
	[ "$(ls -A task)" = "" ]
}

@test "bundle-write: --idx keeps the pack's index, as git index-pack makes it for the bundle's pack" {
	make_project
	run --separate-stderr test-bundle write --idx task/start.idx proj HEAD task/start.bundle
	assert_success
	assert_equal "$(ls -A task | tr '\n' ' ')" "start.bundle start.idx "
	# The bundle is what git bundle create writes, the index what index-pack makes of its pack.
	git init -q --bare plain
	echo "$T/proj/.git/objects" >plain/objects/info/alternates
	git -C plain update-ref refs/heads/aibox/task "$(git -C proj rev-parse HEAD)"
	git -C plain symbolic-ref HEAD refs/heads/aibox/task
	git -C plain bundle create -q "$T/plain.bundle" HEAD refs/heads/aibox/task
	cmp task/start.bundle plain.bundle
	off=$(python3 -c 'import sys; print(open(sys.argv[1], "rb").read(65536).index(b"\n\n") + 2)' \
		plain.bundle)
	tail -c +$((off + 1)) plain.bundle >plain.pack
	git index-pack -o plain.idx plain.pack >/dev/null
	cmp task/start.idx plain.idx
	assert_equal "$(stat -c %a task/start.idx)" 644
	check_clone task/start.bundle "$(git -C proj rev-parse HEAD)"
}

@test "bundle-write: an existing start.idx is not replaced, and no bundle is written" {
	make_project
	echo "keep me" >task/start.idx
	run --separate-stderr test-bundle write --idx task/start.idx proj HEAD task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: 'task/start.idx' already exists"
	[ "$(cat task/start.idx)" = "keep me" ]
	[ "$(ls -A task)" = start.idx ]
}

@test "bundle-write: an existing bundle is not replaced" {
	make_project
	echo "keep me" >task/start.bundle
	run --separate-stderr test-bundle write proj HEAD task/start.bundle
	assert_failure 1
	assert_equal "$stderr" "test-bundle: 'task/start.bundle' already exists"
	[ "$(cat task/start.bundle)" = "keep me" ]
}

@test "bundle-write: no hook, config program, trace or exec path of the user runs" {
	make_project
	mkdir -p evil
	for name in git git-pack-objects git-rev-list fsmonitor hook pager; do
		printf '#!/bin/sh\ntouch "%s/ran-%s"\nexit 1\n' "$T" "$name" >"evil/$name"
		chmod +x "evil/$name"
	done
	for hook in pre-auto-gc post-checkout reference-transaction post-index-change; do
		cp evil/hook "proj/.git/hooks/$hook"
	done
	git -C proj config core.fsmonitor "$T/evil/fsmonitor"
	git -C proj config core.hooksPath "$T/evil"
	git config --global core.fsmonitor "$T/evil/fsmonitor"
	git config --global core.hooksPath "$T/evil"
	git config --global core.pager "$T/evil/pager"
	# The proof that the tricks work: a plain git in the project runs them.
	GIT_EXEC_PATH=$T/evil git -C proj bundle create -q plain.bundle HEAD 2>/dev/null || true
	[ -e ran-git ] || [ -e ran-git-pack-objects ]
	rm -f ran-*
	GIT_EXEC_PATH=$T/evil GIT_TRACE=$T/trace GIT_TRACE2_EVENT=$T/trace2 \
		GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0="$T/evil/pager" \
		GIT_PAGER="$T/evil/pager" GIT_DIR="$T/proj/.git" GIT_WORK_TREE="$T/proj" \
		GIT_INDEX_FILE="$T/index" \
		run --separate-stderr test-bundle write proj HEAD task/start.bundle
	assert_success
	assert_equal "$stderr" ""
	run ls ran-* trace trace2 index
	assert_failure
	check_clone task/start.bundle "$(git -C proj rev-parse HEAD)"
}

@test "bundle-write: when git fails the message is git's and nothing is left" {
	make_project
	# Remove an object the history needs.
	blob=$(git -C proj rev-parse HEAD~1:README.md)
	git -C proj repack -q -a -d
	git -C proj cat-file -p "$blob" >/dev/null
	rm -f proj/.git/objects/pack/*.pack
	run --separate-stderr test-bundle write proj HEAD~1 task/start.bundle
	assert_failure 1
	[[ "$stderr" == "test-bundle: "* ]]
	[ "$(ls -A task)" = "" ]
}

# interrupt SIGNAL: stop a write while git runs; nothing may be left.
interrupt() {
	local sig=$1
	rm -f started
	# Stands in for git: says where it runs, then waits to be stopped.
	printf '#!/bin/sh\necho "$$ $GIT_DIR" >"%s/started"\nexec sleep 60\n' "$T" >slowgit
	chmod +x slowgit
	test-bundle write --git "$T/slowgit" proj HEAD task/start.bundle 3>&- &
	local pid=$!
	wait_until 10 test -s started
	read -r gitpid gitdir <started
	# The temporary repository exists, in the task folder, while git runs.
	[ -f "$gitdir/objects/info/alternates" ]
	[[ "$gitdir" == "$T/task/.start-bundle."* ]]
	kill "-$sig" "$pid"
	local status=0
	wait "$pid" || status=$?
	[ "$status" -eq $((128 + $(kill -l "$sig"))) ]
	[ ! -e "$gitdir" ]
	[ "$(ls -A task)" = "" ]
	# git (here: its stand-in) was stopped too.
	wait_until 5 gone "$gitpid"
}

@test "bundle-write: an interrupted write leaves no temporary repository" {
	make_project
	interrupt TERM
	interrupt HUP
	# And after that a write works.
	run test-bundle write proj HEAD task/start.bundle
	assert_success
}

@test "bundle-write: after SIGKILL only a .start-bundle folder in the task folder is left" {
	make_project
	before=$(snapshot proj)
	printf '#!/bin/sh\necho "$$ $GIT_DIR" >"%s/started"\nexec sleep 60\n' "$T" >slowgit
	chmod +x slowgit
	test-bundle write --git "$T/slowgit" proj HEAD task/start.bundle 3>&- &
	local pid=$! status=0
	wait_until 10 test -s started
	read -r gitpid gitdir <started
	kill -KILL "$pid"
	wait "$pid" || status=$?
	[ "$status" -eq 137 ]
	# git dies with its parent (PR_SET_PDEATHSIG).
	wait_until 5 gone "$gitpid"
	# What is left is where tasks clean --all finds it, and no bundle.
	[ "$(ls -A task)" = "$(basename "$gitdir")" ]
	[[ "$gitdir" == "$T/task/.start-bundle."* ]]
	# The project is untouched.
	diff <(echo "$before") <(snapshot proj)
}
