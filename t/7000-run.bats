#!/usr/bin/env bats
# aibox run with the real default image: the project folder and the home
# shared read-write, the command's output and exit status, and (under tmux)
# the terminal passed through: window size, Ctrl-C, and a sane terminal after
# the VM is killed from outside.  Each test boots one or two short VMs, but
# for the tests of "the piped run", which read two runs booted in setup_file.
load lib-common
load lib-vm
load lib-tls
load lib-claude
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	vm_image
	make_repo proj
	PROJ=$T/proj
	PDIR=$(cd "$PROJ" && aibox projects path)
	# the new config's env (ANTHROPIC_API_KEY) replaced by the test's own
	sed -i '/^env:$/,/^$/d' "$PDIR/config.yaml"
	printf 'env:\n  - AIBOX_T_VALUE\n  - AIBOX_T_UNSET\n' >>"$PDIR/config.yaml"
	unset AIBOX_T_UNSET
	TMUX_SOCK=$T/tmux.sock
}

teardown() {
	[ -S "${TMUX_SOCK:-}" ] && tmux -S "$TMUX_SOCK" kill-server 2>/dev/null
	if [ -s "$T/run.pid" ]; then
		kill "$(cat "$T/run.pid")" 2>/dev/null
	fi
	stop_fake_api
	common_teardown
}

# runs_gone: the run folders are removed (by aibox's cleaner, just after it
# exits) within 10 s.
runs_gone() {
	wait_until 10 runs_empty || { ls -l "$PDIR/runs" >&2; return 1; }
}

runs_empty() {
	[ -z "$(ls -A "$PDIR/runs")" ]
}

# run_piped INPUT ARGS...: aibox run without a terminal, INPUT as stdin.
run_piped() {
	local input=$1
	shift
	cd "$PROJ"
	run --separate-stderr aibox run --memory 1G "$@" <<<"$input"
	cd "$T"
}

# tmux_start [ARGS]: a 100x30 window in the project running aibox run
# --memory 1G ARGS (default: -- bash; '' for none), with the terminal's
# settings before and after, aibox's pid and exit status in $T.
tmux_start() {
	local args=${1-"-- bash"}
	cat >"$T/inner.sh" <<-SH
		cd "$PROJ"
		stty -a >"$T/stty.before"
		sh -c 'echo \$\$ >"$T/run.pid"; exec aibox run --memory 1G $args'
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
	wait_until "${2:-240}" pane_count "$1" 1 || { pane >&2; return 1; }
}

# wait_count REGEX N [SECONDS]: until the pane has N lines matching REGEX.
wait_count() {
	wait_until "${3:-30}" pane_count "$1" "$2" || { pane >&2; return 1; }
}

# pane_count REGEX N: the pane has N or more lines matching REGEX.
pane_count() {
	[ "$(pane | grep -Ec -- "$1")" -ge "$2" ]
}

# vm_size_is ROWS COLS: the shell in the VM, asked with stty size (again on
# each call, half a second apart), says ROWS COLS: a resize reaches the VM a
# moment after the window.
vm_size_is() {
	keys 'stty size' Enter
	sleep 0.5
	pane | grep -Eq -- "^$1 $2\$"
}

# tty_size_is TTY ROWS COLS: the host's terminal TTY has that size.
tty_size_is() {
	[ "$(stty -F "$1" size)" = "$2 $3" ]
}

# raw TTY: TTY is in raw mode (as aibox run sets it).
raw() {
	stty -F "$1" -a | grep -q -- ' -icanon '
}

# not_stopped PID: the process is there and not stopped (state T).
not_stopped() {
	local state
	state=$(ps -o stat= -p "$1") || return 1
	[[ "$state" != T* ]]
}

# redrawn: Claude Code's prompt is on the pane again below the line saying it
# was suspended (it sets its terminal raw again before it redraws).
redrawn() {
	pane | sed -n '/has been suspended/,$p' | grep -q 'for shortcuts'
}

# wait_file FILE [SECONDS]
wait_file() {
	wait_until "${2:-60}" test -s "$1" || { pane >&2; return 1; }
}

