# Holding flock(2) locks from a test, the way a running task or aibox run does.
#
# hold_lock FILE [ex|sh]: a background process opens FILE (creating it),
# locks it and sleeps; returns once the lock is held.  Its pid is added to
# HOLD_PIDS; release_locks (called by lock_teardown) kills exactly those.

HOLD_PIDS=()

hold_lock() {
	local file=$1 mode=${2:-ex}
	# One process: the subshell execs sleep, keeping fd 9 and its lock.
	# fd 3 is bats' own: a child holding it would stall the test run.
	(
		exec 9>>"$file" || exit 1
		flock "-${mode:0:1}" 9 || exit 1
		exec sleep 300
	) 3>&- &
	HOLD_PIDS+=($!)
	wait_until 10 locked "$file"
}

# locked FILE: another process holds a lock on FILE.
locked() {
	! flock -n -x "$1" true 2>/dev/null
}

release_locks() {
	local pid
	for pid in "${HOLD_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	HOLD_PIDS=()
	return 0
}

lock_teardown() {
	release_locks
	common_teardown
}

# task_project_setup: common_setup, a repository in $T/repo as the working
# folder, its project's folder in P and the project's tasks folder in TK.
task_project_setup() {
	common_setup
	make_repo "$T/repo"
	cd "$T/repo" || return 1
	P=$(aibox projects path 2>/dev/null)
	TK=$P/tasks
}
