//! The toy family's parameters ([`PARAMS`]) and its use of the shared
//! agent count ([`SHARES`]): declared here only.

use crate::algo::defaults::DefaultValue as D;
use crate::algo::params::{ALL, Kind, ParamDef, Share};

crate::param_keys! {
    TOY_ARMS: i64 = "toy_arms",
    EXPLORE: f64 = "explore",
}

/// Its members' uses of the shared parameters.
pub const SHARES: &[Share] = &[
    Share {
        params: &["m"],
        by: &["egreedy"],
        defaults: &[(&["egreedy"], D::Int(4))],
    },
];

/// Its own parameters, in output-column order.
pub const PARAMS: &[ParamDef] = &[
    ParamDef {
        name: TOY_ARMS.name(),
        kind: Kind::Int { min: 2, max: 10_000 },
        defaults: &[(ALL, D::Int(5))],
        doc: "arms K of toy_bernoulli",
        used_by: &["toy_bernoulli"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: EXPLORE.name(),
        kind: Kind::Float {
            min: 0.0,
            max: 1.0,
            min_inclusive: true,
            max_inclusive: true,
        },
        defaults: &[(ALL, D::Float(0.1))],
        doc: "probability that an egreedy agent plays a uniformly random arm",
        used_by: &["egreedy"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
];
