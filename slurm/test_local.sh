#!/usr/bin/env bash
# fedbandits: end-to-end test of slurm/ against a real single-node Slurm on
# localhost (run by .ci/run; needs root for apt and munge).
#
# Starts munged, slurmctld and slurmd with a throw-away configuration
# (MaxArraySize=2, a node claiming 8 CPUs, two partitions of different
# priority tiers for preemption), checks that submit.sh refuses bad settings
# and reports failed sbatch calls, submits a small job (a file name and
# `output:` with spaces) as 4 shards by pasting `plan`'s suggested line
# (MaxArraySize splits them into two arrays), checks the memory and time
# limits Slurm was given, sends SIGTERM to one task, `scontrol requeue`s
# another and kills a third's engine with SIGKILL, checks that the requeued
# tasks restart at once (their helper lifts Slurm's requeue hold), that
# array tasks wrote the job directory at the same time, that the merge job
# names the killed shard and that its resubmission line completes the
# study, equal to a single-process run; then runs a task into a time limit
# and another into a preemption, each resumed and merged complete. While
# the time limit comes: a job booked too little memory (Slurm's
# OverMemoryKill, jobacct_gather/linux) must be named by the merge job as
# killed for memory, its resubmission line must raise FEDBANDITS_MEM and
# complete it; an edited job must be refused by submit.sh while the old
# version runs and while it is queued, and a task of it started by hand
# must refuse and say status 1. Stops every daemon it started, by PID.
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

# The node claims 8 CPUs whatever it has (config_overrides), so that the
# four one-CPU tasks, their release helpers and the merge job can all run.
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
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
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
NodeName=$(hostname -s) CPUs=8 RealMemory=$mem State=UNKNOWN
SlurmdParameters=config_overrides
MaxArraySize=2
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=debug Nodes=$(hostname -s) Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=10
PartitionName=high Nodes=$(hostname -s) MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
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
repetitions: 4
horizon: 400000
checkpoints: {every: 50000}
output: out dir
algorithm: [private_fedlinucb, independent]
environment: linear_sphere
params: {m: 8, d: 5, k: 20, epsilon: 1, delta: 0.1}
JOB
export FEDBANDITS_BIN="$bin" FEDBANDITS_SNAPSHOT_MINUTES=0

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
expect_failure "FEDBANDITS_SHARDS=5 of 3" "FEDBANDITS_SHARDS must list shard indices" \
  env FEDBANDITS_TASKS=3 FEDBANDITS_SHARDS=5 "$here/submit.sh" "slurm test.yaml"
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

