//! Running federations: one repetition of one cell from round 1 to T,
//! recording the regret curve at the checkpoints ([`run_rep`]); and the job
//! runner that spreads repetitions over threads, skips finished cells and
//! writes results ([`runner`]).

pub mod cost;
pub mod error;
pub mod memory;
pub mod merge;
pub mod parity;
pub mod progress;
pub mod runner;
pub mod summary;

pub use crate::algo::curve::{CurvePoint, RepResult};
pub use crate::algo::run::CellBatch;
use crate::algo::run::RepState;
use crate::backend::{Backend, BatchError};
use crate::job::Cell;
use std::time::Instant;

/// How often (in rounds) a running repetition reports progress, checks for
/// a stop request and considers a snapshot.
const CHECK_EVERY: u64 = 256;

/// Version of the snapshot format (with the engine's semantics version).
/// 2: lockstep repetitions snapshot the loop and the CPU batch state.
/// 4: agents carry their reward bound and clip count.
/// 5: the file is sealed with a checksum ([`crate::output::seal`]).
/// 6: a privacy tree carries its live nodes' noise sum.
/// 7: FedUCB runs on the lockstep core (no federation objects).
/// 8: the vector-summation protocol's randomness is keyed (no streams).
/// 9: decentralized FedUCB keeps its messages in rings (no queue).
/// 10: combinatorial federations carry the good-unit draws' workspace (their
/// cached CDF tables are not stored: rebuilt on resume).
/// 11: P-FCB's policy says whether its messages carry noise.
/// 12: the header names the repetition's family, whose own bytes follow
/// it (the set of families is the registry's, not a closed enum).
const SNAPSHOT_VERSION: u32 = 12;

/// Periodic snapshots of a running repetition.
pub struct Snapshots<'a> {
    /// Where this repetition's snapshot lives.
    pub path: std::path::PathBuf,
    /// Minimum time between snapshots.
    pub every: std::time::Duration,
    /// Set (by SIGTERM/SIGINT) to snapshot and stop at the next check.
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// Where a resumed repetition is counted.
    pub resumed: &'a Resumed,
}

/// The repetitions a run resumed from snapshots: how many, the
/// agent-steps computed before their stop (not this run's work), and the
/// earliest and latest round they resumed at.
#[derive(Debug, Default)]
pub struct Resumed {
    reps: std::sync::atomic::AtomicU64,
    agent_steps: std::sync::atomic::AtomicU64,
    first: std::sync::atomic::AtomicU64,
    last: std::sync::atomic::AtomicU64,
}

impl Resumed {
    fn record(&self, t: u64, agent_steps: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.reps.fetch_add(1, Relaxed) == 0 {
            self.first.store(t, Relaxed);
        } else {
            self.first.fetch_min(t, Relaxed);
        }
        self.last.fetch_max(t, Relaxed);
        self.agent_steps.fetch_add(agent_steps, Relaxed);
    }

    /// (repetitions, agent-steps before their stop, earliest round, latest
    /// round).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.reps.load(Relaxed),
            self.agent_steps.load(Relaxed),
            self.first.load(Relaxed),
            self.last.load(Relaxed),
        )
    }
}

/// A repetition in flight, with everything needed to continue it: this
/// header, then its family's state ([`RepState::write`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct RepSnapshot {
    version: u32,
    semantics: u32,
    cell_key: String,
    rep: u32,
    wall_before: f64,
    family: String,
}

/// Result of a resumable repetition.
pub enum RepOutcome {
    /// It ran to the horizon.
    Done(RepResult),
    /// It was asked to stop; its state is in the snapshot.
    Stopped,
}

