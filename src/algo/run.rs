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

    /// The family's name, for matching a snapshot's state to its plan.
    fn family_name(&self) -> &'static str {
        match self {
            CellBatch::Linear(_) => linear::FAMILY.name,
            CellBatch::Gossip(_) => gossip::FAMILY.name,
            CellBatch::Comb(_) => combinatorial::FAMILY.name,
        }
    }

    /// The linear batch, or the mismatch a state of that family meets.
    fn linear(&self) -> Result<&LinearBatch, BatchError> {
        match self {
            CellBatch::Linear(b) => Ok(b),
            CellBatch::Gossip(_) | CellBatch::Comb(_) => Err(BatchError::StateMismatch),
        }
    }

    /// The gossip batch, or the mismatch.
    fn gossip(&self) -> Result<&GossipBatch, BatchError> {
        match self {
            CellBatch::Gossip(b) => Ok(b),
            CellBatch::Linear(_) | CellBatch::Comb(_) => Err(BatchError::StateMismatch),
        }
    }

    /// The combinatorial batch, or the mismatch.
    fn comb(&self) -> Result<&CombBatch, BatchError> {
        match self {
            CellBatch::Comb(b) => Ok(b),
            CellBatch::Linear(_) | CellBatch::Gossip(_) => Err(BatchError::StateMismatch),
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

    /// Whether a snapshot's state fits the plan of this engine: both of one
    /// family. (Every match here names each family: a new one does not
    /// compile until it is written in.)
    pub fn fits(&self, plan: &CellBatch) -> bool {
        let family = match self {
            RepState::Lockstep(_) => linear::FAMILY.name,
            RepState::Gossip(_) => gossip::FAMILY.name,
            RepState::Comb(_) => combinatorial::FAMILY.name,
        };
        family == plan.family_name()
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
        match self {
            RepState::Lockstep(r) => r.advance(plan.linear()?, until, checkpoints),
            RepState::Gossip(r) => r.advance(plan.gossip()?, until, checkpoints),
            RepState::Comb(r) => r.advance(plan.comb()?, until, checkpoints),
        }
    }

    /// The repetition's curve (empty for a plan of another family, which
    /// [`RepState::fits`] rules out before any state is used).
    pub fn into_points(self, plan: &CellBatch) -> Vec<CurvePoint> {
        match self {
            RepState::Lockstep(r) => plan.linear().map(|b| r.into_points(b)),
            RepState::Gossip(r) => plan.gossip().map(|b| r.into_points(b)),
            RepState::Comb(r) => plan.comb().map(|b| r.into_points(b)),
        }
        .unwrap_or_default()
    }
}
