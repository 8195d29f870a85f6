#!/usr/bin/env bats
# The files and arguments of aibox task --slurm (common/task/slurm.h, docs/slurm.md),
# without a cluster: slurm.secrets (0600, taken once, strict), slurm.status
# (untrusted, bounded), the shared-storage check, the job's options.
# t/9100-slurm.bats runs them against a real cluster.
load lib-common
load lib-lock
load lib-detached

teardown() { lock_teardown; }

@test "slurm files: the secrets file is 0600, read back whole, and gone once taken" {
	mkdir task
	run test-slurm secrets-write task sk-key 'GH=tok' '{"A":"b"}' $'-----BEGIN\nkey\n' blob
	assert_success
	assert_equal "$(stat -c %a task/slurm.secrets)" 600
	run test-slurm secrets-take task
	assert_success
	assert_line "key=sk-key"
	assert_line "tokens=GH=tok"
	assert_line 'env={"A":"b"}'
	assert_line "user_key=-----BEGIN"
	assert_line "host_blob=blob"
	[ ! -e task/slurm.secrets ]
	# the config's secrets and the subscription's token, each with its placeholder
	ph1=aibox-secret-0123456789abcdef0123456789abcdef
	ph2=aibox-secret-fedcba9876543210fedcba9876543210
	test-slurm secrets-write task k t e u h "$ph1 v a l
$ph2 w
" "$ph1 sk-ant-oat01-x
"
	run test-slurm secrets-take task
	assert_success
	assert_line "secret $ph1 v a l"
	assert_line "secret $ph2 w"
	assert_line "oauth $ph1 sk-ant-oat01-x"
	refute_line --partial "refused"
	for bad in "aibox-secret-0123 v
" "$ph1
" "$ph1 
" "$ph1 v" "${ph1^^} v
" "$ph1 v"$'\t'"x
" "x$ph1 v
"; do
		test-slurm secrets-write task k t e u h "$bad" ""
		run test-slurm secrets-take task
		assert_success
		assert_line "secret pairs refused"
		refute_line --partial "secret aibox"
	done
	# a second take finds nothing: the node's "not on shared storage"
	run test-slurm secrets-take task
	assert_failure
	assert_output --partial "error 2: cannot open 'task/slurm.secrets'"
	# the file is made anew, never over one that is there
	test-slurm secrets-write task a b c d e
	run test-slurm secrets-write task a b c d e
	assert_failure
	assert_output --partial "error 17: cannot create"
}

@test "slurm files: a secrets file that is not 0600, or not whole, or has a field twice is refused and still removed" {
	mkdir task
	test-slurm secrets-write task k t e u h
	chmod 640 task/slurm.secrets
	run test-slurm secrets-take task
	assert_failure
	assert_output --partial "is not a plain file of mode 0600 of ours"
	[ ! -e task/slurm.secrets ]
	bad() {
		printf "$1" >task/slurm.secrets
		chmod 600 task/slurm.secrets
		run test-slurm secrets-take task
		assert_failure
		assert_output --partial "is not a secrets file of aibox"
		[ ! -e task/slurm.secrets ]
	}
	bad 'aibox-slurm-secrets 1\nkey 1\nk\n'
	bad 'aibox-slurm-secrets 2\nkey 1\nk\ntokens 0\n\nenv 0\n\nuser_key 0\n\nhost_blob 0\n\n'
	bad 'aibox-slurm-secrets 1\nkey 1\nk\nkey 1\nk\ntokens 0\n\nenv 0\n\nuser_key 0\n\nhost_blob 0\n\n'
	bad 'aibox-slurm-secrets 1\nkey 5\nk\ntokens 0\n\nenv 0\n\nuser_key 0\n\nhost_blob 0\n\n'
	bad 'aibox-slurm-secrets 1\nkey 99999999999999999999\nk\n'
	bad 'aibox-slurm-secrets 1\nkey 1\nk\ntokens 0\n\nenv 0\n\nuser_key 0\n\nhost_blob 0\n\nmore'
	ln -s /etc/passwd task/slurm.secrets
	run test-slurm secrets-take task
	assert_failure
	assert_output --partial "cannot open"
}

