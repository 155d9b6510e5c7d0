//! Statistical and numerical acceptance tests of the linear family, with fixed
//! seeds and stated tolerances (run in release mode: `cargo test --release`).

use fedbandits::algo::linear::LinearAlgorithm;
use fedbandits::algo::linear::cpu::bank::AgentBank;
use fedbandits::algo::linear::feducb::DubeyConstants;
use fedbandits::backend::cpu::CpuBackend;
use fedbandits::env::{LinearEnv, LinearEnvKind, LinearEnvSpec};
use fedbandits::job::{Cell, Job};
use fedbandits::linalg;
use fedbandits::sim::{RepResult, run_rep};
use std::path::Path;

fn job(yaml: &str) -> Job {
    Job::parse(Path::new("test.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn run_cell(job: &Job, cell: &Cell) -> Vec<RepResult> {
    let ck = job.checkpoint_rounds();
    (0..job.repetitions)
        .map(|r| run_rep(cell, job.seed, r, &ck, &|_| {}))
        .collect()
}

/// Mean and standard error of the final per-agent regret.
fn final_regret(reps: &[RepResult]) -> (f64, f64) {
    let v: Vec<f64> = reps
        .iter()
        .map(|r| r.points.last().unwrap().agent_regret_mean)
        .collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

fn assert_curve_invariants(reps: &[RepResult]) {
    for r in reps {
        let mut prev = 0.0;
        for p in &r.points {
            assert!(p.group_regret >= prev, "group regret decreased at t={}", p.t);
            assert!(p.group_regret >= 0.0);
            assert!(p.agent_regret_max >= p.agent_regret_mean - 1e-9);
            prev = p.group_regret;
        }
    }
}

const BASE: &str =
    "seed: 7\nrepetitions: 8\nhorizon: 2000\ncheckpoints: {log_points: 20}\nenvironment: linear_sphere\n";

/// Paired z statistic of b - a over repetitions. Cells of one job share
/// theta*, decision sets and reward noise per repetition (common random
/// numbers), so the paired difference is the right comparison.
fn paired_z(a: &[RepResult], b: &[RepResult]) -> (f64, f64) {
    let d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| y.points.last().unwrap().agent_regret_mean - x.points.last().unwrap().agent_regret_mean)
        .collect();
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, mean / (sd / n.sqrt()))
}

#[test]
fn federation_beats_independent_beats_random() {
    // T = 2000, M = 10, d = 5, K = 20; 16 repetitions. Each ordering must
    // hold with a paired z statistic above 3.
    let j = job(&format!(
        "{}algorithm: [fedlinucb, independent, random]\nparams: {{m: 10, d: 5, k: 20}}\n",
        BASE.replace("repetitions: 8", "repetitions: 16")
    ));
    let res: Vec<Vec<RepResult>> = j.cells.iter().map(|c| run_cell(&j, c)).collect();
    for r in &res {
        assert_curve_invariants(r);
    }
    let (fed, ind, rnd) = (final_regret(&res[0]), final_regret(&res[1]), final_regret(&res[2]));
    println!("per-agent regret at T=2000 (mean, se): fedlinucb {fed:?} independent {ind:?} random {rnd:?}");
    let (d1, z1) = paired_z(&res[0], &res[1]);
    let (d2, z2) = paired_z(&res[1], &res[2]);
    println!("independent - fedlinucb = {d1:.2} (z {z1:.1}); random - independent = {d2:.2} (z {z2:.1})");
    assert!(z1 > 3.0, "fedlinucb not clearly below independent");
    assert!(z2 > 3.0, "independent not clearly below random");
}

#[test]
fn private_regret_rises_as_epsilon_falls() {
    let j = job(&format!(
        "{BASE}algorithm: private_fedlinucb\nparams: {{m: 10, d: 5, k: 20, delta: 0.1}}\ngrid: {{epsilon: [5, 1, 0.2]}}\n"
    ));
    let res: Vec<Vec<RepResult>> = j.cells.iter().map(|c| run_cell(&j, c)).collect();
    let means: Vec<(f64, f64)> = res.iter().map(|r| final_regret(r)).collect();
    println!("private_fedlinucb per-agent regret (mean, se) for epsilon 5, 1, 0.2: {means:?}");
    for w in res.windows(2) {
        let (diff, z) = paired_z(&w[0], &w[1]);
        println!("  rise {diff:.1} (paired z {z:.1})");
        assert!(z > 3.0, "regret did not rise clearly as epsilon fell: {means:?}");
    }
}

#[test]
fn feducb_sync_counts() {
    // every_round: exactly T syncs, 2M messages each.
    let t = 300;
    let j = job(&format!(
        "seed: 3\nrepetitions: 2\nhorizon: {t}\nalgorithm: feducb_centralized\nenvironment: linear_gap\nparams: {{m: 4, d: 4, k: 8, private: false, sync: every_round}}\n"
    ));
    for r in run_cell(&j, &j.cells[0]) {
        let c = r.points.last().unwrap().counters;
        assert_eq!(c.sync_rounds, t);
        assert_eq!(c.messages, 2 * 4 * t);
    }
    // Non-private log and sqrt_m: never more than Proposition 1's bound.
    for (sync, m, d, horizon) in [
        ("log", 10, 5, 2000),
        ("sqrt_m", 10, 5, 2000),
        ("log", 4, 3, 5000),
        ("sqrt_m", 20, 4, 3000),
    ] {
        let j = job(&format!(
            "seed: 5\nrepetitions: 3\nhorizon: {horizon}\nalgorithm: feducb_centralized\nenvironment: linear_gap\nparams: {{m: {m}, d: {d}, k: 10, private: false, sync: {sync}}}\n"
        ));
        let cell = &j.cells[0];
        let cfg = cell.config.get::<fedbandits::algo::linear::LinearConfig>().unwrap();
        let bound = DubeyConstants::new(cfg).proposition1_bound(cfg);
        for r in run_cell(&j, cell) {
            let n = r.points.last().unwrap().counters.sync_rounds;
            println!("non-private {sync} M={m} d={d} T={horizon}: {n} syncs (Proposition 1 bound {bound:.1})");
            assert!(n as f64 <= bound, "{sync}: {n} syncs exceed the bound {bound}");
            assert!(n >= 1, "{sync}: never synced");
        }
    }
    // Private runs: recorded, not forced.
    for sync in ["log", "sqrt_m"] {
        let j = job(&format!(
            "seed: 5\nrepetitions: 1\nhorizon: 2000\nalgorithm: feducb_centralized\nenvironment: linear_gap\nparams: {{m: 10, d: 5, k: 10, epsilon: 1, delta: 0.1, sync: {sync}}}\n"
        ));
        let cell = &j.cells[0];
        let cfg = cell.config.get::<fedbandits::algo::linear::LinearConfig>().unwrap();
        let c = DubeyConstants::new(cfg);
        let r = &run_cell(&j, cell)[0];
        let n = r.points.last().unwrap().counters.sync_rounds;
        let clock = 2000.0 / (c.threshold / (5.0 * 2f64.ln()));
        println!(
            "private {sync}: {n} syncs at T=2000 (Proposition 1 bound {:.1}; clock-driven estimate T d log2 / D = {clock:.1})",
            c.proposition1_bound(cfg)
        );
        assert!(n >= 1);
    }
}

#[test]
fn maintained_inverse_stays_close_to_direct_solve() {
    // 10^6 Sherman-Morrison updates at d = 10 through the engine's own agent
    // state, refactorized every R = 256 updates as OFUL does; the maintained
    // V^{-1} must be within 1e-9 (relative, Frobenius) of a direct inverse.
    let (d, lambda) = (10, 1.0);
    let spec = LinearEnvSpec {
        kind: LinearEnvKind::Sphere {
            noise_std: 0.5,
            reward_on_raw: true,
        },
        d,
        k: 8,
    };
    let env = LinearEnv::new(&spec, &[1, 2, 3]);
    let mut bank = AgentBank::new(&env, 1, lambda, f64::INFINITY);
    let mut base = vec![0.0; d * d];
    linalg::set_scaled_identity(&mut base, d, lambda);
    let backend = CpuBackend;
    let mut worst_between = 0.0f64;
    for n in 1..=1_000_000u32 {
        bank.step(0, &env, &backend, 1.0);
        if n % 99_991 == 0 {
            // Check mid-way between refactorizations too.
            worst_between = worst_between.max(rel_error(&bank, &base, d));
        }
        if bank.since_factor[0] >= 256 {
            bank.refactor(0, &base, &backend);
        }
    }
    let err = rel_error(&bank, &base, d);
    println!("relative error after 1e6 updates: {err:.3e} (worst mid-way {worst_between:.3e})");
    assert!(err < 1e-9 && worst_between < 1e-9);
    let _ = LinearAlgorithm::Independent;
}

fn rel_error(bank: &AgentBank, base: &[f64], d: usize) -> f64 {
    let v: Vec<f64> = base.iter().zip(&bank.gram[..d * d]).map(|(a, b)| a + b).collect();
    let mut inv = vec![0.0; d * d];
    let mut work = vec![0.0; d * d];
    let ld = linalg::spd_inverse(&v, d, &mut inv, &mut work).unwrap();
    assert!(
        (ld - bank.logdet[0]).abs() < 1e-8 * ld.abs().max(1.0),
        "log det drifted"
    );
    let num: f64 = inv
        .iter()
        .zip(&bank.vinv[..d * d])
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    let den: f64 = inv.iter().map(|a| a * a).sum::<f64>().sqrt();
    num / den
}

#[test]
fn linucb_learns_and_threshold_regime_orders_sync_counts() {
    // linucb: a single agent (m is forced to 1) beats the random policy.
    let j = job(
        "seed: 9\nrepetitions: 6\nhorizon: 2000\nalgorithm: [linucb, random]\nenvironment: linear_gap\nparams: {d: 5, k: 25, m: 1}\n",
    );
    assert_eq!(j.cells[0].config.agents(), 1);
    let res: Vec<Vec<RepResult>> = j.cells.iter().map(|c| run_cell(&j, c)).collect();
    let (d, z) = paired_z(&res[0], &res[1]);
    println!("linucb vs random: random - linucb = {d:.1} (paired z {z:.1})");
    assert!(z > 3.0);
    // threshold regime: a lower threshold D syncs at least as often.
    let counts: Vec<u64> = [1.0, 100.0, 10_000.0]
        .iter()
        .map(|th| {
            let j = job(&format!(
                "seed: 2\nrepetitions: 1\nhorizon: 1000\nalgorithm: feducb_centralized\nenvironment: linear_gap\nparams: {{m: 5, d: 4, k: 10, private: false, sync: threshold, threshold: {th}}}\n"
            ));
            run_cell(&j, &j.cells[0])[0].points.last().unwrap().counters.sync_rounds
        })
        .collect();
    println!("threshold D = 1, 100, 10000: {counts:?} syncs");
    assert!(counts[0] >= counts[1] && counts[1] >= counts[2] && counts[0] > counts[2]);
}

/// Reward clipping: private linear runs clip rewards to
/// [-1, 1] by default, so on linear_sphere the accountant's figures exist
/// (and equal linear_gap's, whose {0, 1} rewards already satisfy the bound);
/// `clip_rewards: false` keeps the authors' unclipped rewards and nulls every
/// figure with the reason. What clipping changed is counted (between 0 and
/// M T) and is 0 without clipping and on linear_gap, where clipping changes
/// nothing at all.
#[test]
fn private_linear_runs_clip_rewards_and_count_what_clipping_changed() {
    let grid = "horizon: 400\nrepetitions: 2\ncheckpoints: {every: 200}\nalgorithm: [private_fedlinucb, feducb_centralized]\nparams: {m: 3, d: 4, k: 10, epsilon: 1, delta: 0.1, batch_size: 20}\ngrid: {clip_rewards: [true, false]}\n";
    let sphere = job(&format!("environment: linear_sphere\n{grid}"));
    let gap = job(&format!("environment: linear_gap\n{grid}"));
    let clip = |c: &Cell| c.params.get("clip_rewards").map(|v| v.to_string()) == Some("true".into());
    // The exact figure (FedUCB's covers its noisy sums only: its schedule
    // is released too).
    let figure = |a: &fedbandits::privacy::accountant::Accounting| a.epsilon.or(a.epsilon_sums);
    for (cs, cg) in sphere.cells.iter().zip(&gap.cells) {
        let (a_s, a_g) = (cs.config.accounting().unwrap(), cg.config.accounting().unwrap());
        assert!(figure(&a_g).is_some(), "{}", cg.label());
        if clip(cs) {
            assert_eq!(figure(&a_s), figure(&a_g), "{}", cs.label());
            assert!(a_s.warnings.iter().all(|w| !w.contains("clip_rewards")));
        } else {
            assert_eq!(figure(&a_s), None, "{}", cs.label());
            assert!(
                a_s.warnings.iter().any(|w| w.contains("clip_rewards is false")),
                "{:?}",
                a_s.warnings
            );
        }
        let (rs, rg) = (run_cell(&sphere, cs), run_cell(&gap, cg));
        for (r, g) in rs.iter().zip(&rg) {
            let n = r.points.last().unwrap().counters.clipped_rewards;
            if clip(cs) {
                assert!(n > 0 && n <= 3 * 400, "{}: {n} clipped", cs.label());
            } else {
                assert_eq!(n, 0, "{}", cs.label());
            }
            assert!(g.points.iter().all(|p| p.counters.clipped_rewards == 0));
        }
        println!(
            "{}: clipped {:?}",
            cs.label(),
            rs.iter()
                .map(|r| r.points.last().unwrap().counters.clipped_rewards)
                .collect::<Vec<_>>()
        );
    }
    // On linear_gap clipping to [-1, 1] changes nothing: with and without,
    // the same curves bit for bit (clip_rewards is outside the random scope).
    for pair in gap.cells.chunks(2) {
        let points = |c: &Cell| run_cell(&gap, c).into_iter().map(|r| r.points).collect::<Vec<_>>();
        assert_eq!(points(&pair[0]), points(&pair[1]), "{}", pair[0].label());
    }
}

/// FedUCB on the batched core: a batch of federations (four repetitions
/// stepping together, on rayon's pool) gives each federation exactly the
/// curve it gives run alone, for both forms, with and without privacy (the
/// determinant test decides each federation's syncs on its own, so their
/// schedules differ inside one batch).
#[test]
fn a_feducb_batch_equals_each_federation_run_alone() {
    let j = job("seed: 8\nrepetitions: 4\nhorizon: 1500\ncheckpoints: {every: 25}\n\
         algorithm: [feducb_centralized, feducb_decentralized]\nenvironment: linear_gap\n\
         params: {m: 5, d: 4, k: 10, epsilon: 1, delta: 0.1, sync: threshold, threshold: 20, graph: erdos_renyi, \
         graph_p: 0.5, gamma: 1, refactor_every: 9}\ngrid: {private: [true, false]}\n");
    let ck = j.checkpoint_rounds();
    let reps: Vec<u32> = (0..j.repetitions).collect();
    for cell in &j.cells {
        let batch = fedbandits::sim::run_batch(cell, j.seed, &reps, &ck, &CpuBackend, &|_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", cell.label()));
        let alone = run_cell(&j, cell);
        let syncs: Vec<Vec<u64>> = alone
            .iter()
            .map(|r| r.points.iter().map(|p| p.counters.sync_rounds).collect())
            .collect();
        if cell.label().contains("private=false") {
            assert!(syncs.iter().any(|s| *s != syncs[0]), "{}: {syncs:?}", cell.label());
        }
        for (b, a) in batch.iter().zip(&alone) {
            assert_eq!(b.points, a.points, "{} repetition {}", cell.label(), a.rep);
        }
        assert_ne!(alone[0].points, alone[1].points, "repetitions have their own streams");
    }
}
