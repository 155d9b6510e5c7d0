//! Running federations: one repetition of one cell from round 1 to T,
//! recording the regret curve at the checkpoints ([`run_rep`]); and the job
//! runner that spreads repetitions over threads, skips finished cells and
//! writes results ([`runner`]).

pub mod cost;
pub mod merge;
pub mod parity;
pub mod runner;

use crate::algo::combinatorial::{CombPoint, comb_batch};
use crate::algo::gossip::{GossipPoint, gossip_batch};
use crate::algo::linear::lockstep::Lockstep;
use crate::algo::{CellConfig, Counters};
use crate::backend::combinatorial::CombBatch;
use crate::backend::cpu::combinatorial::CpuComb;
use crate::backend::cpu::gossip::CpuGossip;
use crate::backend::cpu::lockstep::CpuLinear;
use crate::backend::gossip::GossipBatch;
use crate::backend::{Backend, BatchError, BatchPoint, LinearBatch};
use crate::job::Cell;
use std::time::Instant;

pub use crate::output::{CombMetrics, CurvePoint, GossipMetrics, RepResult};

/// How often (in rounds) a running repetition reports progress, checks for
/// a stop request and considers a snapshot.
const CHECK_EVERY: u64 = 256;

/// How often (in rounds) a batch reports progress.
const PROGRESS_EVERY: u64 = 1024;

/// Version of the snapshot format (with the engine's semantics version).
/// 2: lockstep repetitions snapshot the loop and the CPU batch state.
/// 4: agents carry their reward bound and clip count.
/// 5: the file is sealed with a checksum ([`crate::output::seal`]).
/// 6: a privacy tree carries its live nodes' noise sum.
/// 7: FedUCB runs on the lockstep core (no federation objects).
/// 8: the vector-summation protocol's randomness is keyed (no streams).
/// 9: decentralized FedUCB keeps its messages in rings (no queue).
const SNAPSHOT_VERSION: u32 = 9;

/// Periodic snapshots of a running repetition.
pub struct Snapshots<'a> {
    /// Where this repetition's snapshot lives.
    pub path: std::path::PathBuf,
    /// Minimum time between snapshots.
    pub every: std::time::Duration,
    /// Set (by SIGTERM/SIGINT) to snapshot and stop at the next check.
    pub stop: &'a std::sync::atomic::AtomicBool,
}

/// A repetition in flight, with everything needed to continue it.
#[derive(serde::Serialize, serde::Deserialize)]
struct RepSnapshot<S> {
    version: u32,
    semantics: u32,
    cell_key: String,
    rep: u32,
    wall_before: f64,
    state: S,
}

/// How a repetition runs: its family's loop over a batch of one federation.
enum RepPlan {
    Linear(LinearBatch),
    Gossip(GossipBatch),
    Comb(CombBatch),
}

impl RepPlan {
    fn of(cell: &Cell, seed: u64, rep: u32) -> Result<Self, BatchError> {
        Ok(match &cell.config {
            CellConfig::Gossip(cfg) => {
                let (env_keys, algo_keys) = rep_keys(cell, seed, &[rep]);
                RepPlan::Gossip(gossip_batch(cfg, &env_keys, &algo_keys).map_err(BatchError::Unsupported)?)
            }
            CellConfig::Comb(cfg) => {
                let (env_keys, algo_keys) = rep_keys(cell, seed, &[rep]);
                RepPlan::Comb(comb_batch(cfg, &env_keys, &algo_keys))
            }
            CellConfig::Linear(cfg) => {
                let (env_keys, algo_keys) = rep_keys(cell, seed, &[rep]);
                RepPlan::Linear(
                    crate::algo::linear::linear_batch(cfg, env_keys, &algo_keys).map_err(BatchError::Unsupported)?,
                )
            }
        })
    }
}

