#!/usr/bin/env bats
# aibox's count against the bill for every current model (docs/budget.md,
# "Prices"): the fake API reports usage for each model, and aibox-proxy's
# count must be what the test computes itself from the API prices in force
# (/work/shared/spec/DESIGN.md's figures, written out below: not read from
# share/prices); then the same against the real Claude Code's own estimate,
# run natively through the proxy.  Against the TLS fake API, no VM.
bats_require_minimum_version 1.5.0
load lib-common
load lib-claude
load lib-tls
load lib-proxy
load lib-task # api

KEY=sk-ant-real-key-3010

# The API prices in force 2026-12, USD per million tokens: model, input,
# output, cache read ("-": 0.1 x input).  Cache writes: 1.25 x input (5 min),
# 2 x input (1 h).  Haiku 5.5 (banded) is below.
BILL='claude-fable-5-2 8 40 0.20
claude-fable-5-1 10 50 0.25
claude-fable-5 10 50 -
claude-opus-5-5 4 20 0.20
claude-opus-5 5 25 -
claude-opus-4-8 5 25 -
claude-opus-4-7 5 25 -
claude-opus-4-6 5 25 -
claude-opus-4-5 5 25 -
claude-opus-4-1 15 75 -
claude-opus-4 15 75 -
claude-sonnet-5-5 2 10 0.10
claude-sonnet-5 2 10 -
claude-sonnet-4-6 3 15 -
claude-sonnet-4-5 3 15 -
claude-sonnet-4 3 15 -
claude-haiku-4-5 1 5 -'

# One answer's usage: 1000 input, 2000 output, cache writes 3000 (5 min) and
# 500 (1 h), 4000 cache reads.
USAGE='{"input_tokens":1000,"output_tokens":2000,"cache_creation_input_tokens":3500,"cache_creation":{"ephemeral_5m_input_tokens":3000,"ephemeral_1h_input_tokens":500},"cache_read_input_tokens":4000}'

setup() {
	common_setup
	make_test_ca "$T/ca"
	export AIBOX_TEST_KEY=$KEY
	export AIBOX_API_CA=$T/ca/ca.pem
}

teardown() {
	stop_proxy || true
	stop_fake_api
	common_teardown
}

# bill_nano MODEL IN OUT CW5M CW1H CR: what the API bills for those tokens
# (nano-USD), from the figures above; haiku-5-5 by its prompt's band
bill_nano() {
	python3 - "$@" "$BILL" <<-'PY'
		import sys
		from decimal import Decimal as D
		model, t, table = sys.argv[1], [int(x) for x in sys.argv[2:7]], sys.argv[7]
		rows = {l.split()[0]: l.split()[1:] for l in table.splitlines()}
		if model == "claude-haiku-5-5":
		    prompt = t[0] + t[2] + t[3] + t[4]
		    i, o, cr = ("0.10", "0.50", "-") if prompt <= 100000 else ("0.50", "2.50", "-")
		else:
		    i, o, cr = rows[model]
		i, o = D(i), D(o)
		cr = i / 10 if cr == "-" else D(cr)
		prices = [i, o, i * D("1.25"), i * 2, cr]
		print(int(sum(n * p * 1000 for n, p in zip(t, prices))))
	PY
}

# ask MODEL: one streamed request through the proxy
ask() {
	curl -sS -f -x "$PROXY" -H 'content-type: application/json' --data-binary \
		"{\"model\":\"$1\",\"stream\":true,\"tools\":[{\"name\":\"Bash\"}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
		"http://127.0.0.1:3129/v1/messages?beta=true" >"$T/out"
}

# counted MODEL: the record's [nano_usd, priced] for MODEL
counted() {
	jq -c "[.usage.models[] | select(.model == \"$1\") | .nano_usd, .priced]" "$T/record.json"
}

