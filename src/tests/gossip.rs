//! The gossip family's algorithms against what the paper and the spec say
//! must hold (Zhu et al.): Lemma 2's local consistency at every step,
//! the ordering oracle <= gossip <= local on a complete graph, linear
//! against sub-linear regret on a biased instance, exact clipping counts,
//! and a batch of federations equal to each federation alone.

use fedbandits::algo::gossip::batch::GossipBatch;
use fedbandits::algo::gossip::cpu::CpuGossip;
use fedbandits::algo::gossip::fed_ucb_gossip::PrivacyConfig;
use fedbandits::algo::gossip::{GossipAlgorithm, GossipConfig, GossipPoint, gossip_batch};
use fedbandits::algo::rounds::RoundsFamily;
use fedbandits::env::mab::{MabEnv, MabEnvSpec};
use fedbandits::graph::GraphSpec;

fn config(algorithm: GossipAlgorithm, agents: usize, arms: usize, horizon: u64, graph: GraphSpec) -> GossipConfig {
    GossipConfig {
        algorithm,
        env: MabEnvSpec {
            agents,
            arms,
            noise_std: 1.0,
            records: None,
        },
        horizon,
        graph,
        confidence_scale: 1.0,
        privacy: PrivacyConfig::default(),
    }
}

fn keys(reps: u64, scope: u64) -> Vec<Vec<u64>> {
    (0..reps).map(|r| vec![2026, scope, r]).collect()
}

/// Runs a batch on the CPU to its last checkpoint (the horizon, as in a
/// plan); curves at `checkpoints`.
fn run_all(batch: &GossipBatch, checkpoints: &[u64]) -> Vec<Vec<GossipPoint>> {
    let mut ops = CpuGossip::new(batch).unwrap();
    let mut points = vec![Vec::new(); batch.federations()];
    let horizon = checkpoints.last().copied().unwrap_or(0);
    batch.run(&mut ops, 0, horizon, checkpoints, &mut points).unwrap();
    points
}

fn final_regret(batch: &GossipBatch, horizon: u64) -> Vec<f64> {
    run_all(batch, &[horizon])
        .iter()
        .map(|c| c[0].obs.group_regret)
        .collect()
}

#[test]
fn local_consistency_lemma_2_holds_at_every_step() {
    // n_{i,k} >= n~_{i,k} - 3N for every agent and arm after every round,
    // on sparse graphs (slow mixing) with and without privacy.
    for (graph, eps) in [
        (GraphSpec::Line, f64::INFINITY),
        (GraphSpec::Ring, 1.0),
        (GraphSpec::Star, f64::INFINITY),
    ] {
        let mut cfg = config(GossipAlgorithm::FedUcbGossip, 8, 5, 3000, graph.clone());
        cfg.privacy.epsilon = eps;
        let b = gossip_batch(&cfg, &keys(3, 1), &keys(3, 2)).unwrap();
        let mut ops = CpuGossip::new(&b).unwrap();
        let n = 8u64;
        let mut forced = 0;
        for t in 1..=cfg.horizon {
            fedbandits::algo::rounds::RoundOps::rounds(&mut ops, t, 1).unwrap();
            for f in ops.federations() {
                for (cnt, est) in f.n.iter().zip(&f.nt) {
                    assert!(cnt + 3 * n >= *est, "{graph:?} t = {t}: n = {cnt}, n~ = {est}");
                    assert!(est >= cnt, "n~ is at least the own count");
                }
            }
        }
        let mut obs = Vec::new();
        fedbandits::algo::rounds::RoundOps::observe(&mut ops, &mut obs).unwrap();
        forced += obs.iter().map(|o| o.forced_pulls).sum::<u64>();
        // The forced pulls are what keeps the lemma true: they happen.
        assert!(forced > 0, "{graph:?}: no forced pull");
    }
}

