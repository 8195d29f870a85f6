# A real one-node Slurm cluster for the t/91xx family (docs/slurm.md,
# "Tests"): munged, slurmctld and slurmd, started as root with everything
# (key, sockets, state, spool, logs, pid files) under one folder and on ports
# of their own, and stopped by their pids.  Load after lib-common.
#
#   slurm_start DIR MEMORY_MIB   the cluster; SLURM_CONF (exported) names its
#                                slurm.conf, the node has 2 CPUs and MEMORY_MIB;
#                                the daemons' pids go to DIR/pids as they start
#   slurm_stop DIR               stops them by those pids (the last started
#                                first) and waits for each to be gone
#   slurm_why_not                empty when this machine can run it, else why

slurm_why_not() {
	local c
	for c in munged slurmctld slurmd srun sbatch scontrol scancel sacct; do
		command -v "$c" >/dev/null 2>&1 || {
			echo "no $c here (apt-get install slurm-wlm munge; make deps does)"
			return 0
		}
	done
	[ "$(id -u)" = 0 ] || { echo "the cluster's daemons run as root"; return 0; }
	[ -d /sys/fs/cgroup/freezer ] || { echo "no cgroup v1 freezer for proctrack/cgroup"; return 0; }
	id munge >/dev/null 2>&1 || { echo "no munge user (the munge package makes it)"; return 0; }
}

# slurm_ports: two free TCP ports on loopback, one a line, distinct: both are
# held while the kernel picks them (two picks one after the other could give
# the same port again, about once in 14000).  Another process may take one
# before the daemon does: rare, and the daemon then fails to start, which the
# test reports.
slurm_ports() {
	python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("", 0))
for x in s:
    print(x.getsockname()[1])'
}

slurm_start() {
	local d=$1 mem=$2 host ports
	host=$(hostname -s)
	mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/log"
	chmod 755 "$d"
	# munged wants its key, socket folder and files the munge user's only.
	dd if=/dev/urandom bs=1 count=1024 of="$d/munge/munge.key" status=none
	chown -R munge: "$d/munge"
	chmod 700 "$d/munge"
	chmod 400 "$d/munge/munge.key"
	runuser -u munge -- munged --force --key-file="$d/munge/munge.key" \
		--socket="$d/munge/munge.socket" --pid-file="$d/munge/munged.pid" \
		--log-file="$d/munge/munged.log" --seed-file="$d/munge/munged.seed" || return 1
	cat "$d/munge/munged.pid" >>"$d/pids"
	# Clients (srun as the test user) reach the socket through the folder.
	chmod 711 "$d/munge"
	cat >"$d/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
EOF
	ports=$(slurm_ports) || return 1
	cat >"$d/slurm.conf" <<EOF
ClusterName=aibox-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports%$'\n'*}
SlurmdPort=${ports#*$'\n'}
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.socket
CredType=cred/munge
SlurmUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$d/log/jobcomp.log
ReturnToService=2
KillWait=5
MinJobAge=300
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=$mem State=UNKNOWN
PartitionName=agents Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
	export SLURM_CONF=$d/slurm.conf
	slurmctld -c -f "$SLURM_CONF" || return 1
	wait_until 5 test -s "$d/slurmctld.pid" || return 1
	cat "$d/slurmctld.pid" >>"$d/pids"
	slurmd -f "$SLURM_CONF" || return 1
	wait_until 5 test -s "$d/slurmd.pid" || return 1
	cat "$d/slurmd.pid" >>"$d/pids"
	wait_until 10 node_idle && return 0
	echo "slurm_start: the node is not idle after 10 s:" >&2
	sinfo >&2
	tail -20 "$d/log/slurmctld.log" "$d/log/slurmd.log" >&2
	return 1
}

# node_idle: the cluster's node is idle (for wait_until)
node_idle() {
	sinfo -h -o %T 2>/dev/null | grep -qx idle
}

slurm_stop() {
	local d=$1 p
	[ -f "$d/pids" ] || return 0
	# slurmd, slurmctld, then munged; each waited for (none is our child).
	for p in $(tac "$d/pids"); do
		kill "$p" 2>/dev/null || continue
		wait_until 10 gone "$p" || kill -9 "$p" 2>/dev/null || true
	done
	rm -f "$d/pids"
	# slurmd's freezer cgroups (proctrack/cgroup) outlive it: empty now, removed.
	find "/sys/fs/cgroup/freezer/slurm_$(hostname -s)" -depth -type d -exec rmdir {} + 2>/dev/null || true
	return 0
}
