//! The combinatorial family's parameters ([`PARAMS`], in output-column order after
//! the shared ones) and its uses of the shared parameters ([`SHARES`]):
//! the one place each is declared; the registry's union
//! ([`crate::algo::family::params`]) is what the resolver, `list`,
//! `validate` and the Parquet schema read.

use crate::algo::defaults::DefaultValue as D;
use crate::algo::params::{ALL, Kind, POS, ParamDef, Share, UNIT_OPEN};

use super::p_fcb::{Budget, TauStart, Window};
use crate::env::procurement::{InstanceKind, Oracle};
use crate::named::Named;

crate::param_keys! {
    PRODUCERS: i64 = "producers",
    INSTANCE_KIND: InstanceKind = "instance_kind",
    QUALITY_THRESHOLD: f64 = "quality_threshold",
    RHO: f64 = "rho",
    MAX_CAPACITY: i64 = "max_capacity",
    INSTANCES: i64 = "instances",
    ZETA: f64 = "zeta",
    ORACLE: Oracle = "oracle",
    T_LOW: i64 = "t_low",
    T_HIGH: i64 = "t_high",
    OMEGA1: f64 = "omega1",
    OMEGA2: f64 = "omega2",
    TAU_START: TauStart = "tau_start",
    BUDGET: Budget = "budget",
    WINDOW: Window = "window",
}

/// Its environment.
const PROCUREMENT: &[&str] = &["procurement"];

/// Its members' uses of the shared parameters.
pub const SHARES: &[Share] = &[
    Share {
        params: &["m"],
        by: &["non_federated", "fcb", "p_fcb"],
        defaults: &[],
    },
    Share {
        params: &["epsilon", "delta", "neighbours", "calibration", "noise", "sampler"],
        by: &["p_fcb"],
        defaults: &[],
    },
];

/// Its own parameters, in output-column order.
pub const PARAMS: &[ParamDef] = &[
    ParamDef {
        name: PRODUCERS.name(),
        kind: Kind::Int { min: 1, max: 100_000 },
        defaults: &[(ALL, D::Int(30))],
        doc: "producers m (Solanki et al.)",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: INSTANCE_KIND.name(),
        kind: Kind::Choice(InstanceKind::NAMES),
        defaults: &[(ALL, D::Word("uniform"))],
        doc: "qualities and costs U[0,1] or N(quality_threshold, 0.1) clipped to [0,1]",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: QUALITY_THRESHOLD.name(),
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.4))],
        doc: "alpha of the quality constraint sum l q >= alpha sum l",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: RHO.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "revenue per unit of quality (r = rho q - c)",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: MAX_CAPACITY.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(50))],
        doc: "capacities k ~ U{1..max_capacity}",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: INSTANCES.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(5))],
        doc: "distinct instances; repetition r uses instance r mod instances",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: ZETA.name(),
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "exploration length ceil(3 ln(n T) / (2 n zeta^2))",
        used_by: &["non_federated", "fcb", "p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: ORACLE.name(),
        kind: Kind::Choice(Oracle::NAMES),
        defaults: &[(ALL, D::Word("greedy"))],
        doc: "the agents' oracle and the regret benchmark: greedy (GSS, the paper's) or exact \
              (exhaustive; at most 100000 choices, (max_capacity+1)^producers)",
        used_by: &["non_federated", "fcb", "p_fcb"],
        variant: false,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: T_LOW.name(),
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(200))],
        doc: "first round P-FCB may communicate",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: T_HIGH.name(),
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(40_000))],
        doc: "last round P-FCB may communicate",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: OMEGA1.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "P-FCB acceptance window scale",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: OMEGA2.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(10.0))],
        doc: "P-FCB weight of accepted messages (the paper's text: [0, 1]; its experiments: 10)",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: TAU_START.name(),
        kind: Kind::Choice(TauStart::NAMES),
        defaults: &[(ALL, D::Word("one"))],
        doc: "P-FCB's tau starts at 1 (the paper) or t_low, doubling after each communication",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: BUDGET.name(),
        kind: Kind::Choice(Budget::NAMES),
        defaults: &[(ALL, D::Word("paper"))],
        doc: "epsilon_z = eps/(2 ln T) + eps/2^(z+1) (the paper; sums above eps) or scaled to sum to eps",
        used_by: &["p_fcb"],
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: WINDOW.name(),
        kind: Kind::Choice(Window::NAMES),
        defaults: &[(ALL, D::Word("procedure"))],
        doc: "acceptance window: Procedure 1 (total units, ln(n t)) or the prose (own units, ln t)",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
];
