//! Bandit algorithms. Each algorithm is one file, named as in its paper.
//! An algorithm is a description (a [`crate::algo::linear::batch::LinearBatch`], a
//! gossip or a combinatorial batch) run by its family's one round loop
//! ([`linear::lockstep`], [`rounds`]) over a backend's batched operations.

pub mod audit;
pub mod combinatorial;
pub mod curve;
pub mod family;
pub mod family_entry;
pub mod gossip;
pub mod linear;
pub mod params;
pub mod resolve;
pub mod rounds;
pub mod run;
pub mod value_check;

/// A cell's resolved configuration, whatever its family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CellConfig {
    /// Linear contextual family.
    Linear(linear::LinearConfig),
    /// Decentralized multi-armed family.
    Gossip(gossip::GossipConfig),
    /// Combinatorial procurement family.
    Comb(combinatorial::CombConfig),
}

impl CellConfig {
    /// Agents per federation.
    pub fn agents(&self) -> usize {
        match self {
            CellConfig::Linear(c) => c.m,
            CellConfig::Gossip(c) => c.env.agents,
            CellConfig::Comb(c) => c.env.agents,
        }
    }

    /// Rounds T.
    pub fn horizon(&self) -> u64 {
        match self {
            CellConfig::Linear(c) => c.horizon,
            CellConfig::Gossip(c) => c.horizon,
            CellConfig::Comb(c) => c.horizon,
        }
    }

    /// The accountant's figures for the cell (None when not private).
    pub fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        match self {
            CellConfig::Linear(c) => linear::accounting(c),
            CellConfig::Gossip(c) if c.algorithm == gossip::GossipAlgorithm::FedUcbGossip => {
                gossip::fed_ucb_gossip::accounting(&c.privacy, c.horizon)
            }
            CellConfig::Comb(c) if c.algorithm == combinatorial::CombAlgorithm::PFcb => {
                Some(combinatorial::p_fcb::accounting(&c.private, c.horizon))
            }
            CellConfig::Gossip(_) | CellConfig::Comb(_) => None,
        }
    }

    /// Why the cell's environment is misspecified for its algorithm's
    /// model (None when the model can represent every mean exactly, or the
    /// algorithm assumes none: `random`). Only linear environments can be:
    /// the gossip family's arms have stationary local means whose average
    /// is what its algorithms estimate, and the procurement environment's
    /// units are Bernoulli(q_i), what the combinatorial UCB counts (README,
    /// "Is the model right?").
    pub fn misspecification(&self) -> Option<crate::env::Misspecification> {
        match self {
            CellConfig::Linear(c) if c.algorithm != linear::LinearAlgorithm::Random => c.env.misspecification(),
            CellConfig::Linear(_) | CellConfig::Gossip(_) | CellConfig::Comb(_) => None,
        }
    }

    /// The privacy target (epsilon, delta) the user asked for, if private
    /// (the gossip family's Laplace mechanism has no delta).
    pub fn target(&self) -> (Option<f64>, Option<f64>) {
        match self {
            CellConfig::Linear(c) => c.privacy.map_or((None, None), |(e, d)| (Some(e), Some(d))),
            CellConfig::Gossip(c)
                if c.algorithm == gossip::GossipAlgorithm::FedUcbGossip && c.privacy.epsilon.is_finite() =>
            {
                (Some(c.privacy.epsilon), None)
            }
            CellConfig::Gossip(_) => (None, None),
            CellConfig::Comb(c) if c.algorithm == combinatorial::CombAlgorithm::PFcb => {
                (Some(c.private.epsilon), Some(c.private.delta))
            }
            CellConfig::Comb(_) => (None, None),
        }
    }

    /// Whether the sync schedule is itself private: FedUCB's paper schedule
    /// depends on the agents' data and is released too (the accountant's
    /// figures cover the noisy sums only); its private schedule (the test
    /// through the sparse vector technique) and `every_round` are covered.
    pub fn schedule_private(&self) -> bool {
        match self {
            CellConfig::Linear(c)
                if matches!(
                    c.algorithm,
                    linear::LinearAlgorithm::FeducbCentralized | linear::LinearAlgorithm::FeducbDecentralized
                ) =>
            {
                linear::feducb::schedule_private(c)
            }
            CellConfig::Linear(_) | CellConfig::Gossip(_) | CellConfig::Comb(_) => true,
        }
    }

    /// The cell's cost model (`fedbandits plan`).
    pub fn cost(&self) -> Cost {
        match self {
            CellConfig::Linear(c) => linear::cost::cost(c),
            CellConfig::Gossip(c) => gossip::cost(c),
            CellConfig::Comb(c) => combinatorial::cost(c),
        }
    }

    /// Approximate peak memory of one running federation, in bytes.
    pub fn memory_per_federation(&self) -> u64 {
        match self {
            CellConfig::Linear(c) => linear::cost::memory_per_federation(c),
            CellConfig::Gossip(c) => gossip::memory_per_federation(c),
            CellConfig::Comb(c) => combinatorial::memory_per_federation(c),
        }
    }

    /// The linear configuration, if the cell is of that family.
    pub fn linear(&self) -> Option<&linear::LinearConfig> {
        match self {
            CellConfig::Linear(c) => Some(c),
            CellConfig::Gossip(_) | CellConfig::Comb(_) => None,
        }
    }
}

/// A cell's cost model, from its family (`fedbandits plan`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Agent-steps per second per thread of the family's reference
    /// workload (measured with `fedbandits bench` on the development VM and
    /// rounded down to what full paper jobs achieved).
    pub reference_rate: f64,
    /// Cost of one agent-step relative to the reference workload.
    pub relative: f64,
    /// Tree-node noise entries regenerated per agent-step on average.
    pub noise_entries_per_step: f64,
}

impl Cost {
    /// A flat rate: every agent-step of the family costs the same, and no
    /// tree noise is regenerated.
    pub fn flat(reference_rate: f64) -> Self {
        Cost {
            reference_rate,
            relative: 1.0,
            noise_entries_per_step: 0.0,
        }
    }
}

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
    /// Rewards that clipping to the mechanism's bound changed (linear
    /// family; the column `clipped_observations`).
    #[serde(default)]
    pub clipped_rewards: u64,
}