#[test]
fn on_a_complete_graph_gossip_lies_between_oracle_and_local() {
    // Paired over 60 repetitions (same instances and noise for all three).
    let (reps, t) = (60, 4000);
    let regret = |a| {
        let b = gossip_batch(
            &config(a, 10, 5, t, GraphSpec::Complete),
            &keys(reps, 1),
            &keys(reps, 7),
        )
        .unwrap();
        final_regret(&b, t)
    };
    let (oracle, gossip, local) = (
        regret(GossipAlgorithm::OracleUcb),
        regret(GossipAlgorithm::GossipUcb),
        regret(GossipAlgorithm::LocalUcb),
    );
    let mean_diff = |a: &[f64], b: &[f64]| {
        let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        let m = d.iter().sum::<f64>() / d.len() as f64;
        let sd = (d.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (d.len() - 1) as f64).sqrt();
        (m, sd / (d.len() as f64).sqrt())
    };
    let (d1, se1) = mean_diff(&gossip, &oracle);
    let (d2, se2) = mean_diff(&local, &gossip);
    // Each difference positive by more than 3 standard errors.
    assert!(d1 > 3.0 * se1, "gossip - oracle = {d1} (se {se1})");
    assert!(d2 > 3.0 * se2, "local - gossip = {d2} (se {se2})");
}

/// `consensus_error` is the agents' disagreement and `estimate_error` their
/// distance from the target: the oracle's agents all play the pooled mean
/// (no disagreement, an estimation error like anyone's); local agents play
/// their own biased means, which disagree by about the spread of the
/// local biases; gossip on a complete graph disagrees far less than local,
/// paired over 20 repetitions.
#[test]
fn consensus_error_is_disagreement_and_estimate_error_is_distance_from_the_target() {
    let (reps, t) = (20, 2000);
    let last = |a| {
        let b = gossip_batch(&config(a, 8, 4, t, GraphSpec::Complete), &keys(reps, 3), &keys(reps, 9)).unwrap();
        run_all(&b, &[t]).iter().map(|c| c[0].obs).collect::<Vec<_>>()
    };
    let (oracle, gossip, local) = (
        last(GossipAlgorithm::OracleUcb),
        last(GossipAlgorithm::GossipUcb),
        last(GossipAlgorithm::LocalUcb),
    );
    for (o, l) in oracle.iter().zip(&local) {
        assert!(
            o.consensus_error < 1e-12,
            "the oracle's agents play one estimate: {o:?}"
        );
        assert!(o.estimate_error > 0.0 && o.estimate_error.is_finite());
        assert!(l.consensus_error > 0.05, "local agents disagree: {l:?}");
        // The largest deviation from the agents' mean is at most the largest
        // deviation from mu_k plus |mean estimate - mu_k| <= 2 x the error.
        assert!(l.consensus_error <= 2.0 * l.estimate_error + 1e-12);
    }
    let below = gossip
        .iter()
        .zip(&local)
        .filter(|(g, l)| g.consensus_error < l.consensus_error)
        .count();
    assert_eq!(
        below, reps as usize,
        "gossip agrees more than local in every repetition"
    );
}

/// Least-squares slope of log(regret) against log(t).
fn loglog_slope(curve: &[GossipPoint]) -> f64 {
    let pts: Vec<(f64, f64)> = curve
        .iter()
        .map(|p| ((p.t as f64).ln(), p.obs.group_regret.ln()))
        .collect();
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    sxy / sxx
}

#[test]
fn on_a_biased_instance_local_regret_is_linear_and_gossip_sublinear() {
    // Two agents, three arms: agent 0 sees arm 0 best locally, agent 1 arm
    // 2; the true means (0.5, 0.6, 0.5) make arm 1 best, so no agent's
    // local best is the global best.
    let spec = MabEnvSpec {
        agents: 2,
        arms: 3,
        noise_std: 0.3,
        records: None,
    };
    let checkpoints: Vec<u64> = (1..=20).map(|i| i * 2500).collect();
    let mut slopes = Vec::new();
    for algorithm in [GossipAlgorithm::LocalUcb, GossipAlgorithm::GossipUcb] {
        let cfg = GossipConfig {
            env: spec.clone(),
            ..config(algorithm, 2, 3, 50_000, GraphSpec::Complete)
        };
        let mut b = gossip_batch(&cfg, &keys(4, 1), &keys(4, 3)).unwrap();
        for (f, env) in b.envs.iter_mut().enumerate() {
            *env = MabEnv::with_means(&spec, vec![1.0, 0.6, 0.0, 0.0, 0.6, 1.0], &[9, f as u64]);
        }
        let curves = run_all(&b, &checkpoints);
        let mean_slope = curves.iter().map(|c| loglog_slope(&c[1..])).sum::<f64>() / curves.len() as f64;
        slopes.push(mean_slope);
    }
    assert!(slopes[0] > 0.95, "local_ucb slope {}", slopes[0]);
    assert!(slopes[1] < 0.6, "gossip_ucb slope {}", slopes[1]);
}

