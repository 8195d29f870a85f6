#!/usr/bin/env bats
# The price table (docs/budget.md, "Prices"): aibox prices shows the table in
# use (share/prices with the user's $AIBOX_HOME/prices over it) and the row
# that prices a model; a bad line in either file is refused with the file and
# the line, by aibox prices and by aibox task and aibox run before anything
# starts.  t/3010-prices.bats holds the proxy's count against the bill.
load lib-common

INSTALLED=$TOP/share/prices

# user_prices TEXT: write TEXT as the user's prices file
user_prices() {
	mkdir -p "$AIBOX_HOME"
	printf '%s\n' "$1" >"$AIBOX_HOME/prices"
}

@test "prices: aibox prices shows every row, its date and where it comes from, and the highest price" {
	run aibox prices
	assert_success
	assert_line --index 0 "The price table in use, USD per million tokens (docs/budget.md):"
	assert_line --index 1 "  installed $TOP/build/../share/prices, date 2026-12-01"
	assert_line --index 2 "  user      $AIBOX_HOME/prices: none (its rows would replace the installed ones)"
	assert_line --regexp '^claude-opus-4-8 +5 +25 +6\.25 +10 +0\.50 +2026-12-01 installed$'
	assert_line --regexp '^claude-sonnet-5-5 +2 +10 +2\.50 +4 +0\.10 +2026-10-07 installed$'
	assert_line --regexp '^claude-haiku-5-5 +0\.10 +0\.50 +0\.125 +0\.20 +0\.01 +2026-12-01 installed$'
	assert_line --regexp '^  above 100000 +0\.50 +2\.50 +0\.625 +1 +0\.05$'
	assert_line --regexp '^claude-3-haiku +0\.25 +1\.25 +0\.30 +0\.50 +0\.03 +2025-11-24 installed$'
	assert_line '  geo 1.000 (US-only inference: these prices times it)'
	assert_line "US-only inference (inference_geo): 1.1 times a row's prices, unless its 'geo' says otherwise"
	assert_line --regexp '^any other model +60 +225 +75 +120 +6$'
	assert_line "web search: 10 USD per 1,000 searches, date 2026-12-01, installed (line $(grep -n '^web-search ' "$INSTALLED" | cut -d: -f1))"
	# every family of the installed table, once
	families=$(awk '!/^#/ && NF >= 6 { print $1 }' "$INSTALLED" | sort)
	[ "$(grep -c . <<<"$families")" -ge 22 ]
	[ "$(sed -n 's/^\(claude-[^ ]*\) .*/\1/p' <<<"$output" | sort)" = "$families" ]
}

@test "prices: aibox prices MODEL names the row that prices it: dates, @ forms and variants match, other versions do not" {
	for m in claude-opus-4-8 claude-opus-4-8-20261105 'claude-opus-4-8[1m]' claude-opus-4-8-20261105@x; do
		run aibox prices "$m"
		assert_success
		assert_line --index 0 "$m is priced by the row claude-opus-4-8 of $TOP/build/../share/prices, line $(grep -n '^claude-opus-4-8 ' "$INSTALLED" | cut -d: -f1) (USD per million tokens):"
		assert_line --regexp '^claude-opus-4-8 +5 +25 '
	done
	run aibox prices claude-opus-4-1@20250805
	assert_success
	assert_line --regexp '^claude-opus-4-1 +15 +75 '
	run aibox prices claude-sonnet-4-5-20250929
	assert_success
	assert_line --regexp '^claude-sonnet-4-5 +3 +15 '
	# US-only inference: 1.1 times the prices from Opus 4.6 on, the standard ones before
	assert_line '  geo 1.000 (US-only inference: these prices times it)'
	run aibox prices --json claude-opus-4-6
	assert_success
	[ "$(jq -c .row.geo <<<"$output")" = 1.1 ]
	run aibox prices --json claude-sonnet-4-5
	assert_success
	[ "$(jq -c .row.geo <<<"$output")" = 1 ]
	# a version the table does not have is not priced by its elder
	for m in claude-opus-4-9 claude-opus-4-8-1 claude-sonnet-4-5-2025 claude-opus-4-8-fast 'claude-opus-4-8[1m' claude-opus-4-8@ 'bad name'; do
		run aibox prices "$m"
		assert_failure 1
		assert_line --index 0 "$m is in no row of the price table: aibox charges it the highest price of each column (USD per million tokens):"
		assert_line --regexp '^\(highest\) +60 +225 +75 +120 +6$'
	done
	run aibox prices --json claude-opus-4-9
	assert_failure 1
	[ "$(jq -c '[.model, .priced, .row, .highest.input, .highest.output]' <<<"$output")" = '["claude-opus-4-9",false,null,60,225]' ]
	run aibox prices a b
	assert_failure 2
	assert_output --partial "aibox-prices: unexpected argument 'b'"
	run aibox prices --frob
	assert_failure 2
	assert_output --partial "aibox-prices: unknown option '--frob'"
}

