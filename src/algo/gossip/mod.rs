//! The decentralized multi-armed family (Zhu et al.):
//! `gossip_ucb`, its epsilon-DP form `fed_ucb_gossip`, and the baselines
//! `local_ucb` and `oracle_ucb`.
//!
//! Each algorithm is a description of its batch ([`gossip_batch`]: the
//! policy, the confidence constant and, for `fed_ucb_gossip`, the
//! privatizer of [`fed_ucb_gossip`]); the round loop ([`run`]) is written
//! once and drives a backend's [`crate::algo::rounds::RoundOps`]. Choices where the spec leaves
//! room, for a researcher reproducing the paper:
//! * The M initial pulls are rounds 1..M of the horizon and count in regret;
//!   gossip (one uniformly random edge per round) starts at round M + 1.
//! * C_{i,k}(t) = sqrt(2 c log t / n_{i,k}) (UCB1 form; the paper's Lemma 4
//!   constant was lost in the seed), c = `confidence_scale`, default 1.
//! * n~_{i,k} <- max(n_{i,k}, max over neighbours j of n~_{j,k}) from the
//!   neighbours' previous-round values (the agent's own previous n~ is not
//!   in the max, as written in the spec).
//! * `oracle_ucb`'s bonus uses the pooled count sum_j n_{j,k}.
//! * Before an arm's first pull its mean estimate is 0 (only during the
//!   initial pulls).

pub mod audit;
pub mod batch;
pub mod cpu;
pub mod cuda;
pub mod fed_ucb_gossip;
pub mod params;
pub mod table;

use crate::algo::family_entry::CostTerm;
use crate::backend::BatchError;
use crate::env::mab::{MabEnv, MabEnvSpec};
use crate::graph::{Graph, GraphSpec};
use crate::rng::{Purpose, Stream};
use batch::{GossipBatch, GossipObservation, GossipPolicy};

/// Algorithms of the decentralized multi-armed family.
pub const ALGORITHMS: &[(&str, &str)] = &[
    (
        "gossip_ucb",
        "Gossip_UCB: local UCB with gossip-averaged estimates, one random edge per round (Zhu et al.)",
    ),
    (
        "fed_ucb_gossip",
        "Fed_UCB: Gossip_UCB with epsilon-DP binary partial sums, Laplace noise (Zhu et al.)",
    ),
    (
        "local_ucb",
        "UCB1 on each agent's own biased observations, no communication",
    ),
    (
        "oracle_ucb",
        "full communication without delay: pooled means and counts",
    ),
];

/// Environments of the decentralized multi-armed family.
pub const ENVIRONMENTS: &[(&str, &str)] = &[
    (
        "mab_heterogeneous",
        "Zhu et al.'s synthetic: mu_{i,k} ~ U[0,1] per federation, observations mu_{i,k} + N(0, noise_std^2)",
    ),
    (
        "uci_diabetes",
        "Zhu et al.'s real data: the UCI diabetes records (user-supplied CSV, `data`), hospitals = consecutive parts, 5 drug-class arms, reward 1 for readmission >30",
    ),
];

crate::named_enum! {
    /// Gossip-family algorithms.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum GossipAlgorithm {
        /// Zhu et al.'s Gossip_UCB.
        GossipUcb = "gossip_ucb",
        /// Zhu et al.'s Fed_UCB: Gossip_UCB with every agent's per-arm stream
        /// privatized by the binary partial-sum mechanism.
        FedUcbGossip = "fed_ucb_gossip",
        /// UCB1 on own (biased) observations, no communication.
        LocalUcb = "local_ucb",
        /// Full communication without delay.
        OracleUcb = "oracle_ucb",
    }
}

crate::named_enum! {
    /// The family's environments, as its registry ([`ENVIRONMENTS`]) names them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum GossipEnvironment {
        /// Zhu et al.'s synthetic.
        MabHeterogeneous = "mab_heterogeneous",
        /// Zhu et al.'s real data (UCI diabetes).
        UciDiabetes = "uci_diabetes",
    }
}