#[test]
fn clipping_counts_are_exact() {
    // Noise-free observations: agent 0's arm 0 has mean 1.5 (above the
    // [0, 1] range), agent 1's arm 1 has mean -0.5; every pull of those
    // (agent, arm) pairs is clipped and nothing else is.
    let spec = MabEnvSpec {
        agents: 2,
        arms: 2,
        noise_std: 0.0,
        records: None,
    };
    let mut cfg = GossipConfig {
        env: spec.clone(),
        ..config(GossipAlgorithm::FedUcbGossip, 2, 2, 500, GraphSpec::Complete)
    };
    cfg.privacy.epsilon = 2.0;
    let mut b = gossip_batch(&cfg, &keys(1, 1), &keys(1, 2)).unwrap();
    b.envs[0] = MabEnv::with_means(&spec, vec![1.5, 0.5, 0.2, -0.5], &[1]);
    let mut ops = CpuGossip::new(&b).unwrap();
    let mut points = vec![Vec::new()];
    b.run(&mut ops, 0, 500, &[500], &mut points).unwrap();
    let f = &ops.federations()[0];
    let want = f.n[0] + f.n[3];
    assert!(want > 0 && f.n[1] + f.n[2] > 0);
    assert_eq!(points[0][0].obs.clipped, want);
}

#[test]
fn a_batch_equals_each_federation_alone_and_privacy_changes_play() {
    let mut cfg = config(
        GossipAlgorithm::FedUcbGossip,
        6,
        4,
        600,
        GraphSpec::ErdosRenyi { p: 0.5 },
    );
    cfg.privacy.epsilon = 1.0;
    let (ek, ak) = (keys(5, 1), keys(5, 2));
    let all = run_all(&gossip_batch(&cfg, &ek, &ak).unwrap(), &[100, 600]);
    for f in 0..5 {
        let one = run_all(&gossip_batch(&cfg, &ek[f..=f], &ak[f..=f]).unwrap(), &[100, 600]);
        assert_eq!(one[0], all[f], "federation {f}");
    }
    cfg.privacy.epsilon = f64::INFINITY;
    let exact = run_all(&gossip_batch(&cfg, &ek, &ak).unwrap(), &[100, 600]);
    assert_ne!(exact[0], all[0]);
    assert!(
        exact.iter().all(|c| c[1].obs.clipped == 0),
        "no privatizer, no clipping"
    );
}

/// The privatizer's noise has its written scale. After the initial pulls
/// (round t = M = 4: every agent has pulled every arm once, and the prefix
/// [1, 4] is one dyadic block) an agent's X_bar with noise, minus X_bar of
/// the same streams with `noise: false` (the same clipping and play so
/// far), is one Laplace(b) draw, b = (hi - lo) / epsilon' with epsilon' =
/// epsilon / (floor(log2 T) + 1). E|Laplace(b)| = b and sd |L| = b: 40
/// federations x 6 agents x 4 arms = 960 draws put the mean's standard
/// error at 3.2% of b; the tolerance is 15% (4.7 standard errors). Noise
/// calibrated to the total epsilon instead of the block's (1/10 of b at T =
/// 600), noise of any other fixed scale, or no noise fails it.
#[test]
fn the_privatizers_noise_has_its_written_scale() {
    let mut cfg = config(GossipAlgorithm::FedUcbGossip, 6, 4, 600, GraphSpec::Ring);
    cfg.privacy.epsilon = 1.0;
    let (ek, ak) = (keys(40, 1), keys(40, 2));
    let xbar_at_m = |cfg: &GossipConfig| {
        let mut ops = CpuGossip::new(&gossip_batch(cfg, &ek, &ak).unwrap()).unwrap();
        fedbandits::algo::rounds::RoundOps::rounds(&mut ops, 1, 4).unwrap();
        ops.federations()
            .iter()
            .flat_map(|f| {
                assert!(f.n.iter().all(|&n| n == 1), "every arm pulled once");
                f.xbar.clone()
            })
            .collect::<Vec<f64>>()
    };
    let noisy = xbar_at_m(&cfg);
    cfg.privacy.noise = false;
    let clean = xbar_at_m(&cfg);
    let p = &cfg.privacy;
    let b = (p.clip.1 - p.clip.0) / fedbandits::algo::gossip::fed_ucb_gossip::block_epsilon(p, cfg.horizon);
    assert!(
        (b - (p.clip.1 - p.clip.0) * 10.0).abs() < 1e-9,
        "floor(log2 600) + 1 = 10 blocks: {b}"
    );
    let mean_abs = noisy.iter().zip(&clean).map(|(x, y)| (x - y).abs()).sum::<f64>() / noisy.len() as f64;
    assert_eq!(noisy.len(), 960);
    assert!(
        (mean_abs / b - 1.0).abs() < 0.15,
        "mean |noise| = {mean_abs}, the written scale b = {b}"
    );
}

