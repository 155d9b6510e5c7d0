//! Parity of a batched backend with the CPU: every cell of a job run as one
//! batch on the backend and repetition by repetition on the CPU, the curves
//! compared bit for bit (regret, max regret and every counter at every
//! checkpoint). `fedbandits calibrate` runs [`PARITY_JOBS`] before it
//! measures a device and refuses to record one that disagrees; the test
//! suite runs the same check under the host emulation of CUDA.

use super::{run_batch, run_rep};
use crate::backend::{Backend, BatchError};
use crate::job::Job;

/// Short jobs covering every algorithm on every environment of its family
/// (linear: both environments; FedUCB and `sdp_vecsum` included, where a
/// device without kernels for them says so and they are skipped).
pub const PARITY_JOBS: &[(&str, &str)] = &[
    (
        "linear_sphere",
        "seed: 5\nrepetitions: 3\nhorizon: 120\ncheckpoints: {every: 20}\nalgorithm: [random, linucb, independent, \
         fedlinucb, private_fedlinucb, feducb_centralized, feducb_decentralized]\nenvironment: linear_sphere\n\
         params: {m: 4, d: 5, k: 20, delta: 0.1, epsilon: 1, batch_size: 12, refactor_every: 9, graph: ring, \
         gamma: 1}\ngrid: {protocol: [ldp, sdp_amp, alt, sdp_vecsum]}\n",
    ),
    (
        "linear_gap",
        "seed: 6\nrepetitions: 3\nhorizon: 120\ncheckpoints: {every: 20}\nalgorithm: [random, linucb, independent, \
         fedlinucb, private_fedlinucb, feducb_centralized, feducb_decentralized]\nenvironment: linear_gap\n\
         params: {m: 4, d: 4, k: 16, delta: 0.1, epsilon: 1, batch_size: 10, refactor_every: 13, graph: ring, \
         gamma: 1}\ngrid: {protocol: [ldp, sdp_amp, alt, sdp_vecsum]}\n",
    ),
    (
        "gossip",
        "seed: 7\nrepetitions: 3\nhorizon: 150\ncheckpoints: {every: 30}\nalgorithm: [gossip_ucb, fed_ucb_gossip, \
         local_ucb, oracle_ucb]\nenvironment: mab_heterogeneous\nparams: {m: 4, arms: 3, epsilon: 1, graph: ring}\n",
    ),
    (
        "combinatorial",
        "seed: 8\nrepetitions: 2\nhorizon: 300\ncheckpoints: {every: 100}\nalgorithm: [non_federated, fcb, p_fcb]\n\
         environment: procurement\nparams: {m: 3, producers: 6, epsilon: 1, delta: 0.01, t_low: 50, t_high: 250}\n",
    ),
];

/// What a parity check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parity {
    /// Cells whose curves were equal bit for bit (labels).
    pub equal: Vec<String>,
    /// Cells the backend has no kernels for (label: why).
    pub skipped: Vec<String>,
}

/// Runs every cell of `yaml` on `dev` (as one batch) and on the CPU and
/// compares them; `Err` names the first cell, repetition and checkpoint
/// that differ.
pub fn check(dev: &dyn Backend, yaml: &str) -> Result<Parity, String> {
    let job = Job::parse(std::path::Path::new("parity.yaml"), yaml).map_err(|e| e.to_string())?;
    let ck = job.checkpoint_rounds();
    let reps: Vec<u32> = (0..job.repetitions).collect();
    let mut out = Parity::default();
    for cell in &job.cells {
        let label = cell.label();
        let batched = match run_batch(cell, job.seed, &reps, &ck, dev, &|_| {}) {
            Ok(b) => b,
            Err(BatchError::Unsupported(why)) => {
                out.skipped.push(format!("{label}: {why}"));
                continue;
            }
            Err(e) => return Err(format!("{label}: {e}")),
        };
        for (r, b) in reps.iter().zip(&batched) {
            let cpu = run_rep(cell, job.seed, *r, &ck, &|_| {});
            if cpu.points.len() != b.points.len() {
                return Err(format!(
                    "{label} repetition {r}: {} checkpoints against the CPU's {}",
                    b.points.len(),
                    cpu.points.len()
                ));
            }
            for (a, p) in cpu.points.iter().zip(&b.points) {
                let same = a.t == p.t
                    && a.group_regret.to_bits() == p.group_regret.to_bits()
                    && a.agent_regret_max.to_bits() == p.agent_regret_max.to_bits()
                    && a.counters == p.counters
                    && a.gossip == p.gossip
                    && a.comb == p.comb;
                if !same {
                    return Err(format!(
                        "{label} repetition {r} t {}: group regret {} against the CPU's {} (or a counter differs)",
                        p.t, p.group_regret, a.group_regret
                    ));
                }
            }
        }
        out.equal.push(label);
    }
    Ok(out)
}

/// [`check`] over every job of [`PARITY_JOBS`].
pub fn check_all(dev: &dyn Backend) -> Result<Parity, String> {
    let mut all = Parity::default();
    for (name, yaml) in PARITY_JOBS {
        let p = check(dev, yaml).map_err(|e| format!("{name}: {e}"))?;
        all.equal.extend(p.equal);
        all.skipped.extend(p.skipped);
    }
    Ok(all)
}