/// A cell's resolved configuration for the gossip family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GossipConfig {
    /// Algorithm.
    pub algorithm: GossipAlgorithm,
    /// Environment (N agents, M arms, noise).
    pub env: MabEnvSpec,
    /// Rounds T.
    pub horizon: u64,
    /// Communication graph.
    pub graph: GraphSpec,
    /// c of the confidence width.
    pub confidence_scale: f64,
    /// The privatizer's settings (`fed_ucb_gossip`; epsilon = infinity
    /// gives back `gossip_ucb`).
    pub privacy: fed_ucb_gossip::PrivacyConfig,
}

/// The key of a federation's random-edge stream (from the algorithm key,
/// so that each algorithm draws its own edges but repetitions compare).
pub fn edge_key(algo_key: &[u64]) -> Vec<u64> {
    let mut k = algo_key.to_vec();
    k.push(Purpose::Graph as u64);
    k.push(1);
    k
}

/// The configuration as a batch of federations: `env_keys` and `algo_keys`
/// are the federations' keys (one pair per repetition). One graph per
/// federation, drawn from its algorithm key (random graphs differ per
/// repetition); a graph that cannot be built is an error naming why.
pub fn gossip_batch(
    cfg: &GossipConfig,
    env_keys: &[Vec<u64>],
    algo_keys: &[Vec<u64>],
) -> Result<GossipBatch, crate::graph::GraphError> {
    let mut graphs = Vec::with_capacity(algo_keys.len());
    for k in algo_keys {
        let mut key = k.clone();
        key.push(Purpose::Graph as u64);
        graphs.push(Graph::build(&cfg.graph, cfg.env.agents, &mut Stream::new(&key))?);
    }
    let policy = match cfg.algorithm {
        GossipAlgorithm::GossipUcb | GossipAlgorithm::FedUcbGossip => GossipPolicy::Gossip,
        GossipAlgorithm::LocalUcb => GossipPolicy::Local,
        GossipAlgorithm::OracleUcb => GossipPolicy::Oracle,
    };
    let privacy = match cfg.algorithm {
        GossipAlgorithm::FedUcbGossip => {
            fed_ucb_gossip::privatizer(&cfg.privacy, cfg.horizon, cfg.env.agents, algo_keys)
        }
        _ => None,
    };
    Ok(GossipBatch {
        envs: env_keys.iter().map(|k| MabEnv::new(&cfg.env, k)).collect(),
        graphs,
        edge_keys: algo_keys.iter().map(|k| edge_key(k)).collect(),
        policy,
        confidence_scale: cfg.confidence_scale,
        privacy,
    })
}

/// One federation's curve at one checkpoint.
pub type GossipPoint = crate::algo::rounds::Checkpoint<GossipObservation>;


/// A checkpoint as an output curve point. Communication counters:
/// `gossip_ucb`/`fed_ucb_gossip` exchange over one edge per round after the
/// initial pulls (`sync_rounds` = those rounds, `messages` = 2 per round);
/// `oracle_ucb` shares everything every round (N (N - 1) messages);
/// `local_ucb` never communicates. Metrics: consensus error, forced pulls,
/// clipped observations and, for the gossiping algorithms, the graph's
/// lambda_2.
pub fn curve_point(p: &GossipPoint, b: &GossipBatch, lambda2: f64) -> crate::algo::curve::CurvePoint {
    use crate::algo::curve::{CurvePoint, Metric};
    use crate::algo::gossip::batch::GossipPolicy;
    let (n, m) = b
        .envs
        .first()
        .map_or((1, 0), |e| (e.spec.agents as u64, e.spec.arms as u64));
    let (sync_rounds, messages) = match b.policy {
        GossipPolicy::Gossip => {
            let r = p.t.saturating_sub(m);
            (r, 2 * r)
        }
        GossipPolicy::Oracle => (p.t, p.t * n * n.saturating_sub(1)),
        GossipPolicy::Local => (0, 0),
    };
    let mut c = CurvePoint::new(
        p.t,
        p.obs.group_regret,
        n,
        p.obs.agent_regret_max,
        sync_rounds,
        messages,
    );
    c.set("consensus_error", Metric::F64(p.obs.consensus_error));
    c.set("estimate_error", Metric::F64(p.obs.estimate_error));
    c.set("forced_pulls", Metric::U64(p.obs.forced_pulls));
    c.set("clipped_observations", Metric::U64(p.obs.clipped));
    if b.policy == GossipPolicy::Gossip {
        c.set("gossip_lambda2", Metric::F64(lambda2));
    }
    c
}

