//! The gossip family's parameters ([`PARAMS`], in output-column order after
//! the shared ones) and its uses of the shared parameters ([`SHARES`]):
//! the one place each is declared; the registry's union
//! ([`crate::algo::family::params`]) is what the resolver, `list`,
//! `validate` and the Parquet schema read.

use crate::algo::defaults::DefaultValue as D;
use crate::algo::params::{ALL, Kind, ParamDef, Share};

use super::fed_ucb_gossip::BudgetSplit;
use crate::named::Named;

crate::param_keys! {
    ARMS: i64 = "arms",
    BUDGET_SPLIT: BudgetSplit = "budget_split",
    DATA: String = "data",
    CLIP: bool = "clip",
    CLIP_LO: f64 = "clip_lo",
    CLIP_HI: f64 = "clip_hi",
    C_PRIV: f64 = "c_priv",
}

/// Its algorithm with the privatizer.
const FED_UCB_GOSSIP: &[&str] = &["fed_ucb_gossip"];
/// Its algorithms that gossip over a graph.
const P2P: &[&str] = &["gossip_ucb", "fed_ucb_gossip"];

/// Its members' uses of the shared parameters.
pub const SHARES: &[Share] = &[
    Share {
        params: &["sampler"],
        by: FED_UCB_GOSSIP,
        defaults: &[],
    },
    Share {
        params: &["m"],
        by: &["gossip_ucb", "fed_ucb_gossip", "local_ucb", "oracle_ucb"],
        defaults: &[(&["uci_diabetes"], D::Int(3))],
    },
    Share {
        params: &["noise_std"],
        by: &["mab_heterogeneous"],
        defaults: &[],
    },
    Share {
        params: &["confidence_scale"],
        by: &["gossip_ucb", "fed_ucb_gossip", "local_ucb", "oracle_ucb"],
        defaults: &[],
    },
    Share {
        params: &["epsilon", "neighbours", "noise"],
        by: FED_UCB_GOSSIP,
        defaults: &[],
    },
    Share {
        params: &["graph", "graph_p", "graph_degree", "graph_rows", "graph_edges"],
        by: P2P,
        defaults: &[],
    },
];

/// Its own parameters, in output-column order.
pub const PARAMS: &[ParamDef] = &[
    ParamDef {
        name: ARMS.name(),
        kind: Kind::Int { min: 1, max: 100_000 },
        defaults: &[(ALL, D::Int(5))],
        doc: "number of arms (M in Zhu et al.)",
        used_by: &["mab_heterogeneous"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: BUDGET_SPLIT.name(),
        kind: Kind::Choice(BudgetSplit::NAMES),
        defaults: &[(ALL, D::Word("exact"))],
        doc: "epsilon per dyadic block: epsilon / (floor(log2 T) + 1) (exactly epsilon-DP) or the paper's epsilon / log2 T",
        used_by: FED_UCB_GOSSIP,
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: DATA.name(),
        kind: Kind::Text,
        defaults: &[(ALL, D::Word("diabetic_data.csv"))],
        doc: "path of the UCI diabetic_data.csv (a relative path starts at the job file's folder)",
        used_by: &["uci_diabetes"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: CLIP.name(),
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "clip observations to [clip_lo, clip_hi] before the partial sums (false: as the paper, a nominal guarantee; acct_epsilon_pure is then null)",
        used_by: FED_UCB_GOSSIP,
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: CLIP_LO.name(),
        kind: Kind::Float {
            min: f64::NEG_INFINITY,
            max: f64::INFINITY,
            min_inclusive: false,
            max_inclusive: false,
        },
        defaults: &[(ALL, D::Float(0.0))],
        doc: "lower end of the privatizer's clipping range (Laplace sensitivity clip_hi - clip_lo)",
        used_by: FED_UCB_GOSSIP,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: CLIP_HI.name(),
        kind: Kind::Float {
            min: f64::NEG_INFINITY,
            max: f64::INFINITY,
            min_inclusive: false,
            max_inclusive: false,
        },
        defaults: &[(ALL, D::Float(1.0))],
        doc: "upper end of the clipping range (> clip_lo)",
        used_by: FED_UCB_GOSSIP,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: C_PRIV.name(),
        kind: Kind::Float {
            min: 0.0,
            max: f64::INFINITY,
            min_inclusive: true,
            max_inclusive: false,
        },
        defaults: &[(ALL, D::Float(4.0))],
        doc: "constant of the privacy term of the confidence width (Lemma 6: 4)",
        used_by: FED_UCB_GOSSIP,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
];