/// Failures of a repetition.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Writing or reading the file failed.
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    /// The file is not a snapshot of this repetition.
    #[error("{path}: not a usable snapshot ({message}); move it away to restart this repetition")]
    Invalid {
        /// File.
        path: std::path::PathBuf,
        /// Why.
        message: String,
    },
    /// The repetition could not be built or run.
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// Runs repetition `rep` of `cell`. `progress` receives agent-steps done
/// since its previous call.
pub fn run_rep(cell: &Cell, seed: u64, rep: u32, checkpoints: &[u64], progress: &(dyn Fn(u64) + Sync)) -> RepResult {
    match run_rep_resumable(cell, seed, rep, checkpoints, progress, None) {
        Ok(RepOutcome::Done(r)) => r,
        // Without snapshots nothing can stop; a loaded job's cells build.
        _ => RepResult {
            rep,
            points: Vec::new(),
            wall_seconds: 0.0,
        },
    }
}

/// Like [`run_rep`], resuming from and writing snapshots when `snap` is
/// given. The snapshot holds the whole repetition (every random stream
/// included), so a resumed repetition is bit-identical to an uninterrupted
/// one. Every algorithm runs through its family's loop as a batch of one
/// federation on the CPU.
pub fn run_rep_resumable(
    cell: &Cell,
    seed: u64,
    rep: u32,
    checkpoints: &[u64],
    progress: &(dyn Fn(u64) + Sync),
    snap: Option<&Snapshots<'_>>,
) -> Result<RepOutcome, SnapshotError> {
    let start = Instant::now();
    let m = cell.config.agents() as u64;
    let (env_keys, algo_keys) = rep_keys(cell, seed, &[rep]);
    let plan = CellBatch::new(&cell.config, env_keys, &algo_keys).map_err(BatchError::Graph)?;
    let (mut state, wall_before) = match snap.filter(|s| s.path.exists()) {
        Some(s) => {
            let invalid = |message: String| SnapshotError::Invalid {
                path: s.path.clone(),
                message,
            };
            let bytes = std::fs::read(&s.path).map_err(|e| invalid(e.to_string()))?;
            let payload = crate::output::unseal(&bytes).map_err(|e| invalid(e.to_string()))?;
            // The format's version first (its first field): a snapshot of
            // another format is not decoded further. The header is read
            // from the slice (no length it holds is allocated before the
            // bytes are there), and the family's bytes follow it.
            let version: u32 = bincode::deserialize(payload).map_err(|e| invalid(e.to_string()))?;
            if version != SNAPSHOT_VERSION {
                return Err(invalid(format!(
                    "snapshot format {version}, this engine reads {SNAPSHOT_VERSION}"
                )));
            }
            let snapshot: RepSnapshot = bincode::deserialize(payload).map_err(|e| invalid(e.to_string()))?;
            let header = bincode::serialized_size(&snapshot).map_err(|e| invalid(e.to_string()))? as usize;
            let rest = payload.get(header..).unwrap_or_default();
            if snapshot.version != SNAPSHOT_VERSION
                || snapshot.semantics != crate::job::SEMANTICS_VERSION
                || snapshot.cell_key != cell.key
                || snapshot.rep != rep
            {
                return Err(invalid("written for another cell, repetition or engine version".into()));
            }
            let state = RepState::read(&plan, &snapshot.family, rest).map_err(|e| invalid(e.to_string()))?;
            progress(state.t() * m);
            s.resumed.record(state.t(), state.t() * m);
            (state, snapshot.wall_before)
        }
        None => (RepState::start(&plan)?, 0.0),
    };
    // The plan's horizon (its last checkpoint); the one place a repetition's
    // step is clamped to it.
    let horizon = checkpoints.last().copied().unwrap_or(0);
    let mut last_snapshot = Instant::now();
    while state.t() < horizon {
        let t0 = state.t();
        state.advance(&plan, ((t0 / CHECK_EVERY + 1) * CHECK_EVERY).min(horizon), checkpoints)?;
        let t = state.t();
        progress((t - t0) * m);
        let Some(s) = snap else { continue };
        let stop = s.stop.load(std::sync::atomic::Ordering::Relaxed);
        if t.is_multiple_of(CHECK_EVERY) && (stop || last_snapshot.elapsed() >= s.every) && t < horizon {
            let snapshot = RepSnapshot {
                version: SNAPSHOT_VERSION,
                semantics: crate::job::SEMANTICS_VERSION,
                cell_key: cell.key.clone(),
                rep,
                wall_before: wall_before + start.elapsed().as_secs_f64(),
                family: state.family().to_string(),
            };
            crate::output::write_bytes_atomic(&s.path, &sealed_snapshot(&snapshot, &state, &s.path)?)?;
            if stop {
                return Ok(RepOutcome::Stopped);
            }
            last_snapshot = Instant::now();
        }
    }
    Ok(RepOutcome::Done(RepResult {
        rep,
        points: state.into_points(&plan)?,
        wall_seconds: wall_before + start.elapsed().as_secs_f64(),
    }))
}

