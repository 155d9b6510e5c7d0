//! Behaviour the papers report, tested in the papers' own settings with fixed
//! seeds and paired z statistics over repetitions (cells of one job share
//! theta*, decision sets and reward noise, so paired differences are the
//! right comparison). Where a paper's claim does not reproduce, the test pins
//! what is true instead and says so. The claims of all four papers, on the
//! bundled `_small` job files with the verdicts REPRODUCTION.md prints, are
//! `analysis/tests/test_claims.py` (`fedbandits_analysis.claims`); Fig. 2a's
//! "neither protocol learns" and Fig. 1A's fall with epsilon moved there
//! (`2a-flat` with a mutation that makes it fail; Fig. 1A's fall is not
//! visible below T = 10^6, where the onset claims stand instead).

use fedbandits::job::{Cell, Job};
use fedbandits::sim::{RepResult, run_rep};
use rayon::prelude::*;
use std::path::Path;

fn job(yaml: &str) -> Job {
    Job::parse(Path::new("paper.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn finals(job: &Job, cell: &Cell) -> Vec<f64> {
    let ck = [job.horizon];
    (0..job.repetitions)
        .into_par_iter()
        .map(|r| {
            let res: RepResult = run_rep(cell, job.seed, r, &ck, &|_| {});
            res.points[0].agent_regret_mean
        })
        .collect()
}

/// Mean of b - a and its paired z statistic.
fn paired(a: &[f64], b: &[f64]) -> (f64, f64) {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let n = d.len() as f64;
    let m = d.iter().sum::<f64>() / n;
    let sd = (d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (m, m / (sd / n.sqrt()))
}

/// Final per-agent regrets of the cell with this algorithm and, if given,
/// parameter `key` equal to `value`.
fn finals_of(job: &Job, algo: &str, key: &str, value: Option<&str>) -> Vec<f64> {
    let c = job
        .cells
        .iter()
        .find(|c| {
            c.algorithm == algo && value.is_none_or(|v| c.params.get(key).map(|p| p.to_string()) == Some(v.into()))
        })
        .unwrap_or_else(|| panic!("no cell {algo} {key}={value:?}"));
    finals(job, c)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

const ZHOU: &str = "seed: 2023\nhorizon: 10000\nenvironment: linear_sphere\n";
/// The authors' settings: their reward (`raw`) and calibration (`code`).
const ZHOU_PARAMS: &str =
    "m: 100, d: 10, k: 100, batch_size: 25, noise_std: 0.5, subgaussian: 0.5, reward_on: raw, calibration: code";

#[test]
fn zhou_fig2b_vector_summation_beats_ldp() {
    // M = 100, K = 100, d = 10, T = 10^4, epsilon = 0.2, delta = 0.1.
    let j = job(&format!(
        "{ZHOU}repetitions: 3\nalgorithm: private_fedlinucb\nparams: {{{ZHOU_PARAMS}, epsilon: 0.2, delta: 0.1}}\ngrid: {{protocol: [ldp, sdp_vecsum]}}\n"
    ));
    let ldp = finals(&j, &j.cells[0]);
    let vs = finals(&j, &j.cells[1]);
    let (diff, z) = paired(&vs, &ldp);
    println!(
        "Fig. 2b: per-agent regret ldp {:.1}, sdp_vecsum {:.1}; ldp - vecsum = {diff:.1} (paired z {z:.1})",
        mean(&ldp),
        mean(&vs)
    );
    assert!(z > 3.0, "sdp_vecsum should be below ldp");
}

/// The learning-onset finding of REPRODUCTION.md: under the `log`
/// regime private FedUCB's first synchronization comes at a fraction of the
/// horizon, because the threshold D grows with T and the privacy term makes
/// the log-det statistic about d log 2 whatever the data; the non-private
/// algorithm syncs much earlier. Measured at M = 10, d = 10, epsilon = 1:
/// first sync at 8500 of T = 10^4 and 31900 of 4x10^4 (non-private: 1200,
/// 2900); the bounds below allow for other seeds.
#[test]
fn dubey_private_first_sync_is_a_fraction_of_the_horizon() {
    let first_sync = |horizon: u64, private: bool| -> u64 {
        let j = job(&format!(
            "seed: 2020\nrepetitions: 1\nhorizon: {horizon}\nalgorithm: feducb_centralized\nenvironment: linear_gap\n\
             params: {{m: 10, d: 10, delta: 0.1, sync: log, epsilon: 1, private: {private}, calibration: paper}}\n"
        ));
        let ck: Vec<u64> = (1..=horizon / 100).map(|i| i * 100).collect();
        let res = run_rep(&j.cells[0], j.seed, 0, &ck, &|_| {});
        res.points
            .iter()
            .find(|p| p.counters.sync_rounds >= 1)
            .map_or(u64::MAX, |p| p.t)
    };
    let (p1, p4) = (first_sync(10_000, true), first_sync(40_000, true));
    let (n1, n4) = (first_sync(10_000, false), first_sync(40_000, false));
    println!("first sync: private {p1} of 1e4, {p4} of 4e4; non-private {n1}, {n4}");
    // A fraction of T at both horizons, growing with T ...
    for (t, h) in [(p1, 10_000.0), (p4, 40_000.0)] {
        let f = t as f64 / h;
        assert!((0.3..=1.0).contains(&f), "private first sync at {t} of {h}");
    }
    assert!(
        p4 as f64 >= 2.5 * p1 as f64,
        "private first sync {p1} -> {p4}: not growing with T"
    );
    // ... and far later than without privacy.
    assert!(
        n1 * 3 < p1 && n4 * 3 < p4,
        "non-private {n1}, {n4} vs private {p1}, {p4}"
    );
}

#[test]
fn dubey_fig1c_regret_grows_with_d() {
    // M = 10, epsilon = 1, delta = 0.1, log regime; T = 5000 (the paper: 10^6).
    let j = job(
        "seed: 2020\nrepetitions: 6\nhorizon: 5000\nalgorithm: feducb_centralized\nenvironment: linear_gap\nparams: {m: 10, epsilon: 1, delta: 0.1, sync: log, calibration: paper}\ngrid: {d: [8, 16, 32]}\n",
    );
    let r: Vec<Vec<f64>> = j.cells.iter().map(|c| finals(&j, c)).collect();
    println!(
        "Fig. 1C: per-agent regret at d = 8, 16, 32: {:.1} {:.1} {:.1}",
        mean(&r[0]),
        mean(&r[1]),
        mean(&r[2])
    );
    // Growth from d = 8 is clear; between 16 and 32 both sit close to the
    // no-learning ceiling at this horizon (the paper's quadratic growth needs
    // T ~ 10^6), so only d = 8 against the larger dimensions is asserted.
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        let (diff, z) = paired(&r[a], &r[b]);
        println!("  d index {a} -> {b}: rise {diff:.2} (paired z {z:.1})");
    }
    for b in [1, 2] {
        let (_, z) = paired(&r[0], &r[b]);
        assert!(z > 3.0, "regret should grow from d = 8");
    }
}

#[test]
fn decentralized_feducb_complete_graph_tracks_centralized_and_line_is_worse() {
    // Non-private FedUCB, log regime, M = 10, d = 5, K = 20, T = 3000.
    // Tolerance: on the complete graph with gamma = 1 (messages one round late)
    // the per-agent regret is within 3% of the centralized algorithm's; on a
    // line graph (gamma = 1) it is higher with paired z > 3.
    let j = job(
        "seed: 5\nrepetitions: 6\nhorizon: 3000\nalgorithm: [feducb_centralized, feducb_decentralized]\nenvironment: linear_gap\nparams: {m: 10, d: 5, k: 20, private: false, sync: log, gamma: 1}\ngrid: {graph: [complete, line]}\n",
    );
    let get = |algo: &str, graph: Option<&str>| finals_of(&j, algo, "graph", graph);
    let cen = get("feducb_centralized", None);
    let complete = get("feducb_decentralized", Some("complete"));
    let line = get("feducb_decentralized", Some("line"));
    let rel = (mean(&complete) - mean(&cen)).abs() / mean(&cen);
    let (diff, z) = paired(&complete, &line);
    println!(
        "decentralized: centralized {:.2}, complete {:.2} (relative difference {rel:.4}), line {:.2}; line - complete = {diff:.2} (paired z {z:.1})",
        mean(&cen),
        mean(&complete),
        mean(&line)
    );
    assert!(rel < 0.03);
    assert!(z > 3.0);
}
