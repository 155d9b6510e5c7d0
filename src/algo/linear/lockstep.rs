//! The round loop of every linear algorithm with a batched form, written
//! once: which batched operation ([`LinearOps`]) runs when. The algorithms
//! (`linucb`, `independent`, `random`, `fedlinucb`, `private_fedlinucb`)
//! differ only in the [`LinearBatch`] they describe (width schedule, lambda,
//! sync rule and release, policy); every backend runs this same loop, the
//! CPU with one federation per task or many, the GPU with thousands.
//!
//! Round t = 1..T of every federation: the agents' local steps; when the
//! agents have taken `refactor_every` rank-1 updates since their last
//! factorization, a refactorization; when t is a multiple of the sync
//! period, the sync (which refactorizes too); at a checkpoint, an
//! observation. Runs of rounds with no event between them go to the backend
//! as one chunk (up to [`LinearOps::max_rounds`]), which is how the GPU
//! runs many rounds per launch.

use crate::backend::{BatchError, BatchPoint, LinearBatch, LinearOps, Observation};

/// Where a batch stands in the loop (serializable, for snapshots).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Lockstep {
    /// Rounds done.
    pub t: u64,
    /// Rank-1 updates since the last factorization (the same for every
    /// agent: all step every round and all refactorize together).
    since_factor: u32,
    /// Syncs so far.
    syncs: u64,
    #[serde(skip)]
    betas: Vec<f64>,
    #[serde(skip)]
    obs: Vec<Observation>,
}

impl Lockstep {
    /// At round 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs rounds up to `until` (at most the horizon); at each checkpoint
    /// reached, pushes every federation's point onto `points` (one curve per
    /// federation, batch order).
    pub fn advance(
        &mut self,
        batch: &LinearBatch,
        ops: &mut dyn LinearOps,
        until: u64,
        checkpoints: &[u64],
        points: &mut [Vec<BatchPoint>],
    ) -> Result<(), BatchError> {
        let until = until.min(batch.horizon);
        let refactor_every = batch.refactor_every.max(1);
        let chunk = ops.max_rounds().max(1) as u64;
        let sync_every = batch.sync.as_ref().map(|s| s.every.max(1));
        let messages_per_sync = batch.sync.as_ref().map_or(0, |s| s.messages_per_sync);
        while self.t < until {
            let t0 = self.t + 1;
            let next_check = checkpoints.get(checkpoints.partition_point(|&c| c < t0)).copied();
            let mut end = until.min(t0.saturating_add(chunk - 1));
            end = end.min(t0 + u64::from(refactor_every - self.since_factor.min(refactor_every - 1)) - 1);
            if let Some(b) = sync_every {
                end = end.min(t0.div_ceil(b) * b);
            }
            if let Some(c) = next_check {
                end = end.min(c);
            }
            self.betas.clear();
            self.betas.extend((t0..=end).map(|t| (batch.beta)(t)));
            ops.rounds(t0, &self.betas)?;
            self.t = end;
            self.since_factor += (end - t0 + 1) as u32;
            if self.since_factor >= refactor_every {
                ops.refactor()?;
                self.since_factor = 0;
            }
            if sync_every.is_some_and(|b| end.is_multiple_of(b)) {
                self.syncs += 1;
                ops.sync(self.syncs)?;
                self.since_factor = 0;
            }
            if next_check == Some(end) {
                ops.observe(&mut self.obs)?;
                for (curve, o) in points.iter_mut().zip(&self.obs) {
                    curve.push(BatchPoint {
                        t: end,
                        group_regret: o.group_regret,
                        agent_regret_max: o.agent_regret_max,
                        sync_rounds: self.syncs,
                        messages: messages_per_sync * self.syncs,
                        cholesky_failures: o.cholesky_failures,
                    });
                }
            }
        }
        Ok(())
    }
}
