#!/usr/bin/env bats
# aibox task's and aibox run's spend caps (docs/budget.md), without a VM: a project whose day
# is spent is refused before anything starts; otherwise the proxy gets the
# caps and the day's ledger, and usage.json is written at the end.  t/5100
# runs a task that a cap stops in a real VM.
load lib-common
bats_require_minimum_version 1.5.0

setup() {
	common_setup
	no_vm_project
	pdir=$AIBOX_HOME/projects/repo
	export ANTHROPIC_API_KEY=sk-ant-spend-5007
	unset CLAUDE_CODE_OAUTH_TOKEN
}

task_dir() {
	ls -d "$pdir"/tasks/*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] 2>/dev/null
}

# spent_run LINE ARGS...: no task or run folder yet, LINE as the project's
# ledger of today, then `run ARGS...` (the test calls it through on_one_day).
spent_run() {
	rm -rf "$pdir/tasks" "$pdir/runs"
	printf '%s\n' "$1" >"$pdir/spend/$(date +%F)"
	shift
	run "$@"
}

@test "task spend: a project whose daily budget is spent is refused before anything starts (exit 2)" {
	printf 'env:\n  - ANTHROPIC_API_KEY\nbudget:\n  day: 1.50\n' >"$pdir/config.yaml"
	mkdir -p "$pdir/spend"
	on_one_day spent_run "$(printf '%020d' 1500000000)" aibox task x
	assert_failure 2
	assert_output "aibox-task: the project's daily budget of 1.500000 USD is spent (1.500000 USD today by aibox's count): no task or aibox run starts before tomorrow (local time), or raise budget.day"
	[ -z "$(task_dir)" ]
	# below the cap it starts (and stops at the boot: no VM here)
	on_one_day spent_run "$(printf '%020d' 1499999999)" --separate-stderr aibox task x
	assert_stopped_at_boot
	[ -n "$(task_dir)" ]
	# a ledger that is not one number is not reset: the task is refused
	rm -rf "$pdir/tasks"
	on_one_day spent_run garbage aibox task x
	assert_failure 2
	assert_output --partial "cannot read the ledger of today's spend in '$pdir/spend': not one number"
}

@test "task spend: the proxy gets the smaller task cap and the day's; usage.json records them" {
	printf 'env:\n  - ANTHROPIC_API_KEY\nbudget:\n  task: 5\n  day: 50\n' >"$pdir/config.yaml"
	day=$(date +%F)
	run --separate-stderr aibox task --max-budget-usd 2.5 x
	assert_stopped_at_boot
	dir=$(task_dir)
	[ -n "$dir" ]
	[ "$(jq -c '[.caps.task_usd, .caps.day_usd, .requests, .usd, .ended_by_cap]' "$dir/usage.json")" = '[2.5,50,0,0,null]' ]
	# the day's ledger: of the test's day, or of the next if midnight passed meanwhile
	[ -f "$pdir/spend/$day" ] || [ -f "$pdir/spend/$(date +%F)" ]
	# no request was made (the VM never booted): no count of none
	[[ "$stderr" != *"aibox counted"* ]] || fail "$stderr"
	[[ "$stderr" == *"the task did not finish"* ]] || fail "$stderr"
	# the config's cap when it is the smaller one
	rm -rf "$pdir/tasks"
	run --separate-stderr aibox task --max-budget-usd 7 x
	assert_stopped_at_boot
	[ "$(jq -c '.caps.task_usd' "$(task_dir)/usage.json")" = 5 ]
}

@test "run spend: aibox run is refused (125) when the project's day is spent, and goes on below it" {
	printf 'env:\n  - ANTHROPIC_API_KEY\nbudget:\n  day: 2\n' >"$pdir/config.yaml"
	mkdir -p "$pdir/spend"
	on_one_day spent_run "$(printf '%020d' 2000000000)" aibox run -- true
	assert_failure 125
	assert_output "aibox-run: the project's daily budget of 2.000000 USD is spent (2.000000 USD today by aibox's count): no task or aibox run starts before tomorrow (local time), or raise budget.day"
	[ -z "$(ls "$pdir/runs" 2>/dev/null)" ]
	on_one_day spent_run "$(printf '%020d' 1999999999)" --separate-stderr aibox run -- true
	assert_failure 125
	[[ "$stderr" == *"aibox-run: the VM did not come up"* ]] || fail "$stderr"
}
