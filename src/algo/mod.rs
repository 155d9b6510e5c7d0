//! Bandit algorithms. Each algorithm is one file, named as in its paper.
//! An algorithm is a description (a [`crate::algo::linear::batch::LinearBatch`], a
//! gossip or a combinatorial batch) run by its family's one round loop
//! ([`linear::lockstep`], [`rounds`]) over a backend's batched operations.

pub mod audit;
pub mod cell;
pub mod curve;
pub mod defaults;
pub mod family;
pub mod family_entry;
pub mod keys;
pub mod kind;
pub mod named;
pub mod options;
pub mod params;
pub mod resolve;
pub mod rounds;
pub mod run;
pub mod value;
pub mod value_check;

pub use cell::{Cost, FamilyBatch, FamilyConfig, FamilyRep};

/// Declares each family's folder as a module and lists its `FAMILY` entry
/// in [`REGISTERED`] (read as [`family::FAMILIES`]), in one line per family.
macro_rules! families {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        $($(#[$attr])* pub mod $name;)*
        /// Every family's registry entry, in registry order.
        pub const REGISTERED: &[family_entry::Family] = &[$($(#[$attr])* $name::FAMILY),*];
    };
}

// The families: a family is its folder under `src/algo/` (its `FAMILY`
// entry in its `mod.rs`) and its line here. The toy family is the worked
// example, compiled into the library's tests only.
families! {
    linear,
    gossip,
    combinatorial,
    #[cfg(test)] toy,
}

#[cfg(test)]
mod tests;

/// A cell's resolved configuration, whatever its family: the family's own
/// configuration behind [`FamilyConfig`], with the family's name. Two are
/// equal exactly when they are of one family and their bytes are equal
/// (what the algorithm receives).
#[derive(Clone)]
pub struct CellConfig {
    family: &'static str,
    config: std::sync::Arc<dyn FamilyConfig>,
}

impl std::fmt::Debug for CellConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {:?}", self.family, self.config)
    }
}

impl PartialEq for CellConfig {
    fn eq(&self, other: &Self) -> bool {
        self.family == other.family && self.config.bytes() == other.config.bytes()
    }
}

impl CellConfig {
    /// The configuration `config` of family `family` (the registry's
    /// dispatcher makes it from the family's resolver).
    pub fn new(family: &'static str, config: Box<dyn FamilyConfig>) -> Self {
        CellConfig {
            family,
            config: config.into(),
        }
    }

    /// The configuration as its family states it.
    pub fn family(&self) -> &dyn FamilyConfig {
        self.config.as_ref()
    }

    /// The family's name.
    pub fn family_name(&self) -> &'static str {
        self.family
    }

    /// The family's own configuration type, where it is `T` (for the
    /// family's code and tests: the generic layers use [`FamilyConfig`]).
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.config.as_any().downcast_ref()
    }

    /// The configuration's bytes, prefixed by its family's name: equal
    /// exactly when the configurations are ([`cell::ConfigData::bytes`]).
    pub fn bytes(&self) -> Vec<u8> {
        let mut b = self.family.as_bytes().to_vec();
        b.push(0);
        b.extend(self.config.bytes());
        b
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

    /// The configuration's facts ([`FamilyConfig::facts`]).
    pub fn facts(&self) -> Vec<(&'static str, f64)> {
        self.family().facts()
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
