#!/usr/bin/env bash
# fedbandits: the checks to run whenever a GPU machine is at hand, in stages
# that each fit one 10-minute call of a lent machine (kernels/README.md, "On
# a GPU machine"). Run from the repository root on the GPU machine, with the
# binaries built where Rust is:
#
#   cargo build --release && cargo test --release --no-run
#   # optional, for `ncu` before/after: the binary of an earlier commit
#   # (136cc9c: the multi-round kernels' layout before issue 74's, with
#   # the per-lane scratch, 80 and 128 registers)
#   git worktree add /tmp/before <commit> && (cd /tmp/before && cargo build --release)
#   mkdir -p before && cp /tmp/before/target/release/fedbandits before/
#
#   analysis/gpu/device_checks.sh parity    OUT   # the device parity test
#   analysis/gpu/device_checks.sh calibrate OUT   # calibrate --report at 64, 1024, 4096
#   analysis/gpu/device_checks.sh ncu       OUT [before/fedbandits]
#   analysis/gpu/device_checks.sh watchdog  OUT   # after calibrate: the abort path on the device
#
# Everything goes to OUT (logs, the report, ncu's CSV); the exit status is
# the first failing step's. Nothing here is timed by the script itself: the
# numbers are the tools' own.
set -u
stage=${1:?stage: parity, calibrate, ncu or watchdog}
out=${2:?output folder}
before=${3:-}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bin=target/release/fedbandits
status=0
note() { echo "== $*" | tee -a "$out/steps.log"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.csv" 2>&1
git log -1 --format='%H %cd' > "$out/commit.txt" 2>/dev/null || true

case "$stage" in
parity)
    # The integration tests' binary of `cargo test --release --no-run`, its
    # `cuda` suite (the device parity test is the one marked ignored).
    for t in target/release/deps/integration-*; do
        [ -x "$t" ] || continue
        note "$t cuda:: --include-ignored"
        timeout 420 "$t" cuda:: --include-ignored --nocapture > "$out/parity.log" 2>&1 || status=$?
        grep -E "^test result|device_matches_cpu" "$out/parity.log" | tee -a "$out/steps.log"
    done
    ;;
calibrate)
    note "calibrate --seconds 1 --report"
    timeout 560 "$bin" calibrate --seconds 1 --report "$out/calibrate.md" > "$out/calibrate.log" 2>&1 || status=$?
    tail -5 "$out/calibrate.log" | tee -a "$out/steps.log"
    ;;
ncu)
    # The main kernels of the linear family at 1024 federations, one
    # multi-round launch each (the second: past the first's warm-up).
    kernels='regex:fb_linear_rounds_coop|fb_feducb_rounds|fb_peer_rounds'
    for pair in "after:$bin" ${before:+"before:$before"}; do
        label=${pair%%:*}
        b=${pair#*:}
        for w in linear_d10_k100_m100 feducb_d10_k100_m100 decentralized_ring_m16_d10; do
            note "ncu $label $w"
            timeout 150 ncu --kernel-name "$kernels" --launch-skip 1 --launch-count 1 \
                --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
                --csv "$b" bench --backend cuda --only "$w" --federations 1024 --rounds 192 \
                > "$out/ncu-$label-$w.csv" 2> "$out/ncu-$label-$w.err" || status=$?
        done
    done
    ;;
watchdog)
    # The watchdog's abort path on real hardware: a floor of 1 ms makes
    # every chunk of FedUCB (federations of 100 agents over 25 blocks
    # meeting at group barriers) pass its deadline, so blocks waiting at a
    # barrier are asked to give up. Expected: the run ends within seconds
    # with the watchdog's error naming fb_feducb_rounds, or with "finished
    # after its deadline" warnings only; a hang (the timeout's 124) is a
    # failure. The parity record `calibrate` wrote is copied so that the
    # gate lets the device run (the check itself would fail at 1 ms).
    cache=$(mktemp -d)
    cp -r "${FEDBANDITS_CACHE_DIR:-$HOME/.cache/fedbandits}/." "$cache/" 2>/dev/null || true
    note "FEDBANDITS_WATCHDOG_SECONDS=0.001 bench --backend cuda --only feducb_d10_k100_m100 --federations 1024"
    FEDBANDITS_CACHE_DIR="$cache" FEDBANDITS_WATCHDOG_SECONDS=0.001 timeout 120 "$bin" bench --backend cuda \
        --only feducb_d10_k100_m100 --federations 1024 --rounds 192 > "$out/watchdog.log" 2>&1
    rc=$?
    echo "exit status $rc" >> "$out/watchdog.log"
    [ "$rc" = 124 ] && status=124
    grep -E "watchdog|deadline|exit status" "$out/watchdog.log" | head -5 | tee -a "$out/steps.log"
    rm -rf "$cache"
    ;;
*)
    echo "unknown stage $stage: parity, calibrate, ncu or watchdog" >&2
    exit 2
    ;;
esac
exit "$status"
