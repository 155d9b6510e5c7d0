//! Bandit algorithms. Each algorithm is one file, named as in its paper.
//! An algorithm with a fixed schedule is a description (a
//! [`crate::backend::LinearBatch`]) run by the one round loop of
//! [`linear::lockstep`] over a backend's batched operations; FedUCB is still
//! a [`Federation`] object over the CPU's agent state
//! ([`crate::backend::cpu::bank::AgentBank`]).

pub mod gossip;
pub mod linear;

use crate::backend::Backend;

/// Counters a federation accumulates over a run (written to the output).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// Synchronization (communication) rounds.
    pub sync_rounds: u64,
    /// Messages sent (agent -> server and server -> agent each count one).
    pub messages: u64,
    /// Cholesky factorizations that failed and needed jitter.
    pub cholesky_failures: u64,
    /// Confidence widths whose square-root argument was negative and clamped.
    pub beta_clamps: u64,
}

/// A federation of agents playing one algorithm in one environment instance.
pub trait Federation: Send {
    /// Plays round `t` (1-based) for every agent; returns the round's group
    /// pseudo-regret.
    fn round(&mut self, t: u64, backend: &dyn Backend) -> f64;
    /// Counters so far.
    fn counters(&self) -> Counters;
    /// Cumulative pseudo-regret of each agent.
    fn agent_regret(&self) -> &[f64];
}