# The shared runs, booted once in setup_file for the tests that only read
# what they left ("run: the piped run ..."), in $S: the project $S/proj; the
# first run's stdout, stderr and status in $S/out1, $S/err1, $S/status1 ("yes"
# in $S/runs-gone1 once its run folder was removed), the second's in $S/*2.
# The first has a value in env, a skill in ~/.claude, a config mount, the
# host's API key, a git remote with a token and an unlisted subscription
# token; at its end it holds a connection to the proxy until the host has
# read the environments of aibox, QEMU, the proxy, the broker and the
# connection's aibox-connect (a line in $S/environ for each with a secret;
# their pids in $S/pids).  The second runs with skills: none.
setup_file() {
	common_setup
	export S=$T
	vm_image
	make_repo proj
	local proj=$T/proj pdir status=0 pid
	pdir=$(cd "$proj" && aibox projects path)
	# the new config's env (ANTHROPIC_API_KEY) replaced by the test's own
	sed -i '/^env:$/,/^$/d' "$pdir/config.yaml"
	printf 'env:\n  - AIBOX_T_VALUE\n  - AIBOX_T_UNSET\n' >>"$pdir/config.yaml"
	# (not exported: setup_file's exports would reach every test of the file)
	# A secret toward a loopback service (t/tls-echo, its own CA, which the proxy
	# trusts through SSL_CERT_FILE): the run's proxy intercepts, the VM trusts the task CA.
	make_test_ca "$T/ca"
	"$TOP/t/tls-echo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" \
		--port-file "$T/echo.port" --log "$S/echo.seen" 2>"$T/echo.err" &
	echo $! >"$S/echo.pid"
	wait_until 60 file_or_gone "$T/echo.port" $!
	local ep
	ep=$(cat "$T/echo.port")
	sed -i "s/^allow:\$/allow:\n  - localhost:$ep/" "$pdir/config.yaml"
	printf 'secrets:\n  - {env: RUN_SECRET, hosts: ["localhost:%s"]}\n' "$ep" >>"$pdir/config.yaml"
	local env=(AIBOX_T_VALUE='env-secret-7010, a value with spaces & "quotes"'
		ANTHROPIC_API_KEY=sk-ant-host-key-7010 RUN_TOKEN=git-token-7010
		CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-unlisted-7010 RUN_SECRET=run-secret-7010
		SSL_CERT_FILE=$T/ca/ca.pem)
	printf 'git:\n  - url: https://localhost:1/r.git\n    token: RUN_TOKEN\n' >>"$pdir/config.yaml"
	mkdir -p "$HOME/.claude/skills/greet" "$T/data"
	echo 'skill text' >"$HOME/.claude/skills/greet/SKILL.md"
	echo 'data text' >"$T/data/file"
	printf 'mounts:\n  - host: %s\n    vm: /data\n' "$T/data" >>"$pdir/config.yaml"
	cd "$proj"
	env -u AIBOX_T_UNSET "${env[@]}" aibox run --memory 1G -- sh >"$S/out1" 2>"$S/err1" <<<'id -u; id -g; echo "env=$AIBOX_T_VALUE"; echo "unset=${AIBOX_T_UNSET-none}"
echo "home=$HOME pwd=$(pwd) proxy=$HTTPS_PROXY"
echo "claude-env=$DISABLE_AUTOUPDATER $DISABLE_INSTALLATION_CHECKS $CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC ${CLAUDE_CODE_MAX_RETRIES-unset}"
curl -sS -o /dev/null -w "curl=%{http_code}\n" -H "Authorization: Bearer $RUN_SECRET" https://localhost:'"$ep"'/ok/run
node -e "fetch(process.argv[1], {headers: {Authorization: \"Bearer \" + process.env.RUN_SECRET}}).then(r => console.log(\"node=\" + r.status), e => console.log(\"node-error\", e.cause))" https://localhost:'"$ep"'/ok/node
echo "ca=$SSL_CERT_FILE secret=$RUN_SECRET"
echo to-stderr >&2
mkdir made-dir && echo from-vm >made-dir/file
echo kept >"$HOME/kept"
echo "skill=$(cat "$HOME/.claude/skills/greet/SKILL.md") data=$(cat /data/file)"
echo changed >"$HOME/.claude/skills/greet/SKILL.md" 2>/dev/null || echo skill-write-refused
touch "$HOME/.claude/skills/new" 2>/dev/null || echo skill-create-refused
echo changed >/data/file 2>/dev/null || echo data-write-refused
kill -STOP $$
echo continued-after-stop
bash -c "exec 3<>/dev/tcp/10.0.2.100/3128 && echo connected
i=0; while [ ! -e /project/.checked ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done"
exit 7' &
	pid=$!
	echo "$pid" >"$S/run.pid"
	wait_until 300 connected_or_gone "$pid" || true
	environs "$pid" "$pdir"
	touch "$proj/.checked"
	wait "$pid" || status=$?
	rm "$S/run.pid"
	echo "$status" >"$S/status1"
	PDIR=$pdir
	echo "$pdir" >"$S/pdir"
	if wait_until 10 runs_empty; then
		echo yes >"$S/runs-gone1"
	fi
	echo 'skills: none' >>"$pdir/config.yaml"
	status=0
	env -u AIBOX_T_UNSET "${env[@]}" aibox run --memory 1G -- sh >"$S/out2" 2>"$S/err2" <<<'cat "$HOME/kept"; cat /project/made-dir/file
cat "$HOME/.claude/skills/greet/SKILL.md" 2>/dev/null || echo no-skill
exit 2' || status=$?
	echo "$status" >"$S/status2"
	cd "$T"
}

teardown_file() {
	[ -s "$S/run.pid" ] && kill "$(cat "$S/run.pid")" 2>/dev/null
	[ -s "$S/echo.pid" ] && kill "$(cat "$S/echo.pid")" 2>/dev/null
	T=$S common_teardown
}

# connected_or_gone PID: the first shared run said "connected", or PID ended.
connected_or_gone() {
	grep -q connected "$S/out1" || gone "$1"
}

# environs PID PDIR: the pids of aibox run PID's helpers in $S/pids, and a
# line in $S/environ for each of them with a secret in its environment
# (/proc/PID/environ is the initial block: aibox wipes what it inherited).
environs() {
	local qemu proxy broker connect p n
	qemu=$(pgrep -P "$1" -f "$QEMU_VM")
	proxy=$(pgrep -P "$1" -f aibox-proxy)
	broker=$(pgrep -P "$1" -f aibox-broker)
	connect=$(pgrep -f "^[^ ]*/aibox-connect .*$2" | head -1)
	echo "$1 $qemu $proxy $broker $connect" >"$S/pids"
	: >"$S/environ"
	for p in $1 $qemu $proxy $broker $connect; do
		n=$(grep -caF -e sk-ant-host-key-7010 -e env-secret-7010 -e git-token-7010 \
			-e unlisted-7010 -e run-secret-7010 "/proc/$p/environ" 2>&1) || true
		[ "$n" = 0 ] ||
			echo "$n: a secret is in the environment of $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)" >>"$S/environ"
	done
}

# piped N: the shared run N's stdout as output and lines, its stderr as
# stderr and its exit code as status (as bats' run sets them); SPDIR is the
# shared project's folder.
piped() {
	output=$(cat "$S/out$1")
	stderr=$(cat "$S/err$1")
	status=$(cat "$S/status$1")
	mapfile -t lines <"$S/out$1"
	SPDIR=$(cat "$S/pdir")
	echo "$output" >&2
	echo "$stderr" >&2
}

@test "run: the piped run's command gets its stdin, and its output, stderr and exit code come back" {
	piped 1
	assert_equal "$status" 7
	assert_line "home=/home/aibox pwd=/project proxy=http://10.0.2.100:3128"
	[[ "$stderr" == *to-stderr* ]]
}

@test "run: the piped run trusts the task CA: a secret's placeholder reaches a loopback service through the proxy as its value" {
	piped 1
	assert_line "curl=200"
	assert_line "node=200" # Node's fetch: NODE_USE_ENV_PROXY, NODE_EXTRA_CA_CERTS
	assert_line --regexp '^ca=/etc/ssl/certs/ca-certificates.crt secret=aibox-secret-[0-9a-f]{32}$'
	# (Node's fetch may send its header names in lower case)
	run grep -i -E "^(GET|Authorization: Bearer)" "$S/echo.seen"
	assert_success
	assert_equal "$(printf '%s\n' "$output" | tr A-Z a-z)" "get /ok/run http/1.1
authorization: bearer run-secret-7010
get /ok/node http/1.1
authorization: bearer run-secret-7010"
	[ -s "$S/pdir" ]
	run grep -rlF run-secret-7010 "$S/proj" "$(cat "$S/pdir")"
	assert_failure 1
	assert_output ""
}

@test "run: the piped run's command runs with the host user's ids; what it writes belongs to the host user" {
	piped 1
	assert_line --index 0 "$(id -u)"
	assert_line --index 1 "$(id -g)"
	assert_equal "$(cat "$S/proj/made-dir/file")" from-vm
	assert_equal "$(stat -c %u:%g "$S/proj/made-dir" "$S/proj/made-dir/file" | sort -u)" \
		"$(id -u):$(id -g)"
	assert_equal "$(cat "$SPDIR/home/kept")" kept
	assert_equal "$(stat -c %u "$SPDIR/home/kept")" "$(id -u)"
}

@test "run: the piped run's command has the env values the config lists, and no others" {
	piped 1
	assert_line "env=env-secret-7010, a value with spaces & \"quotes\""
	assert_line "unset=none"
}

@test "run: the session has Claude Code's switches: no auto-update, no install checks, no side traffic; the task's retry count is not set" {
	piped 1
	assert_line "claude-env=1 1 1 unset"
}

@test "run: the API key, env values and git tokens are in no environment: aibox's, QEMU's, aibox-connect's, the proxy's, the broker's" {
	piped 1
	assert_line connected
	# all five were there while the command held its connection
	[ "$(wc -w <"$S/pids")" = 5 ] || { cat "$S/pids"; false; }
	run cat "$S/environ"
	assert_output ''
}

@test "run: with the key forwarded, an unlisted subscription token is not worth a word" {
	piped 1
	run ! grep -q CLAUDE_CODE_OAUTH_TOKEN "$S/err1"
}

@test "run: the piped run's skills and config mounts are readable and read-only in the VM" {
	piped 1
	assert_line "skill=skill text data=data text"
	assert_line skill-write-refused
	assert_line skill-create-refused
	assert_line data-write-refused
	assert_equal "$(cat "$S/home/.claude/skills/greet/SKILL.md")" "skill text"
	[ ! -e "$S/home/.claude/skills/new" ]
	assert_equal "$(cat "$S/data/file")" "data text"
}

@test "run: the piped run's command that stops itself is continued" {
	piped 1
	# no shell could bring it back
	assert_line continued-after-stop
}

@test "run: the piped run's run folder is removed when it ends" {
	piped 1
	assert_equal "$(cat "$S/runs-gone1" 2>/dev/null)" yes
}

@test "run: a second piped run sees the home and project as the first left them; skills: none keeps skills out" {
	piped 2
	assert_line --index 0 kept
	assert_line --index 1 from-vm
	assert_line --index 2 no-skill
}

@test "run: a second piped run's command's own exit 2 comes back as 2, aibox silent" {
	piped 2
	assert_equal "$status" 2
	[[ "$stderr" != *aibox-run* ]]
}

@test "run: a command not found exits 127, one that cannot run 126; aibox's own errors exit 125" {
	cd "$PROJ"
	run aibox run --memory 4GB -- true
	assert_equal "$status" 125
	assert_output --partial "--memory"
	run aibox run true
	assert_equal "$status" 125
	assert_output --partial usage
	run aibox run --help
	assert_success
	assert_output --partial "125 when aibox itself failed"
	run aibox run --image no-such-image -- true
	assert_equal "$status" 125
	assert_output --partial "'no-such-image' is not built"
	cd "$T"
	run aibox run -- true
	assert_equal "$status" 125
	assert_output --partial "not in a git checkout"

	# As a shell says it: 127 not found, 126 found but not runnable.
	cd "$PROJ"
	run -127 --separate-stderr aibox run --memory 1G -- no-such-command arg </dev/null
	[[ "$stderr" == *"cannot run 'no-such-command'"* ]]
	printf 'echo never\n' >not-executable
	run -126 --separate-stderr aibox run --memory 1G -- ./not-executable </dev/null
	[[ "$stderr" == *"cannot run './not-executable': Permission denied"* ]]
	refute_output --partial never
	runs_gone
}

# hold_script: $PROJ/hold.sh, which says "running" once it is the terminal's
# foreground job, then sleeps: a keystroke after "running" reaches it.
hold_script() {
	printf 'echo running\nexec sleep 300\n' >"$PROJ/hold.sh"
}

@test "run: the terminal: size, resize, Ctrl-C, exit status, stty restored" {
	hold_script
	tmux_start
	wait_pane 'aibox@aibox:/project\$ ?$'
	keys 'stty size; echo "term=$TERM"' Enter
	wait_pane '^30 100$' 20
	wait_pane '^term=xterm-256color$' 5
	tmux -S "$TMUX_SOCK" resize-window -t run -x 120 -y 40
	wait_until 30 vm_size_is 40 120
	keys 'sh hold.sh' Enter
	wait_pane '^running$' 30
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
	assert_equal "$(cat "$T/status")" 125
	diff "$T/stty.before" "$T/stty.after"
	wait_pane 'inner-done' 10
	# The run folder goes with aibox (its cleaner removes it).
	runs_gone
}

# stopped PID: the process is stopped (state T).
stopped() {
	[[ "$(ps -o stat= -p "$1")" == T* ]]
}

@test "run: under a job-control shell, SIGTSTP from outside stops aibox and fg brings it back, resized" {
	tmux -S "$TMUX_SOCK" -f /dev/null new-session -d -s run -x 100 -y 30 \
		"env TERM=xterm-256color PS1='host\\$ ' bash --norc --noprofile -i"
	tmux -S "$TMUX_SOCK" set-option -t run window-size manual
	wait_pane '^host\$ ?$' 20
	keys "stty -a >'$T/stty.before'; cd '$PROJ'; sh -c 'echo \$\$ >\"$T/run.pid\"; exec aibox run --memory 1G -- bash'; echo \"status=\$?\"" Enter
	wait_pane 'aibox@aibox:/project\$ ?$'
	local pid tty
	pid=$(cat "$T/run.pid")
	tty=$(tmux -S "$TMUX_SOCK" display-message -p -t run '#{pane_tty}')
	stty -F "$tty" -a | grep -q -- ' -icanon '
	kill -TSTP "$pid"
	wait_until 10 stopped "$pid"
	wait_pane '^\[1\]\+ +Stopped' 20
	wait_pane '^status=148$' 5
	# the shell has its terminal back, as it was before aibox run
	keys "stty -a >'$T/stty.stopped'" Enter
	wait_file "$T/stty.stopped" 20
	diff "$T/stty.before" "$T/stty.stopped"
	# resized while stopped: aibox gets no SIGWINCH then, its SIGCONT stands for one
	tmux -S "$TMUX_SOCK" resize-window -t run -x 120 -y 40
	wait_until 10 tty_size_is "$tty" 40 120
	keys fg Enter
	wait_until 10 not_stopped "$pid"
	wait_until 10 raw "$tty"
	keys 'stty size; echo "cont=$((6*7))"' Enter
	wait_pane '^cont=42$' 30
	wait_pane '^40 120$' 5
	keys 'exit 3' Enter
	wait_pane '^host\$ ?$' 60
	keys 'echo "after=$?"' Enter
	wait_pane '^after=3$' 20
	runs_gone
}

@test "run: SIGTSTP to aibox in an orphaned process group, which cannot stop, leaves the terminal raw" {
	tmux_start
	wait_pane 'aibox@aibox:/project\$ ?$'
	local pid tty
	pid=$(cat "$T/run.pid")
	tty=$(tmux -S "$TMUX_SOCK" display-message -p -t run '#{pane_tty}')
	kill -TSTP "$pid"
	# (the 10 s are the behaviour: it does not stop in them)
	run ! wait_until 10 stopped "$pid"
	stty -F "$tty" -a | grep -q -- ' -icanon '
	keys 'echo "still=$((6*7))"' Enter
	wait_pane '^still=42$' 30
	keys 'exit 4' Enter
	wait_file "$T/stty.after" 60
	assert_equal "$(cat "$T/status")" 4
	diff "$T/stty.before" "$T/stty.after"
	runs_gone
}

@test "run: Ctrl-Z stops the shell's job in the VM, not aibox; a signal's status is 128+N" {
	hold_script
	tmux_start
	wait_pane 'aibox@aibox:/project\$ ?$'
	keys 'sh hold.sh' Enter
	wait_pane '^running$' 30
	keys C-z
	# (the guest's echo of ^Z may come after bash's newline, on its line)
	local stopped='^(\^Z)?\[1\]\+ +Stopped +sh hold\.sh$'
	wait_pane "$stopped" 30
	# aibox went on: it is not stopped, and the shell in the VM answers.
	not_stopped "$(cat "$T/run.pid")"
	keys 'jobs; echo "jobs=$((6*7))"' Enter
	wait_pane '^jobs=42$' 20
	[ "$(pane | grep -Ec -- "$stopped")" -ge 2 ]
	keys fg Enter
	# bash prints the job's command, then gives it the terminal and continues it
	wait_pane '^sh hold\.sh$' 20
	keys C-c
	keys 'echo "after=$? jobs=$(jobs | wc -l)"' Enter
	wait_pane '^after=130 jobs=0$' 30
	# The shell killed by a signal: aibox exits as a shell reports it.
	keys 'kill -KILL $$' Enter
	wait_file "$T/stty.after" 60
	assert_equal "$(cat "$T/status")" 137
	diff "$T/stty.before" "$T/stty.after"
	runs_gone
}

@test "run: Ctrl-Z does not stop a program run without a shell; Ctrl-C ends it with 130" {
	printf 'echo cat-ready\nexec cat\n' >"$PROJ/cat.sh"
	tmux_start '-- sh cat.sh'
	wait_pane '^cat-ready$'
	keys one Enter
	# The terminal's echo and cat's copy.
	wait_count '^one$' 2 30
	keys C-z
	# The pty echoes ^Z (it made a SIGTSTP of it), then the line; cat copies it.
	wait_pane '^\^Z' 30
	keys two Enter
	wait_pane '^\^Ztwo$' 30
	wait_count 'two$' 2 30
	not_stopped "$(cat "$T/run.pid")"
	keys C-c
	wait_file "$T/stty.after" 60
	assert_equal "$(cat "$T/status")" 130
	diff "$T/stty.before" "$T/stty.after"
	runs_gone
}

@test "run: interactive Claude Code by default: a prompt, its reply, Ctrl-Z, and its exit status" {
	local key=sk-ant-host-key-7007
	make_test_ca "$T/ca"
	printf '%s\n' '{"turns": [{"text": "Hello from the fake model, forty-two."},
	  {"text": "Back after Ctrl-Z, forty-three."}], "require_key": "'"$key"'"}' \
		>"$T/script.json"
	start_fake_api "$T/script.json" --tls "$T/ca/server.pem" "$T/ca/server.key"
	export AIBOX_API_UPSTREAM=https://localhost:$FAKE_API_PORT AIBOX_API_CA=$T/ca/ca.pem
	export ANTHROPIC_API_KEY=$key
	# What Claude Code's first run leaves in the project's home (docs/run.md):
	# onboarding done, the project folder trusted, the placeholder key (its
	# last 20 characters) approved.
	cat >"$PDIR/home/.claude.json" <<-'JSON'
		{
		  "hasCompletedOnboarding": true,
		  "projects": { "/project": { "hasTrustDialogAccepted": true } },
		  "customApiKeyResponses": { "approved": ["he-host-adds-the-key"], "rejected": [] }
		}
	JSON
	tmux_start '--memory 2G'
	wait_pane 'for shortcuts' 300
	# The image's binary is pinned: no failed update, no warning about where a
	# native install would keep it (docs/run.md).
	run ! pane_count 'Auto-update failed|missing or broken' 1
	# Under TCG the TUI is slow: Enter only once the prompt shows the text.
	keys 'Say hello'
	wait_pane 'Say hello' 60
	keys Enter
	wait_pane 'Hello from the fake model, forty-two\.' 120
	# Ctrl-Z: Claude Code says it is suspended and stops itself, the init
	# continues it, and it redraws and takes keys again (were it left
	# waiting for a SIGCONT, the next prompt would go nowhere).
	keys C-z
	wait_until 120 redrawn || { pane >&2; false; }
	keys 'Say more'
	wait_pane 'Say more' 60
	keys Enter
	# Under TCG, Claude Code's TUI may still be redrawing after the resume (its
	# status line then changes) and once took the text but not the Enter (a full
	# run of 2026-12-06): the text shown proves the keys reach it; Enter again,
	# which on an input already sent is nothing.
	if ! wait_until 60 pane_count 'Back after Ctrl-Z, forty-three\.' 1; then
		keys Enter
	fi
	wait_pane 'Back after Ctrl-Z, forty-three\.' 120
	not_stopped "$(cat "$T/run.pid")"
	run ! pane_count 'Auto-update failed|missing or broken' 1
	keys '/exit'
	wait_pane '/exit' 60
	# the command's line in the list under the prompt: Enter picks it
	wait_pane 'Exit the CLI' 30
	keys Enter
	wait_file "$T/stty.after" 120
	assert_equal "$(cat "$T/status")" 0
	diff "$T/stty.before" "$T/stty.after"
	# The reply came through the proxy with the host's key; the VM never had it.
	grep -rqF "\"x-api-key\": \"$key\"" "$T/rec"
	grep -rqF "Say hello" "$T/rec"
	run grep -rlF "$key" "$PDIR/home"
	assert_failure
	# The session stays in the project's home, owned by the host user.
	[ -n "$(find "$PDIR/home/.claude/projects" -name '*.jsonl' -user "$(id -u)")" ]
	runs_gone
}

