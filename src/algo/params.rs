//! The parameter registry: every parameter a job can set, its type and
//! allowed range ([`Kind`]), defaults ([`super::defaults`]), the algorithms
//! or environments that use it and what it changes. The
//! registry drives validation, `fedbandits list`, and the output schema (each
//! parameter is one typed Parquet column, null where it does not apply).

use super::defaults::{self, DefaultValue as D};
pub use super::defaults::{DefaultContext, DefaultValue, Defaults};
pub use super::kind::Kind;
pub use super::value::Value;
pub use super::value_check::{FLOAT_FLOOR, FLOAT_LIMIT, ValueError, did_you_mean};

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
}

/// A default for every user.
const ALL: &[&str] = &[];

const POS: Kind = Kind::Float {
    min: 0.0,
    max: f64::INFINITY,
    min_inclusive: false,
    max_inclusive: false,
};
const UNIT_OPEN: Kind = Kind::Float {
    min: 0.0,
    max: 1.0,
    min_inclusive: false,
    max_inclusive: false,
};
const LEARNERS: &[&str] = &[
    "linucb",
    "independent",
    "fedlinucb",
    "private_fedlinucb",
    "feducb_centralized",
    "feducb_decentralized",
];
const FEDUCB: &[&str] = &["feducb_centralized", "feducb_decentralized"];
/// The algorithms that communicate over a graph.
const P2P: &[&str] = &["feducb_decentralized", "gossip_ucb", "fed_ucb_gossip"];
const FED_UCB_GOSSIP: &[&str] = &["fed_ucb_gossip"];
/// Every private algorithm (with a privacy target).
const PRIVATE: &[&str] = &[
    "private_fedlinucb",
    "feducb_centralized",
    "feducb_decentralized",
    "fed_ucb_gossip",
    "p_fcb",
];
const PROCUREMENT: &[&str] = &["procurement"];
/// Every algorithm with a confidence width.
const CONFIDENT: &[&str] = &[
    "linucb",
    "independent",
    "fedlinucb",
    "private_fedlinucb",
    "feducb_centralized",
    "feducb_decentralized",
    "gossip_ucb",
    "fed_ucb_gossip",
    "local_ucb",
    "oracle_ucb",
];

