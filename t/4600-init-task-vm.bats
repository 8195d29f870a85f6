#!/usr/bin/env bats
# aibox-init's task mode in real boots of the default image: the host side is
# played by the test (test-vm restores the image's snapshot as aibox task
# does, or boots cold under AIBOX_SNAPSHOT=0; ssh runs `task` with the per-task key),
# the real Claude Code 2.1.197 in the VM talks to t/fake-api on the host
# through the guest's proxy forward (10.0.2.100:3128).  aibox-proxy is not
# used here: a minimal byte forward from the VM's proxy socket to the fake API
# stands in for it (Claude Code sends absolute-URI requests for
# 127.0.0.1:3129, which t/fake-api answers like any other).
load lib-common
load lib-vm

setup() {
	common_setup
	vm_image
	vm_share "$T/task" forced
	task_source "$T/task/start.bundle"
	mkdir res
	TIMEOUT=300
}

teardown() {
	if [ -n "${FORWARD_PID:-}" ]; then
		kill "$FORWARD_PID" 2>/dev/null
		wait "$FORWARD_PID" 2>/dev/null
	fi
	if [ -n "${FAKE_API_PID:-}" ]; then
		kill "$FAKE_API_PID" 2>/dev/null
		wait "$FAKE_API_PID" 2>/dev/null
	fi
	vm_teardown
	common_teardown
}

write_settings() {
	cat >task/settings.json <<EOF
{
  "version": 1, "id": "4600ab", "mode": "task", "model": null,
  "timeout_s": $TIMEOUT, "max_budget_usd": null,
  "git": { "name": "Task Person", "email": "task@example.com" },
  "start_commit": "$START", "branch": "aibox/task",
  "env_names": ["MY_TOKEN"], "api": "forward", "proxy": "http://10.0.2.100:3128",
  "path": "/project", "mounts": [],
  "system_prompt": "You run unattended in a VM. Commit your work."
}
EOF
}

# start_api SCRIPT_JSON: t/fake-api with that script, and the forward to it
# on $T/proxy.sock (what aibox-proxy's socket is to the VM).
start_api() {
	printf '%s\n' "$1" >api-script.json
	"$TOP/t/fake-api" --listen 127.0.0.1:0 --ready-file "$T/api.port" \
		--script "$T/api-script.json" --record "$T/rec" 2>"$T/fake-api.log" &
	FAKE_API_PID=$!
	wait_until 5 test -s "$T/api.port" || { cat "$T/fake-api.log"; return 1; }
	python3 - "$T/proxy.sock" "$(cat "$T/api.port")" <<'PY' &
import socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(16)

def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def handle(c):
    try:
        u = socket.create_connection(("127.0.0.1", port))
    except OSError:
        c.close()
        return
    t = threading.Thread(target=pipe, args=(u, c), daemon=True)
    t.start()
    pipe(c, u)
    t.join(600)
    c.close()
    u.close()

while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
PY
	FORWARD_PID=$!
	wait_until 60 test -S "$T/proxy.sock"
}

# run_vm_task PROMPT [SECRETS]: boot, run `task` over SSH with the per-task
# key; results in out.tar (unpacked in res/), progress in progress.txt.
# snap: test-vm's --snapshot: 1 (the VM restored from the image's snapshot, as
# aibox task starts it), 0 under AIBOX_SNAPSHOT=0 (a cold boot, as make
# check-cold runs the task suite; docs/image.md, "Snapshots").
snap() {
	if [ "${AIBOX_SNAPSHOT:-1}" = 0 ]; then echo 0; else echo 1; fi
}

run_vm_task() {
	printf '%s\n' "$1" >task/prompt.txt
	printf '%s' "${2:-}" >secrets.json
	[ -f task/settings.json ] && grep -q start_commit task/settings.json || write_settings
	cat >probe <<'PROBE'
. "$T/env"
vm_ssh task <"$T/secrets.json" >"$T/out.tar" 2>"$T/progress.txt"
echo "task status $?"
PROBE
	declare -f vm_ssh >env
	echo "T=$T" >>env
	export T
	run test-vm --image "$IMAGE" --share "$T/task" --proxy "$T/proxy.sock" --snapshot "$(snap)" \
		--log "$T/console.log" --listen "$T/ssh.sock" --grace-ms 60000 -- bash "$T/probe"
	if [ "$status" -ne 0 ] || ! grep -q "task status 0" <<<"$output"; then
		echo "--- test-vm"; echo "$output"; echo "--- console"; cat console.log; echo "--- progress"; cat progress.txt
	fi
	tar -xf out.tar -C res
}

names() {
	python3 - "$T/out.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], format=tarfile.USTAR_FORMAT) as tf:
    print(" ".join(m.name for m in tf if m.isreg()))
EOF
}

jget() {
	python3 - "$T/res/result.json" "$1" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)
EOF
}

