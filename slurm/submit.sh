#!/usr/bin/env bash
# fedbandits: submit a job file as Slurm array(s) plus a merge job.
#
#   slurm/submit.sh JOB.yaml
#
# Configuration (environment variables; see slurm/README.md):
#   FEDBANDITS_TASKS      number of shards (default 100)
#   FEDBANDITS_MAX_ARRAY_SIZE  the cluster's MaxArraySize (default: read from
#                         `scontrol show config`); more shards than that are
#                         submitted as several arrays, each task adding its
#                         array's offset to its index
#   FEDBANDITS_THREADS    CPUs per task (default 2)
#   FEDBANDITS_TIME       time limit per task (default: from `fedbandits plan`)
#   FEDBANDITS_MEM        memory per task, as sbatch --mem (default: from
#                         `fedbandits plan`: its model x 1.25, at least 32M)
#   FEDBANDITS_MERGE_TIME, FEDBANDITS_MERGE_MEM  the merge job's (default:
#                         from `fedbandits plan`)
#   FEDBANDITS_SHARDS     only these shards, e.g. 1,4 (what `merge` prints
#                         for missing shards); default all
#   FEDBANDITS_PARTITION, FEDBANDITS_ACCOUNT, FEDBANDITS_GPUS (e.g. 1)
#   FEDBANDITS_OUT        results root (default: the job's `output:`)
#   FEDBANDITS_BIN        the fedbandits binary (default: fedbandits on PATH)
#   FEDBANDITS_SBATCH_ARGS  extra sbatch arguments for the arrays and the
#                         merge job (e.g. --qos=long)
#   FEDBANDITS_MERGE_SBATCH_ARGS  extra sbatch arguments for the merge job
#                         only (after the others: they win)
#   FEDBANDITS_RELEASE    1 (default): a task that requeues itself submits a
#                         small helper job that lifts Slurm's hold on it
#                         (slurm/README.md, "Requeues"); 0: not
#   FEDBANDITS_NICE       the arrays' sbatch --nice (default 100): below
#                         the release helper's 0, so that a requeued task's
#                         helper starts before the array's pending tasks
#                         (slurm/README.md, "Requeues"); 0: not
#   FEDBANDITS_LOG_SECONDS  seconds between the progress lines each task
#                         writes to its .out file (default 60; 0: start
#                         and end only)
# Prints what it submitted; the last line is machine-readable:
#   ARRAY_ID[:ARRAY_ID...] MERGE_ID
# Exits non-zero, saying what was already submitted, if any sbatch fails.
set -euo pipefail
job=${1:?usage: slurm/submit.sh JOB.yaml}
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "submit.sh: $*" >&2; exit 1; }
is_count() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ]; }
: "${FEDBANDITS_BIN:=fedbandits}"
: "${FEDBANDITS_TASKS:=100}"
: "${FEDBANDITS_THREADS:=2}"
is_count "$FEDBANDITS_TASKS" || die "FEDBANDITS_TASKS must be a whole number of shards, at least 1 (got '$FEDBANDITS_TASKS')"
is_count "$FEDBANDITS_THREADS" || die "FEDBANDITS_THREADS must be a whole number of CPUs, at least 1 (got '$FEDBANDITS_THREADS')"
[ -r "$job" ] || die "cannot read job file '$job'"

# The cluster's array limit: task indices run from 0 to MaxArraySize - 1.
max_array=${FEDBANDITS_MAX_ARRAY_SIZE:-}
if [ -z "$max_array" ]; then
  max_array=$(scontrol show config 2>/dev/null | awk -F'= *' '/^MaxArraySize/ {print $2; exit}' | tr -d ' ') || true
  is_count "${max_array:-}" || die "could not read MaxArraySize from 'scontrol show config'; set FEDBANDITS_MAX_ARRAY_SIZE"
fi
is_count "$max_array" || die "FEDBANDITS_MAX_ARRAY_SIZE must be a whole number, at least 1 (got '$max_array')"

out_args=()
[ -n "${FEDBANDITS_OUT:-}" ] && out_args=(--out "$FEDBANDITS_OUT")
plan=$("$FEDBANDITS_BIN" plan "$job" --tasks "$FEDBANDITS_TASKS" --threads "$FEDBANDITS_THREADS" "${out_args[@]}") ||
  die "fedbandits plan failed for '$job' (its error is above); nothing submitted"