/// A snapshot (its header, then the family's state) serialized behind its
/// seal's header, in one buffer of its exact size (the runner's memory
/// model counts it once per thread, [`crate::sim::memory`]).
fn sealed_snapshot(snapshot: &RepSnapshot, state: &RepState, path: &std::path::Path) -> Result<Vec<u8>, SnapshotError> {
    let invalid = |e: bincode::Error| SnapshotError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let size = (bincode::serialized_size(snapshot).map_err(invalid)? + state.size().map_err(invalid)?) as usize;
    let mut buf = Vec::with_capacity(crate::output::SEAL_HEADER + size);
    buf.resize(crate::output::SEAL_HEADER, 0);
    bincode::serialize_into(&mut buf, snapshot).map_err(invalid)?;
    state.write(&mut buf).map_err(invalid)?;
    crate::output::seal_in_place(&mut buf);
    Ok(buf)
}

/// Repetitions `reps` of `cell` as one batch for a backend's batched path,
/// or why it cannot be built (a graph that cannot be built).
pub fn cell_batch(cell: &Cell, seed: u64, reps: &[u32]) -> Result<CellBatch, crate::graph::GraphError> {
    let (env_keys, algo_keys) = rep_keys(cell, seed, reps);
    CellBatch::new(&cell.config, env_keys, &algo_keys)
}

/// The environment and algorithm keys of repetitions `reps` of a cell.
fn rep_keys(cell: &Cell, seed: u64, reps: &[u32]) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    reps.iter()
        .map(|&r| {
            (
                vec![seed, cell.env_scope, u64::from(r)],
                vec![seed, cell.cell_scope, u64::from(r)],
            )
        })
        .unzip()
}

/// Runs repetitions `reps` of `cell` as one batch on `backend` (in `reps`
/// order); the curves equal [`run_rep`]'s on the CPU bit for bit.
pub fn run_batch(
    cell: &Cell,
    seed: u64,
    reps: &[u32],
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &dyn Fn(u64),
) -> Result<Vec<RepResult>, BatchError> {
    let batch = cell_batch(cell, seed, reps).map_err(BatchError::Graph)?;
    run_built_batch(cell, reps, &batch, checkpoints, backend, progress)
}

/// [`run_batch`] with the batch already built by [`cell_batch`] for the same
/// repetitions (the runner builds it once to place the cell): the family's
/// round loop over `backend`'s batched operations.
pub fn run_built_batch(
    _cell: &Cell,
    reps: &[u32],
    batch: &CellBatch,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &dyn Fn(u64),
) -> Result<Vec<RepResult>, BatchError> {
    let start = Instant::now();
    let points = batch.run(checkpoints, backend, progress)?;
    let wall = start.elapsed().as_secs_f64() / reps.len().max(1) as f64;
    Ok(reps
        .iter()
        .zip(points)
        .map(|(&rep, points)| RepResult {
            rep,
            points,
            wall_seconds: wall,
        })
        .collect())
}

/// The largest memory per federation over a job's cells
/// ([`crate::algo::CellConfig::memory_per_federation`]).
pub fn max_memory_per_federation(job: &crate::job::Job) -> u64 {
    job.cells
        .iter()
        .map(|c| c.config.memory_per_federation())
        .max()
        .unwrap_or(0)
}
