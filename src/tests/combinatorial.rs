//! The combinatorial family against what the paper and an
//! independent implementation found: P-FCB's schedule and budget sums,
//! the exploration length, identical exploration regret across algorithms,
//! sharing helping after exploration, rare constraint violations, rejected
//! negative unit counts, and a batch equal to each federation alone.

use fedbandits::algo::combinatorial::batch::CombBatch;
use fedbandits::algo::combinatorial::cpu::CpuComb;
use fedbandits::algo::combinatorial::p_fcb::{Budget, PFcbConfig, TauStart, epsilons, schedule};
use fedbandits::algo::combinatorial::{CombAlgorithm, CombConfig, CombPoint, comb_batch, explore_rounds};
use fedbandits::algo::rounds::RoundsFamily;
use fedbandits::env::procurement::{InstanceKind, Oracle, ProcurementSpec};

fn config(algorithm: CombAlgorithm, kind: InstanceKind, horizon: u64) -> CombConfig {
    CombConfig {
        algorithm,
        env: ProcurementSpec {
            kind,
            agents: 10,
            producers: 30,
            alpha: 0.4,
            rho: 1.0,
            max_capacity: 50,
        },
        horizon,
        instances: 5,
        zeta: 0.1,
        private: PFcbConfig::paper(),
        oracle: Oracle::Greedy,
    }
}

fn keys(reps: u64, scope: u64) -> Vec<Vec<u64>> {
    (0..reps).map(|r| vec![2021, scope, r]).collect()
}

fn run_all(b: &CombBatch, checkpoints: &[u64]) -> Vec<Vec<CombPoint>> {
    let mut ops = CpuComb::new(b).unwrap();
    let mut points = vec![Vec::new(); b.federations()];
    let horizon = checkpoints.last().copied().unwrap_or(0);
    b.run(&mut ops, 0, horizon, checkpoints, &mut points).unwrap();
    points
}

#[test]
fn p_fcb_schedule_and_budget_sums_are_as_found() {
    let p = PFcbConfig::paper();
    let r = schedule(&p, 100_000);
    let mut want: Vec<u64> = (200..=207).collect();
    want.extend((8..=15).map(|j| 1u64 << j));
    assert_eq!(r, want, "200..207, 256, ..., 32768");
    let sum: f64 = epsilons(&p, 100_000).iter().sum();
    assert!((sum - 1.195).abs() < 0.0015, "{sum}");
    let sum: f64 = epsilons(&p, 20_000).iter().sum();
    assert!((sum - 1.257).abs() < 0.0015, "{sum}");
    let norm = PFcbConfig {
        budget: Budget::Normalized,
        ..p
    };
    assert!((epsilons(&norm, 100_000).iter().sum::<f64>() - 1.0).abs() < 1e-12);
    let low = PFcbConfig {
        tau_start: TauStart::TLow,
        ..p
    };
    assert_eq!(
        schedule(&low, 100_000),
        vec![200, 400, 800, 1600, 3200, 6400, 12800, 25600]
    );
    assert_eq!(explore_rounds(10, 100_000, 0.1), 208);
}

