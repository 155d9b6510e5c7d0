//! The family registry: each family (linear contextual, gossip
//! multi-armed, combinatorial procurement) as data -- its algorithms and
//! environments (listed in its own folder), its output columns -- and
//! [`FAMILIES`], the one list the job loader, `fedbandits list`, the Parquet
//! schema and the analysis package read. Adding a family is a folder under
//! `src/algo/` and one entry here.

use super::params::{PARAMS, Value};
use std::collections::BTreeMap;

/// Which family a cell belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyId {
    /// Linear contextual bandits (Zhou & Chowdhury; Dubey & Pentland).
    Linear,
    /// Decentralized multi-armed bandits with gossip (Zhu et al.).
    Gossip,
    /// Federated combinatorial bandits with quality constraints (Solanki et al.).
    Combinatorial,
}

/// A family: its algorithms, environments and the metric columns it adds to
/// the output (beyond the regret columns every family writes). Parameters
/// name the algorithms and environments they apply to ([`ParamDef::used_by`]),
/// so a family's parameters are those used by its members. The job loader,
/// `fedbandits list`, the Parquet schema and the analysis package read this
/// registry.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Which.
    pub id: FamilyId,
    /// Name in `fedbandits list`.
    pub name: &'static str,
    /// One line.
    pub doc: &'static str,
    /// (name, description).
    pub algorithms: &'static [(&'static str, &'static str)],
    /// (name, description).
    pub environments: &'static [(&'static str, &'static str)],
    /// Output columns only this family fills (null for the others).
    pub columns: &'static [&'static str],
    /// Resolves a cell's raw parameters into its configuration.
    pub resolve: Resolve,
    /// The algorithm without federation whose cell, with the same
    /// parameters, is the denominator of the federated regret ratio (FRR)
    /// the run summary prints for the family's other algorithms.
    pub baseline: Option<&'static str>,
    /// Its `fedbandits bench` workloads: (name, default federations, job
    /// YAML with `{T}` for the rounds).
    pub workloads: &'static [(&'static str, u32, &'static str)],
    /// Short jobs covering its algorithms and environments, for the parity
    /// check of a batched backend with the CPU: (name, job YAML).
    pub parity: &'static [(&'static str, &'static str)],
}

/// A family's parameter resolution ([`crate::algo::resolve`]).
pub type Resolve =
    fn(&str, &str, &BTreeMap<String, Value>, u64) -> Result<super::resolve::Resolved, super::resolve::ResolveErrors>;

impl Family {
    /// The parameters its algorithms and environments use, in output-column
    /// order.
    pub fn parameters(&self) -> Vec<&'static str> {
        let members: Vec<&str> = self.algorithms.iter().chain(self.environments).map(|m| m.0).collect();
        PARAMS
            .iter()
            .filter(|p| p.used_by.iter().any(|u| members.contains(u)))
            .map(|p| p.name)
            .collect()
    }
}

/// Every family.
pub const FAMILIES: &[Family] = &[
    Family {
        id: FamilyId::Linear,
        name: "linear",
        doc: "linear contextual bandits: M agents, d-dimensional actions (ALGORITHMS.md 1)",
        algorithms: super::linear::ALGORITHMS,
        environments: super::linear::ENVIRONMENTS,
        resolve: super::linear::params::resolve,
        baseline: None,
        workloads: super::linear::workloads::WORKLOADS,
        parity: super::linear::workloads::PARITY,
        columns: &[
            "cholesky_failures",
            "beta_clamps",
            "clipped_observations",
            "acct_rho_zcdp",
            "acct_epsilon_zcdp",
            "acct_epsilon_basic",
            "acct_delta_basic",
        ],
    },
    Family {
        id: FamilyId::Gossip,
        name: "gossip",
        doc: "decentralized multi-armed bandits: N agents on a graph, M arms, locally biased means (ALGORITHMS.md 2)",
        algorithms: super::gossip::ALGORITHMS,
        environments: super::gossip::ENVIRONMENTS,
        resolve: super::gossip::params::resolve,
        baseline: None,
        workloads: super::gossip::WORKLOADS,
        parity: super::gossip::PARITY,
        columns: &[
            "consensus_error",
            "forced_pulls",
            "clipped_observations",
            "gossip_lambda2",
            "acct_epsilon_pure",
        ],
    },
    Family {
        id: FamilyId::Combinatorial,
        name: "combinatorial",
        doc: "federated combinatorial bandits with quality constraints: n agents procure from m producers (ALGORITHMS.md 3)",
        algorithms: super::combinatorial::ALGORITHMS,
        environments: super::combinatorial::ENVIRONMENTS,
        resolve: super::combinatorial::params::resolve,
        baseline: Some("non_federated"),
        workloads: super::combinatorial::WORKLOADS,
        parity: super::combinatorial::PARITY,
        columns: &[
            "regret_after_exploration",
            "constraint_violations",
            "messages_accepted",
            "messages_rejected",
            "acct_epsilon_basic",
            "acct_delta_basic",
        ],
    },
];

/// Every algorithm of every family.
pub fn algorithms() -> Vec<(&'static str, &'static str)> {
    FAMILIES.iter().flat_map(|f| f.algorithms.iter().copied()).collect()
}

/// Every environment of every family.
pub fn environments() -> Vec<(&'static str, &'static str)> {
    FAMILIES.iter().flat_map(|f| f.environments.iter().copied()).collect()
}

/// The family of an algorithm or environment name.
pub fn family_of(name: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| f.algorithms.iter().chain(f.environments).any(|(n, _)| *n == name))
}
