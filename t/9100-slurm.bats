#!/usr/bin/env bats
# aibox task --slurm on a real one-node Slurm cluster (docs/slurm.md): munged,
# slurmctld and slurmd started as root for this file (t/lib-slurm.bash), with
# everything under one temporary folder, and stopped at its end.  aibox runs
# as the ordinary user aibox-test, its AIBOX_HOME under the test's folder,
# which the node (this machine) sees; the VM boots under TCG on the node from
# the test user's image store, against t/fake-api as in t/5100.
#
# setup_file runs one task and watches it while it runs; the first tests only
# read what it left.  The others boot their own VMs where the boot is the
# behaviour (a cancel, three tasks queued), or none at all.

# The test user's image store (where the tests keep it), or AIBOX_IMAGES; taken
# before lib-task, whose lib-vm exports AIBOX_IMAGES as the running user's
# (root's), and kept in the environment for the tests after setup_file.
export USER_IMAGES=${USER_IMAGES:-${AIBOX_IMAGES:-/home/aibox-test/.cache/aibox/images}}
load lib-common
load lib-task
load lib-slurm
load lib-lock
bats_require_minimum_version 1.5.0

# as_user CMD...: CMD as aibox-test, with the test's environment and the key
# in ANTHROPIC_API_KEY, which only CMD's environment holds: it comes from
# $T/key, so no command line (runuser's, env's) shows it.
# With SECRETFILE set, MY_TOKEN comes from it the same way, and SSL_CERT_FILE
# (the proxy's trust for t/tls-echo) is passed when set.
as_user() {
	runuser -u aibox-test -- env HOME="$HOME" AIBOX_HOME="$AIBOX_HOME" PATH="$PATH" \
		SLURM_CONF="$SLURM_CONF" AIBOX_IMAGES="$USER_IMAGES" GIT_CONFIG_NOSYSTEM=1 \
		AIBOX_API_UPSTREAM="${AIBOX_API_UPSTREAM:-}" AIBOX_API_CA="${AIBOX_API_CA:-}" \
		${SSL_CERT_FILE:+SSL_CERT_FILE="$SSL_CERT_FILE"} SECRETFILE="${SECRETFILE:-}" \
		KEYFILE="$T/key" bash -c 'export ANTHROPIC_API_KEY=$(cat "$KEYFILE")
			[ -z "$SECRETFILE" ] || export MY_TOKEN=$(cat "$SECRETFILE")
			exec "$@"' as_user "$@"
}

# qemu_or_gone PID: a QEMU of the test's home runs, or PID has ended (for
# wait_until)
qemu_or_gone() {
	pgrep -u aibox-test -f "qemu-system.*$T/home" >/dev/null || gone "$1"
}

# slurm_task_setup: $T (the test user's) with a repository whose project sends
# its tasks to the cluster: the key listed, slurm: with the test's folder as
# shared storage (EXTRA_CONFIG, when set, goes after it).
slurm_task_setup() {
	common_setup
	chmod 755 "$T"
	make_test_ca "$T/ca"
	make_repo repo
	cd repo || return 1
	echo "$KEY" >"$T/key"
	chown -R aibox-test: "$T"
	as_user aibox projects path >/dev/null
	cat >"$AIBOX_HOME/projects/repo/config.yaml" <<EOF
env:
  - ANTHROPIC_API_KEY
slurm:
  partition: agents
  shared: [$T]
${EXTRA_CONFIG:-}
EOF
}

# A key of this run's own, in $SLURM_TOP/key (setup_file makes it; never in an
# environment): the search for it in every process must not find another
# test's, which share lib-task's KEY.
KEY=$(cat "${SLURM_TOP:-/nonexistent}/key" 2>/dev/null) || KEY=sk-ant-slurm-key-unset

# one_commit [PORT]: the agent's whole work, one commit (the API script); with
# PORT, first a request to t/tls-echo there with the secret MY_TOKEN's placeholder.
one_commit() {
	local probe=
	[ -z "${1:-}" ] || probe="curl -sS -o /dev/null -H \\\"Authorization: Bearer \$MY_TOKEN\\\" https://localhost:$1/ok; "
	printf '%s' '{"turns": [
  {"tool_use": {"name": "Bash", "input": {"command": "'"$probe"'id -u > uid.txt && git add uid.txt && git commit -q -m \"Add uid.txt\"", "description": "commit"}}},
  {"text": "I added uid.txt."}], "require_key": "'"$KEY"'"}'
}

