//! The linear family's parameters ([`PARAMS`], in output-column order after
//! the shared ones) and its uses of the shared parameters ([`SHARES`]):
//! the one place each is declared; the registry's union
//! ([`crate::algo::family::params`]) is what the resolver, `list`,
//! `validate` and the Parquet schema read.

use crate::algo::defaults::{self, DefaultValue as D};
use crate::algo::params::{ALL, Kind, POS, ParamDef, Share, UNIT_OPEN};

use super::{Calibration, Protocol, RewardOn, ScheduleName, SyncName};
use crate::algo::defaults::DefaultContext;
use crate::algo::params::Value;
use crate::named::Named;

crate::param_keys! {
    DIM: i64 = "d",
    ACTIONS: i64 = "k",
    REWARD_ON: RewardOn = "reward_on",
    LAMBDA: f64 = "lambda",
    ALPHA: f64 = "alpha",
    S_BOUND: f64 = "s_bound",
    L_BOUND: f64 = "l_bound",
    SUBGAUSSIAN: f64 = "subgaussian",
    PRIVATE: bool = "private",
    PROTOCOL: Protocol = "protocol",
    VECSUM_SCALE: f64 = "vecsum_scale",
    CLIP_REWARDS: bool = "clip_rewards",
    BATCH_SIZE: i64 = "batch_size",
    SYNC: SyncName = "sync",
    SCHEDULE: ScheduleName = "schedule",
    SCHEDULE_SHARE: f64 = "schedule_share",
    SCHEDULE_CAP: i64 = "schedule_cap",
    THRESHOLD: f64 = "threshold",
    GAMMA: i64 = "gamma",
    REFACTOR_EVERY: i64 = "refactor_every",
}

/// Every learning algorithm of the family (with a confidence set).
const LEARNERS: &[&str] = &[
    "linucb",
    "independent",
    "fedlinucb",
    "private_fedlinucb",
    "feducb_centralized",
    "feducb_decentralized",
];
const FEDUCB: &[&str] = &["feducb_centralized", "feducb_decentralized"];
/// Its private algorithms (with a privacy target).
const PRIVATE_ALGORITHMS: &[&str] = &["private_fedlinucb", "feducb_centralized", "feducb_decentralized"];
/// Its algorithm that communicates over a graph.
const P2P: &[&str] = &["feducb_decentralized"];

