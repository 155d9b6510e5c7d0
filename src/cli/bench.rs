//! `fedbandits bench`: canonical workloads, one machine-readable line each:
//! `bench <name> backend=<b> agent_steps_per_s=<x> ...`.
//!
//! Workloads are job files (so they exercise the real engine path minus
//! Parquet) run for a fixed number of rounds, federations spread over the
//! thread pool. `model_gflop_s` applies DESIGN.md's cost model, 2 K (d^2 + 2d)
//! flops per agent-step for scoring, to the measured rate.

use crate::backend::Backend;
use crate::job::Job;
use crate::sim::run_rep;
use crate::sim::runner::RunError;
use rayon::prelude::*;
use std::path::Path;
use std::time::Instant;

/// (name, federations, job YAML with `{T}` for the rounds).
const WORKLOADS: &[(&str, u32, &str)] = &[
    (
        "linear_d10_k100_m100",
        64,
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 1.0, delta: 0.1, protocol: ldp}\n",
    ),
    (
        "feducb_d10_k100_m100",
        64,
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 1.0, delta: 0.1, sync: log}\n",
    ),
    (
        "independent_d10_k100_m100",
        64,
        "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100}\n",
    ),
];

/// Runs the workloads and prints one line each.
pub fn run(
    backend: &dyn Backend,
    threads: Option<usize>,
    rounds: u64,
    only: Option<&str>,
) -> Result<(), RunError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()
        .map_err(|e| RunError::Threads {
            threads: threads.unwrap_or(0),
            message: e.to_string(),
        })?;
    let nthreads = pool.current_num_threads();
    for (name, feds, yaml) in WORKLOADS {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let text = yaml.replace("{T}", &rounds.max(1).to_string());
        let job = match Job::parse(Path::new(name), &text) {
            Ok(j) => j,
            Err(e) => {
                eprintln!("bench {name}: internal workload is invalid: {e}");
                continue;
            }
        };
        let cell = &job.cells[0];
        let ck = [job.horizon];
        let start = Instant::now();
        pool.install(|| {
            (0..*feds).into_par_iter().with_max_len(1).for_each(|rep| {
                let _ = run_rep(cell, 1, rep, &ck, backend, &|_| {});
            });
        });
        let secs = start.elapsed().as_secs_f64();
        let steps = cell.agent_steps_per_rep() * u64::from(*feds);
        let rate = steps as f64 / secs;
        let (d, k) = (cell.config.env.d as f64, cell.config.env.k as f64);
        let gflops = rate * 2.0 * k * (d * d + 2.0 * d) / 1e9;
        println!(
            "bench {name} backend={} agent_steps_per_s={rate:.0} threads={nthreads} federations={feds} rounds={} seconds={secs:.3} model_gflop_s={gflops:.2}",
            backend.name(),
            job.horizon
        );
    }
    Ok(())
}