setup_file() {
	[ "$(id -u)" = 0 ] || return 0
	[ -z "$(slurm_why_not)" ] || return 0
	export SLURM_TOP
	SLURM_TOP=$(mktemp -d /tmp/aibox-slurm.XXXXXX)
	chmod 755 "$SLURM_TOP"
	KEY=sk-ant-slurm-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$KEY" >"$SLURM_TOP/key")
	# Room for two tasks of 1G at once (docs/slurm.md: the VM's memory + 512M each).
	slurm_start "$SLURM_TOP/cluster" 3072
	export SLURM_CONF
	runuser -u aibox-test -- env HOME=/home/aibox-test PATH="$PATH" AIBOX_IMAGES="$USER_IMAGES" \
		aibox image build \
		>/dev/null 2>"$SLURM_TOP/image-build.log" || {
		cat "$SLURM_TOP/image-build.log" >&2
		return 1
	}

	# The shared task: run, and watched while its VM runs.  It has a secret
	# (docs/config.md, "secrets"), which the node's proxy swaps in toward a
	# t/tls-echo on this machine.
	export SHARED_T
	slurm_task_setup
	SHARED_T=$T
	"$TOP/t/tls-echo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" \
		--port-file "$T/echo.port" --log "$T/echo.seen" 2>"$T/echo.err" &
	echo $! >"$SLURM_TOP/echo.pid"
	wait_until 60 file_or_gone "$T/echo.port" $!
	printf 'allow: ["localhost:%s"]\nsecrets:\n  - {env: MY_TOKEN, hosts: ["localhost:%s"]}\n' \
		"$(cat "$T/echo.port")" "$(cat "$T/echo.port")" >>"$AIBOX_HOME/projects/repo/config.yaml"
	(umask 077 && echo "secret-of-$KEY" >"$T/secret")
	chown aibox-test: "$T/secret"
	api "$(one_commit "$(cat "$T/echo.port")")"
	echo "$FAKE_API_PID" >"$SLURM_TOP/fake-api.pid"
	SECRETFILE=$T/secret SSL_CERT_FILE=$T/ca/ca.pem \
		as_user aibox task --slurm --memory 1G --cpus 1 --timeout 10m "Add uid.txt" \
		>"$T/out" 2>"$T/err" &
	local pid=$!
	# (neither within 5 minutes: the tests show what the task did)
	wait_until 300 qemu_or_gone "$pid" || true
	# While the VM runs: every process on the node, and their environments.
	ps -eo pid,args >"$T/ps-during"
	grep -lF -f "$T/key" -f "$T/secret" /proc/[0-9]*/environ 2>/dev/null >"$T/key-environ" || true
	grep -lF -f "$T/key" -f "$T/secret" /proc/[0-9]*/cmdline 2>/dev/null >"$T/key-cmdline" || true
	ls "$(dirname "$(task_dir | head -1)")" >"$T/folder-during" 2>&1 || true
	wait "$pid" && echo 0 >"$T/status" || echo $? >"$T/status"
	scontrol show job >"$T/scontrol" 2>&1
	stop_fake_api
	cd /
}

teardown_file() {
	[ -n "${SLURM_TOP:-}" ] || return 0
	[ -f "$SLURM_TOP/fake-api.pid" ] && kill "$(cat "$SLURM_TOP/fake-api.pid")" 2>/dev/null
	[ -f "$SLURM_TOP/echo.pid" ] && kill "$(cat "$SLURM_TOP/echo.pid")" 2>/dev/null
	slurm_stop "$SLURM_TOP/cluster"
	rm -rf "$SLURM_TOP"
	[ -z "${SHARED_T:-}" ] || { chmod -R u+rwX "$SHARED_T"; rm -rf "$SHARED_T"; }
}

setup() {
	[ "$(id -u)" = 0 ] || skip "runs as root: t/run runs the root family (t/9*.bats) as root"
	local why
	why=$(slurm_why_not)
	[ -z "$why" ] || skip "$why"
}

teardown() {
	# a detached task's job (and the job that kept the node full) outlives aibox
	[ -z "${FILLER:-}" ] || scancel "$FILLER"
	if [ -n "${DETACHED:-}" ]; then
		scancel -u aibox-test
		wait_until 60 no_jobs
	fi
	if [ -n "${T:-}" ] && [ "$T" != "${SHARED_T:-}" ]; then
		task_teardown
	fi
}