#[test]
fn exploration_costs_every_algorithm_the_same_and_sharing_helps_after_it() {
    let (reps, t) = (10, 3000);
    let explore = explore_rounds(10, t, 0.1);
    assert_eq!(explore, 155);
    let ck = [explore, t];
    let (ek, ak) = (keys(reps, 1), keys(reps, 2));
    let result = |a| run_all(&comb_batch(&config(a, InstanceKind::Uniform, t), &ek, &ak), &ck);
    let (non, fcb, pf) = (
        result(CombAlgorithm::NonFederated),
        result(CombAlgorithm::Fcb),
        result(CombAlgorithm::PFcb),
    );
    for f in 0..reps as usize {
        // Identical choices during exploration: identical regret at its end.
        assert_eq!(non[f][0].obs.group_regret, fcb[f][0].obs.group_regret);
        assert_eq!(non[f][0].obs.group_regret, pf[f][0].obs.group_regret);
        assert!(non[f][0].obs.group_regret > 0.0);
        assert_eq!(non[f][0].obs.regret_after_exploration, 0.0);
    }
    let after = |c: &[Vec<CombPoint>]| c.iter().map(|v| v[1].obs.regret_after_exploration).sum::<f64>() / reps as f64;
    let (a_non, a_fcb) = (after(&non), after(&fcb));
    println!(
        "regret after exploration (mean of {reps}): non_federated {a_non:.1}, fcb {a_fcb:.1}, p_fcb {:.1}",
        after(&pf)
    );
    assert!(
        a_fcb < a_non,
        "sharing every round must help: fcb {a_fcb} vs non_federated {a_non}"
    );
    // After exploration the constraint almost never binds (m = 30): many
    // violations would mean a bug.
    for c in [&non, &fcb, &pf] {
        let v: u64 = c.iter().map(|v| v[1].obs.violations).sum();
        let rounds = reps * (t - explore) * 10;
        assert!(
            (v as f64) < 0.01 * rounds as f64,
            "{v} violations in {rounds} agent-rounds"
        );
    }
    // P-FCB communicated on schedule (200..207, 256, ..., 2048 within T),
    // spent what its messages provide (each exact at delta; below the
    // paper's budget at epsilon_z < 1, where the classical theorem is loose)
    // and rejected messages (negative noisy unit counts).
    let o = pf[0][1].obs;
    assert_eq!(o.communications, 8 + 4);
    let spent: f64 = fedbandits::algo::combinatorial::p_fcb::round_epsilons(&PFcbConfig::paper(), t)
        .iter()
        .sum();
    assert!((o.epsilon_spent - spent).abs() < 1e-12);
    assert!(spent < epsilons(&PFcbConfig::paper(), t).iter().sum::<f64>());
    assert!((o.delta_spent - 0.12).abs() < 1e-12);
    assert!(o.rejected > 0 && o.accepted + o.rejected == 12 * 10 * 9 * 30);
    assert_eq!(non[0][1].obs.communications, 0);
}

#[test]
fn a_batch_equals_each_federation_alone() {
    let cfg = config(CombAlgorithm::PFcb, InstanceKind::Normal, 1200);
    let (ek, ak) = (keys(4, 1), keys(4, 2));
    let all = run_all(&comb_batch(&cfg, &ek, &ak), &[300, 1200]);
    for f in 0..4 {
        let one = run_all(&comb_batch(&cfg, &ek[f..=f], &ak[f..=f]), &[300, 1200]);
        assert_eq!(one[0], all[f], "federation {f}");
    }
    // Repetitions 0 and 5 share instance 0 (5 instances) but not their draws.
    let b = comb_batch(&cfg, &keys(6, 1), &keys(6, 2));
    assert_eq!(b.instances[0], b.instances[5]);
    assert_ne!(b.instances[0], b.instances[1]);
}