/// A gossip-family job through the engine: the family's columns are filled
/// (and the linear family's are null), a stopped repetition resumes from its
/// snapshot bit for bit, and epsilon = .inf makes the privatizer's settings
/// irrelevant (one cell, not one per c_priv).
#[test]
fn gossip_jobs_run_resume_and_write_their_columns() {
    use fedbandits::job::Job;
    use fedbandits::sim::{RepOutcome, Snapshots, run_rep, run_rep_resumable};
    let job = Job::parse(
        std::path::Path::new("g.yaml"),
        "seed: 3\nrepetitions: 2\nhorizon: 3000\nalgorithm: [fed_ucb_gossip, oracle_ucb]\nenvironment: mab_heterogeneous\n\
         params: {m: 6, arms: 4, graph: ring}\ngrid: {epsilon: [2, .inf], c_priv: [4, 0.5]}\n",
    )
    .unwrap();
    // fed_ucb_gossip: epsilon 2 x c_priv {4, 0.5}, epsilon inf once; oracle once.
    assert_eq!(
        job.cells.len(),
        4,
        "{:?}",
        job.cells.iter().map(|c| c.label()).collect::<Vec<_>>()
    );
    let ck = job.checkpoint_rounds();
    let dir = std::env::temp_dir().join(format!("fedbandits-gossip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for cell in &job.cells {
        let whole = run_rep(cell, job.seed, 1, &ck, &|_| {});
        let last = whole.points.last().unwrap();
        // oracle_ucb uses no graph: its lambda_2 is null.
        match last.metric("gossip_lambda2") {
            Some(l) => assert!(l.as_f64() > 0.0 && l.as_f64() < 1.0, "{l:?}"),
            None => assert_eq!(cell.algorithm, "oracle_ucb"),
        }
        assert!(
            last.metric("consensus_error")
                .expect("gossip metrics")
                .as_f64()
                .is_finite()
        );
        assert_eq!(last.counters.cholesky_failures, 0);
        let stop = std::sync::atomic::AtomicBool::new(true);
        let tally = fedbandits::sim::Resumed::default();
        let snap = Snapshots {
            path: dir.join(format!("{}.snap", cell.id)),
            every: std::time::Duration::ZERO,
            stop: &stop,
            resumed: &tally,
        };
        let first = run_rep_resumable(cell, job.seed, 1, &ck, &|_| {}, Some(&snap)).unwrap();
        assert!(matches!(first, RepOutcome::Stopped), "stops at the first check");
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let RepOutcome::Done(resumed) = run_rep_resumable(cell, job.seed, 1, &ck, &|_| {}, Some(&snap)).unwrap() else {
            panic!("did not finish");
        };
        assert_eq!(resumed.points, whole.points, "{}", cell.label());
        // The resume was counted, at the round the snapshot was taken.
        assert_eq!(tally.totals().0, 1, "{}", cell.label());
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The output: gossip columns filled.
    let cell = &job.cells[0];
    let r = run_rep(cell, job.seed, 0, &ck, &|_| {});
    let b = fedbandits::output::cell_batch(&job, cell, &[r], "cpu").unwrap();
    for col in [
        "consensus_error",
        "forced_pulls",
        "clipped_observations",
        "gossip_lambda2",
        "acct_epsilon_pure",
    ] {
        assert_eq!(b.column_by_name(col).unwrap().null_count(), 0, "{col}");
    }
    // A common column the family leaves null, and other families' columns,
    // which a gossip job's files do not carry.
    assert_eq!(b.column_by_name("target_delta").unwrap().null_count(), b.num_rows());
    for col in [
        "acct_epsilon_zcdp",
        "acct_rho_zcdp",
        "d",
        "k",
        "cholesky_failures",
        "producers",
    ] {
        assert!(b.column_by_name(col).is_none(), "{col}: another family's column");
    }
}

#[test]
fn a_job_mixing_families_pairs_each_algorithm_with_its_environments() {
    use fedbandits::job::Job;
    let p = std::path::Path::new("mix.yaml");
    let j = Job::parse(
        p,
        "horizon: 100\nalgorithm: [independent, gossip_ucb]\nenvironment: [linear_gap, mab_heterogeneous]\nparams: {m: 3}\n",
    )
    .unwrap();
    let pairs: Vec<(String, String)> = j
        .cells
        .iter()
        .map(|c| (c.algorithm.clone(), c.environment.clone()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("independent".into(), "linear_gap".into()),
            ("gossip_ucb".into(), "mab_heterogeneous".into())
        ]
    );
    let e = Job::parse(
        p,
        "horizon: 100\nalgorithm: [independent, gossip_ucb]\nenvironment: linear_gap\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("gossip_ucb belongs to the gossip family") && e.contains("mab_heterogeneous"),
        "{e}"
    );
    let e = Job::parse(
        p,
        "horizon: 100\nalgorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("epsilon") && e.contains(".inf"), "{e}");
    let e = Job::parse(
        p,
        "horizon: 100\nalgorithm: private_fedlinucb\nenvironment: linear_gap\nparams: {epsilon: .inf, delta: 0.1}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no privacy"), "{e}");
}

#[test]
fn without_clipping_nothing_is_clipped_and_no_epsilon_is_claimed() {
    use fedbandits::job::Job;
    use fedbandits::sim::run_rep;
    let job = Job::parse(
        std::path::Path::new("c.yaml"),
        "horizon: 2000\nalgorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nparams: {m: 4, arms: 3, epsilon: 1}\ngrid: {clip: [true, false]}\n",
    )
    .unwrap();
    let ck = job.checkpoint_rounds();
    let clipped: Vec<u64> = job
        .cells
        .iter()
        .map(|c| {
            run_rep(c, job.seed, 0, &ck, &|_| {})
                .points
                .last()
                .unwrap()
                .metric("clipped_observations")
                .and_then(|m| m.as_u64())
                .unwrap()
        })
        .collect();
    // N(0,1) noise around means in [0,1]: most observations leave [0, 1].
    assert!(clipped[0] > 2000 * 4 / 3, "{clipped:?}");
    assert_eq!(clipped[1], 0);
    let eps: Vec<Option<f64>> = job
        .cells
        .iter()
        .map(|c| c.config.accounting().unwrap().epsilon_pure)
        .collect();
    assert_eq!(eps, vec![Some(1.0), None]);
}

/// A small diabetic_data.csv with the UCI file's columns: `rows` of
/// (medication values by column name, readmitted).
fn diabetes_csv(
    dir: &std::path::Path,
    name: &str,
    header: &str,
    rows: &[(&[(&str, &str)], &str)],
) -> std::path::PathBuf {
    let cols: Vec<&str> = header.split(',').collect();
    let mut text = format!("{header}\n");
    for (i, (meds, readmitted)) in rows.iter().enumerate() {
        let fields: Vec<String> = cols
            .iter()
            .map(|c| match *c {
                "readmitted" => (*readmitted).to_string(),
                "encounter_id" => i.to_string(),
                c if fedbandits::env::uci::MEDICATIONS.iter().any(|(m, _)| *m == c) => {
                    meds.iter().find(|(m, _)| *m == c).map_or("No", |(_, v)| v).to_string()
                }
                _ => "?".to_string(),
            })
            .collect();
        text += &fields.join(",");
        text.push('\n');
    }
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn uci_diabetes_reads_the_csv_maps_arms_and_resamples_records() {
    use fedbandits::env::uci::HEADER;
    use fedbandits::job::Job;
    let dir = std::env::temp_dir().join(format!("fedbandits-uci-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Two agents of 6 records each; every record gives one drug of every
    // arm (metformin, glipizide, pioglitazone, insulin, examide). Agent 0:
    // 2 of 6 readmitted ">30"; agent 1: 5 of 6, and one record also
    // counts insulin "Up" (still arm 3).
    let all: &[(&str, &str)] = &[
        ("metformin", "Steady"),
        ("glipizide", "Up"),
        ("pioglitazone", "Down"),
        ("insulin", "Steady"),
        ("examide", "Steady"),
    ];
    let mut rows: Vec<(&[(&str, &str)], &str)> = Vec::new();
    for r in [
        ">30", ">30", "NO", "<30", "NO", "NO", ">30", ">30", ">30", ">30", ">30", "<30",
    ] {
        rows.push((all, r));
    }
    let csv = diabetes_csv(&dir, "diabetic_data.csv", HEADER, &rows);
    let job_text = |path: &std::path::Path| {
        format!(
            "horizon: 400\nrepetitions: 2\nalgorithm: [gossip_ucb, local_ucb]\nenvironment: uci_diabetes\nparams: {{m: 2, data: {}}}\n",
            path.display()
        )
    };
    let job = Job::parse(std::path::Path::new("u.yaml"), &job_text(&csv)).unwrap();
    let cfg = job.cells[0]
        .config
        .get::<fedbandits::algo::gossip::GossipConfig>()
        .expect("a gossip cell");
    let env = MabEnv::new(&cfg.env, &[1]);
    assert_eq!(cfg.env.arms, 5);
    for k in 0..5 {
        assert!((env.local_means[k] - 2.0 / 6.0).abs() < 1e-15);
        assert!((env.local_means[5 + k] - 5.0 / 6.0).abs() < 1e-15);
    }
    // Resampling: the share of ones drawn for agent 1 is near 5/6.
    let mut s = fedbandits::rng::Stream::new(&[4]);
    let draws: f64 = (0..60_000).map(|_| env.observe(1, 3, &mut s)).sum::<f64>() / 60_000.0;
    assert!((draws - 5.0 / 6.0).abs() < 0.01, "{draws}");
    // The job runs end to end.
    let out = dir.join("out");
    let job_file = dir.join("u.yaml");
    std::fs::write(&job_file, job_text(&csv)).unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args([
            "run",
            job_file.to_str().unwrap(),
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    // Bad inputs: exit 2, a line naming file, line and column, nothing written.
    let fail = |path: &std::path::Path, want: &[&str]| {
        std::fs::write(&job_file, job_text(path)).unwrap();
        let bad_out = dir.join("bad_out");
        let r = std::process::Command::new(env!("CARGO_BIN_EXE_fedbandits"))
            .args([
                "run",
                job_file.to_str().unwrap(),
                "--quiet",
                "--out",
                bad_out.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{err}");
        for w in want {
            assert!(err.contains(w), "{w:?} not in {err}");
        }
        assert!(!bad_out.exists(), "nothing may be written");
    };
    fail(&dir.join("nope.csv"), &["nope.csv", "cannot read", "diabetic_data.csv"]);
    let no_insulin = HEADER.replace(",insulin,", ",insulin_x,");
    let p = diabetes_csv(&dir, "noins.csv", &no_insulin, &rows);
    fail(&p, &["noins.csv:1", "missing column 'insulin'"]);
    let mut bad_rows = rows.clone();
    bad_rows[4].1 = "maybe";
    let p = diabetes_csv(&dir, "badval.csv", HEADER, &bad_rows);
    fail(&p, &["badval.csv:6", "column 'readmitted'", "'maybe'", ">30"]);
    let short = diabetes_csv(&dir, "short.csv", HEADER, &rows);
    let mut text = std::fs::read_to_string(&short).unwrap();
    text.push_str("1,2,3\n");
    std::fs::write(&short, text).unwrap();
    fail(&short, &["short.csv:14"]);
    let _ = std::fs::remove_dir_all(&dir);
}
