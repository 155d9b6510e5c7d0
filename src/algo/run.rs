//! Running a cell's repetitions, whatever its family: [`CellBatch`] (the
//! repetitions as one batch of the family's description), run on a
//! backend's batched operations ([`CellBatch::run`]), or one repetition on
//! the CPU with a state that can be snapshotted and resumed
//! ([`RepState`]). Each arm hands over to the family's own round loop and
//! checkpoint-to-curve-point function; the simulation layer above sees
//! only these types.

use super::curve::CurvePoint;
use super::linear::lockstep::Lockstep;
use super::{CellConfig, FamilyBatch};
use super::{combinatorial, gossip, linear};
use crate::algo::combinatorial::batch::CombBatch;
use crate::algo::combinatorial::cpu::CpuComb;
use crate::algo::gossip::batch::GossipBatch;
use crate::algo::gossip::cpu::CpuGossip;
use crate::algo::linear::batch::{BatchPoint, LinearBatch};
use crate::algo::linear::cpu::CpuLinear;
use crate::backend::{Backend, BatchError, Placeable, Unsupported};

impl Placeable for CellBatch {
    fn kind(&self) -> &'static str {
        self.family().kind()
    }

    fn federations(&self) -> usize {
        Placeable::federations(self.family())
    }

    fn cuda_supports(&self, dev: &crate::backend::cuda::CudaBackend) -> Result<(), Unsupported> {
        self.family().cuda_supports(dev)
    }
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
    /// The batch of a cell's configuration for repetitions with these
    /// environment and algorithm keys (one pair per repetition), or why it
    /// cannot be built (a graph that cannot be built).
    pub fn new(
        cfg: &CellConfig,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Self, crate::graph::GraphError> {
        match cfg {
            CellConfig::Linear(c) => linear::linear_batch(c, env_keys, algo_keys).map(CellBatch::Linear),
            CellConfig::Gossip(c) => gossip::gossip_batch(c, &env_keys, algo_keys).map(CellBatch::Gossip),
            CellConfig::Comb(c) => Ok(CellBatch::Comb(combinatorial::comb_batch(c, &env_keys, algo_keys))),
        }
    }

    /// The batch as its family states it: the one place a family's
    /// variant is opened for running and placement.
    pub fn family(&self) -> &dyn FamilyBatch {
        match self {
            CellBatch::Linear(b) => b,
            CellBatch::Gossip(b) => b,
            CellBatch::Comb(b) => b,
        }
    }

    /// Runs the batch to its horizon on `backend`'s batched operations:
    /// one curve per federation; `progress` receives agent-steps.
    pub fn run(
        &self,
        checkpoints: &[u64],
        backend: &dyn Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<CurvePoint>>, BatchError> {
        self.family().run(checkpoints, backend, progress)
    }
}

/// The state of one repetition in flight on the CPU (a batch of one
/// federation), everything needed to continue it: serialized into
/// snapshots, so a resumed repetition is bit-identical to an
/// uninterrupted one.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum RepState {
    /// Linear family: the lockstep loop and the CPU batch.
    Lockstep {
        /// The loop's position.
        step: Lockstep,
        /// The CPU's batch state.
        ops: CpuLinear,
        /// Checkpoints so far.
        points: Vec<Vec<BatchPoint>>,
    },
    /// Gossip family.
    Gossip {
        /// The CPU's batch state.
        ops: CpuGossip,
        /// Rounds done.
        t: u64,
        /// Checkpoints so far.
        points: Vec<Vec<gossip::GossipPoint>>,
    },
    /// Combinatorial family.
    Comb {
        /// The CPU's batch state.
        ops: CpuComb,
        /// Rounds done.
        t: u64,
        /// Checkpoints so far.
        points: Vec<Vec<combinatorial::CombPoint>>,
    },
}

impl RepState {
    /// Round 0 of a repetition whose batch (of one federation) is `plan`.
    pub fn start(plan: &CellBatch) -> Result<Self, BatchError> {
        Ok(match plan {
            CellBatch::Linear(b) => RepState::Lockstep {
                step: Lockstep::new(),
                ops: CpuLinear::new(b)?,
                points: vec![Vec::new()],
            },
            CellBatch::Gossip(b) => RepState::Gossip {
                ops: CpuGossip::new(b)?,
                t: 0,
                points: vec![Vec::new()],
            },
            CellBatch::Comb(b) => RepState::Comb {
                ops: CpuComb::new(b)?,
                t: 0,
                points: vec![Vec::new()],
            },
        })
    }

    /// Whether a snapshot's state fits the plan of this engine.
    pub fn fits(&self, plan: &CellBatch) -> bool {
        matches!(
            (self, plan),
            (RepState::Lockstep { .. }, CellBatch::Linear(_))
                | (RepState::Gossip { .. }, CellBatch::Gossip(_))
                | (RepState::Comb { .. }, CellBatch::Comb(_))
        )
    }

    /// Rounds done.
    pub fn t(&self) -> u64 {
        match self {
            RepState::Lockstep { step, .. } => step.t,
            RepState::Gossip { t, .. } | RepState::Comb { t, .. } => *t,
        }
    }

    /// Runs rounds up to `until` (at most `horizon`).
    pub fn advance(
        &mut self,
        plan: &CellBatch,
        horizon: u64,
        until: u64,
        checkpoints: &[u64],
    ) -> Result<(), BatchError> {
        let until = until.min(horizon);
        match (self, plan) {
            (RepState::Lockstep { step, ops, points }, CellBatch::Linear(b)) => {
                step.advance(b, ops, until, checkpoints, points)
            }
            (RepState::Gossip { ops, t, points }, CellBatch::Gossip(b)) => {
                gossip::run(b, ops, *t, until, checkpoints, points)?;
                *t = until.max(*t);
                Ok(())
            }
            (RepState::Comb { ops, t, points }, CellBatch::Comb(b)) => {
                combinatorial::run(b, ops, *t, until, checkpoints, points)?;
                *t = until.max(*t);
                Ok(())
            }
            _ => Err(BatchError::StateMismatch),
        }
    }

    /// The repetition's curve.
    pub fn into_points(self, plan: &CellBatch) -> Vec<CurvePoint> {
        match (self, plan) {
            (RepState::Lockstep { points, .. }, CellBatch::Linear(b)) => {
                first(points).into_iter().map(|p| linear::curve_point(p, b.m)).collect()
            }
            (RepState::Gossip { points, .. }, CellBatch::Gossip(b)) => {
                let lambda2 = b.graphs.first().map_or(f64::NAN, crate::graph::Graph::gossip_lambda2);
                first(points)
                    .iter()
                    .map(|p| gossip::curve_point(p, b, lambda2))
                    .collect()
            }
            (RepState::Comb { points, .. }, CellBatch::Comb(b)) => {
                first(points).iter().map(|p| combinatorial::curve_point(p, b)).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The curve of a batch of one federation.
fn first<P>(points: Vec<Vec<P>>) -> Vec<P> {
    points.into_iter().next().unwrap_or_default()
}
