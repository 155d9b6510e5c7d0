//! Running a cell's repetitions, whatever its family: [`CellBatch`] (the
//! repetitions as one batch of the family's description), run on a
//! backend's batched operations ([`CellBatch::run`]), or one repetition on
//! the CPU with a state that can be snapshotted and resumed
//! ([`RepState`]). Each arm hands over to the family's own round loop and
//! checkpoint-to-curve-point function; the simulation layer above sees
//! only these types.

use super::curve::CurvePoint;
use super::{CellConfig, FamilyBatch, FamilyRep};
use super::{combinatorial, gossip, linear};
use crate::algo::combinatorial::batch::CombBatch;
use crate::algo::gossip::batch::GossipBatch;
use crate::algo::linear::batch::LinearBatch;
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
/// federation), as its family keeps it ([`FamilyRep`]). A closed enum
/// because it is serialized into snapshots (serde needs the set of types);
/// each variant wraps its family's state.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum RepState {
    /// Linear family.
    Lockstep(linear::Rep),
    /// Gossip family.
    Gossip(gossip::Rep),
    /// Combinatorial family.
    Comb(combinatorial::Rep),
}

impl RepState {
    /// Round 0 of a repetition whose batch (of one federation) is `plan`.
    pub fn start(plan: &CellBatch) -> Result<Self, BatchError> {
        Ok(match plan {
            CellBatch::Linear(b) => RepState::Lockstep(FamilyRep::start(b)?),
            CellBatch::Gossip(b) => RepState::Gossip(FamilyRep::start(b)?),
            CellBatch::Comb(b) => RepState::Comb(FamilyRep::start(b)?),
        })
    }

    /// Whether a snapshot's state fits the plan of this engine.
    pub fn fits(&self, plan: &CellBatch) -> bool {
        matches!(
            (self, plan),
            (RepState::Lockstep(_), CellBatch::Linear(_))
                | (RepState::Gossip(_), CellBatch::Gossip(_))
                | (RepState::Comb(_), CellBatch::Comb(_))
        )
    }

    /// Rounds done.
    pub fn t(&self) -> u64 {
        match self {
            RepState::Lockstep(r) => r.t(),
            RepState::Gossip(r) => r.t(),
            RepState::Comb(r) => r.t(),
        }
    }

    /// Runs rounds up to `until`, which the caller keeps within the plan's
    /// horizon (no batch holds one).
    pub fn advance(&mut self, plan: &CellBatch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        match (self, plan) {
            (RepState::Lockstep(r), CellBatch::Linear(b)) => r.advance(b, until, checkpoints),
            (RepState::Gossip(r), CellBatch::Gossip(b)) => r.advance(b, until, checkpoints),
            (RepState::Comb(r), CellBatch::Comb(b)) => r.advance(b, until, checkpoints),
            _ => Err(BatchError::StateMismatch),
        }
    }

    /// The repetition's curve.
    pub fn into_points(self, plan: &CellBatch) -> Vec<CurvePoint> {
        match (self, plan) {
            (RepState::Lockstep(r), CellBatch::Linear(b)) => r.into_points(b),
            (RepState::Gossip(r), CellBatch::Gossip(b)) => r.into_points(b),
            (RepState::Comb(r), CellBatch::Comb(b)) => r.into_points(b),
            _ => Vec::new(),
        }
    }
}