@test "bill: every current model is counted as the API bills it, whatever its spelling" {
	api "{\"usage\":$USAGE}"
	start_recorded
	models=$(cut -d' ' -f1 <<<"$BILL")
	for m in $models claude-haiku-5-5; do
		ask "$m"
	done
	# date suffixes, @ forms and variants are their model
	ask claude-opus-4-8-20261101
	ask 'claude-opus-4-8[1m]'
	ask claude-opus-4-1@20250805
	ask claude-sonnet-4-5-20250929
	stop_proxy
	for m in $models claude-haiku-5-5; do
		[ "$(counted "$m")" = "[$(bill_nano "$m" 1000 2000 3000 500 4000),true]" ] ||
			fail "$m: aibox counted $(counted "$m"), the bill is $(bill_nano "$m" 1000 2000 3000 500 4000)"
	done
	[ "$(counted claude-opus-4-8-20261101)" = "[$(bill_nano claude-opus-4-8 1000 2000 3000 500 4000),true]" ]
	[ "$(counted 'claude-opus-4-8[1m]')" = "[$(bill_nano claude-opus-4-8 1000 2000 3000 500 4000),true]" ]
	[ "$(counted claude-opus-4-1@20250805)" = "[$(bill_nano claude-opus-4-1 1000 2000 3000 500 4000),true]" ]
	[ "$(counted claude-sonnet-4-5-20250929)" = "[$(bill_nano claude-sonnet-4-5 1000 2000 3000 500 4000),true]" ]
}

@test "bill: a model of another version is not priced by its elder's row: the highest price, and it says so" {
	api "{\"usage\":$USAGE}"
	start_recorded
	ask claude-opus-4-9
	ask claude-sonnet-4-5-fast
	stop_proxy
	# the highest of each column: 60, 225, 75, 120, 6 (Opus 4.6's fast mode above 200,000)
	[ "$(counted claude-opus-4-9)" = '[819000000,false]' ]
	[ "$(counted claude-sonnet-4-5-fast)" = '[819000000,false]' ]
}

# haiku_sse IN CR OUT: a streamed answer whose message_start reports IN input
# tokens and whose message_delta adds CR cache reads and OUT output tokens
haiku_sse() {
	jq -cn --argjson i "$1" --argjson cr "$2" --argjson o "$3" '{turns: [{raw: [
		("event: message_start\ndata: " + ({type: "message_start", message: {model: "claude-haiku-5-5", usage: {input_tokens: $i, output_tokens: 1}}} | tojson) + "\n\n"),
		("event: message_delta\ndata: " + ({type: "message_delta", usage: {input_tokens: $i, cache_read_input_tokens: $cr, output_tokens: $o}} | tojson) + "\n\n"),
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"]}]}'
}

@test "bill: Haiku 5.5 is priced by each request's own prompt, the band chosen by the whole answer" {
	for case in "90000 10000 500" "90000 10001 500" "60000 50000 700" "1 0 1"; do
		read -r in cr out <<<"$case"
		api "$(haiku_sse "$in" "$cr" "$out")"
		start_recorded
		ask claude-haiku-5-5
		stop_proxy
		stop_fake_api
		rm -rf "$T/rec"
		[ "$(counted claude-haiku-5-5)" = "[$(bill_nano claude-haiku-5-5 "$in" "$out" 0 0 "$cr"),true]" ] ||
			fail "$case: aibox counted $(counted claude-haiku-5-5), the bill is $(bill_nano claude-haiku-5-5 "$in" "$out" 0 0 "$cr")"
	done
	# two requests of one task, each in its own band: 100000 prompt tokens
	# at 0.10, then 100001 at 0.50
	api "$(jq -cn '{turns: [{text: "a", usage: {input_tokens: 100000, output_tokens: 10}}, {text: "b", usage: {input_tokens: 100001, output_tokens: 10}}]}')"
	start_recorded
	ask claude-haiku-5-5
	curl -sS -f -x "$PROXY" -H 'content-type: application/json' --data-binary \
		'{"model":"claude-haiku-5-5","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"},{"role":"user","content":"go on"}]}' \
		"http://127.0.0.1:3129/v1/messages" >/dev/null
	stop_proxy
	[ "$(counted claude-haiku-5-5)" = "[$((100000 * 100 + 10 * 500 + 100001 * 500 + 10 * 2500)),true]" ]
}

@test "bill: the user's prices file changes the count without a rebuild" {
	mkdir -p "$AIBOX_HOME"
	printf 'date 2026-12-20\nclaude-sonnet-5 1 1 1 1 1\n' >"$AIBOX_HOME/prices"
	api "{\"usage\":$USAGE}"
	start_recorded
	ask claude-sonnet-5
	ask claude-sonnet-5-5
	stop_proxy
	[ "$(counted claude-sonnet-5)" = '[10500000,true]' ]
	[ "$(counted claude-sonnet-5-5)" = "[$(bill_nano claude-sonnet-5-5 1000 2000 3000 500 4000),true]" ]
	# --prices FILE is that table alone
	printf 'date 2026-12-20\nweb-search 10\nclaude-other 1 1 1 1 1\n' >"$T/prices"
	start_recorded --prices "$T/prices"
	ask claude-sonnet-5
	stop_proxy
	[ "$(counted claude-sonnet-5)" = '[10500000,false]' ]
	# a bad one stops the proxy, naming the file and the line
	printf 'date 2026-12-20\nclaude-sonnet-5 1 1 1 1\n' >"$AIBOX_HOME/prices"
	run aibox-proxy --key-env AIBOX_TEST_KEY
	assert_failure 2
	assert_output "aibox-proxy: the price table '$AIBOX_HOME/prices', line 2: want a model family and 5 prices (then optionally 'above TOKENS' and 5 prices, and 'date YYYY-MM-DD')"
}