/// The family's time model: every agent-step scores its arms; `local_ucb`
/// keeps its own statistics (`oracle_ucb` reads pooled ones); the
/// gossiping algorithms exchange with their neighbours and merge each
/// neighbour's estimate of every arm; `fed_ucb_gossip` privatizes its
/// partial sums of every arm. Built-in seconds: [`SHAPES`] timed on one
/// thread of the 2-core development VM (`fedbandits calibrate --shapes
/// --seconds 0.5`), the fit rounded: measured 0.93x to 1.24x of the model.
/// A flat cost per algorithm (the model before these terms) read 0.7x to
/// 4.4x on the same shapes: `fed_ucb_gossip` with 20 arms on a complete
/// graph of 40 agents is 4.4x its 5-arm ring's cost per agent-step.
pub const COST_TERMS: &[CostTerm] = &[
    CostTerm::new("step", "an agent-step", 2.0e-9),
    CostTerm::new("arms", "an arm of an agent-step (its UCB index)", 2.7e-9),
    CostTerm::new(
        "local_step",
        "an agent-step of local_ucb (its own statistics, where oracle_ucb reads pooled ones)",
        1.5e-8,
    ),
    CostTerm::new(
        "neighbour_arms",
        "an arm x a neighbour of a gossiping agent-step (mean degree)",
        7.5e-10,
    ),
    CostTerm::new(
        "gossip_step",
        "an agent-step of gossip_ucb or fed_ucb_gossip (its exchange)",
        2.3e-8,
    ),
    CostTerm::new(
        "private_step",
        "an agent-step of fed_ucb_gossip (its privatizer)",
        8.9e-8,
    ),
    CostTerm::new(
        "private_arms",
        "an arm of an agent-step of fed_ucb_gossip (its partial sums)",
        4.0e-8,
    ),
];

/// The jobs `fedbandits calibrate --shapes` times to fit [`COST_TERMS`]:
/// each algorithm; 5 to 20 arms, 10 to 80 agents, ring and complete
/// graphs (mean degree 2 to 39).
pub const SHAPES: &[(&str, &str, u64)] = &[
    (
        "fed_ucb_gossip_n10_m5_ring",
        "algorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 5, epsilon: 1, graph: ring}\n",
        5_000,
    ),
    (
        "fed_ucb_gossip_n10_m20_ring",
        "algorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 20, epsilon: 1, graph: ring}\n",
        2_000,
    ),
    (
        "fed_ucb_gossip_n40_m5_complete",
        "algorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 40, arms: 5, epsilon: 1, graph: complete}\n",
        1_000,
    ),
    (
        "fed_ucb_gossip_n40_m20_complete",
        "algorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 40, arms: 20, epsilon: 1, graph: complete}\n",
        1_000,
    ),
    (
        "gossip_ucb_n10_m5_ring",
        "algorithm: gossip_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 5, graph: ring}\n",
        20_000,
    ),
    (
        "gossip_ucb_n10_m20_ring",
        "algorithm: gossip_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 20, graph: ring}\n",
        10_000,
    ),
    (
        "gossip_ucb_n40_m5_complete",
        "algorithm: gossip_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 40, arms: 5, graph: complete}\n",
        5_000,
    ),
    (
        "gossip_ucb_n80_m5_ring",
        "algorithm: gossip_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 80, arms: 5, graph: ring}\n",
        5_000,
    ),
    (
        "local_ucb_n10_m5",
        "algorithm: local_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 5}\n",
        20_000,
    ),
    (
        "local_ucb_n10_m50",
        "algorithm: local_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 50}\n",
        5_000,
    ),
    (
        "oracle_ucb_n20_m10",
        "algorithm: oracle_ucb\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 20, arms: 10}\n",
        10_000,
    ),
];