@test "vm task: the real Claude Code makes a commit; the bundle clones to the start commit plus it" {
	start_api '{"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "echo hello from the vm > hello.txt && git add hello.txt && git commit -q -m \"Add hello.txt\" && printf %s \"$MY_TOKEN\" | sha256sum", "description": "commit"}}},
	  {"text": "I added hello.txt and committed it."}]}'
	run_vm_task "Add a file hello.txt and commit it." '{"env": {"MY_TOKEN": "vm-secret-77"}}'
	assert_success
	assert_line "task status 0"
	assert_equal "$(names)" "transcript.jsonl session.jsonl changes.bundle vm.log result.json"
	assert_equal "$(jget failed_step)" null
	assert_equal "$(jget claude.ended_by)" completed
	assert_equal "$(jget claude.exit_code)" 0
	assert_equal "$(jget claude.num_turns)" 2
	assert_equal "$(jget claude.last_message)" "I added hello.txt and committed it."
	assert_equal "$(jget changes)" true
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-parse got)" "$(jget end_commit)"
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
	assert_equal "$(git -C src log -1 --format='%an <%ae> %s' got)" "Task Person <task@example.com> Add hello.txt"
	assert_equal "$(git -C src show got:hello.txt)" "hello from the vm"
	run cat progress.txt
	assert_line cloning
	assert_line "claude started"
	assert_line "claude exited with 0"
	assert_line bundling
	# Claude Code's requests went through the proxy forward for 127.0.0.1:3129,
	# with the placeholder key, never the secret.
	grep -rq '"path": "http://127.0.0.1:3129/v1/messages' rec
	grep -rq 'sk-ant-aibox-placeholder' rec
	# The secret reached Claude Code's environment (its Bash tool printed
	# the hash back to "the model"), and nothing else.
	grep -rq "$(printf %s vm-secret-77 | sha256sum | cut -d' ' -f1)" rec
	run grep -rl vm-secret-77 rec out.tar progress.txt
	assert_failure
}

@test "vm task: changes left uncommitted become the aibox commit, ignored files stay out" {
	start_api '{"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": "echo new > new.txt && echo changed > README.md && echo noise > build.log; (touch /run/aibox/task/written 2>/dev/null && echo share-writable || echo share-read-only); (curl -s --noproxy \"*\" -m 5 http://1.1.1.1/ >/dev/null 2>&1 && echo net-open || echo net-closed)", "description": "edit"}}},
	  {"text": "Edited, not committed."}]}'
	# An index of another pack: the early clone fails and the session clones the bundle.
	"$TOP/t/make-repo" other 5 1 2 7 >/dev/null
	test-bundle write --idx task/start.idx other HEAD other.bundle >/dev/null
	run_vm_task "Edit some files."
	assert_success
	assert_line "task status 0"
	assert_equal "$(names)" "transcript.jsonl session.jsonl changes.bundle vm.log result.json"
	assert_equal "$(jget steps.2.status)" ok
	git -C src fetch -q "$T/res/changes.bundle" aibox/task:got
	assert_equal "$(git -C src rev-list --count "$START..got")" 1
	assert_equal "$(git -C src log -1 --format='%an <%ae> %cn <%ce>' got)" \
		"aibox <aibox@localhost> aibox <aibox@localhost>"
	run git -C src diff --name-only "$START" got
	assert_output "$(printf 'README.md\nnew.txt')"
	grep -q "the early clone failed; its lines" res/vm.log
	grep -q "the clone runs again in the session" res/vm.log
	grep -q "git clone" res/vm.log
	run cat progress.txt
	assert_line "committing leftover changes"
	# What the task saw (its Bash tool's output went back to "the model"):
	# the share is read-only, and nothing but the proxy forward answers.
	grep -rq share-read-only rec
	grep -rq net-closed rec
	assert_file_not_exists task/written
}

@test "vm task: no changes; Claude Code failing on an API error" {
	start_api '{"turns": [{"text": "Nothing needed changing."}]}'
	run_vm_task "Look around."
	assert_success
	assert_line "task status 0"
	assert_equal "$(names)" "transcript.jsonl session.jsonl vm.log result.json"
	assert_equal "$(jget changes)" false
	assert_equal "$(jget end_commit)" "$START"
	assert_equal "$(jget claude.ended_by)" completed
	run cat progress.txt
	assert_success
	refute_line "no changes"

	kill "$FORWARD_PID" "$FAKE_API_PID"
	wait "$FORWARD_PID" "$FAKE_API_PID" 2>/dev/null || true
	FORWARD_PID= FAKE_API_PID=
	rm -rf res rec proxy.sock ssh.sock api.port console.log
	mkdir res
	start_api '{"turns": [{"error": {"status": 400, "type": "invalid_request_error", "message": "scripted failure"}}]}'
	run_vm_task "Fail, please."
	assert_success
	assert_line "task status 0"
	assert_equal "$(jget claude.ended_by)" error
	assert_equal "$(jget failed_step)" claude
	assert_equal "$(jget steps.1.status)" failed
	assert_equal "$(names)" "transcript.jsonl session.jsonl vm.log result.json"
}

