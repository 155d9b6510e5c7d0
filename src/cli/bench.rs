//! `fedbandits bench`: canonical workloads, one machine-readable line each:
//! `bench <name> backend=<b> agent_steps_per_s=<x> ...`.
//!
//! Workloads are job files of either family (so they exercise the real engine path minus
//! Parquet) run for a fixed number of rounds, federations spread over the
//! thread pool, or as one batch on the GPU where the backend has kernels for
//! the workload. `model_gflop_s` and `model_gb_s` apply the family's roofline
//! model of an agent-step (flops and bytes, [`crate::algo::FamilyConfig::roofline`])
//! to the measured rate; on a GPU both are also given as fractions of the
//! device's approximate peaks. The families' micro-benchmarks of their
//! kernels (`--kernels`, `--linalg`) are declared in their registry entries.

use crate::backend::{Backend, Placement, Selection};
use crate::job::Job;
use crate::sim::runner::RunError;
use crate::sim::{run_built_batch, run_rep};
use rayon::prelude::*;
use std::path::Path;
use std::time::Instant;

/// Every family's workloads, in registry order: (name, default
/// federations, job YAML with `{T}` for the rounds).
pub fn workloads() -> Vec<(&'static str, u32, &'static str)> {
    crate::algo::family::FAMILIES
        .iter()
        .flat_map(|f| f.workloads.iter().copied())
        .collect()
}

/// What `fedbandits bench` runs.
#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Worker threads (None: all cores).
    pub threads: Option<usize>,
    /// Rounds per federation.
    pub rounds: u64,
    /// Only workloads whose name contains this.
    pub only: Option<String>,
    /// Federations per workload (None: each workload's default).
    pub federations: Option<u32>,
}