/// The cell's units of [`COST_TERMS`] per agent-step: every algorithm
/// scores its arms; the gossiping ones merge each neighbour's estimates of
/// every arm; `fed_ucb_gossip` privatizes its partial sums of every arm.
pub fn cost(c: &GossipConfig) -> crate::algo::Cost {
    let arms = c.env.arms as f64;
    let degree = c.graph.mean_degree(c.env.agents);
    let (local, gossip, private) = match c.algorithm {
        GossipAlgorithm::FedUcbGossip => (0.0, 1.0, 1.0),
        GossipAlgorithm::GossipUcb => (0.0, 1.0, 0.0),
        GossipAlgorithm::LocalUcb => (1.0, 0.0, 0.0),
        GossipAlgorithm::OracleUcb => (0.0, 0.0, 0.0),
    };
    crate::algo::Cost::of(
        "gossip",
        &[
            1.0,
            arms,
            local,
            gossip * arms * degree,
            gossip,
            private,
            private * arms,
        ],
    )
}

/// Approximate peak memory of one running federation, in bytes: per agent
/// and arm counts, estimates, sums, partial sums (about 12 words); the
/// graph's hop-distance matrix and lists.
pub fn memory_per_federation(c: &GossipConfig) -> u64 {
    let (n, m) = (c.env.agents as u64, c.env.arms as u64);
    n * m * 12 * 8 + n * n * 4 + n * (m + 64) * 8
}

/// The family's `fedbandits bench` workload: (name, default federations,
/// job YAML with `{T}` for the rounds).
pub const WORKLOADS: &[(&str, u32, &str)] = &[(
    "gossip_n10_m5",
    1024,
    "algorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\nhorizon: {T}\nparams: {m: 10, arms: 5, epsilon: 1, graph: ring}\n",
)];

/// A short job covering every algorithm of the family, for the parity
/// check of a batched backend with the CPU (`fedbandits calibrate`).
pub const PARITY: &[(&str, &str)] = &[(
    "gossip",
    "seed: 7\nrepetitions: 3\nhorizon: 150\ncheckpoints: {every: 30}\nalgorithm: [gossip_ucb, fed_ucb_gossip, \
         local_ucb, oracle_ucb]\nenvironment: mab_heterogeneous\nparams: {m: 4, arms: 3, epsilon: 1, graph: ring}\n\
         grid: {noise: [true, false], sampler: [float, discrete]}\n",
)];

/// The decentralized multi-armed family (Zhu et al.) in the registry
/// ([`crate::algo::family::FAMILIES`]).
pub const FAMILY: crate::algo::family_entry::Family = crate::algo::family_entry::Family {
    baseline: Some("local_ucb"),
    paper_claims: &[(
        "fed_ucb_gossip",
        "the target epsilon with clipping (the paper assumes bounded observations), null without",
    )],
    workloads: WORKLOADS,
    parity: PARITY,
    columns: &[
        "consensus_error",
        "estimate_error",
        "forced_pulls",
        "clipped_observations",
        "gossip_lambda2",
        "acct_epsilon_pure",
    ],
    non_private: &[("fed_ucb_gossip", "gossip_ucb")],
    parts: &[
        ("fed_ucb_gossip", "c_priv", "0", "the privacy term of the width (c_priv)"),
        ("fed_ucb_gossip", "clip", "false", "clipping"),
    ],
    metrics: &[
        (
            "consensus_error",
            "how far the agents disagree: max over arms and agents of |estimate_{i,k} - the agents' mean estimate \
             of arm k|, the estimate an agent plays on (gossip: theta, local: its own mean; 0 for the oracle, which \
             plays on the pooled mean); at the checkpoint",
        ),
        (
            "estimate_error",
            "how far the agents' estimates are from the target: max over agents and arms of |estimate_{i,k} - \
             mu_k|, mu_k the agents' average mean; includes the bias the privatizer's clipping adds; at the \
             checkpoint",
        ),
        (
            "forced_pulls",
            "pulls Gossip_UCB and Fed_UCB forced on a lagging arm (its count more than m behind the network's); \
             cumulative count per repetition, all agents; the report shows it as a share of the m x T pulls",
        ),
        (
            "clipped_observations",
            "observations Fed_UCB's privatizer clipped to [clip_lo, clip_hi]; cumulative count per repetition, all \
             agents; the report shows it as a share of the m x T observations",
        ),
        (
            "gossip_lambda2",
            "lambda_2 of the repetition's expected gossip matrix (the graph's mixing: closer to 1, slower); the \
             same at every checkpoint; null for local_ucb and oracle_ucb, which use no graph",
        ),
    ],
    widths: &[
        ("gossip_ucb", &["confidence_scale"]),
        ("fed_ucb_gossip", &["c_priv", "epsilon", "confidence_scale"]),
        ("local_ucb", &["confidence_scale"]),
        ("oracle_ucb", &["confidence_scale"]),
    ],
    kernels: cuda::KERNELS,
    cost_terms: COST_TERMS,
    shapes: SHAPES,
    ..crate::algo::family_entry::Family::new(
        ("gossip", "decentralized multi-armed bandits: N agents on a graph, M arms, locally biased means (Zhu et al.; definitions in src/algo/gossip/)"),
        ALGORITHMS,
        ENVIRONMENTS,
        (table::PARAMS, table::SHARES),
        params::resolve,
    )
};


