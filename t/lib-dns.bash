# For the tests that look names up in DNS (t/3001 the proxy, t/6001 the
# broker): a DNS server of their own, with the machine's search domains.
# Load after lib-common.

# in_dns_ns SCRIPT ARGS...: run the bash SCRIPT (its $1... are ARGS) in user,
# network, mount and PID namespaces of its own (the test skips where they are
# not allowed; what SCRIPT leaves running ends with them; /proc is the
# namespace's own, so a sanitizer build's leak check at the lockdown reads its
# own process, not the host's of that number), as root there, with
# lo up, t/lib-base.bash loaded, T and TOP set, and resolv.conf naming
# t/dns-server on the namespace's loopback (search domain corp.test, ndots:1),
# which logs each query (name and type) to $T/dns.log: ok.example.test,
# own.example.test and the names under corp.test are 93.184.216.34 (with no
# route to it unless SCRIPT gives one), the nat64*.example.test names are
# NAT64 addresses (t/dns-server), every other name does not exist.
# AIBOX_PROXY_HOSTS is unset: names go to DNS.
in_dns_ns() {
	local script=$1
	shift
	unshare -rnmpf --mount-proc true 2>/dev/null ||
		skip "needs user, network, mount and PID namespaces (unshare -rnmpf --mount-proc)"
	printf 'nameserver 127.0.0.1\nsearch corp.test\noptions ndots:1 timeout:1 attempts:1\n' >"$T/resolv.conf"
	env -u AIBOX_PROXY_HOSTS unshare -rnmpf --mount-proc bash -c '
		T=$1 TOP=$2 SCRIPT=$3
		. "$TOP/t/lib-base.bash"
		shift 3
		ip link set lo up && mount --bind "$T/resolv.conf" /etc/resolv.conf || exit 1
		"$TOP/t/dns-server" "$T/dns.log" "$T/dns.ready" >/dev/null 2>&1 &
		wait_until 10 file_or_gone "$T/dns.ready" $! || exit 1
		eval "$SCRIPT"' bash "$T" "$TOP" "$script" "$@"
}
