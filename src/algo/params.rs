//! A parameter as data ([`ParamDef`]): its type and allowed range
//! ([`Kind`]), defaults ([`super::defaults`]), the algorithms or
//! environments that use it and what it changes; and the parameters more
//! than one family shares ([`SHARED`]). Each family declares its own in its
//! folder (`table.rs`: its `PARAMS`, and its uses of the shared ones,
//! [`Share`]); the registry's union of them
//! ([`crate::algo::family::params`]) drives validation, `fedbandits list`,
//! and the output schema (each parameter is one typed Parquet column, null
//! where it does not apply).

use super::defaults::{self, DefaultValue as D};
pub use super::defaults::{DefaultContext, DefaultValue, Defaults};
pub use super::kind::Kind;
pub use super::value::Value;
pub use super::value_check::{FLOAT_FLOOR, FLOAT_LIMIT, ValueError, did_you_mean};

use super::options::Calibration;
use crate::graph::GraphKind;
use crate::named::Named;
use crate::privacy::lattice::Sampler;
use crate::privacy::sensitivity::Neighbours;

crate::param_keys! {
    M: i64 = "m",
    NOISE_STD: f64 = "noise_std",
    CONFIDENCE_SCALE: f64 = "confidence_scale",
    EPSILON: f64 = "epsilon",
    DELTA: f64 = "delta",
    NEIGHBOURS: Neighbours = "neighbours",
    CALIBRATION: Calibration = "calibration",
    NOISE: bool = "noise",
    SAMPLER: Sampler = "sampler",
    GRAPH: GraphKind = "graph",
    GRAPH_P: f64 = "graph_p",
    GRAPH_DEGREE: i64 = "graph_degree",
    GRAPH_ROWS: i64 = "graph_rows",
    GRAPH_EDGES: String = "graph_edges",
}

/// One parameter.
#[derive(Clone, Copy, Debug)]
pub struct ParamDef {
    /// Name in job files and output columns.
    pub name: &'static str,
    /// Type and range.
    pub kind: Kind,
    /// Defaults per user ([`Defaults`]): the resolvers read them, `list`
    /// prints them.
    pub defaults: Defaults,
    /// What it means.
    pub doc: &'static str,
    /// Algorithms (or environments) that use it.
    pub used_by: &'static [&'static str],
    /// It changes what an algorithm is or how its privacy is accounted
    /// rather than how it is tuned (`private`, `protocol`, `calibration`):
    /// the analysis compares an algorithm with each of its values as a
    /// variant, never pools over them, and does not match it when it pairs
    /// a private cell with its non-private counterpart.
    pub variant: bool,
    /// It leaves a cell's random streams as they are: cells that differ
    /// only in it draw the same units, rewards and standard noise (the
    /// noise scaled by each setting's sigma), so they are compared on
    /// common random numbers, and adding it to a job leaves every earlier
    /// cell's streams unchanged (`neighbours` changes only the accountant's
    /// figures).
    pub common_random_numbers: bool,
    /// A value a cell is keyed without (None: every value is keyed): a
    /// parameter added after results existed whose value there is the
    /// behaviour they were computed with (`noise: true`), so that its
    /// cells keep their identities and resume keys, and a job that adds it
    /// recomputes nothing ([`ParamDef::unkeyed_value`]).
    pub unkeyed: Option<DefaultValue>,
}

/// A default for every user.
pub const ALL: &[&str] = &[];

/// A number > 0.
pub const POS: Kind = Kind::Float {
    min: 0.0,
    max: f64::INFINITY,
    min_inclusive: false,
    max_inclusive: false,
};
/// A number in (0, 1).
pub const UNIT_OPEN: Kind = Kind::Float {
    min: 0.0,
    max: 1.0,
    min_inclusive: false,
    max_inclusive: false,
};

/// A family's use of shared parameters ([`SHARED`]): which of its
/// algorithms or environments use them, and their defaults (before the
/// shared row's own, which apply to every other user; only in a share of
/// one parameter).
#[derive(Clone, Copy, Debug)]
pub struct Share {
    /// The shared parameters' names.
    pub params: &'static [&'static str],
    /// The family's members that use them.
    pub by: &'static [&'static str],
    /// Defaults for some of them (empty: the shared row's).
    pub defaults: Defaults,
}

