# detached_folder (t/5007, t/5019): a task folder as a detached task's submitter
# leaves it (common/task/slurm_detach.h): its lock free, slurm.job,
# slurm.secrets, the result files empty; DIR its path, ID its id.  Load after
# lib-common.
detached_folder() {
	no_vm_project
	local tk=$AIBOX_HOME/projects/repo/tasks name=20261201-120000-a1b2c3 f
	DIR=$tk/$name
	ID=a1b2c3
	mkdir -p "$DIR"
	: >"$DIR.lock"
	echo "Do it" >"$DIR/prompt.txt"
	printf 'start 0.1s\nbundle 0.1s\nslurm 0.1s\n' >"$DIR/aibox.log"
	echo bundle >"$DIR/start.bundle"
	for f in changes.bundle transcript.jsonl vm.log session.jsonl result.json; do : >"$DIR/$f"; done
	test-slurm job-write "$DIR" 4242 "$(git rev-parse HEAD)"
	test-slurm secrets-write "$DIR" k t e u h
}