impl crate::algo::FamilyConfig for GossipConfig {
    fn auditor(&self) -> Option<&dyn crate::algo::audit::Audit> {
        Some(self)
    }

    fn batch(
        &self,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Box<dyn crate::algo::FamilyBatch>, crate::graph::GraphError> {
        Ok(Box::new(gossip_batch(self, &env_keys, algo_keys)?))
    }

    fn agents(&self) -> usize {
        self.env.agents
    }

    fn inputs(&self) -> Option<String> {
        let edges = match &self.graph {
            GraphSpec::Edges(e) => format!("edges={e:?}"),
            _ => String::new(),
        };
        let records = self
            .env
            .records
            .as_ref()
            .map_or(String::new(), |r| format!("records={r:?}"));
        (!edges.is_empty() || !records.is_empty()).then(|| format!("{edges}|{records}"))
    }

    fn horizon(&self) -> u64 {
        self.horizon
    }

    fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        (self.algorithm == GossipAlgorithm::FedUcbGossip)
            .then(|| fed_ucb_gossip::accounting(&self.privacy, self.horizon))
            .flatten()
    }

    fn target(&self) -> (Option<f64>, Option<f64>) {
        let private = self.algorithm == GossipAlgorithm::FedUcbGossip && self.privacy.epsilon.is_finite();
        (private.then_some(self.privacy.epsilon), None)
    }

    fn cost(&self) -> crate::algo::Cost {
        cost(self)
    }

    fn memory_per_federation(&self) -> u64 {
        memory_per_federation(self)
    }
}

impl crate::algo::rounds::RoundsFamily for GossipBatch {
    type Obs = GossipObservation;
    type Cpu = cpu::CpuGossip;
    const KIND: &'static str = "gossip";

    fn federations(&self) -> usize {
        GossipBatch::federations(self)
    }

    fn agents(&self) -> usize {
        self.envs.first().map_or(0, |e| e.spec.agents)
    }

    fn cuda_ops<'a>(
        &self,
        launcher: crate::backend::cuda::LauncherGuard<'a>,
    ) -> Result<Box<dyn crate::algo::rounds::RoundOps<Obs = GossipObservation> + 'a>, BatchError> {
        Ok(Box::new(cuda::CudaGossip::new(launcher, self)?))
    }

    fn cpu(&self) -> Result<cpu::CpuGossip, BatchError> {
        cpu::CpuGossip::new(self)
    }



    fn cuda_supports(&self) -> Result<(), crate::backend::Unsupported> {
        cuda::supports(self).map_err(|e| crate::backend::Unsupported(e.to_string()))
    }

    /// Every point of a federation carries its graph's lambda_2.
    fn curve(&self, federation: usize, points: &[GossipPoint]) -> Vec<crate::algo::curve::CurvePoint> {
        let lambda2 = self
            .graphs
            .get(federation)
            .map_or(f64::NAN, crate::graph::Graph::gossip_lambda2);
        points.iter().map(|p| curve_point(p, self, lambda2)).collect()
    }
}

/// A repetition in flight on the CPU.
pub type Rep = crate::algo::rounds::RoundsRep<GossipBatch>;
