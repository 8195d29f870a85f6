# bench/lib-ksm.bash: the host's KSM turned on for a bench's rows and put
# back as it was (sourced by bench/attempts under BENCH_KSM=1).  aibox never
# touches these host-wide settings; a bench does only when asked, as root.
# KSM_SYS is the sysfs folder (a test points it at a folder of its own).
KSM_SYS=${KSM_SYS:-/sys/kernel/mm/ksm}
KSM_SAVED=

# ksm_on [PAGES]: records run and pages_to_scan, then sets pages_to_scan to
# PAGES (when given) and run to 1.  Fails, changing nothing, when run is not
# writable.  Call ksm_restore (an EXIT trap) to put both back.
ksm_on() {
	local run pages
	if [ ! -w "$KSM_SYS/run" ]; then
		echo "bench: cannot turn KSM on: $KSM_SYS/run is not writable (run as root, on a kernel with KSM)" >&2
		return 1
	fi
	run=$(cat "$KSM_SYS/run")
	pages=$(cat "$KSM_SYS/pages_to_scan")
	KSM_SAVED="$run $pages"
	if [ -n "${1:-}" ]; then echo "$1" >"$KSM_SYS/pages_to_scan"; fi
	echo 1 >"$KSM_SYS/run"
}

# ksm_restore: run and pages_to_scan back to what ksm_on found (pages
# already merged stay merged until they are written or freed, as with any
# run=0).  Does nothing when ksm_on did not change them.
ksm_restore() {
	[ -n "$KSM_SAVED" ] || return 0
	echo "${KSM_SAVED#* }" >"$KSM_SYS/pages_to_scan"
	echo "${KSM_SAVED%% *}" >"$KSM_SYS/run"
	KSM_SAVED=
}

# ksm_cpu_ms: the CPU time (user and system, ms) ksmd has used since boot;
# 0 when there is no ksmd.
ksm_cpu_ms() {
	local f st
	for f in /proc/[0-9]*/comm; do
		[ "$(cat "$f" 2>/dev/null)" = ksmd ] || continue
		st=$(cat "${f%comm}stat") || continue
		st=${st##*) }
		# fields 14 and 15 of stat (utime, stime), in clock ticks
		awk -v t="$(getconf CLK_TCK)" '{ printf "%d\n", ($12 + $13) * 1000 / t }' <<<"$st"
		return 0
	done
	echo 0
}