# against_claude MODEL: Claude Code runs one turn on MODEL through the proxy;
# its estimate (modelUsage's costUSD) must be aibox's count, which must be
# the bill.  Where Claude Code prices the model as it prices another row of
# the bill (its price list is older than the model's price), the test says so
# and skips; any other difference fails.
against_claude() {
	local m=$1 st=0 bill ours theirs like
	need_claude
	api "{\"turns\":[{\"text\":\"Done.\"}],\"usage\":$USAGE}"
	start_recorded
	mkdir -p "$T/work"
	cd "$T/work"
	claude_via_proxy --model "$m" "say done" || st=$?
	stop_proxy
	[ "$st" -eq 0 ] || fail "Claude Code failed ($st): $(cat "$T/err")"
	sent=$(jq -r 'select(.type == "result") | .modelUsage | keys[]' "$T/out.jsonl" | sort -u | tr '\n' ' ')
	[ "$sent" = "$m " ] || skip "Claude Code $CLAUDE_VERSION asked for ${sent% } when told --model $m: no estimate of $m to compare"
	bill=$(bill_nano "$m" 1000 2000 3000 500 4000)
	ours=$(jq ".usage.models[] | select(.model == \"$m\") | .nano_usd" "$T/record.json")
	theirs=$(jq -s "[.[] | select(.type == \"result\")][-1].modelUsage[\"$m\"].costUSD * 1e9 | round" "$T/out.jsonl")
	[ "$ours" = "$bill" ] || fail "$m: aibox counted $ours nano-USD, the bill is $bill"
	[ "$theirs" = "$ours" ] && return 0
	like=$(for r in $(cut -d' ' -f1 <<<"$BILL"); do
		[ "$(bill_nano "$r" 1000 2000 3000 500 4000)" != "$theirs" ] || printf ' %s' "$r"
	done)
	[ -n "$like" ] || fail "$m: Claude Code $CLAUDE_VERSION estimates $theirs nano-USD, aibox counts $ours (the bill), and no row of the bill gives Claude Code's figure"
	skip "Claude Code $CLAUDE_VERSION prices $m as it prices$like ($theirs nano-USD where the bill is $ours): its price list is older than this model's price"
}

@test "bill vs Claude Code: claude-fable-5-1" { against_claude claude-fable-5-1; }
@test "bill vs Claude Code: claude-fable-5" { against_claude claude-fable-5; }
@test "bill vs Claude Code: claude-opus-5-5" { against_claude claude-opus-5-5; }
@test "bill vs Claude Code: claude-opus-5" { against_claude claude-opus-5; }
@test "bill vs Claude Code: claude-opus-4-8" { against_claude claude-opus-4-8; }
@test "bill vs Claude Code: claude-opus-4-7" { against_claude claude-opus-4-7; }
@test "bill vs Claude Code: claude-opus-4-6" { against_claude claude-opus-4-6; }
@test "bill vs Claude Code: claude-opus-4-5" { against_claude claude-opus-4-5; }
@test "bill vs Claude Code: claude-opus-4-1" { against_claude claude-opus-4-1; }
@test "bill vs Claude Code: claude-opus-4" { against_claude claude-opus-4; }
@test "bill vs Claude Code: claude-sonnet-5-5" { against_claude claude-sonnet-5-5; }
@test "bill vs Claude Code: claude-sonnet-5" { against_claude claude-sonnet-5; }
@test "bill vs Claude Code: claude-sonnet-4-6" { against_claude claude-sonnet-4-6; }
@test "bill vs Claude Code: claude-sonnet-4-5" { against_claude claude-sonnet-4-5; }
@test "bill vs Claude Code: claude-sonnet-4" { against_claude claude-sonnet-4; }
@test "bill vs Claude Code: claude-haiku-5-5" { against_claude claude-haiku-5-5; }
@test "bill vs Claude Code: claude-haiku-4-5" { against_claude claude-haiku-4-5; }