@test "prices: the user's file replaces rows by family and adds rows, with its own date" {
	user_prices '# my prices
date 2026-12-20
claude-sonnet-5   1.5  7.5  1.875  3  0.15
claude-new-1      1    2    3      4  5    above 1000  2 3 4 5 6   date 2026-12-24'
	run aibox prices
	assert_success
	assert_line --index 2 "  user      $AIBOX_HOME/prices, date 2026-12-20"
	assert_line --regexp '^claude-sonnet-5 +1\.50 +7\.50 +1\.875 +3 +0\.15 +2026-12-20 user$'
	assert_line --regexp '^claude-new-1 +1 +2 +3 +4 +5 +2026-12-24 user$'
	assert_line --regexp '^  above 1000 +2 +3 +4 +5 +6$'
	assert_line --regexp '^claude-sonnet-5-5 +2 +10 .* installed$'
	[ "$(grep -c '^claude-sonnet-5 ' <<<"$output")" = 1 ]
	# the installed web-search line, which this file does not replace
	assert_line --regexp '^web search: 10 USD per 1,000 searches, date 2026-12-01, installed \(line [0-9]+\)$'
	# the highest price of each column counts the user's rows too
	assert_line --regexp '^any other model +60 +225 +75 +120 +6$'
	run aibox prices --json claude-sonnet-5-20261201
	assert_success
	[ "$(jq -c '[.priced, .row.family, .row.from, .row.file, .row.line, .row.date, .row.bands[0].input, .row.bands[0].cache_write_5m]' <<<"$output")" = \
		"[true,\"claude-sonnet-5\",\"user\",\"$AIBOX_HOME/prices\",3,\"2026-12-20\",1.5,1.875]" ]
	run aibox prices --json
	assert_success
	[ "$(jq -c '[.files[].from, .files[1].date, (.rows | length), .highest.cache_read]' <<<"$output")" = \
		"[\"installed\",\"user\",\"2026-12-20\",$(($(awk '!/^#/ && NF >= 6' "$INSTALLED" | wc -l) + 1)),6]" ]
}

# bad TEXT WORDS: the user's file TEXT is refused by aibox prices, exit 2, with
# the file, the line and WORDS
bad() {
	user_prices "$1"
	run aibox prices
	assert_failure 2
	assert_output "aibox-prices: the price table '$AIBOX_HOME/prices', $2"
}

@test "prices: the user's web-search line replaces the installed one, with its date" {
	user_prices 'date 2026-12-20
web-search 12.345 date 2026-12-22
claude-x 1 2 3 4 5'
	run aibox prices claude-x
	assert_success
	assert_line 'web search: 12.345 USD per 1,000 searches, date 2026-12-22, user (line 2)'
	run aibox prices --json
	assert_success
	[ "$(jq -c '.web_search' <<<"$output")" = "{\"usd_per_1000\":12.345,\"date\":\"2026-12-22\",\"from\":\"user\",\"file\":\"$AIBOX_HOME/prices\",\"line\":2}" ]
	# without a date of its own, its file's
	user_prices 'date 2026-12-20
web-search 0.5
claude-x 1 2 3 4 5'
	run aibox prices
	assert_success
	assert_line 'web search: 0.50 USD per 1,000 searches, date 2026-12-20, user (line 2)'
}