/// A combinatorial job through the engine: the family's columns are filled
/// (and are null for other families' columns), the non-private cell has no
/// privacy columns, and a stopped repetition resumes from its snapshot bit
/// for bit.
#[test]
fn combinatorial_jobs_run_resume_and_write_their_columns() {
    use fedbandits::job::Job;
    use fedbandits::sim::{RepOutcome, Snapshots, run_rep, run_rep_resumable};
    let job = Job::parse(
        std::path::Path::new("c.yaml"),
        "seed: 3\nrepetitions: 2\nhorizon: 1500\nalgorithm: [non_federated, p_fcb]\nenvironment: procurement\n\
         params: {m: 4, producers: 12, epsilon: 1, delta: 0.01, instance_kind: normal, calibration: paper}\n",
    )
    .unwrap();
    assert_eq!(job.cells.len(), 2);
    let ck = job.checkpoint_rounds();
    let dir = std::env::temp_dir().join(format!("fedbandits-comb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for cell in &job.cells {
        let whole = run_rep(cell, job.seed, 1, &ck, &|_| {});
        assert!(whole.points.last().unwrap().metric("constraint_violations").is_some());
        let stop = std::sync::atomic::AtomicBool::new(true);
        let tally = fedbandits::sim::Resumed::default();
        let snap = Snapshots {
            path: dir.join(format!("{}.snap", cell.id)),
            every: std::time::Duration::ZERO,
            stop: &stop,
            resumed: &tally,
        };
        let first = run_rep_resumable(cell, job.seed, 1, &ck, &|_| {}, Some(&snap)).unwrap();
        assert!(matches!(first, RepOutcome::Stopped));
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let RepOutcome::Done(resumed) = run_rep_resumable(cell, job.seed, 1, &ck, &|_| {}, Some(&snap)).unwrap() else {
            panic!("did not finish");
        };
        assert_eq!(resumed.points, whole.points, "{}", cell.label());
        // The resume was counted, at the round the snapshot was taken.
        assert_eq!(tally.totals().0, 1, "{}", cell.label());
    }
    let _ = std::fs::remove_dir_all(&dir);
    let col = |cell: usize, name: &str| {
        let r = run_rep(&job.cells[cell], job.seed, 0, &ck, &|_| {});
        let b = fedbandits::output::cell_batch(&job, &job.cells[cell], &[r], "cpu").unwrap();
        let c = b.column_by_name(name).unwrap().clone();
        (c.null_count(), b.num_rows())
    };
    for name in ["regret_after_exploration", "constraint_violations"] {
        assert_eq!(col(0, name).0, 0, "{name}");
        assert_eq!(col(1, name).0, 0, "{name}");
    }
    for name in [
        "messages_accepted",
        "messages_rejected",
        "paper_epsilon_spent",
        "paper_delta_spent",
        "acct_epsilon_zcdp",
        "paper_claimed_epsilon",
        "acct_epsilon",
        "target_epsilon",
    ] {
        assert_eq!(col(1, name).0, 0, "p_fcb {name}");
        let (nulls, rows) = col(0, name);
        assert_eq!(nulls, rows, "non_federated {name}");
    }
    // Another family's columns are not in a combinatorial job's files (one
    // release per round: nothing to compose; the paper's per-agent sum is
    // paper_epsilon_spent).
    let r = run_rep(&job.cells[1], job.seed, 0, &ck, &|_| {});
    let b = fedbandits::output::cell_batch(&job, &job.cells[1], &[r], "cpu").unwrap();
    for name in [
        "consensus_error",
        "gossip_lambda2",
        "d",
        "acct_epsilon_pure",
        "acct_epsilon_basic",
        "cholesky_failures",
    ] {
        assert!(b.column_by_name(name).is_none(), "{name}: another family's column");
    }
}

#[test]
fn the_run_summary_states_the_federated_regret_ratio() {
    use fedbandits::backend::Selection;
    use fedbandits::job::Job;
    use fedbandits::sim::runner::{RunOptions, run_job};
    let job = Job::parse(
        std::path::Path::new("frr.yaml"),
        "name: frr\nrepetitions: 2\nhorizon: 800\nalgorithm: [non_federated, fcb, p_fcb]\nenvironment: procurement\n\
         params: {m: 3, producers: 8, delta: 0.01}\ngrid: {epsilon: [0.5, 2]}\n",
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("fedbandits-frr-{}", std::process::id()));
    let report = run_job(
        &job,
        &Selection::cpu(),
        &RunOptions {
            out: Some(out.clone()),
            quiet: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    let s = &report.summaries;
    let base = s
        .iter()
        .find(|c| job.cells[c.index].algorithm == "non_federated")
        .unwrap();
    assert_eq!(base.frr, None);
    for c in s.iter().filter(|c| c.index != base.index) {
        let frr = c.frr.expect("a federated cell has an FRR");
        assert!((frr - c.agent_regret_mean / base.agent_regret_mean).abs() < 1e-12);
    }
    // fcb once, p_fcb per epsilon.
    assert_eq!(s.len(), 4);
    let _ = std::fs::remove_dir_all(&out);
}

/// P-FCB with epsilon = inf (no noise), omega_1 = inf (every message with
/// w~ > 0 accepted), omega_2 = 1 and communication every round makes exactly
/// FCB's decisions: every agent's totals W, Y equal FCB's after every round
/// (so every choice did), and so does the regret curve.
#[test]
fn p_fcb_without_noise_or_window_communicating_every_round_is_fcb() {
    use fedbandits::algo::combinatorial::batch::CombPolicy;
    use fedbandits::algo::rounds::RoundOps;
    let horizon = 400;
    let mut cfg = config(CombAlgorithm::Fcb, InstanceKind::Normal, horizon);
    cfg.env.agents = 4;
    cfg.env.producers = 12;
    cfg.zeta = 0.2;
    let (ek, ak) = (keys(3, 1), keys(3, 2));
    let fcb = comb_batch(&cfg, &ek, &ak);
    cfg.algorithm = CombAlgorithm::PFcb;
    cfg.private.omega1 = f64::INFINITY;
    cfg.private.omega2 = 1.0;
    let mut pfcb = comb_batch(&cfg, &ek, &ak);
    let CombPolicy::PFcb(p) = &mut pfcb.policy else {
        panic!("not p_fcb")
    };
    p.rounds = (1..=horizon).collect();
    p.eps = vec![f64::INFINITY; horizon as usize];
    p.spent = vec![f64::INFINITY; horizon as usize];
    assert!(
        fcb.explore_rounds < horizon / 2,
        "the test must reach the exploitation phase"
    );
    let (mut a, mut b) = (CpuComb::new(&fcb).unwrap(), CpuComb::new(&pfcb).unwrap());
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    for t in 1..=horizon {
        a.rounds(t, 1).unwrap();
        b.rounds(t, 1).unwrap();
        for f in 0..3 {
            assert_eq!(a.counts(f), b.counts(f), "round {t}, federation {f}");
        }
        a.observe(&mut oa).unwrap();
        b.observe(&mut ob).unwrap();
        for (x, y) in oa.iter().zip(&ob) {
            assert_eq!(
                (x.group_regret, x.agent_regret_max, x.violations),
                (y.group_regret, y.agent_regret_max, y.violations),
                "round {t}"
            );
        }
    }
    // Messages of producers an agent did not buy from in a round (w~ = 0) are
    // the rejected ones.
    assert!(ob[0].accepted > 0 && ob[0].communications == horizon);
}

/// `oracle: exact`: regret against the exact optimum never decreases (every
/// feasible choice earns at most s*), the job option is accepted on a small
/// instance and refused with the reason on the paper's.
#[test]
fn the_exact_oracle_is_a_job_option_with_nonnegative_regret() {
    use fedbandits::job::Job;
    let job = |params: &str| {
        Job::parse(
            std::path::Path::new("x.yaml"),
            &format!(
                "seed: 1\nrepetitions: 2\nhorizon: 300\nalgorithm: [non_federated, fcb]\n\
                 environment: procurement\ncheckpoints: {{every: 1}}\nparams: {{{params}}}\n"
            ),
        )
    };
    let err = job("oracle: exact").unwrap_err().to_string();
    assert!(
        err.contains("oracle") && err.contains("51^30") && err.contains("greedy"),
        "{err}"
    );
    let ok = job("oracle: exact, m: 3, producers: 5, max_capacity: 4").unwrap();
    for cell in &ok.cells {
        let ck = ok.checkpoint_rounds();
        assert_eq!(ck.len(), 300);
        let r = fedbandits::sim::run_rep(cell, ok.seed, 0, &ck, &|_| {});
        let g: Vec<f64> = r.points.iter().map(|p| p.group_regret).collect();
        assert!(
            g.windows(2).all(|w| w[1] >= w[0] - 1e-9),
            "{}: regret fell",
            cell.label()
        );
        assert!(g[299] > 0.0);
    }
}

/// A snapshot of another format is refused by its version, before anything
/// after it is decoded: an old format's state bytes read as a header field
/// could hold any length (here 2^62), and nothing of it is allocated.
#[test]
fn a_snapshot_of_another_format_is_refused_by_its_version() {
    use fedbandits::job::Job;
    use fedbandits::sim::{Resumed, SnapshotError, Snapshots, run_rep_resumable};
    let job = Job::parse(
        std::path::Path::new("c.yaml"),
        "horizon: 2000\nalgorithm: fcb\nenvironment: procurement\nparams: {m: 3, producers: 6}\n",
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("fedbandits-snapfmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("old.snap");
    // Format 11's first field, a semantics, then eight bytes that the
    // next header field (the cell key) would read as its length, 2^62.
    let mut payload = 11u32.to_le_bytes().to_vec();
    payload.extend_from_slice(&17u32.to_le_bytes());
    payload.extend_from_slice(&(1u64 << 62).to_le_bytes());
    std::fs::write(&path, fedbandits::output::seal(&payload)).unwrap();
    let (stop, tally) = (std::sync::atomic::AtomicBool::new(false), Resumed::default());
    let snap = Snapshots {
        path: path.clone(),
        every: std::time::Duration::ZERO,
        stop: &stop,
        resumed: &tally,
    };
    let ck = job.checkpoint_rounds();
    let Err(SnapshotError::Invalid { message, .. }) =
        run_rep_resumable(&job.cells[0], job.seed, 0, &ck, &|_| {}, Some(&snap))
    else {
        panic!("an old format was not refused");
    };
    assert_eq!(message, "snapshot format 11, this engine reads 12");
    let _ = std::fs::remove_dir_all(&dir);
}
