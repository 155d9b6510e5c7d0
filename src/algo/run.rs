//! Running a cell's repetitions, whatever its family: [`CellBatch`] (the
//! repetitions as one batch of the family's description), run on a
//! backend's batched operations ([`CellBatch::run`]), or one repetition on
//! the CPU with a state that can be snapshotted and resumed
//! ([`RepState`]). Both hold the family's own types behind its traits
//! ([`FamilyBatch`], [`super::cell::RepObject`]), so the set of families is
//! the registry's; the simulation layer above sees only these types.

use super::cell::RepObject;
use super::curve::CurvePoint;
use super::{CellConfig, FamilyBatch};
use crate::backend::{Backend, BatchError, Placeable, Unsupported};

/// Repetitions of one cell as one batch, of the cell's family.
pub struct CellBatch {
    /// The family's name (a snapshot's state is read back only into a
    /// plan of its own family).
    family: &'static str,
    batch: Box<dyn FamilyBatch>,
}

impl Placeable for CellBatch {
    fn kind(&self) -> &'static str {
        self.batch.kind()
    }

    fn federations(&self) -> usize {
        self.batch.federations()
    }

    fn cuda_supports(&self, dev: &crate::backend::cuda::CudaBackend) -> Result<(), Unsupported> {
        self.batch.cuda_supports(dev)
    }
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
        Ok(CellBatch {
            family: cfg.family_name(),
            batch: cfg.family().batch(env_keys, algo_keys)?,
        })
    }

    /// The batch as its family states it.
    pub fn family(&self) -> &dyn FamilyBatch {
        self.batch.as_ref()
    }

    /// Runs the batch to its horizon on `backend`'s batched operations:
    /// one curve per federation; `progress` receives agent-steps.
    pub fn run(
        &self,
        checkpoints: &[u64],
        backend: &dyn Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<CurvePoint>>, BatchError> {
        self.batch.run(checkpoints, backend, progress)
    }
}

/// The state of one repetition in flight on the CPU (a batch of one
/// federation), as its family keeps it, with its family's name: a
/// snapshot holds the name and then the family's own bytes, and is read
/// back only by a plan of that family.
pub struct RepState {
    family: &'static str,
    rep: Box<dyn RepObject>,
}

/// Why a snapshot's state cannot be read back into its plan.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The snapshot is of another family than the plan.
    #[error("the snapshot holds a repetition of family {found}, the plan is of family {plan}")]
    Family {
        /// The snapshot's family.
        found: String,
        /// The plan's family.
        plan: &'static str,
    },
    /// The family's bytes do not decode.
    #[error("the repetition's state does not decode: {0}")]
    Decode(#[from] bincode::Error),
}

impl RepState {
    /// Round 0 of a repetition whose batch (of one federation) is `plan`.
    pub fn start(plan: &CellBatch) -> Result<Self, BatchError> {
        Ok(RepState {
            family: plan.family,
            rep: plan.batch.start_rep()?,
        })
    }

    /// The state a snapshot holds (written by [`RepState::write`]) of
    /// `family`, read back for `plan`.
    pub fn read(plan: &CellBatch, family: &str, bytes: &[u8]) -> Result<Self, StateError> {
        if family != plan.family {
            return Err(StateError::Family {
                found: family.to_string(),
                plan: plan.family,
            });
        }
        Ok(RepState {
            family: plan.family,
            rep: plan.batch.resume_rep(bytes)?,
        })
    }

    /// The family's name (written before its bytes).
    pub fn family(&self) -> &'static str {
        self.family
    }

    /// The size of [`RepState::write`]'s bytes.
    pub fn size(&self) -> bincode::Result<u64> {
        self.rep.snapshot_size()
    }

    /// Appends the family's bytes of the state to `buf`.
    pub fn write(&self, buf: &mut Vec<u8>) -> bincode::Result<()> {
        self.rep.write_snapshot(buf)
    }

    /// Rounds done.
    pub fn t(&self) -> u64 {
        self.rep.rounds_done()
    }

    /// Runs rounds up to `until`, which the caller keeps within the plan's
    /// horizon (no batch holds one).
    pub fn advance(&mut self, plan: &CellBatch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        self.rep.advance_to(plan.family(), until, checkpoints)
    }

    /// The repetition's curve ([`BatchError::StateMismatch`] for a plan of
    /// another family, which [`RepState::read`] rules out).
    pub fn into_points(self, plan: &CellBatch) -> Result<Vec<CurvePoint>, BatchError> {
        self.rep.points(plan.family())
    }
}