@test "vm task: Claude Code past its time limit is killed, result.json says timeout, results still come" {
	# The limit only has to pass: the kill, the cgroup and the results after
	# it are the same at 2 s as at 60 (Claude Code need not have asked yet).
	TIMEOUT=2
	write_settings
	start_api '{"turns": [{"stall": 600}]}'
	SECONDS=0
	run_vm_task "Work slowly."
	assert_success
	assert_line "task status 0"
	[ "$SECONDS" -lt 400 ]
	assert_equal "$(jget steps.1.status)" timeout
	assert_equal "$(jget claude.ended_by)" timeout
	assert_equal "$(jget claude.exit_code)" null
	assert_equal "$(jget failed_step)" claude
	assert_equal "$(jget steps.2.status)" ok
	assert_equal "$(jget steps.3.status)" ok
	assert_equal "$(jget changes)" false
	assert_equal "$(names)" "transcript.jsonl vm.log result.json"
	run cat progress.txt
	assert_line "claude timed out after 2 s and was stopped"
	# The step's cgroup emptied and went away after the kill.
	run grep "did not go away" res/vm.log
	assert_failure
}

# summary_script: a script that prints, for the repository it runs in, what
# a clone must share with today's (run on the host, and in the guest as the
# task's "Claude Code"): branch, commit, no remote, every object, the index,
# the files with their contents and modes, a clean status, fsck, the user.
summary_script() {
	cat <<'EOF2'
#!/bin/sh
git symbolic-ref HEAD
git rev-parse HEAD
echo "remotes: $(git remote | wc -l)"
echo "objects: $(git rev-list --all --objects | LC_ALL=C sort | sha256sum)"
echo "index: $(git ls-files -s | sha256sum)"
echo "paths: $(find . -path ./.git -prune -o -print | LC_ALL=C sort | sha256sum)"
echo "contents: $(git ls-files -z | xargs -0 sha256sum -- | sha256sum)"
echo "modes: $(git ls-files -z | xargs -0 stat -c '%A %s %n' -- | sha256sum)"
echo "status: $(git status --porcelain --ignored | wc -l)"
git fsck --full --strict --no-dangling 2>&1 && echo "fsck ok"
echo "user: $(git config user.name) <$(git config user.email)>"
EOF2
}

@test "vm task: many files with history clone through the host's start.idx as today's clone would" {
	"$TOP/t/make-repo" big 400 8 40 >/dev/null
	(
		cd big
		p=$(printf 'd%.0s' $(seq 200))
		mkdir -p "$p/$p/$p/$p"
		echo deep >"$p/$p/$p/$p/file"
		echo spaced >"with space é.txt"
		echo dash >./-dash
		printf '#!/bin/sh\necho run\n' >run.sh
		chmod +x run.sh
		ln -s run.sh link
		git add -A
		git commit -q -m "names"
	)
	START=$(git -C big rev-parse HEAD)
	# A share whose key may run any command: "Claude Code" is replaced below.
	rm -rf task hostkey hostkey.pub userkey userkey.pub
	vm_share "$T/task"
	write_settings
	test-bundle write --idx task/start.idx big HEAD task/start.bundle
	summary_script >task/summary
	# What today's clone of the same bundle holds, on the host.
	git clone -q -c user.name="Task Person" -c user.email=task@example.com task/start.bundle plain
	git -C plain remote remove origin
	expect=$(cd plain && sh "$T/task/summary")
	[[ "$expect" == *"fsck ok"* ]]
	printf 'Look.\n' >task/prompt.txt
	cat >probe <<PROBE
. "$T/env"
vm_ssh 'install -m 755 /run/aibox/task/summary /usr/local/bin/claude &&
	SSH_ORIGINAL_COMMAND=task /usr/lib/aibox/aibox-init session' </dev/null >"$T/out.tar" 2>"$T/progress.txt"
echo "task status \$?"
PROBE
	declare -f vm_ssh >env
	echo "T=$T" >>env
	export T
	run test-vm --image "$IMAGE" --share "$T/task" --log "$T/console.log" --listen "$T/ssh.sock" \
		--snapshot "$(snap)" --grace-ms 60000 -- bash "$T/probe"
	[ "$status" -eq 0 ] || { echo "$output"; cat console.log progress.txt; }
	assert_line "task status 0"
	tar -xf out.tar -C res
	assert_equal "$(jget steps.0.status)" ok
	grep -q "prepared clone: pack-" res/vm.log
	run grep -c "git clone" res/vm.log
	assert_output 0
	# PID 1 made it while the host connected (docs/init-task.md, "The early clone").
	grep -qE '^\[ *[0-9.]+\] the clone was made while the session was set up \(it ran from -[0-9.]+ s' res/vm.log
	run grep -c "git read-tree" res/vm.log
	assert_output 1
	# "Claude Code" printed the summary of /project in the guest.
	assert_equal "$(cat res/transcript.jsonl)" "$expect"
}