/// The state of a repetition in flight.
#[derive(serde::Serialize, serde::Deserialize)]
enum RepState {
    Lockstep {
        step: Lockstep,
        ops: CpuLinear,
        points: Vec<Vec<BatchPoint>>,
    },
    Gossip {
        ops: CpuGossip,
        t: u64,
        points: Vec<Vec<GossipPoint>>,
    },
    Comb {
        ops: CpuComb,
        t: u64,
        points: Vec<Vec<CombPoint>>,
    },
}

impl RepState {
    fn start(plan: &RepPlan) -> Result<Self, BatchError> {
        Ok(match plan {
            RepPlan::Linear(b) => RepState::Lockstep {
                step: Lockstep::new(),
                ops: CpuLinear::new(b)?,
                points: vec![Vec::new()],
            },
            RepPlan::Gossip(b) => RepState::Gossip {
                ops: CpuGossip::new(b)?,
                t: 0,
                points: vec![Vec::new()],
            },
            RepPlan::Comb(b) => RepState::Comb {
                ops: CpuComb::new(b)?,
                t: 0,
                points: vec![Vec::new()],
            },
        })
    }

    /// Whether a snapshot's state fits the plan of this engine.
    fn fits(&self, plan: &RepPlan) -> bool {
        matches!(
            (self, plan),
            (RepState::Lockstep { .. }, RepPlan::Linear(_))
                | (RepState::Gossip { .. }, RepPlan::Gossip(_))
                | (RepState::Comb { .. }, RepPlan::Comb(_))
        )
    }

    fn t(&self) -> u64 {
        match self {
            RepState::Lockstep { step, .. } => step.t,
            RepState::Gossip { t, .. } | RepState::Comb { t, .. } => *t,
        }
    }

    /// Runs rounds up to `until` (at most the horizon).
    fn advance(&mut self, cell: &Cell, plan: &RepPlan, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        let until = until.min(cell.config.horizon());
        match (self, plan) {
            (RepState::Lockstep { step, ops, points }, RepPlan::Linear(b)) => {
                step.advance(b, ops, until, checkpoints, points)
            }
            (RepState::Gossip { ops, t, points }, RepPlan::Gossip(b)) => {
                crate::algo::gossip::run(b, ops, *t, until, checkpoints, points)?;
                *t = until.max(*t);
                Ok(())
            }
            (RepState::Comb { ops, t, points }, RepPlan::Comb(b)) => {
                crate::algo::combinatorial::run(b, ops, *t, until, checkpoints, points)?;
                *t = until.max(*t);
                Ok(())
            }
            _ => Err(BatchError::Failed("a repetition's state does not fit its plan".into())),
        }
    }

    fn into_points(self, cell: &Cell, plan: &RepPlan) -> Vec<CurvePoint> {
        match (self, plan) {
            (RepState::Lockstep { points, .. }, _) => points
                .into_iter()
                .next()
                .unwrap_or_default()
                .into_iter()
                .map(|p| curve_point(p, cell.config.agents()))
                .collect(),
            (RepState::Gossip { points, .. }, RepPlan::Gossip(b)) => {
                let lambda2 = b.graphs.first().map_or(f64::NAN, crate::graph::Graph::gossip_lambda2);
                points
                    .into_iter()
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| gossip_point(&p, b, lambda2))
                    .collect()
            }
            (RepState::Gossip { .. }, _) => Vec::new(),
            (RepState::Comb { points, .. }, RepPlan::Comb(b)) => points
                .into_iter()
                .next()
                .unwrap_or_default()
                .iter()
                .map(|p| comb_point(p, b))
                .collect(),
            (RepState::Comb { .. }, _) => Vec::new(),
        }
    }
}

/// A curve point with the regret and communication columns every family
/// writes (no family-specific metrics, no factorization counters).
fn base_point(t: u64, group: f64, agents: u64, max: f64, sync_rounds: u64, messages: u64) -> CurvePoint {
    CurvePoint {
        t,
        group_regret: group,
        agent_regret_mean: group / agents as f64,
        agent_regret_max: max,
        counters: Counters {
            sync_rounds,
            messages,
            cholesky_failures: 0,
            beta_clamps: 0,
            clipped_rewards: 0,
        },
        gossip: None,
        comb: None,
    }
}