# no_jobs [NAME]: the test user has no job (named NAME) in Slurm's queue.
no_jobs() {
	[ -z "$(squeue -h -u aibox-test ${1:+-n "$1"})" ]
}

# shared: the shared task's folder and files.
shared() {
	T=$SHARED_T
	AIBOX_HOME=$T/home/.aibox
	HOME=$T/home
	dir=$(task_dir)
	id=${dir: -6}
	[ -n "$dir" ] || { cat "$T/err" >&2; false; }
}

@test "slurm: a task with --slurm runs in a VM on the node, its changes checked and fetched" {
	shared
	[ "$(cat "$T/status")" = 0 ] || show
	assert_equal "$(cat "$T/status")" 0
	assert_equal "$(cat "$T/out")" "$dir"
	run cat "$T/err"
	assert_output --partial "aibox[$id]: submitted as the Slurm job aibox-$(basename "$dir")"
	# a node without KVM (no vmx or svm) says so as a task on one host does
	if ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
		assert_output --partial "aibox[$id]: no KVM here: the VM runs under TCG, much slower"
	fi
	assert_output --partial "aibox[$id]: the VM connected to localhost:3129"
	assert_output --partial "aibox[$id]: Claude Code exited with 0"
	assert_output --partial "vm[$id]: | I added uid.txt."
	refute_output --partial "srun"
	# QEMU ran under the job (the node), not under the submitting aibox-task.
	grep -q "slurmstepd" "$T/ps-during"
	fetch=$(grep -A1 'fetch them with' "$T/err" | tail -1 | sed 's/^.*]:  *//')
	[[ "$fetch" == "git fetch "* ]]
	cd "$T/repo"
	as_user bash -c "$fetch"
	branch=aibox/task-$(basename "$dir")
	assert_equal "$(as_user git log -1 --format=%s "$branch")" "Add uid.txt"
	assert_equal "$(as_user git show "$branch:uid.txt")" 1000
	# the node's phases and the submitter's, in one aibox.log
	run cat "$dir/aibox.log"
	assert_line --regexp '^queue [0-9.]+s '
	assert_line --regexp '^boot [0-9.]+s$'
	assert_line --regexp '^slurm [0-9.]+s$'
	assert_line --regexp '^check [0-9.]+s$'
	assert_line --regexp '^total [0-9.]+s exit 0$'
	# the node took the secrets out of the folder; the status it left was read
	[ ! -e "$dir/slurm.secrets" ]
	[ -s "$dir/slurm.status" ]
	run pgrep -f "$dir"
	assert_failure
}

@test "slurm: the job asks for the task's CPUs, its memory + 512M and its timeout + 36 minutes" {
	shared
	run grep -A40 "JobName=aibox-$(basename "$dir")" "$T/scontrol"
	assert_success
	assert_output --regexp 'JobState=COMPLETED'
	assert_output --regexp 'NumCPUs=1 '
	assert_output --regexp 'MinMemoryNode=1.50G '
	assert_output --regexp 'TimeLimit=00:46:00'
	assert_output --regexp 'Partition=agents'
}

@test "slurm: the key is in no Slurm state or log, no job record and no process's environment or command line" {
	shared
	# While the VM ran: no environment and no command line held it, the
	# proxy's included (it reads the key from a pipe).
	assert_equal "$(cat "$T/key-environ")" ""
	assert_equal "$(cat "$T/key-cmdline")" ""
	run grep -F "$KEY" "$T/scontrol"
	assert_failure
	run grep -rlF "$KEY" "$SLURM_TOP/cluster"
	assert_failure
	run grep -rlF "$KEY" "$dir"
	assert_failure
	# and the proxy did forward it: the fake API saw it
	grep -rqF "\"x-api-key\": \"$KEY\"" "$T/rec"
}

@test "slurm: a secret of the config reaches the node's proxy, which swaps it in; it is in no Slurm state, log or process" {
	shared
	local secret
	secret=$(cat "$T/secret")
	# the service got the value, never the placeholder
	run grep -F "Authorization: Bearer" "$T/echo.seen"
	assert_success
	assert_output "Authorization: Bearer $secret"
	run grep -c aibox-secret- "$T/echo.seen"
	assert_output 0
	run grep -F "secrets=MY_TOKEN" "$dir/proxy.log"
	assert_success
	# key-environ and key-cmdline looked for it too (empty: test above)
	run grep -rlF "$secret" "$T/scontrol" "$SLURM_TOP/cluster" "$dir"
	assert_failure
	assert_output ""
}

