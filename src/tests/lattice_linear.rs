//! `sampler: discrete` for the linear family's Gaussian trees
//! (`privacy::tree_lattice`) end to end: a job's rows state the sampler and
//! the lattice, the exact calibration meets the target under the lattice
//! bound, the output is bit-identical across thread counts, the device
//! refuses the cell and says why rather than drawing float noise, and
//! sdp_vecsum (no tree) does not take the sampler.

use crate::support::runs::{assert_bits_verdicts, f64_at, run_job, str_at, u64_at};
use fedbandits::backend::BatchError;
use fedbandits::job::Job;
use fedbandits::sim::run_batch;
use std::collections::BTreeMap;
use std::path::Path;

const JOB: &str = "\
name: lattice_linear
seed: 21
horizon: 600
repetitions: 2
checkpoints: {every: 200}
algorithm: [private_fedlinucb, feducb_centralized, feducb_decentralized]
environment: linear_sphere
params: {m: 3, d: 3, k: 8, delta: 0.001, clip_rewards: true, batch_size: 20, graph: ring, gamma: 1}
grid: {epsilon: [0.3, 4], sampler: [float, discrete]}
";

/// What a run wrote, per cell label (algorithm, epsilon, sampler): the
/// final rows' (agent regret bits, acct_epsilon, acct_lattice_step,
/// acct_sensitivity) of each repetition.
type Rows = BTreeMap<(String, String, String), Vec<(u64, f64, Option<f64>, f64)>>;

fn run(dir: &Path, threads: &str) -> Rows {
    let mut rows = Rows::new();
    for b in &run_job(dir, "lattice_linear", JOB, threads) {
        for i in (0..b.num_rows()).filter(|&i| u64_at(b, "t", i) == 600) {
            let key = (
                str_at(b, "algorithm", i),
                format!("{}", f64_at(b, "epsilon", i).unwrap()),
                str_at(b, "sampler", i),
            );
            rows.entry(key).or_default().push((
                f64_at(b, "agent_regret", i).unwrap().to_bits(),
                f64_at(b, "acct_epsilon", i).unwrap(),
                f64_at(b, "acct_lattice_step", i),
                f64_at(b, "acct_sensitivity", i).unwrap(),
            ));
        }
    }
    rows
}

/// Every private algorithm with both samplers at epsilon 0.3 and 4:
/// discrete cells' figures in [0.99, 1] x the target, their sensitivity
/// above the float cell's by less than 1e-4 relative (the rounding), the
/// lattice step a power of two (every release is on the lattice, FedUCB's
/// private schedule's sparse vector test too); float cells no step; regrets that differ between
/// the samplers (different noise) and are bit-identical at 1 and 2
/// threads.
#[test]
fn discrete_linear_cells_state_their_lattice_and_meet_the_target() {
    let dir = std::env::temp_dir().join(format!("fedbandits-test-{}-lattice-linear", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let one = run(&dir, "1");
    let two = run(&dir, "2");
    assert_eq!(one, two, "the output depends on the thread count");
    assert_eq!(one.len(), 12);
    for ((algo, eps, sampler), reps) in &one {
        let target: f64 = eps.parse().unwrap();
        let float = &one[&(algo.clone(), eps.clone(), "float".to_string())];
        for (r, f) in reps.iter().zip(float) {
            let (_, e, step, sens) = *r;
            assert!(e <= target && e >= 0.99 * target, "{algo} {eps} {sampler}: {e}");
            if sampler == "float" {
                assert_eq!(step, None);
                continue;
            }
            assert!(sens > f.3 && sens < f.3 * (1.0 + 1e-4), "{algo}: {sens} vs {}", f.3);
            assert_ne!(r.0, f.0, "{algo} {eps}: the samplers drew the same regret");
            // Every release on the lattice, FedUCB's private schedule too.
            let s = step.unwrap_or_else(|| panic!("{algo}: no lattice step"));
            assert_eq!(s.log2().fract(), 0.0, "step {s}");
        }
    }
}

/// `audit --bits` on the trees (4000 releases per cell): every discrete
/// cell passes (its releases are lattice points, reachable from the
/// neighbour's rounded leaf); every float cell fails the cancellation test
/// with a delta lower bound above the cell's delta 0.001 (the figure does
/// not hold for the bits), and the command exits 1. sdp_vecsum passes.
#[test]
fn audit_bits_passes_the_discrete_trees_and_fails_the_float_ones() {
    let dir = std::env::temp_dir().join(format!("fedbandits-test-{}-lattice-linear-bits", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert_bits_verdicts(&dir, JOB, 4000, 12, 0.001);
    // sdp_vecsum beside the ldp tree: its releases are integer sums with
    // Binomial noise, reachable from the neighbour (one cell per epsilon:
    // it does not take the sampler).
    let vecsum = JOB
        .replace(
            "[private_fedlinucb, feducb_centralized, feducb_decentralized]",
            "private_fedlinucb",
        )
        .replace(", graph: ring, gamma: 1", "")
        .replace(
            "sampler: [float, discrete]}",
            "sampler: [float, discrete], protocol: [ldp, sdp_vecsum]}",
        );
    let rows = assert_bits_verdicts(&dir, &vecsum, 2000, 6, 0.001);
    assert_eq!(rows.iter().filter(|r| r.contains(" binomial ")).count(), 2, "{rows:?}");
}

/// A discrete tree on the (emulated) device: refused, naming the sampler,
/// never drawn with the float kernel's noise.
#[test]
fn the_device_refuses_a_discrete_tree_and_says_why() {
    let job = Job::parse(
        Path::new("d.yaml"),
        "horizon: 40\nalgorithm: [private_fedlinucb, feducb_centralized]\nenvironment: linear_sphere\nparams: {m: 2, d: 3, k: 8, epsilon: 1, delta: 0.1, batch_size: 4, sampler: discrete}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dev = crate::support::emulated::emulated();
    for cell in &job.cells {
        let e = run_batch(cell, 1, &[0], &[40], &dev, &|_| {}).unwrap_err();
        assert!(
            matches!(e, BatchError::Unsupported(_)) && e.to_string().contains("sampler: discrete"),
            "{}: {e}",
            cell.label()
        );
    }
}

/// sdp_vecsum has no tree and does not read `sampler`: a grid of
/// protocols by samplers is three cells, sdp_vecsum's one without a
/// sampler value.
#[test]
fn sdp_vecsum_does_not_take_the_sampler() {
    let job = Job::parse(
        Path::new("v.yaml"),
        "horizon: 40\nalgorithm: private_fedlinucb\nenvironment: linear_sphere\nparams: {m: 2, d: 3, k: 8, epsilon: 1, delta: 0.1, batch_size: 4}\ngrid: {protocol: [ldp, sdp_vecsum], sampler: [float, discrete]}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let labels: Vec<String> = job.cells.iter().map(|c| c.label()).collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    let vecsum: Vec<&String> = labels.iter().filter(|l| l.contains("sdp_vecsum")).collect();
    assert_eq!(vecsum.len(), 1, "{labels:?}");
    assert!(!vecsum[0].contains("sampler"), "{labels:?}");
}