@test "run: no login is needed; an unlisted subscription token, or one next to the key, is warned about" {
	cd "$PROJ"
	export AIBOX_IMAGES=$T/no-images AIBOX_T_VALUE=v
	unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN
	# no login at all: it goes on (here up to the missing image), without a word of it
	run --separate-stderr aibox run -- true
	assert_equal "$status" 125
	assert_equal "$stderr" "aibox-run: the image 'default' is not built: run 'aibox image build default'"
	CLAUDE_CODE_OAUTH_TOKEN=t run --separate-stderr aibox run -- true
	assert_equal "$status" 125
	[[ "$stderr" == "aibox-run: warning: CLAUDE_CODE_OAUTH_TOKEN is set in your shell, but the env of '$PDIR/config.yaml' does not list it, so the VM does not get it"* ]]
	printf '  - CLAUDE_CODE_OAUTH_TOKEN\n' >>"$PDIR/config.yaml"
	ANTHROPIC_API_KEY=k CLAUDE_CODE_OAUTH_TOKEN=t run --separate-stderr aibox run -- true
	assert_equal "$status" 125
	[[ "$stderr" == "aibox-run: warning: ANTHROPIC_API_KEY is forwarded and CLAUDE_CODE_OAUTH_TOKEN is in the env of '$PDIR/config.yaml': "* ]]
}
