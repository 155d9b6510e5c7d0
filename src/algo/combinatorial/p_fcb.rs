//! `p_fcb` (Solanki et al.'s P-FCB): the communication schedule, the
//! per-round privacy budget and what the accountant can say.
//!
//! Communication happens in round t iff t_low <= t <= t_high and t >= tau;
//! tau starts at 1 (`tau_start: one`, the paper) or t_low and doubles after
//! each communication, so with t_low = 200 the rounds are 200, 201, ...,
//! 207, 256, 512, ... In communication round z = 1, 2, ...,
//! epsilon_z = epsilon / (2 ln T) + epsilon / 2^{z+1} (`budget: paper`),
//! whose sum exceeds epsilon beyond about 11 rounds (1.195 epsilon at
//! T = 10^5 with the paper's settings); `budget: normalized` scales every
//! epsilon_z so that they sum to exactly epsilon. Each round also spends its
//! delta. The Gaussian noise is k sqrt(2 ln(1.25/delta)) / epsilon_z on each
//! of w and y: the classical calibration for sensitivity k, which holds only
//! for epsilon_z < 1, while the pair (w, y) has joint sensitivity sqrt(2) k;
//! the run records the basic-composition sums (`epsilon_spent`,
//! `delta_spent`) as what the paper's own argument gives, not as a
//! guarantee.

use crate::backend::combinatorial::PFcb;
use crate::privacy::tree::AgentTrees;

/// How tau starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TauStart {
    /// tau = 1 (the paper).
    One,
    /// tau = t_low.
    TLow,
}

/// How epsilon is split over communication rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Budget {
    /// epsilon / (2 ln T) + epsilon / 2^{z+1} (the paper).
    Paper,
    /// The paper's split scaled to sum to epsilon.
    Normalized,
}

/// P-FCB's settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PFcbConfig {
    /// Total epsilon.
    pub epsilon: f64,
    /// delta per communication round.
    pub delta: f64,
    /// First round that may communicate.
    pub t_low: u64,
    /// Last round that may communicate.
    pub t_high: u64,
    /// Acceptance window scale.
    pub omega1: f64,
    /// Weight of accepted messages.
    pub omega2: f64,
    /// How tau starts.
    pub tau_start: TauStart,
    /// The budget split.
    pub budget: Budget,
    /// The prose's acceptance window instead of Procedure 1's.
    pub prose_window: bool,
}

impl Default for PFcbConfig {
    fn default() -> Self {
        Self {
            epsilon: 1.0,
            delta: 0.01,
            t_low: 200,
            t_high: 40_000,
            omega1: 0.1,
            omega2: 10.0,
            tau_start: TauStart::One,
            budget: Budget::Paper,
            prose_window: false,
        }
    }
}

/// The communication rounds up to the horizon.
pub fn schedule(p: &PFcbConfig, horizon: u64) -> Vec<u64> {
    let mut tau = match p.tau_start {
        TauStart::One => 1,
        TauStart::TLow => p.t_low.max(1),
    };
    let last = p.t_high.min(horizon);
    let mut out = Vec::new();
    let mut t = p.t_low.max(tau).max(1);
    while t <= last {
        out.push(t);
        tau = tau.saturating_mul(2);
        t = (t + 1).max(tau);
    }
    out
}

/// epsilon_z of every communication round.
pub fn epsilons(p: &PFcbConfig, horizon: u64) -> Vec<f64> {
    let rounds = schedule(p, horizon).len();
    let ln_t = (horizon.max(2) as f64).ln();
    let raw: Vec<f64> = (1..=rounds)
        .map(|z| p.epsilon / (2.0 * ln_t) + p.epsilon / 2f64.powi(z as i32 + 1))
        .collect();
    match p.budget {
        Budget::Paper => raw,
        Budget::Normalized => {
            let sum: f64 = raw.iter().sum();
            raw.iter().map(|e| e * p.epsilon / sum).collect()
        }
    }
}

/// The batch's policy: the schedule, the budget and every agent's noise key
/// (keyed like the other families': algorithm key, agent, privacy noise).
pub fn policy(p: &PFcbConfig, horizon: u64, agents: usize, algo_keys: &[Vec<u64>]) -> PFcb {
    PFcb {
        rounds: schedule(p, horizon),
        eps: epsilons(p, horizon),
        delta: p.delta,
        omega1: p.omega1,
        omega2: p.omega2,
        prose_window: p.prose_window,
        noise_keys: algo_keys
            .iter()
            .flat_map(|k| (0..agents).map(move |j| crate::rng::fold_key(&AgentTrees::noise_key(k, j))))
            .collect(),
    }
}
