//! What the generic layers ask of a cell's configuration, whatever its
//! family ([`FamilyConfig`]; each family implements it in its folder, and
//! [`super::CellConfig`] holds it as a trait object, so the set of families
//! is open: the registry's list), and the cost model it answers with
//! ([`Cost`]); and what they ask of a batch of its repetitions
//! ([`FamilyBatch`]: run it, place it, start or resume one repetition) and
//! of one repetition in flight on the CPU ([`FamilyRep`]: snapshotted,
//! resumed; seen by the runner as a [`RepObject`]).

use crate::algo::curve::CurvePoint;
use crate::backend::{Backend, BatchError, Placeable};
use std::any::Any;

/// What every family's configuration gives for free (a blanket
/// implementation over serializable configurations): its bytes, which
/// identify it (two cells of one family receive the same configuration
/// exactly when these are equal), and a view for downcasting where code
/// of the family itself needs its own type back.
pub trait ConfigData: Send + Sync + std::fmt::Debug + Any {
    /// The configuration serialized (bincode).
    fn bytes(&self) -> Vec<u8>;
    /// The configuration as `Any`.
    fn as_any(&self) -> &dyn Any;
}

impl<T: serde::Serialize + Send + Sync + std::fmt::Debug + Any> ConfigData for T {
    fn bytes(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A family's configuration as the job, plan, accountant and run summary
/// see it. The methods without a default are what a family must write
/// (the compiler lists the missing ones).
pub trait FamilyConfig: ConfigData {
    /// The batch of repetitions of this configuration with these
    /// environment and algorithm keys (one pair per repetition), or why it
    /// cannot be built (a graph that cannot be built).
    fn batch(
        &self,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Box<dyn FamilyBatch>, crate::graph::GraphError>;

    /// Agents per federation.
    fn agents(&self) -> usize;

    /// Rounds T.
    fn horizon(&self) -> u64;

    /// The accountant's figures for the cell (None when not private).
    fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        None
    }

    /// Why the cell's environment is misspecified for its algorithm's
    /// model (None when the model can represent every mean exactly, or the
    /// algorithm assumes none). Only linear environments can be: the
    /// gossip family's arms have stationary local means whose average is
    /// what its algorithms estimate, and the procurement environment's
    /// units are Bernoulli(q_i), what the combinatorial UCB counts (analysis/README.md,
    /// "Long horizons").
    fn misspecification(&self) -> Option<crate::env::Misspecification> {
        None
    }

    /// Facts of the cell's configuration that no output column carries and
    /// the report reads (name, value), e.g. the combinatorial family's
    /// `exploration_rounds`; written per cell into the files' metadata
    /// (`fedbandits.facts`). None by default.
    fn facts(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// The privacy target (epsilon, delta) the user asked for, if private
    /// (the gossip family's Laplace mechanism has no delta).
    fn target(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }

    /// Whether the sync schedule is itself private: FedUCB's paper schedule
    /// depends on the agents' data and is released too (the accountant's
    /// figures cover the noisy sums only); every data-independent schedule
    /// is.
    fn schedule_private(&self) -> bool {
        true
    }

    /// The cell's cost model (`fedbandits plan`).
    fn cost(&self) -> Cost;

    /// Approximate peak memory of one running federation, in bytes.
    fn memory_per_federation(&self) -> u64;

    /// Approximate size of a repetition's snapshot (its state serialized),
    /// in bytes: the runner holds it while it writes one. Default: the federation's memory (a bound: the workspace a
    /// step recomputes is not serialized).
    fn snapshot_bytes(&self) -> u64 {
        self.memory_per_federation()
    }

    /// The most memory the cell's accountant allocates while it computes
    /// figures no cache holds, when the job is loaded (before any run), in
    /// bytes; 0 where its figures are closed forms.
    fn accountant_bytes(&self) -> u64 {
        0
    }

    /// What `fedbandits audit` audits in the cell (its family's
    /// [`crate::algo::audit::Audit`]); None: the auditor covers no
    /// mechanism of the family.
    fn auditor(&self) -> Option<&dyn crate::algo::audit::Audit> {
        None
    }

    /// The family's roofline model of one agent-step, where it has one:
    /// (flops, bytes moved), which `bench` turns into GFLOP/s and GB/s at
    /// the measured rate. None: no model.
    fn roofline(&self) -> Option<(f64, f64)> {
        None
    }

    /// What the cell read from input files (an edge list, a data set), as
    /// text its identity hashes: a changed file is a changed cell, whatever
    /// its name (else a grown job could reuse units of one edge file beside
    /// new ones of another read from the same path). None: no input file.
    fn inputs(&self) -> Option<String> {
        None
    }
}

/// The most terms a family's time model has ([`crate::algo::family_entry::CostTerm`]).
pub const MAX_COST_TERMS: usize = 8;

/// A cell's cost model, from its family (`fedbandits plan`): how many
/// units of each of its family's cost terms one agent-step does on average
/// (the family's `cost_terms`, in their order). Seconds per unit are the
/// terms' built-in coefficients or this machine's fit
/// (`fedbandits calibrate --shapes`, `src/sim/cost.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// The family whose terms these are.
    pub family: &'static str,
    /// Units of each term per agent-step (0 past the family's terms).
    pub units: [f64; MAX_COST_TERMS],
}

impl Cost {
    /// Every agent-step of the family costs one unit of its first term.
    pub fn flat(family: &'static str) -> Self {
        Self::of(family, &[1.0])
    }

    /// `units` of the family's first terms, in order.
    pub fn of(family: &'static str, units: &[f64]) -> Self {
        let mut u = [0.0; MAX_COST_TERMS];
        u[..units.len()].copy_from_slice(units);
        Cost { family, units: u }
    }
}

/// A family's batch of repetitions as the simulation layer runs it; its
/// [`Placeable`] side says where it may run.
pub trait FamilyBatch: Placeable + Send + Sync + Any {
    /// Runs the batch to its horizon on `backend`'s batched operations:
    /// one curve per federation; `progress` receives agent-steps.
    fn run(
        &self,
        checkpoints: &[u64],
        backend: &dyn Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<CurvePoint>>, BatchError>;

    /// Round 0 of a repetition on the CPU whose batch (of one federation)
    /// is this one ([`start_rep`] of the family's [`FamilyRep`]).
    fn start_rep(&self) -> Result<Box<dyn RepObject>, BatchError>;

    /// A repetition's state read back from a snapshot's bytes
    /// ([`resume_rep`] of the family's [`FamilyRep`]).
    fn resume_rep(&self, bytes: &[u8]) -> Result<Box<dyn RepObject>, bincode::Error>;
}

/// The batch as `Any`, for a repetition to find its family's batch type.
fn batch_any(b: &dyn FamilyBatch) -> &dyn Any {
    b
}

/// How often (in rounds) a batch reports progress.
pub const PROGRESS_EVERY: u64 = 1024;

/// Runs a family's round loop (`run(from, until, curves)`) over the whole
/// horizon in steps of [`PROGRESS_EVERY`] rounds, reporting agent-steps to
/// `progress` after each; one curve per federation. The horizon is the
/// plan's: its last checkpoint (a job's checkpoint rounds always end at
/// T), so no batch holds a copy, and this is the one place the batched
/// path clamps a step to it.
pub fn in_progress_steps<P: Clone>(
    federations: usize,
    agents: usize,
    checkpoints: &[u64],
    progress: &dyn Fn(u64),
    mut run: impl FnMut(u64, u64, &mut [Vec<P>]) -> Result<(), BatchError>,
) -> Result<Vec<Vec<P>>, BatchError> {
    let horizon = checkpoints.last().copied().unwrap_or(0);
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

/// One repetition in flight on the CPU as its family keeps it (a batch of
/// one federation): everything needed to continue it, serialized into
/// snapshots, so a resumed repetition is bit-identical to an uninterrupted
/// one.
pub trait FamilyRep: Sized {
    /// The family's batch type.
    type Batch;

    /// Round 0 of a repetition whose batch (of one federation) is `batch`.
    fn start(batch: &Self::Batch) -> Result<Self, BatchError>;

    /// Rounds done.
    fn t(&self) -> u64;

    /// Runs rounds up to `until` (at most the plan's horizon: the caller's
    /// to ensure).
    fn advance(&mut self, batch: &Self::Batch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError>;

    /// The repetition's curve.
    fn into_points(self, batch: &Self::Batch) -> Vec<CurvePoint>;
}

/// A family's repetition in flight as the runner holds it, whatever the
/// family (a blanket implementation over every [`FamilyRep`] that can be
/// snapshotted): its plan is a `dyn FamilyBatch`, which it takes back as
/// its family's batch type (another family's plan is
/// [`BatchError::StateMismatch`]).
pub trait RepObject: Send {
    /// Rounds done.
    fn rounds_done(&self) -> u64;
    /// Runs rounds up to `until` (at most the plan's horizon).
    fn advance_to(&mut self, plan: &dyn FamilyBatch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError>;
    /// The repetition's curve.
    fn points(self: Box<Self>, plan: &dyn FamilyBatch) -> Result<Vec<CurvePoint>, BatchError>;
    /// Its snapshot's size in bytes.
    fn snapshot_size(&self) -> bincode::Result<u64>;
    /// Appends its snapshot's bytes to `buf`.
    fn write_snapshot(&self, buf: &mut Vec<u8>) -> bincode::Result<()>;
}

impl<R> RepObject for R
where
    R: FamilyRep + serde::Serialize + Send,
    R::Batch: Any,
{
    fn rounds_done(&self) -> u64 {
        FamilyRep::t(self)
    }

    fn advance_to(&mut self, plan: &dyn FamilyBatch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        let b = batch_any(plan)
            .downcast_ref::<R::Batch>()
            .ok_or(BatchError::StateMismatch)?;
        FamilyRep::advance(self, b, until, checkpoints)
    }

    fn points(self: Box<Self>, plan: &dyn FamilyBatch) -> Result<Vec<CurvePoint>, BatchError> {
        let b = batch_any(plan)
            .downcast_ref::<R::Batch>()
            .ok_or(BatchError::StateMismatch)?;
        Ok(FamilyRep::into_points(*self, b))
    }

    fn snapshot_size(&self) -> bincode::Result<u64> {
        bincode::serialized_size(self)
    }

    fn write_snapshot(&self, buf: &mut Vec<u8>) -> bincode::Result<()> {
        bincode::serialize_into(buf, self)
    }
}

/// [`FamilyBatch::start_rep`] for a family whose repetition type is `R`.
pub fn start_rep<R>(batch: &R::Batch) -> Result<Box<dyn RepObject>, BatchError>
where
    R: FamilyRep + serde::Serialize + Send + 'static,
    R::Batch: Any,
{
    Ok(Box::new(R::start(batch)?))
}

/// [`FamilyBatch::resume_rep`] for a family whose repetition type is `R`.
pub fn resume_rep<R>(bytes: &[u8]) -> Result<Box<dyn RepObject>, bincode::Error>
where
    R: FamilyRep + serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    R::Batch: Any,
{
    Ok(Box::new(bincode::deserialize::<R>(bytes)?))
}

/// The curve of a batch of one federation.
pub fn first<P>(points: Vec<Vec<P>>) -> Vec<P> {
    points.into_iter().next().unwrap_or_default()
}