/// A gossip checkpoint as an output curve point. Communication counters:
/// `gossip_ucb`/`fed_ucb_gossip` exchange over one edge per round after the
/// initial pulls (`sync_rounds` = those rounds, `messages` = 2 per round);
/// `oracle_ucb` shares everything every round (N (N - 1) messages);
/// `local_ucb` never communicates.
fn gossip_point(p: &GossipPoint, b: &GossipBatch, lambda2: f64) -> CurvePoint {
    use crate::backend::gossip::GossipPolicy;
    let (n, m) = b
        .envs
        .first()
        .map_or((1, 0), |e| (e.spec.agents as u64, e.spec.arms as u64));
    let (sync_rounds, messages) = match b.policy {
        GossipPolicy::Gossip => {
            let r = p.t.saturating_sub(m);
            (r, 2 * r)
        }
        GossipPolicy::Oracle => (p.t, p.t * n * n.saturating_sub(1)),
        GossipPolicy::Local => (0, 0),
    };
    CurvePoint {
        gossip: Some(GossipMetrics {
            consensus_error: p.obs.consensus_error,
            forced_pulls: p.obs.forced_pulls,
            clipped: p.obs.clipped,
            lambda2,
        }),
        ..base_point(
            p.t,
            p.obs.group_regret,
            n,
            p.obs.agent_regret_max,
            sync_rounds,
            messages,
        )
    }
}

/// A combinatorial checkpoint as an output curve point. Communication
/// counters count (sender, receiver, producer) messages: `fcb` sends every
/// round (n (n - 1) m per round), `p_fcb` in its communication rounds
/// (accepted + rejected), `non_federated` never.
fn comb_point(p: &CombPoint, b: &CombBatch) -> CurvePoint {
    use crate::backend::combinatorial::CombPolicy;
    let (n, m) = b
        .instances
        .first()
        .map_or((1, 0), |i| (i.spec.agents as u64, i.spec.producers as u64));
    let (sync_rounds, messages) = match b.policy {
        CombPolicy::Fcb => (p.t, p.t * n * n.saturating_sub(1) * m),
        CombPolicy::PFcb(_) => (p.obs.communications, p.obs.accepted + p.obs.rejected),
        CombPolicy::NonFederated => (0, 0),
    };
    CurvePoint {
        comb: Some(CombMetrics {
            regret_after_exploration: p.obs.regret_after_exploration,
            violations: p.obs.violations,
            accepted: p.obs.accepted,
            rejected: p.obs.rejected,
            epsilon_spent: p.obs.epsilon_spent,
            delta_spent: p.obs.delta_spent,
            private: matches!(b.policy, CombPolicy::PFcb(_)),
        }),
        ..base_point(
            p.t,
            p.obs.group_regret,
            n,
            p.obs.agent_regret_max,
            sync_rounds,
            messages,
        )
    }
}

