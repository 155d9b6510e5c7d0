//! Running federations: one repetition of one cell from round 1 to T,
//! recording the regret curve at the checkpoints ([`run_rep`]); and the job
//! runner that spreads repetitions over threads, skips finished cells and
//! writes results ([`runner`]).

pub mod merge;
pub mod runner;

use crate::algo::Counters;
use crate::algo::Federation;
use crate::algo::linear::{AnyFederation, build};
use crate::backend::{Backend, BatchError, LinearBatch};
use crate::job::Cell;
use std::time::Instant;

pub use crate::output::{CurvePoint, RepResult};

/// How often (in rounds) a running repetition reports progress, checks for
/// a stop request and considers a snapshot.
const CHECK_EVERY: u64 = 256;

/// Version of the snapshot format (with the engine's semantics version).
const SNAPSHOT_VERSION: u32 = 1;

/// Periodic snapshots of a running repetition.
pub struct Snapshots<'a> {
    /// Where this repetition's snapshot lives.
    pub path: std::path::PathBuf,
    /// Minimum time between snapshots.
    pub every: std::time::Duration,
    /// Set (by SIGTERM/SIGINT) to snapshot and stop at the next check.
    pub stop: &'a std::sync::atomic::AtomicBool,
}

/// The complete state of a repetition in flight.
#[derive(serde::Serialize, serde::Deserialize)]
struct RepSnapshot {
    version: u32,
    semantics: u32,
    cell_key: String,
    rep: u32,
    t: u64,
    group: f64,
    wall_before: f64,
    points: Vec<CurvePoint>,
    fed: AnyFederation,
}

/// Result of a resumable repetition.
pub enum RepOutcome {
    /// It ran to the horizon.
    Done(RepResult),
    /// It was asked to stop; its state is in the snapshot.
    Stopped,
}

/// Snapshot failures.
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
}

/// Runs repetition `rep` of `cell`. `progress` receives agent-steps done
/// since its previous call.
pub fn run_rep(
    cell: &Cell,
    seed: u64,
    rep: u32,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &(dyn Fn(u64) + Sync),
) -> RepResult {
    match run_rep_resumable(cell, seed, rep, checkpoints, backend, progress, None) {
        Ok(RepOutcome::Done(r)) => r,
        // Without snapshots nothing can stop or fail.
        _ => RepResult {
            rep,
            points: Vec::new(),
            wall_seconds: 0.0,
        },
    }
}

/// Like [`run_rep`], resuming from and writing snapshots when `snap` is
/// given. The snapshot holds the whole federation (every random stream
/// included), so a resumed repetition is bit-identical to an uninterrupted one.
pub fn run_rep_resumable(
    cell: &Cell,
    seed: u64,
    rep: u32,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &(dyn Fn(u64) + Sync),
    snap: Option<&Snapshots<'_>>,
) -> Result<RepOutcome, SnapshotError> {
    let start = Instant::now();
    let m = cell.config.m as u64;
    let (mut fed, t0, mut group, mut points, wall_before) = match snap.filter(|s| s.path.exists()) {
        Some(s) => {
            let bytes = std::fs::read(&s.path).map_err(|e| SnapshotError::Invalid {
                path: s.path.clone(),
                message: e.to_string(),
            })?;
            let snapshot: RepSnapshot = bincode::deserialize(&bytes).map_err(|e| SnapshotError::Invalid {
                path: s.path.clone(),
                message: e.to_string(),
            })?;
            if snapshot.version != SNAPSHOT_VERSION
                || snapshot.semantics != crate::job::SEMANTICS_VERSION
                || snapshot.cell_key != cell.key
                || snapshot.rep != rep
            {
                return Err(SnapshotError::Invalid {
                    path: s.path.clone(),
                    message: "written for another cell, repetition or engine version".into(),
                });
            }
            progress(snapshot.t * m);
            (
                snapshot.fed,
                snapshot.t,
                snapshot.group,
                snapshot.points,
                snapshot.wall_before,
            )
        }
        None => {
            let env_key = [seed, cell.env_scope, u64::from(rep)];
            let algo_key = [seed, cell.cell_scope, u64::from(rep)];
            (
                build(&cell.config, &env_key, &algo_key),
                0,
                0.0,
                Vec::with_capacity(checkpoints.len()),
                0.0,
            )
        }
    };
    let mut next = checkpoints.iter().copied().skip_while(|&c| c <= t0).peekable();
    let mut pending = 0u64;
    let mut last_snapshot = Instant::now();
    for t in t0 + 1..=cell.config.horizon {
        group += fed.round(t, backend);
        pending += m;
        if next.peek() == Some(&t) {
            next.next();
            let per = fed.agent_regret();
            points.push(CurvePoint {
                t,
                group_regret: group,
                agent_regret_mean: group / m as f64,
                agent_regret_max: per.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                counters: fed.counters(),
            });
        }
        if t % CHECK_EVERY == 0 {
            progress(pending);
            pending = 0;
            if let Some(s) = snap {
                let stop = s.stop.load(std::sync::atomic::Ordering::Relaxed);
                if (stop || last_snapshot.elapsed() >= s.every) && t < cell.config.horizon {
                    let state = RepSnapshot {
                        version: SNAPSHOT_VERSION,
                        semantics: crate::job::SEMANTICS_VERSION,
                        cell_key: cell.key.clone(),
                        rep,
                        t,
                        group,
                        wall_before: wall_before + start.elapsed().as_secs_f64(),
                        points,
                        fed,
                    };
                    let bytes = bincode::serialize(&state).map_err(|e| SnapshotError::Invalid {
                        path: s.path.clone(),
                        message: e.to_string(),
                    })?;
                    crate::output::write_bytes_atomic(&s.path, &bytes)?;
                    if stop {
                        return Ok(RepOutcome::Stopped);
                    }
                    (fed, points) = (state.fed, state.points);
                    last_snapshot = Instant::now();
                }
            }
        }
    }
    progress(pending);
    Ok(RepOutcome::Done(RepResult {
        rep,
        points,
        wall_seconds: wall_before + start.elapsed().as_secs_f64(),
    }))
}