@test "prices: every bad line is refused with the file and the line, by aibox prices" {
	ok='date 2026-12-01'
	bad "$ok
claude-x 1 2 3" "line 2: want a model family and 5 prices (then optionally 'above TOKENS' and 5 prices, and 'date YYYY-MM-DD')"
	bad "$ok
claude-x 1 2 3 4 5.0001" "line 2: a price is a number of USD per million tokens (at most 3 decimals, at most 1000000)"
	for p in -1 1e3 0x10 1,5 . 1. 1000001 abc; do
		bad "$ok
claude-x 1 2 3 4 5
claude-y 1 2 $p 4 5 6" "line 3: a price is a number of USD per million tokens (at most 3 decimals, at most 1000000)"
	done
	bad "$ok
claude-x 1 2 3 4 5
claude-x 1 2 3 4 5" "line 3: the family 'claude-x' is listed twice (first on line 2)"
	bad "$ok
claude-x@1 1 2 3 4 5" "line 2: a family is a model's name: letters, digits, '.', '-' and '_'"
	bad "$ok
$(head -c 65 /dev/zero | tr '\0' a) 1 2 3 4 5" "line 2: a family is at most 64 characters"
	bad "$ok
claude-x 1 2 3 4 5 above 100 1 2 3 4" "line 2: 'above' takes a number of prompt tokens (1 to 1000000000) and 5 prices"
	bad "$ok
claude-x 1 2 3 4 5 above 0 1 2 3 4 5" "line 2: 'above' takes a number of prompt tokens (1 to 1000000000) and 5 prices"
	bad "$ok
claude-x 1 2 3 4 5 above 1000000001 1 2 3 4 5" "line 2: 'above' takes a number of prompt tokens (1 to 1000000000) and 5 prices"
	bad "$ok
claude-x 1 2 3 4 5 above 100 1 2 3 4 4.9" "line 2: the prices above a threshold must be no lower than below it, kind by kind"
	bad "$ok
claude-x 1 2 3 4 5 above 100 1 2 3 4 5 above 100 1 2 3 4 5" "line 2: each 'above' threshold must be higher than the last"
	bad "$ok
claude-x 1 2 3 4 5 above 1 1 2 3 4 5 above 2 1 2 3 4 5 above 3 1 2 3 4 5 above 4 1 2 3 4 5" "line 2: at most 3 'above' bands"
	bad "$ok
claude-x 1 2 3 4 5 6" "line 2: after the prices: 'above TOKENS' and 5 prices, 'geo X' or 'date YYYY-MM-DD'"
	for g in 'geo' 'geo 0.999' 'geo 1.0001' 'geo 1001' 'geo x' 'geo 1 geo 1'; do
		bad "$ok
claude-x 1 2 3 4 5 $g" "line 2: 'geo' takes US-only inference's multiplier of the prices (1 to 1000, at most 3 decimals), once"
	done
	bad "$ok
claude-x 1 2 3 4 5 date 2026-13-01" "line 2: 'date' takes a date YYYY-MM-DD, at the row's end"
	bad "$ok
claude-x 1 2 3 4 5 date 2026-12-01 above 1 1 2 3 4 5" "line 2: 'date' takes a date YYYY-MM-DD, at the row's end"
	bad "date 2026-12-1
claude-x 1 2 3 4 5" "line 1: 'date' takes a date YYYY-MM-DD"
	bad "$ok
$ok" "line 2: a second 'date' line"
	bad "claude-x 1 2 3 4 5" "line 1: no 'date' line"
	bad "$ok" "line 1: no prices"
	bad "$ok
claude-x 1 2 3 4 5 $(seq 1 40 | tr '\n' ' ')" "line 2: too many fields"
	for w in 'web-search' 'web-search -1' 'web-search 1.0001' 'web-search 1000001' 'web-search ten'; do
		bad "$ok
$w
claude-x 1 2 3 4 5" "line 2: 'web-search' takes a price in USD per 1,000 searches (at most 3 decimals, at most 1000000)"
	done
	for w in 'web-search 1 2' 'web-search 1 date' 'web-search 1 date 2026-12-32' 'web-search 1 date 2026-12-01 x'; do
		bad "$ok
$w
claude-x 1 2 3 4 5" "line 2: after the web-search price: only 'date YYYY-MM-DD'"
	done
	bad "$ok
web-search 1
claude-x 1 2 3 4 5
web-search 2" "line 4: a second 'web-search' line"
	printf '%s\nclaude-x 1 2 3 4 5\0 6\n' "$ok" >"$AIBOX_HOME/prices"
	run aibox prices
	assert_failure 2
	assert_output --partial "'$AIBOX_HOME/prices', line 2: "
	# too large, a folder, unreadable
	head -c 70000 /dev/zero | tr '\0' '#' >"$AIBOX_HOME/prices"
	run aibox prices
	assert_failure 2
	assert_output "aibox-prices: cannot read the price table '$AIBOX_HOME/prices': larger than 64 KiB"
	rm "$AIBOX_HOME/prices"
	mkdir "$AIBOX_HOME/prices"
	run aibox prices
	assert_failure 2
	assert_output "aibox-prices: cannot read the price table '$AIBOX_HOME/prices': Is a directory"
	# CRLF lines and comments anywhere are fine
	rmdir "$AIBOX_HOME/prices"
	printf 'date 2026-12-01\r\nclaude-x 1 2 3 4 5#c\r\n  # c\r\n' >"$AIBOX_HOME/prices"
	run aibox prices claude-x
	assert_success
	assert_line --regexp '^claude-x +1 +2 +3 +4 +5 +2026-12-01 user$'
}