/// The parameters more than one family uses, in output-column order (first
/// in the union, [`crate::algo::family::params`]): each family says which
/// of its members use one, and their defaults, in its `table.rs`
/// ([`Share`]); a row's own `used_by` is empty and its defaults are those
/// of every other user.
pub const SHARED: &[ParamDef] = &[
    ParamDef {
        name: M.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(10))],
        doc: "number of agents (M in the linear papers, N in Zhu et al.; linucb: always 1)",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: NOISE_STD.name(),
        kind: Kind::Float {
            min: 0.0,
            max: f64::INFINITY,
            min_inclusive: true,
            max_inclusive: false,
        },
        defaults: &[(ALL, D::Float(1.0))],
        doc: "standard deviation of Gaussian reward noise",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: CONFIDENCE_SCALE.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "multiplier of the confidence width beta (gossip family: c of sqrt(2 c log t / n))",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: EPSILON.name(),
        kind: Kind::Float {
            min: 0.0,
            max: f64::INFINITY,
            min_inclusive: false,
            max_inclusive: true,
        },
        defaults: &[(ALL, D::Required("when private"))],
        doc: "privacy epsilon (fed_ucb_gossip: .inf for no privacy, Gossip_UCB's algorithm on Fed_UCB's own random \
              streams, so equal to gossip_ucb in distribution, not draw for draw; p_fcb: .inf for P-FCB without noise, \
              its schedule and acceptance window kept; noise: false keeps every part but the noise)",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: DELTA.name(),
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Required("when private"))],
        doc: "privacy delta",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: NEIGHBOURS.name(),
        kind: Kind::Choice(Neighbours::NAMES),
        defaults: &[(ALL, D::Word("substitute"))],
        doc: "neighbouring histories of the accountant's figures: one observation added/removed, or replaced \
              (the relation Zhou & Chowdhury's slides define; Fed_UCB: one observation replaced within the \
              clipping range; P-FCB: one round's procurement of one (agent, producer) pair changed)",
        used_by: &[],
        variant: true,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: CALIBRATION.name(),
        kind: Kind::Choice(Calibration::NAMES),
        defaults: &[(ALL, D::Word("exact"))],
        doc: "noise calibration: exact (the noise solved from the target by the exact accountant: acct_epsilon in \
              [0.99, 1] x epsilon), or a paper's: private_fedlinucb code (authors' code) or theorem (the slides'), \
              FedUCB and P-FCB paper",
        used_by: &[],
        variant: true,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: NOISE.name(),
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "a private algorithm's noise: false draws none and keeps every other part of it (clipping, widths, \
              schedule, calibration), to measure its cost apart from the noise; no privacy figure then holds \
              (every acct_* column null, with the reason)",
        used_by: &[],
        variant: true,
        common_random_numbers: true,
        unkeyed: Some(D::Bool(true)),
    },
    ParamDef {
        name: SAMPLER.name(),
        kind: Kind::Choice(Sampler::NAMES),
        defaults: &[(ALL, D::Word("float"))],
        doc: "how a private mechanism draws its noise: float (floating-point samplers: the figures hold over the \
              reals, not for the bits released) or discrete (statistics rounded to a lattice, exact integer noise: \
              a discrete Laplace for Fed_UCB's partial sums and FedUCB's private schedule on 2^-20, a discrete \
              Gaussian for the linear trees' nodes and P-FCB's messages on a lattice set from their noise; the \
              figures hold for the bits, acct_lattice_step says so)",
        used_by: &[],
        variant: true,
        common_random_numbers: true,
        unkeyed: Some(D::Word("float")),
    },
    ParamDef {
        name: GRAPH.name(),
        kind: Kind::Choice(GraphKind::NAMES),
        defaults: &[(ALL, D::Word("complete"))],
        doc: "communication graph of the agents (gossip family: one graph per repetition when random)",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: GRAPH_P.name(),
        kind: Kind::Float {
            min: 0.0,
            max: 1.0,
            min_inclusive: false,
            max_inclusive: true,
        },
        defaults: &[(ALL, D::Required("for erdos_renyi"))],
        doc: "edge probability of erdos_renyi (redrawn until connected)",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: GRAPH_DEGREE.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Required("for random_regular"))],
        doc: "degree of random_regular",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: GRAPH_ROWS.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Required("for grid"))],
        doc: "rows of grid (must divide m)",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: GRAPH_EDGES.name(),
        kind: Kind::Text,
        defaults: &[(ALL, D::Required("for edges"))],
        doc: "edge-list file (one `u v` pair of 0-based agents per line), a relative path starts at the job file's folder",
        used_by: &[],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
];

impl ParamDef {
    /// Its default for a cell of `algo` on `env` (None: it has none there).
    pub fn default_for(&self, algo: &str, env: &str) -> Option<&'static DefaultValue> {
        defaults::default_for(self.defaults, algo, env)
    }

    /// Whether `v` is its value that a cell is keyed without
    /// ([`ParamDef::unkeyed`]).
    pub fn unkeyed_value(&self, v: &Value) -> bool {
        match (self.unkeyed, v) {
            (Some(D::Bool(a)), Value::Bool(b)) => a == *b,
            (Some(D::Int(a)), Value::Int(b)) => a == *b,
            (Some(D::Float(a)), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Some(D::Word(a)), Value::Str(b)) => a == b,
            _ => false,
        }
    }

    /// Its defaults in words, as `fedbandits list` prints them.
    pub fn default_text(&self) -> String {
        defaults::describe(self.defaults)
    }
}