# Submit with the line `plan` suggests, pasted as it is (its slurm/ is this
# one's). 4 shards with MaxArraySize=2: two arrays.
plan=$("$bin" plan "slurm test.yaml" --tasks 4 --threads 1)
line=$(echo "$plan" | sed -n 's/^suggested: \(.*slurm\/submit\.sh [^(]*\)  .*$/\1/p' | sed 's/ *$//')
log "pasting plan's suggestion: $line"
echo "$line" | grep -q "FEDBANDITS_TASKS=4 FEDBANDITS_THREADS=1 " || { log "plan's line lacks the tasks or threads"; exit 1; }
reply=$(eval "${line/slurm\/submit.sh/$here/submit.sh}")
echo "$reply" | sed 's/^/[slurm-test]   submit.sh: /'
ids=$(echo "$reply" | tail -1)
arrays=${ids% *}
merge=${ids#* }
array=${arrays%%:*}
array2=${arrays#*:}
[ "$(echo "$arrays" | tr ':' '\n' | wc -l)" -eq 2 ] || { log "4 shards with MaxArraySize=2 should be 2 arrays, got '$arrays'"; exit 1; }
log "submitted arrays $arrays (4 shards) and merge $merge"
# What Slurm was asked: plan's time and memory for the tasks and the merge job.
want_mem=$(echo "$plan" | sed -n 's/^slurm request: array .*--mem=\([0-9]*\)M;.*/\1/p')
want_merge=$(echo "$plan" | sed -n 's/^slurm request: .*; merge --time=\([0-9:]*\) --mem=\([0-9]*\)M.*/\1 \2/p')
for j in "${array}_0" "$merge"; do
  shown=$(scontrol show job "$j" | grep -Eo '(TimeLimit|MinMemoryNode)=[^ ]+' | tr '\n' ' ')
  log "scontrol show job $j: $shown"
  echo "$shown" | grep -q "MinMemoryNode=" || { log "no memory requested for $j"; exit 1; }
done
scontrol show job "${array}_0" | grep -q "MinMemoryNode=${want_mem}M" || { log "the array did not get --mem=${want_mem}M"; exit 1; }
scontrol show job "$merge" | grep -q "MinMemoryNode=${want_merge#* }M" || { log "the merge job did not get plan's memory"; exit 1; }
scontrol show job "$merge" | grep -q "TimeLimit=00:${want_merge% *}" || scontrol show job "$merge" | grep -q "TimeLimit=${want_merge% *}" \
  || { log "the merge job did not get plan's time limit ${want_merge% *}"; exit 1; }

# Wait until all four tasks run, then: SIGTERM task 1 (as --signal does
# before the time limit), `scontrol requeue` task 0 (as an operator may),
# kill -9 the engine of shard 2 (a crash).
for _ in $(seq 300); do
  n=$(squeue -h -t RUNNING -o %i 2>/dev/null | grep -c -E "^(${array}|${array2})_" || true)
  [ "$n" -ge 4 ] && break
  sleep 0.1
done
sleep 2
log "sending SIGTERM to task ${array}_1; scontrol requeue ${array}_0; kill -9 the engine of shard 2"
scancel --signal=TERM --batch "${array}_1" || true
scontrol requeue "${array}_0" || true
pkill -9 -f -- "--shard 2/4" || { log "no engine of shard 2 to kill"; exit 1; }

# Wait for everything to leave the queue, with no hand on the holds (each
# requeued task's helper job lifts Slurm's; checked below). Meanwhile count
# the runs registered as writers of the job directory at once (.writers/).
deadline=$((SECONDS + 300))
overlap=0
while [ -n "$(squeue -h 2>/dev/null)" ]; do
  n=$(ls -1 "out dir/slurm_test/.writers" 2>/dev/null | wc -l)
  [ "$n" -gt "$overlap" ] && overlap=$n
  [ $SECONDS -gt $deadline ] && { log "timeout waiting for jobs"; squeue; exit 1; }
  sleep 0.2
done
log "at most $overlap array tasks were writing the job directory at once"
[ "$overlap" -ge 2 ] || { log "array tasks never ran at the same time"; exit 1; }
log "task logs:"
for f in fedbandits-*_*.out; do sed "s/^/[slurm-test]   $f: /" "$f"; done
log "merge log:"
sed 's/^/[slurm-test]   /' fedbandits-merge-"$merge".out
grep -q "requeueing" fedbandits-"${array}"_1.out || { log "task 1 was not requeued"; exit 1; }
grep -q "start 2" fedbandits-"${array}"_0.out || { log "task 0 did not start again after scontrol requeue"; exit 1; }
# Both requeued tasks: their helper lifted the hold, and they started again
# within 60 s of their first start (Slurm's own hold is 120 s).
for t in 0 1; do
  f=fedbandits-"${array}"_$t.out
  grep -q "lift Slurm's requeue hold" "$f" || { log "task $t submitted no release helper"; exit 1; }
  grep -q "fedbandits-release: lifted Slurm's requeue hold" "$f" || { log "task $t's hold was not lifted"; exit 1; }
  first=$(date -d "$(sed -n 's/.*, start 1, \(.*\)$/\1/p' "$f")" +%s)
  again=$(date -d "$(sed -n 's/.*, start 2, \(.*\)$/\1/p' "$f")" +%s)
  log "task $t: started again $((again - first)) s after its first start"
  [ $((again - first)) -lt 60 ] || { log "task $t waited out Slurm's requeue hold"; exit 1; }
done
grep -q "was killed (status 137" fedbandits-"${array2}"_0.out || { log "the killed task's .out does not say so"; exit 1; }
# The tasks' .out files carry the engine's progress lines (start and done).
grep -q "start: " fedbandits-"${array2}"_1.out && grep -q "done: " fedbandits-"${array2}"_1.out \
  || { log "task 3's .out has no progress lines"; exit 1; }
grep -q "fedbandits task 3/4" fedbandits-"${array2}"_1.out || { log "the second array did not run shard 3"; exit 1; }

# The killed shard is missing; merge printed the line that resubmits it.
grep -q "missing shards: 2 (of 4)" fedbandits-merge-"$merge".out || { log "merge did not name shard 2 as missing"; exit 1; }
# Its error after its details, and one resubmission line (issue 73).
m=fedbandits-merge-"$merge".out
[ "$(grep -n "^missing shards" "$m" | cut -d: -f1)" -lt "$(grep -n "^error: results are incomplete" "$m" | cut -d: -f1)" ] \
  || { log "merge's error comes before its details"; exit 1; }
! grep -q "^or on Slurm" "$m" || { log "merge's .out has two resubmission lines"; exit 1; }
again=$(grep -A1 "^resubmit only the missing shards" fedbandits-merge-"$merge".out | tail -1 | sed 's/^ *//')
log "pasting merge's resubmission: $again"
reply=$(eval "$again")
echo "$reply" | sed 's/^/[slurm-test]   submit.sh: /'
merge2=$(echo "$reply" | tail -1 | cut -d' ' -f2)
deadline=$((SECONDS + 300))
while [ -n "$(squeue -h 2>/dev/null)" ]; do
  [ $SECONDS -gt $deadline ] && { log "timeout waiting for the resubmission"; squeue; exit 1; }
  sleep 0.2
done
sed 's/^/[slurm-test]   /' fedbandits-merge-"$merge2".out
grep -q ", 0 missing, 0 duplicated" fedbandits-merge-"$merge2".out || { log "merge found gaps after the resubmission"; exit 1; }

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
# A time limit and a preemption, each as Slurm delivers it. `limits` runs
# with --time=10:00; once it runs, its limit is cut to 2:01, so the next
# time-limit check (within 30 s) finds less than --signal's 120 s left and
# signals it; once it has requeued itself the limit is raised again.
# `preempt` is preempted by a job of the higher partition asking for every
# CPU (SIGTERM to every process, GraceTime 10 s; Slurm requeues it itself).
# Both must come back without waiting out the requeue hold and complete.
rm -f fedbandits-*.out
for name in limits preempt; do
  cat > "$name.yaml" <<JOB
name: $name
seed: 9
repetitions: 1
horizon: 20000000
checkpoints: {every: 5000000}
algorithm: independent
environment: linear_sphere
params: {m: 4, d: 4, k: 10}
JOB
done
wait_state() { # JOB STATE SECONDS
  for _ in $(seq $(($3 * 10))); do [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = "$2" ] && return 0; sleep 0.1; done
  log "$1 not $2 within $3 s"; squeue; exit 1
}
wait_empty() { # SECONDS WHAT
  local deadline=$((SECONDS + $1))
  while [ -n "$(squeue -h 2>/dev/null)" ]; do
    [ $SECONDS -gt $deadline ] && { log "timeout waiting for $2"; squeue; exit 1; }
    sleep 0.5
  done
}
lim=$(FEDBANDITS_TASKS=1 FEDBANDITS_THREADS=1 FEDBANDITS_TIME=10:00 "$here/submit.sh" limits.yaml 2>/dev/null | tail -1)
wait_state "${lim% *}_0" RUNNING 60
sleep 2
scontrol update JobId="${lim% *}_0" TimeLimit=00:02:01
log "limits (task ${lim% *}_0): time limit cut to 2:01 while it runs"
# While Slurm's time-limit check comes (up to a minute): a job killed for
# memory, and an edited job submitted while the old version runs.
cat > oom.yaml <<'JOB'
name: oom
seed: 2
repetitions: 2
horizon: 3000000
algorithm: independent
environment: linear_sphere
params: {m: 4, d: 4, k: 10}
JOB
oom=$(FEDBANDITS_TASKS=2 FEDBANDITS_THREADS=1 FEDBANDITS_MEM=6M "$here/submit.sh" oom.yaml 2>/dev/null | tail -1)
log "oom: arrays ${oom% *} with --mem=6M (the engine needs about 15 MiB), merge ${oom#* }"
# The edited job: plan warns and submit.sh refuses while `limits` runs;
# a task started by hand refuses at start, and its .out says status 1.
sed 's/^seed: 9/seed: 10/' limits.yaml > edited.yaml
expect_failure "an edited job while its old version runs" "is being written by 1 run(s) of another version of job limits" \
  env FEDBANDITS_TASKS=1 FEDBANDITS_THREADS=1 "$here/submit.sh" edited.yaml
hand=$(FEDBANDITS_JOB=edited.yaml FEDBANDITS_TASKS=1 sbatch --parsable --array=0 --mem=64M --export=ALL "$here/fedbandits.sbatch")
# Queued, not running: a held array of one version, another submitted.
# The first oom arrays and their merge must have left the queue first
# (killed for memory, merged): while a task of them still runs, submit.sh
# refuses the edited job for that run, the case above, which a loaded
# machine (the build beside this test) can make last long enough.
for _ in $(seq 600); do [ -z "$(squeue -h -j "${oom% *},${oom#* }" 2>/dev/null)" ] && break; sleep 0.1; done
held=$(FEDBANDITS_TASKS=1 FEDBANDITS_THREADS=1 FEDBANDITS_SBATCH_ARGS=--hold "$here/submit.sh" oom.yaml 2>/dev/null | tail -1)
sed -i 's/^seed: 2/seed: 3/' oom.yaml
expect_failure "an edited job while its old version is queued" "array job(s) [0-9 ]*\b${held% *}\b[0-9 ]* of another version" \
  env FEDBANDITS_TASKS=1 FEDBANDITS_THREADS=1 "$here/submit.sh" oom.yaml
sed -i 's/^seed: 3/seed: 2/' oom.yaml
scancel "${held% *}" "${held#* }"
for _ in $(seq 900); do grep -q "requeueing" fedbandits-"${lim% *}"_0.out 2>/dev/null && break; sleep 0.1; done
grep -q "requeueing" fedbandits-"${lim% *}"_0.out || { log "limits was not signalled at its time limit"; exit 1; }
scontrol update JobId="${lim% *}_0" TimeLimit=00:10:00 || true
wait_empty 300 "the time-limit run"
pre=$(FEDBANDITS_TASKS=1 FEDBANDITS_THREADS=1 "$here/submit.sh" preempt.yaml 2>/dev/null | tail -1)
wait_state "${pre% *}_0" RUNNING 60
sleep 2
high=$(sbatch --parsable -p high -c 8 --output=/dev/null --wrap "sleep 2")
log "preempt (task ${pre% *}_0): job $high of the high partition asks for all 8 CPUs"
wait_empty 300 "the preemption run"
for f in fedbandits-"${lim% *}"_0.out fedbandits-"${pre% *}"_0.out; do
  grep -v "^ \|agent regret\|acct eps\|^   \|fedbandits: backend\|fedbandits: cells" "$f" | sed "s/^/[slurm-test]   $f: /"
done
# The task of the edited job started by hand: refused, and said so.
f=fedbandits-"$hand"_0.out
grep -q "another version of job limits" "$f" && grep -q "stopped with an error (status 1; its message is above)" "$f" \
  || { log "the edited job's task did not refuse, or its .out misreads status 1"; cat "$f"; exit 1; }
log "edited job's task: $(grep "stopped with an error" "$f")"
# The job killed for memory: merge says so for each shard and raises
# FEDBANDITS_MEM in the line that resubmits them; pasted, it completes.
m=fedbandits-merge-"${oom#* }".out
sed "s/^/[slurm-test]   $m: /" "$m"
for t in 0 1; do
  grep -q "^why shard $t is missing (array task ${oom% *}_$t): OUT_OF_MEMORY (from its .out" "$m" \
    || { log "merge did not say that shard $t was killed for memory"; exit 1; }
done
grep -q "^FEDBANDITS_MEM raised from 6M to " "$m" || { log "merge did not raise FEDBANDITS_MEM"; exit 1; }
again=$(grep -A1 "^resubmit only the missing shards" "$m" | tail -1 | sed 's/^ *//')
echo "$again" | grep -q "FEDBANDITS_MEM=6M" && { log "the resubmission keeps the memory that ran out"; exit 1; }
reply=$(eval "$again" 2>/dev/null)
wait_empty 120 "the oom resubmission"
grep -q ", 0 missing, 0 duplicated" fedbandits-merge-"$(echo "$reply" | tail -1 | cut -d' ' -f2)".out \
  || { log "the oom resubmission did not complete"; exit 1; }
log "oom: the resubmission with $(echo "$again" | grep -o "FEDBANDITS_MEM=[^ ]*") completed"
for name in limits preempt; do
  m=$(grep -l "^merge results/$name:" fedbandits-merge-*.out | head -1)
  { [ -n "$m" ] && grep -q ", 0 missing, 0 duplicated" "$m"; } || { log "$name did not merge complete"; exit 1; }
  sed "s/^/[slurm-test]   $m: /" "$m"
done
f=fedbandits-"${lim% *}"_0.out
{ grep -q "start 2" "$f" && grep -q "resumed 1 repetition" "$f" && grep -q "lifted Slurm's requeue hold" "$f"; } \
  || { log "limits: not resumed promptly after its time limit"; exit 1; }
f=fedbandits-"${pre% *}"_0.out
grep -q "DUE TO PREEMPTION" "$f" || { log "preempt was not preempted"; exit 1; }
grep -q "scontrol requeue failed" "$f" || { log "preempt: the script's own requeue did not say it failed"; exit 1; }
{ grep -q "start 2" "$f" && grep -q "resumed 1 repetition" "$f" && grep -q "lifted Slurm's requeue hold" "$f"; } \
  || { log "preempt: not resumed promptly after its preemption"; exit 1; }
log "ok"
