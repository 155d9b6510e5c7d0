//! Bandit algorithms. Each algorithm is one file, named as in its paper.
//! An algorithm is a description (a [`crate::algo::linear::batch::LinearBatch`], a
//! gossip or a combinatorial batch) run by its family's one round loop
//! ([`linear::lockstep`], [`rounds`]) over a backend's batched operations.

pub mod audit;
pub mod cell;
pub mod combinatorial;
pub mod curve;
pub mod defaults;
pub mod family;
pub mod family_entry;
pub mod gossip;
pub mod kind;
pub mod linear;
pub mod params;
pub mod resolve;
pub mod rounds;
pub mod run;
pub mod value;
pub mod value_check;

pub use cell::{Cost, FamilyBatch, FamilyConfig, FamilyRep};

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
    /// The configuration as its family states it: the one place a family's
    /// variant is opened (each family implements [`FamilyConfig`] in its
    /// folder).
    pub fn family(&self) -> &dyn FamilyConfig {
        match self {
            CellConfig::Linear(c) => c,
            CellConfig::Gossip(c) => c,
            CellConfig::Comb(c) => c,
        }
    }

    /// What the cell read from input files, as its identity hashes it
    /// ([`FamilyConfig::inputs`]).
    pub fn inputs(&self) -> Option<String> {
        self.family().inputs()
    }

    /// Agents per federation.
    pub fn agents(&self) -> usize {
        self.family().agents()
    }

    /// The accountant's figures for the cell (None when not private).
    pub fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        self.family().accounting()
    }

    /// Why the cell's environment is misspecified for its algorithm's
    /// model ([`FamilyConfig::misspecification`]).
    pub fn misspecification(&self) -> Option<crate::env::Misspecification> {
        self.family().misspecification()
    }

    /// The privacy target (epsilon, delta) the user asked for, if private.
    pub fn target(&self) -> (Option<f64>, Option<f64>) {
        self.family().target()
    }

    /// Whether the sync schedule is itself private
    /// ([`FamilyConfig::schedule_private`]).
    pub fn schedule_private(&self) -> bool {
        self.family().schedule_private()
    }

    /// The cell's cost model (`fedbandits plan`).
    pub fn cost(&self) -> Cost {
        self.family().cost()
    }

    /// Approximate peak memory of one running federation, in bytes.
    pub fn memory_per_federation(&self) -> u64 {
        self.family().memory_per_federation()
    }

    /// Approximate size of a repetition's snapshot, in bytes
    /// ([`FamilyConfig::snapshot_bytes`]).
    pub fn snapshot_bytes(&self) -> u64 {
        self.family().snapshot_bytes()
    }

    /// The accountant's working memory while it computes uncached figures
    /// ([`FamilyConfig::accountant_bytes`]).
    pub fn accountant_bytes(&self) -> u64 {
        self.family().accountant_bytes()
    }

    /// The linear configuration, if the cell is of that family.
    pub fn linear(&self) -> Option<&linear::LinearConfig> {
        match self {
            CellConfig::Linear(c) => Some(c),
            CellConfig::Gossip(_) | CellConfig::Comb(_) => None,
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
