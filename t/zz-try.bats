load lib-common
bats_require_minimum_version 1.5.0
setup() { common_setup; no_vm_project; }
@test "try" {
	head -c 400000 /dev/urandom > big; git add big; git commit -qm big
	mkdir -p "$AIBOX_HOME/projects/repo/tasks"
	ANTHROPIC_API_KEY=k run --separate-stderr unshare -rm sh -c 'mount -t tmpfs -o size=262144 tmpfs "$1" && aibox task "Do it."; echo "st $?"; ls -la $1/*/; aibox tasks list; aibox tasks clean; ls -la $1' sh "$AIBOX_HOME/projects/repo/tasks"
	echo "status $status"; echo "$output"; echo "$stderr"
	false
}