/// Every parameter, in output-column order.
pub const PARAMS: &[ParamDef] = &[
    ParamDef {
        name: "m",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(&["uci_diabetes"], D::Int(3)), (ALL, D::Int(10))],
        doc: "number of agents (M in the linear papers, N in Zhu et al.; linucb: always 1)",
        used_by: &[
            "independent",
            "random",
            "fedlinucb",
            "private_fedlinucb",
            "feducb_centralized",
            "feducb_decentralized",
            "gossip_ucb",
            "fed_ucb_gossip",
            "local_ucb",
            "oracle_ucb",
            "non_federated",
            "fcb",
            "p_fcb",
        ],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "arms",
        kind: Kind::Int { min: 1, max: 100_000 },
        defaults: &[(ALL, D::Int(5))],
        doc: "number of arms (M in Zhu et al.)",
        used_by: &["mab_heterogeneous"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "d",
        kind: Kind::Int { min: 1, max: 1024 },
        defaults: &[(ALL, D::Int(10))],
        doc: "dimension d (linear_sphere: >= 2)",
        used_by: &["linear_gap", "linear_sphere"],
        variant: false,
        common_random_numbers: false,
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
    },
    ParamDef {
        name: "noise_std",
        kind: Kind::Float {
            min: 0.0,
            max: f64::INFINITY,
            min_inclusive: true,
            max_inclusive: false,
        },
        defaults: &[(&["linear_sphere"], D::Float(0.5)), (ALL, D::Float(1.0))],
        doc: "standard deviation of Gaussian reward noise",
        used_by: &["linear_sphere", "mab_heterogeneous"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "reward_on",
        kind: Kind::Choice(&["raw", "normalized"]),
        defaults: &[(ALL, D::Word("normalized"))],
        doc: "mean reward on the observed x (well-specified) or on the raw z (authors' code: misspecified when k > d)",
        used_by: &["linear_sphere"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "lambda",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "regularization (OFUL; FedUCB when not private)",
        used_by: &["linucb", "independent", "feducb_centralized", "feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
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
    },
    ParamDef {
        name: "confidence_scale",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "multiplier of the confidence width beta (gossip family: c of sqrt(2 c log t / n))",
        used_by: CONFIDENT,
        variant: false,
        common_random_numbers: false,
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
    },
    ParamDef {
        name: "l_bound",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "bound L on ||x||",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "subgaussian",
        kind: POS,
        defaults: &[(ALL, D::Float(0.5))],
        doc: "sub-Gaussian constant of the reward noise (R, sigma)",
        used_by: LEARNERS,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "private",
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "FedUCB with the PRIVATIZER (needs epsilon, delta)",
        used_by: FEDUCB,
        variant: true,
        common_random_numbers: false,
    },
    ParamDef {
        name: "epsilon",
        kind: Kind::Float {
            min: 0.0,
            max: f64::INFINITY,
            min_inclusive: false,
            max_inclusive: true,
        },
        defaults: &[(ALL, D::Required("when private"))],
        doc: "privacy epsilon (fed_ucb_gossip: .inf for no privacy, i.e. gossip_ucb; p_fcb: .inf for P-FCB without noise, its schedule and acceptance window kept)",
        used_by: PRIVATE,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "delta",
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Required("when private"))],
        doc: "privacy delta",
        used_by: &[
            "private_fedlinucb",
            "feducb_centralized",
            "feducb_decentralized",
            "p_fcb",
        ],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "protocol",
        kind: Kind::Choice(&["ldp", "sdp_amp", "sdp_vecsum", "alt", "none"]),
        defaults: &[(ALL, D::Word("ldp"))],
        doc: "privacy protocol of private_fedlinucb: silo-level LDP, shuffle DP by amplification or by vector summation, the slides' P_alt, none",
        used_by: &["private_fedlinucb"],
        variant: true,
        common_random_numbers: false,
    },
    ParamDef {
        name: "vecsum_scale",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "constant of the vector-summation protocol's Binomial count b (sdp_vecsum; calibration code or theorem: exact solves the count)",
        used_by: &["private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "neighbours",
        kind: Kind::Choice(&["add_remove", "substitute"]),
        defaults: &[
            (&["feducb_centralized", "feducb_decentralized"], D::Word("add_remove")),
            (ALL, D::Word("substitute")),
        ],
        doc: "neighbouring histories of the accountant's figures: one observation added/removed, or replaced \
              (the relation Zhou & Chowdhury's slides define; Fed_UCB: one observation replaced within the \
              clipping range; P-FCB: one round's procurement of one (agent, producer) pair changed)",
        used_by: PRIVATE,
        variant: true,
        common_random_numbers: true,
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
    },
    ParamDef {
        name: "calibration",
        kind: Kind::Choice(&["exact", "code", "theorem", "paper"]),
        defaults: &[(ALL, D::Word("exact"))],
        doc: "noise calibration: exact (the noise solved from the target by the exact accountant: acct_epsilon in \
              [0.99, 1] x epsilon), or a paper's: private_fedlinucb code (authors' code) or theorem (the slides'), \
              FedUCB and P-FCB paper",
        used_by: &[
            "private_fedlinucb",
            "feducb_centralized",
            "feducb_decentralized",
            "p_fcb",
        ],
        variant: true,
        common_random_numbers: true,
    },
    ParamDef {
        name: "batch_size",
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(25))],
        doc: "rounds per batch B (B <= T)",
        used_by: &["fedlinucb", "private_fedlinucb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "sync",
        kind: Kind::Choice(&["log", "sqrt_m", "every_round", "threshold"]),
        defaults: &[(ALL, D::Word("log"))],
        doc: "FedUCB sync regime",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
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
    },
    ParamDef {
        name: "schedule_share",
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "share of the target epsilon a private schedule spends (the sums get the rest)",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
    },
    ParamDef {
        name: "schedule_cap",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Rule("ceil(log2 T)", defaults::log2_horizon))],
        doc: "requests through a private schedule's test per agent, then syncs at rounds 2^k",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: true,
    },
    ParamDef {
        name: "threshold",
        kind: POS,
        defaults: &[(ALL, D::Required("when sync = threshold"))],
        doc: "FedUCB sync threshold D",
        used_by: FEDUCB,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "graph",
        kind: Kind::Choice(&[
            "complete",
            "ring",
            "line",
            "star",
            "grid",
            "erdos_renyi",
            "random_regular",
            "edges",
        ]),
        defaults: &[(ALL, D::Word("complete"))],
        doc: "communication graph of the agents (gossip family: one graph per repetition when random)",
        used_by: P2P,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "graph_p",
        kind: Kind::Float {
            min: 0.0,
            max: 1.0,
            min_inclusive: false,
            max_inclusive: true,
        },
        defaults: &[(ALL, D::Required("for erdos_renyi"))],
        doc: "edge probability of erdos_renyi (redrawn until connected)",
        used_by: P2P,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "graph_degree",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Required("for random_regular"))],
        doc: "degree of random_regular",
        used_by: P2P,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "graph_rows",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Required("for grid"))],
        doc: "rows of grid (must divide m)",
        used_by: P2P,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "graph_edges",
        kind: Kind::Text,
        defaults: &[(ALL, D::Required("for edges"))],
        doc: "edge-list file (one `u v` pair of 0-based agents per line), a relative path starts at the job file's folder",
        used_by: P2P,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "gamma",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(1))],
        doc: "hops a message travels before it is dropped (<= diameter)",
        used_by: &["feducb_decentralized"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "budget_split",
        kind: Kind::Choice(&["exact", "paper"]),
        defaults: &[(ALL, D::Word("exact"))],
        doc: "epsilon per dyadic block: epsilon / (floor(log2 T) + 1) (exactly epsilon-DP) or the paper's epsilon / log2 T",
        used_by: FED_UCB_GOSSIP,
        variant: true,
        common_random_numbers: false,
    },
    ParamDef {
        name: "data",
        kind: Kind::Text,
        defaults: &[(ALL, D::Word("diabetic_data.csv"))],
        doc: "path of the UCI diabetic_data.csv (a relative path starts at the job file's folder)",
        used_by: &["uci_diabetes"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "clip",
        kind: Kind::Bool,
        defaults: &[(ALL, D::Bool(true))],
        doc: "clip observations to [clip_lo, clip_hi] before the partial sums (false: as the paper, a nominal guarantee; acct_epsilon_pure is then null)",
        used_by: FED_UCB_GOSSIP,
        variant: true,
        common_random_numbers: false,
    },
    ParamDef {
        name: "clip_lo",
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
    },
    ParamDef {
        name: "clip_hi",
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
    },
    ParamDef {
        name: "c_priv",
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
    },
    ParamDef {
        name: "producers",
        kind: Kind::Int { min: 1, max: 100_000 },
        defaults: &[(ALL, D::Int(30))],
        doc: "producers m (Solanki et al.)",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "instance_kind",
        kind: Kind::Choice(&["uniform", "normal"]),
        defaults: &[(ALL, D::Word("uniform"))],
        doc: "qualities and costs U[0,1] or N(quality_threshold, 0.1) clipped to [0,1]",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "quality_threshold",
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.4))],
        doc: "alpha of the quality constraint sum l q >= alpha sum l",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "rho",
        kind: POS,
        defaults: &[(ALL, D::Float(1.0))],
        doc: "revenue per unit of quality (r = rho q - c)",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "max_capacity",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(50))],
        doc: "capacities k ~ U{1..max_capacity}",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "instances",
        kind: Kind::Int { min: 1, max: 1_000_000 },
        defaults: &[(ALL, D::Int(5))],
        doc: "distinct instances; repetition r uses instance r mod instances",
        used_by: PROCUREMENT,
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "zeta",
        kind: UNIT_OPEN,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "exploration length ceil(3 ln(n T) / (2 n zeta^2))",
        used_by: &["non_federated", "fcb", "p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "oracle",
        kind: Kind::Choice(&["greedy", "exact"]),
        defaults: &[(ALL, D::Word("greedy"))],
        doc: "the agents' oracle and the regret benchmark: greedy (GSS, the paper's) or exact \
              (exhaustive; at most 100000 choices, (max_capacity+1)^producers)",
        used_by: &["non_federated", "fcb", "p_fcb"],
        variant: false,
        common_random_numbers: true,
    },
    ParamDef {
        name: "t_low",
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(200))],
        doc: "first round P-FCB may communicate",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "t_high",
        kind: Kind::Int { min: 1, max: i64::MAX },
        defaults: &[(ALL, D::Int(40_000))],
        doc: "last round P-FCB may communicate",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "omega1",
        kind: POS,
        defaults: &[(ALL, D::Float(0.1))],
        doc: "P-FCB acceptance window scale",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "omega2",
        kind: POS,
        defaults: &[(ALL, D::Float(10.0))],
        doc: "P-FCB weight of accepted messages (the paper's text: [0, 1]; its experiments: 10)",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "tau_start",
        kind: Kind::Choice(&["one", "t_low"]),
        defaults: &[(ALL, D::Word("one"))],
        doc: "P-FCB's tau starts at 1 (the paper) or t_low, doubling after each communication",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
    },
    ParamDef {
        name: "budget",
        kind: Kind::Choice(&["paper", "normalized"]),
        defaults: &[(ALL, D::Word("paper"))],
        doc: "epsilon_z = eps/(2 ln T) + eps/2^(z+1) (the paper; sums above eps) or scaled to sum to eps",
        used_by: &["p_fcb"],
        variant: true,
        common_random_numbers: false,
    },
    ParamDef {
        name: "window",
        kind: Kind::Choice(&["procedure", "prose"]),
        defaults: &[(ALL, D::Word("procedure"))],
        doc: "acceptance window: Procedure 1 (total units, ln(n t)) or the prose (own units, ln t)",
        used_by: &["p_fcb"],
        variant: false,
        common_random_numbers: false,
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
    },
];

impl ParamDef {
    /// Its default for a cell of `algo` on `env` (None: it has none there).
    pub fn default_for(&self, algo: &str, env: &str) -> Option<&'static DefaultValue> {
        defaults::default_for(self.defaults, algo, env)
    }

    /// Its defaults in words, as `fedbandits list` prints them.
    pub fn default_text(&self) -> String {
        defaults::describe(self.defaults)
    }
}

/// Looks a parameter up by name.
pub fn param(name: &str) -> Option<&'static ParamDef> {
    PARAMS.iter().find(|p| p.name == name)
}
