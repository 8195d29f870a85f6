#!/usr/bin/env bats
# common/task/session_mend.c through t/helper/test-session: the messages of the
# transcript that a session file lacks, added as Claude Code's own entries
# (t/5017 has the same through aibox task --continue, t/5110 with the real
# Claude Code).
bats_require_minimum_version 1.5.0
load lib-common

SID=0b6c3f8e-1d2a-4c5b-9e7f-8a9b0c1d2e3f
# U1 ... U6: uuids, each its digit repeated.
for i in 1 2 3 4 6; do
	printf -v "U$i" '%s-%s-4%s-8%s-%s' "$i$i$i$i$i$i$i$i" "$i$i$i$i" "$i$i$i" "$i$i$i" "$i$i$i$i$i$i$i$i$i$i$i$i"
done

setup() {
	common_setup
	# The session: the prompt, then an attachment (the end of the main chain).
	cat >session <<-EOF
		{"type":"user","uuid":"$U1","parentUuid":null,"timestamp":"2026-01-01T10:00:01.000Z","sessionId":"$SID","message":{"role":"user","content":"go"}}
		{"type":"attachment","uuid":"$U6","parentUuid":"$U1","timestamp":"2026-01-01T10:00:00.500Z","sessionId":"$SID"}
	EOF
	# The transcript: the whole run, none of it in the session.
	cat >transcript <<-EOF
		{"type":"system","subtype":"init","session_id":"$SID"}
		{"type":"assistant","message":{"role":"assistant","content":"a"},"parent_tool_use_id":null,"session_id":"$SID","uuid":"$U2"}
		{"type":"user","message":{"role":"user","content":"r"},"parent_tool_use_id":null,"session_id":"$SID","uuid":"$U3","timestamp":"2026-01-01T10:00:09.000Z"}
		{"type":"assistant","message":{"role":"assistant","content":"b"},"session_id":"$SID","uuid":"$U4"}
	EOF
}
teardown() { common_teardown; }

# entry TYPE CONTENT UUID PARENT TIME: the line session_mend() writes.
entry() {
	printf '{"parentUuid":"%s","isSidechain":false,"type":"%s","message":{"role":"%s","content":"%s"},"uuid":"%s","timestamp":"%s","sessionId":"%s"}\n' \
		"$4" "$1" "$1" "$2" "$3" "$5" "$SID"
}

@test "session mend: a run the session has none of is added whole, chained to its end, each with its own time or the latest" {
	run --separate-stderr test-session mend whole session transcript
	assert_success
	[ "$stderr" = "added 3" ]
	assert_equal "$output" "$(cat session
		entry assistant a "$U2" "$U6" 2026-01-01T10:00:01.000Z
		entry user r "$U3" "$U2" 2026-01-01T10:00:09.000Z
		entry assistant b "$U4" "$U3" 2026-01-01T10:00:09.000Z)"
	# Mended again, it lacks nothing.
	echo "$output" >mended
	run --separate-stderr test-session mend whole mended transcript
	[ "$stderr" = "added 0" ]
	cmp mended <(echo "$output")
}

@test "session mend: the transcript's end adds only what follows a message the session has" {
	run --separate-stderr test-session mend tail session transcript
	assert_success
	[ "$stderr" = "added 0" ]
	assert_equal "$output" "$(cat session)"
	entry assistant a "$U2" "$U6" 2026-01-01T10:00:01.000Z >>session
	run --separate-stderr test-session mend tail session transcript
	[ "$stderr" = "added 2" ]
	assert_equal "$(echo "$output" | tail -2)" "$(
		entry user r "$U3" "$U2" 2026-01-01T10:00:09.000Z
		entry assistant b "$U4" "$U3" 2026-01-01T10:00:09.000Z)"
}

@test "session mend: a session without a main chain or a time to join gets nothing" {
	# A subagent's entries alone: no main chain.
	printf '{"type":"assistant","uuid":"%s","isSidechain":true,"timestamp":"2026-01-01T10:00:01.000Z","sessionId":"%s"}\n' \
		"$U1" "$SID" >session
	run --separate-stderr test-session mend whole session transcript
	[ "$stderr" = "added 0" ]
	assert_equal "$output" "$(cat session)"
	# A main chain without a time.
	printf '{"type":"user","uuid":"%s","sessionId":"%s"}\n' "$U6" "$SID" >session
	run --separate-stderr test-session mend whole session transcript
	[ "$stderr" = "added 0" ]
	assert_equal "$output" "$(cat session)"
	# Hostile timestamps are no time either.
	printf '{"type":"user","uuid":"%s","timestamp":"\\u001b[2J","sessionId":"%s"}\n' "$U1" "$SID" >session
	run --separate-stderr test-session mend whole session transcript
	[ "$stderr" = "added 0" ]
}

@test "session mend: a transcript line of more JSON values than the bound ends the appending, unparsed" {
	# Between U3 and U4 a message of 12 MiB of empty objects, under the
	# line's cap: four million values, which jansson would hold in about 900 MB.
	python3 - transcript "$SID" <<-'PY'
		import sys
		lines = open(sys.argv[1]).read().splitlines(True)
		big = ('{"type":"assistant","message":{"role":"assistant","content":[' + "{}," * (4 << 20) +
		       '{}]},"session_id":"%s","uuid":"55555555-5555-4555-8555-555555555555"}\n' % sys.argv[2])
		open(sys.argv[1], "w").write("".join(lines[:3] + [big] + lines[3:]))
	PY
	run --separate-stderr max_rss rss test-session mend whole session transcript
	assert_success
	[ "$stderr" = "added 2" ]
	assert_equal "$output" "$(cat session
		entry assistant a "$U2" "$U6" 2026-01-01T10:00:01.000Z
		entry user r "$U3" "$U2" 2026-01-01T10:00:09.000Z)"
	echo "# peak RSS: $(cat rss) KiB" >&3
	[ "$(cat rss)" -lt $((300 * 1024)) ]
}

@test "session mend: what would pass the 64 MiB cap is refused, the session left as it was" {
	python3 - session <<-'PY'
		import sys
		with open(sys.argv[1], "a") as f:
		    pad = "x" * (1 << 20)
		    for i in range(63):
		        f.write('{"pad":"%s"}\n' % pad)
		    f.write('{"pad":"%s"}\n' % ("x" * ((1 << 20) - 2000)))
	PY
	python3 - transcript <<-'PY'
		import sys
		with open(sys.argv[1], "a") as f:
		    f.write('{"type":"assistant","message":{"role":"assistant","content":"%s"},"session_id":"0b6c3f8e-1d2a-4c5b-9e7f-8a9b0c1d2e3f","uuid":"55555555-5555-4555-8555-555555555555"}\n' % ("y" * 4000))
	PY
	test-session mend whole session transcript >out 2>err && status=0 || status=$?
	[ "$status" -eq 1 ]
	assert_equal "$(cat err)" "File too large"
	cmp session out
}