/// Repetitions `reps` of `cell` as one batch for a backend's batched path,
/// or why the cell's algorithm has no batched form.
pub fn cell_batch(cell: &Cell, seed: u64, reps: &[u32]) -> Result<LinearBatch, String> {
    let env_keys = reps.iter().map(|&r| vec![seed, cell.env_scope, u64::from(r)]).collect();
    let algo_keys: Vec<Vec<u64>> = reps
        .iter()
        .map(|&r| vec![seed, cell.cell_scope, u64::from(r)])
        .collect();
    crate::algo::linear::linear_batch(&cell.config, env_keys, &algo_keys)
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
    let batch = cell_batch(cell, seed, reps).map_err(BatchError::Unsupported)?;
    run_built_batch(cell, reps, &batch, checkpoints, backend, progress)
}

/// [`run_batch`] with the batch already built by [`cell_batch`] for the same
/// repetitions (the runner builds it once to place the cell).
pub fn run_built_batch(
    cell: &Cell,
    reps: &[u32],
    batch: &LinearBatch,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &dyn Fn(u64),
) -> Result<Vec<RepResult>, BatchError> {
    let start = Instant::now();
    let curves = backend.run_linear_batch(batch, checkpoints, progress)?;
    let m = cell.config.m as f64;
    let wall = start.elapsed().as_secs_f64() / reps.len().max(1) as f64;
    Ok(reps
        .iter()
        .zip(curves)
        .map(|(&rep, pts)| RepResult {
            rep,
            points: pts
                .into_iter()
                .map(|p| CurvePoint {
                    t: p.t,
                    group_regret: p.group_regret,
                    agent_regret_mean: p.group_regret / m,
                    agent_regret_max: p.agent_regret_max,
                    counters: Counters {
                        sync_rounds: p.sync_rounds,
                        messages: p.messages,
                        cholesky_failures: p.cholesky_failures,
                        beta_clamps: 0,
                    },
                })
                .collect(),
            wall_seconds: wall,
        })
        .collect())
}

/// The largest [`memory_per_federation`] over a job's cells.
pub fn max_memory_per_federation(job: &crate::job::Job) -> u64 {
    job.cells
        .iter()
        .map(|c| memory_per_federation(&c.config))
        .max()
        .unwrap_or(0)
}

/// Approximate peak memory of one running federation, in bytes.
pub fn memory_per_federation(cfg: &crate::algo::linear::LinearConfig) -> u64 {
    use crate::algo::linear::LinearAlgorithm as A;
    let (m, d, k) = (cfg.m as u64, cfg.env.d as u64, cfg.env.k as u64);
    let kp = k.div_ceil(8) * 8;
    let per_agent = (2 * d * d + 3 * d + 2) * 8 + 400;
    let workspace = (d * kp * 2 + k * d + 4 * d * d) * 8;
    let levels = match cfg.algorithm {
        A::PrivateFedlinucb if cfg.privacy.is_some() => {
            crate::privacy::tree_levels((cfg.horizon / cfg.batch_size).max(1)) as u64
        }
        A::FeducbCentralized if cfg.privacy.is_some() => 2 + (cfg.horizon.max(1) as f64).log2().ceil() as u64,
        _ => 0,
    };
    let trees = if cfg.protocol == crate::algo::linear::Protocol::SdpVecsum {
        // One accumulator and one released node per level and coordinate.
        2 * levels * (d * (d + 1) / 2 + d) * 8 + m * 64
    } else if levels > 0 {
        // Per agent the exact running sum (node noise is regenerated from
        // keys, privacy/tree.rs), plus one node of workspace.
        (m + 1) * (d * d + d) * 8
    } else {
        0
    };
    if cfg.algorithm == A::FeducbDecentralized {
        // gamma slots per agent, each with V^{-1}, S, U (and (V + cI)^{-1}),
        // a tree (its exact running sum) and its last release, plus the
        // sender/receiver flags and in-flight messages (about one per pair).
        let slots = m * cfg.gamma.max(1) as u64;
        let private = u64::from(cfg.privacy.is_some());
        let per_slot = (4 * d * d + 4 * d + 8) * 8 + private * (2 * (d * d + d) * 8 + d * d * 8);
        return slots * per_slot + slots * m + m * m * (d * d + d) * 8 + workspace + m * 400;
    }
    let shifted = if cfg.algorithm == A::FeducbCentralized && cfg.privacy.is_some() {
        m * d * d * 8
    } else {
        0
    };
    m * per_agent + workspace + trees + shifted
}
