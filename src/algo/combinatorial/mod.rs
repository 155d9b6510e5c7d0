//! The federated combinatorial family with quality constraints (ALGORITHMS.md
//! 3, Solanki et al.): `non_federated`, `fcb` and `p_fcb` ([`p_fcb`]), all
//! with a pure-exploration phase and the greedy oracle on upper confidence
//! qualities. Each algorithm is a description of its batch
//! ([`comb_batch`]); the round loop ([`run`]) is the one of
//! [`crate::algo::rounds`] over a backend's [`CombOps`].
//!
//! Choices where the spec leaves room:
//! * Instances: repetition r uses instance r mod `instances` (the paper's 5
//!   instances x 20 repetitions); units' qualities are drawn per repetition.
//! * Exploration: t <= ceil(3 ln(n T) / (2 n zeta^2)) (208 rounds at n = 10,
//!   T = 10^5, zeta = 0.1), one unit from every producer; it counts in regret,
//!   and the regret after it is recorded too.
//! * Regret is measured against the agents' own oracle on the true qualities
//!   (greedy by default, the paper's benchmark; `oracle: exact` for small
//!   instances, where greedy's own shortfall then counts as regret); a
//!   choice that violates the constraint under the true q costs L_j.

pub mod p_fcb;
pub mod params;

use crate::backend::BatchError;
use crate::backend::combinatorial::{CombBatch, CombObservation, CombOps, CombPolicy};
use crate::env::procurement::{Instance, Oracle, ProcurementSpec};
use crate::rng::{Purpose, fold_key};

/// Algorithms of the combinatorial procurement family.
pub const ALGORITHMS: &[(&str, &str)] = &[
    (
        "non_federated",
        "each agent learns producer qualities alone (Solanki et al.'s baseline)",
    ),
    (
        "fcb",
        "FCB: every round's observations shared with every agent (Solanki et al.)",
    ),
    (
        "p_fcb",
        "P-FCB: scheduled (epsilon, delta)-DP sharing with noisy messages and CheckandUpdate (Solanki et al.)",
    ),
];

/// Environments of the combinatorial procurement family.
pub const ENVIRONMENTS: &[(&str, &str)] = &[(
    "procurement",
    "Solanki et al.'s procurement: m producers of quality q_i, agents' costs and capacities U{1..50}; instance_kind uniform or normal",
)];

/// Combinatorial-family algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CombAlgorithm {
    /// Own data only.
    NonFederated,
    /// Every round's data shared with every agent.
    Fcb,
    /// Private, scheduled sharing (P-FCB).
    PFcb,
}

/// A cell's resolved configuration for the combinatorial family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CombConfig {
    /// Algorithm.
    pub algorithm: CombAlgorithm,
    /// Environment.
    pub env: ProcurementSpec,
    /// Rounds T.
    pub horizon: u64,
    /// Distinct instances (repetition r uses instance r mod instances).
    pub instances: u32,
    /// zeta of the exploration length.
    pub zeta: f64,
    /// P-FCB's settings.
    pub private: p_fcb::PFcbConfig,
    /// The oracle (greedy, the paper's; or exact for small instances).
    pub oracle: Oracle,
}

/// Rounds of pure exploration: ceil(3 ln(n T) / (2 n zeta^2)).
pub fn explore_rounds(agents: usize, horizon: u64, zeta: f64) -> u64 {
    let n = agents as f64;
    (3.0 * (n * horizon as f64).ln() / (2.0 * n * zeta * zeta)).ceil() as u64
}

/// The configuration as a batch: `env_keys` and `algo_keys` are the
/// federations' keys (one pair per repetition; the last word of an
/// environment key is the repetition).
pub fn comb_batch(cfg: &CombConfig, env_keys: &[Vec<u64>], algo_keys: &[Vec<u64>]) -> CombBatch {
    let n = cfg.env.agents;
    let instances = env_keys
        .iter()
        .map(|k| {
            let mut ik = k.clone();
            if let Some(last) = ik.last_mut() {
                *last %= u64::from(cfg.instances.max(1));
            }
            Instance::new(&cfg.env, &ik)
        })
        .collect();
    let quality_keys = env_keys
        .iter()
        .flat_map(|k| {
            (0..n).map(move |j| {
                let mut q = k.clone();
                q.extend_from_slice(&[j as u64, Purpose::Rewards as u64]);
                fold_key(&q)
            })
        })
        .collect();
    let policy = match cfg.algorithm {
        CombAlgorithm::NonFederated => CombPolicy::NonFederated,
        CombAlgorithm::Fcb => CombPolicy::Fcb,
        CombAlgorithm::PFcb => CombPolicy::PFcb(p_fcb::policy(&cfg.private, cfg.horizon, n, algo_keys)),
    };
    CombBatch {
        instances,
        quality_keys,
        horizon: cfg.horizon,
        explore_rounds: explore_rounds(n, cfg.horizon, cfg.zeta),
        policy,
        oracle: cfg.oracle,
    }
}

/// One federation's curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CombPoint {
    /// Round.
    pub t: u64,
    /// The federation's state.
    pub obs: CombObservation,
}

/// Runs `ops` from round `from + 1` to `until` (at most the horizon),
/// observing at each checkpoint; one curve per federation.
pub fn run(
    batch: &CombBatch,
    ops: &mut dyn CombOps,
    from: u64,
    until: u64,
    checkpoints: &[u64],
    points: &mut [Vec<CombPoint>],
) -> Result<(), BatchError> {
    crate::algo::rounds::run_curves(
        ops,
        batch.federations(),
        from,
        until.min(batch.horizon),
        checkpoints,
        points,
        |t, obs| CombPoint { t, obs },
    )
}