/// A batch's checkpoint as an output curve point.
fn curve_point(p: BatchPoint, m: usize) -> CurvePoint {
    let mut c = base_point(
        p.t,
        p.group_regret,
        m as u64,
        p.agent_regret_max,
        p.sync_rounds,
        p.messages,
    );
    c.counters.cholesky_failures = p.cholesky_failures;
    c.counters.clipped_rewards = p.clipped_rewards;
    c.counters.beta_clamps = p.beta_clamps;
    c
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
    let plan = RepPlan::of(cell, seed, rep)?;
    let (mut state, wall_before) = match snap.filter(|s| s.path.exists()) {
        Some(s) => {
            let invalid = |message: String| SnapshotError::Invalid {
                path: s.path.clone(),
                message,
            };
            let bytes = std::fs::read(&s.path).map_err(|e| invalid(e.to_string()))?;
            let payload = crate::output::unseal(&bytes).map_err(invalid)?;
            let snapshot: RepSnapshot<RepState> = bincode::deserialize(payload).map_err(|e| invalid(e.to_string()))?;
            if snapshot.version != SNAPSHOT_VERSION
                || snapshot.semantics != crate::job::SEMANTICS_VERSION
                || snapshot.cell_key != cell.key
                || snapshot.rep != rep
                || !snapshot.state.fits(&plan)
            {
                return Err(invalid("written for another cell, repetition or engine version".into()));
            }
            progress(snapshot.state.t() * m);
            (snapshot.state, snapshot.wall_before)
        }
        None => (RepState::start(&plan)?, 0.0),
    };
    let horizon = cell.config.horizon();
    let mut last_snapshot = Instant::now();
    while state.t() < horizon {
        let t0 = state.t();
        state.advance(cell, &plan, (t0 / CHECK_EVERY + 1) * CHECK_EVERY, checkpoints)?;
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
                state: &state,
            };
            let bytes = bincode::serialize(&snapshot).map_err(|e| SnapshotError::Invalid {
                path: s.path.clone(),
                message: e.to_string(),
            })?;
            crate::output::write_bytes_atomic(&s.path, &crate::output::seal(&bytes))?;
            if stop {
                return Ok(RepOutcome::Stopped);
            }
            last_snapshot = Instant::now();
        }
    }
    Ok(RepOutcome::Done(RepResult {
        rep,
        points: state.into_points(cell, &plan),
        wall_seconds: wall_before + start.elapsed().as_secs_f64(),
    }))
}

/// Repetitions of one cell as one batch, of the cell's family.
pub enum CellBatch {
    /// Linear contextual family.
    Linear(LinearBatch),
    /// Decentralized multi-armed family.
    Gossip(GossipBatch),
    /// Combinatorial procurement family.
    Comb(CombBatch),
}

impl CellBatch {
    /// The batch as placement sees it.
    pub fn as_ref(&self) -> crate::backend::BatchRef<'_> {
        match self {
            CellBatch::Linear(b) => crate::backend::BatchRef::Linear(b),
            CellBatch::Gossip(b) => crate::backend::BatchRef::Gossip(b),
            CellBatch::Comb(b) => crate::backend::BatchRef::Comb(b),
        }
    }
}

/// Repetitions `reps` of `cell` as one batch for a backend's batched path,
/// or why it cannot be built (a graph that cannot be built).
pub fn cell_batch(cell: &Cell, seed: u64, reps: &[u32]) -> Result<CellBatch, String> {
    let (env_keys, algo_keys) = rep_keys(cell, seed, reps);
    match &cell.config {
        CellConfig::Linear(cfg) => crate::algo::linear::linear_batch(cfg, env_keys, &algo_keys).map(CellBatch::Linear),
        CellConfig::Gossip(cfg) => gossip_batch(cfg, &env_keys, &algo_keys).map(CellBatch::Gossip),
        CellConfig::Comb(cfg) => Ok(CellBatch::Comb(comb_batch(cfg, &env_keys, &algo_keys))),
    }
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
    let batch = cell_batch(cell, seed, reps).map_err(BatchError::Unsupported)?;
    run_built_batch(cell, reps, &batch, checkpoints, backend, progress)
}

