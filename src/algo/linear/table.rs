//! The linear family's parameters ([`PARAMS`], in output-column order after
//! the shared ones) and its uses of the shared parameters ([`SHARES`]):
//! the one place each is declared; the registry's union
//! ([`crate::algo::family::params`]) is what the resolver, `list`,
//! `validate` and the Parquet schema read.

use crate::algo::defaults::{self, DefaultValue as D};
use crate::algo::params::{ALL, Kind, POS, ParamDef, Share, UNIT_OPEN};

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
const PRIVATE: &[&str] = &["private_fedlinucb", "feducb_centralized", "feducb_decentralized"];
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
        by: PRIVATE,
        defaults: &[],
    },
    Share {
        params: &["neighbours"],
        by: PRIVATE,
        defaults: &[(FEDUCB, D::Word("add_remove"))],
    },
    Share {
        params: &["calibration"],
        by: PRIVATE,
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
        name: "d",
        kind: Kind::Int { min: 1, max: 1024 },
        defaults: &[(ALL, D::Int(10))],
        doc: "dimension d (linear_sphere: >= 2)",
        used_by: &["linear_gap", "linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "k",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[
            (&["linear_gap"], D::Rule("min(d^2, 100)", defaults::k_of_gap)),
            (ALL, D::Int(100)),
        ],
        doc: "actions per round K",
        used_by: &["linear_gap", "linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "reward_on",
        kind: Kind::Choice(&["raw", "normalized"]),
        defaults: &[(ALL, D::Word("normalized"))],
        doc: "mean reward on the observed x (well-specified) or on the raw z (authors' code: misspecified when k > d)",
        used_by: &["linear_sphere"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "lambda",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "regularization (OFUL; FedUCB when not private)",
        used_by: &["linucb", "independent", "feducb_centralized", "feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "alpha",
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
        name: "s_bound",
        kind: POS,
        defaults: &[
            (
                &["fedlinucb", "private_fedlinucb"],
                D::Rule("sqrt(d)", defaults::sqrt_d),
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
        name: "l_bound",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "bound L on ||x||",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "subgaussian",
        kind: POS,
        defaults: &[(ALL, D::Float(0.5))],
        doc: "sub-Gaussian constant of the reward noise (R, sigma)",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "private",
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "FedUCB with the PRIVATIZER (needs epsilon, delta)",
        used_by: FEDUCB,
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "protocol",
        kind: Kind::Choice(&["ldp", "sdp_amp", "sdp_vecsum", "alt", "none"]),
        defaults: &[(ALL, D::Word("ldp"))],
        doc: "privacy protocol of private_fedlinucb: silo-level LDP, shuffle DP by amplification or by vector summation, the slides' P_alt, none",
        used_by: &["private_fedlinucb"],
        variant: true,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "vecsum_scale",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "constant of the vector-summation protocol's Binomial count b (sdp_vecsum; calibration code or theorem: exact solves the count)",
        used_by: &["private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "clip_rewards",
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
        name: "batch_size",
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(25))],
        doc: "rounds per batch B (B <= T)",
        used_by: &["fedlinucb", "private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "sync",
        kind: Kind::Choice(&["log", "sqrt_m", "every_round", "threshold"]),
        defaults: &[(ALL, D::Word("log"))],
        doc: "FedUCB sync regime",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "schedule",
        kind: Kind::Choice(&["private", "paper"]),
        defaults: &[(
            ALL,
            D::Rule(
                "private under calibration: exact, else paper",
                defaults::schedule_of_calibration,
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
        name: "schedule_share",
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "share of the target epsilon a private schedule spends (the sums get the rest)",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: "schedule_cap",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Rule("ceil(log2 T)", defaults::log2_horizon))],
        doc: "requests through a private schedule's test per agent, then syncs at rounds 2^k",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
        unkeyed: None,
    },
    ParamDef {
        name: "threshold",
        kind: POS,
        defaults: &[(ALL, D::Required("when sync = threshold"))],
        doc: "FedUCB sync threshold D",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "gamma",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(1))],
        doc: "hops a message travels before it is dropped (<= diameter)",
        used_by: &["feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
        unkeyed: None,
    },
    ParamDef {
        name: "refactor_every",
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