echo "$plan" | head -6 >&2
results=$(echo "$plan" | sed -n 's/^results: //p' | head -1)
[ -n "$results" ] || die "fedbandits plan printed no 'results:' line (is FEDBANDITS_BIN older than this script?)"
# `plan`'s request: "slurm request: array --cpus-per-task=T --time=HH:MM:SS
# --mem=NM; merge --time=HH:MM:SS --mem=NM (...)".
request=$(echo "$plan" | sed -n 's/^slurm request: //p' | head -1)
[ -n "$request" ] || die "fedbandits plan printed no 'slurm request:' line (is FEDBANDITS_BIN older than this script?)"
array_request=${request%%;*}
merge_request=${request#*; merge }
field() { echo "$1" | grep -Eo -- "--$2=[^ ;]+" | head -1 | cut -d= -f2; }
time_limit=${FEDBANDITS_TIME:-$(field "$array_request" time)}
mem=${FEDBANDITS_MEM:-$(field "$array_request" mem)}
merge_time=${FEDBANDITS_MERGE_TIME:-$(field "$merge_request" time)}
merge_mem=${FEDBANDITS_MERGE_MEM:-$(field "$merge_request" mem)}
for v in time_limit mem merge_time merge_mem; do
  [ -n "${!v}" ] || die "could not read $v from fedbandits plan's 'slurm request:' line: $request"
done
identity=$(echo "$plan" | sed -n 's/^job identity: //p' | head -1)
[ -n "$identity" ] || die "fedbandits plan printed no 'job identity:' line (is FEDBANDITS_BIN older than this script?)"
# Another version of the job writing the results now: each task of this
# one would refuse to start (plan said so).
if busy=$(echo "$plan" | grep "^warning: .* is being written by .* another version"); then
  die "${busy#warning: }; nothing submitted"
fi
# Another version's tasks still queued or running for these results
# (each array carries its job's identity and results in its comment): they
# would refuse this version's tasks, or these theirs.
case "$results" in /*) abs_results=$results ;; *) abs_results=$PWD/$results ;; esac
others=""
# squeue: "ARRAY_JOB_ID COMMENT", the comment "fedbandits:IDENTITY:RESULTS".
while IFS= read -r row; do
  comment=${row#* }
  [ "${comment:0:11}" = "fedbandits:" ] && [ "${comment:28}" = "$abs_results" ] && [ "${comment:11:16}" != "$identity" ] &&
    case " $others " in *" ${row%% *} "*) ;; *) others="$others ${row%% *}" ;; esac
done < <(squeue -h -u "$(id -un)" -o '%F %k' 2>/dev/null)
others=${others# }
if [ -n "$others" ]; then
  die "array job(s) $others of another version of this job (an earlier job file) are still queued or running for $results; their tasks and this version's would refuse each other. Wait for them to end (or scancel $others), or submit the edited job with FEDBANDITS_OUT set to another directory; nothing submitted"
fi

# The shards to submit: all, or FEDBANDITS_SHARDS (e.g. 1,4).
shards=()
if [ -n "${FEDBANDITS_SHARDS:-}" ]; then
  IFS=, read -r -a shards <<<"$FEDBANDITS_SHARDS"
  for s in "${shards[@]}"; do
    [[ $s =~ ^[0-9]+$ ]] && [ "$s" -lt "$FEDBANDITS_TASKS" ] ||
      die "FEDBANDITS_SHARDS must list shard indices below FEDBANDITS_TASKS=$FEDBANDITS_TASKS, comma-separated (got '$FEDBANDITS_SHARDS')"
  done
else
  for ((s = 0; s < FEDBANDITS_TASKS; s++)); do shards+=("$s"); done
fi

common=()
[ -n "${FEDBANDITS_PARTITION:-}" ] && common+=(--partition="$FEDBANDITS_PARTITION")
[ -n "${FEDBANDITS_ACCOUNT:-}" ] && common+=(--account="$FEDBANDITS_ACCOUNT")
# shellcheck disable=SC2206
[ -n "${FEDBANDITS_SBATCH_ARGS:-}" ] && common+=($FEDBANDITS_SBATCH_ARGS)
# The comment names the job's identity and results (the check above).
: "${FEDBANDITS_NICE:=100}"
[[ $FEDBANDITS_NICE =~ ^[0-9]+$ ]] || die "FEDBANDITS_NICE must be a whole number, at least 0 (got '$FEDBANDITS_NICE')"
args=(--parsable --cpus-per-task="$FEDBANDITS_THREADS" --time="$time_limit" --mem="$mem" --nice="$FEDBANDITS_NICE"
  --comment="fedbandits:$identity:$abs_results" "${common[@]}")
[ -n "${FEDBANDITS_GPUS:-}" ] && args+=(--gres="gpu:${FEDBANDITS_GPUS}")
merge_args=(--parsable --time="$merge_time" --mem="$merge_mem" "${common[@]}")
# shellcheck disable=SC2206
[ -n "${FEDBANDITS_MERGE_SBATCH_ARGS:-}" ] && merge_args+=($FEDBANDITS_MERGE_SBATCH_ARGS)
export FEDBANDITS_BIN FEDBANDITS_JOB="$job" FEDBANDITS_TASKS FEDBANDITS_OUT="${FEDBANDITS_OUT:-}"
# For the tasks' release helper and the merge job's resubmission lines.
abs_job="$(cd "$(dirname "$job")" && pwd)/$(basename "$job")"
export FEDBANDITS_COMMON_ARGS="${common[*]}" FEDBANDITS_SUBMIT="$here/submit.sh" FEDBANDITS_ABS_JOB="$abs_job"
export FEDBANDITS_NICE FEDBANDITS_THREADS FEDBANDITS_TIME="$time_limit" FEDBANDITS_MEM="$mem" FEDBANDITS_MERGE_TIME="$merge_time" \
  FEDBANDITS_MERGE_MEM="$merge_mem" FEDBANDITS_MAX_ARRAY_SIZE="$max_array"

# sbatch_checked DESCRIPTION ARGS...: the job id (sbatch --parsable prints
# ID or ID;CLUSTER on stdout; its warnings on stderr are passed on), or a
# clear failure.
submitted=()
sbatch_checked() {
  local what=$1 reply errors
  shift
  errors=$(mktemp)
  if ! reply=$(sbatch "$@" 2>"$errors") || ! [[ ${reply%%;*} =~ ^[0-9]+$ ]]; then
    echo "submit.sh: sbatch failed for the $what: $(cat "$errors")${reply:+ (stdout: $reply)}" >&2
    rm -f "$errors"
    if [ ${#submitted[@]} -gt 0 ]; then
      echo "submit.sh: already submitted: ${submitted[*]}; cancel them with: scancel ${submitted[*]}" >&2
      echo "submit.sh: (or keep them and, once they end, run: $FEDBANDITS_BIN merge '$results')" >&2
    fi
    exit 1
  fi
  cat "$errors" >&2
  rm -f "$errors"
  echo "${reply%%;*}"
}

# One array per block of MaxArraySize shards that holds any to submit; its
# tasks add the block's offset to their index.
arrays=()
array_offsets=""
for ((start = 0; start < FEDBANDITS_TASKS; start += max_array)); do
  indices=()
  for s in "${shards[@]}"; do
    if [ "$s" -ge "$start" ] && [ "$s" -lt $((start + max_array)) ]; then indices+=($((s - start))); fi
  done
  [ ${#indices[@]} -gt 0 ] || continue
  block=$((FEDBANDITS_TASKS - start < max_array ? FEDBANDITS_TASKS - start : max_array))
  list=$(IFS=,; echo "${indices[*]}")
  [ ${#indices[@]} -eq "$block" ] && list="0-$((block - 1))"
  id=$(FEDBANDITS_TASK_OFFSET=$start sbatch_checked "array of shards $start-$((start + block - 1)) (indices $list)" \
    "${args[@]}" --array="$list" --export=ALL "$here/fedbandits.sbatch")
  arrays+=("$id")
  submitted+=("$id")
  array_offsets+="$id@$start "
  echo "submitted array job $id: ${#indices[@]} task(s) (array indices $list, offset $start) of $FEDBANDITS_TASKS shards," \
    "$FEDBANDITS_THREADS CPU(s), $time_limit and $mem each"
done
deps=$(IFS=:; echo "${arrays[*]}")
# The merge job finds each missing shard's .out (and Slurm's state) by
# its array and offset.
export FEDBANDITS_ARRAYS="${array_offsets% }" FEDBANDITS_SUBMITTED_SHARDS="$(IFS=,; echo "${shards[*]}")"
merge=$(FEDBANDITS_RESULTS="$results" sbatch_checked "merge job" "${merge_args[@]}" --dependency="afterany:$deps" \
  --export=ALL "$here/merge.sbatch")
echo "submitted merge job $merge (after $deps, $merge_time and $merge_mem): fedbandits merge '$results'"
[ ${#arrays[@]} -gt 1 ] && echo "($FEDBANDITS_TASKS shards exceed MaxArraySize $max_array: ${#arrays[@]} arrays)"
echo "$deps $merge"
