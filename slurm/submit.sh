#!/usr/bin/env bash
# fedbandits: submit a job file as a Slurm array plus a merge job.
#
#   slurm/submit.sh JOB.yaml
#
# Configuration (environment variables; see slurm/README.md):
#   FEDBANDITS_TASKS      array size (default 100; capped by MaxArraySize)
#   FEDBANDITS_THREADS    CPUs per task (default 2)
#   FEDBANDITS_TIME       time limit per task (default: from `fedbandits plan`)
#   FEDBANDITS_PARTITION, FEDBANDITS_ACCOUNT, FEDBANDITS_GPUS (e.g. 1)
#   FEDBANDITS_OUT        results root (default results)
#   FEDBANDITS_BIN        the fedbandits binary (default: fedbandits on PATH)
#   FEDBANDITS_SBATCH_ARGS  extra sbatch arguments for the array
# Prints the array job id and the merge job id.
set -euo pipefail
job=${1:?usage: slurm/submit.sh JOB.yaml}
here=$(cd "$(dirname "$0")" && pwd)
: "${FEDBANDITS_BIN:=fedbandits}"
: "${FEDBANDITS_TASKS:=100}"
: "${FEDBANDITS_THREADS:=2}"
: "${FEDBANDITS_OUT:=results}"
plan=$("$FEDBANDITS_BIN" plan "$job" --tasks "$FEDBANDITS_TASKS" --threads "$FEDBANDITS_THREADS")
echo "$plan" | head -5 >&2
name=$("$FEDBANDITS_BIN" validate "$job" | head -1 | awk '{print $2}')
time_limit=${FEDBANDITS_TIME:-$(echo "$plan" | grep -Eo -- '--time=[0-9:]+' | head -1 | cut -d= -f2)}
args=(--parsable --array="0-$((FEDBANDITS_TASKS - 1))" --cpus-per-task="$FEDBANDITS_THREADS" --time="$time_limit")
[ -n "${FEDBANDITS_PARTITION:-}" ] && args+=(--partition="$FEDBANDITS_PARTITION")
[ -n "${FEDBANDITS_ACCOUNT:-}" ] && args+=(--account="$FEDBANDITS_ACCOUNT")
[ -n "${FEDBANDITS_GPUS:-}" ] && args+=(--gres="gpu:${FEDBANDITS_GPUS}")
# shellcheck disable=SC2206
[ -n "${FEDBANDITS_SBATCH_ARGS:-}" ] && args+=($FEDBANDITS_SBATCH_ARGS)
export FEDBANDITS_BIN FEDBANDITS_JOB="$job" FEDBANDITS_TASKS FEDBANDITS_OUT
array=$(sbatch "${args[@]}" --export=ALL "$here/fedbandits.sbatch")
array=${array%%;*}
merge_args=(--parsable --dependency="afterany:${array}")
[ -n "${FEDBANDITS_PARTITION:-}" ] && merge_args+=(--partition="$FEDBANDITS_PARTITION")
[ -n "${FEDBANDITS_ACCOUNT:-}" ] && merge_args+=(--account="$FEDBANDITS_ACCOUNT")
merge=$(FEDBANDITS_RESULTS="$FEDBANDITS_OUT/$name" sbatch "${merge_args[@]}" --export=ALL "$here/merge.sbatch")
merge=${merge%%;*}
echo "submitted array job ${array} (${FEDBANDITS_TASKS} tasks) and merge job ${merge} for ${name}"
echo "$array $merge"
