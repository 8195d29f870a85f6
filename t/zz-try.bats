load lib-common
bats_require_minimum_version 1.5.0
setup() { common_setup; no_vm_project; }
@test "try" {
	printf '#!/bin/sh\necho "fake qemu waits" >&2\nexec sleep 300\n' >"$T/fake-bin/qemu-system-x86_64"
	ANTHROPIC_API_KEY=k aibox task "Do it." >out 2>err &
	pid=$!
	wait_until 20 pgrep -P $pid -f sleep
	ps -o pid,ppid,args --ppid $pid
	proxy=$(pgrep -P $pid -f aibox-proxy)
	SECONDS=0
	kill -KILL $proxy
	wait_until 60 kill -0 $pid; 
	wait $pid; echo "st $? after $SECONDS s"
	cat out err
	aibox tasks list
	pgrep -af 'sleep 300|aibox-proxy|aibox-broker' || true
	false
}
