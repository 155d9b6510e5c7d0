//! The combinatorial procurement family's batched contract (ALGORITHMS.md 3,
//! Solanki et al.): a batch of federations of one configuration and the
//! operations a backend implements over all of them.
//!
//! Round t of every agent j of every federation, in lockstep: while
//! t <= `explore_rounds` procure one unit from every producer; afterwards
//! procure the oracle's choice (greedy, or exact on small instances) for the upper confidence qualities
//! q+_{ij} = Y_{ij}/W_{ij} + sqrt(3 ln t / (2 W_{ij})); observe each unit's
//! quality (the u-th unit from producer i in round t is good iff
//! `uniform_at(fold_more(quality_key, t), i * 2^32 + u) < q_i`, so every
//! algorithm sees the same units); add the round to W, Y as the policy says
//! ([`CombPolicy`]); record regret against the same oracle on the true qualities.

use crate::backend::BatchError;
use crate::env::procurement::{Instance, Oracle};

/// How agents share what they observe.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CombPolicy {
    /// Own data only.
    NonFederated,
    /// Every round every agent's true (w, y) reaches every other agent.
    Fcb,
    /// Private, scheduled communication (P-FCB).
    PFcb(PFcb),
}

/// P-FCB's communication: in round `rounds[z]` (z = 0, 1, ...) every agent
/// sends its (w, y) per producer since its last communication with Gaussian
/// noise of standard deviation k_{ij} sqrt(2 ln(1.25 / delta)) / eps[z] on
/// each; a receiver drops a message with w~ <= 0 and accepts the others
/// whose y~/w~ lies within its estimate +- omega1 sqrt(3 ln(x) / (2 W)) (x =
/// n t and W its total units, Procedure 1; or x = t and W its own units, the
/// prose), adding omega2 (w~, y~).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PFcb {
    /// Communication rounds, increasing.
    pub rounds: Vec<u64>,
    /// epsilon of each communication round.
    pub eps: Vec<f64>,
    /// delta of each communication round.
    pub delta: f64,
    /// Acceptance window scale.
    pub omega1: f64,
    /// Weight of accepted messages.
    pub omega2: f64,
    /// The prose's acceptance window (own units, ln t) instead of
    /// Procedure 1's (total units, ln(n t)).
    pub prose_window: bool,
    /// Folded noise key of every agent, federation-major.
    pub noise_keys: Vec<u64>,
}

/// A batch of federations.
pub struct CombBatch {
    /// Each federation's instance.
    pub instances: Vec<Instance>,
    /// Folded quality-draw key of every agent, federation-major.
    pub quality_keys: Vec<u64>,
    /// Rounds T.
    pub horizon: u64,
    /// Rounds of pure exploration.
    pub explore_rounds: u64,
    /// The policy.
    pub policy: CombPolicy,
    /// The oracle of every agent's choice and of the benchmark s*.
    pub oracle: Oracle,
}

impl CombBatch {
    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.instances.len()
    }
}

/// One federation's state as [`CombOps::observe`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CombObservation {
    /// Cumulative group regret.
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Group regret of the rounds after exploration.
    pub regret_after_exploration: f64,
    /// Agent-rounds whose choice violated the constraint under the true q.
    pub violations: u64,
    /// Messages (sender, receiver, producer) accepted so far.
    pub accepted: u64,
    /// Messages rejected so far (w~ <= 0 or outside the window).
    pub rejected: u64,
    /// Communication rounds so far.
    pub communications: u64,
    /// Sum of epsilon_z spent so far (per agent; basic composition).
    pub epsilon_spent: f64,
    /// Sum of delta spent so far.
    pub delta_spent: f64,
}

/// The batched operations of the combinatorial family on one backend.
pub trait CombOps {
    /// Runs rounds `t0 .. t0 + count` of every federation.
    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError>;
    /// Each federation's state, in batch order, into `out` (cleared first).
    fn observe(&mut self, out: &mut Vec<CombObservation>) -> Result<(), BatchError>;
}
