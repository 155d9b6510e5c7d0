//! The batched path's contract: a batch of federations of one linear-family
//! configuration, described in the backend's own terms, so that a backend
//! never needs to know which algorithm or job produced it.
//!
//! The algorithm layer turns a configuration into a [`LinearBatch`]
//! (`algo::linear::linear_batch`: the confidence-width schedule, lambda, the
//! sync rule and the noise keys); the simulation layer gives it the
//! repetitions' keys and turns the [`BatchPoint`]s back into regret curves.
//! What a batch means, round t = 1..T, for every agent of every federation
//! in lockstep: draw the decision set from the agent's environment streams,
//! play the UCB argmax with width `beta(t)`, observe, Sherman-Morrison update
//! of V^{-1} and log det, add to the local sums; every `refactor_every` rounds
//! since the last factorization rebuild V^{-1} from base + local Gram; and,
//! when a [`SyncRule`] is given, every `every` rounds the server's release
//! (exact sum, or each agent's tree release with its node noise regenerated
//! from its key) becomes every agent's base and bias, and local sums reset.

use crate::env::LinearEnvSpec;

/// The synchronization of a federated batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyncRule {
    /// Sync after every `every`-th round.
    pub every: u64,
    /// Standard deviation of each tree node's entries (Zhou & Chowdhury's
    /// node noise, `fedlinucb::zhou_noise`); 0: exact sums, no tree.
    pub sigma: f64,
    /// Messages one sync sends (for the `messages` counter).
    pub messages_per_sync: u64,
}

/// A batch of federations running one linear-family configuration.
pub struct LinearBatch {
    /// The environment.
    pub env: LinearEnvSpec,
    /// Environment key of each federation (job seed, environment scope,
    /// repetition).
    pub env_keys: Vec<Vec<u64>>,
    /// Folded privacy-noise key of each agent, federation-major
    /// (`federations x m`; empty when there is no noise).
    pub noise_keys: Vec<u64>,
    /// Agents per federation.
    pub m: usize,
    /// Rounds T.
    pub horizon: u64,
    /// V_0 = lambda I.
    pub lambda: f64,
    /// The confidence width of round t (1-based).
    pub beta: Box<dyn Fn(u64) -> f64 + Send + Sync>,
    /// Synchronization, if federated.
    pub sync: Option<SyncRule>,
    /// Refactorize V^{-1} after this many rank-1 updates.
    pub refactor_every: u32,
    /// `Some(keys)`: the agents play uniformly random actions drawn from the
    /// streams of these keys (one per agent, federation-major) and learn
    /// nothing (the `random` baseline); `None`: UCB.
    pub random_policy: Option<Vec<Vec<u64>>>,
}

impl LinearBatch {
    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.env_keys.len()
    }
}

/// One federation's curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchPoint {
    /// Round.
    pub t: u64,
    /// Cumulative group pseudo-regret.
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Syncs so far.
    pub sync_rounds: u64,
    /// Messages so far.
    pub messages: u64,
    /// Factorizations that needed jitter or failed.
    pub cholesky_failures: u64,
}

/// Why a batch did not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    /// The backend has no kernels for this batch.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The backend failed while running it.
    #[error("{0}")]
    Failed(String),
}