/// Where a measurement runs.
#[derive(Clone, Copy)]
pub enum On<'a> {
    /// The CPU backend, repetitions spread over the pool.
    Cpu(&'a rayon::ThreadPool),
    /// A CUDA backend, every repetition in one batch.
    Cuda(&'a crate::backend::cuda::CudaBackend),
}

/// One measurement of a workload.
#[derive(Clone, Copy, Debug)]
pub struct Measurement {
    /// Agent-steps per second.
    pub rate: f64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Rounds per federation.
    pub rounds: u64,
    /// The workload's kind ([`crate::backend::Placeable::kind`]).
    pub kind: &'static str,
    /// The family's roofline model at this rate: (GFLOP/s, GB/s), where it
    /// has one.
    pub model: Option<(f64, f64)>,
    /// On CUDA: kernel launches, bytes uploaded and downloaded by the run
    /// (setup and results included).
    pub traffic: Option<(u64, u64, u64)>,
}

/// Why a workload could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The workload's own job text does not load (a bug of the engine).
    #[error("internal workload is invalid: {0}")]
    Workload(#[from] crate::job::JobError),
    /// The backend cannot run it, or failed.
    #[error(transparent)]
    Batch(#[from] crate::backend::BatchError),
}

/// Runs `feds` federations of a workload (`yaml` with `{T}` for the rounds)
/// for `rounds` rounds on `on`; `Err` when the job or the backend refuses.
pub fn measure(name: &str, yaml: &str, feds: u32, rounds: u64, on: On<'_>) -> Result<Measurement, BenchError> {
    let text = yaml.replace("{T}", &rounds.max(1).to_string());
    let job = Job::parse(Path::new(name), &text)?;
    let cell = &job.cells[0];
    let ck = [job.horizon];
    let reps: Vec<u32> = (0..feds.max(1)).collect();
    let batch = crate::sim::cell_batch(cell, 1, &reps).map_err(crate::backend::BatchError::Graph)?;
    let kind = crate::backend::Placeable::kind(&batch);
    let start = Instant::now();
    let mut traffic = None;
    match on {
        On::Cuda(dev) => {
            crate::backend::Placeable::cuda_supports(&batch, dev).map_err(crate::backend::BatchError::Unsupported)?;
            let before = dev.traffic();
            run_built_batch(cell, &reps, &batch, &ck, dev, &|_| {})?;
            let after = dev.traffic();
            traffic = Some((after.0 - before.0, after.1 - before.1, after.2 - before.2));
        }
        On::Cpu(pool) => pool.install(|| {
            reps.par_iter().with_max_len(1).for_each(|&rep| {
                let _ = run_rep(cell, 1, rep, &ck, &|_| {});
            });
        }),
    }
    let seconds = start.elapsed().as_secs_f64();
    let rate = (cell.agent_steps_per_rep() * u64::from(feds.max(1))) as f64 / seconds;
    // The family's roofline model of an agent-step, at the measured rate.
    let model = cell
        .config
        .family()
        .roofline()
        .map(|(flops, bytes)| (rate * flops / 1e9, rate * bytes / 1e9));
    Ok(Measurement {
        rate,
        seconds,
        rounds: job.horizon,
        kind,
        model,
        traffic,
    })
}

/// A workload's steady-state rate, measured in about `seconds`: rounds
/// double from the fewest the job accepts until a run takes a quarter of the
/// budget (r1 rounds, t1 seconds); then longer runs (r2 rounds, t2 seconds)
/// until t2 - t1 covers half the budget. The rate is the marginal one,
/// agent-steps (r2 - r1) per (t2 - t1) second, which leaves out what every
/// run pays once (building the batch, the device's allocations and uploads,
/// the first launches): what a long-horizon cell sees. A single run's rate
/// counted that cost in, and at thousands of federations on a GPU, where it
/// is a second or more, a one-round run measured it alone (a 4096-federation
/// H100 row read 0.13x the CPU while the kernels ran 6e7 agent-steps/s).
/// Where t2 - t1 stays at noise level, the longer run's plain rate is kept.
pub fn measure_for(name: &str, yaml: &str, feds: u32, seconds: f64, on: On<'_>) -> Result<Measurement, BenchError> {
    const MOST: u64 = 1 << 20;
    let mut rounds = min_rounds(yaml);
    let first = loop {
        let m = measure(name, yaml, feds, rounds, on)?;
        if m.seconds >= seconds / 4.0 || rounds >= MOST {
            break m;
        }
        rounds *= 2;
    };
    let mut r2 = (first.rounds * 2).min(MOST);
    loop {
        let m = measure(name, yaml, feds, r2, on)?;
        let dt = m.seconds - first.seconds;
        let per_round = dt / (m.rounds - first.rounds).max(1) as f64;
        if dt >= seconds / 2.0 || r2 >= MOST {
            return Ok(marginal(first, m));
        }
        // Jump to the rounds half the budget needs once the difference is
        // measurable; until then quadruple.
        r2 = if dt > seconds / 20.0 {
            first.rounds + ((seconds / 2.0 / per_round).ceil() as u64).max(1)
        } else {
            r2 * 4
        }
        .clamp(r2 + 1, MOST);
    }
}

/// `long` with its rate replaced by the marginal rate between `short` and
/// `long` (and the cost model scaled with it); `long` unchanged where the
/// difference is not positive.
fn marginal(short: Measurement, long: Measurement) -> Measurement {
    let dt = long.seconds - short.seconds;
    let steps = long.rate * long.seconds - short.rate * short.seconds;
    if !(dt > 0.0 && steps > 0.0) {
        return long;
    }
    let rate = steps / dt;
    let f = rate / long.rate;
    Measurement {
        rate,
        model: long.model.map(|(g, b)| (g * f, b * f)),
        ..long
    }
}

/// The fewest rounds (a power of two, at most 1024) a workload's job
/// accepts: a sync period B or M initial pulls need that many.
pub fn min_rounds(yaml: &str) -> u64 {
    let mut r = 1u64;
    while r < 1024 && Job::parse(Path::new("min_rounds"), &yaml.replace("{T}", &r.to_string())).is_err() {
        r *= 2;
    }
    r
}

/// Runs the workloads and prints one line each. Each workload runs where
/// the selection places it (`--backend auto`: where this machine's
/// calibration measured it fastest, else the CPU; `--backend cuda`: the GPU,
/// and a workload the device cannot run is reported and skipped).
pub fn run(sel: &Selection, opts: &BenchOptions) -> Result<(), RunError> {
    let pool = crate::sim::runner::thread_pool(opts.threads.unwrap_or(0))?;
    let nthreads = pool.current_num_threads();
    for (name, default_feds, yaml) in workloads() {
        if opts.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let feds = opts.federations.unwrap_or(default_feds).max(1);
        // A workload that syncs every B rounds needs at least B of them.
        let fewest = min_rounds(yaml);
        let rounds = opts.rounds.max(fewest);
        if rounds > opts.rounds {
            eprintln!(
                "bench {name}: {rounds} rounds, the fewest its job accepts (--rounds {})",
                opts.rounds
            );
        }
        let text = yaml.replace("{T}", &rounds.to_string());
        let placement = match Job::parse(Path::new(name), &text) {
            Err(e) => Err(e.to_string()),
            Ok(job) => {
                let reps: Vec<u32> = (0..feds).collect();
                let batch = crate::sim::cell_batch(&job.cells[0], 1, &reps);
                sel.place(batch.as_ref().map(|b| b as &dyn crate::backend::Placeable))
                    .map_err(|u| u.to_string())
            }
        };
        let (on, label, backend): (On<'_>, &str, &dyn Backend) = match (placement, sel.cuda_backend()) {
            (Err(why), _) => {
                eprintln!("bench {name}: skipped: cannot run on CUDA: {why}");
                continue;
            }
            (Ok(Placement::Cuda(_)), Some(dev)) => (On::Cuda(dev), "cuda", dev),
            _ => (On::Cpu(&pool), "cpu", sel.cpu_backend()),
        };
        let m = match measure(name, yaml, feds, rounds, on) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("bench {name}: backend {label} failed: {e}");
                continue;
            }
        };
        let model = match m.model {
            Some((gflops, gbs)) => match (label == "cuda").then(|| backend.device_peaks()).flatten() {
                Some((pf, pb)) => format!(
                    " model_gflop_s={gflops:.2} model_gb_s={gbs:.1} device_peak_fp64_gflop_s={pf:.0} device_peak_gb_s={pb:.0} fp64_fraction={:.4} bandwidth_fraction={:.4}",
                    gflops / pf,
                    gbs / pb
                ),
                None => format!(" model_gflop_s={gflops:.2} model_gb_s={gbs:.1}"),
            },
            None => String::new(),
        };
        let traffic = m.traffic.map_or(String::new(), |(l, up, down)| {
            let per = 1000.0 / m.rounds as f64;
            format!(
                " launches_per_1000_rounds={:.0} bytes_up_per_1000_rounds={:.0} bytes_down_per_1000_rounds={:.0}",
                l as f64 * per,
                up as f64 * per,
                down as f64 * per
            )
        });
        super::emit(&format!(
            "bench {name} backend={label} agent_steps_per_s={:.0} threads={nthreads} federations={feds} rounds={} seconds={:.3}{model}{traffic}\n",
            m.rate, m.rounds, m.seconds
        ));
    }
    Ok(())
}

