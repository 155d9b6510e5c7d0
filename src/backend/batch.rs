//! The batched path's contract: a batch of federations of one linear-family
//! configuration, described in the backend's own terms, so that a backend
//! never needs to know which algorithm or job produced it.
//!
//! The algorithm layer turns a configuration into a [`LinearBatch`]
//! (`algo::linear::linear_batch`: the confidence-width schedule, lambda, the
//! sync rule and the noise keys); the simulation layer gives it the
//! repetitions' keys and turns the [`BatchPoint`]s back into regret curves.
//!
//! The round loop (which operation runs when) is written once, in
//! `algo::linear::lockstep`; a backend implements the operations of
//! [`LinearOps`] over all federations and agents of the batch at once:
//! * [`LinearOps::rounds`]: rounds t0, t0 + 1, ... with the given widths,
//!   every agent of every federation: draw the decision set from the agent's
//!   environment streams, play the UCB argmax (or, for a random policy, a
//!   uniformly random action), observe (the reward clipped to
//!   [`LinearBatch::reward_bound`]), Sherman-Morrison update of V^{-1}
//!   and log det, add to the local sums and the regret. No agent reads
//!   another's state, so a backend may run a chunk of rounds in one go.
//! * [`LinearOps::refactor`]: rebuild every V^{-1} from base + local Gram.
//! * [`LinearOps::sync`]: the server's [`Release`] (exact sum, each agent's
//!   tree release with its node noise regenerated from its key, or the
//!   vector-summation protocol) becomes every agent's base and bias, and the
//!   local sums reset.
//! * [`LinearOps::observe`]: each federation's regret and failure counts.

use crate::env::LinearEnvSpec;
use crate::privacy::vecsum::VecSum;

/// The synchronization of a federated batch.
#[derive(Clone, Debug)]
pub struct SyncRule {
    /// Sync after every `every`-th round.
    pub every: u64,
    /// What the server releases.
    pub release: Release,
    /// Messages one sync sends (for the `messages` counter).
    pub messages_per_sync: u64,
}

impl SyncRule {
    /// The tree node noise's standard deviation (0 when the release has no
    /// Gaussian tree).
    pub fn tree_sigma(&self) -> f64 {
        match self.release {
            Release::Tree { sigma, .. } => sigma,
            _ => 0.0,
        }
    }
}

/// What the server releases at a sync; it becomes every agent's
/// lambda I + W_syn and U_syn.
#[derive(Clone, Debug)]
pub enum Release {
    /// The exact sums: W_syn and U_syn accumulate every agent's local sums.
    Exact,
    /// The sum of the agents' binary-counter tree releases
    /// ([`crate::privacy::tree`]) with symmetric Gaussian node noise
    /// ([`crate::privacy::tree::symmetric_gaussian`]) of standard deviation
    /// `sigma`, keyed by [`LinearBatch::noise_keys`].
    Tree {
        /// Node noise standard deviation.
        sigma: f64,
        /// Levels of each agent's tree.
        levels: usize,
    },
    /// The shuffle vector-summation protocol ([`crate::privacy::vecsum`]):
    /// `proto` is a federation's initial protocol state; `keys` hold, per
    /// federation, the M agents' randomizer stream keys then the shuffler's
    /// (M + 1 each, federation-major).
    VecSum {
        /// Initial protocol state.
        proto: Box<VecSum>,
        /// Stream keys.
        keys: Vec<Vec<u64>>,
    },
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
    /// Rewards enter the agents' sums clipped to [-reward_bound,
    /// reward_bound] ([`crate::backend::clip_reward`]; infinity: not
    /// clipped).
    pub reward_bound: f64,
}

impl LinearBatch {
    /// A batch whose agents never communicate: UCB with width `beta(t)`
    /// and V_0 = lambda I, or, with `random_policy`, random actions.
    #[allow(clippy::too_many_arguments)]
    pub fn unsynced(
        env: LinearEnvSpec,
        env_keys: Vec<Vec<u64>>,
        m: usize,
        horizon: u64,
        lambda: f64,
        beta: Box<dyn Fn(u64) -> f64 + Send + Sync>,
        refactor_every: u32,
        random_policy: Option<Vec<Vec<u64>>>,
        reward_bound: f64,
    ) -> Self {
        Self {
            env,
            env_keys,
            noise_keys: Vec::new(),
            m,
            horizon,
            lambda,
            beta,
            sync: None,
            refactor_every,
            random_policy,
            reward_bound,
        }
    }

    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.env_keys.len()
    }
}

/// One federation's state as [`LinearOps::observe`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observation {
    /// Cumulative group pseudo-regret (each round's agents summed in agent
    /// order, then added to the total).
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Factorizations that needed jitter or failed.
    pub cholesky_failures: u64,
    /// Rewards that clipping changed.
    pub clipped_rewards: u64,
}

/// The batched operations of the linear family on one backend, over every
/// federation and agent of a [`LinearBatch`] (see the module docs). The
/// algorithm layer's lockstep loop decides when each runs.
pub trait LinearOps {
    /// Most rounds one [`LinearOps::rounds`] call may run.
    fn max_rounds(&self) -> usize;
    /// Runs rounds `t0 .. t0 + betas.len()` (round `t0 + r` with width
    /// `betas[r]`).
    fn rounds(&mut self, t0: u64, betas: &[f64]) -> Result<(), BatchError>;
    /// Rebuilds every agent's V^{-1} and log det from base + local Gram.
    fn refactor(&mut self) -> Result<(), BatchError>;
    /// The `index`-th (1-based) synchronization of every federation.
    fn sync(&mut self, index: u64) -> Result<(), BatchError>;
    /// Each federation's state, in batch order, into `out` (cleared first).
    fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError>;
}

/// One federation's curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Rewards that clipping changed so far.
    #[serde(default)]
    pub clipped_rewards: u64,
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