@test "slurm files: the node's status round-trips, and a hostile one is refused" {
	test-slurm status-write 1 0 12.5 30.25 "" '{"version":1}' "" >st.json
	run test-slurm status-parse st.json
	assert_success
	assert_line "session_ok=1 stopped=0 boot_s=12.500 session_s=30.250 have_report=1"
	assert_line 'report={"version":1}'
	test-slurm status-write 0 1 1 2 "the VM was stopped by a signal" - "no record" >st.json
	run test-slurm status-parse st.json
	assert_success
	assert_line "session_ok=0 stopped=1 boot_s=1.000 session_s=2.000 have_report=0"
	assert_line "why=the VM was stopped by a signal"
	assert_line "report_why=no record"
	refuse() {
		printf '%s' "$1" >st.json
		run test-slurm status-parse st.json
		assert_failure
		assert_output --partial "$2"
	}
	ok='"version":1,"session_ok":true,"stopped":false,"boot_s":1,"session_s":2,"report":null,"report_why":""'
	refuse '[1]' "is not a JSON object"
	refuse "{$ok,\"why\":\"\",\"why\":\"x\"}" "is not a JSON object: line 1: duplicate object key near '\"why\"'"
	# jansson's reason quotes the node's bytes: printable ASCII only
	refuse "{$ok,\"a"$'\xc2\x9b'"2J\":1,\"a"$'\xc2\x9b'"2J\":2}" "duplicate object key near '\"a??2J\"'"
	refute_output --partial $'\xc2\x9b'
	refuse "{${ok/\"version\":1/\"version\":2},\"why\":\"\"}" "'version' is out of range"
	refuse "{${ok/\"session_ok\":true/\"session_ok\":1},\"why\":\"\"}" "'session_ok' is not true or false"
	refuse "{${ok/\"boot_s\":1/\"boot_s\":-1},\"why\":\"\"}" "'boot_s' is out of range"
	refuse "{$ok,\"why\":\"a\\u0000b\"}" "is not allowed without JSON_ALLOW_NUL"
	refuse "{$ok,\"why\":\"$(head -c 4097 /dev/zero | tr '\0' x)\"}" "'why' is over 4096 bytes"
	refuse "{$ok}" "slurm.status: 'why' is missing"
	refuse "{$ok,\"why\":5}" "slurm.status: 'why' is not a string"
	head -c $((8 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >st.json
	run test-slurm status-parse st.json
	assert_failure
	assert_output --partial "slurm.status is over 8388608 bytes"
}

@test "slurm files: a folder is shared when under slurm.shared, else not on a local filesystem" {
	mkdir -p a/b/c ab
	run test-slurm shared a/b/c
	assert_failure
	assert_output --partial "error 18: '$T/a/b/c' is not on storage the Slurm nodes see"
	run test-slurm shared a/b/c "$T/a"
	assert_success
	run test-slurm shared a/b/c "$T/a/"
	assert_success
	run test-slurm shared a/b/c /
	assert_success
	# a prefix of the name is not a parent folder
	run test-slurm shared ab "$T/a"
	assert_failure
	assert_output --partial "error 18: '$T/ab' is not on storage the Slurm nodes see"
	# the shared folder through a link counts as the folder
	ln -s "$T/a" link
	run test-slurm shared a/b "$T/link"
	assert_success
	run test-slurm shared nosuch
	assert_failure
	assert_output --partial "error 2: cannot look at 'nosuch'"
}

@test "slurm files: the job asks for one task, the CPUs, the memory + 512M, the timeout + 36 minutes, then the config's options" {
	run test-slurm job-args aibox-x 4096 2 3600000 - -
	assert_success
	assert_output "--job-name=aibox-x
--nodes=1
--ntasks=1
--cpus-per-task=2
--mem=4608M
--time=96"
	# a partial minute counts whole
	run test-slurm job-args aibox-x 1024 1 60001 agents team --qos=low --time=5
	assert_output "--job-name=aibox-x
--nodes=1
--ntasks=1
--cpus-per-task=1
--mem=1536M
--time=38
--partition=agents
--account=team
--qos=low
--time=5"
}

@test "slurm files: sbatch's job id is read, and slurm.job holds the id and the start commit or is refused" {
	run test-slurm job-id $'4242\n'
	assert_output "id=4242"
	run test-slurm job-id $'17;cluster\n'
	assert_output "id=17"
	for bad in '' $'\n' 4242 $'x1\n' $'12 \n' $'1\n2\n' $'123456789012345678901\n'; do
		run test-slurm job-id "$bad"
		assert_failure
		assert_output error
	done
	mkdir task
	c=0123456789abcdef0123456789abcdef01234567
	test-slurm job-write task 4242 "$c"
	assert_equal "$(cat task/slurm.job)" "4242 $c"
	run test-slurm job-read task
	assert_output "id=4242 start=$c"
	# never over one that is there
	run test-slurm job-write task 1 "$c"
	assert_failure
	assert_output "test-slurm: cannot write 'task/slurm.job': File exists"
	bad() {
		printf "$1" >task/slurm.job
		run test-slurm job-read task
		assert_failure
		assert_output "error 22"
	}
	bad "4242 $c"
	bad "4242 ${c^^}\n"
	bad "4242  $c\n"
	bad "x $c\n"
	bad "4242 ${c}0\n"
	bad "4242 $c\nmore\n"
	rm task/slurm.job
	ln -s /etc/passwd task/slurm.job
	run test-slurm job-read task
	assert_output "error 22"
	rm task/slurm.job
	run test-slurm job-read task
	assert_output "error 2"
}

@test "slurm files: --detach is only for a task on Slurm, and never with --json" {
	no_vm_project
	run --separate-stderr aibox task --detach "Do it"
	assert_equal "$status" 2
	assert_equal "$output" ""
	[[ "$stderr" == *"--detach: only for a task on Slurm (--slurm, or the config's slurm:)"* ]]
	[[ "$stderr" == *"usage: aibox task"* ]]
	run --separate-stderr aibox task --slurm --detach --json "Do it"
	assert_equal "$status" 2
	[[ "$stderr" == *"--detach and --json: a detached task's record is 'aibox tasks show --json TASK'"* ]]
	[ ! -e "$AIBOX_HOME/projects/repo/tasks" ] || [ -z "$(ls "$AIBOX_HOME/projects/repo/tasks")" ]
}

# no_cluster: every Slurm command fails at once, as where there is no cluster.
# An empty configuration does that; a missing one makes each command retry for
# 60 s before it fails (the same failure, a minute later).
no_cluster() {
	: >"$T/no-slurm.conf"
	export SLURM_CONF=$T/no-slurm.conf
}

@test "slurm files: a detached task whose job Slurm cannot be asked about is queued, never ended, and left alone by clean" {
	detached_folder
	# no cluster here: squeue fails (or is not installed)
	no_cluster
	run aibox tasks list
	assert_success
	assert_output --regexp "$ID +queued"
	run --separate-stderr aibox tasks show "$ID"
	assert_success
	assert_line "task $ID, $(basename "$DIR"): queued"
	assert_line --partial "cannot read all of it: its Slurm job: "
	assert_line "its Slurm job waits in the queue: its results are checked here once it has ended"
	refute_output --partial "fetch"
	run aibox tasks list --json
	assert_success
	assert_output --partial '"state": "queued"'
	run aibox tasks clean
	assert_success
	assert_output --partial "left 1 running task alone"
	[ -e "$DIR/start.bundle" ]
	[ ! -e "$DIR/summary.json" ]
}

@test "slurm files: a detached task whose node took the secrets and let go of the lock is unchecked to list and show, and checked once by show --wait" {
	detached_folder
	no_cluster
	rm "$DIR/slurm.secrets"
	# list and show only read: the job ended, and how is not known here yet
	run aibox tasks list
	assert_success
	assert_output --regexp "$ID +unchecked "
	run aibox tasks list --json
	assert_success
	assert_output --partial '"state": "unchecked"'
	run --separate-stderr aibox tasks show "$ID"
	assert_success
	assert_line "task $ID, $(basename "$DIR"): unchecked"
	assert_line "its Slurm job has ended: 'aibox tasks show --wait $ID' checks its results here"
	refute_output --partial "fetch them with"
	[ ! -e "$DIR/summary.json" ]
	run cat "$DIR/aibox.log"
	assert_success
	refute_output --partial "total "
	# the node ran and ended without its status (killed): no Slurm is asked
	run --separate-stderr aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	assert_line "task $ID, $(basename "$DIR"): not finished"
	assert_output --partial "the job on the Slurm node ended without its status"
	refute_output --partial "fetch them with"
	[ -s "$DIR/summary.json" ]
	run tail -1 "$DIR/aibox.log"
	assert_output --regexp '^overhead '
	run grep -c '^total .* exit 1$' "$DIR/aibox.log"
	assert_output 1
	# once: a second show, with or without --wait, reads the record
	run aibox tasks show "$ID"
	assert_success
	assert_line "task $ID, $(basename "$DIR"): not finished"
	run aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	run grep -c '^total ' "$DIR/aibox.log"
	assert_output 1
	run aibox tasks clean
	assert_success
	assert_output --partial "removed"
	[ ! -e "$DIR/start.bundle" ]
}

@test "slurm files: a detached task not yet checked cannot be continued: it is still running" {
	detached_folder
	no_cluster
	run --separate-stderr aibox task --continue "$ID" "More"
	assert_equal "$status" 2
	[[ "$stderr" == *"task '$(basename "$DIR")' is still running: continue it once it has ended"* ]]
	[ ! -e "$DIR/summary.json" ]
}

@test "slurm files: aibox tasks show --wait waits while the task runs, then shows it and exits as the task did" {
	detached_folder
	no_cluster
	rm "$DIR/slurm.secrets"
	hold_lock "$DIR.lock"
	run timeout 3 aibox tasks show --wait "$ID"
	assert_equal "$status" 124
	assert_output ""
	release_locks
	run --separate-stderr aibox tasks show --wait "$ID"
	assert_equal "$status" 1
	assert_line "task $ID, $(basename "$DIR"): not finished"
	# without --wait, showing is all it says
	run aibox tasks show "$ID"
	assert_success
}

# fake_sbatch STATUS: an sbatch first on PATH that writes its arguments, one a
# line, to $T/sbatch.args and answers as `sbatch --parsable` does (exit STATUS).
fake_sbatch() {
	mkdir -p "$T/fake-bin"
	printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s"\n[ %s = 0 ] || { echo "sbatch: error: refused" >&2; exit %s; }\necho "4711;main"\n' \
		"$T/sbatch.args" "$1" "$1" >"$T/fake-bin/sbatch"
	chmod +x "$T/fake-bin/sbatch"
}

@test "slurm files: a detached submit gives sbatch the node's command line and writes slurm.job; a refused one leaves no secrets" {
	no_vm_project
	printf 'slurm:\n  shared: [%s]\n' "$AIBOX_HOME" >>"$cfg"
	fake_sbatch 0
	export ANTHROPIC_API_KEY=sk-ant-test
	run --separate-stderr aibox task --slurm --detach --timeout 90m --memory 1G --cpus 1 "Do it"
	assert_success
	DIR=$output
	assert_equal "$(basename "$(dirname "$DIR")")" tasks
	[[ "$stderr" == *"submitted as the Slurm job aibox-$(basename "$DIR") (job id 4711)"* ]]
	run cat "$DIR/slurm.job"
	assert_success
	assert_output "4711 $(git rev-parse HEAD)"
	run cat "$T/sbatch.args"
	assert_success
	assert_line "--chdir=$DIR"
	assert_line "--output=slurm.out"
	assert_line "--wrap=exec $BUILD/aibox-task --slurm-node $DIR --memory=1024M --cpus=1 --timeout=5400000ms --detach"
	[ -e "$DIR/slurm.secrets" ]
	[ -e "$DIR/config.yaml" ]
	[ ! -e "$DIR/summary.json" ]
	# sbatch refuses: a task that failed to start, with Slurm's words, its secrets gone
	fake_sbatch 3
	run --separate-stderr aibox task --slurm --detach "Do it"
	assert_equal "$status" 2
	[[ "$stderr" == *"sbatch: error: refused"* ]]
	[[ "$stderr" == *"the Slurm job did not start (sbatch exit 3; Slurm's reason above)"* ]]
	run find "$AIBOX_HOME/projects/repo/tasks" -name slurm.secrets
	assert_success
	assert_output "$DIR/slurm.secrets"
}

# fake_sbatch_each: an sbatch first on PATH that answers each submit with a
# job id of its own (its pid) and keeps its arguments in $T/sbatch.args.PID.
fake_sbatch_each() {
	mkdir -p "$T/fake-bin"
	printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s.$$"\necho "$$;main"\n' "$T/sbatch.args" >"$T/fake-bin/sbatch"
	chmod +x "$T/fake-bin/sbatch"
}

@test "slurm files: a detached group submits one job an attempt, is listed queued, and show --wait GROUP checks and shows each" {
	no_vm_project
	printf 'slurm:\n  shared: [%s]\n' "$AIBOX_HOME" >>"$cfg"
	fake_sbatch_each
	no_cluster
	export ANTHROPIC_API_KEY=sk-ant-test
	tasks=$AIBOX_HOME/projects/repo/tasks
	run --separate-stderr aibox task --slurm --detach --attempts 2 "Do it"
	assert_success
	assert_equal "${#lines[@]}" 2
	dirs=$(printf '%s\n' "${lines[@]}" | sort)
	gid=$(cat "${lines[0]}/group")
	[[ "$stderr" == *"aibox[$gid]: group $gid: 2 attempts submitted"* ]] || fail "$stderr"
	# one job an attempt, each with its own folder, id and start bundle
	assert_equal "$(ls "$T"/sbatch.args.* | wc -l)" 2
	for d in $dirs; do
		assert_equal "$(cat "$d/group")" "$gid"
		run cat "$d/slurm.job"
		assert_success
		assert_output --regexp "^[0-9]+ $(git rev-parse HEAD)$"
		assert_file_exists "$d/start.bundle"
		grep -qx -- "--chdir=$d" "$T"/sbatch.args.* || fail "no job for $d"
	done
	run ls -A "$tasks"
	refute_output --partial ".group-"
	# listed: both queued, of the one group
	run aibox tasks list
	assert_success
	assert_equal "$(grep -c ' queued ' <<<"$output")" 2
	run aibox tasks list --json
	assert_success
	run python3 -c 'import json,sys; print(sorted((t["group"], t["state"]) for t in json.load(sys.stdin)))' <<<"$output"
	assert_success
	assert_output "[('$gid', 'queued'), ('$gid', 'queued')]"
	# both jobs ended (their nodes took the secrets), killed before their status
	rm "$tasks"/*/slurm.secrets
	run --separate-stderr aibox tasks show --wait "$gid"
	assert_equal "$status" 1
	for d in $dirs; do
		assert_line "task ${d: -6}, $(basename "$d"): not finished"
		assert_file_exists "$d/summary.json"
	done
	assert_equal "$(grep -c 'the job on the Slurm node ended without its status' <<<"$output")" 2
	assert_line "group $gid: 0 of 2 attempts finished; aibox counted 0.000000 USD for them all"
	# checked once: again, as JSON, from the records
	run --separate-stderr aibox tasks show --wait --json "$gid"
	assert_equal "$status" 1
	run python3 -c 'import json,sys; print(sorted((o["folder"], o["state"], o["record"]["group"]) for o in json.load(sys.stdin)))' <<<"$output"
	assert_success
	assert_output "$(python3 -c 'import sys; print(sorted((d, "not finished", sys.argv[1]) for d in sys.argv[2:]))' "$gid" $dirs)"
	for d in $dirs; do
		run grep -c '^total ' "$d/aibox.log"
		assert_output 1
	done
	# without --wait, the group's id still asks for one attempt
	run --separate-stderr aibox tasks show "$gid"
	assert_failure 2
	[[ "$stderr" == *"'$gid' is the group of 2 attempts, give one of them:"* ]] || fail "$stderr"
}

@test "slurm files: a group on Slurm without --detach runs one srun an attempt and waits for them all" {
	no_vm_project
	printf 'slurm:\n  shared: [%s]\n' "$AIBOX_HOME" >>"$cfg"
	# an srun that runs the node's command line here, after its own options
	printf '#!/bin/sh\necho "$$" >>"%s/srun.pids"\nwhile [ $# -gt 0 ]; do case $1 in -*) shift;; *) break;; esac; done\nexec "$@"\n' "$T" >"$T/fake-bin/srun"
	chmod +x "$T/fake-bin/srun"
	export ANTHROPIC_API_KEY=sk-ant-test
	run --separate-stderr aibox task --slurm --attempts 2 "Do it"
	assert_failure 1
	assert_equal "${#lines[@]}" 2
	assert_equal "$(wc -l <"$T/srun.pids")" 2
	gid=$(cat "${lines[0]}/group")
	[[ "$stderr" == *"aibox[$gid]: group $gid: 0 of 2 attempts finished; aibox counted 0.000000 USD for them all"* ]] || fail "$stderr"
	for d in "${lines[@]}"; do
		[[ "$stderr" == *"aibox[${d: -6}]: submitted as the Slurm job aibox-$(basename "$d")"* ]] || fail "$stderr"
		assert_file_exists "$d/slurm.status"
		assert_file_not_exists "$d/slurm.secrets"
		run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["group"], r["state"])' "$d/summary.json"
		assert_success
		assert_output "$gid not finished"
	done
	run ls -A "$AIBOX_HOME/projects/repo/tasks"
	refute_output --partial ".group-"
}

# node_srun < BODY: a Slurm project whose srun runs BODY (sh, $id the task's
# id) in place of the node, then fails as a job that did not start
node_srun() {
	no_vm_project
	printf 'slurm:\n  shared: [%s]\n' "$AIBOX_HOME" >>"$cfg"
	{
		printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --slurm-node ] && dir=$2; shift; done\n'
		printf 'id=$(basename "$dir" | tail -c 7)\n'
		cat
		printf 'exit 1\n'
	} >"$T/fake-bin/srun"
	chmod +x "$T/fake-bin/srun"
	export ANTHROPIC_API_KEY=sk-ant-test
}

@test "slurm files: a task on Slurm without --detach keeps 16 MiB of the node's VM lines in its stderr when a file, as a local task" {
	# an srun whose node sends 28 MiB of the VM's lines, as the node's aibox-task formats them
	node_srun <<-'EOF'
		echo "12:00:00 aibox[$id]: the node's own line" >&2
		yes "12:00:00 vm[$id]: $(head -c 100 /dev/zero | tr '\0' y)" | head -c 24M >&2
		# and 4 MiB of empty ones (as the node writes an empty line of the VM's)
		yes "12:00:00 vm[$id]: " | head -c 4M >&2
		printf "\\n12:00:01 aibox[%s]: the node's last line\\n" "$id" >&2
	EOF
	rc=0
	aibox task --slurm "Do it" >/dev/null 2>"$T/err.txt" || rc=$?
	assert_equal "$rc" 2
	size=$(stat -c %s "$T/err.txt")
	[ "$size" -le $(((16 << 20) + 8192)) ] || fail "the file has $size bytes"
	[ "$size" -ge $((15 << 20)) ] || fail "the file has $size bytes"
	run grep -c "aibox\[[0-9a-f]*\]: the VM's lines past 16 MiB are left out of this output (a file)$" "$T/err.txt"
	assert_output 1
	# the node's own lines and srun's reason still come after the cap
	run grep -c "the node's \(own\|last\) line$" "$T/err.txt"
	assert_output 2
	run tail -n 1 "$T/err.txt"
	assert_output --partial "the Slurm job did not start"
	# on a pipe its reader is there: all of them
	aibox task --slurm "Do it" 2>&1 >/dev/null | wc -c >"$T/count" || true
	[ "$(cat "$T/count")" -gt $((28 << 20)) ] || fail "the pipe got $(cat "$T/count") bytes"
}

@test "slurm files: a task on Slurm without --detach cuts the node's VM lines to the terminal's width, as a local task" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	# the node's line is padded so that the terminal's wrap would start a row with a made-up aibox line
	node_srun <<-'EOF'
		echo "12:00:00 vm[$id]: $(head -c 59 /dev/zero | tr '\0' x)12:00:00 aibox[$id]: git fetch /evil aibox/task:ok" >&2
	EOF
	script -qc 'stty cols 80; aibox task --slurm "Do it" 2>&1 >/dev/null' /dev/null </dev/null | tr -d '\r' >"$T/rows" || true
	# the VM's line in pieces of at most 80 columns, each with the VM's prefix
	run grep -c '^[0-9:]* vm\[[0-9a-f]*\]: ' "$T/rows"
	assert_output 2
	run awk '/ vm\[/ && length($0) > 80' "$T/rows"
	assert_output ''
	run grep -c 'git fetch /evil' "$T/rows"
	assert_output 1
	grep -q '^[0-9:]* vm\[[0-9a-f]*\]: .*git fetch /evil' "$T/rows"
}

@test "slurm files: a task on Slurm stopped by SIGTERM cancels its job and names the signal" {
	no_vm_project
	printf 'slurm:\n  shared: [%s]\n' "$AIBOX_HOME" >>"$cfg"
	# an srun that waits; the scancel aibox runs on a stop ends it
	printf '#!/bin/sh\necho "$$" >"%s/srun.pid"\nexec sleep 60\n' "$T" >"$T/fake-bin/srun"
	printf '#!/bin/sh\necho "$@" >>"%s/scancel.args"\nkill "$(cat "%s/srun.pid")"\n' "$T" "$T" >"$T/fake-bin/scancel"
	chmod +x "$T/fake-bin/srun" "$T/fake-bin/scancel"
	export ANTHROPIC_API_KEY=sk-ant-test
	for sig in TERM; do
		aibox task --slurm "Do it" >"$T/out" 2>"$T/err" &
		pid=$!
		wait_until 30 test -s "$T/srun.pid" || fail "no srun: $(cat "$T/err")"
		kill -"$sig" "$pid"
		rc=0
		wait "$pid" || rc=$?
		assert_equal "$rc" 1
		d=$(cat "$T/out")
		run grep -c -- "--name=aibox-$(basename "$d")" "$T/scancel.args"
		assert_output 1
		run python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["state"] + ": " + r["why"])' "$d/summary.json"
		assert_success
		assert_output "not finished: the VM was stopped by SIG$sig"
		run grep -F "aibox[${d: -6}]: the task did not finish: the VM was stopped by SIG$sig" "$T/err"
		assert_success
		run aibox tasks list
		assert_success
		assert_line --regexp "^${d: -6} +killed "
	done
}
