//! Parity of a batched backend with the CPU: every cell of a job run as one
//! batch on the backend and repetition by repetition on the CPU, the curves
//! compared bit for bit (regret, max regret and every counter at every
//! checkpoint). `fedbandits calibrate` runs every family's parity jobs before it
//! measures a device and refuses to record one that disagrees; the test
//! suite runs the same check under the host emulation of CUDA.

use super::{run_batch, run_rep};
use crate::backend::{Backend, BatchError};
use crate::job::Job;

/// What a parity check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parity {
    /// Cells whose curves were equal bit for bit (labels).
    pub equal: Vec<String>,
    /// Cells the backend has no kernels for (label: why).
    pub skipped: Vec<String>,
}

/// Why a backend failed the parity check.
#[derive(Debug, thiserror::Error)]
pub enum ParityError {
    /// A parity job's text does not load (a bug of the engine).
    #[error("{0}")]
    Job(#[from] crate::job::JobError),
    /// The backend failed on a cell.
    #[error("{label}: {source}")]
    Failed {
        /// The cell.
        label: String,
        /// What failed.
        source: BatchError,
    },
    /// The backend wrote a different number of checkpoints.
    #[error("{label} repetition {rep}: {got} checkpoints against the CPU's {cpu}")]
    Checkpoints {
        /// The cell.
        label: String,
        /// The repetition.
        rep: u32,
        /// The backend's checkpoints.
        got: usize,
        /// The CPU's.
        cpu: usize,
    },
    /// The first point that differs.
    #[error("{label} repetition {rep} t {t}: group regret {got} against the CPU's {cpu} (or a counter differs)")]
    Differs {
        /// The cell.
        label: String,
        /// The repetition.
        rep: u32,
        /// The round.
        t: u64,
        /// The backend's group regret.
        got: f64,
        /// The CPU's.
        cpu: f64,
    },
    /// In which family's parity job.
    #[error("{job}: {source}")]
    In {
        /// The parity job's name.
        job: &'static str,
        /// What differed.
        source: Box<ParityError>,
    },
}

/// Runs every cell of `yaml` on `dev` (as one batch) and on the CPU and
/// compares them; `Err` names the first cell, repetition and checkpoint
/// that differ.
pub fn check(dev: &dyn Backend, yaml: &str) -> Result<Parity, ParityError> {
    let job = Job::parse(std::path::Path::new("parity.yaml"), yaml)?;
    let reps: Vec<u32> = (0..job.repetitions).collect();
    let mut out = Parity::default();
    for cell in &job.cells {
        let ck = job.checkpoint_rounds_of(cell);
        let label = cell.label();
        let batched = match run_batch(cell, job.seed, &reps, &ck, dev, &|_| {}) {
            Ok(b) => b,
            Err(BatchError::Unsupported(why)) => {
                out.skipped.push(format!("{label}: {why}"));
                continue;
            }
            Err(source) => return Err(ParityError::Failed { label, source }),
        };
        for (r, b) in reps.iter().zip(&batched) {
            let cpu = run_rep(cell, job.seed, *r, &ck, &|_| {});
            if cpu.points.len() != b.points.len() {
                return Err(ParityError::Checkpoints {
                    label,
                    rep: *r,
                    got: b.points.len(),
                    cpu: cpu.points.len(),
                });
            }
            for (a, p) in cpu.points.iter().zip(&b.points) {
                if !a.same(p) {
                    return Err(ParityError::Differs {
                        label,
                        rep: *r,
                        t: p.t,
                        got: p.group_regret,
                        cpu: a.group_regret,
                    });
                }
            }
        }
        out.equal.push(label);
    }
    Ok(out)
}

/// [`check`] over every family's parity jobs
/// ([`crate::algo::family::Family::parity`]).
pub fn check_all(dev: &dyn Backend) -> Result<Parity, ParityError> {
    let mut all = Parity::default();
    for (name, yaml) in crate::algo::family::FAMILIES.iter().flat_map(|f| f.parity.iter()) {
        let p = check(dev, yaml).map_err(|e| ParityError::In {
            job: name,
            source: Box::new(e),
        })?;
        all.equal.extend(p.equal);
        all.skipped.extend(p.skipped);
    }
    Ok(all)
}
