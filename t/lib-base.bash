# The suite's helpers that need no bats: lib-common loads it for every test,
# and the benches under bench/ source it (`. t/lib-base.bash`), as they do
# lib-tls.bash and lib-claude.bash, whose helpers call these.  Nothing here
# may call a bats function (run, skip, assert_*, load).

# wait_until SECONDS CMD...: run CMD (a command or a function) until it
# succeeds; return 1, which fails the test, with a line on stderr naming CMD,
# once SECONDS (a whole number) have passed without.  It polls every 0.02 s
# at first, then every 0.2 s.  The suite's one way to wait for something: no
# fixed sleeps and no loops of its own.  (The suite has no factor for slow
# machines: the deadlines are generous for TCG under load.)
wait_until() {
	local secs=$1 start n=0
	shift
	start=${EPOCHREALTIME/./}
	until "$@"; do
		if ((${EPOCHREALTIME/./} - start >= secs * 1000000)); then
			echo "wait_until: '$*' did not succeed within $secs s" >&2
			return 1
		fi
		((n++ < 25)) && sleep 0.02 || sleep 0.2
	done
}

# ready_or_gone FILE PID: FILE has its "ready ..." line, or PID has ended
# (what a helper started with --ready-fd does first).
ready_or_gone() {
	grep -q '^ready ' "$1" 2>/dev/null || gone "$2"
}

# file_or_gone FILE PID: FILE is not empty, or PID has ended.
file_or_gone() {
	[ -s "$1" ] || gone "$2"
}

# gone PID...: none of the PIDs is running (for wait_until; a zombie counts
# as running until it is reaped, which bash does at once for its children).
gone() {
	local p
	for p; do
		kill -0 "$p" 2>/dev/null && return 1
	done
	return 0
}

# ended PID: PID has exited: it is gone, or a zombie waiting for its reaper
# (a detached worker's is PID 1, which may reap it a moment later).
ended() {
	kill -0 "$1" 2>/dev/null || return 0
	[ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ]
}

# task_source BUNDLE: $T/src, a repository of three commits with *.log ignored,
# START its HEAD, and BUNDLE made from it as aibox-task makes start.bundle: HEAD
# a symref to aibox/task, both at START, written from a bare repository
# ($T/empty) that borrows src's objects.
task_source() {
	make_repo src
	printf '*.log\n' >src/.gitignore
	git -C src add .gitignore
	git -C src commit -q -m "ignore logs"
	START=$(git -C src rev-parse HEAD)
	git init -q --bare empty
	echo "$T/src/.git/objects" >empty/objects/info/alternates
	git -C empty update-ref refs/heads/aibox/task "$START"
	git -C empty symbolic-ref HEAD refs/heads/aibox/task
	git -C empty bundle create -q "$1" HEAD refs/heads/aibox/task
}

# make_repo DIR: a git repository with two commits.
make_repo() {
	local dir=$1
	git init -q "$dir"
	(
		cd "$dir" || exit 1
		echo "hello" >README.md
		git add README.md
		git commit -q -m "first"
		echo "world" >>README.md
		git commit -q -am "second"
	)
}