@test "slurm: a folder not on storage the node sees is refused before anything is submitted" {
	EXTRA_CONFIG= slurm_task_setup
	# the config without slurm.shared: $T is on a local filesystem
	sed -i '/^  shared:/d' "$AIBOX_HOME/projects/repo/config.yaml"
	jobs_before=$(scontrol show job -o | grep -c JobId)
	run --separate-stderr as_user aibox task --slurm "Add uid.txt"
	assert_equal "$status" 2
	assert_equal "$output" ""
	[[ "$stderr" == *"is not on storage the Slurm nodes see"* ]]
	[[ "$stderr" == *"slurm: shared:"* ]]
	assert_equal "$(task_dir)" ""
	assert_equal "$(scontrol show job -o | grep -c JobId)" "$jobs_before"
}

@test "slurm: a job Slurm refuses (no such partition) is a failed start: exit 2, its reason, no secrets left" {
	slurm_task_setup
	sed -i 's/^  partition: agents$/  partition: nosuch/' "$AIBOX_HOME/projects/repo/config.yaml"
	run --separate-stderr as_user aibox task --slurm "Add uid.txt"
	assert_equal "$status" 2
	dir=$(task_dir)
	assert_equal "$output" "$dir"
	[[ "$stderr" == *"srun: error: "*"artition"* ]]
	[[ "$stderr" == *"aibox[${dir: -6}]: the Slurm job did not start (srun exit 1; Slurm's reason above)"* ]]
	[ ! -e "$dir/slurm.secrets" ]
	[ ! -e "$dir/start.bundle" ]
	run tail -1 "$dir/aibox.log"
	assert_output --regexp '^total [0-9.]+s exit 2$'
}

# start_cancellable: a task submitted in the background (TASK_PID is runuser's,
# SUBMITTER the submitting aibox-task's), once its QEMU runs on the node;
# NODE_PIDS every process of its job step (from the step's freezer cgroup),
# QEMU and aibox-proxy among them.
start_cancellable() {
	local job cg
	slurm_task_setup
	api "$(one_commit)"
	as_user aibox task --slurm --memory 1G --cpus 1 "Add uid.txt" >"$T/out" 2>"$T/err" &
	TASK_PID=$!
	wait_until 300 qemu_or_gone "$TASK_PID"
	dir=$(task_dir)
	[ -n "$dir" ] || { show; return 1; }
	# the front aibox execs aibox-task: "aibox-task --slurm ..." (the node's has a path);
	# its relay of the node's stderr is a fork of it, with the same line: the one
	# whose parent is not another of them
	local p all
	all=$(pgrep -u aibox-test -f "^aibox-task --slurm ")
	SUBMITTER=
	for p in $all; do
		grep -qx "$(ps -o ppid= -p "$p" | tr -d ' ')" <<<"$all" || SUBMITTER=$p
	done
	[ -n "$SUBMITTER" ] || fail "no submitter among: $all"
	job=$(squeue -h -n "aibox-$(basename "$dir")" -o %i)
	cg=/sys/fs/cgroup/freezer/slurm_$(hostname -s)/uid_$(id -u aibox-test)/job_$job
	NODE_PIDS=$(cat "$cg"/step_*/cgroup.procs)
	ps -o comm= -p "$(echo $NODE_PIDS | tr ' ' ,)" >"$T/node-comms"
	grep -q '^qemu-system' "$T/node-comms"
	grep -qx 'aibox-proxy' "$T/node-comms"
	grep -qx 'aibox-task' "$T/node-comms"
}

# node_gone: no process of the job step (NODE_PIDS) runs (a detached worker's
# zombie may wait a moment for PID 1) and none naming the folder is left, nor
# the secrets.
node_gone() {
	local p
	for p in $NODE_PIDS; do
		wait_until 30 ended "$p"
	done
	run pgrep -f "$dir"
	assert_failure
	[ ! -e "$dir/slurm.secrets" ]
}

# ended_cancelled: the submitter's exit and what the node left.
ended_cancelled() {
	wait "$TASK_PID" && status=0 || status=$?
	TASK_PID=
	assert_equal "$status" 1
	run cat "$T/err"
	assert_output --partial "the task did not finish: the VM was stopped by"
	refute_output --partial "fetch them with"
	node_gone
	[ ! -s "$dir/result.json" ]
	# the task's lock is free: an ended task to aibox tasks clean
	run flock -n "$dir.lock" true
	assert_success
}

