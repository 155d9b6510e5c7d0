#!/usr/bin/env bash
# fedbandits: end-to-end test of slurm/ against a real single-node Slurm on
# localhost (run by .ci/run; needs root for apt and munge).
#
# Starts munged, slurmctld and slurmd with a throw-away configuration
# (MaxArraySize=2), checks that submit.sh refuses bad settings and reports
# failed sbatch calls, submits a small job (a file name and `output:` with
# spaces) through slurm/submit.sh as 3 shards, which MaxArraySize splits into
# two arrays, sends SIGTERM to one task mid-run (it snapshots, exits 3 and
# requeues itself), checks that array tasks wrote the job directory at the
# same time (the directory lock serializes versions, not shards), waits for
# the merge job, checks the merged data equal a
# single-process run of the same job, and stops every daemon it started, by
# PID.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${FEDBANDITS_BIN:-$repo/target/release/fedbandits}
py=${FEDBANDITS_PYTHON:-python3}
[ -e "$py" ] && py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"
log() { echo "[slurm-test $(date +%T)] $*"; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

work=$(mktemp -d /tmp/fedbandits-slurm.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# munge: key readable only by munge, daemon as the munge user.
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 400 /etc/munge/munge.key
rm -f /run/munge/munged.pid
runuser -u munge -- /usr/sbin/munged --force --pid-file=/run/munge/munged.pid --socket=/run/munge/munge.socket.2
for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
pids+=("$(cat /run/munge/munged.pid)")

cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
mkdir -p "$work/state" "$work/spool"
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=fbtest
SlurmctldHost=$(hostname -s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=4
JobRequeue=1
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=$(hostname -s) CPUs=$cpus RealMemory=$mem State=UNKNOWN
MaxArraySize=2
PartitionName=debug Nodes=$(hostname -s) Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -i
slurmd
for _ in $(seq 100); do [ -s "$work/slurmctld.pid" ] && [ -s "$work/slurmd.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$work/slurmctld.pid")" "$(cat "$work/slurmd.pid")")
for _ in $(seq 100); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.2; done
log "cluster up: $(sinfo -h -o '%P %D %T %c')"

cd "$work"
# The job's name is set: a name taken from this file name (with a space)
# is refused, as every job name outside [A-Za-z0-9_.-] is.
cat > "slurm test.yaml" <<'JOB'
name: slurm_test
seed: 4
repetitions: 3
horizon: 300000
checkpoints: {every: 50000}
output: out dir
algorithm: [private_fedlinucb, independent]
environment: linear_sphere
params: {m: 8, d: 5, k: 20, epsilon: 1, delta: 0.1}
JOB
export FEDBANDITS_BIN="$bin" FEDBANDITS_THREADS=1 FEDBANDITS_TIME=00:10:00 FEDBANDITS_SNAPSHOT_MINUTES=0

# Refusals and failed submissions: a clear message, non-zero exit, nothing
# left in the queue.
expect_failure() { # WHAT PATTERN COMMAND...
  local what=$1 pattern=$2 reply
  shift 2
  if reply=$("$@" 2>&1); then log "submit.sh accepted $what"; echo "$reply"; exit 1; fi
  echo "$reply" | grep -q -- "$pattern" || { log "$what: unexpected message"; echo "$reply"; exit 1; }
  log "$what refused: $(echo "$reply" | grep -- "$pattern" | head -1)"
}
expect_failure "FEDBANDITS_TASKS=0" "at least 1" env FEDBANDITS_TASKS=0 "$here/submit.sh" "slurm test.yaml"
expect_failure "an unknown partition" "sbatch failed for the array of shards 0-1" \
  env FEDBANDITS_TASKS=3 FEDBANDITS_PARTITION=nosuch "$here/submit.sh" "slurm test.yaml"
expect_failure "an array above MaxArraySize" "sbatch failed" \
  env FEDBANDITS_TASKS=3 FEDBANDITS_MAX_ARRAY_SIZE=3 "$here/submit.sh" "slurm test.yaml"
# A failing merge submission (an sbatch that refuses --dependency) must name
# the arrays already submitted; a warning on stderr (common on clusters) is
# not a failure.
mkdir -p shim
cat > shim/sbatch <<SHIM
#!/usr/bin/env bash
for a in "\$@"; do case "\$a" in --dependency=*) echo "sbatch: error: test refuses the merge job" >&2; exit 1;; esac; done
echo "sbatch: warning: test warning on stderr" >&2
exec $(command -v sbatch) "\$@"
SHIM
chmod +x shim/sbatch
expect_failure "a failed merge submission" "already submitted: .*cancel them with: scancel" \
  env PATH="$PWD/shim:$PATH" FEDBANDITS_TASKS=3 "$here/submit.sh" "slurm test.yaml"
scancel $(squeue -h -o %A | sort -u) 2>/dev/null || true
for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
[ -z "$(squeue -h 2>/dev/null)" ] || { log "queue not empty after the refusals"; squeue; exit 1; }
rm -rf "out dir" fedbandits-*.out

export FEDBANDITS_TASKS=3
reply=$("$here/submit.sh" "slurm test.yaml")
echo "$reply" | sed 's/^/[slurm-test]   submit.sh: /'
ids=$(echo "$reply" | tail -1)
arrays=${ids% *}
merge=${ids#* }
array=${arrays%%:*}
[ "$(echo "$arrays" | tr ':' '\n' | wc -l)" -eq 2 ] || { log "3 shards with MaxArraySize=2 should be 2 arrays, got '$arrays'"; exit 1; }
log "submitted arrays $arrays (3 shards) and merge $merge"
squeue -h -o '%i %j %T' | sed 's/^/[slurm-test]   /'

# Wait until task 1 runs, let it work a moment, then SIGTERM it.
for _ in $(seq 200); do
  state=$(squeue -h -j "${array}_1" -o %T 2>/dev/null || true)
  [ "$state" = RUNNING ] && break
  sleep 0.1
done
sleep 2
log "sending SIGTERM to task ${array}_1 (state: ${state:-?})"
scancel --signal=TERM --batch "${array}_1" || true

# Wait for everything (array and merge) to leave the queue. A requeued task
# waits for its begin time (Slurm delays requeued jobs); release it at once.
# Meanwhile count the runs registered as writers of the job directory at
# once (.writers/, one file per live run): array tasks of one job must run in
# parallel, not wait for each other's locks.
deadline=$((SECONDS + 300))
released=0
overlap=0
while [ -n "$(squeue -h 2>/dev/null)" ]; do
  n=$(ls -1 "out dir/slurm_test/.writers" 2>/dev/null | wc -l)
  [ "$n" -gt "$overlap" ] && overlap=$n
  [ $SECONDS -gt $deadline ] && { log "timeout waiting for jobs"; squeue; exit 1; }
  if [ $released -eq 0 ] && squeue -h -j "${array}_1" -o '%T %r' 2>/dev/null | grep -q '^PENDING BeginTime'; then
    log "task ${array}_1 requeued (pending on its begin time); releasing it now"
    scontrol update JobId="${array}_1" StartTime=now || true
    released=1
  fi
  sleep 0.2
done
log "at most $overlap array tasks were writing the job directory at once"
[ "$overlap" -ge 2 ] || { log "array tasks never ran at the same time"; exit 1; }
log "task logs:"
for f in fedbandits-*_*.out; do sed "s/^/[slurm-test]   $f: /" "$f"; done
log "merge log:"
sed 's/^/[slurm-test]   /' fedbandits-merge-"$merge".out
grep -q "requeueing" fedbandits-"${array}"_1.out || { log "task 1 was not requeued"; exit 1; }
if grep -q "requeueing" fedbandits-"${array}"_0.out; then log "task 0 was requeued with task 1 (the whole array was requeued)"; exit 1; fi
grep -q ", 0 missing, 0 duplicated" fedbandits-merge-"$merge".out || { log "merge found gaps"; exit 1; }
# The tasks' .out files carry the engine's progress lines (start and done).
grep -q "start: " fedbandits-"${array}"_0.out && grep -q "done: " fedbandits-"${array}"_0.out \
  || { log "task 0's .out has no progress lines"; exit 1; }
# Shard 2 ran as task 0 of the second array.
grep -q "fedbandits task 2/3" fedbandits-"${arrays#*:}"_0.out || { log "the second array did not run shard 2"; exit 1; }

# The merged data must equal a single-process run of the same job.
"$bin" run "slurm test.yaml" --out single --quiet >/dev/null 2>&1
"$py" - "out dir/slurm_test" "single/slurm_test" <<'PY'
import sys, glob
import pyarrow.parquet as pq
def rows(d):
    t = pq.read_table(sorted(glob.glob(d + "/part-*.parquet"))).drop(["wall_seconds"])
    return sorted(map(repr, t.to_pylist()))
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert a == b, f"merged data differ from a single-process run ({len(a)} vs {len(b)} rows)"
print(f"[slurm-test] merged data equal the single-process run: {len(a)} rows")
PY
log "ok"
