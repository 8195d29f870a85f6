#!/usr/bin/env bats
# aibox run with the real default image: the project folder and the home
# shared read-write, the command's output and exit status, and (under tmux)
# the terminal passed through: window size, Ctrl-C, and a sane terminal after
# the VM is killed from outside.  Each test boots one or two short VMs.
load lib-common
load lib-vm
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	vm_image
	make_repo proj
	PROJ=$T/proj
	PDIR=$(cd "$PROJ" && aibox projects path)
	printf 'env:\n  - AIBOX_T_VALUE\n  - AIBOX_T_UNSET\n' >>"$PDIR/config.yaml"
	unset AIBOX_T_UNSET
	TMUX_SOCK=$T/tmux.sock
}

teardown() {
	[ -S "${TMUX_SOCK:-}" ] && tmux -S "$TMUX_SOCK" kill-server 2>/dev/null
	if [ -s "$T/run.pid" ]; then
		kill "$(cat "$T/run.pid")" 2>/dev/null
	fi
	common_teardown
}

# runs_gone: the run folders are removed (by aibox's cleaner, just after it exits).
runs_gone() {
	local i
	for i in $(seq 40); do
		[ -z "$(ls -A "$PDIR/runs")" ] && return 0
		sleep 0.25
	done
	ls -l "$PDIR/runs" >&2
	return 1
}

# run_piped INPUT ARGS...: aibox run without a terminal, INPUT as stdin.
run_piped() {
	local input=$1
	shift
	cd "$PROJ"
	run --separate-stderr aibox run --memory 1G "$@" <<<"$input"
	cd "$T"
}

# tmux_start: a 100x30 window in the project running aibox run -- bash, with
# the terminal's settings before and after, aibox's pid and exit status in $T.
tmux_start() {
	cat >"$T/inner.sh" <<-SH
		cd "$PROJ"
		stty -a >"$T/stty.before"
		sh -c 'echo \$\$ >"$T/run.pid"; exec aibox run --memory 1G -- bash'
		echo \$? >"$T/status"
		stty -a >"$T/stty.after"
		echo inner-done
		exec sleep 600
	SH
	tmux -S "$TMUX_SOCK" -f /dev/null new-session -d -s run -x 100 -y 30 \
		"env TERM=xterm-256color PS1='vm\\$ ' bash --norc --noprofile $T/inner.sh"
	tmux -S "$TMUX_SOCK" set-option -t run window-size manual
}

pane() {
	tmux -S "$TMUX_SOCK" capture-pane -p -t run -S -200
}

keys() {
	tmux -S "$TMUX_SOCK" send-keys -t run "$@"
}

# wait_pane REGEX [SECONDS]: until the pane shows a line matching REGEX.
wait_pane() {
	local i
	for i in $(seq $((${2:-240} * 4))); do
		pane | grep -Eq -- "$1" && return 0
		sleep 0.25
	done
	echo "pane never showed: $1" >&2
	pane >&2
	return 1
}

# wait_file FILE [SECONDS]
wait_file() {
	local i
	for i in $(seq $((${2:-60} * 4))); do
		[ -s "$1" ] && return 0
		sleep 0.25
	done
	echo "no $1" >&2
	pane >&2
	return 1
}

@test "run: piped command, its output, status and env; files belong to the host user" {
	export AIBOX_T_VALUE='a value with spaces & "quotes"'
	run_piped 'id -u; id -g; echo "env=$AIBOX_T_VALUE"; echo "unset=${AIBOX_T_UNSET-none}"
echo "home=$HOME pwd=$(pwd) proxy=$HTTPS_PROXY"
echo to-stderr >&2
mkdir made-dir && echo from-vm >made-dir/file
echo kept >"$HOME/kept"
exit 7' -- sh
	echo "$output" >&2
	echo "$stderr" >&2
	assert_equal "$status" 7
	assert_line --index 0 "$(id -u)"
	assert_line --index 1 "$(id -g)"
	assert_line "env=$AIBOX_T_VALUE"
	assert_line "unset=none"
	assert_line "home=/home/aibox pwd=/project proxy=http://10.0.2.100:3128"
	[[ "$stderr" == *to-stderr* ]]
	assert_equal "$(cat "$PROJ/made-dir/file")" from-vm
	assert_equal "$(stat -c %u:%g "$PROJ/made-dir" "$PROJ/made-dir/file" | sort -u)" \
		"$(id -u):$(id -g)"
	runs_gone
	assert_equal "$(cat "$PDIR/home/kept")" kept
	assert_equal "$(stat -c %u "$PDIR/home/kept")" "$(id -u)"

	# A second run sees the home as the first one left it.
	run_piped 'cat "$HOME/kept"; cat /project/made-dir/file' -- sh
	assert_success
	assert_line --index 0 kept
	assert_line --index 1 from-vm
}

@test "run: a command that does not exist exits 127; a bad option is a usage error" {
	cd "$PROJ"
	run aibox run --memory 4GB -- true
	assert_equal "$status" 2
	assert_output --partial "--memory"
	run aibox run true
	assert_equal "$status" 2
	assert_output --partial usage
	cd "$T"
	run aibox run -- true
	assert_equal "$status" 2
	assert_output --partial "not in a git checkout"

	run_piped '' -- no-such-command arg
	assert_equal "$status" 127
	[[ "$stderr" == *"cannot run 'no-such-command'"* ]]
	runs_gone
}

@test "run: the terminal: size, resize, Ctrl-C, exit status, stty restored" {
	tmux_start
	wait_pane 'aibox@aibox:/project\$ ?$'
	keys 'stty size; echo "term=$TERM"' Enter
	wait_pane '^30 100$' 20
	wait_pane '^term=xterm-256color$' 5
	tmux -S "$TMUX_SOCK" resize-window -t run -x 120 -y 40
	sleep 1
	keys 'stty size' Enter
	wait_pane '^40 120$' 20
	keys 'sleep 300' Enter
	sleep 3
	keys C-c
	keys 'echo "after=$? alive-$((6*7))"' Enter
	wait_pane '^after=130 alive-42$' 30
	keys 'exit 5' Enter
	wait_file "$T/stty.after" 60
	assert_equal "$(cat "$T/status")" 5
	# The window was resized meanwhile: the rest must be as before.
	diff <(sed 's/rows [0-9]*; columns [0-9]*;//' "$T/stty.before") \
		<(sed 's/rows [0-9]*; columns [0-9]*;//' "$T/stty.after")
	grep -q 'rows 40; columns 120;' "$T/stty.after"
}

@test "run: the terminal is sane after the VM is killed from outside" {
	tmux_start
	wait_pane 'aibox@aibox:/project\$ ?$'
	keys 'stty size' Enter
	wait_pane '^30 100$' 20
	local qemu
	qemu=$(ps -o pid=,comm= --ppid "$(cat "$T/run.pid")" | awk '$2 ~ /^qemu/ { print $1 }')
	[ -n "$qemu" ]
	kill -KILL "$qemu"
	wait_file "$T/stty.after" 60
	assert_equal "$(cat "$T/status")" 2
	diff "$T/stty.before" "$T/stty.after"
	wait_pane 'inner-done' 10
	# The run folder goes with aibox (its cleaner removes it).
	runs_gone
}