@test "slurm: scancel ends QEMU, the proxy and every helper on the node, and leaves a task that did not finish" {
	start_cancellable
	as_user scancel --name "aibox-$(basename "$dir")"
	ended_cancelled
}

@test "slurm: Ctrl-C of the submitting aibox ends the job's QEMU, proxy and helpers, and leaves a task that did not finish" {
	start_cancellable
	kill -INT "$SUBMITTER"
	ended_cancelled
	run cat "$T/err"
	assert_output --partial "the task did not finish: the VM was stopped by SIGINT"
}

# any_alive PID...: whether one of them still runs.
any_alive() {
	local p
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && return 0
	done
	return 1
}

@test "slurm: three tasks submitted at once all finish, Slurm running two at a time within the node's memory" {
	slurm_task_setup
	# The least work an agent can do: one answer, no tool, no changes.
	api '{"turns": [{"text": "Nothing to do."}], "require_key": "'"$KEY"'"}'
	# Three are the fewest that check what is checked: one more than the
	# node's two, so the third must wait in the queue (a missing cap runs all
	# three at once); its round runs one VM where a fourth would add a second.
	local i pids=() running max=0 pending=0 mem
	for i in $(seq 3); do
		as_user aibox task --slurm --memory 1G --cpus 1 --timeout 10m "task $i" \
			>"$T/out$i" 2>"$T/err$i" &
		pids+=($!)
	done
	TASK_PIDS=${pids[*]}
	# While they run: never more than two jobs running, never more memory
	# allocated than the node has, and the rest waiting in the queue.
	while any_alive "${pids[@]}"; do
		running=$(squeue -h -u aibox-test -t R | wc -l)
		[ "$running" -le "$max" ] || max=$running
		[ "$(squeue -h -u aibox-test -t PD | wc -l)" -eq 0 ] || pending=1
		mem=$(scontrol show node -o | sed -n 's/.*AllocMem=\([0-9]*\).*/\1/p')
		[ "$mem" -le 3072 ] || { echo "AllocMem=$mem" >>"$T/over"; }
		sleep 1
	done
	for i in $(seq 3); do
		wait "${pids[$((i - 1))]}" && echo 0 >"$T/status$i" || echo $? >"$T/status$i"
	done
	TASK_PIDS=
	for i in $(seq 3); do
		[ "$(cat "$T/status$i")" = 0 ] || show "$T/err$i"
		assert_equal "$(cat "$T/status$i")" 0
		grep -q 'aibox\[.*\]: no changes' "$T/err$i"
	done
	assert_equal "$(task_dir | wc -l)" 3
	assert_equal "$max" 2
	assert_equal "$pending" 1
	[ ! -e "$T/over" ]
	run pgrep -u aibox-test -f "$T/home"
	assert_failure
}

# shown STATE ID: aibox tasks show ID says the task is STATE (for wait_until).
shown() {
	as_user aibox tasks show "$2" 2>/dev/null | grep -q "^task $2, .*: $1\$"
}