/// Its members' uses of the shared parameters.
pub const SHARES: &[Share] = &[
    Share {
        params: &["m"],
        by: &[ "independent", "random", "fedlinucb", "private_fedlinucb", "feducb_centralized", "feducb_decentralized", ],
        defaults: &[],
    },
    Share {
        params: &["noise_std"],
        by: &["linear_sphere"],
        defaults: &[(&["linear_sphere"], D::Float(0.5))],
    },
    Share {
        params: &["confidence_scale"],
        by: LEARNERS,
        defaults: &[],
    },
    Share {
        params: &["epsilon", "delta", "noise"],
        by: PRIVATE_ALGORITHMS,
        defaults: &[],
    },
    Share {
        params: &["sampler"],
        by: PRIVATE_ALGORITHMS,
        defaults: &[],
    },
    Share {
        params: &["neighbours"],
        by: PRIVATE_ALGORITHMS,
        defaults: &[(FEDUCB, D::Word("add_remove"))],
    },
    Share {
        params: &["calibration"],
        by: PRIVATE_ALGORITHMS,
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
        name: DIM.name(),
        kind: Kind::Int { min: 1, max: 1024 },
        defaults: &[(ALL, D::Int(10))],
        doc: "dimension d (linear_sphere: >= 2)",
        used_by: &["linear_gap", "linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: ACTIONS.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[
            (&["linear_gap"], D::Rule("min(d^2, 100)", k_of_gap)),
            (ALL, D::Int(100)),
        ],
        doc: "actions per round K",
        used_by: &["linear_gap", "linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: REWARD_ON.name(),
        kind: Kind::Choice(RewardOn::NAMES),
        defaults: &[(ALL, D::Word("normalized"))],
        doc: "mean reward on the observed x (well-specified) or on the raw z (authors' code: misspecified when k > d)",
        used_by: &["linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: LAMBDA.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "regularization (OFUL; FedUCB when not private)",
        used_by: &["linucb", "independent", "feducb_centralized", "feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: ALPHA.name(),
        kind: UNIT_OPEN,
        defaults: &[
            (&["fedlinucb", "private_fedlinucb"], D::Float(0.01)),
            (ALL, D::Float(0.1)),
        ],
        doc: "failure probability of the confidence set",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: S_BOUND.name(),
        kind: POS,
        defaults: &[
            (
                &["fedlinucb", "private_fedlinucb"],
                D::Rule("sqrt(d)", sqrt_d),
            ),
            (ALL, D::Float(1.0)),
        ],
        doc: "bound S on ||theta*||",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: L_BOUND.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "bound L on ||x||",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: SUBGAUSSIAN.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(0.5))],
        doc: "sub-Gaussian constant of the reward noise (R, sigma)",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: PRIVATE.name(),
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "FedUCB with the PRIVATIZER (needs epsilon, delta)",
        used_by: FEDUCB,
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: PROTOCOL.name(),
        kind: Kind::Choice(Protocol::NAMES),
        defaults: &[(ALL, D::Word("ldp"))],
        doc: "privacy protocol of private_fedlinucb: silo-level LDP, shuffle DP by amplification or by vector summation, the slides' P_alt, none",
        used_by: &["private_fedlinucb"],
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: VECSUM_SCALE.name(),
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "constant of the vector-summation protocol's Binomial count b (sdp_vecsum; calibration code or theorem: exact solves the count)",
        used_by: &["private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: CLIP_REWARDS.name(),
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "rewards enter every sum clipped to [-1, 1], the bound the privacy analyses assume (counted in \
              clipped_observations); false: as the authors' code, and on linear_sphere every privacy figure is null",
        used_by: &["private_fedlinucb", "feducb_centralized", "feducb_decentralized"],
        variant: true,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: BATCH_SIZE.name(),
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(25))],
        doc: "rounds per batch B (B <= T)",
        used_by: &["fedlinucb", "private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: SYNC.name(),
        kind: Kind::Choice(SyncName::NAMES),
        defaults: &[(ALL, D::Word("log"))],
        doc: "FedUCB sync regime",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: SCHEDULE.name(),
        kind: Kind::Choice(ScheduleName::NAMES),
        defaults: &[(
            ALL,
            D::Rule(
                "private under calibration: exact, else paper",
                schedule_of_calibration,
            ),
        )],
        doc: "a private FedUCB's schedule: its determinant test through the sparse vector technique (covered by \
              acct_epsilon) or the paper's (released as decided, covered by no figure); every_round: neither",
        used_by: FEDUCB,
        variant: true,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: SCHEDULE_SHARE.name(),
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "share of the target epsilon a private schedule spends (the sums get the rest)",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: SCHEDULE_CAP.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Rule("ceil(log2 T)", defaults::log2_horizon))],
        doc: "requests through a private schedule's test per agent, then syncs at rounds 2^k",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: THRESHOLD.name(),
        kind: POS,
        defaults: &[(ALL, D::Required("when sync = threshold"))],
        doc: "FedUCB sync threshold D",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: GAMMA.name(),
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(1))],
        doc: "hops a message travels before it is dropped (<= diameter)",
        used_by: &["feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: REFACTOR_EVERY.name(),
        kind: Kind::Int {
            min: 1,
            max: 1_000_000_000,
        },
        defaults: &[(ALL, D::Int(256))],
        doc: "Cholesky refactorization interval R (rank-1 updates)",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
];

/// `linear_gap`'s K: min(d^2, 100).
fn k_of_gap(cx: &DefaultContext<'_>) -> Value {
    Value::Int(cx.get(DIM).map_or(100, |d| d.saturating_mul(d).min(100)))
}

/// (Private-)FedLinUCB's S: sqrt(d) (Zhou & Chowdhury's code).
fn sqrt_d(cx: &DefaultContext<'_>) -> Value {
    Value::Float((cx.get(DIM).unwrap_or(1) as f64).sqrt())
}

/// A private FedUCB's schedule: `private` under `calibration: exact`,
/// else `paper`.
fn schedule_of_calibration(cx: &DefaultContext<'_>) -> Value {
    let schedule = match cx.get(crate::algo::params::CALIBRATION) {
        Some(Calibration::Exact) => ScheduleName::Private,
        Some(Calibration::Code | Calibration::Theorem | Calibration::Paper) | None => ScheduleName::Paper,
    };
    Value::Str(schedule.name().to_owned())
}