@test "prices: a bad installed table is refused the same way" {
	mkdir -p "$T/data/share"
	printf 'date 2026-12-01\nclaude-x 1 2 3 4\n' >"$T/data/share/prices"
	AIBOX_DATA_DIR=$T/data run aibox prices
	assert_failure 2
	assert_output "aibox-prices: the price table '$T/data/share/prices', line 2: want a model family and 5 prices (then optionally 'above TOKENS' and 5 prices, and 'date YYYY-MM-DD')"
	# the installed table must say what a web search costs (the user's need not)
	printf 'date 2026-12-01\nclaude-x 1 2 3 4 5\n' >"$T/data/share/prices"
	AIBOX_DATA_DIR=$T/data run aibox prices
	assert_failure 2
	assert_output "aibox-prices: the price table '$T/data/share/prices', no 'web-search' line (USD per 1,000 web searches)"
	rm "$T/data/share/prices"
	AIBOX_DATA_DIR=$T/data run aibox prices
	assert_failure 2
	assert_output "aibox-prices: cannot read the price table '$T/data/prices': No such file or directory"
}

@test "prices: aibox task and aibox run refuse a bad prices file before anything starts" {
	no_vm_project
	export ANTHROPIC_API_KEY=sk-ant-prices-1080
	unset CLAUDE_CODE_OAUTH_TOKEN
	printf 'env:\n  - ANTHROPIC_API_KEY\n' >"$cfg"
	user_prices 'date 2026-12-01
claude-x 1 2 3 4 five'
	why="the price table '$AIBOX_HOME/prices', line 2: a price is a number of USD per million tokens (at most 3 decimals, at most 1000000)"
	run aibox task x
	assert_failure 2
	assert_output "aibox-task: $why"
	[ ! -e "$AIBOX_HOME/projects/repo/tasks" ] || [ -z "$(ls "$AIBOX_HOME/projects/repo/tasks")" ]
	run aibox run -- true
	assert_failure 125
	assert_output "aibox-run: $why"
	# a good one lets them start (and stop at the boot: no VM here)
	user_prices 'date 2026-12-01
claude-x 1 2 3 4 5'
	run --separate-stderr aibox task x
	assert_stopped_at_boot
}