/// Runs every family's micro-benchmark named `which` (`kernels`,
/// `linalg`), each line printed as it comes.
pub fn micro(which: &str) {
    for f in crate::algo::family::FAMILIES {
        for (name, bench) in f.micro_benches {
            if *name == which {
                bench(&mut |line| super::emit(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Measurement, marginal};

    fn m(rate: f64, seconds: f64, rounds: u64) -> Measurement {
        Measurement {
            rate,
            seconds,
            rounds,
            kind: "linear",
            model: Some((rate, 2.0 * rate)),
            traffic: None,
        }
    }

    /// 10 agent-steps in 1 s and 60 in 3 s: the 50 extra steps took 2 s, a
    /// steady rate of 25 (the plain rates were 10 and 20); the cost model
    /// scales with it. A longer run that took no longer keeps its own rate.
    #[test]
    fn the_marginal_rate_leaves_out_what_every_run_pays_once() {
        let got = marginal(m(10.0, 1.0, 1), m(20.0, 3.0, 6));
        assert!((got.rate - 25.0).abs() < 1e-12, "{}", got.rate);
        assert_eq!(got.rounds, 6);
        let (g, b) = got.model.unwrap_or_default();
        assert!((g - 25.0).abs() < 1e-12 && (b - 50.0).abs() < 1e-12, "{g} {b}");
        assert_eq!(marginal(m(10.0, 1.0, 1), m(9.0, 1.0, 2)).rate, 9.0);
    }
}