/// [`run_batch`] with the batch already built by [`cell_batch`] for the same
/// repetitions (the runner builds it once to place the cell): the family's
/// round loop over `backend`'s batched operations.
pub fn run_built_batch(
    cell: &Cell,
    reps: &[u32],
    batch: &CellBatch,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &dyn Fn(u64),
) -> Result<Vec<RepResult>, BatchError> {
    let start = Instant::now();
    let points: Vec<Vec<CurvePoint>> = match batch {
        CellBatch::Linear(batch) => {
            let mut ops = backend.linear_ops(batch)?;
            let mut step = Lockstep::new();
            let mut curves = vec![Vec::with_capacity(checkpoints.len()); batch.federations()];
            let n = (batch.federations() * batch.m) as u64;
            while step.t < batch.horizon {
                let t0 = step.t;
                let until = (t0 / PROGRESS_EVERY + 1) * PROGRESS_EVERY;
                step.advance(batch, ops.as_mut(), until, checkpoints, &mut curves)?;
                progress((step.t - t0) * n);
            }
            curves
                .into_iter()
                .map(|c| c.into_iter().map(|p| curve_point(p, cell.config.agents())).collect())
                .collect()
        }
        CellBatch::Gossip(batch) => {
            let mut ops = backend.gossip_ops(batch)?;
            let agents = batch.envs.first().map_or(0, |e| e.spec.agents);
            let curves = in_progress_steps(
                batch.horizon,
                batch.federations(),
                agents,
                checkpoints,
                progress,
                |t, until, c| crate::algo::gossip::run(batch, ops.as_mut(), t, until, checkpoints, c),
            )?;
            curves
                .into_iter()
                .zip(&batch.graphs)
                .map(|(c, g)| {
                    let lambda2 = g.gossip_lambda2();
                    c.iter().map(|p| gossip_point(p, batch, lambda2)).collect()
                })
                .collect()
        }
        CellBatch::Comb(batch) => {
            let mut ops = backend.comb_ops(batch)?;
            let agents = batch.instances.first().map_or(0, |i| i.spec.agents);
            let curves = in_progress_steps(
                batch.horizon,
                batch.federations(),
                agents,
                checkpoints,
                progress,
                |t, until, c| crate::algo::combinatorial::run(batch, ops.as_mut(), t, until, checkpoints, c),
            )?;
            curves
                .into_iter()
                .map(|c| c.iter().map(|p| comb_point(p, batch)).collect())
                .collect()
        }
    };
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

/// Runs a family's round loop (`run(from, until, curves)`) over the whole
/// horizon in steps of [`PROGRESS_EVERY`] rounds, reporting agent-steps to
/// `progress` after each; one curve per federation.
fn in_progress_steps<P: Clone>(
    horizon: u64,
    federations: usize,
    agents: usize,
    checkpoints: &[u64],
    progress: &dyn Fn(u64),
    mut run: impl FnMut(u64, u64, &mut [Vec<P>]) -> Result<(), BatchError>,
) -> Result<Vec<Vec<P>>, BatchError> {
    let mut curves = vec![Vec::with_capacity(checkpoints.len()); federations];
    let n = agents as u64 * federations as u64;
    let mut t = 0;
    while t < horizon {
        let until = ((t / PROGRESS_EVERY + 1) * PROGRESS_EVERY).min(horizon);
        run(t, until, &mut curves)?;
        progress((until - t) * n);
        t = until;
    }
    Ok(curves)
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
pub fn memory_per_federation(cfg: &CellConfig) -> u64 {
    match cfg {
        CellConfig::Linear(c) => linear_memory_per_federation(c),
        CellConfig::Gossip(c) => {
            // Per agent and arm: counts, estimates, sums, partial sums (about
            // 12 words); the graph's hop-distance matrix and lists.
            let (n, m) = (c.env.agents as u64, c.env.arms as u64);
            n * m * 12 * 8 + n * n * 4 + n * (m + 64) * 8
        }
        CellConfig::Comb(c) => {
            // Per agent and producer: cost, capacity, revenues, W, Y, own,
            // pending and snapshot counts, messages (about 12 words).
            let (n, m) = (c.env.agents as u64, c.env.producers as u64);
            n * m * 12 * 8 + m * 64 + n * 64
        }
    }
}

fn linear_memory_per_federation(cfg: &crate::algo::linear::LinearConfig) -> u64 {
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
