//! `sampler: discrete` (the lattice with exact integer noise,
//! `privacy::lattice`) end to end: the exact-bits audit fails the float
//! Laplace and passes the lattice, through the binary; a discrete cell's
//! noise has its written scale and every release is a lattice point; and a
//! job's rows say
//! which sampler and lattice they used, with the exact figure.

use fedbandits::algo::gossip::cpu::CpuGossip;
use fedbandits::algo::gossip::fed_ucb_gossip::{PrivacyConfig, lattice_laplace};
use fedbandits::algo::gossip::{GossipAlgorithm, GossipConfig, gossip_batch};
use fedbandits::env::mab::MabEnvSpec;
use fedbandits::graph::GraphSpec;
use fedbandits::privacy::lattice::{STEP, Sampler};
use std::path::PathBuf;
use std::process::Command;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gossip(sampler: Sampler) -> GossipConfig {
    GossipConfig {
        algorithm: GossipAlgorithm::FedUcbGossip,
        env: MabEnvSpec {
            agents: 6,
            arms: 4,
            noise_std: 1.0,
            records: None,
        },
        horizon: 600,
        graph: GraphSpec::Ring,
        confidence_scale: 1.0,
        privacy: PrivacyConfig {
            epsilon: 1.0,
            sampler,
            ..PrivacyConfig::default()
        },
    }
}

/// After the initial pulls (t = M = 4, one dyadic block holding each arm's
/// one observation) a discrete cell's X_bar is a lattice point (an integer
/// number of steps: a count of 1), and its noise against `noise: false`
/// (the same rounded observation) has the discrete Laplace's mean absolute
/// value, about its scale t / s steps = b = 10 (epsilon' = 1/10): 40
/// federations x 24 releases put the standard error at 3.2%, tolerance 15%.
/// (The device draws the same lattice points: `cuda::emulated_gossip_*`.)
#[test]
fn a_discrete_cells_releases_are_lattice_points_with_the_written_scale() {
    let cfg = gossip(Sampler::Discrete);
    let keys = |s: u64| (0..40u64).map(|r| vec![2026, s, r]).collect::<Vec<_>>();
    let (ek, ak) = (keys(1), keys(2));
    let xbar_at_m = |cfg: &GossipConfig| {
        let mut ops = CpuGossip::new(&gossip_batch(cfg, &ek, &ak).unwrap()).unwrap();
        fedbandits::algo::rounds::RoundOps::rounds(&mut ops, 1, 4).unwrap();
        ops.federations()
            .iter()
            .flat_map(|f| f.xbar.clone())
            .collect::<Vec<f64>>()
    };
    let noisy = xbar_at_m(&cfg);
    assert!(noisy.iter().all(|&x| fedbandits::privacy::bits::lattice_point(x)));
    let mut clean_cfg = cfg.clone();
    clean_cfg.privacy.noise = false;
    let clean = xbar_at_m(&clean_cfg);
    let lap = lattice_laplace(&cfg.privacy, cfg.horizon).unwrap();
    let b = lap.t as f64 / lap.s as f64 * STEP;
    assert!((b - 10.0).abs() < 1e-3, "scale {b}");
    let mean_abs = noisy.iter().zip(&clean).map(|(x, y)| (x - y).abs()).sum::<f64>() / noisy.len() as f64;
    assert!((mean_abs / b - 1.0).abs() < 0.15, "mean |noise| {mean_abs} vs {b}");
}

const JOB: &str = "\
name: lattice
seed: 15
horizon: 1024
repetitions: 2
algorithm: fed_ucb_gossip
environment: mab_heterogeneous
params: {m: 2, arms: 2, graph: complete}
grid: {epsilon: [0.3, 4], sampler: [float, discrete]}
";

/// The binary's `audit --bits`: every float cell fails (most releases
/// unreachable, a delta lower bound above 0.7), every discrete cell
/// passes, exit 1; `run` writes the sampler and the lattice step in the
/// rows, and the discrete cells' exact figure within 2^-20 of the target
/// below it (the float's is the target).
#[test]
fn audit_bits_fails_the_float_sampler_and_passes_the_lattice() {
    let dir = tempdir("lattice-bits");
    let job = dir.join("lattice.yaml");
    std::fs::write(&job, JOB).unwrap();
    let bin = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fedbandits"));
        c.env("FEDBANDITS_CACHE_DIR", dir.join("cache"));
        c
    };
    let o = bin()
        .args(["audit", job.to_str().unwrap(), "--bits", "--trials", "1000", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    let rows: Vec<&str> = err.lines().filter(|l| l.contains("partial_sums")).collect();
    assert_eq!(rows.len(), 4, "{err}");
    for r in rows {
        let cols: Vec<&str> = r.split_whitespace().collect();
        let (sampler, unreachable, lb) = (
            cols[2],
            cols[4].parse::<u64>().unwrap(),
            cols[5].parse::<f64>().unwrap(),
        );
        match sampler {
            "float" => assert!(unreachable > 700 && lb > 0.7 && r.contains("FAIL"), "{r}"),
            _ => assert!(unreachable == 0 && lb == 0.0 && r.contains("pass"), "{r}"),
        }
    }
    let o = bin()
        .args(["run", job.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let part = dir.join("out/lattice/part-00000-of-00001.parquet");
    let batches = fedbandits::output::read_parquet(&part).unwrap();
    let mut seen = 0;
    for b in &batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let sampler = col("sampler");
        let sampler = sampler.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        let f64s = |n: &str| {
            col(n)
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .unwrap()
                .clone()
        };
        let (step, eps, target) = (f64s("acct_lattice_step"), f64s("acct_epsilon"), f64s("target_epsilon"));
        for i in 0..b.num_rows() {
            seen += 1;
            let (e, t) = (eps.value(i), target.value(i));
            if sampler.value(i) == "discrete" {
                assert_eq!(step.value(i), STEP);
                assert!(e <= t && e > t - 11.0 * STEP, "{e} vs {t}");
            } else {
                assert!(arrow_array::Array::is_null(&step, i));
                assert!((e - t).abs() < 1e-12, "{e} vs {t}");
            }
        }
    }
    assert!(seen > 0);
}