@test "slurm: a detached task returns at once with its folder, is queued, then checked on the host by show --wait and fetched" {
	slurm_task_setup
	DETACHED=1
	api "$(one_commit)"
	# the node full, so that the task's job waits in the queue
	FILLER=$(sbatch --parsable --mem=3072 --cpus-per-task=2 --job-name=filler --output=/dev/null \
		--wrap "sleep 600")
	run --separate-stderr as_user aibox task --slurm --detach --memory 1G --cpus 1 --timeout 10m \
		"Add uid.txt"
	assert_success
	dir=$(task_dir)
	id=${dir: -6}
	assert_equal "$output" "$dir"
	[[ "$stderr" == *"aibox[$id]: submitted as the Slurm job aibox-$(basename "$dir") (job id "* ]]
	job=$(cut -d' ' -f1 "$dir/slurm.job")
	# it returned while its job waits, the secrets in the folder for the node
	assert_equal "$(squeue -h -j "$job" -o %T)" PENDING
	assert_equal "$(stat -c %a "$dir/slurm.secrets")" 600
	[ ! -e "$dir/summary.json" ]
	run as_user aibox tasks list
	assert_success
	assert_output --regexp "$id +queued"
	run as_user aibox tasks show "$id"
	assert_success
	assert_line "task $id, $(basename "$dir"): queued"
	refute_output --partial "fetch"
	run as_user aibox tasks clean
	assert_success
	assert_output --partial "left 1 running task alone"
	[ -e "$dir/start.bundle" ]
	# the node free: the job runs, holding the task's lock, then show checks it here
	scancel "$FILLER"
	FILLER=
	wait_until 120 shown running "$id"
	# "running" is squeue's word for the job, which starts before the node's
	# aibox-task takes the lock (docs/slurm.md, "The task's lock"): wait for it
	wait_until 60 locked "$dir.lock"
	# show --wait waits for the job's end, checks it, and exits as the task did
	run as_user timeout 1200 aibox tasks show --wait "$id"
	assert_success
	assert_line "task $id, $(basename "$dir"): finished"
	assert_output --partial "Claude Code exited with 0"
	assert_output --partial "I added uid.txt."
	fetch=$(echo "$output" | grep -A1 'fetch them with' | tail -1 | sed 's/^.*]:  *//')
	[[ "$fetch" == "git fetch "* ]]
	cd "$T/repo"
	as_user bash -c "$fetch"
	branch=aibox/task-$(basename "$dir")
	assert_equal "$(as_user git log -1 --format=%s "$branch")" "Add uid.txt"
	# the node's lines went to slurm.out; the host's check ended aibox.log
	run cat "$dir/slurm.out"
	assert_output --partial "vm[$id]: claude exited with 0"
	run cat "$dir/aibox.log"
	assert_line --regexp '^queue [0-9.]+s '
	assert_line --regexp '^boot [0-9.]+s$'
	assert_line --regexp '^check [0-9.]+s$'
	assert_line --regexp '^total [0-9.]+s exit 0$'
	[ ! -e "$dir/slurm.secrets" ]
	run grep -rlF "$KEY" "$dir" "$SLURM_TOP/cluster"
	assert_failure
	run pgrep -f "$dir"
	assert_failure
}

@test "slurm: a detached task scancelled early in its boot leaves no process on the node and a task that did not finish" {
	slurm_task_setup
	DETACHED=1
	api "$(one_commit)"
	run --separate-stderr as_user aibox task --slurm --detach --memory 1G --cpus 1 "Add uid.txt"
	assert_success
	dir=$output
	id=${dir: -6}
	job=$(cut -d' ' -f1 "$dir/slurm.job")
	wait_until 300 pgrep -u aibox-test -f "qemu-system.*$T/home"
	cg=/sys/fs/cgroup/freezer/slurm_$(hostname -s)/uid_$(id -u aibox-test)/job_$job
	NODE_PIDS=$(cat "$cg"/step_*/cgroup.procs)
	ps -o comm= -p "$(echo $NODE_PIDS | tr ' ' ,)" >"$T/node-comms"
	grep -q '^qemu-system' "$T/node-comms"
	grep -qx 'aibox-task' "$T/node-comms"
	run as_user aibox tasks show "$id"
	assert_success
	assert_line "task $id, $(basename "$dir"): running"
	as_user scancel "$job"
	wait_until 60 no_jobs "aibox-$(basename "$dir")"
	# list and show only read: ended, not yet checked; show --wait checks it here
	run as_user aibox tasks show "$id"
	assert_success
	assert_line "task $id, $(basename "$dir"): unchecked"
	run as_user aibox tasks show --wait "$id"
	assert_equal "$status" 1
	# scancel ends the node's aibox-task before or after it writes its record
	assert_line --regexp "^task $id, $(basename "$dir"): (killed|not finished)\$"
	assert_line --regexp "the task did not finish: (the VM was stopped by SIG[A-Z]+|the job on the Slurm node ended without its status)\$"
	refute_output --partial "fetch them with"
	node_gone
}

@test "slurm: a detached task Slurm refuses (no such partition) is a failed start: exit 2, no job, no secrets left" {
	slurm_task_setup
	sed -i 's/^  partition: agents$/  partition: nosuch/' "$AIBOX_HOME/projects/repo/config.yaml"
	run --separate-stderr as_user aibox task --slurm --detach "Add uid.txt"
	assert_equal "$status" 2
	dir=$(task_dir)
	assert_equal "$output" "$dir"
	[[ "$stderr" == *"sbatch: error: "*"artition"* ]]
	[[ "$stderr" == *"aibox[${dir: -6}]: the Slurm job did not start (sbatch exit 1; Slurm's reason above)"* ]]
	run no_jobs
	assert_success
	[ ! -e "$dir/slurm.secrets" ]
	[ ! -e "$dir/slurm.job" ]
	[ ! -e "$dir/start.bundle" ]
	run as_user aibox tasks show "${dir: -6}"
	assert_success
	assert_line "task ${dir: -6}, $(basename "$dir"): failed to start"
}
